"""Megatron's fine-grained activation offloading (`--fine-grained-activation-offloading
--offload-modules ...`), read at NVIDIA/Megatron-LM@d98e8a64
(megatron/core/pipeline_parallel/fine_grained_activation_offload.py, transformer/attention.py,
transformer/moe/experts.py, docs/user-guide/features/fine_grained_activation_offloading.md).

Each listed module runs inside saved-tensor hooks: every tensor autograd saves while the module
runs (its input and what it keeps inside) is copied to pinned host memory at the end of the
module's forward, if it has at least `--min-offloaded-tensor-size` elements (default 1M), and
reloaded before the module's backward. After the warm-up the manager keeps one group of each
module name on the GPU, the last one of the chunk whose backward runs first
(`post_warmup_callback`: the offload margin), so that reloading never stalls the backward.

Which saved tensors each module holds (memory/activations.py item names):
attn_norm the input norm's input (a norm of its own: MLA, the local spec; Transformer Engine's
layers fuse it into qkv_linear), qkv_linear the qkv GEMM's input (and MLA's latents),
core_attn q, k, v, the scores and softmax or the flash output with its log-sum-exp, attn_proj the
output projection's input, mlp_norm the pre-MLP norm's input (MoE layers, the local spec),
expert_fc1 the routed tokens, moe_act the experts' activation input and what the routing-weight
multiply keeps. The dense MLP, the router and the shared experts are not offloadable.
"""
from __future__ import annotations

from memlint.memory.activations import SCORES_ITEM
from memlint.memory.terms import Term

SOURCE = ("megatron/core/pipeline_parallel/fine_grained_activation_offload.py "
          "(PipelineOffloadManager, ChunkOffloadHandler.tensor_need_offloading_checker, "
          "post_warmup_callback); transformer/attention.py, transformer/moe/experts.py")

_BY_PREFIX = (
    ("qkv input (norm1 output)", "qkv_linear"), ("MLA latents", "qkv_linear"),
    ("q, k, v", "core_attn"), (SCORES_ITEM, "core_attn"),
    ("attention output (flash)", "core_attn"),
    ("attention output (o-proj input)", "attn_proj"), ("o-proj input", "attn_proj"),
    ("routed tokens", "expert_fc1"), ("experts fc1 output", "moe_act"),
    ("experts activation output", "moe_act"), ("experts gate activation", "moe_act"),
    ("routing weights of the routed tokens", "moe_act"),
)


def module_of(name: str, moe_layer: bool, separate_norm: bool) -> str:
    """The offloadable module that saves the item `name` ('' when none does)."""
    if name == "norm1 input":
        return "attn_norm" if separate_norm else "qkv_linear"
    if name == "norm2 input":
        return "mlp_norm" if (moe_layer or separate_norm) else ""
    for prefix, module in _BY_PREFIX:
        if name.startswith(prefix):
            return module
    return ""


def split_layer(items: list, settings, seq: int, tokens: int, elem_bytes: int, moe_layer: bool,
                separate_norm: bool) -> tuple:
    """(kept, offloaded) bytes per token of one layer's items."""
    kept = offloaded = 0.0
    for item in items:
        per_token = item.bytes_per_token(seq)
        module = module_of(item.name, moe_layer, separate_norm)
        elements = per_token * tokens / max(1, elem_bytes)
        if module in settings.modules and elements >= settings.min_elements:
            offloaded += per_token
        else:
            kept += per_token
    return kept, offloaded


def offload_layer_term(term: Term, per_layer: list, settings, seq: int, tokens: int,
                       elem_bytes: int, inflight: float) -> tuple:
    """Split the stage's layer-activations term into (GPU term, host term).

    per_layer: (items, moe_layer, separate_norm) of each of the stage's layers. GPU: the kept
    tensors of every layer and micro-batch in flight, plus the offload margin (the last layer's
    offloaded tensors of one micro-batch); host: the rest, in pinned memory."""
    kept = offloaded = last = 0.0
    for items, moe_layer, separate_norm in per_layer:
        k, o = split_layer(items, settings, seq, tokens, elem_bytes, moe_layer, separate_norm)
        kept, offloaded, last = kept + k, offloaded + o, o
    fraction = settings.fraction
    moved = offloaded * fraction
    gpu = int(round((kept + offloaded - moved) * tokens * inflight + min(moved, last) * tokens))
    gpu = min(term.bytes, gpu)
    host = max(0, term.bytes - gpu)
    names = ", ".join(sorted(settings.modules))
    gpu_term = Term(
        term.name, term.component, gpu,
        f"{len(per_layer)} layers: kept {kept:,.1f} + offloaded {offloaded:,.1f} B/token × "
        f"(1 − offloaded fraction {fraction:g}) × {tokens:,} tokens × {inflight:g} in flight + "
        f"offload margin {min(moved, last):,.1f} B/token (the last layer, one micro-batch) × "
        f"{tokens:,}  (offloaded modules: {names}; tensors of at least "
        f"{settings.min_elements:,} elements)",
        dict(term.inputs, offload_modules=sorted(settings.modules),
             offloaded_bytes_per_token=offloaded, kept_bytes_per_token=kept),
        term.source + "; " + SOURCE)
    host_term = Term(
        "host.activations_offloaded", "activations", host,
        f"the offloaded modules' saved tensors of {len(per_layer)} layers × {inflight:g} in flight "
        "− the offload margin (pinned host memory)",
        {"offloaded_bytes_per_token": offloaded, "inflight": inflight}, SOURCE)
    return gpu_term, host_term
