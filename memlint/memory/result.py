"""The Estimate: per pipeline stage, the named Terms whose sum is that stage's peak, the verdict
(`fits`), and what is derived on demand from the scenario (host memory per node, checkpoints).

Every number memlint prints is a sum of `Term`s (memory/terms.py); each carries its formula, the
inputs substituted into it, and a one-line source, so `--explain` can show the derivation and
tests can pin it.
"""
from __future__ import annotations

from functools import cached_property

from memlint.memory.checkpoint import checkpoint_estimate
from memlint.memory.host_nodes import node_estimates
from memlint.memory.terms import StageEstimate
from memlint.records import field, record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any


@record(frozen=True)
class Estimate:
    profile: str
    sources: tuple[str, ...]
    params: dict[str, int]   # total, trainable, embedding, lm_head, experts, vision (+ more)
    gpu_name: str
    capacity_bytes: int
    stages: tuple[StageEstimate, ...]   # per pipeline stage
    notes: tuple[str, ...] = ()         # assumptions worth telling the user
    # verdict inputs no file gave: ({"key", "value", "source"}, ...), memory/inputs.py
    assumed: tuple[dict[str, object], ...] = ()
    # the scenario estimated, for what is derived on demand (host, checkpoint): the planner
    # estimates thousands of layouts and never asks for them
    scenario: Any = field(default=None, repr=False, compare=False)
    # its resolved context (memory/context.py Resolved: topology, architecture, counts, dtypes,
    # schedule), computed once; the rules and the host and checkpoint estimates read it
    context: Any = field(default=None, repr=False, compare=False)

    @cached_property
    def host(self) -> tuple:
        """Host RAM and NVMe per kind of node (memory/host.py NodeEstimate), worst first."""
        return () if self.scenario is None else node_estimates(self.scenario, self)

    @cached_property
    def checkpoint(self):
        """One checkpoint's size and how many are kept (memory/checkpoint.py)."""
        return None if self.scenario is None else checkpoint_estimate(self.scenario, self)

    @property
    def peak_bytes(self) -> int:
        return max(stage.total_bytes for stage in self.stages)

    @property
    def held_peak_bytes(self) -> int:
        """The largest stage's memory beside the allocator's releasable cache (StageEstimate
        held_bytes): what headroom margins (low-memory-headroom, fit, plan) are measured on."""
        return max(stage.held_bytes for stage in self.stages)

    @property
    def fits(self) -> bool:
        """Whether every stage's peak is within one GPU's capacity (no headroom kept)."""
        return self.peak_bytes <= self.capacity_bytes

    @property
    def peak_stage(self) -> StageEstimate:
        return max(self.stages, key=lambda s: (s.total_bytes, -s.stage))

    def to_dict(self) -> dict[str, object]:
        return {"sources": list(self.sources), "profile": self.profile,
                "params": dict(self.params),
                "gpu": {"name": self.gpu_name, "capacity_bytes": self.capacity_bytes},
                "stages": [s.to_dict() for s in self.stages],
                "peak_bytes": self.peak_bytes,
                "notes": list(self.notes),
                "assumed": [dict(a) for a in self.assumed],
                "host": [n.to_dict() for n in self.host],
                "checkpoint": self.checkpoint.to_dict() if self.checkpoint else None}
