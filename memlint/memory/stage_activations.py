"""Saved activations of one pipeline stage: the decoder layers (fused Megatron/TE kernels,
eager transformers modules, or torchtitan's op-level selective checkpointing; memory/activations.py
and activations_eager.py give the per-token items), checkpointed layers, multi-token prediction,
activation offload, the embedding and masks, and the vision encoder (Megatron LLaVA's ViT layer by
layer, other towers as a whole).
"""
from __future__ import annotations

import math

from memlint import lazy_import
from memlint.memory import activations as act
from memlint.memory import offload
from memlint.memory.activation_extras import (attention_mask_terms, autocast_weight_terms,
                                              embedding_activation_terms, megatron_batch_terms)
from memlint.memory.compile import SRC_COMPILED_SAC, compiled_block_saves_cut
from memlint.memory.lora import lora_activation_items
from memlint.memory.model import Model
from memlint.memory.softmax import softmax_bytes
from memlint.memory.stages import StagePlan
from memlint.memory.terms import Term

# start-up: what only some runs use loads when one does (an HF eager layer's items, fine-grained
# offload, an MoE imbalance, a layer layout, a vision tower)
eager = lazy_import.module("memlint.memory.activations_eager")
fine_offload = lazy_import.module("memlint.memory.fine_offload")
moe_balance = lazy_import.module("memlint.memory.moe_balance")
_layouts = lazy_import.module("memlint.memory.layout_activations")
_vision = lazy_import.module("memlint.memory.vision")
_sac_backward = lazy_import.module("memlint.memory.sac_backward")

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


# Saved tensors of the routed experts, by the names the MoE items give them (activations.py,
# activations_eager.py, moe_activations.py): with offload_experts cpu (KTransformers) the experts
# run on the CPU and keep their activations there; the router and shared experts stay on the GPU.
_CPU_EXPERT_PREFIXES = ("expert ", "experts ", "routed tokens", "routing weights")


def cpu_expert_item(name: str) -> bool:
    return name.startswith(_CPU_EXPERT_PREFIXES)


