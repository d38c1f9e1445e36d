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
from typing import Optional


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
    mla_q_rank: int = 0   # MLA q_lora_rank (0: plain q projection)
    mla_kv_rank: int = 0  # MLA kv_lora_rank
    fp32_router: bool = False  # DeepSeek-V3 router: fp32 linear + sigmoid (DeepseekV3TopkRouter)


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
                  mla_latent=latent,
                  mla_q_rank=arch.mla.q_lora_rank if arch.mla is not None else 0,
                  mla_kv_rank=arch.mla.kv_lora_rank if arch.mla is not None else 0,
                  fp32_router=bool(moe and moe.router_bias))


# ---------------------------------------------------------------------------------------------
# fused (Megatron-LM / DeepSpeed / torchtitan)


def fused_layer_items(sh: Shapes, c: int, flash: bool, tp: int, sp: bool, hidden_dropout: bool,
                      attention_dropout: bool, selective: bool, gemm: Optional[int] = None,
                      etp: Optional[int] = None, softmax_bytes: Optional[float] = None,
                      modules: Optional[frozenset] = None, moe_layer: bool = False,
                      separate_norm1: bool = False) -> list:
    """Korthikanti et al. 2022 section 4.1, tensor by tensor (c bytes per element; masks 1 byte).

    Tensor-parallel region tensors divide by tp; LayerNorm/dropout-region tensors divide by tp only
    with sequence parallelism (Table 2). GPT-3 (dq=dk=dv=d, ffn=4d, plain GeLU, dropout) gives 34.
    `gemm`: bytes of each saved GEMM input when it differs from c — FP8 training with Transformer
    Engine keeps the FP8 casts of the linear layers' inputs for backward (1 byte;
    transformer_engine/pytorch/module/linear.py, layernorm_linear.py, layernorm_mlp.py).
    `softmax_bytes`: bytes per score element the unfused softmax keeps (default c: a fused
    softmax kernel keeps its output; the fp32 fallback keeps 4 + c).
    `modules`: Megatron's selective recompute (`--recompute-modules`, default core_attn) —
    what each recomputed module no longer keeps is dropped by `drop_recomputed`.
    """
    if modules is not None:
        selective = "core_attn" in modules
    g = c if gemm is None else gemm
    et = etp or tp  # experts' MLPs are split over the expert-tensor-parallel group
    rep = tp if sp else 1  # the replicated (norm / dropout) region
    items = [
        Item("norm1 input", c * sh.d / rep),
        Item("qkv input (norm1 output)", g * sh.d / rep),
        Item("q, k, v", c * (sh.dq + sh.dk + sh.dv) / tp),
    ]
    if sh.mla_latent:
        items.append(Item("MLA latents", c * sh.mla_latent / rep))
    if flash:
        items.append(Item("attention output (flash) + log-sum-exp", (c * sh.do + 4 * sh.heads) / tp))
        if g != c:
            items.append(Item("o-proj input (FP8 cast)", g * sh.do / tp))
    else:
        if not selective:
            soft = c if softmax_bytes is None else softmax_bytes
            scores = soft * sh.heads + (sh.heads if attention_dropout else 0) + (
                c * sh.heads if attention_dropout else 0)
            items.append(Item("attention scores, softmax, dropout (T×T)", 0.0, scores / tp))
        items.append(Item("attention output (o-proj input)", g * sh.do / tp))
    if hidden_dropout:
        items.append(Item("attention dropout mask", sh.d / rep))
    items.append(Item("norm2 input", c * sh.d / rep))
    items.append(Item("mlp input (norm2 output)", g * sh.d / rep))
    if sh.top_k:
        k = sh.top_k
        width = (2 if sh.gated else 1) * sh.moe_ffn
        items.append(Item("router logits and probabilities (fp32)", 8 * sh.experts / rep))
        items.append(Item(f"routed tokens: top-{k} copies of the input", g * sh.d * k / rep))
        items.append(Item(f"experts fc1 output (top-{k})", c * width * k / et))
        items.append(Item(f"experts fc2 input (top-{k})", g * sh.moe_ffn * k / et))
        items.append(Item(f"experts output before weighting (top-{k})", c * sh.d * k / rep))
        if sh.shared_ffn:
            items.append(Item("shared expert fc1 output", c * (2 if sh.gated else 1) * sh.shared_ffn / tp))
            items.append(Item("shared expert fc2 input", g * sh.shared_ffn / tp))
    else:
        width = (2 if sh.gated else 1) * sh.ffn
        items.append(Item("fc1 output (activation input)", c * width / tp))
        items.append(Item("fc2 input (activation output)", g * sh.ffn / tp))
    if hidden_dropout:
        items.append(Item("mlp dropout mask", sh.d / rep))
    if modules:
        items = drop_recomputed(items, modules, moe_layer, separate_norm1)
    return items


