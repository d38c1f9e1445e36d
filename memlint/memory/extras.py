"""Everything real runs hold besides weights, gradients, states and layer activations.

Logits and loss buffers, the embedding's activations, optimizer-step temporaries, FSDP / ZeRO-3
gather buffers, QLoRA's dequantization buffer and quantized base, LoRA adapter activations, the
vision encoder, CPU/NVMe offload (host memory) and the runtime (CUDA context, NCCL, allocator).
Each function returns `Term`s with formula, inputs and source.
"""
from __future__ import annotations

import math
import re

from memlint.memory import activations as act
from memlint.memory.states import ceil_div as _ceil_div
from memlint.memory.terms import Term

MiB = 1024**2


# ---------------------------------------------------------------------------------------------
# quantized frozen base (QLoRA)


def frozen_bytes_per_param(base_quant: str, param_bytes: int, seed: bool) -> float:
    """Bytes per frozen base parameter.

    nf4 (bitsandbytes, blocksize 64 with double quantization): 0.5 B + an 8-bit absmax per 64
    weights + an fp32 scale per 256 absmax blocks = 0.5 + 1/64 + 4/16384 B (Dettmers et al. 2023,
    QLoRA section 3). The seed article counts 0.5 (seed 000 CH 9.4). int8 (LLM.int8): 1 B + an fp32
    scale per row, ~1 B.
    """
    if base_quant == "nf4":
        return 0.5 if seed else 0.5 + 1 / 64 + 4 / (64 * 256)
    if base_quant == "int8":
        return 1.0
    return float(param_bytes)


def dequant_terms(model, plan) -> list:
    """QLoRA dequantizes one linear at a time to the compute dtype: the largest linear's
    weight in bf16 (seed 000 CH 9.4: 2·d² per layer for a d×d projection)."""
    if model.tr.base_quant == "none" or not plan.layers:
        return []
    arch = model.arch
    if model.seed:
        size = arch.hidden * arch.hidden
        formula = f"2 B × d² = 2 × {arch.hidden}²"
    else:
        widths = [arch.hidden * arch.heads * arch.head_dim, arch.hidden * arch.ffn]
        if arch.moe is not None:
            widths.append(arch.hidden * arch.moe.expert_ffn)
        size = max(widths) // model.topo.tp
        formula = f"2 B × largest linear {size:,} elements"
    return [Term("buffers.dequantized_weight", "buffers", 2 * size, formula,
                 {"elements": size}, "seed 000 CH 9.4; bitsandbytes dequantize per matmul")]


# ---------------------------------------------------------------------------------------------
# vision tower


def vision_state_terms(params: int, dt, optimizer: str, shard: int, zero: int, fsdp: str,
                       lora: bool) -> list:
    """ViT + projector on stage 0, replicated across TP (seed 000 CH 8.3-8.4): weights, and when
    trained, gradients and optimizer states (sharded by ZeRO/FSDP like the rest)."""
    from memlint.memory.states import MOMENTS

    terms = []
    w_shard = shard if (zero >= 3 or fsdp in ("full", "hybrid")) else 1
    terms.append(Term("vision.weights", "vision", _ceil_div(params, w_shard) * dt.param,
                      f"vision params {params:,} × {dt.param} B" + (f" / {w_shard}" if w_shard > 1 else ""),
                      {"params": params, "shard": w_shard}, "seed 000 CH 8.3"))
    if lora:
        return terms
    g_shard = shard if (zero >= 2 or fsdp != "none") else 1
    o_shard = shard if (zero >= 1 or fsdp != "none") else 1
    terms.append(Term("vision.gradients", "vision", _ceil_div(params, g_shard) * dt.grad,
                      f"vision params {params:,} × {dt.grad} B" + (f" / {g_shard}" if g_shard > 1 else ""),
                      {"params": params, "shard": g_shard}, "seed 000 CH 8.3"))
    count = _ceil_div(params, o_shard)
    moments = MOMENTS[optimizer]
    per = dt.master + moments * dt.state_element_bytes
    terms.append(Term("vision.optimizer", "vision",
                      count * dt.master + dt.moment_bytes(count, moments),
                      f"vision params {params:,} × ({dt.master} B master + {moments} × "
                      f"{dt.moment_width()})" + (f" / {o_shard}" if o_shard > 1 else ""),
                      {"params": params, "shard": o_shard, "bytes_per_param": per},
                      "seed 000 CH 8.3"))
    return terms


