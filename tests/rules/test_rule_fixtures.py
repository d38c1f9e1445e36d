"""Every rule's fixtures and documented Examples, through one runner (STYLE.md 5).

    fixtures/rules/<CODE>-<name>/
        bad/<file>         fires the rule exactly as bad/_expect.yaml says
        bad/_expect.yaml   <file>: [{code, line, column}]   (`file: other.json` when a finding
                                                           is reported in a file <file> reads)
                           args: {<file>: [key=value, ...]}  (--set values the file lacks;
                                                            a path is from the repository root)
        good/<file>        leaves the rule silent
        good/_args.yaml    <file>: [key=value, ...]
        */<folder>/        files that a fixture reads (a launch script's DeepSpeed JSON)

Each file runs through the pipeline `memlint check` uses (files -> scenario -> estimate -> rules
-> engine), with only the rule under test selected, so positions are the ones users see. The
Examples come from `memlint.rules.docs.examples`, the parser the docs pages use: every Bad snippet
fires its rule, every Good one does not.
"""
from __future__ import annotations

import os

import pytest
import yaml

from memlint.api import Options, one_run, run_pipeline
from memlint.rules import registry
from memlint.rules.docs import examples

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "fixtures", "rules")
RULES = list(registry(plugins=False))
# Codes with no file that may trigger them, and why.
NO_FIXTURE = {
    "ML009": "internal-error: no valid or invalid config may raise inside memlint "
             "(tests/test_engine.py breaks a rule on purpose)",
}
# Codes whose Example is prose, and why.
NO_EXAMPLE = {
    **NO_FIXTURE,
    "ML005": "conflicting-sources needs two files; its fixtures have them",
}


def folder(rule) -> str:
    return os.path.join(FIXTURES, f"{rule.code}-{rule.name}")


def _meta(path: str) -> dict:
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def _files(directory: str) -> list:
    if not os.path.isdir(directory):
        return []
    return sorted(name for name in os.listdir(directory)
                  if not name.startswith("_") and os.path.isfile(os.path.join(directory, name)))



def judges_estimate(rule) -> bool:
    """Rules that judge the memory estimate: a good file of theirs must be estimated, or its
    silence proves nothing (ML603 also judges tp without sp when there is no estimate)."""
    return rule.code.startswith(("ML1", "ML6", "ML7")) and rule.code != "ML603"


def run(rule, path: str, settings=()) -> tuple:
    """(diagnostics of `rule` on `path` as (code, file, line, column), the estimate or None), with
    the rule alone selected; an internal error fails the test."""
    options = Options(assignments=tuple(str(s) for s in settings), select=(rule.code,))
    diagnostics, estimate = run_pipeline(one_run([path], options), options, registry())
    internal = [d.message for d in diagnostics if d.data.get("internal")]
    assert not internal or rule.code == "ML009", internal
    return ([(d.code, d.path, d.line, d.column) for d in diagnostics if d.code == rule.code],
            estimate)


def lint(rule, path: str, settings=()) -> list:
    return run(rule, path, settings)[0]


def _cases(kind: str):
    for rule in RULES:
        directory = os.path.join(folder(rule), kind)
        for name in _files(directory):
            yield pytest.param(rule, os.path.join(directory, name), id=f"{rule.code}/{kind}/{name}")


def test_every_rule_has_good_and_bad_fixtures():
    folders = {name for name in os.listdir(FIXTURES) if os.path.isdir(os.path.join(FIXTURES, name))}
    wanted = {os.path.basename(folder(rule)) for rule in RULES if rule.code not in NO_FIXTURE}
    assert not wanted - folders, f"rules without fixtures/rules/<CODE>-<name>: {sorted(wanted - folders)}"
    assert not folders - wanted, f"folders that name no rule: {sorted(folders - wanted)}"
    for name in sorted(wanted):
        bad, good = os.path.join(FIXTURES, name, "bad"), os.path.join(FIXTURES, name, "good")
        assert _files(bad) and _files(good), f"{name}: needs files in good/ and bad/"
        expect = _meta(os.path.join(bad, "_expect.yaml"))
        listed = set(expect) - {"args"}
        assert listed == set(_files(bad)), f"{name}: bad/_expect.yaml must list every bad file"
        assert set(expect.get("args") or {}) <= listed
        assert set(_meta(os.path.join(good, "_args.yaml"))) <= set(_files(good))


