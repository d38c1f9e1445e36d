"""memlint/rules/_index.py lists every built-in rule without importing its module (issue 29: a
one-file check imports only the rule modules whose rules can fire); it is current, and a registry
made from it answers as one that imported every module."""
import os

import pytest
from helpers import estimate, scenario, stage

from memlint import engine
from memlint.diagnostics import Severity
from memlint.ir import Provenance, Setting
from memlint.rules import BUILTIN_MODULES, Entry, Registry, RegistryError, registry
from memlint.rules.base import REQUIRES, Finding, Rule, meets
from memlint.rules.index import PATH, loaded, render


def test_index_is_current():
    with open(PATH, encoding="utf-8") as handle:
        assert handle.read() == render(), "regenerate: python -m memlint.rules.index"


def fresh() -> Registry:
    from memlint.rules._index import ENTRIES

    return Registry.indexed(ENTRIES)


def test_an_indexed_registry_answers_as_the_imported_one():
    eager, lazy = loaded(), fresh()
    assert lazy.codes() == list(eager.rules) and lazy.names() == list(eager.by_name)
    assert len(lazy) == len(eager)
    for rule in eager.rules.values():
        entry = lazy.entry(rule.code)
        assert (entry.code, entry.name, entry.preview, entry.formats, entry.requires) == (
            rule.code, rule.name, rule.preview, tuple(rule.formats), rule.requires)
    assert [r.code for r in lazy.entries()] == [r.code for r in eager]
    # asking for the rules themselves imports their modules, in the same order
    assert [type(r) for r in lazy.rules.values()] == [type(r) for r in eager.rules.values()]
    assert list(lazy.by_name) == list(eager.by_name)
    assert not any(isinstance(r, Entry) for r in lazy) and lazy.diagnostics == []


def test_get_imports_only_the_rules_module():
    reg = fresh()
    rule = reg.get("sequence-parallel-off")
    assert rule.code == "ML603" and type(rule).__module__ == "memlint.rules.strategy"
    assert isinstance(reg.entry("ML101"), Entry) and not isinstance(reg.entry("ML601"), Entry)
    assert reg.get("ML999") is None and reg.get("no-such-rule") is None


def test_a_plugin_clashing_with_an_unimported_builtin_is_refused():
    class Clash(Rule):
        __doc__ = type(registry().get("ML101")).__doc__
        code, name = "ML101", "my-own-rule"

        def check(self, ctx):
            return ()

    class Named(Clash):
        __doc__ = Clash.__doc__
        code, name = "ML950", "exceeds-gpu-memory"

    reg = fresh()
    with pytest.raises(RegistryError, match=r"duplicate rule code ML101 \(my-own-rule and "
                                            r"exceeds-gpu-memory\)"):
        reg.add(Clash())
    with pytest.raises(RegistryError, match=r"duplicate rule name 'exceeds-gpu-memory' \(ML950 "
                                            r"and ML101\)"):
        reg.add(Named())
    assert len(reg.rules) == len(loaded().rules)


def test_a_module_that_fails_to_import_leaves_the_registry():
    reg = Registry.indexed([("ML950", "gone-rule", "memlint.rules.does_not_exist", False, False,
                             (), ())])
    assert reg.codes() == ["ML950"] and reg.get("ML950") is None
    assert reg.codes() == [] and reg.diagnostics == []   # not in this checkout: skipped silently


def test_requires_names_known_conditions():
    for rule in loaded().rules.values():
        assert all(n in REQUIRES or n.startswith("extra:") for n in rule.requires), rule.code

    class Bad(Rule):
        __doc__ = type(registry().get("ML101")).__doc__
        code, name, requires = "ML951", "bad-requires", ("estimate", "sunny")

    with pytest.raises(RegistryError, match="requires"):
        Registry().add(Bad())


def test_meets():
    run = scenario()
    assert meets((), run, None)
    assert not meets(("estimate",), run, None) and not meets(("model",), run, None)
    assert not meets(("rl",), run, object()) and not meets(("tp>1",), run, None)
    assert meets(("tp>1",), scenario(parallelism={"tp": 2}), None)
    assert meets(("estimate",), run, estimate(stage()))
    assert not meets(("extra:flags.fp16",), run, None)
    run = scenario(extra={"flags.fp16": Setting(True, Provenance(None, None, None, None))})
    assert meets(("extra:flags.fp16",), run, None)
    assert not meets(("extra:flags.fp16", "extra:flags.bf16"), run, None)
    broken = type("Broken", (), {"model": property(lambda self: 1 / 0)})()
    assert meets(("model",), broken, None)   # cannot be told: the rule runs and decides


class Gated(Rule):
    """Fires on every run.

    What it checks:
        Nothing.

    Why it matters:
        Tests.

    How to fix:
        Nothing.

    Example:
        None.
    """
    code, name, requires = "ML952", "gated-rule", ("estimate",)
    severity = Severity.INFO

    def check(self, ctx):
        yield Finding("fired")


def test_the_engine_runs_a_rule_only_where_its_requirements_hold():
    reg = Registry()
    reg.add(Gated())
    assert engine.lint(scenario(), None, reg=reg) == []
    assert [d.message for d in engine.lint(scenario(), estimate(stage()), reg=reg)] == ["fired"]


def test_every_builtin_module_is_indexed():
    from memlint.rules._index import ENTRIES

    assert {fields[2] for fields in ENTRIES} == set(BUILTIN_MODULES)