def vision_activation_terms(model, inflight: float) -> list:
    """ViT activations: C_act · L_vit · B · N_img · d_vit (seed 000 CH 8.3), N_img the visual
    tokens of all images of a sample."""
    vision = model.arch.vision
    tokens = model.tr.micro_batch * model.tr.images_per_sample * model.visual_tokens_per_image()
    c_act = model.assume["activations.c_act"]
    if model.tr.recompute == "full":
        c_act = model.assume["activations.c_act_full_recompute"]
    value = int(round(c_act * vision.layers * tokens * vision.hidden * inflight))
    return [Term("vision.activations", "vision", value,
                 f"{c_act:g} × L_vit {vision.layers} × B·N_img {tokens:,} × d_vit {vision.hidden}"
                 + (f" × {inflight:g} in flight" if inflight != 1 else ""),
                 {"layers": vision.layers, "tokens": tokens, "hidden": vision.hidden},
                 "seed 000 CH 8.3")]


# ---------------------------------------------------------------------------------------------
# embedding, LoRA adapters, logits


def embedding_activation_terms(model, tokens: int, seq_local: int, inflight: float) -> list:
    """The embedding output (the first layer's input), RoPE cos/sin tables and position ids, and
    the input token ids (int64)."""
    arch = model.arch
    c = model.dt.compute if not model.dt.autocast else 4
    terms = []
    hidden = c * arch.hidden * tokens
    if arch.embedding_dropout > 0:
        mask = 1 if model.scenario.hardware.device == "cuda" else c
        hidden += (c + mask) * arch.hidden * tokens
    per_seq = 0
    if not arch.learned_positions:
        per_seq = (2 * arch.head_dim * (model.dt.compute if not model.dt.autocast else 4) + 8)
    else:
        # position ids (int64) and the wpe output, shape (1, T, d), broadcast over the batch
        per_seq = 8 + c * arch.hidden
    value = int((hidden + per_seq * seq_local + 8 * tokens) * inflight)
    terms.append(Term("activations.embedding", "activations", value,
                      f"embedding output {c} B × d {arch.hidden} × {tokens:,} tokens + rotary/position "
                      f"tables {per_seq} B × T {seq_local} + token ids 8 B × tokens",
                      {"tokens": tokens, "seq": seq_local}, "transformers embedding + rotary"))
    return terms


def attention_mask_terms(model, plan, batch: int, seq_local: int) -> list:
    """Eager attention adds a materialized 4-D causal mask, B × 1 × T × T in the model's dtype,
    built once per forward (transformers masking_utils `eager_mask`); SDPA and flash take
    `is_causal` instead."""
    if model.tr.attention != "eager" or model.tr.framework not in ("hf", "fsdp2") or model.seed:
        return []
    c = model.dt.param if model.dt.autocast else model.dt.compute
    value = c * batch * seq_local * seq_local
    return [Term("activations.attention_mask", "activations", value,
                 f"4-D causal mask {c} B × B {batch} × T² {seq_local}²",
                 {"batch": batch, "seq": seq_local, "bytes": c},
                 "transformers masking_utils eager_mask")]


