"""Topology rules (ML2xx): divisibility and batch arithmetic of the parallel layout.

These are framework-neutral: they read only the Scenario (parallel sizes, batch, the model's HF
config), so they apply to Megatron scripts, DeepSpeed, torchtitan and FSDP configs alike. Each
mirrors a launch-time assertion of Megatron-LM (d98e8a6) or of `torch.distributed` process-group
construction, which fail minutes into a job after the allocation is granted.
"""
from __future__ import annotations

from collections.abc import Mapping

from memlint.diagnostics import Severity
from memlint.rules.base import Context, Finding, Rule

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


def _configs(ctx: Context) -> list:
    """(prefix, mapping): the model config, then a VLM's language model (`text_config`)."""
    model = ctx.scenario.model
    if model is None:
        return []
    found = [("", model.config)]
    text = model.config.get("text_config")
    if isinstance(text, Mapping):
        found.append(("text_config.", text))
    return found


def _cfg(ctx: Context, *names: str) -> Optional[int]:
    for _prefix, config in _configs(ctx):
        for name in names:
            value = config.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _cfg_key(ctx: Context, *names: str) -> str:
    for prefix, config in _configs(ctx):
        for name in names:
            value = config.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                return f"model.{prefix}{name}"
    return f"model.{names[0]}"


def _experts(ctx: Context) -> tuple:
    names = ("num_local_experts", "n_routed_experts", "num_experts")
    return _cfg(ctx, *names), _cfg_key(ctx, *names)


def _known_dp(ctx: Context) -> Optional[int]:
    """The dense data-parallel size when the world size (or dp) is known, else None."""
    par = ctx.scenario.parallelism
    if par.world_size is None and par.dp is None:
        return None
    return ctx.resolved.topology.dp


class WorldSizeDivisibility(Rule):
    """The world size must be a multiple of tp·pp·cp (and equal tp·pp·cp·dp when dp is given).

    What it checks:
        world_size % (tp·pp·cp) == 0, from the launcher's GPU count and the parallel sizes.

    Why it matters:
        Megatron asserts it in `validate_args` ("world size is not divisible by
        total_model_size") before building a model: GPT-3 175B at TP 8 x PP 16 needs 128 GPUs, or
        a multiple of it; launched on 8 it stops at start-up after the allocation was granted.

    How to fix:
        Launch tp·pp·cp·dp GPUs (--nproc_per_node x --nnodes), or shrink tp/pp/cp to fit.

    Example:
        Bad (args.txt):

            # launcher: torchrun --nproc_per_node 8 --nnodes 1
            --tensor-model-parallel-size 8
            --pipeline-model-parallel-size 16
            --num-layers 96

        Good (args.txt):

            # launcher: torchrun --nproc_per_node 8 --nnodes 16
            --tensor-model-parallel-size 8
            --pipeline-model-parallel-size 16
            --num-layers 96
    """

    code = "ML201"
    name = "world-size-divisibility"
    severity = Severity.ERROR

    def check(self, ctx: Context):
        for message, keys in ctx.resolved.topology.problems:
            if "ep" in keys or "dp_shard" in keys:
                continue
            order = ("tp", "pp", "cp", "world_size", "dp", "ep")
            yield _world_finding(ctx, message, tuple(k for k in order if k in keys))


def _world_finding(ctx: Context, message: str, keys: tuple) -> Finding:
    """A world-size finding; only a warning when the world size is a launcher default (a
    scheduler variable's fallback, e.g. `${SLURM_NNODES:-1}`), not the run's real size."""
    if ctx.extra("world_size.assumed"):
        return Finding(message + " (with the world size the launcher defaults to when run by "
                       "hand; the scheduler may start more: confirm with --set world_size=N)",
                       keys, severity=Severity.WARNING)
    return Finding(message, keys)


