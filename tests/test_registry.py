"""The rule registry: invariants and plugin isolation (tests/rules/test_rule_fixtures.py checks every
documented Example)."""
import re

import pytest

from memlint.diagnostics import Severity
from memlint.rules import BUILTIN_MODULES, DOC_SECTIONS, Registry, RegistryError, registry
from memlint.rules.base import Rule

RULES = list(registry())


def test_builtins_load_cleanly():
    assert registry().diagnostics == []
    codes = [rule.code for rule in RULES]
    names = [rule.name for rule in RULES]
    assert len(codes) == len(set(codes)) and len(names) == len(set(names))
    assert all(re.fullmatch(r"ML\d{3}", code) for code in codes)
    assert all(re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", name) for name in names)
    for code in ("ML001", "ML009", "ML101", "ML105", "ML601", "ML605"):
        assert registry().get(code) is not None


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_docs_have_four_sections(rule):
    sections = rule.sections()
    for title in DOC_SECTIONS:
        assert sections.get(title), f"{rule.code} lacks {title}"
    assert re.search(r"\d", sections["Why it matters"]), f"{rule.code}: give numbers"


def _doc(rule_cls):
    rule_cls.__doc__ = ("T.\n\nWhat it checks:\n    x\n\nWhy it matters:\n    1\n\n"
                        "How to fix:\n    y\n\nExample:\n    z\n")
    return rule_cls


def test_invariants_are_enforced():
    @_doc
    class Good(Rule):
        code, name = "ML990", "good-rule"

    @_doc
    class SameCode(Rule):
        code, name = "ML990", "other-rule"

    @_doc
    class SameName(Rule):
        code, name = "ML991", "good-rule"

    @_doc
    class BadCode(Rule):
        code, name = "XX1", "bad-code"

    @_doc
    class BadName(Rule):
        code, name = "ML992", "Bad_Name"

    @_doc
    class BadOption(Rule):
        code, name, options = "ML993", "bad-option", {"margin": (float, "x")}

    class NoDocs(Rule):
        code, name = "ML994", "no-docs"

    reg = Registry()
    reg.add(Good())
    for cls, message in ((SameCode, "duplicate rule code"), (SameName, "duplicate rule name"),
                         (BadCode, "not ML"), (BadName, "kebab-case"),
                         (BadOption, "option"), (NoDocs, "lacks section")):
        with pytest.raises(RegistryError, match=message):
            reg.add(cls())
    reg.add_all([SameCode()], "a test")
    assert "not registered" in reg.diagnostics[0].message and reg.diagnostics[0].code == "ML009"


def test_absent_builtin_modules_are_skipped_and_broken_plugins_reported(monkeypatch):
    reg = Registry()
    reg.load_module("memlint.rules.does_not_exist", builtin=True)
    assert reg.diagnostics == []
    reg.load_module("memlint.rules.does_not_exist", builtin=False)
    assert len(reg.diagnostics) == 1

    class Entry:
        def __init__(self, name, target):
            self.name, self.value, self.target = name, f"pkg:{name}", target

        def load(self):
            if isinstance(self.target, Exception):
                raise self.target
            return self.target

    @_doc
    class Plugged(Rule):
        code, name = "ML950", "plugged-in"

        def check(self, ctx):
            return ()

    entries = [Entry("broken", ImportError("no such thing")), Entry("good", [Plugged()]),
               Entry("weird", 42)]
    import importlib.metadata

    from memlint import plugins

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: entries)
    monkeypatch.setattr(plugins, "declared", lambda group: True)
    reg = Registry()
    reg.load_plugins()
    assert reg.get("plugged-in") is not None
    messages = [d.message for d in reg.diagnostics]
    assert any("'broken'" in m and "ImportError" in m for m in messages)
    assert any("'weird'" in m for m in messages)
    assert all(d.severity == Severity.WARNING for d in reg.diagnostics)


def test_builtin_module_list_is_explicit():
    assert "memlint.rules.memory" in BUILTIN_MODULES and "memlint.rules.strategy" in BUILTIN_MODULES
