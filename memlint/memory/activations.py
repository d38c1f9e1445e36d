"""Saved activations per decoder layer, recompute, attention kernels, SP/CP, in-flight micro-batches.

Three per-layer models, chosen by the assumption `activations.model` and the framework:
- `seed` (seed article 000 CH 1.4, 5.2): C_act · B · T · d with C_act = 34 (FlashAttention), plus
  5 · H · T / d without it, 2 under full recompute, the every-K selective form of CH 5.2.
- `fused` (Megatron-LM, Megatron-DeepSpeed and gpt-neox, torchtitan under TP: fused norms and
  attention): Korthikanti et al. 2022,
  "Reducing Activation Recomputation in Large Transformer Models", section 4, generalized tensor
  by tensor to GQA, gated MLPs, MoE top-k and MLA; TP divides the tensor-parallel region and SP
  the rest (Table 2).
- `hf` (transformers modules run eagerly: the HF Trainer, FSDP2 without TP, DeepSpeed over an
  HF model, as in `bench/data/calibration`): the tensors autograd
  saves for each op of the HF modeling code (RMSNorm's fp32 upcast, RoPE outputs, SDPA's
  output and log-sum-exp, eager attention's fp32 softmax, the SwiGLU / GeLU intermediates, dropout
  masks), each an `Item` (memory/activations_eager.py) so `--explain` lists them.

All per-layer functions return bytes per token (B·T of the local micro-batch); callers multiply.
"""
from __future__ import annotations

import math

from memlint import lazy_import
from memlint.memory.terms import Item
from memlint.records import record

# start-up: the MoE layers' items load only for a model with experts
moe_activations = lazy_import.module("memlint.memory.moe_activations")

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

# the unfused attention's T×T item (memory/softmax.py finds the last layer's softmax by it)
SCORES_ITEM = "attention scores, softmax, dropout (T×T)"
# flash attention's saved output and log-sum-exp (memory/attention_workspace.py frees what follows)
FLASH_ITEM = "attention output (flash) + log-sum-exp"


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


@record(frozen=True)
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


def fused_layer_items(sh: Shapes, c: int, flash: bool, tp: int, sp: bool, hidden_dropout: bool,
                      attention_dropout: bool, selective: bool, gemm: Optional[int] = None,
                      etp: Optional[int] = None, softmax_bytes: Optional[float] = None,
                      modules: Optional[frozenset] = None, moe_layer: bool = False,
                      separate_norm1: bool = False, moe_dispatch=None) -> list:
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
    `moe_dispatch`: Megatron-Core's MoE layers (memory/moe_activations.py routed_items) instead
    of the generic routed-expert count.
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
        items.append(Item(FLASH_ITEM, (c * sh.do + 4 * sh.heads) / tp))
        if g != c:
            items.append(Item("o-proj input (FP8 cast)", g * sh.do / tp))
    else:
        if not selective:
            soft = c if softmax_bytes is None else softmax_bytes
            scores = soft * sh.heads + (sh.heads if attention_dropout else 0) + (
                c * sh.heads if attention_dropout else 0)
            items.append(Item(SCORES_ITEM, 0.0, scores / tp))
        items.append(Item("attention output (o-proj input)", g * sh.do / tp))
    if hidden_dropout:
        items.append(Item("attention dropout mask", sh.d / rep))
    items.append(Item("norm2 input", c * sh.d / rep))
    items.append(Item("mlp input (norm2 output)", g * sh.d / rep))
    if sh.top_k and moe_dispatch is not None:
        items += moe_activations.routed_items(sh, c, g, rep, etp or tp, moe_dispatch)
        if sh.shared_ffn:
            items.append(Item("shared expert fc1 output", c * (2 if sh.gated else 1) * sh.shared_ffn / tp))
            items.append(Item("shared expert fc2 input", g * sh.shared_ffn / tp))
    elif sh.top_k:
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


