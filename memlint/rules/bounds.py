"""Bounding the unknowns of an out-of-memory verdict (issue 27).

An OOM verdict that rests on values no file gave (memory/inputs.py `Estimate.assumed`: memlint's
own or a framework's default) is re-estimated with every such value at its most memory-friendly
plausible setting at once:

- micro_batch 1, and seq_len 1 (what is left is the model states: no sequence makes them fit);
- full recompute, unless the framework's launch config states its recompute (Megatron, torchtitan:
  absent there means the framework's own "none");
- the lightest precision (pure bf16, no master copy);
- for a trainer whose sharding is left to the launcher: ZeRO-3 over the known world size (none
  with one GPU); over an unknown world size the states may shrink toward nothing, so no bound;
- the largest GPU memlint knows, when the GPU itself is a default.

If the run still does not fit there, no value memlint assumed could make it fit: the verdict is
firm (an error). Otherwise it is a warning that names each value which alone would make it fit.
A run that refers to a file memlint could not read, or whose ZeRO/FSDP/EP shards over a world size
nobody gave, cannot be bounded: a warning.
"""
from __future__ import annotations

from memlint.records import field, record, replace
from memlint.rules._support import try_estimate, with_training

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

#: frameworks whose launch config states recompute (absent: the framework's own "none")
RECOMPUTE_STATED = ("megatron", "torchtitan")


def _catalog_largest() -> int:
    # start-up: the GPU catalog loads only when a verdict is bounded
    from memlint.hardware import CATALOG

    return max(gpu.capacity_bytes for gpu in CATALOG)


@record
class Bound:
    """The run re-estimated at the friendliest value of every default."""

    could_fit: bool                  # some value memlint assumed would make it fit (or unknowable)
    firm: bool                       # bounded and still over: no assumed value can fix it
    peak: Optional[int] = None       # the stage's peak at the friendliest values
    capacity: Optional[int] = None   # the capacity compared with (the largest GPU if defaulted)
    friendliest: list = field(default_factory=list)   # [(key, value)] tried together
    flips: list = field(default_factory=list)         # [(key, value, peak)] each alone fits
    unbounded: list = field(default_factory=list)     # [(key, reason)]: why no bound holds


def _assumed(ctx) -> dict:
    return {a["key"]: a for a in getattr(ctx.estimate, "assumed", ()) or ()
            if str(a.get("source", "")).startswith(("default", "assumed"))}


def friendly_values(ctx, assumed: dict) -> tuple:
    """([(key, shown value, training changes, parallelism changes)], [reasons unbounded])."""
    scenario = ctx.scenario
    par, tr = scenario.parallelism, scenario.training
    topology = getattr(ctx.resolved, "topology", None)
    out, unbounded = [], []
    if "micro_batch" in assumed and tr.micro_batch > 1:
        out.append(("micro_batch", 1, {"micro_batch": 1}, {}))
    if "seq_len" in assumed and tr.seq_len > 1:
        out.append(("seq_len", "any (the model states alone)", {"seq_len": 1}, {}))
    if "recompute" in assumed and tr.framework not in RECOMPUTE_STATED and tr.recompute != "full":
        out.append(("recompute", "full", {"recompute": "full"}, {}))
    if "precision" in assumed and tr.precision != "pure-bf16":
        out.append(("precision", "pure-bf16", {"precision": "pure-bf16"}, {}))
    world_known = "world_size" not in assumed
    if "sharding" in assumed:
        if not world_known:
            out.append(("sharding", "ZeRO-3 over as many GPUs as it takes", {}, SHARD_AWAY))
        elif topology is None or topology.dp > 1:
            out.append(("sharding", "ZeRO-3 over the known GPUs", {}, {"zero": 3}))
    if "world_size" in assumed and (par.zero > 0 or par.fsdp != "none" or par.ep > 1):
        out.append(("world_size", "as many GPUs as it takes", {}, SHARD_AWAY))
    return out, unbounded


