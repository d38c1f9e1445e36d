"""`memlint plan`: the parallel configurations that fit on a GPU budget, ranked.

    from memlint.planner import plan
    plans = plan(base_scenario, gpus=512, gpus_per_node=8, top_k=10)

`base_scenario` is a built Scenario (model, seq_len, global_batch, gpu, framework, profile...);
the planner varies the parallel layout and the memory levers (search.py), keeps what
`memlint.memory.estimate.estimate()` says fits, and ranks it: plans with the requested headroom
first, then by the throughput-penalty model (cost.py). Each Plan carries its settings as scenario
keys (feed `Plan.assignments()` back through `--set` to reproduce it), its Estimate, its headroom
and its penalties with their explanations.
"""
from __future__ import annotations

import time

from memlint.planner import search
from memlint.planner.cost import Cost
from memlint.records import field, record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

    from memlint.memory.result import Estimate

__all__ = ["Plan", "PlanResult", "near_settings", "plan", "search_plans"]

#: Default share of GPU memory a plan must leave free to count as "with headroom".
DEFAULT_HEADROOM = 0.10

#: The order scenario keys are printed in.
KEY_ORDER = ("tp", "pp", "dp", "cp", "ep", "sp", "zero", "fsdp", "dp_replicate",
             "first_stage_layers", "last_stage_layers", "recompute", "recompute_every",
             "micro_batch", "grad_accum", "offload_optimizer", "offload_params")


@record
class Plan:
    rank: int
    settings: dict[str, object]   # scenario keys -> values
    estimate: Estimate
    cost: Cost
    capacity_bytes: int
    headroom_required: float
    changed: tuple = ()         # keys that differ from the starting configuration

    @property
    def peak_bytes(self) -> int:
        return self.estimate.peak_bytes

    @property
    def headroom_bytes(self) -> int:
        return self.capacity_bytes - self.peak_bytes

    @property
    def headroom_fraction(self) -> float:
        return self.headroom_bytes / self.capacity_bytes

    @property
    def has_headroom(self) -> bool:
        return self.headroom_fraction >= self.headroom_required

    @property
    def penalties(self) -> tuple:
        return self.cost.penalties

    def assignments(self) -> list:
        """['tp=4', 'pp=4', ...]: `--set` arguments that reproduce this plan on the base."""
        out = []
        for key in KEY_ORDER:
            if key in self.settings:
                value = self.settings[key]
                out.append(f"{key}={str(value).lower() if isinstance(value, bool) else value}")
        return out

    def offload(self) -> str:
        """What the plan offloads to the host: "-", "opt" or "params+opt" (text and HTML)."""
        s = self.settings
        if s.get("offload_params", "none") != "none":
            return "params+opt"
        return "opt" if s.get("offload_optimizer", "none") != "none" else "-"

    def label(self) -> str:
        s = self.settings
        parts = [f"TP{s['tp']}", f"PP{s['pp']}"]
        if s.get("cp", 1) > 1:
            parts.append(f"CP{s['cp']}")
        if s.get("ep", 1) > 1:
            parts.append(f"EP{s['ep']}")
        parts.append(f"DP{s['dp']}")
        return "·".join(parts)

    def to_dict(self) -> dict:
        stages = [{"stage": st.stage, "layers": st.layers, "phase": st.phase,
                   "components": st.components(), "total_bytes": st.total_bytes}
                  for st in self.estimate.stages]
        return {"rank": self.rank, "label": self.label(),
                "settings": {k: self.settings[k] for k in KEY_ORDER if k in self.settings},
                "set": self.assignments(), "peak_bytes": self.peak_bytes,
                "capacity_bytes": self.capacity_bytes, "headroom_bytes": self.headroom_bytes,
                "headroom_fraction": round(self.headroom_fraction, 6),
                "has_headroom": self.has_headroom, "changed": list(self.changed),
                "cost": self.cost.to_dict(), "stages": stages}


@record
class PlanResult:
    plans: list[Plan]
    stats: search.Stats
    gpus: int
    gpus_per_node: int
    notes: list[str] = field(default_factory=list)
    reason: Optional[str] = None   # why no configuration fits (None when one does)

    def to_dict(self) -> dict:
        out = {"gpus": self.gpus, "gpus_per_node": self.gpus_per_node,
               "search": self.stats.to_dict(), "notes": list(self.notes),
               "plans": [p.to_dict() for p in self.plans]}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def _gib(value: float) -> str:
    return f"{value / 2**30:,.1f} GiB"


