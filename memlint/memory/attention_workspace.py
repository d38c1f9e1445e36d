"""cuDNN's deterministic attention backward: the dP matrix it materializes in its workspace.

Transformer Engine's DotProductAttention runs deterministically when NVTE_ALLOW_NONDETERMINISTIC_ALGO
is 0 or torch's deterministic algorithms are on (Megatron's --deterministic-mode turns them on and
requires the variable to be 0: megatron/training/determinism.py, megatron/core/extensions/
transformer_engine.py at NVIDIA/Megatron-LM@d98e8a64). On Hopper and later TE prefers its fused
(cuDNN) backend to flash-attn; before sm90 it refuses the fused backend for a deterministic backward
(transformer_engine/pytorch/attention/dot_product_attention/utils.py get_attention_backend, "Filter:
Determinism" and "give FusedAttention preference on Hopper+", NVIDIA/TransformerEngine@d0067d0d).
TE asks cuDNN for a deterministic backward (fused_attn_f16_arbitrary_seqlen.cu
`set_deterministic_algorithm`), and cuDNN frontend then forces the "dP workspace" implementation
(include/cudnn_frontend/node/scaled_dot_product_flash_attention.h, "Force dP workspace
implementation if ... the user force requests deterministic algorithm", NVIDIA/cudnn-frontend@
3929da2e; since frontend 1.5.0): the backward writes dP, b · h_q · s_q · s_kv elements of 2 bytes
with both lengths rounded up to 64 (the same file's `required_dp_workspace_bytes`), into the
workspace TE allocates through PyTorch for each call.

The graph's dimensions are not always the run's: with THD (packed) tensors TE builds the graph for a
quantized bucket so that one plan serves many batches: the batch becomes 32 up to 32 sequences
(else the next power of two), the token count 1024 up to 1024 tokens (else the next power of two)
(transformer_engine/common/fused_attn/utils.cu get_max_batch_size / get_max_tokens;
fused_attn_f16_arbitrary_seqlen.cu `b = max_b; s_q = max_t_q`). A one-sample packed batch thus
gets a 32-sample workspace. Megatron's LLaVA runs its language model on THD tensors under context
parallelism with --use-packed-sequence or when the sequence needs padding (pretrain_vlm.py,
megatron/core/models/multimodal/context_parallel.py get_packed_seq_params).

The workspace exists while one layer's attention backward runs: the last layer's comes first, when
every saved tensor of the step is still held but the logits (freed by the loss and output-layer
backward) and that layer's tensors saved after its attention (freed by their own backward) are not.
`backward_attention_terms` describes that moment as a phase of its own.
"""
from __future__ import annotations

import math

from memlint.memory.activations import FLASH_ITEM
from memlint.memory.model import Model
from memlint.memory.runtime import compute_capability
from memlint.memory.terms import Term

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

SOURCE = ("NVIDIA/cudnn-frontend@3929da2e include/cudnn_frontend/node/"
          "scaled_dot_product_flash_attention.h (deterministic: dP workspace, "
          "required_dp_workspace_bytes); NVIDIA/TransformerEngine@d0067d0d transformer_engine/"
          "common/fused_attn/fused_attn_f16_arbitrary_seqlen.cu, utils.cu get_max_batch_size / "
          "get_max_tokens; transformer_engine/pytorch/attention/dot_product_attention/utils.py")


def _quantize(n: int, floor_log2: int, pow2_log2: int, step: int) -> int:
    """2**floor_log2 up to it, the next power of two up to 2**pow2_log2, else a multiple of
    `step`: TE's bucketing of THD graph sizes."""
    log2 = math.ceil(math.log2(max(1, n)))
    if log2 <= floor_log2:
        return 2 ** floor_log2
    if log2 <= pow2_log2:
        return 2 ** log2
    return (n + step - 1) // step * step


def bucket_batch(batch: int) -> int:
    """TE's quantized batch of a THD graph (utils.cu get_max_batch_size: 32, powers of two up
    to 512, then steps of 512)."""
    return _quantize(batch, 5, 9, 512)


def bucket_tokens(tokens: int) -> int:
    """TE's quantized token count of a THD graph (utils.cu get_max_tokens: 1024, powers of
    two up to 32k, then steps of 32k)."""
    return _quantize(tokens, 10, 15, 32768)


def _round64(n: int) -> int:
    return (n + 63) // 64 * 64


def dp_workspace(model: Model) -> Optional[Term]:
    """The dP workspace of one deterministic cuDNN attention backward (module doc); None when the
    run's attention does not take that path."""
    conv, tr, arch = model.conv, model.tr, model.arch
    if not (conv.te_spec and conv.deterministic_attention and arch.layout is None):
        return None
    if conv.attention_backend not in ("auto", "fused") or tr.attention != "flash":
        return None
    head_dim = arch.head_dim or arch.hidden // max(1, arch.heads)
    if head_dim % 8 or head_dim > 256:
        return None  # TE's fused backend wants head_dim % 8 == 0 and at most 256
    cc = compute_capability(model.scenario.hardware.gpu)
    if cc is None or tuple(cc) < (9, 0):
        return None  # TE disables FusedAttention for a deterministic backward before sm90
    heads = math.ceil(arch.heads / model.topo.tp)
    batch, seq = tr.micro_batch, model.seq_local
    if conv.thd_attention:
        b, s = bucket_batch(batch), bucket_tokens(batch * seq)
        how = (f"THD bucket: batch {batch} -> {b}, tokens {batch} × {seq} = {batch * seq:,} "
               f"-> {s:,}")
    else:
        b, s = batch, seq
        how = f"B {batch}, T/cp {seq:,}"
    s64 = _round64(s)
    size = b * heads * s64 * s64 * 2
    return Term("buffers.cudnn_dp_workspace", "buffers", size,
                f"2 B × b {b} × heads/tp {heads} × s_q {s64:,} × s_kv {s64:,} (cuDNN's "
                f"deterministic attention backward writes dP into its workspace; {how})",
                {"b": b, "heads": heads, "s_q": s64, "s_kv": s64, "thd": conv.thd_attention},
                SOURCE)


def backward_attention_terms(model: Model, forward_terms: list) -> Optional[list]:
    """The terms of the moment the last layer's attention backward runs with the dP workspace,
    from forward_end's: without the logits and the last layer's tensors saved after attention,
    plus the workspace. None when the run does not take that path."""
    workspace = dp_workspace(model)
    if workspace is None:
        return None
    layer = next((t for t in forward_terms if t.name == "activations"), None)
    saved = (layer.inputs.get("saved") or {}) if layer is not None else {}
    names = list(saved)
    after = (sum(saved[name] for name in names[names.index(FLASH_ITEM) + 1:])
             if FLASH_ITEM in saved else 0.0)
    tokens = model.tr.micro_batch * model.seq_local
    freed = int(round(after * tokens))
    out = []
    for term in forward_terms:
        if term.component == "logits":
            continue
        if term is layer and freed:
            term = Term(term.name, term.component, term.bytes - freed,
                        f"({term.formula}) − {after:,.1f} B/token × {tokens:,} tokens (the last "
                        "layer's tensors saved after its attention: freed by their backward)",
                        dict(term.inputs), term.source)
        out.append(term)
    return out + [workspace]
