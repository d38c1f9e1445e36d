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


def examples(rule) -> tuple:
    """The Bad and Good snippets of a rule's Example section (the blocks indented under them)."""
    lines = rule.doc.splitlines()
    blocks: dict = {}
    for label in ("Bad", "Good"):
        start = next(i for i, line in enumerate(lines) if line.strip().startswith(label)
                     and line.strip().endswith(":"))
        indent = len(lines[start]) - len(lines[start].lstrip())
        block = []
        for line in lines[start + 1:]:
            if line.strip() and len(line) - len(line.lstrip()) <= indent:
                break
            block.append(line)
        blocks[label] = textwrap.dedent("\n".join(block)).strip() + "\n"
    return blocks["Bad"], blocks["Good"]


def where(scenario, finding):
    for key in finding.keys:
        prov = scenario.where(key)
        if prov is None and key in scenario.extra:
            prov = scenario.extra[key].prov
        if prov is not None:
            return prov
    return None
