"""The engine: selection, positions, severities, per-file ignores, suppressions, rule failures."""
from helpers import GiB, at, estimate, scenario, stage

from memlint import engine
from memlint.diagnostics import PARSE_ERROR, Severity, make
from memlint.engine import LintConfig, is_enabled, specificity
from memlint.rules import Registry, registry
from memlint.rules.base import Finding, Rule


class Always(Rule):
    """Always fires.

    What it checks:
        Nothing.

    Why it matters:
        Tests (1 finding).

    How to fix:
        Nothing.

    Example:
        None.
    """

    code, name, severity = "ML901", "always-fires", Severity.WARNING

    def check(self, ctx):
        yield Finding("tp is set", keys=("missing", "tp"))


class Broken(Always):
    """Raises.

    What it checks:
        Nothing.

    Why it matters:
        Tests (1 failure).

    How to fix:
        Nothing.

    Example:
        None.
    """

    code, name = "ML902", "always-raises"

    def check(self, ctx):
        raise KeyError("boom")


class Preview(Always):
    __doc__ = Always.__doc__
    code, name, preview = "ML903", "preview-rule", True


def small_registry():
    reg = Registry()
    for rule in (Always(), Broken(), Preview()):
        reg.add(rule)
    for rule in registry():
        if rule.code.startswith("ML0"):
            reg.add(rule)
    return reg


def test_specificity_and_selection():
    rule = Always()
    assert specificity("ML901", rule) == 5 and specificity("always-fires", rule) == 5
    assert specificity("ML9", rule) == 2 and specificity("ML90", rule) == 3
    assert specificity("ALL", rule) == 1 and specificity("ML8", rule) == 0
    assert is_enabled(rule, LintConfig())
    assert not is_enabled(rule, LintConfig(ignore=("ML9",)))
    assert is_enabled(rule, LintConfig(select=("ML901",), ignore=("ML9",)))
    assert not is_enabled(rule, LintConfig(select=("ML1",)))
    assert not is_enabled(rule, LintConfig(select=("ML9",), ignore=("always-fires",)))
    assert not is_enabled(Preview(), LintConfig())
    assert not is_enabled(Preview(), LintConfig(select=("ML9",)))
    assert is_enabled(Preview(), LintConfig(extend_select=("preview-rule",)))


def test_positions_severity_and_rule_failure():
    scen = scenario(provenance={"tp": at(3, "tp")})
    diags = engine.lint(scen, None, LintConfig(), small_registry())
    fired = [d for d in diags if d.code == "ML901"]
    assert [(d.path, d.line, d.column, d.key, d.severity) for d in fired] == [
        ("run.memlint.toml", 3, 1, "tp", Severity.WARNING)]
    [failure] = [d for d in diags if d.code == "ML009"]
    assert "ML902 always-raises failed: KeyError" in failure.message
    assert failure.data["internal"] and "Traceback" in failure.data["traceback"]
    assert engine.exit_code(diags, Severity.ERROR) == 2
    configured = LintConfig(severities={"ML9": Severity.INFO, "always-fires": Severity.ERROR},
                            ignore=("ML902",))
    diags = engine.lint(scen, None, configured, small_registry())
    assert [(d.code, d.severity) for d in diags] == [("ML901", Severity.ERROR)]
    assert engine.exit_code(diags, Severity.ERROR) == 1
    assert engine.exit_code(diags, Severity.ERROR) == 1


def test_unlocated_finding_goes_to_anchor_file():
    scen = scenario(sources=("a.json", "b.memlint.toml"))
    config = LintConfig(ignore=("ML902",))
    [d] = engine.lint(scen, None, config, small_registry())
    # every diagnostic has a location: the run's anchor file, at its first line
    assert (d.path, d.line) == ("b.memlint.toml", 1)


def test_extra_keys_resolve_positions():
    from memlint.ir import Setting

    class UsesExtra(Always):
        __doc__ = Always.__doc__
        code, name = "ML904", "uses-extra"

        def check(self, ctx):
            yield Finding("bucket", keys=("deepspeed.reduce_bucket_size",))

    reg = Registry()
    reg.add(UsesExtra())
    scen = scenario(extra={"deepspeed.reduce_bucket_size": Setting(5, at(7, "rbs", "ds.json"))})
    [d] = engine.lint(scen, None, LintConfig(), reg)
    assert (d.path, d.line) == ("ds.json", 7)


def test_suppressions_and_per_file_ignores_apply_to_rules_and_parse_errors():
    scen = scenario(provenance={"tp": at(3, "tp")})
    parse = make(PARSE_ERROR, Severity.ERROR, "bad", at(9, None))
    config = LintConfig(ignore=("ML902",))
    reg = small_registry()
    both = engine.lint(scen, None, config, reg, pre=[parse])
    assert {d.code for d in both} == {"ML001", "ML901"}
    line = {"run.memlint.toml": {3: {"always-fires"}, 9: {"ml001"}}}
    assert engine.lint(scen, None, config, reg, pre=[parse], suppressions=line) == []
    whole = {"run.memlint.toml": {0: {"all"}}}
    assert engine.lint(scen, None, config, reg, pre=[parse], suppressions=whole) == []
    per_file = LintConfig(ignore=("ML902",), per_file_ignores={"*.toml": ("ML9", "ML001")})
    assert engine.lint(scen, None, per_file, reg, pre=[parse]) == []
    other = LintConfig(ignore=("ML902",), per_file_ignores={"*.json": ("ALL",)})
    assert len(engine.lint(scen, None, other, reg, pre=[parse])) == 2


def test_ignored_reserved_code_drops_parse_diagnostics():
    parse = make(PARSE_ERROR, Severity.ERROR, "bad", at(9, None))
    config = LintConfig(select=("ML0",), ignore=("parse-error",))
    assert engine.lint(scenario(), None, config, small_registry(), pre=[parse]) == []


def test_formats_limit_a_rule():
    class DeepSpeedOnly(Always):
        __doc__ = Always.__doc__
        code, name, formats = "ML905", "deepspeed-only", ("deepspeed",)

    reg = Registry()
    reg.add(DeepSpeedOnly())
    assert engine.lint(scenario(), None, LintConfig(), reg, formats=("native",)) == []
    assert len(engine.lint(scenario(), None, LintConfig(), reg, formats=("deepspeed",))) == 1


def test_builtin_memory_rule_through_engine():
    scen = scenario(provenance={"micro_batch": at(4, "micro_batch")})
    est = estimate(stage(0, weights=10 * GiB, activations=90 * GiB))
    diags = engine.lint(scen, est, LintConfig(select=("ML1",)))
    assert [(d.code, d.rule, d.line) for d in diags] == [("ML101", "exceeds-gpu-memory", 4)]


def test_validate_config_rejects_unknown_selectors_and_options():
    import pytest

    reg = registry()
    with pytest.raises(engine.SettingsError, match="did you mean 'exceeds-gpu-memory'"):
        engine.validate_config(LintConfig(select=("exceeds-gpu-memry",)), reg)
    with pytest.raises(engine.SettingsError, match="unknown option 'marjin'"):
        engine.validate_config(LintConfig(options={"ML102": {"marjin": 0.2}}), reg)
    with pytest.raises(engine.SettingsError, match="must be float"):
        engine.validate_config(LintConfig(options={"low-memory-headroom": {"margin": "x"}}), reg)
    engine.validate_config(LintConfig(select=("ML1", "ALL"), ignore=("ML10",),
                                      options={"low-memory-headroom": {"margin": 0.2}}), reg)