# what the recomputed expert activation no longer keeps (experts.py: CheckpointWithoutOutput over
# the activation and the routing-weight multiply, its output discarded after fc2)
MOE_ACT_OUTPUTS = ("experts fc2 input", "experts activation output", "experts gate activation")


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
        if moe_layer and "moe_act" in modules and name.startswith(MOE_ACT_OUTPUTS):
            continue
        if moe_layer and "shared_experts" in modules and name.startswith("shared expert"):
            continue
        kept.append(item)
    return kept


def op_sac_items(sh: Shapes, c: int, tp: int = 1, compiled: bool = False) -> list:
    """torchtitan's selective activation checkpointing by op ("selective", selective_ac_option
    "op"): a layer keeps its input, the outputs of every other matmul in call order (wq, wv, w1,
    w2 of wq, wk, wv, wo, w1, w3, w2) and the SDPA output with its log-sum-exp; everything else
    is recomputed in the layer's backward (torchtitan distributed/activation_checkpoint.py,
    `_save_list` and the "mm every other" policy). Under torchtitan's tensor parallelism (with
    sequence parallelism) each of them is sharded over tp.

    `compiled` (torch.compile of the checkpointed block, memory/compile.py): eager SAC caches
    the output of every MUST_SAVE op (torch/utils/checkpoint.py _CachingTorchDispatchMode), but
    a compiled block saves only what its backward reads (the min-cut partitioner), and no
    backward op reads w2's output (the block's residual add needs none): it is not kept."""
    mm = c * (sh.dq + sh.dv + sh.ffn + (0 if compiled else sh.d)) / tp
    return [
        Item("layer input (checkpoint)", c * sh.d / tp),
        Item("saved matmul outputs (wq, wv, w1)" if compiled
             else "saved matmul outputs (wq, wv, w1, w2)", mm),
        Item("SDPA output + log-sum-exp", (c * sh.do + 4 * sh.heads) / tp),
    ]


SRC_FLOAT8_ABS = ("torchtitan op-level SAC _save_list with aten.abs (bcebc0de5 2024-11-26 .. "
                  "88247277c 2025-02-06, 'Remove abs from save list ... float8'; 9dec370 "
                  "parallelisms/parallelize_llama.py); torchao float8 casts amax = "
                  "max(abs(x)) per input and weight (float8_utils.py tensor_to_amax, "
                  "pytorch/ao@0afa4c1); torch/utils/checkpoint.py _CachingTorchDispatchMode "
                  "caches every MUST_SAVE output; measured 41.125 = 15.625 + 19.0 (inputs) + "
                  "6.5 (weights) B per token per hidden unit, 34.625 under float8 all-gather "
                  "(bench/compile_saved.py --float8-sac)")


def float8_abs_items(sh: Shapes, c: int, tp: int, tokens: int, weights_cast: bool) -> list:
    """Eager torchao float8 linears under a torchtitan op-level SAC list that names aten.abs:
    every float8 cast computes amax = max(abs(x)), and the policy caches abs's output, the size
    of what is cast, in its dtype: each linear's input (q, k and v each cast the norm's output;
    wo the attention output; w1 and w3 the norm's; w2 the FFN product) and, where the weight is
    cast inside the block (not under float8 all-gather, which casts it in FSDP2's
    pre-all-gather hook, outside the checkpointed region), each weight: weight-sized, over the
    layer's `tokens`. Rowwise recipes cache the same (abs before amax). Sharded over tp like
    the other saved tensors."""
    mlp_in = (2 if sh.gated else 1) * sh.d
    inputs = c * (3 * sh.d + sh.do + mlp_in + sh.ffn) / tp
    items = [Item("float8 casts: abs(input) of each linear (SAC list with aten.abs)", inputs)]
    if weights_cast and tokens > 0:
        weights = sh.d * (sh.dq + sh.dk + sh.dv) + sh.do * sh.d \
            + (3 if sh.gated else 2) * sh.d * sh.ffn
        items.append(Item("float8 casts: abs(weight) of each linear (weight-sized / tokens)",
                          c * weights / tp / tokens))
    return items


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