def autocast_weight_terms(model, plan) -> list:
    """Low-precision copies of linear weights made by torch.autocast.

    autocast casts a linear's weight to bf16 when the weight is fp32. `cached_cast`
    (aten/src/ATen/autocast_mode.cpp, pytorch/pytorch@cfed411) caches the copy only for fp32 leaf
    tensors that require grad (`arg.scalar_type() == kFloat && arg.requires_grad() &&
    arg.is_leaf() && !arg.is_view()`), until the outermost autocast context exits; `mm` saves
    the copy for the input gradient, so each layer's copy lives from its forward to its backward.
    A frozen fp32 weight is cast anew (not cached), and `mm` still saves that copy when its input
    requires grad, which in a LoRA model is every linear but the first layer's q/k/v (their
    input, the embedding output, needs no grad). No copy exists for bf16/fp16 weights (nothing
    to cast) or for a quantized base (bitsandbytes' matmul saves the quantized weight and
    dequantizes again in backward). fp32 LoRA adapters are trainable leaves: cached copies.
    Routed experts run through `grouped_mm`, which autocast does not cover (transformers
    integrations/moe.py), so they have none; the LM head has one on the last stage.
    """
    if not model.dt.autocast or model.tr.framework != "hf" or model.seed:
        return []
    counts, arch, tr = model.counts, model.arch, model.tr
    base_bytes = (frozen_bytes_per_param(tr.base_quant, model.dt.param, False) if model.lora
                  else model.dt.param)
    base_fp32 = base_bytes == 4 and tr.base_quant == "none"
    linear = head = first_qkv = 0
    if base_fp32:
        for index in plan.layers:
            layer = counts.layers[index]
            router = 0 if (arch.moe is not None and arch.moe.router_bias) else layer.router
            linear += layer.attention + layer.mlp + layer.shared_experts + router
        if plan.last:
            head = counts.lm_head or counts.embedding
        if model.lora and plan.first and plan.layers and arch.mla is None:
            # q, k, v of the first layer read the embedding output, which needs no grad
            o_proj = arch.heads * arch.head_dim * arch.hidden
            first_qkv = max(0, counts.layers[plan.layers[0]].attention - o_proj)
    adapters = 0
    if model.lora and model.dt.param == 4:
        adapters = sum(model.lora_per_layer[i] for i in plan.layers)
    n = math.ceil((linear - first_qkv + head + adapters) / model.topo.tp)
    if n <= 0:
        return []
    return [Term("activations.autocast_weight_copies", "activations", 2 * n,
                 f"bf16 copies of fp32 linear weights: ({linear:,} in layers − {first_qkv:,} "
                 f"first-layer q/k/v + {head:,} LM head + {adapters:,} LoRA adapters) × 2 B",
                 {"layer_linear_params": linear, "first_layer_qkv": first_qkv,
                  "head_params": head, "lora_params": adapters, "base_bytes": base_bytes},
                 "torch.autocast cached_cast (pytorch/pytorch@cfed411 aten/src/ATen/autocast_mode.cpp: "
                 "fp32 leaves requiring "
                 "grad); mm keeps its weight")]


def lora_activation_items(model, sh) -> list:
    """LoRA adapters save their input (shared with the base linear), the rank-r intermediate and,
    with dropout, the dropped copy of the input (peft `lora.Linear.forward`)."""
    rank = model.tr.lora_rank
    c = model.dt.compute
    targets = 4 if model.tr.lora_targets == "qkvo" else (7 if sh.gated else 6)
    items = [act.Item(f"LoRA rank-{rank} intermediates ({targets} targets)", c * rank * targets)]
    if model.tr.lora_dropout > 0:
        mask = 1 if model.scenario.hardware.device == "cuda" else c
        items.append(act.Item("LoRA dropout copies of the inputs", (c + mask) * sh.d * targets))
    return items


def logits_terms(model, phase: str) -> list:
    """Logits and the loss.

    transformers (ForCausalLMLoss): logits in the compute dtype are held by the model output,
    upcast to fp32 and log-softmaxed (the fp32 log-probabilities are saved); at the start of the
    loss backward the log-probabilities, their gradient and the fp32 logits' gradient are alive
    (3 × 4 B × V per token). Megatron's vocab-parallel cross entropy (and its fused variant)
    upcasts the logits, keeps the fp32 exp-logits for backward and writes the gradient into that
    buffer in place; the compute-dtype logits live until the forward returns and the gradient is
    cast back to the compute dtype at the start of backward: (c + 4) B per logit in both phases
    (megatron/core/tensor_parallel/cross_entropy.py, megatron/core/fusions/fused_cross_entropy.py).
    """
    arch, tr, topo = model.arch, model.tr, model.topo
    tokens = tr.micro_batch * math.ceil(model.seq / topo.cp)
    vocab = math.ceil(arch.vocab / topo.tp)
    c = model.dt.compute
    if tr.framework == "megatron":
        return _megatron_logits_terms(model, phase, tokens, vocab, c)
    if tr.framework in ("hf", "fsdp2"):
        if phase == "backward_start":
            per, formula = 12, "log-probs + their grad + logits grad: 3 × 4 B"
        else:
            per, formula = c + 4, f"logits {c} B + fp32 log-probs 4 B"
    else:
        if phase == "backward_start":
            per, formula = c + 4, f"fp32 softmax/gradient buffer 4 B + gradient cast {c} B"
        else:
            per, formula = c + 4, f"logits {c} B + fp32 exp-logits 4 B"
    value = per * vocab * tokens
    return [Term("logits", "logits", value,
                 f"({formula}) × V/tp {vocab:,} × {tokens:,} tokens",
                 {"bytes_per_logit": per, "vocab_per_gpu": vocab, "tokens": tokens},
                 "transformers loss_utils.ForCausalLMLoss; Megatron cross_entropy.py")]