class ExpertParallelDivisibility(Rule):
    """Expert parallelism must fit in the data-parallel ranks: ep·etp divides dp·cp·tp.

    What it checks:
        (dp·cp·tp) % (ep·etp) == 0 with dp = world/(tp·pp·cp): Megatron carves the expert groups
        out of the same GPUs (parallel_state: world % (etp·ep·pp) == 0).

    Why it matters:
        Mixtral 8x7B with TP 1 x PP 4 x EP 8 on 8 GPUs leaves dp = 2 < ep = 8: process-group
        creation fails at start-up. It needs at least 32 GPUs (dp ≥ 8).

    How to fix:
        Raise the GPU count so that dp·cp·tp is a multiple of ep·etp, or lower
        --expert-model-parallel-size / --expert-tensor-parallel-size.

    Example:
        Bad (args.txt):

            # launcher: torchrun --nproc_per_node 8 --nnodes 1
            --num-layers 32
            --pipeline-model-parallel-size 4
            --expert-model-parallel-size 8
            --num-experts 8

        Good (args.txt):

            # launcher: torchrun --nproc_per_node 8 --nnodes 4
            --num-layers 32
            --pipeline-model-parallel-size 4
            --expert-model-parallel-size 8
            --num-experts 8
    """

    code = "ML202"
    name = "expert-parallel-divisibility"
    severity = Severity.ERROR

    def check(self, ctx: Context):
        par = ctx.scenario.parallelism
        if par.world_size is None and par.dp is None:
            return
        for message, keys in ctx.resolved.topology.problems:
            if "ep" in keys:
                yield _world_finding(ctx, message, ("ep", "etp", "world_size", "dp"))