@pytest.mark.parametrize("rule,path", list(_cases("bad")))
def test_bad_fixture_fires_at_its_positions(rule, path, monkeypatch):
    monkeypatch.chdir(ROOT)
    directory, name = os.path.split(path)
    expect = _meta(os.path.join(directory, "_expect.yaml"))
    settings = (expect.get("args") or {}).get(name, ())
    got = [(code, os.path.relpath(os.path.realpath(file), directory) if file else None, line,
            column) for code, file, line, column in lint(rule, path, settings)]
    want = [(e["code"], e.get("file", name), e["line"], e["column"]) for e in expect[name]]
    assert got == want


@pytest.mark.parametrize("rule,path", list(_cases("good")))
def test_good_fixture_is_silent(rule, path, monkeypatch):
    monkeypatch.chdir(ROOT)
    directory, name = os.path.split(path)
    settings = _meta(os.path.join(directory, "_args.yaml")).get(name, ())
    found, estimate = run(rule, path, settings)
    assert found == []
    assert estimate is not None or not judges_estimate(rule), "no estimate: give the model or " \
        "world size in good/_args.yaml"


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.code)
def test_every_rule_documents_a_bad_and_a_good_example(rule):
    labels = sorted({example.label for example in examples(rule)})
    assert labels == ([] if rule.code in NO_EXAMPLE else ["Bad", "Good"]), rule.code


EXAMPLES = [pytest.param(rule, example, id=f"{rule.code}-{example.label}{index}")
            for rule in RULES for index, example in enumerate(examples(rule))]


@pytest.mark.parametrize("rule,example", EXAMPLES)
def test_doc_example_bad_fires_good_is_silent(rule, example, repo):
    path = repo / example.label / example.filename
    path.parent.mkdir()
    path.write_text(example.text, encoding="utf-8")
    fired, estimate = run(rule, str(path), example.settings)
    assert bool(fired) == example.fires, (example.head, fired)
    assert estimate is not None or example.fires or not judges_estimate(rule), "not estimated"


def _without(requirement: str, ctx):
    """`ctx` changed so that `requirement` (memlint.rules.base.REQUIRES) no longer holds."""
    from memlint.records import replace
    from memlint.rules.base import EXTRA, Context

    scenario, estimate = ctx.scenario, ctx.estimate
    if requirement == "estimate":
        estimate = None
    elif requirement == "model":
        scenario, estimate = replace(scenario, model=None), None
    elif requirement == "rl":
        estimate = replace(estimate, rl=None)
    elif requirement == "tp>1":
        scenario = replace(scenario, parallelism=replace(scenario.parallelism, tp=1))
    else:
        assert requirement.startswith(EXTRA), requirement
        extra = dict(scenario.extra)
        extra.pop(requirement[len(EXTRA):], None)
        scenario = replace(scenario, extra=extra)
    return Context(scenario=scenario, estimate=estimate, options=ctx.options,
                   formats=ctx.formats)


GATED = [case for case in _cases("bad") if case.values[0].requires]


@pytest.mark.parametrize("rule,path", GATED)
def test_a_rule_finds_nothing_where_its_requires_fail(rule, path, monkeypatch):
    """The engine calls a rule only where its `requires` hold (and a check imports the rule's
    module only then): on each bad fixture, the run made to fail any one of them leaves the rule
    silent, as the engine's skipping it does."""
    from memlint import engine
    from memlint.rules.base import Context

    monkeypatch.chdir(ROOT)
    directory, name = os.path.split(path)
    settings = (_meta(os.path.join(directory, "_expect.yaml")).get("args") or {}).get(name, ())
    seen = []
    real = engine.lint

    def spy(scenario, estimate, config=None, reg=None, pre=(), suppressions=None, formats=(),
            **kwargs):
        seen.append(Context(scenario=scenario, estimate=estimate,
                            options=engine._default_options(rule), formats=tuple(formats),
                            resolved=kwargs.get("resolved")))
        return real(scenario, estimate, config, reg, pre, suppressions, formats, **kwargs)

    monkeypatch.setattr(engine, "lint", spy)
    assert lint(rule, path, settings) and seen, "the bad fixture fires"
    for ctx in seen:
        for requirement in rule.requires:
            assert list(rule.check(_without(requirement, ctx)) or ()) == [], requirement
