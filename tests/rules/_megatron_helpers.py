"""Shared by the topology and Megatron rule tests: args text -> Scenario -> findings."""
from __future__ import annotations

import textwrap

from memlint.adapters import megatron as M
from memlint.rules.base import Context
from memlint.scenario import build


def run(rule, text: str):
    partial = M.load("args.txt", textwrap.dedent(text))
    scenario, _ = build([partial])
    return scenario, list(rule.check(Context(scenario, formats=("megatron",))))


def where(scenario, finding):
    for key in finding.keys:
        prov = scenario.where(key)
        if prov is None and key in scenario.extra:
            prov = scenario.extra[key].prov
        if prov is not None:
            return prov
    return None


def fires_and_stays_silent(rule, bad: str, good: str) -> None:
    """The rule fires on `bad` and is silent on `good` (the CASES tables of both test files)."""
    _, findings = run(rule, bad)
    assert findings, f"{rule.name} should fire on:\n{bad}"
    _, findings = run(rule, good)
    assert not findings, [f.message for f in findings]


def check_metadata(rules, prefix: str) -> None:
    """Unique codes under `prefix`, a name, and the four documentation sections."""
    assert len({r.code for r in rules}) == len(rules)
    for rule in rules:
        assert rule.code.startswith(prefix) and rule.name and rule.__doc__
        assert set(rule.sections()) >= {"What it checks", "Why it matters", "How to fix",
                                        "Example"}
