"""FSDP / HSDP / sharded-data-parallel rules (ML5xx).

They read the Scenario only (and `memlint.memory` for byte counts); positions come from the
provenance of the keys each finding names.
"""
from __future__ import annotations

from memlint.diagnostics import Severity
from memlint.rules.base import Context, Finding, Rule
from memlint.units import fmt

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Iterable, Optional


def _par(ctx: Context):
    return ctx.scenario.parallelism


def _set(ctx: Context, *keys: str) -> tuple:
    """The keys among `keys` that some source set (so the finding points at real lines)."""
    return tuple(k for k in keys if ctx.scenario.is_set(k))


def _compute_bytes(ctx: Context) -> int:
    if ctx.extra("fsdp.allgather_dtype_bytes") == 1:
        return 1
    training = ctx.scenario.training
    if training.param_dtype == "fp32" or (training.param_dtype is None
                                          and training.precision == "fp32"):
        return 4
    return 2


def _layer_params(ctx: Context) -> Optional[list]:
    model = ctx.scenario.model
    if model is None or not model.config:
        return None
    counts = ctx.resolved.counts   # None: a config the counter cannot read
    return None if counts is None else [layer.total for layer in counts.layers]


def _fmt(nbytes: int) -> str:
    return fmt(nbytes, "GiB")


class FullRecomputeDoubleAllgather(Rule):
    """Full recompute re-enters each sharded layer and all-gathers its weights a third time.

    What it checks:
        Full activation recomputation together with ZeRO-3, or with FSDP (reshard after forward)
        when the checkpoint wraps the FSDP unit from outside: transformers'
        `gradient_checkpointing`, as axolotl and the HF Trainer apply it. FSDP's own wrapper
        inside each unit (accelerate's `fsdp_activation_checkpointing`, torchtitan's
        `[activation_checkpoint]`) recomputes on the parameters the backward already gathered
        and does not fire this rule.

    Why it matters:
        Sharded weights are gathered once in forward and once in backward. A recompute that runs
        the layer's forward hooks again gathers them a third time: 50% more all-gather traffic.
        For Llama-3-8B in bf16 (7.0B decoder-layer parameters) sharded over 8 GPUs that is
        about 11.4 GiB more received per GPU per step, exposed on slower links.

    How to fix:
        Under FSDP use the framework's checkpoint wrapper inside the unit (axolotl/accelerate:
        `fsdp_config.activation_checkpointing: true` instead of `gradient_checkpointing`), or
        accept the traffic. Under ZeRO-3, selective recompute or a larger
        `stage3_max_live_parameters` / persistence threshold keeps small layers gathered.

    Example:
        Bad (axolotl.yaml):

            base_model: meta-llama/Llama-3.1-8B
            micro_batch_size: 1
            sequence_len: 4096
            gradient_checkpointing: true
            fsdp:
              - full_shard
              - auto_wrap
            fsdp_config:
              fsdp_version: 2
              reshard_after_forward: true

        Good (axolotl.yaml):

            base_model: meta-llama/Llama-3.1-8B
            micro_batch_size: 1
            sequence_len: 4096
            fsdp:
              - full_shard
              - auto_wrap
            fsdp_config:
              fsdp_version: 2
              reshard_after_forward: true
              activation_checkpointing: true
    """

    code = "ML501"
    name = "fsdp-full-recompute-double-allgather"
    severity = Severity.INFO

    def check(self, ctx: Context) -> Iterable[Finding]:
        scenario = ctx.scenario
        if scenario.training.recompute != "full":
            return
        par = _par(ctx)
        scope = ctx.extra("recompute.scope")
        if par.zero == 3:
            kind, keys = "ZeRO-3", _set(ctx, "zero", "recompute")
        elif par.fsdp in ("full", "hybrid") and par.reshard_after_forward:
            if scope == "inside-unit":
                return
            if scope is None and scenario.training.framework not in ("hf", "deepspeed"):
                return
            kind, keys = "FSDP", _set(ctx, "recompute", "fsdp")
        else:
            return
        layers = _layer_params(ctx)
        message = (f"full recompute under {kind} re-gathers every layer's weights during the "
                   "backward (3 all-gathers per step instead of 2)")
        data = {}
        if layers:
            # for start-up speed: only this finding needs the FSDP traffic model
            from memlint.memory.fsdp import recompute_allgather_traffic

            shard = ctx.resolved.topology.shard
            traffic = recompute_allgather_traffic(layers, _compute_bytes(ctx), shard)
            if traffic["bytes"] > 0:
                message += (f": {_fmt(traffic['bytes'])} more received per GPU per step "
                            f"({sum(layers):,} layer parameters, shard group {shard})")
                data = {"extra_bytes_per_step": traffic["bytes"]}
        yield Finding(message, keys, data=data)


