"""The `hf` activation model: the tensors autograd saves for one transformers decoder layer run
eagerly (HF Trainer, accelerate, FSDP2 without TP), op by op from the modeling code, including
LoRA adapters' inputs and outputs; `HFRun` holds the run settings that decide them.
"""
from __future__ import annotations

from memlint.memory.activations import Shapes
from memlint.memory.terms import Item
from memlint.records import record

@record(frozen=True)
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
    lora_targets: str = ""        # "" | qkvo | all-linear | all-linear+experts
    lora_dropout: float = 0.0
    fused_qkv: bool = False       # one qkv linear (GPT-2 c_attn, phi3, gpt_neox)
    fused_gate_up: bool = False   # one gate+up linear (phi3 gate_up_proj)
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
    w = _widths(run)
    items = _attention_items(sh, run, w) + _mlp_items(sh, run, w)
    if run.lora_rank:
        items += lora_items(sh, run)
    return items


@record(frozen=True)
class _Widths:
    """Bytes of the tensors one layer keeps, and which linears keep their input."""

    matmul: int          # dtype of matmul outputs
    residual: int        # dtype of the residual stream
    mask: "int | None"   # dropout mask: bool on CUDA, the input's dtype on the CPU (None)
    attn_saves_input: bool
    mlp_saves_input: bool


def _widths(run: HFRun) -> _Widths:
    c = run.c
    lora_attn = run.lora_rank > 0 and bool(run.lora_targets)
    lora_mlp = run.lora_rank > 0 and run.lora_targets.startswith("all-linear")
    return _Widths(matmul=2 if run.autocast else c, residual=4 if run.autocast else c,
                   mask=1 if run.device == "cuda" else None,
                   attn_saves_input=run.base_trainable or lora_attn,
                   mlp_saves_input=run.base_trainable or lora_mlp)


def _norm(sh: Shapes, run: HFRun, w: _Widths, name: str, width: int, consumers: int,
          saves_output: bool, first: bool = False) -> list:
    """RMSNorm (fp32 upcast) or LayerNorm feeding `consumers` linears."""
    c, r = run.c, w.residual
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


def _attention_items(sh: Shapes, run: HFRun, w: _Widths) -> list:
    """The attention block: its norms, then what the attention kernel keeps."""
    c, a, mask_bytes, attn_saves_input = run.c, w.matmul, w.mask, w.attn_saves_input
    items = []
    if sh.mla_latent:
        consumers = 2 if sh.mla_q_rank else 1  # q_a_proj (or q_proj) and kv_a_proj_with_mqa
        items += _norm(sh, run, w, "input norm", sh.d, consumers, attn_saves_input, run.first_frozen_input)
        if sh.mla_q_rank:
            items += _norm(sh, run, w, "q_a_layernorm", sh.mla_q_rank, 1, attn_saves_input)
        items += _norm(sh, run, w, "kv_a_layernorm", sh.mla_kv_rank, 1, attn_saves_input)
    else:
        consumers = 1 if run.fused_qkv else 3
        items += _norm(sh, run, w, "input norm", sh.d, consumers, attn_saves_input, run.first_frozen_input)
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
    return items


def _mlp_items(sh: Shapes, run: HFRun, w: _Widths) -> list:
    """The MLP or MoE block: its norm, the router and experts, or the (gated) MLP."""
    c, a, mlp_saves_input = run.c, w.matmul, w.mlp_saves_input
    items = []
    if sh.top_k:
        k = sh.top_k
        e = 4 if run.autocast else c    # grouped_mm is not autocast-enabled (transformers moe.py)
        consumers = 1 + (2 if sh.shared_ffn else 0)
        items += _norm(sh, run, w, "post-attention norm", sh.d, consumers, True)
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
        items += _norm(sh, run, w, "post-attention norm", sh.d, consumers, mlp_saves_input)
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
    if run.lora_targets.startswith("all-linear") and not sh.top_k:
        mlp = [sh.d] * (2 if sh.gated and not run.fused_gate_up else 1) + [sh.ffn]
    inputs = attn + mlp
    items = [Item(f"LoRA rank-{r} intermediates ({len(inputs)} adapters)", a * r * len(inputs))]
    if run.lora_dropout > 0:
        mask = 1 if run.device == "cuda" else a
        items.append(Item("LoRA dropout: mask and dropped input per adapter",
                          (a + mask) * sum(inputs)))
    return items
