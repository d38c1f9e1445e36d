"""Activations outside the decoder layers' own: the embedding's output (and its dropout mask),
attention masks materialized by eager attention, and autocast's low-precision weight copies.
"""
from __future__ import annotations

import math

from memlint.memory.lora import adapter_bytes_per_param, frozen_bytes_per_param
from memlint.memory.model import Model
from memlint.memory.stages import StagePlan
from memlint.memory.terms import Term


def embedding_activation_terms(model: Model, tokens: int, seq_local: int, inflight: float) -> list:
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


def attention_mask_terms(model: Model, plan: StagePlan, batch: int, seq_local: int) -> list:
    """Eager attention adds a materialized 4-D causal mask, B × 1 × T × T in the model's dtype,
    built once per forward (transformers masking_utils `eager_mask`); SDPA and flash take
    `is_causal` instead."""
    if (model.tr.attention != "eager" or not model.conv.torch_modules
            or model.assume["activations.model"] == "seed"):
        return []
    c = model.dt.param if model.dt.autocast else model.dt.compute
    value = c * batch * seq_local * seq_local
    return [Term("activations.attention_mask", "activations", value,
                 f"4-D causal mask {c} B × B {batch} × T² {seq_local}²",
                 {"batch": batch, "seq": seq_local, "bytes": c},
                 "transformers masking_utils eager_mask")]


def megatron_batch_terms(model: Model, plan: StagePlan, batch: int, seq_local: int) -> list:
    """Megatron's GPT batch on the GPU while a micro-batch's forward runs (pretrain_gpt.py
    get_batch: get_batch_on_this_tp_rank on the first and last stages, then
    get_batch_on_this_cp_rank): the dataloader's attention mask, B x 1 x T/cp x T bool (the CP
    slice keeps every key column), and on the last stage the labels (int64) and loss mask (fp32),
    B x T/cp each. The token ids are in the embedding term."""
    if (not model.conv.gpt_batch or not (plan.first or plan.last)
            or model.assume["activations.model"] == "seed"):
        return []
    mask = batch * seq_local * model.seq if model.conv.dataloader_mask else 0
    labels = 12 * batch * seq_local if plan.last else 0
    if not mask and not labels:
        return []
    parts = ([f"attention mask 1 B × B {batch} × T/cp {seq_local} × T {model.seq}"]
             if mask else []) + ([f"labels 8 B + loss mask 4 B × {batch * seq_local:,} tokens"]
                                 if labels else [])
    return [Term("activations.batch", "activations", mask + labels, " + ".join(parts),
                 {"batch": batch, "seq_local": seq_local, "seq": model.seq,
                  "attention_mask": mask, "labels_and_loss_mask": labels},
                 "Megatron-LM pretrain_gpt.py get_batch, megatron/training/utils.py "
                 "get_batch_on_this_tp_rank, megatron/core/datasets/gpt_dataset.py "
                 "(create_attention_mask)")]


