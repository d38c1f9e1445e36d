"""Megatron-LM rules (ML4xx): launch-time assertions and silent traps of Megatron's arguments.

They read the `megatron.<flag>` facts the Megatron adapter records (memlint.adapters.megatron),
plus the Scenario, and point at the flag's own line. The assertions are those of Megatron-LM
d98e8a6 (`megatron/training/arguments.py` validate_args, `TransformerConfig.__post_init__`,
`ModelParallelConfig.__post_init__`, the pipeline schedules). Divisibility checks that hold for
every framework live in memlint.rules.topology.
"""
from __future__ import annotations

from memlint.diagnostics import Severity
from memlint.keys import to_int
from memlint.rules.base import Context, Finding, Rule

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

M = "megatron."


def _flag(ctx: Context, flag: str):
    return ctx.extra(M + flag)


def _has(ctx: Context, flag: str) -> bool:
    return ctx.has_extra(M + flag)


def _int(value) -> Optional[int]:
    """A flag's value as a whole number within the scenario keys' bounds, else None."""
    if value is None:
        return None
    try:
        return to_int(value)
    except ValueError:
        return None


def _count(config, name: str) -> int:
    """A positive whole number from the model config, else 0 (the config may be anything)."""
    # start-up: the memory model loads only when a run is estimated
    from memlint.memory.params import MAX_CONFIG_INT

    value = config.get(name)
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_CONFIG_INT
    return value if ok else 0


class QueryGroupsIgnored(Rule):
    """`--num-query-groups` without `--group-query-attention` is silently ignored.

    What it checks:
        --num-query-groups is given but --group-query-attention is not.

    Why it matters:
        Megatron passes num_query_groups to the model only when --group-query-attention is set
        (`core_transformer_config_from_args`); otherwise the model is full multi-head attention.
        For Llama-3 8B (32 heads, 8 groups, 32 layers, head dim 128) that adds
        2·32·4096·128·24 = 805M K/V parameters (~13 GB of weights, grads and Adam states) and 4x
        the K/V activations, with no error or warning.

    How to fix:
        Add --group-query-attention next to --num-query-groups.

    Example:
        Bad (args.txt):

            --num-attention-heads 32
            --num-query-groups 8

        Good (args.txt):

            --num-attention-heads 32
            --group-query-attention
            --num-query-groups 8
    """

    code = "ML401"
    name = "query-groups-ignored"
    severity = Severity.WARNING
    formats = ("megatron",)

    def check(self, ctx: Context):
        if not _has(ctx, "num-query-groups") or _has(ctx, "group-query-attention"):
            return
        if _has(ctx, "multi-latent-attention"):
            return
        groups = _int(_flag(ctx, "num-query-groups"))
        config = ctx.scenario.model.config if ctx.scenario.model else {}
        heads = _count(config, "num_attention_heads")
        extra = ""
        if heads and groups and 0 < groups < heads:
            layers = _count(config, "num_hidden_layers")
            hidden = _count(config, "hidden_size")
            head_dim = _count(config, "head_dim") or hidden // heads
            params = 2 * layers * hidden * head_dim * (heads - groups)
            extra = (f": the model gets {heads} KV heads instead of {groups}"
                     + (f", {params / 1e6:,.0f}M more K/V parameters" if params else ""))
        yield Finding("--num-query-groups is ignored without --group-query-attention" + extra,
                      (M + "num-query-groups",))


class SequenceParallelWithoutTp(Rule):
    """`--sequence-parallel` does nothing at tensor-parallel size 1.

    What it checks:
        --sequence-parallel with tp = 1.

    Why it matters:
        Sequence parallelism splits LayerNorm/dropout activations over the TP group; with TP 1
        there is nothing to split, and Megatron turns it off with a warning. An estimate that
        counts its savings (activations / tp) is unaffected at tp 1, but the flag usually means
        the intended TP size was lost (the Llama-3 8B example says "with TP_SIZE=2").

    How to fix:
        Set the intended --tensor-model-parallel-size, or drop --sequence-parallel.

    Example:
        Bad (args.txt):

            --tensor-model-parallel-size 1
            --sequence-parallel

        Good (args.txt):

            --tensor-model-parallel-size 2
            --num-attention-heads 32
            --sequence-parallel
    """

    code = "ML402"
    name = "sequence-parallel-without-tp"
    severity = Severity.WARNING
    formats = ("megatron",)

    def check(self, ctx: Context):
        par = ctx.scenario.parallelism
        if par.sp and par.tp == 1:
            yield Finding("--sequence-parallel has no effect with tensor-parallel size 1; "
                          "Megatron disables it", ("sp", "tp"))


