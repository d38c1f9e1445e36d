"""Every phase of a step side by side, for estimates whose peak is a maximum over phases that hold
different things (RL: rollout, log-prob passes, updates, weight sync; memory/rl).

One row per phase with its total split into the trainer's weights, gradients, optimizer states,
activations and logits, the inference engine's share, and the rest; the peak phase is marked `*`
and a phase over the GPU's capacity `!` (the one that breaks). Text, JSON and HTML read the same
rows (`rows`).
"""
from __future__ import annotations

from memlint.records import record
from memlint.units import fmt

COLUMNS = ("weights", "gradients", "optimizer", "activations", "logits", "engine", "other")


@record(frozen=True)
class Row:
    name: str
    parts: dict
    total: int
    peak: bool
    over: bool


def shows_phases(estimate) -> bool:
    scenario = getattr(estimate, "scenario", None)
    if scenario is None or not hasattr(scenario, "rl"):
        return False
    # start-up: the RL check is a few attribute reads
    from memlint.memory.rl import is_rl

    return is_rl(scenario)


def _column(term) -> str:
    if term.name.startswith("engine."):
        return "engine"
    return term.component if term.component in COLUMNS else "other"


def rows(stage, capacity: int) -> list:
    out = []
    for phase in stage.phases:
        parts = {name: 0 for name in COLUMNS}
        for term in phase.terms:
            parts[_column(term)] += term.bytes
        out.append(Row(phase.name, parts, phase.total, phase.name == stage.phase,
                       bool(capacity) and phase.total > capacity))
    return out


def text_lines(estimate, units: str) -> list:
    """[(text, style)] lines: one table per stage (actor pipeline stage) of the RL step."""
    capacity = estimate.capacity_bytes
    lines = []
    groups = getattr(getattr(estimate, "rl", None), "groups", None) or {}
    for stage in sorted(estimate.stages, key=lambda s: s.stage):
        held = f" ({groups[stage.stage]})" if stage.stage in groups else ""
        lines.append([(f"phases of stage {stage.stage}{held} (* the peak, ! over the GPU's "
                       f"{fmt(capacity, units, 2)}):", "bold")])
        header = f"  {'phase':<20}" + "".join(f"{c:>12}" for c in COLUMNS) + \
            f"{'total':>12} {'of GPU':>7}"
        lines.append([(f"{header}   ({units})", "bold")])
        for row in rows(stage, capacity):
            mark = "!" if row.over else ("*" if row.peak else " ")
            cells = "".join(f"{_number(row.parts[c], units):>12}" for c in COLUMNS)
            share = row.total / capacity if capacity else 0.0
            style = "bold red" if row.over else ("bold" if row.peak else "")
            lines.append([(f"{mark} {row.name:<20}{cells}{_number(row.total, units):>12} ", style),
                          (f"{share:>7.0%}", style)])
    return lines


def _number(nbytes: int, units: str) -> str:
    return fmt(nbytes, units, 2).split()[0]


def json_phases(stage, capacity: int) -> list:
    return [{"phase": phase.name, "total_bytes": int(phase.total),
             # the three numbers of each phase, as each stage has them (json_format.py)
             "allocated_bytes": int(phase.allocated_bytes),
             "reserved_bytes": int(phase.reserved_bytes),
             "device_bytes": int(phase.device_bytes),
             "peak": phase.name == stage.phase, "over_capacity": bool(capacity)
             and phase.total > capacity,
             "components": {c: int(v) for c, v in row.parts.items()},
             "terms": [{"name": t.name, "component": t.component, "bytes": int(t.bytes),
                        "formula": t.formula} for t in phase.terms]}
            for phase, row in zip(stage.phases, rows(stage, capacity))]


def explain_lines(estimate, units: str) -> list:
    """Every phase's terms with formulas and sources (the peak's are in the stage block)."""
    lines = []
    for stage in sorted(estimate.stages, key=lambda s: s.stage):
        for phase in stage.phases:
            mark = " (the peak)" if phase.name == stage.phase else ""
            lines.append(f"Stage {stage.stage}, phase {phase.name}{mark}: "
                         f"{phase.total:,} B ({fmt(phase.total, units, 3)})")
            for term in phase.terms:
                lines.append(f"  {term.name} [{term.component}] = {term.bytes:,} B "
                             f"({fmt(term.bytes, units, 3)})")
                lines.append(f"      formula: {term.formula}")
                if term.source:
                    lines.append(f"      source:  {term.source}")
            lines.append("")
    return lines
