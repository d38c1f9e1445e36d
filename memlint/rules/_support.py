"""Helpers shared by the estimate-reading rules: byte formatting in the scenario's units, and
re-running the memory model on a modified scenario (the only memory "maths" a rule may do), from
the run's resolved context (`ctx.resolved.varied(variant)`: the model's architecture and counts are
not read again)."""
from __future__ import annotations

from memlint.records import replace
from memlint.units import UNITS, fmt

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


def units_of(ctx) -> str:
    units = ctx.scenario.assumptions.get("units", "GiB") if ctx.scenario is not None else "GiB"
    return units if units in UNITS else "GiB"


def size(ctx, nbytes: int) -> str:
    return fmt(nbytes, units_of(ctx))


def estimate_of(scenario, context=None):
    """The memory model on `scenario` (imported lazily: it is optional at rule-import time);
    `context`: the variant's resolved context (memory/context.py), when the rule has one."""
    # start-up: the memory model loads only when a run is estimated
    from memlint.memory.estimate import estimate

    return estimate(scenario, context)


def with_parallelism(scenario, **changes):
    return replace(scenario, parallelism=replace(scenario.parallelism, **changes))


def with_training(scenario, **changes):
    return replace(scenario, training=replace(scenario.training, **changes))


def try_estimate(scenario, context=None) -> Optional[object]:
    """Re-estimate, or None when the model cannot estimate that variant. `context`: the run's
    resolved context (`ctx.resolved`), whose architecture and counts the variant shares."""
    try:
        return estimate_of(scenario, None if context is None else context.varied(scenario))
    except Exception:  # noqa: BLE001 - a variant the model cannot estimate gives no advice
        return None


def component(stage, name: str) -> int:
    return int(stage.components().get(name, 0))


def largest_terms(stage, count: int = 3) -> list:
    return sorted(stage.terms, key=lambda t: (-t.bytes, t.name))[:count]


def stage_label(estimate, stage) -> str:
    return f"stage {stage.stage}" if len(estimate.stages) > 1 else "the GPU"
