"""Weights, gradients and optimizer states of one pipeline stage, and the host memory their offload
takes: LoRA over a frozen (possibly quantized) base, a frozen base, or full training with
Transformer Engine FP8 weights; the vision tower; FSDP CPU offload and paged optimizer states.

The formulas per state are in memory/states.py, fp8.py, offload.py and optimizer_quant.py.
"""
from __future__ import annotations

from memlint import lazy_import
from memlint.memory import fp8, offload, states
from memlint.memory.lora import (ADAPTER_SOURCE, SAVED_SOURCE, UNQUANTIZED_SOURCE,
                                  adapter_bytes_per_param, frozen_bytes_per_param,
                                  saved_copy_dtypes, unquantized_params)
from memlint.memory.model import Model
from memlint.memory.runtime import compute_capability
from memlint.memory.states import DTYPE_BYTES
from memlint.memory.stages import StagePlan
from memlint.memory.terms import Term

# start-up: the vision tower's states load only for a model that has one
_vision = lazy_import.module("memlint.memory.vision")


def state_terms(model: Model, plan: StagePlan):
    """(weights, gradients, optimizer, host) term lists for one stage."""
    par, topo, dt, tr = model.par, model.topo, model.dt, model.tr
    groups_raw = model.stage_param_groups(plan)
    vision = model.vision_params(plan)
    split = groups_raw["split"]
    groups = [states.ShardedCount("dense", groups_raw["dense"], topo.shard, split["dense"])]
    if groups_raw["experts"]:
        groups.append(states.ShardedCount("experts", groups_raw["experts"], topo.expert_shard,
                                          split["experts"]))
    if model.lora:
        weights, gradients, optimizer = _lora_states(model, plan, groups)
    elif not tr.train_base:
        weights, gradients, optimizer = _frozen_base_states(model, plan, groups)
    else:
        weights, gradients, optimizer = _trained_states(model, plan, groups)
    host = []
    if vision:
        vision_terms = _vision.vision_state_terms(vision, dt, tr.optimizer, topo.shard,
                                                 par.zero, par.fsdp, model.lora)
        weights += vision_terms
    # -- offload (memory/offload.py): FSDP CPUOffloadPolicy and ZeRO-Offload move the sharded
    # grads to the host
    fsdp_offload = offload.fsdp_cpu_offload(par.fsdp, par.offload_params, model.uses_deepspeed)
    gradients, _ = offload.split_gradients(gradients, fsdp_offload or offload.zero_offload_gradients(
        model.uses_deepspeed, par.zero, par.offload_optimizer))
    host += offload.offload_host_terms(groups, dt, tr.optimizer, par.offload_optimizer,
                                       par.offload_params, model.lora, fsdp_offload)
    if groups_raw.get("host_experts"):
        host.append(cpu_experts_term(groups_raw["host_experts"], dt.param))
    # paged optimizer states (memory/optimizer_quant.py) are host memory, not GPU memory
    host += [t for t in optimizer if t.name.startswith("host.")]
    optimizer = [t for t in optimizer if not t.name.startswith("host.")]
    return weights, gradients, optimizer, host




KT_SOURCE = ("kvcache-ai/ktransformers (AMX MoE kernels) as LLaMA-Factory's use_kt runs it: "
             "hiyouga/LLaMA-Factory@ff6d4d12 src/llamafactory/hparams/model_args.py "
             "KTransformersArguments")


def cpu_experts_term(params: int, param_bytes: int) -> Term:
    """The routed experts kept in host memory (offload_experts cpu): their weights, in the
    model's dtype (KTransformers may hold pre-converted INT8 / INT4 copies instead)."""
    return Term("host.experts_cpu", "weights", params * param_bytes,
                f"routed experts on the host: {params:,} params × {param_bytes} B",
                {"params": params, "bytes": param_bytes}, KT_SOURCE)


