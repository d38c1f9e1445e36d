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
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from memlint.catalog import nodes as node_catalog
from memlint.keys import to_int
from memlint.memory.states import dtypes
from memlint.memory.terms import Term
from memlint.memory.topology import resolve

DS = "deepspeed/runtime/zero/"
# DeepSpeed defaults (zero/offload_config.py, zero/config.py at edaa722)
PARAM_BUFFER_COUNT = 5
PARAM_BUFFER_SIZE = 100_000_000
PARAM_MAX_IN_CPU = 1_000_000_000
OPTIMIZER_BUFFER_COUNT = 4
SUB_GROUP_SIZE = 1_000_000_000
# Above this many nodes the node kinds are bounded instead of enumerated.
MAX_NODES_ENUMERATED = 4096


@dataclass(frozen=True)
class HostPhase:
    name: str             # "training" | "startup"
    terms: tuple

    @property
    def total(self) -> int:
        return sum(t.bytes for t in self.terms)


@dataclass(frozen=True)
class NodeEstimate:
    """One kind of node: `nodes` nodes hold the same ranks (`ranks`: (stage, count) pairs)."""

    node: int                       # index of the first node of this kind
    nodes: int
    ranks: tuple
    phase: str                      # the phase of the peak
    terms: tuple                    # host RAM terms at the peak; they add up to total_bytes
    phases: tuple
    nvme_terms: tuple
    capacity_bytes: Optional[int]
    nvme_capacity_bytes: Optional[int]
    capacity_source: str = ""
    bounded: bool = False           # too many nodes to enumerate: an upper bound

    @property
    def total_bytes(self) -> int:
        return sum(t.bytes for t in self.terms)

    @property
    def nvme_bytes(self) -> int:
        return sum(t.bytes for t in self.nvme_terms)

    def to_dict(self) -> dict:
        return {"node": self.node, "nodes": self.nodes,
                "ranks": [{"stage": s, "ranks": n} for s, n in self.ranks],
                "phase": self.phase, "total_bytes": self.total_bytes,
                "capacity_bytes": self.capacity_bytes, "capacity_source": self.capacity_source,
                "phases": {p.name: p.total for p in self.phases},
                "terms": [t.to_dict() for t in self.terms],
                "nvme_bytes": self.nvme_bytes, "nvme_capacity_bytes": self.nvme_capacity_bytes,
                "nvme_terms": [t.to_dict() for t in self.nvme_terms], "bounded": self.bounded}


def default_model_init(scenario) -> tuple:
    """(model_init, source): how each rank builds the model when no input says."""
    tr, par = scenario.training, scenario.parallelism
    if tr.model_init:
        return tr.model_init, "set"
    if tr.framework == "megatron":
        return "gpu", ("Megatron-LM arguments.py: --use-cpu-initialization defaults to False, "
                       "parameters are created on the GPU")
    if tr.framework == "fsdp2":
        return "meta", "torchtitan train.py builds the model on the meta device"
    if par.zero >= 3:
        return "zero-init", ("transformers integrations/deepspeed.py: from_pretrained under "
                             "deepspeed.zero.Init when ZeRO-3 is enabled")
    return "cpu", ("transformers from_pretrained materializes the whole model on the CPU of "
                   "every rank before it is moved to the GPU")


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


def deepspeed_int(scenario, key: str, default: int) -> int:
    """A whole-number DeepSpeed setting from the adapter's extras (`deepspeed.<block>.<key>`),
    through the scenario keys' converter ("1e8" and 1e8 alike); the default when absent or not
    a non-negative whole number (the schema rules report that)."""
    setting = scenario.extra.get(key)
    if setting is None:
        return default
    try:
        number = to_int(setting.value)
    except (TypeError, ValueError):
        return default
    return number if number >= 0 else default


def _flag(scenario, key: str, default: bool) -> bool:
    setting = scenario.extra.get(key)
    return setting.value if setting is not None and isinstance(setting.value, bool) else default


def _partition(stage) -> int:
    """Parameters per rank in the stage's offloaded partition (from its offload terms)."""
    counts = [t.inputs.get("params", 0) for t in stage.host_terms
              if isinstance(t.inputs.get("params"), int)]
    return max(counts, default=0)