class MoeTensorParallelNeedsSp(Rule):
    """Expert parallelism combined with tensor parallelism requires sequence parallelism.

    What it checks:
        ep > 1 and tp > 1 without --sequence-parallel.

    Why it matters:
        Megatron's MoE token dispatchers expect sequence-parallel inputs when TP > 1
        (ModelParallelConfig warns "sequence parallelism must be used"); without it every TP rank
        holds the full sequence of activations (tp times more activation memory in the MoE
        layers) and dispatches duplicate tokens.

    How to fix:
        Add --sequence-parallel.

    Example:
        Bad (args.txt):

            --tensor-model-parallel-size 2
            --expert-model-parallel-size 8
            --num-experts 8
            --num-attention-heads 32

        Good (args.txt):

            --tensor-model-parallel-size 2
            --expert-model-parallel-size 8
            --num-experts 8
            --num-attention-heads 32
            --sequence-parallel
    """

    code = "ML403"
    name = "moe-tp-needs-sequence-parallel"
    severity = Severity.WARNING
    formats = ("megatron",)

    def check(self, ctx: Context):
        par = ctx.scenario.parallelism
        if par.ep > 1 and par.tp > 1 and not par.sp:
            yield Finding(f"expert parallelism (ep = {par.ep}) with tp = {par.tp} needs "
                          "--sequence-parallel", ("tp", "ep"))


class RecomputeSettings(Rule):
    """Recompute method and layer count must match the recompute granularity.

    What it checks:
        --recompute-granularity full needs --recompute-method (uniform|block) and
        --recompute-num-layers; selective takes neither; a method or layer count without a
        granularity is ignored; --distribute-saved-activations needs full recompute, tp > 1 and
        no sequence parallelism.

    Why it matters:
        Megatron raises at start-up for full recompute without a method or layer count and
        asserts "recompute method is not yet supported for selective recomputing granularity".
        A method without a granularity silently recomputes nothing, so memory is that of no
        recompute (for a 70B model at 8k tokens, tens of GB of activations per GPU).

    How to fix:
        Full: `--recompute-granularity full --recompute-method uniform --recompute-num-layers 1`.
        Selective: `--recompute-granularity selective` alone.

    Example:
        Bad (args.txt):

            --num-layers 32
            --recompute-granularity full

        Good (args.txt):

            --num-layers 32
            --recompute-granularity full
            --recompute-method uniform
            --recompute-num-layers 1
    """

    code = "ML404"
    name = "recompute-settings"
    severity = Severity.ERROR
    formats = ("megatron",)

    def check(self, ctx: Context):
        granularity = _flag(ctx, "recompute-granularity")
        if _has(ctx, "recompute-activations") and granularity is None:
            granularity = "selective"
        method = _has(ctx, "recompute-method")
        layers = _has(ctx, "recompute-num-layers")
        g_key = M + "recompute-granularity"
        if granularity == "full":
            if not method:
                yield Finding("--recompute-granularity full needs --recompute-method "
                              "(uniform or block)", (g_key,))
            if not layers:
                yield Finding("--recompute-granularity full needs --recompute-num-layers",
                              (g_key,))
        elif granularity == "selective":
            if method:
                yield Finding("--recompute-method is not supported with selective recompute",
                              (M + "recompute-method", g_key))
            if layers:
                yield Finding("--recompute-num-layers must not be set with selective recompute",
                              (M + "recompute-num-layers", g_key))
        elif method or layers:
            flag = "recompute-method" if method else "recompute-num-layers"
            yield Finding(f"--{flag} without --recompute-granularity is ignored: nothing is "
                          "recomputed", (M + flag,), severity=Severity.WARNING)
        if _has(ctx, "distribute-saved-activations"):
            par = ctx.scenario.parallelism
            key = (M + "distribute-saved-activations",)
            if par.tp <= 1:
                yield Finding("--distribute-saved-activations needs tensor-parallel size > 1", key)
            if granularity != "full":
                yield Finding("--distribute-saved-activations needs --recompute-granularity full",
                              key)
            if par.sp:
                yield Finding("--distribute-saved-activations cannot be used with "
                              "--sequence-parallel", key)