def _megatron_logits_terms(model, phase: str, tokens: int, vocab: int, c: int) -> list:
    """Megatron's output layer and vocab-parallel cross entropy on the last stage.

    Each loss head (the LM head, plus one per multi-token-prediction layer, `--mtp-num-layers`,
    whose losses megatron/core/transformer/multi_token_prediction.py computes in the same forward)
    keeps its fp32 exp-logits / softmax for backward: 4 B per logit
    (megatron/core/tensor_parallel/cross_entropy.py: `.float()`, exp in place, saved). While the
    last head's loss is computed its compute-dtype logits are alive too (c B); in backward the
    fp32 gradient written into the softmax buffer is cast to c B. With
    `--cross-entropy-loss-fusion` (impl native, megatron/core/fusions/fused_cross_entropy.py) the
    jit-fused functions return new tensors where the eager path works in place, so the fp32 copy
    of the logits and the exp-logits are alive together: 4 B more per logit in the forward.
    `--defer-embedding-wgrad-compute` keeps the output layer's gradient output (c B per logit) and
    input (c B per hidden value) of up to `--wgrad-deferral-limit` micro-batches (0: all) until the
    pipeline flush (megatron/core/tensor_parallel/layers.py, grad_output_buffer and
    embedding_activation_buffer); at the peak the earlier micro-batches' ones are held.
    """
    def flag(name, default=None):
        setting = model.scenario.extra.get("megatron." + name)
        return default if setting is None else setting.value

    heads = 1 + model.mtp_layers
    fused = flag("cross-entropy-loss-fusion") is True
    extra_fused = 4 if fused and phase != "backward_start" else 0
    per = 4 * heads + c + extra_fused
    formula = (f"{heads} loss head{'s' if heads > 1 else ''} × fp32 exp-logits 4 B + "
               + (f"logits {c} B" if phase != "backward_start" else f"gradient cast {c} B")
               + (" + fused CE fp32 copy 4 B" if extra_fused else ""))
    terms = [Term("logits", "logits", per * vocab * tokens,
                  f"({formula}) × V/tp {vocab:,} × {tokens:,} tokens",
                  {"bytes_per_logit": per, "vocab_per_gpu": vocab, "tokens": tokens,
                   "loss_heads": heads, "fused": fused},
                  "megatron/core/tensor_parallel/cross_entropy.py; "
                  "megatron/core/fusions/fused_cross_entropy.py")]
    if flag("defer-embedding-wgrad-compute") is True:
        micro = max(1, model.microbatches or 1)
        try:
            limit = int(flag("wgrad-deferral-limit", 0) or 0)
        except (TypeError, ValueError):
            limit = 0
        calls = micro * heads
        held = min(limit if limit > 0 else calls, calls - 1)
        if held > 0:
            hidden = model.arch.hidden
            per_mb = c * vocab * tokens + c * hidden * tokens
            terms.append(Term("logits.deferred_wgrad", "logits", held * per_mb,
                              f"{held} deferred micro-batches × (gradient output {c} B × V/tp "
                              f"{vocab:,} + input {c} B × d {hidden}) × {tokens:,} tokens",
                              {"held": held, "limit": limit, "microbatches": micro},
                              "megatron/core/tensor_parallel/layers.py (grad_output_buffer, "
                              "embedding_activation_buffer)"))
    return terms


# ---------------------------------------------------------------------------------------------
# optimizer step temporaries


