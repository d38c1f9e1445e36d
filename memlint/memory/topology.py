"""The resolved parallel layout: every group size a per-GPU formula divides by.

Two conventions, chosen by the assumption `parallel.ep_in_dp`:
- Megatron (precise): world = tp·pp·cp·dp; expert parallelism is carved out of dp·cp, and the
  expert data-parallel size is world / (etp·ep·pp) (Megatron-LM `parallel_state.py`); the
  distributed optimizer shards over dp·cp.
- The seed article (000, CH 7.2): world = tp·pp·ep·dp, and ZeRO shards expert and non-expert
  states over the same dp.

`resolve()` never raises: sizes that do not divide are rounded down to at least 1 here and reported
by the topology rules, which read `Topology.problems`.
"""
from __future__ import annotations

from memlint.records import field, record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


@record(frozen=True)
class Topology:
    world: Optional[int]   # None when neither world_size nor dp is known
    tp: int
    pp: int
    cp: int
    dp: int                # data-parallel size of dense (non-expert) parameters
    ep: int
    etp: int
    expert_dp: int         # data-parallel size of expert parameters
    vpp: int
    # Sharding group of ZeRO / FSDP for dense and expert states (1: not sharded).
    shard: int
    expert_shard: int
    replicate: int         # HSDP replicate degree (1 without HSDP)
    problems: tuple = field(default=())  # (message, keys) for the topology rules


def _div(a: int, b: int) -> int:
    return max(1, a // max(1, b))


def resolve(scenario) -> Topology:
    par = scenario.parallelism
    ep_in_dp = bool(scenario.assumptions.get("parallel.ep_in_dp", True))
    tp, pp, cp, ep, vpp = par.tp, par.pp, par.cp, par.ep, par.vpp
    etp = par.etp or tp
    problems = []
    world = par.world_size
    if ep_in_dp:
        model_parallel = tp * pp * cp
        if par.dp is not None:
            dp = par.dp
            if world is not None and world != model_parallel * dp:
                problems.append((f"world_size {world} != tp·pp·cp·dp = {tp}·{pp}·{cp}·{dp} = "
                                 f"{model_parallel * dp}", ("world_size", "dp", "tp", "pp", "cp")))
            world = world or model_parallel * dp
        elif world is not None:
            if world % model_parallel:
                problems.append((f"world_size {world} is not divisible by tp·pp·cp = "
                                 f"{tp}·{pp}·{cp} = {model_parallel}",
                                 ("world_size", "tp", "pp", "cp")))
            dp = _div(world, model_parallel)
        else:
            dp = 1
        expert_model_parallel = etp * ep * pp
        total = world if world is not None else model_parallel * dp
        if (dp * cp * tp) % (etp * ep):
            problems.append((f"expert parallelism ep·etp = {ep}·{etp} must divide dp·cp·tp = "
                             f"{dp}·{cp}·{tp} = {dp * cp * tp}", ("ep", "etp", "dp")))
        expert_dp = _div(total, expert_model_parallel)
    else:
        dp = par.dp if par.dp is not None else (
            _div(world, tp * pp * ep * cp) if world is not None else 1)
        if world is not None and par.dp is None and world % (tp * pp * ep * cp):
            problems.append((f"world_size {world} is not divisible by tp·pp·ep·cp = "
                             f"{tp * pp * ep * cp}", ("world_size", "tp", "pp", "ep", "cp")))
        world = world if world is not None else tp * pp * ep * cp * dp
        expert_dp = dp

    replicate = 1
    if par.fsdp in ("full", "hybrid", "shard_grad_op") or par.zero > 0:
        if par.fsdp == "hybrid" or (par.dp_replicate or 1) > 1:
            replicate = par.dp_replicate or 1
        # start-up: the conventions load only for a sharded optimizer (not every check has one)
        from memlint.memory.conventions import (optimizer_instances, optimizer_shards_over_cp,
                                                shard_group_of)

        instances = optimizer_instances(scenario)
        if instances > 1:
            replicate = instances   # the instances replicate the sharded states
        # Megatron's distributed optimizer (and Megatron-FSDP) shard over the data-parallel
        # group with context parallelism (parallel_state get_data_parallel_group(
        # with_context_parallel=True), used by DistributedDataParallel and the optimizer)
        over_cp = par.fsdp != "none" or (ep_in_dp
                                         and optimizer_shards_over_cp(scenario.training))
        if par.dp_shard not in (None, -1):
            shard = shard_group_of(scenario, par.dp_shard)   # dp_shard·cp (torchtitan, accelerate)
        else:
            shard = _div(dp * (cp if over_cp else 1), replicate)
        if shard * replicate > dp * cp:
            problems.append((f"the shard group {shard} (dp_shard {par.dp_shard}) x "
                             f"dp_replicate {replicate} exceeds the data-parallel size "
                             f"dp·cp = {dp * cp}", ("dp_shard", "dp_replicate")))
        expert_shard = (_div(expert_dp, instances) if instances > 1
                        else max(1, min(shard, expert_dp)))
    else:
        shard = expert_shard = 1
    return Topology(world=world, tp=tp, pp=pp, cp=cp, dp=dp, ep=ep, etp=etp, expert_dp=expert_dp,
                    vpp=vpp, shard=shard, expert_shard=expert_shard, replicate=replicate,
                    problems=tuple(problems))