class InterleavedSchedule(Rule):
    """The interleaved (virtual pipeline) schedule's requirements.

    What it checks:
        At most one of --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-
        pipeline-rank and --pipeline-model-parallel-layout; layers per stage divisible by
        --num-layers-per-virtual-pipeline-stage (and no uneven first/last split with it);
        pp > 1 (pp > 2 with --no-overlap-p2p-communication: at Megatron-LM d98e8a6 p2p overlap
        is on by default); the micro-batch group per virtual stage g
        (--microbatch-group-size-per-virtual-pipeline-stage, default pp) within [pp, m] for the
        m = global / (micro·dp) micro-batches, and m % g either 0 or at least pp.

    Why it matters:
        Megatron asserts the first ones in validate_args; the schedule raises "The number of
        contiguous micro-batches in a virtual pipeline stage should range in [PP, M]" or a
        remainder error on the first step: GBS 96, MBS 1, DP 16 gives 6 micro-batches, not a
        multiple of PP 4.

    How to fix:
        Choose the global batch so that global / (micro·dp) is a multiple of pp (of the group
        size, when given); with --no-overlap-p2p-communication use pp >= 3 or drop that flag.

    Example:
        Bad (args.txt):

            # launcher: torchrun --nproc_per_node 8 --nnodes 8
            --pipeline-model-parallel-size 4
            --num-virtual-stages-per-pipeline-rank 2
            --num-layers 32
            --micro-batch-size 1
            --global-batch-size 96

        Good (args.txt):

            # launcher: torchrun --nproc_per_node 8 --nnodes 8
            --pipeline-model-parallel-size 4
            --num-virtual-stages-per-pipeline-rank 2
            --num-layers 32
            --micro-batch-size 1
            --global-batch-size 128
    """

    code = "ML405"
    name = "interleaved-schedule"
    severity = Severity.ERROR
    formats = ("megatron",)

    def check(self, ctx: Context):
        par = ctx.scenario.parallelism
        given = [f for f in ("num-layers-per-virtual-pipeline-stage",
                             "num-virtual-stages-per-pipeline-rank",
                             "pipeline-model-parallel-layout") if _has(ctx, f)]
        if len(given) > 1:
            yield Finding("only one of " + ", ".join("--" + f for f in given) + " may be set",
                          tuple(M + f for f in given))
        per_stage = _int(_flag(ctx, "num-layers-per-virtual-pipeline-stage"))
        if per_stage:
            key = M + "num-layers-per-virtual-pipeline-stage"
            if par.first_stage_layers is not None or par.last_stage_layers is not None:
                yield Finding("an uneven first/last pipeline stage needs "
                              "--num-virtual-stages-per-pipeline-rank, not "
                              "--num-layers-per-virtual-pipeline-stage", (key,))
            layers = ctx.scenario.model.config.get("num_hidden_layers") \
                if ctx.scenario.model else None
            if isinstance(layers, int) and layers % par.pp == 0 and \
                    (layers // par.pp) % per_stage:
                yield Finding(f"{layers // par.pp} layers per pipeline stage are not divisible by "
                              f"--num-layers-per-virtual-pipeline-stage {per_stage}", (key,))
        if par.vpp <= 1:
            return
        # validate_args: with overlap_p2p_comm (default True: --no-overlap-p2p-communication is
        # store_false) the interleaved schedule needs pp > 1, without it pp > 2.
        no_overlap = _has(ctx, "no-overlap-p2p-communication")
        if par.pp <= (2 if no_overlap else 1):
            yield Finding(f"the interleaved schedule needs pp > {2 if no_overlap else 1} "
                          f"(pp = {par.pp})" + ("; or drop --no-overlap-p2p-communication"
                                                if no_overlap and par.pp == 2 else ""),
                          ("vpp", "pp") + ((M + "no-overlap-p2p-communication",)
                                           if no_overlap else ()))
        training = ctx.scenario.training
        if training.global_batch is None or (par.world_size is None and par.dp is None):
            return
        dp = ctx.resolved.topology.dp
        step = training.micro_batch * dp
        if training.global_batch % step:
            return  # batch-arithmetic reports it
        microbatches = training.global_batch // step
        group_key = "microbatch-group-size-per-virtual-pipeline-stage"
        group = _int(_flag(ctx, group_key)) if _has(ctx, group_key) else None
        size = group or par.pp
        keys = ("global_batch", "vpp", "pp") + ((M + group_key,) if group else ())
        where = (f"{microbatches} micro-batches per step (global {training.global_batch} / "
                 f"(micro {training.micro_batch} · dp {dp}))")
        # schedules.py forward_backward_pipelining_with_interleaving
        if size > microbatches or size < par.pp:
            yield Finding(f"{where}: the micro-batch group per virtual stage "
                          f"({'--' + group_key + ' ' + str(group) if group else 'pp'} = {size}) "
                          f"must lie in [pp = {par.pp}, {microbatches}]", keys)
        elif 0 < microbatches % size < par.pp:
            yield Finding(f"{where} must be a multiple of {size} "
                          f"({'the micro-batch group size' if group else 'pp'}) or leave a "
                          f"remainder of at least pp = {par.pp} with the interleaved schedule",
                          keys)


class BatchScheduleConflict(Rule):
    """`--step-batch-size-schedule` and `--global-batch-size` cannot be combined.

    What it checks:
        Both flags are given.

    Why it matters:
        Megatron raises "Cannot specify both --step-batch-size-schedule and --global-batch-size"
        in validate_args, before any model is built, so the job dies as soon as it starts.
        On the GPT-3 175B example that is 128 GPUs waiting in the queue for a job that cannot start.

    How to fix:
        Keep the schedule (its last entry is the final global batch) and drop
        --global-batch-size, or the reverse.

    Example:
        Bad (args.txt):

            --num-layers 32
            --global-batch-size 1536
            --step-batch-size-schedule "0:16 2.4B:1536"

        Good (args.txt):

            --num-layers 32
            --step-batch-size-schedule "0:16 2.4B:1536"
    """

    code = "ML406"
    name = "batch-schedule-conflict"
    severity = Severity.ERROR
    formats = ("megatron",)

    def check(self, ctx: Context):
        if _has(ctx, "step-batch-size-schedule") and _has(ctx, "global-batch-size"):
            yield Finding("--step-batch-size-schedule and --global-batch-size cannot both be set",
                          (M + "step-batch-size-schedule", M + "global-batch-size"))


class MlaWithGqa(Rule):
    """Multi-latent attention and grouped-query attention are mutually exclusive.

    What it checks:
        --multi-latent-attention together with --group-query-attention.

    Why it matters:
        Megatron asserts "Group query attention is mutually exclusive with multi latent
        attention" at start-up.
        A DeepSeek-V3-style run (61 layers, 128 heads, 671B parameters) never reaches step 1.

    How to fix:
        Drop --group-query-attention (and --num-query-groups) for MLA models.

    Example:
        Bad (args.txt):

            --num-layers 32
            --multi-latent-attention
            --group-query-attention

        Good (args.txt):

            --num-layers 32
            --multi-latent-attention
    """

    code = "ML407"
    name = "mla-with-gqa"
    severity = Severity.ERROR
    formats = ("megatron",)

    def check(self, ctx: Context):
        if _has(ctx, "multi-latent-attention") and _has(ctx, "group-query-attention"):
            yield Finding("--multi-latent-attention cannot be combined with "
                          "--group-query-attention", (M + "group-query-attention",))


class SeqLengthExceedsPositions(Rule):
    """The sequence length may not exceed --max-position-embeddings.

    What it checks:
        --seq-length (and --decoder-seq-length) <= --max-position-embeddings.

    Why it matters:
        Megatron asserts "max_position_embeddings must be greater than or equal to seq_length"
        (the learned position table, and RoPE caches, are sized by it).
        Llama-3 8B at --seq-length 16384 over 8192 positions stops at start-up on all of its GPUs.

    How to fix:
        Raise --max-position-embeddings to at least the sequence length.

    Example:
        Bad (args.txt):

            --num-layers 32
            --seq-length 8192
            --max-position-embeddings 4096

        Good (args.txt):

            --num-layers 32
            --seq-length 8192
            --max-position-embeddings 8192
    """

    code = "ML408"
    name = "seq-length-exceeds-positions"
    severity = Severity.ERROR
    formats = ("megatron",)

    def check(self, ctx: Context):
        limit = _int(_flag(ctx, "max-position-embeddings"))
        if limit is None:
            return
        for flag in ("seq-length", "decoder-seq-length"):
            length = _int(_flag(ctx, flag))
            if length is not None and length > limit:
                yield Finding(f"--{flag} {length} exceeds --max-position-embeddings {limit}",
                              (M + flag, M + "max-position-embeddings"))


class OverlapParamGatherRequirements(Rule):
    """`--overlap-param-gather` needs the distributed optimizer and `--overlap-grad-reduce`.

    What it checks:
        --overlap-param-gather without --use-distributed-optimizer (or Megatron-FSDP, or the
        dist_muon optimizer), or without --overlap-grad-reduce.

    Why it matters:
        Megatron asserts both in validate_args; the parameter all-gather only exists when the
        optimizer state (and updated parameters) are sharded.
        A 64-GPU job fails within seconds of leaving the queue.

    How to fix:
        Add --use-distributed-optimizer and --overlap-grad-reduce, or drop
        --overlap-param-gather.

    Example:
        Bad (args.txt):

            --num-layers 32
            --overlap-param-gather

        Good (args.txt):

            --num-layers 32
            --use-distributed-optimizer
            --overlap-grad-reduce
            --overlap-param-gather
    """

    code = "ML409"
    name = "overlap-param-gather-requirements"
    severity = Severity.ERROR
    formats = ("megatron",)

    def check(self, ctx: Context):
        if not _has(ctx, "overlap-param-gather"):
            return
        key = (M + "overlap-param-gather",)
        sharded = _has(ctx, "use-distributed-optimizer") or _has(ctx, "use-megatron-fsdp") or \
            str(_flag(ctx, "optimizer")) == "dist_muon"
        if not sharded:
            yield Finding("--overlap-param-gather needs --use-distributed-optimizer "
                          "(or Megatron-FSDP)", key)
        if not _has(ctx, "overlap-grad-reduce"):
            yield Finding("--overlap-param-gather needs --overlap-grad-reduce", key)


class CpuOffloadingConflicts(Rule):
    """Activation CPU offloading excludes recompute and pipeline parallelism.

    What it checks:
        --cpu-offloading (or --cpu-offloading-num-layers > 0) together with a recompute
        granularity or pp > 1; --cpu-offloading-num-layers must be below the layer count.

    Why it matters:
        TransformerConfig raises "CPU offloading does not work when activation recomputation is
        enabled" and rejects pipeline parallelism with CPU offloading, at model construction.
        Either combination stops the run before step 1, on all of its GPUs.

    How to fix:
        Choose one memory saver: recompute or offloading; offload with pp = 1 only.

    Example:
        Bad (args.txt):

            --cpu-offloading
            --cpu-offloading-num-layers 4
            --num-layers 32
            --recompute-granularity selective

        Good (args.txt):

            --cpu-offloading
            --cpu-offloading-num-layers 4
            --num-layers 32
    """

    code = "ML410"
    name = "cpu-offloading-conflicts"
    severity = Severity.ERROR
    formats = ("megatron",)

    def check(self, ctx: Context):
        count = _int(_flag(ctx, "cpu-offloading-num-layers")) or 0
        if not (_has(ctx, "cpu-offloading") or count > 0):
            return
        key = M + ("cpu-offloading" if _has(ctx, "cpu-offloading") else
                   "cpu-offloading-num-layers")
        if _has(ctx, "recompute-granularity") or _has(ctx, "recompute-activations"):
            yield Finding("CPU offloading does not work with activation recomputation",
                          (key, M + "recompute-granularity"))
        if ctx.scenario.parallelism.pp > 1:
            yield Finding("CPU offloading is not supported with pipeline parallelism",
                          (key, "pp"))
        layers = ctx.scenario.model.config.get("num_hidden_layers") if ctx.scenario.model \
            else None
        if isinstance(layers, int) and count >= layers:
            yield Finding(f"--cpu-offloading-num-layers {count} must be below the {layers} layers",
                          (M + "cpu-offloading-num-layers",))


RULES = [
    QueryGroupsIgnored(),
    SequenceParallelWithoutTp(),
    MoeTensorParallelNeedsSp(),
    RecomputeSettings(),
    InterleavedSchedule(),
    BatchScheduleConflict(),
    MlaWithGqa(),
    SeqLengthExceedsPositions(),
    OverlapParamGatherRequirements(),
    CpuOffloadingConflicts(),
]