# The model states over a data-parallel size nobody gave: sharded over ever more GPUs they shrink
# toward nothing, while the activations, logits, buffers and runtime stay (the bound subtracts
# the states of the variant).
SHARD_AWAY = {"__shard_away__": True}
_STATES = ("weights", "gradients", "optimizer")


def _peak_of(ctx, stage, training: dict, parallelism: dict) -> Optional[int]:
    parallelism = dict(parallelism)
    shard_away = bool(parallelism.pop("__shard_away__", False))
    scenario = with_training(ctx.scenario, **training) if training else ctx.scenario
    if parallelism:
        scenario = replace(scenario, parallelism=replace(scenario.parallelism, **parallelism))
    variant = try_estimate(scenario, ctx.resolved) if training or parallelism else ctx.estimate
    if variant is None:
        return None
    same = [s for s in variant.stages if s.stage == stage.stage]
    if not same:
        return None
    peak = same[0].total_bytes
    if shard_away:
        peak -= sum(int(same[0].components().get(name, 0)) for name in _STATES)
    return peak


def bound(ctx, stage, extra_unbounded: tuple = ()) -> Bound:
    """`extra_unbounded`: [(key or None, reason)] the caller knows of (an unread file)."""
    """The verdict on `stage` at the friendliest value of every default (see module doc)."""
    assumed = _assumed(ctx)
    values, unbounded = friendly_values(ctx, assumed)
    unbounded += list(extra_unbounded)
    capacity = ctx.estimate.capacity_bytes
    if "gpu" in assumed:
        capacity = max(capacity, _catalog_largest())
    training, parallelism = {}, {}
    for _key, _shown, tr, par in values:
        training.update(tr)
        parallelism.update(par)
    peak = _peak_of(ctx, stage, training, parallelism) if values else stage.total_bytes
    if peak is None:
        unbounded.append((None, "the model cannot estimate the friendliest variant"))
    friendliest = [(key, shown) for key, shown, _, _ in values]
    if "gpu" in assumed:
        friendliest.append(("gpu", "the largest GPU memlint knows"))
    could_fit = bool(unbounded) or (peak is not None and peak <= capacity)
    flips = []
    if could_fit and peak is not None:
        for key, shown, tr, par in values:
            alone = _peak_of(ctx, stage, tr, par)
            if alone is not None and alone <= ctx.estimate.capacity_bytes:
                flips.append((key, shown, alone))
        if "gpu" in assumed and stage.total_bytes <= capacity:
            flips.append(("gpu", "one with at least this much memory", stage.total_bytes))
    return Bound(could_fit=could_fit, firm=not could_fit, peak=peak, capacity=capacity,
                 friendliest=friendliest, flips=flips, unbounded=unbounded)


def bound_note(ctx, found: Bound, size) -> str:
    """What the bound says, for the verdict's message."""
    if found.firm and found.friendliest:
        tried = ", ".join(f"{key} {value}" for key, value in found.friendliest)
        return (f"; no value memlint assumed could make it fit: even with {tried} it needs "
                f"{size(ctx, found.peak)} of {size(ctx, found.capacity)}")
    if found.firm:
        return ""
    notes = "".join(f"; {reason}" for key, reason in found.unbounded if key is not None)
    if found.flips:
        listed = " or ".join(f"{key} = {value} ({size(ctx, peak)})" for key, value, peak
                             in found.flips)
        return f"{notes}; it would fit with {listed}"
    if found.could_fit and found.friendliest and not found.unbounded:
        tried = ", ".join(f"{key} {value}" for key, value in found.friendliest)
        return f"; it would fit only with all of {tried} together ({size(ctx, found.peak)})"
    return notes


def resting_on(ctx, found: Bound) -> list:
    """[(key, value)] of the defaults the verdict rests on: those that alone would flip it, or
    every one tried when only all of them together would."""
    assumed = _assumed(ctx)
    keys = ([key for key, _ in found.unbounded if key] + [key for key, _, _ in found.flips]
            or [key for key, _ in found.friendliest])
    return [(key, assumed[key]["value"]) for key in dict.fromkeys(keys) if key in assumed]
