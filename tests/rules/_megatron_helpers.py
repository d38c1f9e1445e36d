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