def drop_recomputed(items: list, modules: frozenset, moe_layer: bool, separate_norm1: bool
                    ) -> list:
    """Tensors Megatron's selective recompute frees (TransformerConfig.recompute_modules,
    megatron/core/transformer/transformer_layer.py, moe/moe_layer.py, multi_latent_attention.py):
    "layernorm" discards the outputs of norms that are modules of their own (the MLA input norm,
    the MoE pre-MLP norm; TE's dense layers fuse the norm into the next linear); "mla_up_proj"
    the up-projected q, k, v; "mlp" the dense MLP's intermediates (MoE layers are unaffected);
    "moe_act" the experts' activation outputs; "moe" everything inside the MoE layer but its
    input; "shared_experts" the shared experts' intermediates. "core_attn" (the attention
    scores) is handled where the scores are built."""
    drop = set()
    if "layernorm" in modules:
        if separate_norm1:
            drop.add("qkv input (norm1 output)")
        if moe_layer:
            drop.add("mlp input (norm2 output)")
    if "mla_up_proj" in modules and separate_norm1:
        drop.add("q, k, v")
    if "mlp" in modules and not moe_layer:
        drop.update({"fc1 output (activation input)", "fc2 input (activation output)"})
    kept = []
    for item in items:
        name = item.name
        if name in drop:
            continue
        if moe_layer and "moe" in modules and (name.startswith(("router", "routed", "experts",
                                                                 "shared expert"))):
            continue
        if moe_layer and "moe_act" in modules and name.startswith("experts fc2 input"):
            continue
        if moe_layer and "shared_experts" in modules and name.startswith("shared expert"):
            continue
        kept.append(item)
    return kept


# ---------------------------------------------------------------------------------------------
# hf (transformers modules, eager autograd)


@dataclass(frozen=True)
class HFRun:
    """How transformers runs one decoder layer: the knobs that decide which tensors autograd keeps."""

    c: int                  # bytes of the parameter / storage dtype (4 fp32, 2 bf16)
    autocast: bool          # torch.autocast to bf16 over fp32 parameters
    attention: str          # eager | sdpa | flash
    device: str             # cuda | cpu
    dropout_attn: float = 0.0
    dropout_hidden: float = 0.0
    base_trainable: bool = True   # False: frozen base weights (LoRA / QLoRA)
    lora_rank: int = 0
    lora_targets: str = ""        # "" | qkvo | all-linear
    lora_dropout: float = 0.0
    fused_qkv: bool = False       # one qkv linear (GPT-2 c_attn, phi3, gpt_neox)
    softmax_fp32: bool = True     # eager softmax upcast (`softmax(..., dtype=torch.float32)`)
    first_frozen_input: bool = False  # layer input does not require grad (frozen embedding)


def hf_kernel(sh: Shapes, run: HFRun) -> str:
    """Which attention kernel runs: eager, flash-like (out + log-sum-exp saved), or SDPA's math
    fallback (T×T probabilities saved). On the CPU, SDPA's flash kernel takes neither dropout nor
    a value head dim that differs from the query's (MLA), so those fall back to math
    (torch/nn/attention sdp_utils_cpp.cpp `use_flash_attention_cpp`). On CUDA flash or
    memory-efficient attention take both."""
    if run.attention == "eager":
        return "eager"
    if run.device == "cpu" and (run.dropout_attn > 0 or (sh.mla_latent and sh.do != sh.dq)):
        return "math"
    return "flash"