def activation_terms(model: Model, plan: StagePlan, phase: str, host_out=None) -> list:
    """Saved activations of this stage at the given phase (all in-flight micro-batches)."""
    tr, par, topo, arch = model.tr, model.par, model.topo, model.arch
    layers = len(plan.layers)
    seq_local = model.seq_local
    tokens = tr.micro_batch * seq_local
    if model.assume["activations.model"] == "seed":
        return _seed_activation_terms(model, plan)
    terms = []
    inflight = stage_inflight(model, plan)
    layer_list: list = []
    per_layer_full, items_full = layer_bytes_per_token(model, plan, recompute=False,
                                                       per_layer=layer_list)
    # the layer input is the residual stream: under autocast it keeps the params' dtype (fp32
    # embedding output plus bf16 matmul outputs promotes to fp32), else the compute dtype
    residual = model.dt.param if model.dt.autocast else model.dt.compute
    if tr.recompute == "full":
        items = act.recompute_items(residual, arch.hidden, topo.tp, par.sp)
        per_layer = sum(i.per_token for i in items)
        kept = layers
        full_layers = 0
    elif tr.recompute == "selective" and tr.recompute_every > 1:
        full_layers = math.ceil(layers / tr.recompute_every)
        kept = layers - full_layers
        per_layer = sum(i.per_token for i in act.recompute_items(
            residual, arch.hidden, topo.tp, par.sp))
    else:
        full_layers, kept, per_layer = layers, 0, 0.0
    stage_tokens = tokens * inflight
    if full_layers:
        full_bytes = int(per_layer_full * tokens) * full_layers
        terms.append(Term(
            name="activations", component="activations",
            bytes=int(round(full_bytes * inflight)),
            formula=(f"{full_layers} layers × {per_layer_full:,.1f} B/token (saved tensors at "
                     f"tp {topo.tp}{', sp' if par.sp and topo.tp > 1 else ''}) × "
                     f"{tokens:,} tokens (B {tr.micro_batch} × T/cp {seq_local})"
                     + (f" × {inflight:g} in-flight micro-batches" if inflight != 1 else "")),
            inputs={"layers": full_layers, "bytes_per_token_per_layer": per_layer_full,
                    "tokens": tokens, "inflight": inflight,
                    "saved": {i.name: round(i.bytes_per_token(seq_local), 2)
                              for i in items_full}},
            source=activation_source(model)))
    fine = model.conv.fine_offload
    if fine is not None and full_layers and terms and tr.recompute != "full":
        # Megatron's fine-grained activation offloading (memory/fine_offload.py)
        gpu, moved = fine_offload.offload_layer_term(terms[-1], layer_list, fine, seq_local,
                                                     tokens, model.dt.compute, inflight)
        terms[-1] = gpu
        if host_out is not None:
            host_out.append(moved)
    if kept:
        terms.append(Term(
            name="activations.checkpoints", component="activations",
            bytes=int(round(per_layer * stage_tokens * kept)),
            formula=(f"{kept} checkpointed layers × {per_layer:g} B/token (layer input"
                     f"{f' / tp {topo.tp} (sp)' if par.sp and topo.tp > 1 else ''}) × "
                     f"{tokens:,} tokens" + (f" × {inflight:g} in flight" if inflight != 1 else "")),
            inputs={"layers": kept, "bytes_per_token": per_layer, "tokens": tokens,
                    "inflight": inflight},
            source=("Chen et al. 2016 (gradient checkpointing); torch.utils.checkpoint keeps "
                    "each layer's input")))
        if phase == "backward_recompute":
            terms.append(Term(
                name="activations.recomputed_layer", component="activations",
                bytes=int(per_layer_full * tokens),
                formula=f"one layer recomputed in backward: {per_layer_full:,.1f} B/token × {tokens:,}",
                inputs={"bytes_per_token": per_layer_full, "tokens": tokens},
                source="activation checkpointing re-runs one layer's forward in its backward"))
    if phase == "backward_recompute" and full_layers and not kept and model.op_sac:
        # the last layer's recompute and activation gradients (memory/sac_backward.py)
        terms.append(_sac_backward.backward_layer_term(model, tokens,
                                                       compiled_block_saves_cut(model)))
    if plan.last and model.mtp_layers and tr.recompute != "full":
        terms.append(_mtp_term(model, plan, tokens))
    if plan.last and arch.bert_heads:
        terms.append(_bert_head_term(model, tokens))
    if par.offload_activations:
        # activation offload (memory/offload.py): offloaded layers are host memory
        terms, moved = offload.activation_offload(terms, layers,
                                                  par.offload_activations_layers)
        if host_out is not None:
            host_out.extend(moved)
    terms += autocast_weight_terms(model, plan, phase)
    terms += attention_mask_terms(model, plan, tr.micro_batch, seq_local)
    terms += megatron_batch_terms(model, plan, tr.micro_batch, seq_local)
    if plan.first:
        terms += embedding_activation_terms(model, tokens, seq_local, inflight)
        if model.arch.vision is not None and tr.images_per_sample:
            if model.arch.vision.model_type == "megatron_clip":
                terms += megatron_vision_terms(model, inflight)
            else:
                terms += _vision.vision_activation_terms(model, inflight)
    return terms




def _bert_head_term(model: Model, tokens: int) -> Term:
    """Megatron BERT's masked-LM head on the last stage (bert_lm_head.py BertLMHead.forward:
    dense -> gelu -> norm, then the output layer): beyond what a GPT keeps (the output layer's
    input), the dense output (gelu's input), gelu's output (the norm's input) and the norm's
    output, each d wide in the compute dtype, plus the norm's fp32 mean and rstd; over the
    sequence-parallel shard of the tokens."""
    c, d, topo = model.dt.compute, model.arch.hidden, model.topo
    rep = topo.tp if model.par.sp and topo.tp > 1 else 1
    per_token = (3 * c * d + 8) / rep
    return Term("activations.bert_lm_head", "activations", int(per_token * tokens),
                f"(3 × {c} B × d {d} + 8 B)" + (f" / tp {topo.tp} (sp)" if rep > 1 else "")
                + f" × {tokens:,} tokens (dense output, gelu output, norm output and stats)",
                {"bytes_per_token": per_token, "tokens": tokens},
                "megatron/core/models/bert/bert_lm_head.py BertLMHead.forward")