def why_none(stats: search.Stats, gpus: int, base_scenario) -> str:
    """Why the search found no plan, from what cut its candidates: no layout whose data-parallel
    size divides the global batch (a prime or awkward GPU count), memory bounds, the m >= pp rule,
    or estimates over the GPU."""
    gb = base_scenario.training.global_batch
    cap = base_scenario.hardware.gpu_memory
    parts = []
    if stats.no_batch:
        sizes = ", ".join(f"{d:,}" for d in sorted(stats.batch_mismatch, reverse=True))
        more = ", ..." if stats.no_batch > len(stats.batch_mismatch) else ""
        if stats.no_batch == stats.layouts:
            return (f"no split of {gpus:,} GPUs into tp × pp × cp × dp has a data-parallel size "
                    f"dp that divides the global batch {gb:,} (dp would be {sizes}{more}); use "
                    "a GPU count that leaves such a dp, or a global batch divisible by one of "
                    "these")
        parts.append(f"{stats.no_batch:,} of {stats.layouts:,} layouts have a data-parallel size "
                     f"that does not divide the global batch {gb:,} (dp {sizes}{more})")
    memory = stats.pruned_states + stats.pruned_bound
    if memory:
        parts.append(f"{memory:,} candidates need more than the GPU's {_gib(cap)} by a lower "
                     "bound of their memory")
    if stats.pruned_rules:
        parts.append(f"{stats.pruned_rules:,} have fewer micro-batches per step than pipeline "
                     "stages (m < pp; --allow-bubble lifts this rule)")
    if stats.estimated:
        parts.append(f"the {stats.estimated:,} estimated need more than {_gib(cap)} (the "
                     f"smallest peak is {_gib(stats.lowest_peak or 0)})")
    if not parts:
        return f"no layout of the searched options uses all {gpus:,} GPUs"
    return "; ".join(parts)


def near_settings(scenario) -> dict:
    """The starting configuration's values of the keys plans are compared on (`near`)."""
    par, tr = scenario.parallelism, scenario.training
    return {"tp": par.tp, "pp": par.pp, "cp": par.cp, "ep": par.ep, "zero": par.zero,
            "fsdp": par.fsdp, "dp_replicate": par.dp_replicate, "recompute": tr.recompute,
            "recompute_every": tr.recompute_every, "micro_batch": tr.micro_batch,
            "offload_optimizer": par.offload_optimizer, "offload_params": par.offload_params}


def search_plans(base_scenario, gpus: int, gpus_per_node: int = 8, top_k: Optional[int] = 10, *,
                 headroom: float = DEFAULT_HEADROOM, near: Optional[dict] = None,
                 cross_node_tp: bool = False, max_pp: Optional[int] = None,
                 allow_bubble: bool = False, prune: bool = True) -> PlanResult:
    """The search with its statistics. `top_k=None`: every fitting plan. `near`: scenario keys of
    a starting configuration; plans are then ranked by how few of its keys they change first.
    `prune=False` disables the memory lower bounds and early stopping (brute force)."""
    if gpus <= 0:
        raise ValueError("gpus must be positive")
    start = time.perf_counter()
    stats = search.Stats()
    space = search.Space(base_scenario, gpus, gpus_per_node, cross_node_tp=cross_node_tp,
                         max_pp=max_pp, allow_bubble=allow_bubble)
    candidates = search.enumerate_candidates(space, stats, prune=prune, near=near)
    found = search.run_estimates(space, candidates, stats, base_scenario.hardware.gpu_memory,
                                 headroom, top_k if prune else None, near)
    if top_k is not None:
        found = found[:top_k]
    plans = [Plan(rank=i + 1, settings=cand.settings, estimate=e, cost=cand.cost(space),
                  capacity_bytes=base_scenario.hardware.gpu_memory, headroom_required=headroom,
                  changed=cand.changed)
             for i, (_, cand, e) in enumerate(found)]
    stats.seconds = time.perf_counter() - start
    notes = []
    if base_scenario.training.global_batch is None:
        notes.append("no global batch: micro batches 1, 2, 4, 8 tried, pipeline bubble from "
                     "grad_accum (1 unless set)")
    elif not allow_bubble:
        notes.append("pipelines need at least pp micro-batches per step (m >= pp)")
    return PlanResult(plans=plans, stats=stats, gpus=gpus, gpus_per_node=gpus_per_node,
                      notes=notes, reason=None if plans else why_none(stats, gpus, base_scenario))


def plan(base_scenario, gpus: int, gpus_per_node: int = 8, top_k: Optional[int] = 10,
         **options) -> list:
    """The ranked fitting plans (see `search_plans` for the options)."""
    return search_plans(base_scenario, gpus, gpus_per_node, top_k, **options).plans