def hf_layer_items(sh: Shapes, run: HFRun) -> list:
    """Tensors autograd keeps for one transformers decoder layer (bytes per token, or per token
    per key position), derived op by op from the modeling code (LlamaDecoderLayer,
    MixtralDecoderLayer, GPT2Block, DeepseekV3DecoderLayer) and checked with
    `torch.autograd.graph.saved_tensors_hooks` on the calibration models.

    Rules of autograd used throughout: `mm`/`addmm` keep their input only when the weight needs a
    gradient (full fine-tuning, or a LoRA adapter's own A); `mul` by a tensor that needs no grad
    (RoPE cos/sin, a frozen norm weight) keeps only that other tensor; adds keep nothing. Under
    torch.autocast each linear casts its input to bf16 and keeps that copy (casts of activations
    are not cached, one per consuming linear), and the bf16 weight copies are kept (counted per
    layer by `autocast_weight_terms`, not per token).
    """
    c = run.c
    a = 2 if run.autocast else c          # dtype of matmul outputs
    r = 4 if run.autocast else c          # dtype of the residual stream
    mask_bytes = 1 if run.device == "cuda" else None  # dropout mask: bool on CUDA, input dtype on CPU
    lora_attn = run.lora_rank > 0 and run.lora_targets in ("qkvo", "all-linear")
    lora_mlp = run.lora_rank > 0 and run.lora_targets == "all-linear"
    attn_saves_input = run.base_trainable or lora_attn
    mlp_saves_input = run.base_trainable or lora_mlp
    items = []

    def norm(name, width, consumers, saves_output, first=False):
        """RMSNorm (fp32 upcast) or LayerNorm feeding `consumers` linears."""
        out = []
        if first:
            pass  # input needs no grad (frozen embedding): the norm itself keeps nothing
        elif sh.layernorm:
            stat = 8 if (run.device == "cuda" or run.autocast) else 2 * c
            out.append(Item(f"{name}: LayerNorm input, mean, rstd", r * width + stat))
        else:
            out.append(Item(f"{name}: fp32 input (pow / mul) and rsqrt", 4 * width + 4))
            if run.base_trainable:
                out.append(Item(f"{name}: normalized (kept for the weight gradient)", r * width))
        if saves_output:
            if run.autocast:
                out.append(Item(f"{name}: bf16 casts of the output, one per linear ({consumers})",
                                2 * width * consumers))
            else:
                out.append(Item(f"{name}: output (input of the next linear)", c * width))
        return out

    # -- attention ----------------------------------------------------------------------------
    if sh.mla_latent:
        consumers = 2 if sh.mla_q_rank else 1  # q_a_proj (or q_proj) and kv_a_proj_with_mqa
        items += norm("input norm", sh.d, consumers, attn_saves_input, run.first_frozen_input)
        if sh.mla_q_rank:
            items += norm("q_a_layernorm", sh.mla_q_rank, 1, attn_saves_input)
        items += norm("kv_a_layernorm", sh.mla_kv_rank, 1, attn_saves_input)
    else:
        consumers = 1 if run.fused_qkv else 3
        items += norm("input norm", sh.d, consumers, attn_saves_input, run.first_frozen_input)
    kernel = hf_kernel(sh, run)
    full_k = sh.dq if sh.mla_latent else sh.dq       # keys repeated to every query head
    full_v = sh.do                                    # values repeated to every query head
    if kernel == "flash":
        items.append(Item("q, k, v after RoPE (kept by the attention kernel)",
                          a * (sh.dq + sh.dk + sh.dv)))
        items.append(Item("attention output + log-sum-exp (fp32)", a * sh.do + 4 * sh.heads))
    elif kernel == "math":
        # at::_scaled_dot_product_attention_math upcasts reduced precision to fp32 on the CPU and
        # keeps the scaled q and k, v (all heads), the probabilities and, with dropout, the mask
        # and the dropped probabilities.
        m = 4 if (a != 4 and run.device == "cpu") else a
        items.append(Item("SDPA math: scaled q, k and v (all heads)", m * (sh.dq + full_k + full_v)))
        pair = m * sh.heads
        if run.dropout_attn > 0:
            pair += 2 * m * sh.heads
        items.append(Item("SDPA math: probabilities" + (", dropout mask and output"
                                                        if run.dropout_attn > 0 else ""),
                          0.0, pair))
        if attn_saves_input:
            items.append(Item("attention output relaid out (o-proj input)", a * sh.do))
    else:
        repeated = sh.dk < sh.dq
        items.append(Item("q after RoPE" + (" (bf16 cast)" if run.autocast else ""), a * sh.dq))
        items.append(Item("k" + (", repeated to all heads" if repeated else ""),
                          a * (full_k if repeated else sh.dk)))
        items.append(Item("v" + (", repeated to all heads" if repeated else ""),
                          a * (full_v if repeated else sh.dv)))
        upcast = run.softmax_fp32 or run.autocast
        probs = 4 if upcast else c
        pair = probs * sh.heads
        if upcast and not run.autocast and c != 4:
            pair += c * sh.heads            # .to(query.dtype) copy, kept by the next matmul
        p_dtype = 4 if run.autocast else c
        if run.dropout_attn > 0:
            pair += ((mask_bytes or p_dtype) + p_dtype) * sh.heads
        if run.autocast:
            pair += 2 * sh.heads            # autocast's bf16 cast of the probabilities
        items.append(Item("attention probabilities (softmax, casts, dropout)", 0.0, pair))
        if attn_saves_input:
            items.append(Item("attention output transposed copy (o-proj input)", a * sh.do))
    if run.dropout_hidden > 0:
        items.append(Item("residual dropout masks (attention, MLP)",
                          2 * (mask_bytes or a) * sh.d))

    # -- MLP / MoE ----------------------------------------------------------------------------
    if sh.top_k:
        k = sh.top_k
        e = 4 if run.autocast else c    # grouped_mm is not autocast-enabled (transformers moe.py)
        consumers = 1 + (2 if sh.shared_ffn else 0)
        items += norm("post-attention norm", sh.d, consumers, True)
        if sh.fp32_router:
            items.append(Item("router: fp32 input copy, logits, sigmoid scores",
                              4 * sh.d + 8 * sh.experts))
        else:
            items.append(Item("router logits + fp32 softmax", (a + 4) * sh.experts))
        items.append(Item(f"routing indices and weights (top-{k})", 40 * k))
        if mlp_saves_input:
            items.append(Item(f"expert inputs gathered (top-{k})", e * sh.d * k))
        items.append(Item(f"expert gate/up output, act(gate), product (top-{k})",
                          e * (3 * sh.moe_ffn + (sh.moe_ffn if mlp_saves_input else 0)) * k))
        items.append(Item(f"expert outputs before routing weights (top-{k})", e * sh.d * k))
        if sh.shared_ffn:
            items.append(Item("shared expert gate, up, act(gate)"
                              + (", product" if mlp_saves_input else ""),
                              a * (3 + (1 if mlp_saves_input else 0)) * sh.shared_ffn))
    else:
        consumers = 2 if sh.gated else 1
        items += norm("post-attention norm", sh.d, consumers, mlp_saves_input)
        if sh.gated:
            # gate (kept by silu), up and act(gate) (kept by the product), product (down's input)
            n = 3 + (1 if mlp_saves_input else 0)
            items.append(Item("SwiGLU: gate, up, act(gate)" + (", product" if mlp_saves_input else ""),
                              n * a * sh.ffn))
        else:
            # GPT-2 gelu_new in python ops: x (c_fc output), x³ input, tanh output, 0.5·x and
            # 1 + tanh(...) kept by the multiplies, then c_proj's input.
            n = 4 + (1 if mlp_saves_input else 0)
            items.append(Item("MLP: c_fc output and gelu_new intermediates"
                              + (", c_proj input" if mlp_saves_input else ""), n * a * sh.ffn))
    if run.lora_rank:
        items += lora_items(sh, run)
    return items


