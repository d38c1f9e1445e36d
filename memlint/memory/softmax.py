"""Unfused attention softmax in Megatron-LM: what it keeps, and the peak while it runs.

Without a flash or cuDNN kernel (a head size that is no multiple of 8 under Transformer Engine,
or Megatron's local spec), attention materialises its T_q × T_k scores per head. Which softmax
runs decides the bytes per score element:
- the fused kernel (`FusedScaleMaskSoftmax.is_kernel_available`: 16 < T_k <= 16384, T_q a
  multiple of 4, B·heads/tp a multiple of 4; Transformer Engine also wants T_k a multiple of 8,
  megatron/core/fusions/fused_softmax.py, transformer_engine/pytorch/attention/
  dot_product_attention/softmax.py) keeps its c-byte output;
- otherwise torch's softmax (`forward_torch_softmax`), in fp32 under Transformer Engine's
  unfused attention, --attention-softmax-in-fp32 or --apply-query-key-layer-scaling: softmax
  keeps its fp32 output and the next bmm its c-byte cast; without fp32, the c-byte output.

The forward_end phase counts what stays saved. While the last layer's softmax runs, more is
alive at once (softmax_peak_terms): the c-byte scores the bmm wrote (held by the attention
function until it returns), and on the torch path the fp32 copy of them and the masked copy
(`mask_func` is out of place) beside the saved outputs. Nothing after the softmax in that layer
exists yet, and neither do the logits: softmax_peak_terms describes that moment as its own phase.
"""
from __future__ import annotations

import math

from memlint.memory.activations import SCORES_ITEM
from memlint.memory.model import Model
from memlint.memory.terms import Term

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional



def softmax_path(model: Model, seq: int, heads: int, flash: bool) -> Optional[str]:
    """'fused', 'torch-fp32' or 'torch' for Megatron's unfused attention; None otherwise."""
    conv = model.conv
    if flash or not conv.megatron_modules:
        return None
    batches = model.tr.micro_batch * math.ceil(heads / model.topo.tp)
    if 16 < seq <= 16384 and seq % (8 if conv.te_spec else 4) == 0 and batches % 4 == 0:
        return "fused"
    return "torch-fp32" if conv.softmax_in_fp32 else "torch"


def softmax_bytes(model: Model, seq: int, heads: int, flash: bool) -> Optional[float]:
    """Bytes per attention-score element the softmax keeps for the backward (module doc)."""
    path = softmax_path(model, seq, heads, flash)
    if path is None:
        return None
    c = model.dt.compute
    return float(4 + c) if path == "torch-fp32" else float(c)


def live_bytes(model: Model, path: str) -> float:
    """Bytes per score element alive beside the saved ones while the softmax runs."""
    c = model.dt.compute
    if path == "fused":
        return float(c)          # the scores the bmm wrote
    if path == "torch-fp32":
        return float(c + 4 + 4)  # the scores, their fp32 copy, the masked (causal) copy
    return float(c + c)          # the scores, the masked copy


def softmax_peak_terms(model: Model, forward_terms: list, seq_local: int) -> Optional[list]:
    """The terms of the moment the last layer's unfused softmax runs, from forward_end's:
    without the logits and the last layer's tensors saved after its softmax, plus the softmax's
    live copies of one layer's scores (B · heads/tp · T_q · T_k elements). None when attention is
    fused or flash."""
    layer = next((t for t in forward_terms if t.name == "activations"), None)
    saved = (layer.inputs.get("saved") or {}) if layer is not None else {}
    if SCORES_ITEM not in saved:
        return None
    arch, tr = model.arch, model.tr
    path = softmax_path(model, seq_local, arch.heads, False)
    if path is None:
        return None
    names = list(saved)
    tokens = tr.micro_batch * seq_local
    after = sum(saved[name] for name in names[names.index(SCORES_ITEM) + 1:])
    not_yet = int(round(after * tokens))
    heads = math.ceil(arch.heads / model.topo.tp)
    elements = tr.micro_batch * heads * seq_local * seq_local
    per = live_bytes(model, path)
    out = [t for t in forward_terms if t.component != "logits"]
    out = [Term(t.name, t.component, t.bytes - not_yet,
                f"({t.formula}) − {after:,.1f} B/token × {tokens:,} tokens (the last layer "
                "after its softmax: not yet computed)", dict(t.inputs), t.source)
           if t is layer else t for t in out]
    out.append(Term(
        "activations.softmax_live", "activations", int(per * elements),
        f"{per:g} B × B {tr.micro_batch} × heads/tp {heads} × T {seq_local} × T {seq_local} "
        f"({path} softmax of the last layer: its scores"
        + (", their fp32 copy and the masked copy" if path == "torch-fp32" else
           ", the masked copy" if path == "torch" else "") + ", beside the saved outputs)",
        {"elements": elements, "bytes_per_element": per, "path": path},
        "megatron/core/fusions/fused_softmax.py; transformer_engine/pytorch/attention/"
        "dot_product_attention/softmax.py forward_torch_softmax, backends.py "
        "UnfusedDotProductAttention"))
    return out