def _seed_activation_terms(model: Model, plan: StagePlan) -> list:
    """The articles' C_act per B·T·d per layer (the seed profile)."""
    tr, topo, arch = model.tr, model.topo, model.arch
    layers = len(plan.layers)
    seq_local = model.seq_local
    tokens = tr.micro_batch * seq_local
    terms = []
    flash = tr.attention in ("flash", "sdpa")
    coeff = act.seed_layer_coefficient(model.assume["activations.c_act"],
                                       model.assume["activations.c_attn_scores"],
                                       arch.heads, model.seq, arch.hidden, flash)
    units = act.seed_stage_units(layers, tr.recompute, tr.recompute_every, coeff,
                                 model.assume["activations.c_act_full_recompute"])
    tp_div = topo.tp if model.assume["activations.tp_divides"] else 1
    value = int(round(units * tokens * arch.hidden / tp_div))
    terms.append(Term(
        name="activations", component="activations", bytes=value,
        formula=(f"{units:g} (C_act × layers) × B {tr.micro_batch} × T/cp {seq_local} × "
                 f"d {arch.hidden}" + (f" / tp {tp_div}" if tp_div > 1 else "")),
        inputs={"layers": layers, "c_act_sum": units, "micro_batch": tr.micro_batch,
                "seq_per_cp": seq_local, "hidden": arch.hidden, "tp": tp_div},
        source=("seed profile: C_act per B·T·d per layer (Korthikanti et al. 2022: 34 "
                "with FlashAttention, sections 4.1-4.2)")))
    if plan.first and model.arch.vision is not None and tr.images_per_sample:
        terms += _vision.vision_activation_terms(model, 1)
    return terms


def _mtp_term(model: Model, plan: StagePlan, tokens: int) -> Term:
    """Megatron's multi-token-prediction layers on the last stage, one micro-batch."""
    par, topo, arch = model.par, model.topo, model.arch
    last = model.arch.layers - 1
    mtp_plan = StagePlan(plan.stage, (last,), False, True)
    per_token, _ = layer_bytes_per_token(model, mtp_plan, recompute=False)
    c = model.dt.compute
    rep = topo.tp if par.sp else 1
    # the layer itself, plus the normed embedding and hidden halves and their
    # concatenation (eh_proj's input): 3 × 2d·c / rep per token
    extra = 3 * 2 * arch.hidden * c / rep
    value = int((per_token + extra) * tokens * model.mtp_layers)
    return Term(
        name="activations.mtp", component="activations", bytes=value,
        formula=(f"{model.mtp_layers} MTP layer(s) × ({per_token:,.1f} B/token (a layer "
                 f"like the last) + {extra:,.1f} B/token (enorm, hnorm, eh_proj input)) "
                 f"× {tokens:,} tokens, one micro-batch (the loss runs in the 1F1B "
                 "steady state)"),
        inputs={"layers": model.mtp_layers, "bytes_per_token": per_token,
                "tokens": tokens},
        source="megatron/core/transformer/multi_token_prediction.py")