def lora_items(sh: Shapes, run: HFRun) -> list:
    """peft `lora.Linear.forward`: `lora_B(lora_A(dropout(x))) * scaling`. lora_A keeps its input
    (the same tensor the norm output / base input already is, counted above), lora_B keeps the
    rank-r intermediate; with lora_dropout > 0 the dropped copy of x and its mask are new tensors
    (peft/tuners/lora/layer.py)."""
    r = run.lora_rank
    a = 2 if run.autocast else run.c
    attn = [sh.d] * (1 if run.fused_qkv else 3) + [sh.do]
    mlp = []
    if run.lora_targets == "all-linear" and not sh.top_k:
        mlp = [sh.d] * (2 if sh.gated else 1) + [sh.ffn]
    inputs = attn + mlp
    items = [Item(f"LoRA rank-{r} intermediates ({len(inputs)} adapters)", a * r * len(inputs))]
    if run.lora_dropout > 0:
        mask = 1 if run.device == "cuda" else a
        items.append(Item("LoRA dropout: mask and dropped input per adapter",
                          (a + mask) * sum(inputs)))
    return items


def op_sac_items(sh: Shapes, c: int, tp: int = 1) -> list:
    """torchtitan's selective activation checkpointing by op ("selective", selective_ac_option
    "op"): a layer keeps its input, the outputs of every other matmul in call order (wq, wv, w1,
    w2 of wq, wk, wv, wo, w1, w3, w2) and the SDPA output with its log-sum-exp; everything else
    is recomputed in the layer's backward (torchtitan distributed/activation_checkpoint.py,
    `_save_list` and the "mm every other" policy). Under torchtitan's tensor parallelism (with
    sequence parallelism) each of them is sharded over tp."""
    return [
        Item("layer input (checkpoint)", c * sh.d / tp),
        Item("saved matmul outputs (wq, wv, w1, w2)", c * (sh.dq + sh.dv + sh.ffn + sh.d) / tp),
        Item("SDPA output + log-sum-exp", (c * sh.do + 4 * sh.heads) / tp),
    ]


