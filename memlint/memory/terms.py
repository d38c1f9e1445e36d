"""Terms and their sums per phase and per pipeline stage (the Estimate is in memory/result.py);
the per-token items an activations Term is made of.

Every number memlint prints is a sum of `Term`s; each carries its formula, the inputs substituted
into it, and a one-line source, so `--explain` can show the derivation and tests can pin it.
"""
from __future__ import annotations

from memlint.records import field, record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

# The fixed component vocabulary of the JSON output (DESIGN.md).
COMPONENTS = ("weights", "gradients", "optimizer", "activations", "logits", "buffers", "vision",
              "runtime")


# Runtime terms inside PyTorch's reserved pool (the others are outside the caching allocator):
# the flat `runtime.allocator` fraction and the modeled `runtime.allocator.*` (memory/allocator.py).
RESERVED_TERMS = frozenset({"runtime.allocator"})
RESERVED_PREFIX = "runtime.allocator."


def is_reserved_term(name: str) -> bool:
    """True for the terms reserved by the caching allocator but not allocated."""
    return name in RESERVED_TERMS or name.startswith(RESERVED_PREFIX)


@record(frozen=True)
class Term:
    name: str
    component: str
    bytes: int
    formula: str
    inputs: dict[str, object] = field(default_factory=dict)
    source: str = ""

    def __post_init__(self) -> None:
        if self.component not in COMPONENTS:
            raise ValueError(f"unknown component {self.component!r}")
        if not isinstance(self.bytes, int) or isinstance(self.bytes, bool):
            raise TypeError(f"term {self.name}: bytes must be an int, got {self.bytes!r}")

    def to_dict(self) -> dict:
        return {"name": self.name, "component": self.component, "bytes": self.bytes,
                "formula": self.formula, "inputs": dict(self.inputs), "source": self.source}


@record(frozen=True)
class Item:
    """One named share of an activations Term, per token: a saved tensor (or group) of a layer.

    Not a term of its own: an activations Term is layers × Σ item.bytes_per_token(T) × tokens,
    and lists its items under `inputs["saved"]` (what --explain and the JSON show). Built by
    memory/activations.py and activations_eager.py."""

    name: str
    per_token: float        # bytes per token
    per_token_pair: float = 0.0  # bytes per token per attended position (T x T tensors)

    def bytes_per_token(self, seq: int) -> float:
        """Bytes per token when each token attends to `seq` positions."""
        return self.per_token + self.per_token_pair * seq


@record(frozen=True)
class Phase:
    """What a stage holds at one moment of the step (forward end, backward, optimizer step)."""

    name: str
    terms: tuple[Term, ...]

    @property
    def total(self) -> int:
        return sum(term.bytes for term in self.terms)

    @property
    def allocated_bytes(self) -> int:
        """Live tensors in this phase (see StageEstimate.allocated_bytes)."""
        return allocated_of(self.terms)

    @property
    def reserved_bytes(self) -> int:
        """`allocated_bytes` plus the caching allocator's slack (StageEstimate.reserved_bytes)."""
        return reserved_of(self.terms)

    @property
    def device_bytes(self) -> int:
        """Everything on the device in this phase: `total`."""
        return self.total


def allocated_of(terms) -> int:
    """Of a phase's terms: live tensors, everything PyTorch's caching allocator hands out (every
    term but `runtime`)."""
    return sum(term.bytes for term in terms if term.component != "runtime")


def reserved_of(terms) -> int:
    """Of a phase's terms: `allocated_bytes` plus the caching allocator's rounding and
    fragmentation (`runtime.allocator*`)."""
    return allocated_of(terms) + sum(t.bytes for t in terms if is_reserved_term(t.name))


@record(frozen=True)
class StageEstimate:
    stage: int
    layers: int
    phase: str            # the phase of the peak
    terms: tuple[Term, ...]   # the terms at the peak; they add up to total_bytes exactly
    phases: tuple[Phase, ...] = ()   # every phase considered, for --explain
    host_terms: tuple[Term, ...] = ()  # CPU/NVMe memory of offload, reported apart from GPU memory

    @property
    def total_bytes(self) -> int:
        """The device total (= `device_bytes`): the number the OOM verdict compares with the GPU."""
        return sum(term.bytes for term in self.terms)

    @property
    def allocated_bytes(self) -> int:
        """Live tensors at the peak, everything PyTorch's caching allocator hands out (Megatron's
        `mem-max-allocated-bytes`, `torch.cuda.max_memory_allocated()`): every term but `runtime`."""
        return allocated_of(self.terms)

    @property
    def reserved_bytes(self) -> int:
        """`allocated_bytes` plus the caching allocator's rounding and fragmentation
        (`runtime.allocator*`): torchtitan's max reserved, `torch.cuda.max_memory_reserved()`."""
        return reserved_of(self.terms)

    @property
    def held_bytes(self) -> int:
        """`device_bytes` less the allocator's modeled cached idle blocks (`runtime.allocator.*`),
        which it gives back on an out-of-memory retry: what a headroom margin is kept beside."""
        return self.total_bytes - sum(t.bytes for t in self.terms
                                      if t.name.startswith(RESERVED_PREFIX))

    @property
    def device_bytes(self) -> int:
        """`reserved_bytes` plus what lives outside PyTorch's allocator (CUDA context, NCCL):
        what nvidia-smi shows for the process."""
        return self.total_bytes

    def components(self) -> dict:
        out = {name: 0 for name in COMPONENTS}
        for term in self.terms:
            out[term.component] += term.bytes
        return {name: value for name, value in out.items() if value or name in COMPONENTS[:4]}

    def term(self, name: str) -> Optional[Term]:
        for term in self.terms:
            if term.name == name:
                return term
        return None

    def to_dict(self) -> dict:
        return {"stage": self.stage, "layers": self.layers, "phase": self.phase,
                "components": self.components(), "allocated_bytes": self.allocated_bytes,
                "reserved_bytes": self.reserved_bytes, "device_bytes": self.device_bytes,
                "total_bytes": self.total_bytes,
                "terms": [t.to_dict() for t in self.terms],
                "phases": {p.name: p.total for p in self.phases},
                "host_terms": [t.to_dict() for t in self.host_terms]}