def megatron_vision_terms(model: Model, inflight: float) -> list:
    """Megatron LLaVA's CLIP ViT, layer by layer like the language model (fused items on the
    ViT's shapes: its config is a copy of the LM's), over B × image tokens, with tensor
    parallelism but no sequence or context parallelism (pretrain_vlm.py turns them off for
    the vision model and projection), plus the projection MLP's fc1 output, activation output
    and input (megatron/core/models/multimodal/llava_model.py)."""
    tr, topo, vision = model.tr, model.topo, model.arch.vision
    c = model.dt.compute
    tokens_per_image = model.visual_tokens_per_image()
    # the ViT's layers run on the patches and the class token; the projection on the LM's tokens
    encoder_tokens = vision.encoder_tokens or tokens_per_image
    images = tr.micro_batch * tr.images_per_sample
    tokens = images * tokens_per_image
    sh = act.Shapes(d=vision.hidden, dq=vision.hidden, dk=vision.hidden, dv=vision.hidden,
                    heads=vision.heads, do=vision.hidden, ffn=vision.ffn,
                    gated=model.arch.gated_mlp, layernorm=vision.norm == "layernorm")
    flash = flash_for(model, vision.hidden // max(1, vision.heads))
    items = act.fused_layer_items(
        sh, c, flash, topo.tp, False, model.arch.hidden_dropout > 0,
        model.arch.attention_dropout > 0,
        model.tr.recompute == "selective" and model.tr.recompute_every <= 1,
        softmax_bytes=softmax_bytes(model, encoder_tokens, vision.heads, flash))
    per_token = sum(i.bytes_per_token(encoder_tokens) for i in items)
    layers_bytes = int(per_token * images * encoder_tokens * vision.layers * inflight)
    width = (2 if model.arch.gated_mlp else 1) * model.arch.ffn
    projection = int((c * vision.hidden + 2 * c * width / topo.tp) * tokens * inflight)
    return [Term("vision.activations", "vision", layers_bytes + projection,
                 f"{vision.layers} ViT layers × {per_token:,.1f} B/token × "
                 f"{images * encoder_tokens:,} image tokens (B {tr.micro_batch} × "
                 f"{encoder_tokens}) + projection MLP "
                 f"{projection:,} B" + (f" × {inflight:g} in flight" if inflight != 1 else ""),
                 {"layers": vision.layers, "tokens": images * encoder_tokens,
                  "projection_tokens": tokens, "bytes_per_token": per_token,
                  "saved": {i.name: round(i.bytes_per_token(encoder_tokens), 2)
                            for i in items}},
                 "Korthikanti et al. 2022 on the ViT's shapes; megatron/core/models/vision/"
                 "clip_vit_model.py, llava_model.py")]


def recompute_modules(model: Model) -> Optional[frozenset]:
    """Megatron's selective recompute modules (memory/conventions.py); None outside it."""
    return model.conv.recompute_modules


def flash_for(model: Model, head_dim: int) -> bool:
    """Whether attention runs a flash/fused kernel (no T×T tensors saved): Transformer Engine's
    needs head_dim to be a multiple of 8 (`flash_head_dim_multiple`, memory/conventions.py)."""
    multiple = model.conv.flash_head_dim_multiple
    return model.tr.attention in ("flash", "sdpa") and not (multiple and head_dim % multiple)


def schedule_knobs(model: Model) -> tuple:
    """(micro-batch group size per virtual stage, extra warm-up forwards) of Megatron's
    interleaved schedule: `--microbatch-group-size-per-virtual-pipeline-stage` (default pp,
    ModelParallelConfig.__post_init__) and one more with
    `--overlap-moe-expert-parallel-comm` (schedules.py get_pp_rank_microbatches)."""
    return model.conv.microbatch_group_size, model.conv.extra_warmup_forwards


def activation_source(model: Model) -> str:
    if model.arch.layout is not None:
        return _layouts.layout_source(model)
    if model.op_sac:
        src = "torchtitan op-level selective AC (memory/activations.py op_sac_items)"
        return src + "; " + SRC_COMPILED_SAC if compiled_block_saves_cut(model) else src
    if model.conv.eager_modules:
        return ("eager PyTorch modules (transformers), op by op "
                "(memory/activations_eager.py hf_layer_items)")
    return "Korthikanti et al. 2022 section 4 (memory/activations.py fused_layer_items)"


def stage_inflight(model: Model, plan: StagePlan) -> float:
    """Micro-batches whose activations this stage holds at once (1 unless the pipeline keeps
    several in flight: memory/activations.py inflight_microbatches)."""
    if not model.assume["pipeline.inflight_microbatches"]:
        return 1.0
    par = model.par
    return act.inflight_microbatches(plan.stage, par.pp, par.vpp, model.microbatches,
                                      *schedule_knobs(model),
                                      chunk_layers=model.rank_chunks(plan.stage))


def layer_bytes_per_token(model: Model, plan: StagePlan, recompute: bool,
                          per_layer: Optional[list] = None):
    """Average bytes per token per layer of this stage (dense and MoE layers differ; a per-layer
    plan, memory/layout_activations.py, gives each kind of layer its own items). `per_layer`
    collects (items, MoE layer, separate input norm) of each layer when given. Computed once per
    model and stage (`Model.per_token`): every phase of a step asks for the same layers."""
    key = (plan.stage, plan.layers, plan.first, plan.last, recompute)
    found = model.per_token.get(key)
    if found is None:
        layers: list = []
        found = model.per_token[key] = (*_layer_bytes_per_token(model, plan, layers), layers)
    if per_layer is not None:
        per_layer.extend(found[2])
    return found[0], found[1]


def _layer_bytes_per_token(model: Model, plan: StagePlan, per_layer: list) -> tuple:
    arch, tr, par, topo = model.arch, model.tr, model.par, model.topo
    seq_local = model.seq_local
    total = 0.0
    items_seen = []
    # transformers modules run eagerly (HF Trainer, accelerate FSDP2); a tensor-parallel FSDP2
    # run (torchtitan) has TP/SP-sharded activations, which the fused model describes.
    eager_modules = model.conv.eager_modules
    cache: dict = {}
    layout = arch.layout
    for index in plan.layers:
        moe_layer = bool(arch.moe is not None and index < len(arch.moe_layers)
                         and arch.moe_layers[index])
        first = plan.first and index == plan.layers[0]
        kind = layout.layers[index] if layout is not None else None
        key = (moe_layer, first and eager_modules, kind and (kind.mixer, kind.ffn.kind,
                                                             kind.attention is not None,
                                                             kind.stack))

        def uniform(moe_layer, first=first):
            sh = act.shapes(arch, moe_layer)
            if model.op_sac and not moe_layer:
                items = act.op_sac_items(sh, model.dt.compute, topo.tp,
                                         compiled_block_saves_cut(model))
                if _sac_backward.float8_abs_saved(model):
                    items = items + act.float8_abs_items(
                        sh, model.dt.compute, topo.tp, tr.micro_batch * seq_local,
                        weights_cast=model.conv.gather_bytes != 1)
            elif eager_modules:
                items = eager.hf_layer_items(sh, hf_run(model, first))
            else:
                flash = flash_for(model, sh.dq // max(1, sh.heads))
                items = act.fused_layer_items(
                    sh, model.dt.compute, flash, topo.tp, par.sp,
                    arch.hidden_dropout > 0, arch.attention_dropout > 0,
                    tr.recompute == "selective" and tr.recompute_every <= 1,
                    gemm=1 if tr.precision == "fp8" else None, etp=topo.etp,
                    softmax_bytes=softmax_bytes(model, seq_local, arch.heads, flash),
                    modules=recompute_modules(model), moe_layer=moe_layer,
                    separate_norm1=arch.mla is not None or model.conv.local_spec,
                    moe_dispatch=model.conv.moe_dispatch)
                if model.lora:
                    items = items + lora_activation_items(model, sh)
            if moe_layer and model.par.offload_experts == "cpu":
                items = [i for i in items if not cpu_expert_item(i.name)]
            return items

        if key not in cache:
            items = uniform(moe_layer) if kind is None else _layouts.plan_layer_items(
                model, kind, uniform, eager_modules)
            imbalance = float(model.assume.get("moe.routing_imbalance", 1.0))
            if moe_layer and moe_balance.applies(topo.ep, imbalance):
                # the busiest expert-parallel rank (memory/moe_balance.py)
                items = moe_balance.scale_routed(items, imbalance)
            cache[key] = (items, sum(i.bytes_per_token(seq_local) for i in items))
        items, per_token = cache[key]
        total += per_token
        items_seen = items
        per_layer.append((items, moe_layer, arch.mla is not None or model.conv.local_spec))
    return total / max(1, len(plan.layers)), items_seen


def hf_run(model: Model, first_layer: bool) -> "eager.HFRun":
    """The transformers run settings of one layer (memory/activations.py HFRun)."""
    tr, arch = model.tr, model.arch
    return eager.HFRun(
        c=model.dt.param if model.dt.autocast else model.dt.compute, autocast=model.dt.autocast,
        attention=tr.attention, device=model.scenario.hardware.device,
        dropout_attn=arch.attention_dropout, dropout_hidden=arch.hidden_dropout,
        base_trainable=not model.lora,
        lora_rank=tr.lora_rank if model.lora else 0,
        lora_targets=tr.lora_targets if model.lora else "", lora_dropout=tr.lora_dropout,
        fused_qkv=arch.fused_qkv, fused_gate_up=arch.fused_gate_up,
        softmax_fp32=arch.model_type != "gpt2",
        first_frozen_input=model.lora and first_layer)