def autocast_weight_terms(model: Model, plan: StagePlan, phase: str = "forward_end") -> list:
    """Low-precision copies of linear weights made by torch.autocast.

    autocast casts a linear's weight to bf16 when the weight is fp32. `cached_cast`
    (aten/src/ATen/autocast_mode.cpp, pytorch/pytorch@cfed411) caches the copy only for fp32 leaf
    tensors that require grad (`arg.scalar_type() == kFloat && arg.requires_grad() &&
    arg.is_leaf() && !arg.is_view()`; grad mode is not asked), until the outermost autocast
    context exits; `mm` saves the copy for the input gradient, so each layer's copy lives from
    its forward to its backward.
    A frozen fp32 weight is cast anew (not cached), and `mm` still saves that copy when its input
    requires grad, which in a LoRA model is every linear but the first layer's q/k/v (their
    input, the embedding output, needs no grad). No copy exists for bf16/fp16 weights (nothing
    to cast) or for a quantized base (bitsandbytes' matmul saves the quantized weight and
    dequantizes again in backward). fp32 LoRA adapters are trainable leaves: cached copies,
    over a bf16 base too (peft casts the adapters up: memory/lora.py adapter_bytes_per_param).
    Routed experts run through `grouped_mm`, which autocast does not cover (transformers
    integrations/moe.py), so they have none; the LM head has one on the last stage.

    Under full recompute the checkpointed layers' forward saves nothing (torch/utils/checkpoint.py:
    the reentrant forward runs under no_grad, the non-reentrant one drops what it saves), so only
    the cache holds copies, those of trainable leaves, until the Trainer's autocast context
    exits after the loss (transformers Trainer.training_step: compute_loss inside
    compute_loss_context_manager, backward outside): at the end of the forward. The backward
    starts with the LM head's copy alone (its mm is not checkpointed), and each layer's
    recompute casts that layer's weights again under its own autocast context, which its mm
    keeps until the layer's backward is done: one layer's copies.
    """
    if (not model.dt.autocast or not model.conv.autocast_weight_copies
            or model.assume["activations.model"] == "seed"):
        return []
    counts, arch, tr = model.counts, model.arch, model.tr
    base_bytes = (frozen_bytes_per_param(tr.base_quant, model.dt.param, False) if model.lora
                  else model.dt.param)
    base_fp32 = base_bytes == 4 and tr.base_quant == "none"
    fp32_adapters = model.lora and (model.dt.param == 4 or adapter_bytes_per_param(model) == 4)
    # a partial fine-tune with its frozen layers in bf16 (frozen_dtype): only the trained
    # layers are fp32, so only they are cast
    only_trained = bool(model.trained_layers) and tr.frozen_dtype not in (None, "fp32")
    full = tr.recompute == "full"
    per_layer = []  # (linear weights cast, of them cached until autocast exits, adapters)
    for index in plan.layers:
        layer = counts.layers[index]
        cast = 0
        if base_fp32 and not (only_trained and index not in model.trained_layers):
            router = 0 if (arch.moe is not None and arch.moe.router_bias) else layer.router
            cast = layer.attention + layer.mlp + layer.shared_experts + router
        trainable = not model.lora and (index in model.trained_layers if model.trained_layers
                                        else tr.train_base)
        per_layer.append((cast, cast if trainable else 0,
                          model.lora_per_layer[index] if fp32_adapters else 0))
    head = (counts.lm_head or counts.embedding) if (base_fp32 and plan.last and not only_trained) else 0
    first_qkv = 0
    if base_fp32 and model.lora and plan.first and plan.layers and arch.mla is None:
        # q, k, v of the first layer read the embedding output, which needs no grad
        o_proj = arch.heads * arch.head_dim * arch.hidden
        first_qkv = max(0, counts.layers[plan.layers[0]].attention - o_proj)
    if not full or phase not in ("forward_end", "backward_start", "backward_recompute"):
        linear = sum(c for c, _, _ in per_layer)
        adapters = sum(a for _, _, a in per_layer)
        when = "saved by mm until each layer's backward"
    elif phase == "forward_end":
        linear, adapters, first_qkv = sum(k for _, k, _ in per_layer), sum(a for _, _, a in per_layer), 0
        when = "full recompute: the cached copies of trainable leaves, until autocast exits"
    elif phase == "backward_start":
        linear = adapters = first_qkv = 0
        when = "full recompute: the LM head's alone"
    else:
        linear, _, adapters = max(per_layer, default=(0, 0, 0), key=lambda c: c[0] + c[2])
        head = first_qkv = 0
        when = "full recompute: the recomputed layer's"
    n = math.ceil((linear - first_qkv + head + adapters) / model.topo.tp)
    if n <= 0:
        return []
    return [Term("activations.autocast_weight_copies", "activations", 2 * n,
                 f"bf16 copies of fp32 linear weights ({when}): ({linear:,} in layers − "
                 f"{first_qkv:,} first-layer q/k/v + {head:,} LM head + {adapters:,} LoRA "
                 "adapters) × 2 B",
                 {"layer_linear_params": linear, "first_layer_qkv": first_qkv,
                  "head_params": head, "lora_params": adapters, "base_bytes": base_bytes,
                  "recompute": tr.recompute},
                 "torch.autocast cached_cast (pytorch/pytorch@cfed411 aten/src/ATen/autocast_mode.cpp: "
                 "fp32 leaves requiring grad); mm keeps its weight; torch/utils/checkpoint.py "
                 "(the checkpointed forward saves nothing)")]