def optimizer_step_terms(model, plan) -> list:
    """Temporaries of `optimizer.step()`.

    PyTorch AdamW for-loop (`_single_tensor_adamw`): `exp_avg_sq.sqrt() / bias_correction2_sqrt`
    makes two temporaries of the current parameter: 2 × the largest parameter. foreach
    (`_multi_tensor_adamw`): `_foreach_sqrt` of every second moment: 1 × all states' size. fused:
    none. SGD with momentum: in place. transformers Adafactor: fp32 update and squared-grad
    temporaries of the current parameter (2 × largest, + 2 more when params are not fp32).
    Megatron/DeepSpeed fused optimizers work in place.
    """
    tr, dt = model.tr, model.dt
    if tr.framework == "megatron" and dt.master and dt.grad < 4 \
            and model.par.offload_optimizer == "none" and tr.train_base:
        # fp16/bf16 main grads: `main_param.grad = main_grad.float()` makes an fp32 copy for
        # the fp32 master weights, freed at the next zero_grad
        # (megatron/core/optimizer/optimizer.py and distrib_optimizer.py
        # _copy_model_grads_to_main_grads)
        groups = model.stage_param_groups(plan)
        shard = model.topo.shard if model.par.zero >= 1 else 1
        expert_shard = model.topo.expert_shard if model.par.zero >= 1 else 1
        n = _ceil_div(groups["dense"], shard) + _ceil_div(groups["experts"], expert_shard)
        return [Term("optimizer.fp32_grad_copies", "optimizer", 4 * n,
                     f"fp32 copies of {dt.grad}-byte main grads: {n:,} × 4 B",
                     {"params": n, "grad_bytes": dt.grad},
                     "megatron/core/optimizer/optimizer.py _copy_model_grads_to_main_grads")]
    if tr.framework in ("megatron", "deepspeed") or model.par.offload_optimizer != "none":
        return []
    if dt.state_bits:
        # block-quantized states: fused update kernels (memory/optimizer_quant.py)
        return []
    impl = tr.optimizer_impl
    if impl is None:
        impl = "foreach" if model.scenario.hardware.device == "cuda" else "for-loop"
    largest, total = _largest_and_total_trainable(model, plan)
    shard = model.topo.shard if (model.par.zero >= 1 or model.par.fsdp != "none") else 1
    if tr.optimizer in ("adamw", "adam", "fp8_adam"):
        if impl == "fused":
            return []
        if impl == "foreach":
            n = _ceil_div(total, shard)
            return [Term("optimizer.step_temporaries", "optimizer", n * dt.state,
                         f"foreach sqrt of all second moments: {n:,} × {dt.state} B",
                         {"params": n, "impl": impl}, "torch/optim/adamw.py _multi_tensor_adamw")]
        n = _ceil_div(largest, shard)
        return [Term("optimizer.step_temporaries", "optimizer", 2 * n * dt.state,
                     f"for-loop: 2 temporaries of the largest parameter {n:,} × {dt.state} B",
                     {"params": n, "impl": impl}, "torch/optim/adamw.py _single_tensor_adamw")]
    if tr.optimizer == "adafactor":
        copies = 2 if dt.param == 4 else 4
        n = _ceil_div(largest, shard)
        return [Term("optimizer.step_temporaries", "optimizer", copies * n * 4,
                     f"Adafactor: {copies} fp32 temporaries of the largest parameter {n:,}",
                     {"params": n, "copies": copies}, "transformers optimization.Adafactor.step")]
    if tr.optimizer == "muon" and impl != "fused":
        n = _ceil_div(largest, shard)
        return [Term("optimizer.step_temporaries", "optimizer", 3 * n * dt.state,
                     f"Newton-Schulz iterates of the largest matrix: 3 × {n:,} × {dt.state} B",
                     {"params": n}, "Muon (Jordan et al. 2024) newton_schulz5")]
    return []


def _largest_and_total_trainable(model, plan) -> tuple:
    if model.lora:
        per = [model.lora_per_layer[i] for i in plan.layers]
        arch = model.arch
        largest_linear = model.tr.lora_rank * max(arch.hidden, arch.ffn)
        return largest_linear, sum(per)
    counts = model.counts
    arch = model.arch
    candidates = []
    if plan.first:
        candidates.append(counts.embedding)
    if plan.last and counts.lm_head:
        candidates.append(counts.lm_head)
    if plan.layers:
        candidates.append(arch.hidden * arch.ffn)
        if arch.moe is not None:
            candidates.append(arch.hidden * arch.moe.expert_ffn * 2)
    largest = math.ceil(max(candidates or [0]) / model.topo.tp)
    groups = model.stage_param_groups(plan)
    return largest, groups["dense"] + groups["experts"]


# ---------------------------------------------------------------------------------------------
# FSDP / ZeRO-3 gather buffers


def _term_of(record: dict, prefix: str = "") -> Term:
    """A Term from the dicts memory/fsdp.py and memory/deepspeed_buffers.py return."""
    name = record["name"]
    return Term(name if name.startswith(prefix) else prefix + name, record["component"],
                int(record["bytes"]), record["formula"], dict(record.get("inputs", {})),
                record.get("source", ""))


