"""Megatron's training flags -> scenario keys: pipeline layout (vpp), batch, precision and
gradient dtypes, recompute, attention kernel, optimizer sharding (distributed optimizer,
Megatron-FSDP, Megatron-DeepSpeed's ZeRO) and offloading."""
from __future__ import annotations

import re

from memlint import lazy_import
from memlint.adapters.megatron.context import Interp, script_ends
from memlint.diagnostics import INVALID_VALUE, Severity
from memlint.ir import Provenance

# start-up: the layer-pattern parsers load when a file gives a pattern flag
_layouts = lazy_import.module("memlint.adapters.megatron.layouts")


def pipeline(it: Interp) -> None:
    v = it.value
    pp = v("--pipeline-model-parallel-size", 1)
    layers = v("--num-layers")
    per_stage = v("--num-layers-per-virtual-pipeline-stage")
    if per_stage is not None and layers is not None:
        total = layers + it.on("--account-for-embedding-in-pipeline-split") \
            + it.on("--account-for-loss-in-pipeline-split")
        if total % pp == 0 and (total // pp) % per_stage == 0:
            it.set("vpp", (total // pp) // per_stage, "--num-layers-per-virtual-pipeline-stage",
                     f"vpp = num-layers/pp/{per_stage}")
    layout = v("--pipeline-model-parallel-layout")
    if isinstance(layout, str):
        stages = _layouts.parse_layout(layout)
        if stages is None:
            it.diag(INVALID_VALUE, Severity.WARNING,
                      f"--pipeline-model-parallel-layout {layout!r} could not be read",
                      it.prov("--pipeline-model-parallel-layout"))
        else:
            it.partial.set_extra("megatron.pipeline-layout-stages", stages,
                                   it.prov("--pipeline-model-parallel-layout"))
            if len(stages) % pp == 0 and len(stages) // pp > 1:
                it.set("vpp", len(stages) // pp, "--pipeline-model-parallel-layout",
                         "vpp from --pipeline-model-parallel-layout")


def batch(it: Interp) -> None:
    v = it.value
    if it.on("--decoder-seq-length") and "--decoder-seq-length" in it.values:
        it.set("seq_len", v("--decoder-seq-length"), "--decoder-seq-length",
                 "seq_len (language model: --decoder-seq-length)")
    schedule = v("--step-batch-size-schedule")
    if isinstance(schedule, str) and not it.on("--global-batch-size"):
        sizes = [int(m) for m in re.findall(r":\s*(\d+)", schedule)]
        if sizes:
            it.set("global_batch", max(sizes), "--step-batch-size-schedule",
                     "global_batch (largest of --step-batch-size-schedule)")


def precision(it: Interp) -> None:
    v = it.value
    bf16, fp16 = it.on("--bf16"), it.on("--fp16")
    if bf16:
        it.set("precision", "bf16", "--bf16")
        if it.on("--grad-reduce-in-bf16"):
            it.set("grad_dtype", "bf16", "--grad-reduce-in-bf16")
        elif it.on("--use-precision-aware-optimizer") and v("--main-grads-dtype") == "bf16":
            it.set("grad_dtype", "bf16", "--main-grads-dtype")
        else:
            it.set("grad_dtype", "fp32", "--bf16",
                     "grad_dtype fp32 (Megatron's main grads for --bf16)")
    elif fp16:
        it.set("precision", "fp16", "--fp16")
        if it.on("--accumulate-allreduce-grads-in-fp32"):
            it.set("grad_dtype", "fp32", "--accumulate-allreduce-grads-in-fp32")
        else:
            it.set("grad_dtype", "fp16", "--fp16",
                     "grad_dtype fp16 (no --accumulate-allreduce-grads-in-fp32)")
    elif it.args and not it.read.yaml_style:
        first = next(iter(it.args.values()))
        it.partial.set("precision", "fp32",
                         Provenance(it.path, first.prov.line, first.prov.column,
                                    "precision fp32 (no --bf16 / --fp16)"))
    fsdp_grads = v("--megatron-fsdp-main-grads-dtype")
    if it.on("--use-megatron-fsdp") and fsdp_grads in ("fp32", "bf16", "fp16"):
        it.set("grad_dtype", fsdp_grads, "--megatron-fsdp-main-grads-dtype")
    if it.on("--freeze-LM"):
        it.set("train_base", False, "--freeze-LM",
                 "train_base false (--freeze-LM: the language model has no gradients or "
                 "optimizer states)")
    if it.on("--fp8-format") and (bf16 or fp16):
        # FP8 GEMMs (Transformer Engine) over bf16/fp16 mixed precision
        it.set("precision", "fp8", "--fp8-format")
    if it.on("--fp8-param-gather") and it.on("--fp8-format"):
        # TE FP8 parameters (quantized_model_init): FP8 linear weights with their Hopper
        # transpose, bf16 embeddings and norms (memory/fp8.py: the CI measurement behind it)
        it.set("fp8_params", True, "--fp8-param-gather")
    if it.on("--use-precision-aware-optimizer") and "--exp-avg-dtype" in it.values:
        it.set("optimizer_state_dtype", v("--exp-avg-dtype"), "--exp-avg-dtype")
    optimizer = v("--optimizer")
    if isinstance(optimizer, str):
        mapped = {"adam": "adamw", "sgd": "sgd", "muon": "muon", "dist_muon": "muon"}.get(
            optimizer.lower())
        if mapped:
            it.set("optimizer", mapped, "--optimizer")


def bert_local_spec(it: Interp) -> bool:
    """examples/bert/pretrain_bert.py builds `bert_layer_local_spec` (Megatron's own layers)
    for `--spec local`, whatever --transformer-impl says (NVIDIA/Megatron-LM@d98e8a64): the
    local implementation, recorded as megatron.transformer-impl for the conventions."""
    entry = it.partial.extra.get("megatron.entry-script")
    spec = it.arg("--spec")
    if entry is None or not script_ends(str(entry.value), "pretrain_bert.py") \
            or spec is None or not spec.values or str(spec.values[0]).strip("'\"") != "local":
        return False
    it.partial.set_extra("megatron.transformer-impl", "local", it.prov("--spec"))
    return True


def memory_flags(it: Interp) -> None:
    v = it.value
    local = bert_local_spec(it) or v("--transformer-impl") == "local"
    # recompute
    if "--recompute-granularity" not in it.values:
        if it.on("--recompute-activations"):
            it.set("recompute", "selective", "--recompute-activations")
        elif it.on("--checkpoint-activations"):
            it.set("recompute", "full", "--checkpoint-activations",
                     "recompute full (legacy --checkpoint-activations)")
    # attention kernel
    backend = v("--attention-backend")
    if backend in ("unfused", "local"):
        it.set("attention", "eager", "--attention-backend")
    elif backend in ("flash", "fused", "auto"):
        it.set("attention", "flash", "--attention-backend")
    elif it.on("--use-flash-attn"):
        it.set("attention", "flash", "--use-flash-attn")
    elif local:
        flag = "--transformer-impl" if v("--transformer-impl") == "local" else "--spec"
        it.set("attention", "eager", flag,
                 "attention eager (local implementation, no --use-flash-attn)")
    # optimizer sharding
    if it.on("--use-megatron-fsdp"):
        stage = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}[
            v("--data-parallel-sharding-strategy", "optim_grads_params")]
        flag = "--data-parallel-sharding-strategy" if it.on(
            "--data-parallel-sharding-strategy") else "--use-megatron-fsdp"
        it.set("zero", stage, flag, f"zero {stage} (Megatron-FSDP sharding strategy)")
    elif it.on("--use-distributed-optimizer"):
        it.set("zero", 1, "--use-distributed-optimizer")
    elif it.on("--deepspeed") and it.on("--bf16") and not v("--zero-stage"):
        # Megatron-DeepSpeed with bf16 and ZeRO stage 0 runs DeepSpeed's BF16_Optimizer,
        # which partitions the fp32 master weights and Adam moments over data parallelism
        # (a ZeRO-1 equivalent: deepspeed/runtime/bf16_optimizer.py, engine.py
        # _configure_bf16_optimizer) and keeps full fp32 gradients.
        flag = "--zero-stage" if "--zero-stage" in it.values else "--bf16"
        it.set("zero", 1, flag,
                 "zero 1 (DeepSpeed BF16_Optimizer: bf16 with ZeRO stage 0 partitions the "
                 "optimizer states)")
    elif "--zero-stage" in it.values:
        it.set("zero", v("--zero-stage"), "--zero-stage")
    if it.on("--use-torch-fsdp2"):
        it.set("fsdp", "full", "--use-torch-fsdp2")
    # offloading
    if it.on("--optimizer-cpu-offload"):
        it.set("offload_optimizer", "cpu", "--optimizer-cpu-offload")
    if it.on("--cpu-offloading") or (v("--cpu-offloading-num-layers") or 0) > 0:
        flag = "--cpu-offloading" if it.on("--cpu-offloading") else \
            "--cpu-offloading-num-layers"
        if not it.on("--no-cpu-offloading-activations"):
            it.set("offload_activations", True, flag)
        if it.on("--cpu-offloading-weights"):
            it.set("offload_params", "cpu", "--cpu-offloading-weights")
    if it.on("--verl-param-offload"):
        it.set("offload_params", "cpu", "--verl-param-offload", "param_offload")
    if it.on("--verl-optimizer-offload"):
        it.set("offload_optimizer", "cpu", "--verl-optimizer-offload", "optimizer_offload")
    config = v("--deepspeed_config") or v("--deepspeed-config")
    if isinstance(config, str) and "$" not in config:
        it.partial.references.append(config)