def _lora_states(model: Model, plan: StagePlan, groups: list) -> tuple:
    """LoRA: the frozen base (quantized or not), the adapters and any modules_to_save."""
    par, topo, dt, tr = model.par, model.topo, model.dt, model.tr
    weights, gradients, optimizer = [], [], []
    trainable_count = sum(model.lora_per_layer[i] for i in plan.layers)
    trainable = [states.ShardedCount("lora", trainable_count, topo.shard)]
    saved = model.saved_module_params(plan)
    if saved:
        # PEFT modules_to_save: full trainable copies beside the frozen originals
        trainable.append(states.ShardedCount("modules_to_save", saved, topo.shard))
    frozen = [states.ShardedCount(_frozen_name(g), g.params, g.shard, g.split)
              for g in groups]
    if tr.base_quant != "none" and not model.uniform:
        # bitsandbytes quantizes the linear layers; embeddings, LM head and norms keep the
        # loaded dtype (lora.unquantized_params)
        kept = min(unquantized_params(model, plan), frozen[0].params)
        frozen[0] = states.ShardedCount("frozen", frozen[0].params - kept, frozen[0].shard)
        weights += states.weight_terms(
            [states.ShardedCount("frozen_unquantized", kept, topo.shard)], dt, par.zero,
            par.fsdp, par.offload_params, frozen_bytes_per_param=dt.param,
            source=UNQUANTIZED_SOURCE)
    frozen_bytes = frozen_bytes_per_param(tr.base_quant, dt.param, model.seed_states)
    weights += states.weight_terms(frozen, dt, par.zero,
        par.fsdp, par.offload_params, frozen_bytes_per_param=frozen_bytes)
    adapter = adapter_bytes_per_param(model)
    weights += states.weight_terms(trainable[:1], dt, par.zero, par.fsdp, par.offload_params,
                                   frozen_bytes_per_param=adapter,
                                   source=ADAPTER_SOURCE if adapter else
                                   states.WEIGHTS_SOURCE)
    weights += states.weight_terms(trainable[1:], dt, par.zero, par.fsdp, par.offload_params,
                                   source=SAVED_SOURCE)
    saved_dt = saved_copy_dtypes(model)
    if saved and saved_dt is not dt:
        gradients += states.gradient_terms(trainable[:1], dt, par.zero, par.fsdp)
        gradients += states.gradient_terms(trainable[1:], saved_dt, par.zero, par.fsdp)
        optimizer += states.optimizer_terms(trainable[:1], dt, tr.optimizer, par.zero,
                                            par.fsdp, par.offload_optimizer,
                                            adafactor_factored=trainable_count)
        optimizer += states.optimizer_terms(trainable[1:], saved_dt, tr.optimizer, par.zero,
                                            par.fsdp, par.offload_optimizer,
                                            adafactor_factored=saved)
        return weights, gradients, optimizer
    gradients += states.gradient_terms(trainable, dt, par.zero, par.fsdp)
    optimizer += states.optimizer_terms(trainable, dt, tr.optimizer, par.zero, par.fsdp,
                                        par.offload_optimizer,
                                        adafactor_factored=trainable_count + saved)
    return weights, gradients, optimizer


def _frozen_base_states(model: Model, plan: StagePlan, groups: list) -> tuple:
    """The base is frozen (Megatron --freeze-LM, a frozen backbone): its weights are held, but
    it has no gradients and no optimizer states; a partial fine-tune (LLaMA-Factory freeze
    tuning) still trains some layers, in the trained dtype."""
    par, topo, dt, tr = model.par, model.topo, model.dt, model.tr
    weights, gradients, optimizer = [], [], []
    trained = min(model.trained_layer_params(plan), groups[0].params)
    frozen = [states.ShardedCount(_frozen_name(g), g.params, g.shard, g.split)
              for g in groups]
    if trained:
        frozen[0] = states.ShardedCount("frozen", frozen[0].params - trained,
                                        frozen[0].shard)
    frozen_bytes = DTYPE_BYTES[tr.frozen_dtype] if tr.frozen_dtype else None
    weights += states.weight_terms(frozen, dt, par.zero, par.fsdp, par.offload_params,
                                   frozen_bytes_per_param=frozen_bytes)
    if trained:
        group = [states.ShardedCount("trained_layers", trained, topo.shard)]
        weights += states.weight_terms(group, dt, par.zero, par.fsdp, par.offload_params,
                                       source=PARTIAL_SOURCE)
        gradients += states.gradient_terms(group, dt, par.zero, par.fsdp)
        optimizer += states.optimizer_terms(group, dt, tr.optimizer, par.zero, par.fsdp,
                                            par.offload_optimizer,
                                            adafactor_factored=trained)
    return weights, gradients, optimizer