def buffer_terms(model, plan, phase: str) -> list:
    """Gather and bucket buffers of sharded data parallelism around a step.

    DeepSpeed ZeRO (memory/deepspeed_buffers.py): the gradient-reduction bucket of ZeRO-1/2/3
    and, under ZeRO-3, the ceiling on gathered parameters (max_live_parameters, prefetch
    included) plus the small parameters kept unpartitioned (param_persistence_threshold).
    FSDP2 with one unit per decoder layer plus the root (memory/fsdp.py): the root stays
    unsharded from forward through backward and one layer's all-gather is prefetched; with
    reshard_after_forward=False every layer stays unsharded from its forward to its backward
    (checked against ../shared/calibration/fsdp2-records.json). Parameters are gathered in the
    compute dtype (bf16 under a MixedPrecisionPolicy). In the middle of backward
    (`backward_layer`, `backward_recompute`) a unit's backward adds the prefetched unit, its
    unsharded gradients and the reduce-scatter buffers (fsdp.backward_unit_buffers).
    """
    from memlint.memory import fsdp

    par, topo, counts = model.par, model.topo, model.counts
    if phase == "optimizer" or model.seed:
        return []
    layer_params = [math.ceil(counts.layers[i].total / topo.tp) for i in plan.layers]
    uses_deepspeed = (model.tr.framework == "deepspeed"
                      or "deepspeed.config" in model.scenario.extra)
    if uses_deepspeed and par.zero >= 1 and par.fsdp == "none":
        return [_term_of(record, "buffers.") for record in _deepspeed_buffers(model, plan,
                                                                               layer_params)]
    sharded = par.fsdp in ("full", "hybrid") or par.zero >= 3
    if not sharded or topo.shard <= 1:
        return []
    gather = 2 if model.dt.compute == 2 else 4
    root = 0
    if plan.first:
        root += counts.embedding + counts.position_embedding
    if plan.last:
        root += counts.final_norm + counts.lm_head
    root = math.ceil(root / topo.tp)
    unit = max(layer_params or [0])
    mid_backward = phase in ("backward_layer", "backward_recompute")
    if par.reshard_after_forward:
        records = [fsdp.root_unsharded(root, gather),
                   fsdp.unit_allgather(unit, gather, prefetched=0)]
    elif mid_backward:
        # the last unit resharded after its backward; the others still unsharded
        records = [fsdp.no_reshard_unsharded(layer_params[:-1], gather, root)]
    else:
        records = [fsdp.no_reshard_unsharded(layer_params, gather, root)]
    if mid_backward:
        # a unit's backward: the prefetched unit before it, its unsharded grads and the
        # reduce-scatter buffers in the reduce dtype (= the sharded grads' dtype)
        records += fsdp.backward_unit_buffers(unit, gather, model.dt.grad, topo.shard,
                                              prefetched=1 if par.reshard_after_forward else 0)
    return [_term_of(record, "buffers.") for record in records if record["bytes"]]


def _deepspeed_buffers(model, plan, layer_params: list) -> list:
    """DeepSpeed's ZeRO buffers with the sizes its config gives (or DeepSpeed's defaults; an
    "auto" size is the HF Trainer's: reduce bucket d², prefetch 0.9·d², persistence 10·d)."""
    from memlint.memory import deepspeed_buffers as ds

    extra = model.scenario.extra
    d = model.arch.hidden

    def size(key, default, auto):
        setting = extra.get(f"deepspeed.{key}")
        value = setting.value if setting is not None else default
        if value == "auto":
            return int(auto)
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return int(default)

    def flag(key, default):
        setting = extra.get(f"deepspeed.{key}")
        return setting.value if isinstance(getattr(setting, "value", None), bool) else default

    name_of = {4: "fp32", 2: "bf16", 1: "fp8"}  # bytes -> the dtype names of DTYPE_BYTES
    dtype = name_of.get(model.dt.grad, "bf16")
    stage = model.par.zero
    records = [ds.reduce_bucket(stage, size("reduce_bucket_size", ds.DEFAULT_REDUCE_BUCKET, d * d),
                                dtype, flag("contiguous_gradients", True),
                                flag("overlap_comm", stage == 3))]
    if stage >= 3:
        param_dtype = name_of.get(model.dt.param, "bf16")
        stage_params = sum(layer_params)
        records.append(ds.stage3_live_parameters(
            size("stage3_max_live_parameters", ds.DEFAULT_MAX_LIVE_PARAMETERS, 1e9),
            param_dtype, total_params=stage_params,
            largest_module_params=max(layer_params or [0])))
        norms = [d] * (2 * len(plan.layers) + (1 if plan.last else 0))
        records.append(ds.stage3_persistent_parameters(
            norms, model.topo.shard, param_dtype,
            size("stage3_param_persistence_threshold", ds.DEFAULT_PERSISTENCE_THRESHOLD, 10 * d)))
    return records


