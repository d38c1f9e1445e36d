"""Megatron-LM's hybrid layer pattern (`--hybrid-layer-pattern`): its symbols and separators
(megatron/core/models/hybrid/hybrid_layer_allocation.py `Symbols`, NVIDIA/Megatron-LM@d98e8a64dd):
M Mamba, G GatedDeltaNet, * attention, D DSA attention, + MLA, - MLP, E MoE; '|' separates
pipeline segments, '/' the multi-token-prediction patterns that follow the main one."""
from __future__ import annotations

#: every layer symbol Megatron accepts
SYMBOLS = frozenset("MG*D+-E")
#: the symbols memlint counts (memory/megatron_hybrid.py)
COUNTED = frozenset("M*-E")
PIPE = "|"
MTP = "/"


def main_pattern(pattern: str) -> str:
    """The main decoder pattern: before the first '/'."""
    return pattern.split(MTP)[0]


def segments(pattern: str) -> list:
    """The main pattern's '|'-separated pipeline segments (select_pipeline_segment)."""
    return main_pattern(pattern).split(PIPE)


def mtp_depths(pattern: str) -> int:
    """How many MTP patterns follow the main one."""
    return len([p for p in pattern.split(MTP)[1:] if p])


def uncounted(pattern: str) -> str:
    """The layer symbols of the main pattern that memlint does not count ('' when none)."""
    main = main_pattern(pattern).replace(PIPE, "")
    return "".join(sorted(set(main) & (SYMBOLS - COUNTED)))