def _trained_states(model: Model, plan: StagePlan, groups: list) -> tuple:
    """Every parameter trained, with Transformer Engine's FP8 weights (memory/fp8.py): copies,
    or FP8 parameters."""
    par, topo, dt, tr = model.par, model.topo, model.dt, model.tr
    weights, gradients, optimizer = [], [], []
    fp8_weights = []
    weight_groups = groups
    remainder_bytes = None
    if (fp8.applies(tr.precision, model.conv.te_fp8, model.seed_states) and not model.uniform
            and par.zero < 3 and par.fsdp == "none"
            and not fp8.adapter_fp8_weights(tr)):
        lin = fp8.linear_params(model.counts, plan.layers, topo.tp, topo.etp * topo.ep)
        transpose = fp8.needs_transpose(
            compute_capability(model.scenario.hardware.gpu))
        if fp8.fp8_params(tr):
            hp = fp8.high_precision_bytes(dt.param)
            _, fp8_weights = fp8.fp8_param_terms(lin[0], lin[1], hp, transpose)
            weight_groups = [states.ShardedCount(
                g.name, g.params - (lin[0] if g.name == "dense" else lin[1]), g.shard)
                for g in groups]
            remainder_bytes = hp  # norms, embeddings, output layer, router
        else:
            fp8_weights = fp8.fp8_copy_terms(*lin, transpose=transpose)
    weights += states.weight_terms(weight_groups, dt, par.zero, par.fsdp,
                                   par.offload_params,
                                   frozen_bytes_per_param=remainder_bytes) + fp8_weights
    gradients += states.gradient_terms(groups, dt, par.zero, par.fsdp)
    optimizer += states.optimizer_terms(
        groups, dt, tr.optimizer, par.zero, par.fsdp, par.offload_optimizer,
        muon_matrix_shares=model.muon_matrix_shares(plan, groups[0].params),
        adafactor_factored=adafactor_factored(model, plan))
    return weights, gradients, optimizer


PARTIAL_SOURCE = ("hiyouga/LLaMA-Factory@ff6d4d12 model/adapter.py _setup_freeze_tuning (the "
                  "trained layers, upcast to fp32 unless pure_bf16 / ZeRO-3)")


def _frozen_name(group) -> str:
    """weights.frozen for the dense part, weights.frozen.experts for the routed experts."""
    return "frozen" if group.name == "dense" else f"frozen.{group.name}"


def adafactor_factored(model: Model, plan: StagePlan) -> int:
    """Adafactor's factored second moment: rows + columns of each 2-D parameter (transformers
    Adafactor, beta1=None), approximated per layer from the architecture."""
    arch = model.arch
    d = arch.hidden
    per_layer = 0
    dq = arch.heads * arch.head_dim
    dkv = arch.kv_heads * arch.head_dim
    per_layer += (d + dq) * 2 + (d + dkv) * 2 + 2 * d
    per_layer += 3 * (d + arch.ffn) if arch.moe is None else (
        arch.moe.num_experts * 3 * (d + arch.moe.expert_ffn) + d + arch.moe.num_experts)
    total = per_layer * len(plan.layers)
    if plan.first:
        total += arch.vocab + d
    if plan.last:
        total += (arch.vocab + d) if not arch.tied else 0
    return total
