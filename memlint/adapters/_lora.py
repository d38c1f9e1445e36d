"""Which linears a LoRA run adapts, from the target names a trainer config gives (PEFT
`target_modules`: axolotl `lora_target_modules`, TRL `lora_target_modules`, LLaMA-Factory
`lora_target`), as the memory model's `lora_targets` kinds (memory/params.py
lora_params_per_layer): qkvo, all-linear, all-linear+experts."""
from __future__ import annotations

import re

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any

#: Attention projections by the names of the families memlint counts (Llama/Mistral/Qwen,
#: Phi-3's fused qkv, GPT-NeoX's query_key_value/dense, GPT-2's c_attn, out_proj).
ATTENTION_MODULES = frozenset({"q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj",
                               "query_key_value", "c_attn", "dense", "out_proj", "self_attn",
                               "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj"})


def _names(value: Any) -> list:
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [part for part in re.split(r"[,\s]+", str(value).strip()) if part]


def target_kind(value: Any) -> str:
    """qkvo when every name is an attention projection; all-linear+experts when a name reaches
    into the routed experts (`experts.gate_projs.[0-9]+$`, not `shared_expert...`); otherwise
    all-linear ("all", "all-linear", MLP or shared-expert projections)."""
    names = _names(value)
    lowered = [n.lower() for n in names]
    if not lowered or any(n in ("all", "all-linear", "all_linear") for n in lowered):
        return "all-linear"
    if any("experts" in n and "shared" not in n for n in lowered):
        return "all-linear+experts"
    leaves = [re.sub(r"[^a-z0-9_]+$", "", n.split(".")[-1]) for n in lowered]
    if all(leaf in ATTENTION_MODULES for leaf in leaves):
        return "qkvo"
    return "all-linear"
