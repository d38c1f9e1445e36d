"""Saved activations per decoder layer, recompute, attention kernels, SP/CP, in-flight micro-batches.

Three per-layer models, chosen by the assumption `activations.model` and the framework:
- `seed` (seed article 000 CH 1.4, 5.2): C_act · B · T · d with C_act = 34 (FlashAttention), plus
  5 · H · T / d without it, 2 under full recompute, the every-K selective form of CH 5.2.
- `fused` (Megatron-LM, DeepSpeed, torchtitan: fused norms and attention): Korthikanti et al. 2022,
  "Reducing Activation Recomputation in Large Transformer Models", section 4, generalized tensor
  by tensor to GQA, gated MLPs, MoE top-k and MLA; TP divides the tensor-parallel region and SP
  the rest (Table 2).
- `hf` (transformers modules run eagerly, as in `../shared/calibration`): the tensors autograd
  saves for each op of the HF modeling code (RMSNorm's fp32 upcast, RoPE outputs, SDPA's
  output and log-sum-exp, eager attention's fp32 softmax, the SwiGLU / GeLU intermediates, dropout
  masks), each an `Item` below so `--explain` lists them.

All per-layer functions return bytes per token (B·T of the local micro-batch); callers multiply.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    """One saved tensor (or group) of a layer: bytes per token, or per token per key position."""

    name: str
    per_token: float        # bytes per token
    per_token_pair: float = 0.0  # bytes per token per attended position (T x T tensors)


def layer_bytes(items, tokens: int, seq: int) -> int:
    return int(sum(i.per_token * tokens + i.per_token_pair * tokens * seq for i in items))


# ---------------------------------------------------------------------------------------------
# seed


def seed_layer_coefficient(c_act: float, c_scores: float, heads: int, seq: int, hidden: int,
                           flash: bool) -> float:
    """C_act + 5·H·T/d without FlashAttention (seed 000 CH 1.4.2)."""
    return c_act if flash else c_act + c_scores * heads * seq / hidden


def seed_stage_units(layers: int, recompute: str, every: int, c_act: float, c_full: float) -> float:
    """Sum over a stage's layers of the per-layer coefficient (seed 000 CH 5.2).

    full: 2 per layer; selective every K: (34 + 2(K-1)) per K layers (the strict form of CH 5.2).
    """
    if recompute == "full":
        return c_full * layers
    if recompute == "selective" and every > 1:
        kept = math.ceil(layers / every)
        return c_act * kept + c_full * (layers - kept)
    return c_act * layers


def basics_layer_bytes(b: int, s: int, d: int, heads: int, kv_heads: int, ffn: int) -> dict:
    """Seed article 003 section 3.3: attention (8 + 4·n_kv/n_h)·bsd + 5·b·s²·n_h, FFN 8·bs·d_ffn +
    2·bsd; total (10 + 4·n_kv/n_h)·bsd + 8·bs·d_ffn + 5·b·s²·n_h."""
    attention = 8 * b * s * d + 4 * kv_heads / heads * b * s * d + 5 * b * s * s * heads
    ffn_bytes = 8 * b * s * ffn + 2 * b * s * d
    return {"attention": attention, "ffn": ffn_bytes, "total": attention + ffn_bytes,
            "scores": 5 * b * s * s * heads}


def kv_for_backward_bytes(layers: int, kv_heads: int, head_dim: int, tokens: int,
                          dtype_bytes: int = 2) -> int:
    """K and V kept for the attention backward: 2 tensors × L × H_kv × D × tokens × 2 B
    (seed 000 CH 4.1, 8.2). Already inside C_act = 34; exposed to size visual tokens' share."""
    return 2 * dtype_bytes * layers * kv_heads * head_dim * tokens


def cp_needed(activation_bytes_at_cp1: float, available_bytes: float) -> int:
    """Smallest context-parallel size that fits: cp >= activations / available (seed 000 CH 4.3)."""
    if available_bytes <= 0:
        return 0
    return max(1, math.ceil(activation_bytes_at_cp1 / available_bytes - 1e-9))


# ---------------------------------------------------------------------------------------------
# shapes shared by the precise models


@dataclass(frozen=True)
class Shapes:
    d: int       # hidden
    dq: int      # query width = heads · head_dim (MLA: heads · (nope + rope))
    dk: int      # key width
    dv: int      # value width (keys/values of all kv heads)
    heads: int
    do: int      # attention output width = heads · v_head_dim (the o-proj input)
    ffn: int     # dense MLP intermediate
    gated: bool
    layernorm: bool
    moe_ffn: int = 0
    top_k: int = 0
    experts: int = 0
    shared_ffn: int = 0
    mla_latent: int = 0   # q_lora_rank + kv_lora_rank + rope dim (latents saved by MLA)