def recompute_items(c: int, d: int, tp: int, sp: bool) -> list:
    """Full recompute keeps only each layer's input (seed 000 CH 5.2: 'the input hidden state')."""
    return [Item("layer input (checkpoint)", c * d / (tp if sp else 1))]


def inflight_microbatches(stage: int, pp: int, vpp: int, microbatches: int,
                          group: Optional[int] = None, extra_warmup: int = 0,
                          chunk_layers: Optional[list] = None) -> float:
    """Micro-batches (in whole-stage units) whose activations a stage holds at its peak, by the
    warm-up rule of Megatron-LM's schedules (`get_pp_rank_microbatches`,
    megatron/core/pipeline_parallel/schedules.py); the peak comes at the first forward of the
    steady 1F1B phase, one past the warm-up.

    1F1B (vpp = 1): rank i runs pp - i - 1 warm-up forwards, so it holds min(pp - i, m)
    (Narayanan et al. 2021). Interleaved (vpp model chunks of 1/vpp of the stage's layers each):
    warm-up = 2·(pp - i - 1) + (vpp - 1)·g chunk forwards, g the micro-batch group size per
    virtual stage (`--microbatch-group-size-per-virtual-pipeline-stage`, default pp), plus one with
    `--overlap-moe-expert-parallel-comm`; all m·vpp chunk forwards when the warm-up covers them.
    The stage holds (warm-up + 1) chunks = (warm-up + 1)/vpp stages' worth. With the number of
    micro-batches unknown, m is taken as unbounded. `chunk_layers` (layers of each of the
    rank's model chunks, when they differ): the chunks in flight are the first warm-up + 1
    forwards of the schedule table (`get_schedule_table`: groups of g micro-batches through
    chunk 0, 1, ...), weighted by their layers.
    """
    if pp <= 1:
        return 1
    if vpp <= 1:
        base = pp - stage
        if microbatches:
            base = min(base, microbatches)
        return max(1.0, float(base))
    g = group or pp
    warmup = 2 * (pp - stage - 1) + (vpp - 1) * g + extra_warmup
    total = microbatches * vpp if microbatches else None
    chunks = total if (total is not None and warmup >= total) else warmup + 1
    if chunk_layers and len(chunk_layers) == vpp and sum(chunk_layers):
        m = microbatches or chunks
        order = []
        for first in range(0, m, g):
            size = min(g, m - first) if first + g < m else m - first
            for chunk in range(vpp):
                order.extend([chunk] * size)
                if len(order) >= chunks:
                    break
            if len(order) >= chunks:
                break
        held = sum(chunk_layers[c] for c in order[:chunks])
        return max(1.0 / vpp, held / sum(chunk_layers))
    return max(1.0 / vpp, chunks / vpp)
