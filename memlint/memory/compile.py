"""torch.compile (`compile` scenario key): what memlint records and what it does not model.

torchtitan compiles each transformer block and, by default, the loss (`CompileConfig.components
= ["model", "loss"]`, torchtitan/config/configs.py at pytorch/torchtitan@b5bcd76). Inductor fuses
element-wise chains and AOTAutograd's partitioner chooses which intermediates to save for
backward and which to recompute, so a compiled block or loss usually saves fewer bytes than the
eager modules memlint's activation items describe (memory/activations.py), and a compiled
cross-entropy need not keep the fp32 log-probabilities that eager `ForCausalLMLoss` keeps.
Which tensors the partitioner keeps depends on the graph and the torch version; memlint has no
sourced per-tensor rule for it yet, so the key is read, kept in the scenario (with where it came
from) and reported in the estimate's notes, and the estimate stays eager PyTorch's: for a
compiled run it is expected to be at or above the real peak.
"""
from __future__ import annotations

NOTE = ("compile=true: torch.compile's fused kernels and compiled loss are not modeled; the "
        "activations and logits are eager PyTorch's (usually at or above a compiled run's)")


def compile_notes(training) -> list:
    """Notes for the estimate: what `compile` changes that memlint does not model."""
    return [NOTE] if getattr(training, "compile", False) else []