def shapes(arch, moe_layer: bool) -> Shapes:
    if arch.mla is not None:
        m = arch.mla
        dq = arch.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        dk = dq
        dv = arch.heads * m.v_head_dim
        latent = m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim
    else:
        dq = arch.heads * arch.head_dim
        dk = dv = arch.kv_heads * arch.head_dim
        latent = 0
    do = arch.heads * (arch.mla.v_head_dim if arch.mla is not None else arch.head_dim)
    moe = arch.moe if (moe_layer and arch.moe is not None) else None
    return Shapes(d=arch.hidden, dq=dq, dk=dk, dv=dv, heads=arch.heads, do=do, ffn=arch.ffn,
                  gated=arch.gated_mlp, layernorm=arch.norm == "layernorm",
                  moe_ffn=moe.expert_ffn if moe else 0, top_k=moe.top_k if moe else 0,
                  experts=moe.num_experts if moe else 0, shared_ffn=moe.shared_ffn if moe else 0,
                  mla_latent=latent)


# ---------------------------------------------------------------------------------------------
# fused (Megatron-LM / DeepSpeed / torchtitan)


def fused_layer_items(sh: Shapes, c: int, flash: bool, tp: int, sp: bool, hidden_dropout: bool,
                      attention_dropout: bool, selective: bool) -> list:
    """Korthikanti et al. 2022 section 4.1, tensor by tensor (c bytes per element; masks 1 byte).

    Tensor-parallel region tensors divide by tp; LayerNorm/dropout-region tensors divide by tp only
    with sequence parallelism (Table 2). GPT-3 (dq=dk=dv=d, ffn=4d, plain GeLU, dropout) gives 34.
    """
    rep = tp if sp else 1  # the replicated (norm / dropout) region
    items = [
        Item("norm1 input", c * sh.d / rep),
        Item("qkv input (norm1 output)", c * sh.d / rep),
        Item("q, k, v", c * (sh.dq + sh.dk + sh.dv) / tp),
    ]
    if sh.mla_latent:
        items.append(Item("MLA latents", c * sh.mla_latent / rep))
    if flash:
        items.append(Item("attention output (flash) + log-sum-exp", (c * sh.do + 4 * sh.heads) / tp))
    else:
        if not selective:
            scores = c * sh.heads + (sh.heads if attention_dropout else 0) + (
                c * sh.heads if attention_dropout else 0)
            items.append(Item("attention scores, softmax, dropout (T×T)", 0.0, scores / tp))
        items.append(Item("attention output (o-proj input)", c * sh.do / tp))
    if hidden_dropout:
        items.append(Item("attention dropout mask", sh.d / rep))
    items.append(Item("norm2 input", c * sh.d / rep))
    items.append(Item("mlp input (norm2 output)", c * sh.d / rep))
    if sh.top_k:
        k = sh.top_k
        width = (2 if sh.gated else 1) * sh.moe_ffn
        items.append(Item("router logits and probabilities (fp32)", 8 * sh.experts / rep))
        items.append(Item(f"routed tokens: top-{k} copies of the input", c * sh.d * k / rep))
        items.append(Item(f"experts fc1 output (top-{k})", c * width * k / tp))
        items.append(Item(f"experts fc2 input (top-{k})", c * sh.moe_ffn * k / tp))
        items.append(Item(f"experts output before weighting (top-{k})", c * sh.d * k / rep))
        if sh.shared_ffn:
            items.append(Item("shared expert fc1 output", c * (2 if sh.gated else 1) * sh.shared_ffn / tp))
            items.append(Item("shared expert fc2 input", c * sh.shared_ffn / tp))
    else:
        width = (2 if sh.gated else 1) * sh.ffn
        items.append(Item("fc1 output (activation input)", c * width / tp))
        items.append(Item("fc2 input (activation output)", c * sh.ffn / tp))
    if hidden_dropout:
        items.append(Item("mlp dropout mask", sh.d / rep))
    return items


# ---------------------------------------------------------------------------------------------
# hf (transformers modules, eager autograd)


