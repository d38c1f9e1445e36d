"""The optimizer step's temporaries: what the optimizer implementation allocates beside the
states while it updates (foreach / fused kernels, the gradient norm, ZeRO's flat buffers).
"""
from __future__ import annotations

import math

from memlint.memory.lora import saved_copy_dtypes
from memlint.memory.model import Model
from memlint.memory.stages import StagePlan
from memlint.memory.states import ceil_div as _ceil_div
from memlint.memory.terms import Term


def optimizer_step_terms(model: Model, plan: StagePlan) -> list:
    """Temporaries of `optimizer.step()`.

    PyTorch AdamW for-loop (`_single_tensor_adamw`): `exp_avg_sq.sqrt() / bias_correction2_sqrt`
    makes two temporaries of the current parameter: 2 × the largest parameter. foreach
    (`_multi_tensor_adamw`): `_foreach_sqrt` of every second moment: 1 × all states' size. fused:
    none. SGD with momentum: in place. transformers Adafactor: fp32 update and squared-grad
    temporaries of the current parameter (2 × largest, + 2 more when params are not fp32).
    Megatron/DeepSpeed fused optimizers work in place.
    """
    tr, dt = model.tr, model.dt
    if model.conv.main_grads_to_fp32 and dt.master and dt.grad < 4 \
            and model.par.offload_optimizer == "none" and tr.train_base:
        # fp16/bf16 main grads: `main_param.grad = main_grad.float()` makes an fp32 copy for
        # the fp32 master weights, freed at the next zero_grad
        # (megatron/core/optimizer/optimizer.py and distrib_optimizer.py
        # _copy_model_grads_to_main_grads)
        groups = model.stage_param_groups(plan)
        shard = model.topo.shard if model.par.zero >= 1 else 1
        expert_shard = model.topo.expert_shard if model.par.zero >= 1 else 1
        n = _ceil_div(groups["dense"], shard) + _ceil_div(groups["experts"], expert_shard)
        parts = f"{groups['dense']:,} / shard {shard}" + (
            f" + experts {groups['experts']:,} / shard {expert_shard}" if groups["experts"]
            else "")
        return [Term("optimizer.fp32_grad_copies", "optimizer", 4 * n,
                     f"fp32 copies of {dt.grad}-byte main grads: {n:,} ({parts}) × 4 B",
                     {"params": n, "grad_bytes": dt.grad},
                     "megatron/core/optimizer/optimizer.py _copy_model_grads_to_main_grads")]
    if model.conv.in_place_optimizer or model.par.offload_optimizer != "none":
        return []
    if dt.state_bits:
        # block-quantized states: fused update kernels (memory/optimizer_quant.py)
        return []
    impl = tr.optimizer_impl
    torch_version = model.conv.torch_version
    if impl is None:
        # torch 2.0 made foreach the CUDA default (pytorch/pytorch#97712); before it, the for-loop
        impl = "foreach" if model.scenario.hardware.device == "cuda" and not (
            torch_version and torch_version < FOREACH_DEFAULT_FROM) else "for-loop"
    largest, total = _largest_and_total_trainable(model, plan)
    shard = model.topo.shard if (model.par.zero >= 1 or model.par.fsdp != "none") else 1
    if tr.optimizer in ("adamw", "adam", "fp8_adam"):
        if impl == "fused":
            return []
        if impl == "foreach":
            return [foreach_adam_temporaries(_state_groups(model, plan, total, shard),
                                             torch_version)]
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


# torch releases where the Adam family's step changed (key torch.version)
FOREACH_DEFAULT_FROM = (2, 0)       # foreach is the CUDA default from 2.0 (#97712, janeyx99)
ONE_INTERMEDIATE_FROM = (2, 1)      # #104898 (2023-07-10), first released in 2.1.0
SRC_FOREACH_ADAM = ("torch/optim/adamw.py _multi_tensor_adamw; pytorch/pytorch#97712 (foreach "
                    "optimizers' intermediates: 2.0 defaults to foreach on CUDA) and #104898 "
                    "'[foreach][AdamW] Minimize intermediates to save peak memory' (merged "
                    "2023-07-10, torch 2.1: `torch._foreach_add_(exp_avg_sq_sqrt, eps)` in place)")


def foreach_adam_temporaries(groups: list, torch_version) -> Term:
    """torch's foreach Adam/AdamW step: `exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs)`,
    one tensor per parameter (in its moments' dtype), all alive at once. Before 2.1 the step
    also made `denom = torch._foreach_add(exp_avg_sq_sqrt, eps)` beside it (two temporaries of
    the moments' size); from 2.1 eps is added in place (one). `groups`: (params, bytes per
    moment element) of each dtype the step updates."""
    old = bool(torch_version) and torch_version < ONE_INTERMEDIATE_FROM
    count = 2 if old else 1
    what = ("sqrt of all second moments and denom = sqrt + eps (torch "
            f"{'.'.join(map(str, torch_version))} < 2.1)" if old
            else "sqrt of all second moments (eps added in place, torch >= 2.1)")
    sizes = " + ".join(f"{n:,} × {b} B" for n, b in groups)
    params = sum(n for n, _ in groups)
    return Term("optimizer.step_temporaries", "optimizer", count * sum(n * b for n, b in groups),
                f"foreach {what}: {count} × " + (f"({sizes})" if len(groups) > 1 else sizes),
                {"params": params, "impl": "foreach", "intermediates": count},
                SRC_FOREACH_ADAM)


def _state_groups(model: Model, plan: StagePlan, total: int, shard: int) -> list:
    """(params, moment bytes) of what the step updates: PEFT's modules_to_save copies keep the
    loaded width where the adapters are fp32 (lora.saved_copy_dtypes)."""
    state = model.dt.state
    saved = model.saved_module_params(plan) if model.lora else 0
    saved_state = saved_copy_dtypes(model).state if saved else state
    if saved_state == state:
        return [(_ceil_div(total, shard), state)]
    return [(_ceil_div(total - saved, shard), state), (_ceil_div(saved, shard), saved_state)]


def _largest_and_total_trainable(model: Model, plan: StagePlan) -> tuple:
    if model.lora:
        per = [model.lora_per_layer[i] for i in plan.layers]
        arch = model.arch
        largest_linear = model.tr.lora_rank * max(arch.hidden, arch.ffn)
        saved = model.saved_module_params(plan)
        largest = max(largest_linear, model.counts.embedding // model.topo.tp) if saved else \
            largest_linear
        return largest, sum(per) + saved
    counts = model.counts
    arch = model.arch
    if model.trained_layers:
        # a partial fine-tune steps only its trained layers
        trained = model.trained_layer_params(plan)
        return (math.ceil(arch.hidden * arch.ffn / model.topo.tp) if trained else 0), trained
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
