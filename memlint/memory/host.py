"""Host RAM and local NVMe per node: what offload, pinned staging buffers and model loading put
on the machine around the GPUs.

A node runs `gpus_per_node` ranks. Megatron orders ranks tensor-, context-, expert-, data- then
pipeline-parallel (parallel_state.py, order "tp-cp-ep-dp-pp"), so a node holds consecutive global
ranks and pipeline stage s owns ranks [s·W/pp, (s+1)·W/pp); DeepSpeed and FSDP2 runs have one stage.
Per rank, the host holds:
- in training: the stage's offload terms from the estimate (`StageEstimate.host_terms`: offloaded
  optimizer states, gradients and parameters), plus DeepSpeed's pinned staging buffers, read from
  DeepSpeed v0.19.6 (deepspeedai/DeepSpeed@edaa722) zero/stage_1_and_2.py, zero/stage3.py and
  swap_tensor/*;
- at start-up: the model as each rank builds or loads it (`model_init`).
Pinned (page-locked) tensors go through PyTorch's CachingHostAllocator, which rounds every block up
to the next power of two (aten/src/ATen/core/CachingHostAllocator.h `allocate`, pytorch@0445633;
pytorch/pytorch#95823): assumption `host.pinned_pow2_rounding`.
Bytes that live on NVMe (ZeRO-Infinity) are counted per node apart from RAM.

This module gives one rank's host terms; memory/host_nodes.py adds them up per node.
"""
from __future__ import annotations

from memlint import lazy_import
from memlint.memory.context import conventions_of
from memlint.memory.stages import microbatches
from memlint.memory.terms import Term

# start-up: the node catalog loads where the hardware names a node
node_catalog = lazy_import.module("memlint.catalog.nodes")


DS = "deepspeed/runtime/zero/"

# DeepSpeed's defaults (zero/offload_config.py, zero/config.py): memlint/facts/deepspeed.py


def default_model_init(scenario, estimate=None) -> tuple:
    """(model_init, source): how each rank builds the model; when no input says, the framework's
    default (memory/conventions.py)."""
    if scenario.training.model_init:
        return scenario.training.model_init, "set"
    return conventions_of(scenario, estimate).model_init


def capacity(scenario) -> tuple:
    """(host bytes, NVMe bytes, gpus per node, source) from host_memory/nvme_capacity or node."""
    hw = scenario.hardware
    preset = node_catalog.lookup(hw.node) if hw.node else None
    host = hw.host_memory if hw.host_memory is not None else (preset.host_memory if preset else None)
    nvme = hw.nvme_capacity if hw.nvme_capacity is not None else (preset.nvme if preset else None)
    gpus = hw.gpus_per_node
    if preset is not None and not scenario.is_set("gpus_per_node"):
        gpus = preset.gpus
    if hw.host_memory is not None:
        source = "host_memory"
    elif preset is not None:
        source = f"node {preset.name}: {preset.source}"
    else:
        source = ""
    return host, nvme, gpus, source


def _pow2(n: int) -> int:
    return 1 << (int(n) - 1).bit_length() if n > 1 else int(n)


def _partition(stage) -> int:
    """Parameters per rank in the stage's offloaded partition (from its offload terms)."""
    counts = [t.inputs.get("params", 0) for t in stage.host_terms
              if isinstance(t.inputs.get("params"), int)]
    return max(counts, default=0)