# ---------------------------------------------------------------------------------------------
# runtime (offload: memory/offload.py)


def runtime_terms(model) -> list:
    """What a real GPU process adds outside PyTorch's caching allocator: the CUDA context (module
    images, cuDNN handles) and NCCL communicator buffers, one per process group with more than
    one rank. cuBLAS, cuBLASLt and Transformer Engine workspaces are allocated through the
    caching allocator and are `buffers.*` terms (`workspace_terms`)."""
    if model.scenario.hardware.device == "cpu":
        return []
    assume, topo = model.assume, model.topo
    terms = [Term("runtime.cuda_context", "runtime", int(assume["runtime.cuda_context_bytes"]),
                  "CUDA context outside the caching allocator (assumption "
                  "runtime.cuda_context_bytes)",
                  {}, "PyTorch on H100: ~500-700 MiB outside the caching allocator")]
    groups = sum(1 for size in (topo.tp, topo.pp, topo.cp, topo.dp, topo.ep) if size > 1)
    if groups:
        per = int(assume["runtime.nccl_bytes_per_group"])
        terms.append(Term("runtime.nccl", "runtime", per * groups,
                          f"{groups} process groups × {per // MiB} MiB",
                          {"groups": groups, "bytes_per_group": per},
                          "NCCL buffers: NCCL_BUFFSIZE 4 MiB × channels per communicator"))
    return terms


def allocator_terms(model, terms) -> list:
    """The caching allocator's rounding and fragmentation, a fraction of the tensor bytes."""
    if model.scenario.hardware.device == "cpu":
        return []
    fraction = float(model.assume["runtime.allocator_fraction"])
    tensors = sum(t.bytes for t in terms if t.component != "runtime")
    return [Term("runtime.allocator", "runtime", int(tensors * fraction),
                 f"{fraction:g} × tensor bytes {tensors:,}", {"fraction": fraction},
                 "PyTorch caching allocator (block rounding, fragmentation)")]


# ---------------------------------------------------------------------------------------------
# workspaces that stay allocated (inside the caching allocator: counted in allocated_bytes)

KiB = 1024

# CUDA compute capability by catalog GPU (NVIDIA data sheets); None: not an NVIDIA GPU.
_COMPUTE_CAPABILITY = (("H100", (9, 0)), ("H200", (9, 0)), ("B200", (10, 0)), ("B300", (10, 3)),
                       ("A100", (8, 0)), ("V100", (7, 0)), ("L40S", (8, 9)), ("A10G", (8, 6)),
                       ("RTX-4090", (8, 9)), ("MI", None))


def compute_capability(gpu: str):
    for prefix, cc in _COMPUTE_CAPABILITY:
        if (gpu or "").upper().startswith(prefix.upper()):
            return cc
    return (9, 0)  # an unknown GPU: the Hopper sizes (the largest defaults below)


def _extra(model, key: str, default=None):
    setting = model.scenario.extra.get(key)
    return default if setting is None else setting.value


def cublas_workspace_bytes(config, cc) -> tuple:
    """(bytes, how) of one PyTorch cuBLAS workspace: `CUBLAS_WORKSPACE_CONFIG` (:SIZE_KiB:COUNT
    pairs, summed), else PyTorch's default: 4096 KiB x 8 = 32 MiB on sm90, otherwise
    4096 KiB x 2 + 16 KiB x 8 (aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize)."""
    if isinstance(config, str):
        pairs = re.findall(r":([0-9]+):([0-9]+)", config)
        # PyTorch reads each number with std::stoi: one past INT_MAX is not a workspace size
        if pairs and all(int(n) <= 2**31 - 1 for pair in pairs for n in pair):
            total = sum(int(size) * KiB * int(count) for size, count in pairs)
            return total, f"CUBLAS_WORKSPACE_CONFIG {config}"
    if cc == (9, 0):
        return 4096 * 8 * KiB, "PyTorch default on sm90: 4096 KiB x 8"
    return 4096 * KiB * 2 + 16 * KiB * 8, "PyTorch default: 4096 KiB x 2 + 16 KiB x 8"