def _grad_accum(scenario, topo) -> int:
    tr = scenario.training
    if tr.grad_accum:
        return tr.grad_accum
    if tr.global_batch:
        return max(1, tr.global_batch // max(1, tr.micro_batch * topo.dp))
    return 1


def rank_training_terms(scenario, stage, topo, dt) -> tuple:
    """(RAM terms, NVMe terms) of one rank of `stage` during training."""
    ram, nvme = [], []
    for term in stage.host_terms:
        (nvme if "nvme" in term.name else ram).append(term)
    par = scenario.parallelism
    n = _partition(stage)
    if scenario.training.framework != "deepspeed" or not n:
        return ram, nvme
    pb = dt.param
    rounding = bool(scenario.assumptions.get("host.pinned_pow2_rounding", True))
    pinned = []   # (what, bytes) of pinned flat buffers, for the rounding term
    opt_pin = _flag(scenario, "deepspeed.offload_optimizer.pin_memory", True)
    param_pin = _flag(scenario, "deepspeed.offload_param.pin_memory", True)
    if par.offload_optimizer == "cpu" and par.zero <= 2:
        ram.append(Term("host.bit16_partition_buffer", "buffers", n * pb,
                        f"partition {n:,} params × {pb} B", {"params": n, "bytes_per_param": pb},
                        DS + "stage_1_and_2.py param_buffer_of_bit16_for_cpu_offload_groups"))
        if opt_pin:
            pinned += [("fp32 master partition", n * 4), ("fp32 gradient partition", n * 4),
                       ("bit16 partition buffer", n * pb)]
        accum = _grad_accum(scenario, topo)
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
        count = deepspeed_int(scenario, "deepspeed.offload_param.buffer_count", PARAM_BUFFER_COUNT)
        size = deepspeed_int(scenario, "deepspeed.offload_param.buffer_size", PARAM_BUFFER_SIZE)
        in_cpu = min(n, deepspeed_int(scenario, "deepspeed.offload_param.max_in_cpu", PARAM_MAX_IN_CPU))
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
        count = deepspeed_int(scenario, "deepspeed.offload_optimizer.buffer_count", OPTIMIZER_BUFFER_COUNT)
        largest = min(n, deepspeed_int(scenario, "deepspeed.sub_group_size", SUB_GROUP_SIZE))
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
    init, source = default_model_init(scenario)
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


def _node_kinds(world: int, pp: int, per_node: int, first_apart: bool = False) -> tuple:
    """((first node, count, ((stage, ranks), ...)), ...) and whether it is a bound.
    `first_apart`: node 0 is a kind of its own (it alone holds rank 0's start-up copy)."""
    per_node = max(1, min(per_node, world))
    nodes = math.ceil(world / per_node)
    stage_size = max(1, world // max(1, pp))
    if nodes > MAX_NODES_ENUMERATED:
        return ((0, nodes, ((-1, per_node),)),), True
    kinds: dict = {}
    for node in range(nodes):
        first, last = node * per_node, min(world, (node + 1) * per_node)
        counts: dict = {}
        for stage in range(first // stage_size, min(pp - 1, (last - 1) // stage_size) + 1):
            lo, hi = max(first, stage * stage_size), min(last, (stage + 1) * stage_size)
            if stage == pp - 1:
                hi = last
            if hi > lo:
                counts[stage] = hi - lo
        key = (first_apart and node == 0, tuple(sorted(counts.items())))
        if key in kinds:
            kinds[key][1] += 1
        else:
            kinds[key] = [node, 1]
    return tuple((v[0], v[1], k[1]) for k, v in kinds.items()), False


def _scaled(term: Term, ranks: int) -> Term:
    if ranks == 1:
        return term
    return Term(term.name, term.component, term.bytes * ranks, f"{ranks} ranks × ({term.formula})",
                dict(term.inputs, ranks=ranks), term.source)


def _sum_terms(parts) -> tuple:
    """Add same-named terms of several stages on one node."""
    out: dict = {}
    for term in parts:
        if term.name in out:
            prev = out[term.name]
            out[term.name] = Term(term.name, term.component, prev.bytes + term.bytes,
                                  f"{prev.formula} + {term.formula}", prev.inputs, prev.source)
        else:
            out[term.name] = term
    return tuple(out.values())


def node_estimates(scenario, estimate) -> tuple:
    """Host RAM and NVMe per kind of node, the worst node first. Empty on the CPU device."""
    if scenario.hardware.device == "cpu" or not estimate.stages:
        return ()
    topo = resolve(scenario)
    dt = dtypes(scenario.training, scenario.assumptions.profile)
    host_cap, nvme_cap, per_node, source = capacity(scenario)
    pp = len(estimate.stages)
    world = topo.world or per_node * pp
    init, _ = default_model_init(scenario)
    kinds, bounded = _node_kinds(world, pp, per_node, first_apart=init == "rank0-cpu")
    by_stage = {}
    for stage in estimate.stages:
        ram, nvme = rank_training_terms(scenario, stage, topo, dt)
        by_stage[stage.stage] = (ram, nvme, rank_startup_terms(scenario, estimate, stage, dt))
    out = []
    for first, count, ranks in kinds:
        if bounded:   # every rank as the stage with the most host bytes: an upper bound
            worst = max(by_stage, key=lambda s: sum(t.bytes for t in by_stage[s][0] + by_stage[s][2]))
            ranks = ((worst, ranks[0][1]),)
        training, nvme, startup = [], [], []
        for stage, n in ranks:
            ram_t, nvme_t, start_t = by_stage[stage]
            training += [_scaled(t, n) for t in ram_t]
            nvme += [_scaled(t, n) for t in nvme_t]
            if init == "rank0-cpu":
                if first == 0 and stage == ranks[0][0]:
                    total = int(estimate.params.get("total", 0))
                    startup.append(Term("host.model_load", "weights", total * dt.param,
                                        f"whole model {total:,} params × {dt.param} B, rank 0 only",
                                        {"params": total, "model_init": init},
                                        "accelerate cpu_ram_efficient_loading: rank 0 loads the "
                                        "weights, the other ranks start on the meta device"))
            else:
                startup += [_scaled(t, n) for t in start_t]
        phases = (HostPhase("training", _sum_terms(training)),
                  HostPhase("startup", _sum_terms(startup)))
        peak = max(phases, key=lambda p: p.total)
        out.append(NodeEstimate(node=first, nodes=count, ranks=tuple(ranks), phase=peak.name,
                                terms=peak.terms, phases=phases, nvme_terms=_sum_terms(nvme),
                                capacity_bytes=host_cap, nvme_capacity_bytes=nvme_cap,
                                capacity_source=source, bounded=bounded))
    out.sort(key=lambda n: (-n.total_bytes, -n.nvme_bytes, n.node))
    return tuple(out)