def rank_training_terms(scenario, stage, topo, dt, conv) -> tuple:
    """(RAM terms, NVMe terms) of one rank of `stage` during training (`conv`: the run's
    Conventions)."""
    ram, nvme = [], []
    for term in stage.host_terms:
        (nvme if "nvme" in term.name else ram).append(term)
    par = scenario.parallelism
    n = _partition(stage)
    if not conv.deepspeed_conventions or not n:
        return ram, nvme
    zero = conv.zero   # DeepSpeed's settings, or its defaults (memlint/facts/deepspeed.py)
    pb = dt.param
    rounding = bool(scenario.assumptions.get("host.pinned_pow2_rounding", True))
    pinned = []   # (what, bytes) of pinned flat buffers, for the rounding term
    opt_pin, param_pin = zero.optimizer_pin_memory, zero.param_pin_memory
    if par.offload_optimizer == "cpu" and par.zero <= 2:
        ram.append(Term("host.bit16_partition_buffer", "buffers", n * pb,
                        f"partition {n:,} params × {pb} B", {"params": n, "bytes_per_param": pb},
                        DS + "stage_1_and_2.py param_buffer_of_bit16_for_cpu_offload_groups"))
        if opt_pin:
            pinned += [("fp32 master partition", n * 4), ("fp32 gradient partition", n * 4),
                       ("bit16 partition buffer", n * pb)]
        accum = microbatches(scenario.training, topo.dp) or 1
        if accum > 1:
            ram.append(Term("host.accumulated_grads", "gradients", n * pb,
                            f"gradient accumulation {accum} > 1: partition {n:,} params × {pb} B",
                            {"params": n, "grad_accum": accum},
                            DS + "stage_1_and_2.py accumulated_grads_in_cpu"))
    if par.offload_optimizer == "cpu" and par.zero >= 3 and opt_pin:
        pinned.append(("fp32 gradient partitions", n * 4))
    if par.offload_params == "cpu" and par.zero >= 3 and param_pin:
        pinned.append(("bit16 parameter partition", n * pb))
    if par.offload_params == "nvme":
        count, size = zero.param_buffer_count, zero.param_buffer_size
        in_cpu = min(n, zero.param_max_in_cpu)
        ram.append(Term("host.nvme_param_swap_buffers", "buffers", count * size * pb,
                        f"buffer_count {count} × buffer_size {size:,} × {pb} B",
                        {"buffer_count": count, "buffer_size": size},
                        "deepspeed/runtime/swap_tensor/partitioned_param_swapper.py"))
        ram.append(Term("host.nvme_param_cpu_cache", "weights", in_cpu * pb,
                        f"min(partition {n:,}, max_in_cpu) = {in_cpu:,} params × {pb} B",
                        {"params": in_cpu}, DS + "stage3.py _create_param_groups_fp16_flat_cpu_memory"))
        if param_pin:
            pinned.append(("parameter swap buffers", count * size * pb))
            pinned.append(("parameter CPU cache", in_cpu * pb))
    if par.offload_optimizer == "nvme":
        count = zero.optimizer_buffer_count
        largest = min(n, zero.sub_group_size)
        ram.append(Term("host.nvme_optimizer_swap_buffers", "buffers", count * largest * 4,
                        f"buffer_count {count} × largest sub-group {largest:,} × 4 B (fp32)",
                        {"buffer_count": count, "largest_numel": largest},
                        "deepspeed/runtime/swap_tensor/optimizer_utils.py SwapBufferManager"))
        if opt_pin:
            pinned.append(("optimizer swap buffers", count * largest * 4))
    if rounding and pinned:
        waste = sum(_pow2(b) - b for _, b in pinned)
        if waste:
            ram.append(Term(
                "host.pinned_rounding", "buffers", waste,
                " + ".join(f"(pow2({b:,}) - {b:,})" for _, b in pinned) + " [" +
                ", ".join(what for what, _ in pinned) + "; one parameter group per buffer]",
                {"buffers": {what: b for what, b in pinned}},
                "PyTorch CachingHostAllocator rounds pinned blocks to a power of two "
                "(aten/src/ATen/core/CachingHostAllocator.h; pytorch#95823); assumption "
                "host.pinned_pow2_rounding"))
    return ram, nvme


def rank_startup_terms(scenario, estimate, stage, dt) -> list:
    """RAM of one rank while it builds or loads the model."""
    init, source = default_model_init(scenario, estimate)
    if init == "cpu":
        total = int(estimate.params.get("total", 0))
        return [Term("host.model_load", "weights", total * dt.param,
                     f"whole model {total:,} params × {dt.param} B ({init})",
                     {"params": total, "model_init": init}, source)]
    if init == "shard-cpu":
        held = sum(t.bytes for t in stage.terms if t.component == "weights")
        return [Term("host.model_init_shard", "weights", held,
                     f"the stage's weights {held:,} B built on the CPU first ({init})",
                     {"model_init": init}, "Megatron-LM --use-cpu-initialization")]
    return []