def hf_layer_items(sh: Shapes, c: int, attention: str, autocast: bool, device: str,
                   dropout_attn: float, dropout_hidden: float) -> list:
    """Tensors autograd keeps for one transformers decoder layer (per token).

    Derived op by op from the modeling code (LlamaDecoderLayer / MixtralDecoderLayer /
    GPT2Block), checked against `../shared/calibration/records.json` per-layer bytes.
    """
    items = []
    mask_bytes = 1 if device == "cuda" else c  # dropout mask: bool on CUDA, input dtype on CPU
    if sh.layernorm:
        # nn.LayerNorm saves its input (the residual stream), mean and rstd, and its output is
        # saved by the next linear.
        norm = Item("layer norms: input, output, mean/rstd", 2 * (2 * c * sh.d + 8))
    elif c == 4:
        # RMSNorm in fp32: the residual input, x·rsqrt, the weighted output, rsqrt.
        norm = Item("RMSNorms: residual input, normalized, weighted output, rsqrt",
                    2 * (12 * sh.d + 4))
    else:
        # RMSNorm upcasts to fp32: x_fp32 (4d), normalized (c·d), weighted output (c·d).
        norm = Item("RMSNorms: fp32 upcast, normalized, weighted output, rsqrt",
                    2 * ((4 + 2 * c) * sh.d + 4))
    items.append(norm)
    if c != 4 and not sh.layernorm:
        items.append(Item("residual stream kept alive (low precision)", c * sh.d))
    eager = attention == "eager" or sh.mla_latent or sh.layernorm
    repeated = sh.dk < sh.dq and eager
    items.append(Item("q after RoPE", c * sh.dq))
    items.append(Item("k after RoPE" + (", repeated to all heads" if repeated else ""),
                      c * (sh.dq if repeated else sh.dk)))
    items.append(Item("v" + (", repeated to all heads" if repeated else ""),
                      c * (sh.dq if repeated else sh.dv)))
    if sh.mla_latent:
        items.append(Item("MLA latents and their norms", 3 * c * sh.mla_latent))
    if eager:
        items.append(Item("softmax probabilities (fp32)", 0.0, 4 * sh.heads))
        if c != 4:
            items.append(Item("probabilities cast to compute dtype", 0.0, c * sh.heads))
        if dropout_attn > 0:
            items.append(Item("attention dropout mask and output", 0.0,
                              (mask_bytes + c) * sh.heads))
        items.append(Item("attention output (transposed copy, o-proj input)", c * sh.do))
    else:
        items.append(Item("attention output + log-sum-exp (memory-efficient SDPA)",
                          c * sh.do + 4 * sh.heads))
        if c != 4 and device == "cpu":
            items.append(Item("attention output relayout copy (CPU reduced-precision kernel)",
                              c * sh.do))
    if sh.layernorm or c == 4:
        pass  # residual stream counted with the norms
    if dropout_hidden > 0:
        items.append(Item("residual dropout masks and outputs", 2 * (mask_bytes + c) * sh.d))
    if sh.top_k:
        k = sh.top_k
        items.append(Item("router logits + softmax (fp32)", (c + 8) * sh.experts))
        items.append(Item(f"expert inputs gathered (top-{k})", c * sh.d * k))
        items.append(Item(f"expert SwiGLU intermediates (top-{k})", 4 * c * sh.moe_ffn * k))
        items.append(Item(f"expert outputs and routing-weighted copies (top-{k})", 2 * c * sh.d * k))
        if sh.shared_ffn:
            items.append(Item("shared expert intermediates", 4 * c * sh.shared_ffn))
    elif sh.gated:
        items.append(Item("SwiGLU: gate, up, act(gate), product", 4 * c * sh.ffn))
    else:
        # GPT-2's gelu_new is written with python ops: input, pow input, tanh, 0.5·x, 1+tanh.
        items.append(Item("MLP: fc output and GeLU(tanh) intermediates, fc2 input",
                          5 * c * sh.ffn))
    return items


def recompute_items(c: int, d: int, tp: int, sp: bool) -> list:
    """Full recompute keeps only each layer's input (seed 000 CH 5.2: 'the input hidden state')."""
    return [Item("layer input (checkpoint)", c * d / (tp if sp else 1))]


def inflight_microbatches(stage: int, pp: int, vpp: int, microbatches: int) -> float:
    """Micro-batches whose activations a stage holds at its peak.

    1F1B: stage i holds min(pp - i, m) (Narayanan et al. 2021). Interleaved with vpp virtual
    stages: the first stage holds pp·(1 + (pp-1)/(pp·vpp)) (Megatron-LM
    theoretical_memory_usage.py); later stages scale with (pp - i).
    """
    if pp <= 1:
        return 1
    base = pp - stage
    if vpp > 1:
        base = base * (1 + (pp - 1) / (pp * vpp))
    if microbatches:
        base = min(base, microbatches)
    return max(1.0, base)