class LayersPipelineDivisibility(Rule):
    """The decoder layers must split evenly over the pipeline stages (and virtual stages).

    What it checks:
        num_layers % pp == 0; with an interleaved schedule (vpp > 1), (num_layers / pp) % vpp
        == 0; with an uneven split (first/last stage layers), the middle stages split the rest
        evenly and each of the first/last counts is a multiple of vpp.

    Why it matters:
        Megatron asserts "Number of layers should be divisible by the pipeline-model-parallel
        size" (validate_args) and raises in TransformerConfig for uneven splits: Llama-3 70B
        (80 layers) cannot run at PP 6.

    How to fix:
        Pick pp (and vpp) dividing the layer count, or place the remainder with
        --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers.

    Example:
        Bad (args.txt):

            --num-layers 80
            --pipeline-model-parallel-size 6

        Good (args.txt):

            --num-layers 80
            --pipeline-model-parallel-size 6
            --decoder-first-pipeline-num-layers 14
            --decoder-last-pipeline-num-layers 14
    """

    code = "ML203"
    name = "layers-pipeline-divisibility"
    severity = Severity.ERROR

    def check(self, ctx: Context):
        par = ctx.scenario.parallelism
        layers = _cfg(ctx, "num_hidden_layers", "n_layer", "num_layers")
        if layers is None or par.pp <= 1 and par.vpp <= 1:
            return
        if ctx.has_extra("megatron.pipeline-model-parallel-layout") or \
                ctx.has_extra("megatron.hybrid-layer-pattern"):
            return  # an explicit layout places every layer itself
        if ctx.has_extra("megatron.deepspeed") or ctx.has_extra("megatron.pp-partition-method"):
            return  # Megatron-DeepSpeed: DeepSpeed's PipelineModule partitions (embeddings count)
        total = layers + int(bool(ctx.extra("megatron.account-for-embedding-in-pipeline-split"))) \
            + int(bool(ctx.extra("megatron.account-for-loss-in-pipeline-split")))
        pp, vpp = par.pp, par.vpp
        first, last = par.first_stage_layers, par.last_stage_layers
        layer_key = _cfg_key(ctx, "num_hidden_layers", "n_layer", "num_layers")
        if first is None and last is None:
            if total % pp:
                yield Finding(f"{total} layers do not divide over pp = {pp} pipeline stages "
                              f"({total} % {pp} = {total % pp})", ("pp", layer_key))
                return
            if vpp > 1 and (total // pp) % vpp:
                yield Finding(f"{total // pp} layers per pipeline stage do not divide into vpp = "
                              f"{vpp} virtual stages", ("vpp", "pp", layer_key))
            return
        middle_layers, middle_stages = total, pp
        for count, key in ((first, "first_stage_layers"), (last, "last_stage_layers")):
            if count is None:
                continue
            if count <= 0:
                yield Finding(f"{key} must be at least 1, got {count}", (key,))
                return
            if vpp > 1 and count % vpp:
                yield Finding(f"{key} = {count} is not a multiple of vpp = {vpp}", (key, "vpp"))
            middle_layers -= count
            middle_stages -= 1
        if middle_stages < 0 or middle_layers < 0 or bool(middle_layers) != bool(middle_stages):
            yield Finding(f"{middle_layers} layers remain for {max(middle_stages, 0)} middle "
                          f"pipeline stages after the first/last stage layers",
                          ("first_stage_layers", "last_stage_layers", "pp", layer_key))
            return
        if middle_stages and middle_layers % middle_stages:
            yield Finding(f"{middle_layers} middle layers do not divide over {middle_stages} middle "
                          "pipeline stages", ("pp", "first_stage_layers", "last_stage_layers"))
        elif middle_stages and vpp > 1 and (middle_layers // middle_stages) % vpp:
            yield Finding(f"{middle_layers // middle_stages} layers per middle stage are not a "
                          f"multiple of vpp = {vpp}", ("vpp", "pp"))


class HeadsTensorParallelDivisibility(Rule):
    """Attention heads (and KV groups) must split over the tensor-parallel ranks.

    What it checks:
        num_attention_heads % tp == 0; the KV heads (query groups) must be a multiple or a
        divisor of tp (Megatron replicates KV heads when there are fewer than tp); hidden_size %
        num_attention_heads == 0 when no explicit head dimension is given.

    Why it matters:
        Megatron's TransformerConfig raises "num_attention_heads must be a multiple of
        tensor_model_parallel_size": 12 heads at TP 8 stops at model construction, after the
        job has waited for its nodes.

    How to fix:
        Use a tp dividing the head count (12 heads: tp 1, 2, 3, 4, 6 or 12).

    Example:
        Bad (args.txt):

            --tensor-model-parallel-size 8
            --hidden-size 768
            --num-attention-heads 12

        Good (args.txt):

            --tensor-model-parallel-size 4
            --hidden-size 768
            --num-attention-heads 12
    """

    code = "ML204"
    name = "heads-tensor-parallel-divisibility"
    severity = Severity.ERROR

    def check(self, ctx: Context):
        tp = ctx.scenario.parallelism.tp
        heads = _cfg(ctx, "num_attention_heads", "n_head")
        heads_key = _cfg_key(ctx, "num_attention_heads", "n_head")
        if heads is None or heads <= 0:
            return
        if heads % tp:
            yield Finding(f"num_attention_heads = {heads} is not divisible by tp = {tp}",
                          ("tp", heads_key))
        mla = _cfg(ctx, "kv_lora_rank") is not None
        kv = _cfg(ctx, "num_key_value_heads")
        if kv and not mla and kv % tp and tp % kv:
            yield Finding(f"{kv} KV heads (query groups) are neither a multiple nor a divisor of "
                          f"tp = {tp}", ("tp", "model.num_key_value_heads"))
        hidden = _cfg(ctx, "hidden_size", "n_embd", "d_model")
        if hidden and _cfg(ctx, "head_dim") is None and not mla and hidden % heads:
            yield Finding(f"hidden_size = {hidden} is not divisible by num_attention_heads = "
                          f"{heads} (no explicit head dimension)",
                          (_cfg_key(ctx, "hidden_size", "n_embd", "d_model"), heads_key))


class FfnTensorParallelDivisibility(Rule):
    """The MLP width (and each expert's) must split over the tensor-parallel ranks.

    What it checks:
        intermediate_size % tp == 0 for dense MLPs; moe_intermediate_size % etp == 0 for experts
        (etp defaults to tp).

    Why it matters:
        Megatron's column-parallel linear layers divide the output size by the TP size and assert
        it divides (`megatron.core.utils.divide`): an ffn of 11008 at TP 3 fails while the model
        is built.

    How to fix:
        Choose tp (etp) dividing the MLP width, or round --ffn-hidden-size to a multiple of tp.

    Example:
        Bad (args.txt):

            --tensor-model-parallel-size 3
            --num-attention-heads 24
            --hidden-size 3072
            --ffn-hidden-size 11008

        Good (args.txt):

            --tensor-model-parallel-size 4
            --num-attention-heads 24
            --hidden-size 3072
            --ffn-hidden-size 11008
    """

    code = "ML205"
    name = "ffn-tensor-parallel-divisibility"
    severity = Severity.ERROR

    def check(self, ctx: Context):
        par = ctx.scenario.parallelism
        tp, etp = par.tp, par.etp or par.tp
        ffn = _cfg(ctx, "intermediate_size", "n_inner", "ffn_hidden_size")
        experts, _ = _experts(ctx)
        all_moe = experts and _cfg(ctx, "first_k_dense_replace") in (None, 0) and \
            _cfg(ctx, "moe_layer_freq") in (None, 1) and not (
                ctx.scenario.model and ctx.scenario.model.config.get("mlp_only_layers"))
        if ffn and not all_moe and ffn % tp:
            yield Finding(f"MLP width {ffn} is not divisible by tp = {tp}",
                          ("tp", _cfg_key(ctx, "intermediate_size", "n_inner",
                                          "ffn_hidden_size")))
        expert_ffn = _cfg(ctx, "moe_intermediate_size")
        if experts and expert_ffn is None:
            expert_ffn = ffn
        if experts and expert_ffn and expert_ffn % etp:
            yield Finding(f"expert MLP width {expert_ffn} is not divisible by the expert "
                          f"tensor-parallel size {etp}", ("etp", "tp", "model.moe_intermediate_size"))


class BatchArithmetic(Rule):
    """The global batch must be a whole number of micro-batches times the data-parallel size.

    What it checks:
        global_batch % (micro_batch · dp) == 0, and global_batch == micro_batch · dp · grad_accum
        when gradient accumulation is given too (dp from the world size and tp·pp·cp).

    Why it matters:
        Megatron's micro-batch calculator asserts "global batch size is not divisible by micro
        batch size times data parallel size"; DeepSpeed rejects an inconsistent batch triple
        (a batch read from a DeepSpeed config is left to batch-size-mismatch, ML301, which
        repeats DeepSpeed's own derivation: one problem, one diagnostic).
        GBS 1000 with MBS 1 on 64-way DP fails at start-up.

    How to fix:
        Make the global batch a multiple of micro_batch · dp (here 1 · 64: 1024), or change the
        micro batch or GPU count.

    Example:
        Bad (args.txt):

            # launcher: torchrun --nproc_per_node 8 --nnodes 8
            --micro-batch-size 1
            --global-batch-size 1000

        Good (args.txt):

            # launcher: torchrun --nproc_per_node 8 --nnodes 8
            --micro-batch-size 1
            --global-batch-size 1024
    """

    code = "ML206"
    name = "batch-arithmetic"
    severity = Severity.ERROR

    def check(self, ctx: Context):
        training = ctx.scenario.training
        dp = _known_dp(ctx)
        if dp is None or training.global_batch is None or _from_deepspeed_config(ctx):
            return
        step = training.micro_batch * dp
        if training.grad_accum is not None:
            expected = step * training.grad_accum
            if expected != training.global_batch:
                yield Finding(f"global_batch {training.global_batch} != micro_batch · dp · "
                              f"grad_accum = {training.micro_batch}·{dp}·{training.grad_accum} = "
                              f"{expected}", ("global_batch", "grad_accum", "micro_batch"))
            return
        if training.global_batch % step:
            yield Finding(f"global_batch {training.global_batch} is not divisible by micro_batch "
                          f"· dp = {training.micro_batch}·{dp} = {step}",
                          ("global_batch", "micro_batch", "world_size"))


def _from_deepspeed_config(ctx: Context) -> bool:
    """True when the global batch was read from a DeepSpeed config: then batch-size-mismatch
    (ML301) checks it the way DeepSpeed does (its derivation and _batch_assertion), and one
    problem gets one diagnostic."""
    config = ctx.extra("deepspeed.config")
    where = ctx.scenario.where("global_batch")
    return bool(config) and where is not None and where.file == config


class ContextParallelSequence(Rule):
    """With context parallelism, the sequence must split into 2·cp equal chunks.

    What it checks:
        seq_len % (2·cp) == 0 when cp > 1.

    Why it matters:
        Load-balanced context parallelism gives each rank two chunks (one early, one late) so
        causal-attention work is even; Megatron asserts "seq-length should be a multiple of 2 *
        context-parallel-size". 8191 tokens at CP 4 stops at start-up.

    How to fix:
        Pad or choose seq_len as a multiple of 2·cp.

    Example:
        Bad (args.txt):

            --num-layers 32
            --context-parallel-size 4
            --seq-length 8190

        Good (args.txt):

            --num-layers 32
            --context-parallel-size 4
            --seq-length 8192
    """

    code = "ML207"
    name = "context-parallel-sequence"
    severity = Severity.ERROR

    def check(self, ctx: Context):
        cp = ctx.scenario.parallelism.cp
        seq = ctx.scenario.training.seq_len
        if ctx.has_extra("ms_swift.sequence_parallel_size"):
            return  # ms-swift pads each sequence to its split itself (swift/sequence_parallel/
            #         sequence_parallel.py pad_and_split_inputs at 3602360)
        if cp > 1 and seq % (2 * cp):
            yield Finding(f"seq_len {seq} is not a multiple of 2·cp = {2 * cp}", ("seq_len", "cp"))


class ExpertsExpertParallel(Rule):
    """Expert parallelism needs experts, and the expert count must divide over ep.

    What it checks:
        ep > 1 requires a MoE model; num_experts % ep == 0.

    Why it matters:
        Megatron asserts "num_experts must be non None to use expert model parallelism" and
        "Number of experts should be a multiple of expert model parallel_size": 8 experts at EP 3
        would leave ranks with different expert counts.

    How to fix:
        Use an ep dividing the expert count (8 experts: ep 1, 2, 4 or 8).

    Example:
        Bad (args.txt):

            --num-layers 32
            --num-experts 8
            --expert-model-parallel-size 3

        Good (args.txt):

            --num-layers 32
            --num-experts 8
            --expert-model-parallel-size 4
    """

    code = "ML208"
    name = "experts-expert-parallel"
    severity = Severity.ERROR

    def check(self, ctx: Context):
        ep = ctx.scenario.parallelism.ep
        if ep <= 1 or ctx.scenario.model is None:
            return
        if not ctx.scenario.model.config and ctx.scenario.model.total_params is None:
            return  # a model memlint could not read (an unresolved Hub id): experts unknown
        experts, key = _experts(ctx)
        if not experts:
            yield Finding(f"ep = {ep} but the model has no experts", ("ep",))
        elif experts % ep:
            yield Finding(f"{experts} experts are not divisible by ep = {ep}", ("ep", key))


class MoeTopkExceedsExperts(Rule):
    """A token cannot be routed to more experts than exist.

    What it checks:
        num_experts_per_tok (router top-k) <= number of routed experts.

    Why it matters:
        torch.topk with k > n fails in the first forward pass, after the model is loaded and
        sharded; Megatron's router does not check it at start-up: a Mixtral run (8 experts) with top-k 10
    loads and shards 47B parameters before it dies.

    How to fix:
        Lower --moe-router-topk (num_experts_per_tok) or raise the expert count.

    Example:
        Bad (args.txt):

            --num-layers 32
            --num-experts 8
            --moe-router-topk 10

        Good (args.txt):

            --num-layers 32
            --num-experts 8
            --moe-router-topk 2
    """

    code = "ML209"
    name = "moe-topk-exceeds-experts"
    severity = Severity.ERROR

    def check(self, ctx: Context):
        experts, key = _experts(ctx)
        topk = _cfg(ctx, "num_experts_per_tok")
        if experts and topk and topk > experts:
            yield Finding(f"router top-k {topk} exceeds the {experts} experts",
                          ("model.num_experts_per_tok", key))


RULES = [
    WorldSizeDivisibility(),
    ExpertParallelDivisibility(),
    LayersPipelineDivisibility(),
    HeadsTensorParallelDivisibility(),
    FfnTensorParallelDivisibility(),
    BatchArithmetic(),
    ContextParallelSequence(),
    ExpertsExpertParallel(),
    MoeTopkExceedsExperts(),
]
