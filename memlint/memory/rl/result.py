"""The Estimate of an RL step: the Estimate with what the RL rules read besides the phases.

`RLSummary` keeps the rollout engine's budget (KV pool, concurrency, vLLM's start-up refusal),
the KV demand of one rollout, and, for micro-batches that hold only the real tokens (padding
removed, packed), each length-dependent phase's total at the shortest sequences: a phase over
the GPU at full-length sequences but not at short ones OOMs only on long batches, and the rules
say up to which average sequence length it fits instead of crying out-of-memory.
"""
from __future__ import annotations

from memlint.memory.result import Estimate
from memlint.memory.rl.names import LENGTH_INDEPENDENT
from memlint.records import field, record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional


@record(frozen=True)
class RLSummary:
    framework: str
    placement: str
    groups: dict = field(default_factory=dict)   # stage -> which roles its GPUs hold
    engine: Any = None                  # EngineBudget of one engine GPU, or None
    sleep_level: int = 0
    engine_gpus: int = 0                # GPUs of one engine (tp x pp x dp)
    engines: int = 0                    # engines in the run
    kv_demand_tokens: int = 0           # KV tokens one engine needs with every sequence at full length
    sequences_per_engine: int = 0
    padding_free: bool = False
    prompt_len: int = 0
    response_len: int = 0
    # padding-free runs only: what `floors` and `fits_up_to` read, estimated on first use
    # (memory/rl/step.py _Lengths)
    lengths: Any = field(default=None, repr=False, compare=False)

    @property
    def sequence_len(self) -> int:
        return self.prompt_len + self.response_len

    @property
    def floors(self) -> dict:
        """(stage, phase) -> bytes with one-token prompts and responses (padding-free runs)."""
        return self.lengths.floors() if self.lengths is not None else {}

    @property
    def fits_up_to(self) -> dict:
        """(stage, phase) -> the longest average sequence at which it fits (the phases over
        the GPU that fit at the shortest sequences)."""
        return self.lengths.fits_up_to() if self.lengths is not None else {}

    def break_even(self, stage: int, phase, capacity: int) -> Optional[int]:
        """The average sequence length (prompt + response tokens) up to which `phase` of `stage`
        fits: 0 when it does not fit even at the shortest; None when the phase does not depend
        on lengths or fits at full length (found by bisection on the estimate)."""
        if not self.padding_free or phase.name in LENGTH_INDEPENDENT or phase.total <= capacity:
            return None
        floor = self.floors.get((stage, phase.name))
        if floor is None:
            return None
        if floor > capacity:
            return 0
        return self.fits_up_to.get((stage, phase.name))


@record(frozen=True)
class RLEstimate(Estimate):
    rl: Optional[RLSummary] = None