class ParallelDegreesWorldMismatch(Rule):
    """The data/tensor/context/pipeline degrees must multiply to the number of GPUs.

    What it checks:
        With explicit sharding degrees, dp_replicate · dp_shard · cp · tp · pp must equal the
        world size (torchtitan `ParallelDims`, accelerate `ParallelismConfig`).

    Why it matters:
        Both frameworks refuse to start when the product differs ("does not match num_processes"
        in accelerate; an assertion in torchtitan), after the job has waited in the queue and
        loaded the model: minutes to hours lost per attempt on a large allocation.
        A torchtitan job asking for 8 x 4 = 32 ranks on 16 GPUs fails at start-up.

    How to fix:
        Make the product equal the GPU count, or let torchtitan fill the shard degree with
        `data_parallel_shard_degree = -1`.

    Example:
        Bad (accelerate_config.yaml):

            distributed_type: FSDP
            num_processes: 8
            fsdp_config:
              fsdp_version: 2
              fsdp_reshard_after_forward: true
            parallelism_config:
              parallelism_config_dp_shard_size: 2
              parallelism_config_tp_size: 2

        Good (accelerate_config.yaml):

            distributed_type: FSDP
            num_processes: 8
            fsdp_config:
              fsdp_version: 2
              fsdp_reshard_after_forward: true
            parallelism_config:
              parallelism_config_dp_shard_size: 4
              parallelism_config_tp_size: 2
    """

    code = "ML502"
    name = "parallel-degrees-world-mismatch"
    severity = Severity.ERROR

    def check(self, ctx: Context) -> Iterable[Finding]:
        par = _par(ctx)
        world = par.world_size
        if world is None or par.dp_shard in (None, -1):
            return
        # start-up: the conventions load only for an explicit dp_shard
        from memlint.memory.conventions import SEPARATE_FSDP_MESH
        if ctx.scenario.rl.framework in SEPARATE_FSDP_MESH:
            return
        product = par.dp_replicate * par.dp_shard * par.cp * par.tp * par.pp
        if product == world:
            return
        yield Finding(
            f"dp_replicate·dp_shard·cp·tp·pp = {par.dp_replicate}·{par.dp_shard}·{par.cp}·"
            f"{par.tp}·{par.pp} = {product}, but the job has {world} GPUs; the framework "
            "refuses to start",
            _set(ctx, "dp_shard", "dp_replicate", "tp", "cp", "pp", "world_size"),
            data={"product": product, "world_size": world})


class ShardFillNothingLeft(Rule):
    """`data_parallel_shard_degree = -1` with nothing (or an uneven remainder) left to fill.

    What it checks:
        torchtitan computes the shard degree as world / (dp_replicate · cp · tp · pp). This rule
        fires when that division is below 1 or leaves a remainder.

    Why it matters:
        torchtitan's ParallelDims asserts that the degrees multiply to the world size, so the
        job dies at start-up; with 8 GPUs and tp 16 there is not even one data-parallel rank.

    How to fix:
        Lower tp/cp/pp/dp_replicate until their product divides the GPU count, or add GPUs.

    Example:
        Bad (launch.sh):

            NGPU=8 ./run_train.sh --parallelism.tensor_parallel_degree 16

        Good (launch.sh):

            NGPU=8 ./run_train.sh --parallelism.tensor_parallel_degree 8
    """

    code = "ML503"
    name = "shard-degree-fill-nothing-left"
    severity = Severity.ERROR

    def check(self, ctx: Context) -> Iterable[Finding]:
        par = _par(ctx)
        world = par.world_size
        if world is None or par.dp_shard != -1:
            return
        others = par.dp_replicate * par.cp * par.tp * par.pp
        if world % others == 0 and world // others >= 1:
            return
        if world < others:
            what = f"leaves nothing to shard over ({world} GPUs < {others})"
        else:
            what = f"does not divide the {world} GPUs (remainder {world % others})"
        yield Finding(
            f"data_parallel_shard_degree = -1 fills world / (dp_replicate·cp·tp·pp), but "
            f"{par.dp_replicate}·{par.cp}·{par.tp}·{par.pp} = {others} {what}",
            _set(ctx, "dp_shard", "tp", "cp", "pp", "dp_replicate", "world_size"),
            data={"world_size": world, "others": others})