def workspace_terms(model) -> list:
    """GEMM workspaces that are allocated once through the caching allocator and never freed.

    - PyTorch's cuBLAS workspace is kept per (cuBLAS handle, stream) (CublasHandlePool.cpp
      `setWorkspaceForHandle`), and each thread gets its own handle (thread-local pool window).
      The forward runs on the Python thread and the backward on the autograd engine's device
      thread (torch/csrc/autograd/engine.cpp, one worker thread per device), so a training step
      holds two workspaces.
    - cuBLASLt (addmm with a bias through `gemm_and_bias`): `CUBLASLT_WORKSPACE_SIZE`, default
      1024 KiB, also per handle and stream; only when some torch linear has a bias.
    - Transformer Engine's GEMM workspace (transformer_engine/pytorch/module/base.py
      `get_cublas_workspace_size_bytes`: 32 MiB + 256 B from sm90, 4 MiB before), and for
      grouped GEMMs (MoE experts) one per cuBLAS stream (`get_num_cublas_streams()` = 4).
    - Megatron's local (non-TE) attention keeps its baddbmm input in the global memory buffer
      ("mpu", B · heads/tp · T² in the compute dtype; megatron/core/transformer/
      dot_product_attention.py, megatron/core/utils.py GlobalMemoryBuffer).
    """
    if model.scenario.hardware.device == "cpu" or model.seed:
        return []
    tr, arch, topo = model.tr, model.arch, model.topo
    cc = compute_capability(model.scenario.hardware.gpu)
    if cc is None:
        return []  # ROCm: hipBLAS/hipBLASLt sizes are not modelled
    terms = []
    size, how = cublas_workspace_bytes(_extra(model, "env.CUBLAS_WORKSPACE_CONFIG"), cc)
    terms.append(Term("buffers.cublas_workspace", "buffers", 2 * size,
                      f"2 threads (forward, autograd backward) × {how} = 2 × {size:,} B",
                      {"bytes_each": size, "threads": 2},
                      "aten/src/ATen/cuda/CublasHandlePool.cpp; torch/csrc/autograd/engine.cpp"))
    megatron = tr.framework == "megatron"
    local = megatron and _extra(model, "megatron.transformer-impl") == "local"
    te = megatron and not local
    biased = arch.qkv_bias or arch.mlp_bias or arch.output_bias
    if biased and (local or not megatron):
        lt = _lt_workspace_bytes(_extra(model, "env.CUBLASLT_WORKSPACE_SIZE"))
        terms.append(Term("buffers.cublaslt_workspace", "buffers", 2 * lt,
                          f"2 threads × CUBLASLT_WORKSPACE_SIZE {lt // KiB} KiB",
                          {"bytes_each": lt, "threads": 2},
                          "aten/src/ATen/cuda/CublasHandlePool.cpp parseCUDABlasLtWorkspaceSize"))
    if te:
        one = 32 * MiB + 256 if cc >= (9, 0) else 4 * MiB
        grouped = arch.moe is not None and bool(_extra(model, "megatron.moe-grouped-gemm"))
        count = 1 + (4 if grouped else 0)
        terms.append(Term("buffers.te_workspace", "buffers", count * one,
                          f"{count} × {one:,} B (GEMM workspace"
                          + (" + 4 grouped-GEMM streams" if grouped else "") + ")",
                          {"bytes_each": one, "count": count},
                          "transformer_engine/pytorch/module/base.py get_workspace, "
                          "get_multi_stream_cublas_workspace"))
    if local and tr.attention == "eager":
        heads = math.ceil(arch.heads / topo.tp)
        seq = math.ceil(model.seq / topo.cp)
        value = model.dt.compute * tr.micro_batch * heads * seq * seq
        terms.append(Term("buffers.attention_matmul_buffer", "buffers", value,
                          f"{model.dt.compute} B × B {tr.micro_batch} × heads/tp {heads} × "
                          f"T² {seq}²", {"batch": tr.micro_batch, "heads": heads, "seq": seq},
                          "megatron/core/transformer/dot_product_attention.py (global memory "
                          "buffer 'mpu')"))
    return terms


def _lt_workspace_bytes(setting) -> int:
    try:
        return int(str(setting).strip()) * KiB if setting is not None else 1024 * KiB
    except ValueError:
        return 1024 * KiB