class TPCrossesNode(Rule):
    """Tensor parallelism larger than a node, or not aligned with node boundaries.

    What it checks:
        tp greater than the GPUs per node, or a tp that does not divide the GPUs per node on a
        multi-node job (some tensor-parallel groups then straddle two nodes).

    Why it matters:
        TP all-reduces/all-gathers activations in every layer, twice per forward and twice per
        backward. On H100, NVLink moves 450 GB/s per GPU per direction, a 400 Gb/s InfiniBand
        NIC 50 GB/s, so a group that leaves the node runs its collectives about 9x slower.

    How to fix:
        Keep tp within a node (tp <= GPUs per node, dividing it); scale further with FSDP/HSDP,
        pipeline or context parallelism.

    Example:
        Bad (launch.sh):

            torchrun --nnodes 2 --nproc_per_node 8 -m torchtitan.train --parallelism.tensor_parallel_degree 16

        Good (launch.sh):

            torchrun --nnodes 2 --nproc_per_node 8 -m torchtitan.train --parallelism.tensor_parallel_degree 8
    """

    code = "ML504"
    name = "tp-crosses-node"
    severity = Severity.WARNING

    def check(self, ctx: Context) -> Iterable[Finding]:
        par = _par(ctx)
        per_node = ctx.scenario.hardware.gpus_per_node
        if par.tp <= 1:
            return
        if par.tp > per_node:
            yield Finding(f"tp = {par.tp} is larger than a node ({per_node} GPUs): every "
                          "layer's tensor-parallel collectives cross the inter-node network",
                          _set(ctx, "tp", "gpus_per_node"), data={"tp": par.tp})
        elif per_node % par.tp and (par.world_size or 0) > per_node:
            yield Finding(f"tp = {par.tp} does not divide the {per_node} GPUs per node: some "
                          "tensor-parallel groups straddle two nodes",
                          _set(ctx, "tp", "gpus_per_node"), data={"tp": par.tp})


class HybridShardGroupNotNode(Rule):
    """HSDP whose shard group does not stay within one node.

    What it checks:
        fsdp = hybrid (HYBRID_SHARD, or dp_replicate > 1 with dp_shard > 1) where the ranks of
        one shard group (dp_shard · cp · tp) span more than one node, or a hybrid setup on a
        single node, where nothing is replicated across nodes.

    Why it matters:
        HSDP exists to keep the per-layer all-gathers and reduce-scatters on NVLink and send only
        one all-reduce per step across nodes. A shard group that spans nodes pays inter-node
        bandwidth (about 9x less per GPU: 50 GB/s on 400 Gb/s IB vs 450 GB/s NVLink on H100) on
        every layer; on one node HSDP is
        FULL_SHARD with a smaller shard group, i.e. more memory per GPU for nothing.

    How to fix:
        Make dp_shard · cp · tp equal the GPUs per node and put the rest in dp_replicate, or use
        FULL_SHARD on a single node.

    Example:
        Bad (accelerate_config.yaml):

            distributed_type: FSDP
            num_machines: 4
            num_processes: 16
            fsdp_config:
              fsdp_version: 2
              fsdp_reshard_after_forward: true
            parallelism_config:
              parallelism_config_dp_replicate_size: 2
              parallelism_config_dp_shard_size: 8

        Good (accelerate_config.yaml):

            distributed_type: FSDP
            num_machines: 4
            num_processes: 16
            fsdp_config:
              fsdp_version: 2
              fsdp_reshard_after_forward: true
            parallelism_config:
              parallelism_config_dp_replicate_size: 4
              parallelism_config_dp_shard_size: 4
    """

    code = "ML505"
    name = "hsdp-shard-group-not-node"
    severity = Severity.WARNING

    def check(self, ctx: Context) -> Iterable[Finding]:
        par = _par(ctx)
        if par.fsdp != "hybrid":
            return
        per_node = ctx.scenario.hardware.gpus_per_node
        world = par.world_size
        if par.dp_shard not in (None, -1):
            # start-up: the conventions load only for an explicit dp_shard
            from memlint.memory.conventions import SEPARATE_FSDP_MESH, shard_group_of
            group = shard_group_of(ctx.scenario, par.dp_shard) * par.tp
            if group > per_node:
                spans = (f"dp_shard·tp = {par.dp_shard}·{par.tp}"
                         if ctx.scenario.rl.framework in SEPARATE_FSDP_MESH
                         else f"dp_shard·cp·tp = {par.dp_shard}·{par.cp}·{par.tp}")
                yield Finding(
                    f"the HSDP shard group spans {group} GPUs ({spans}) but a node has "
                    f"{per_node}: per-layer all-gathers cross nodes",
                    _set(ctx, "dp_shard", "fsdp", "gpus_per_node"),
                    data={"shard_group": group})
                return
        if world is not None and world <= per_node and par.dp_replicate <= 1:
            yield Finding(
                f"HYBRID_SHARD on a single node ({world} GPUs, {per_node} per node) replicates "
                "nothing across nodes; it only shrinks the shard group",
                _set(ctx, "fsdp", "world_size"), data={"world_size": world})


RULES = [FullRecomputeDoubleAllgather, ParallelDegreesWorldMismatch, ShardFillNothingLeft,
         TPCrossesNode, HybridShardGroupNotNode]
