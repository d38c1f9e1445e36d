"""ML6xx: strategy. The parallel layout works, but a different choice would fit, or fit cheaper.

These rules re-run the memory model on a modified scenario (`dataclasses.replace` on its
parallelism) to tell what a change would buy; they do no memory maths of their own. Throughput
costs are the communication volumes of the ZeRO paper (Rajbhandari et al. 2020) and the offload
costs measured for ZeRO-Offload (Ren et al. 2021) and ZeRO-Infinity (Rajbhandari et al. 2021).
"""
from __future__ import annotations

from memlint.diagnostics import Severity
from memlint.rules._support import component, size, stage_label, try_estimate, with_parallelism
from memlint.rules.base import Finding, Rule


def _num_experts(ctx):
    arch = ctx.resolved.architecture   # None: no model, or an unreadable config (reported)
    return arch.moe.num_experts if arch is not None and arch.moe is not None else None


def _topology_ok(resolved) -> bool:
    """Whether the layout is valid, judged only when the GPU count is actually known."""
    scenario = resolved.scenario
    if not (scenario.is_set("world_size") or scenario.is_set("dp")):
        return True

    return not resolved.topology.problems


# Frameworks that can split experts over GPUs: Megatron (--expert-model-parallel-size),
# torchtitan (expert_parallel_degree) and axolotl (expert_parallel_size, its ExpertParallelPlugin).
# The HF Trainer, accelerate FSDP and DeepSpeed ZeRO on a transformers MoE have no such axis.
def _has_expert_parallel(ctx) -> bool:
    framework = ctx.scenario.training.framework
    if framework == "megatron":
        return True
    formats = set(ctx.formats or ())
    # axolotl's expert parallelism composes with FSDP2 (monkeypatch/accelerate/fsdp2.py)
    return "torchtitan" in formats or ("axolotl" in formats and framework != "deepspeed")


def _gpus(scenario):
    """The known GPU count (None when no input gave it)."""
    if scenario.is_set("world_size"):
        return scenario.parallelism.world_size
    if scenario.is_set("dp"):
        par = scenario.parallelism
        return par.dp * par.tp * par.pp * par.cp
    return None


class MoeWithoutExpertParallel(Rule):
    """A mixture-of-experts model that does not fit (or barely) trains with ep = 1.

    What it checks:
        Whether the model has routed experts (the estimate's `experts` parameter count) while
        expert parallelism is 1, the run uses several GPUs, its framework can split experts
        (Megatron, torchtitan, axolotl), and the peak stage does not fit or leaves less than
        `margin` (default 0.10) of the GPU free. It re-estimates with ep = 2, 4, 8, ...
        (dividing the expert count and the data-parallel GPUs) and suggests the smallest ep
        that fits. A warning when the run does not fit (exceeds-gpu-memory is the error), info
        when it fits tightly; silent on one GPU, on a run that fits with room, and where the
        framework has no expert parallelism.

    Why it matters:
        Experts are most of an MoE's parameters: 398B of a 428B MoE (128 experts, top-4).
        Without EP the weights and optimizer alone take 93.6 GB per GPU at tp = 4, pp = 4 with
        ZeRO-2 on 512 H100s, more than 80 GB, and no ZeRO stage, recompute or cp can save it.
        EP divides expert memory by ep at the cost of an all-to-all.

    How to fix:
        Set ep to the suggested size (Megatron --expert-model-parallel-size, torchtitan
        expert_parallel_degree, axolotl expert_parallel_size); keep the EP group inside a node
        where possible.

    Example:
        Bad (memlint.toml):

            model = "mixtral-8x7b"
            gpu = "H100-80GB"
            world_size = 16
            zero = 2
            recompute = "full"

        Good (memlint.toml):

            model = "mixtral-8x7b"
            gpu = "H100-80GB"
            world_size = 16
            zero = 2
            recompute = "full"
            ep = 8
    """

    code = "ML601"
    requires = ("estimate",)
    name = "moe-without-expert-parallel"
    severity = Severity.WARNING
    options = {"margin": (float, 0.10)}

    def check(self, ctx):
        estimate = ctx.estimate
        scenario = ctx.scenario
        if estimate is None or not estimate.stages or scenario.parallelism.ep != 1:
            return
        if getattr(estimate, "rl", None):
            return  # RL and serving: the ML8xx rules name the phase and its engine settings
        experts = int(estimate.params.get("experts", 0) or 0)
        if experts <= 0 or not _has_expert_parallel(ctx):
            return
        gpus = _gpus(scenario)
        if gpus is None or gpus <= 1:
            return
        capacity = estimate.capacity_bytes
        margin = float(ctx.options.get("margin", 0.10))
        fits = estimate.peak_bytes <= capacity
        if estimate.peak_bytes <= capacity * (1 - margin):
            return  # fits with room: expert parallelism would only add an all-to-all
        count = _num_experts(ctx)
        suggestion = ""
        suggested = None
        limit = min(count or 256, gpus)
        candidate = 2
        while candidate <= limit:
            if count is None or count % candidate == 0:
                variant = ctx.resolved.varied(with_parallelism(scenario, ep=candidate))
                if _topology_ok(variant):
                    result = try_estimate(variant.scenario, variant)
                    if result is not None and result.peak_bytes <= capacity * (1 - margin):
                        suggested = candidate
                        suggestion = (f"; ep={candidate} is the smallest that fits (peak "
                                      f"{size(ctx, estimate.peak_bytes)} -> "
                                      f"{size(ctx, result.peak_bytes)})")
                        break
            candidate *= 2
        if suggested is None:
            if fits:
                return  # tight, and no ep gives room either: nothing to suggest
            suggestion = f"; no ep up to {limit} fits on its own: shard further as well"
        total = int(estimate.params.get("total", 0) or 0)
        share = f" ({experts / total:.0%} of {total / 1e9:.1f}B)" if total else ""
        what = f"{count} routed experts" if count else "routed experts"
        state = ("does not fit" if not fits else
                 f"peaks at {estimate.peak_bytes / capacity:.0%} of the GPU")
        yield Finding(
            f"MoE model with {what}{share} {state} with ep=1: every GPU keeps all experts' "
            f"weights, gradients and optimizer states{suggestion}",
            keys=("ep", "world_size", "model"),
            severity=None if not fits else Severity.INFO,
            data={"expert_params": experts, "suggested_ep": suggested})


class VisionEncoderOnFirstStage(Rule):
    """A vision-language model with pp > 1 puts the vision encoder on stage 0, making it the peak.

    What it checks:
        With pipeline parallelism, whether stage 0 (embedding + vision encoder + projector +
        its layers) peaks above every other stage, and by how much. It re-estimates with fewer
        decoder layers on stage 0 to suggest an uneven split.

    Why it matters:
        The ViT, its projector and the image activations sit only on the first stage: about 3-7
        GB per GPU for a 428B MoE with a 0.4B, 32-layer ViT. The other stages then idle below the
        capacity while stage 0 is the one that runs out, the last straw at long sequences.

    How to fix:
        Give stage 0 fewer decoder layers (first_stage_layers; Megatron
        --decoder-first-pipeline-num-layers), or lower micro_batch / raise cp.

    Example:
        Bad (memlint.toml):

            gpu = "H100-80GB"
            world_size = 8
            pp = 4
            zero = 1
            recompute = "full"
            micro_batch = 1
            images_per_sample = 4
            [model]
            model_type = "llava"
            [model.text_config]
            model_type = "llama"
            hidden_size = 4096
            intermediate_size = 11008
            num_hidden_layers = 32
            num_attention_heads = 32
            vocab_size = 32064
            [model.vision_config]
            model_type = "clip_vision_model"
            hidden_size = 1024
            intermediate_size = 4096
            num_hidden_layers = 24
            num_attention_heads = 16
            patch_size = 14
            image_size = 336

        Good (memlint.toml):

            gpu = "H100-80GB"
            world_size = 8
            pp = 4
            zero = 1
            recompute = "full"
            micro_batch = 1
            images_per_sample = 4
            first_stage_layers = 6
            [model]
            model_type = "llava"
            [model.text_config]
            model_type = "llama"
            hidden_size = 4096
            intermediate_size = 11008
            num_hidden_layers = 32
            num_attention_heads = 32
            vocab_size = 32064
            [model.vision_config]
            model_type = "clip_vision_model"
            hidden_size = 1024
            intermediate_size = 4096
            num_hidden_layers = 24
            num_attention_heads = 16
            patch_size = 14
            image_size = 336
    """

    code = "ML602"
    requires = ("estimate",)
    name = "vision-encoder-on-first-stage"
    severity = Severity.WARNING

    def check(self, ctx):
        estimate = ctx.estimate
        scenario = ctx.scenario
        if estimate is None or scenario.parallelism.pp <= 1 or len(estimate.stages) < 2:
            return
        stages = sorted(estimate.stages, key=lambda s: s.stage)
        first, rest = stages[0], stages[1:]
        vision = component(first, "vision")
        if vision <= 0:
            return
        runner_up = max(rest, key=lambda s: s.total_bytes)
        excess = first.total_bytes - runner_up.total_bytes
        if excess <= 0:
            return
        hint = self._split(ctx, first)
        yield Finding(
            f"stage 0 holds the vision encoder ({size(ctx, vision)}) and peaks at "
            f"{size(ctx, first.total_bytes)}, {size(ctx, excess)} more than the largest other "
            f"stage ({stage_label(estimate, runner_up)}, {size(ctx, runner_up.total_bytes)}); "
            f"{hint}",
            keys=("pp", "first_stage_layers", "micro_batch", "images_per_sample"),
            data={"vision_bytes": vision, "excess_bytes": excess})

    @staticmethod
    def _split(ctx, first) -> str:
        scenario = ctx.scenario
        best = None
        for layers in range(first.layers - 1, max(-1, first.layers - 33), -1):
            result = try_estimate(with_parallelism(scenario, first_stage_layers=layers),
                                  ctx.resolved)
            if result is None:
                break
            if best is None or result.peak_bytes < best[1]:
                best = (layers, result.peak_bytes)
            elif result.peak_bytes > best[1]:
                break
        if best is not None and ctx.estimate.peak_bytes - best[1] > 0:
            return (f"first_stage_layers={best[0]} (from {first.layers}) lowers the peak to "
                    f"{size(ctx, best[1])}; or lower micro_batch")
        return "give stage 0 fewer layers (first_stage_layers) or lower micro_batch"


class SequenceParallelOff(Rule):
    """Tensor parallelism without sequence parallelism keeps norm and dropout activations whole.

    What it checks:
        tp > 1 with sp off; when a model is known, the activation memory sp would save, by
        re-estimating with sp on.

    Why it matters:
        Without SP, LayerNorm/RMSNorm and dropout activations (B·T·d each, 10-15% of a layer's
        activations; Korthikanti et al. 2022, Table 2) are replicated on all tp ranks; SP
        splits them 1/tp at no extra communication volume (the all-reduce becomes
        reduce-scatter + all-gather).

    How to fix:
        Turn it on: Megatron --sequence-parallel, torchtitan's TP plan with sequence sharding,
        sp = true in a memlint file.

    Example:
        Bad (memlint.toml):

            tp = 4

        Good (memlint.toml):

            tp = 4
            sp = true
    """

    code = "ML603"
    requires = ("tp>1",)
    name = "sequence-parallel-off"
    severity = Severity.INFO

    def check(self, ctx):
        scenario = ctx.scenario
        par = scenario.parallelism
        if par.tp <= 1 or par.sp:
            return
        saving = ""
        estimate = ctx.estimate
        if estimate is not None and estimate.stages:
            result = try_estimate(with_parallelism(scenario, sp=True), ctx.resolved)
            if result is not None:
                before = sum(component(s, "activations") for s in estimate.stages)
                after = sum(component(s, "activations") for s in result.stages)
                if before > after:
                    saving = (f"; sp would cut activations by {size(ctx, before - after)} "
                              f"summed over stages (peak {size(ctx, estimate.peak_bytes)} -> "
                              f"{size(ctx, result.peak_bytes)})")
        yield Finding(f"tp={par.tp} without sequence parallelism: norm and dropout activations "
                      f"are replicated on every tp rank{saving}",
                      keys=("sp", "tp"))


class Zero3WhenZero2Fits(Rule):
    """ZeRO-3 / full FSDP shards the weights although ZeRO-2 (or SHARD_GRAD_OP) would fit.

    What it checks:
        zero = 3 (or fsdp = "full"): it re-estimates with zero = 2 (fsdp = "shard_grad_op") and
        reports when that fits with `margin` (default 0.10) to spare.

    Why it matters:
        Sharding the weights adds an all-gather before forward and again before backward:
        about 1.5x the communication of ZeRO-2 (3 versus 2 model sizes per step, Rajbhandari et
        al. 2020, Section 7): memory bought with throughput, worth it only when the weights
        still do not fit otherwise.

    How to fix:
        Use zero = 2 (DeepSpeed "stage": 2, FSDP SHARD_GRAD_OP, or torchtitan with
        reshard_after_forward off) when memory allows.

    Example:
        Bad (memlint.toml):

            model = "llama3-8b"
            gpu = "H100-80GB"
            world_size = 8
            zero = 3
            micro_batch = 1
            seq_len = 2048
            recompute = "full"

        Good (memlint.toml):

            model = "llama3-8b"
            gpu = "H100-80GB"
            world_size = 8
            zero = 2
            micro_batch = 1
            seq_len = 2048
            recompute = "full"
    """

    code = "ML604"
    requires = ("estimate",)
    name = "zero3-when-zero2-fits"
    severity = Severity.INFO
    options = {"margin": (float, 0.10)}

    def check(self, ctx):
        estimate = ctx.estimate
        scenario = ctx.scenario
        par = scenario.parallelism
        if estimate is None or not estimate.stages:
            return
        if getattr(estimate, "rl", None):
            return  # an RL step's peak is often the rollout, which the trainer's sharding leaves
        if par.zero == 3:
            variant, label, key = with_parallelism(scenario, zero=2), "zero=2", "zero"
        elif par.fsdp == "full" and scenario.training.framework == "fsdp2":
            if not par.reshard_after_forward:
                return
            # FSDP2 has no SHARD_GRAD_OP strategy: keeping the unsharded parameters from forward
            # to backward (reshard_after_forward=False) is its ZeRO-2-like setting
            variant, label, key = (with_parallelism(scenario, reshard_after_forward=False),
                                   "reshard_after_forward = false", "reshard_after_forward")
        elif par.fsdp == "full":
            variant, label, key = (with_parallelism(scenario, fsdp="shard_grad_op"),
                                   'fsdp="shard_grad_op"', "fsdp")
        else:
            return
        result = try_estimate(variant, ctx.resolved)
        if result is None:
            return
        margin = float(ctx.options.get("margin", 0.10))
        capacity = estimate.capacity_bytes
        if result.peak_bytes > capacity * (1 - margin):
            return
        yield Finding(
            f"{label} would also fit (peak {size(ctx, result.peak_bytes)} of "
            f"{size(ctx, capacity)}, now {size(ctx, estimate.peak_bytes)}) and skip the weight "
            "all-gathers: about 1.5x less communication (3 versus 2 model sizes per step, "
            "Rajbhandari et al. 2020)",
            keys=(key,),
            data={"peak_bytes": result.peak_bytes})


_OFFLOADS = (
    # (parallelism field, value meaning off, what, throughput cost)
    ("offload_optimizer", "none", "optimizer offload",
     "3-5x lower throughput at scale (PCIe transfers and CPU Adam every step; ZeRO-Offload, "
     "Ren et al. 2021)"),
    ("offload_params", "none", "parameter offload",
     "5-20x lower throughput (PCIe transfers per layer, CPU latency; ZeRO-Infinity, "
     "Rajbhandari et al. 2021)"),
    ("offload_activations", False, "activation offload",
     "20-100x lower throughput, the last resort"),
)


class OffloadWhenItFits(Rule):
    """An offload to CPU/NVMe is on although the run fits on the GPU without it.

    What it checks:
        For each offload that is on (optimizer, parameters, activations without full
        recompute): it re-estimates with that offload off and reports when the run still fits
        with `margin` (default 0.10).

    Why it matters:
        Offload trades throughput for memory, by a lot (ZeRO-Offload, Ren et al. 2021;
        ZeRO-Infinity, Rajbhandari et al. 2021): optimizer offload costs 3-5x at scale (107 GB
        over PCIe per step for a 428B MoE at tp = 4, pp = 4),
        parameter offload 5-20x, activation offload 20-100x. Paying that for memory you do not
        need is the most expensive mistake in a config. Offloaded checkpoints (activation
        offload under full recompute: only each layer's input moves, overlapped with compute)
        cost about 1% and are not reported.

    How to fix:
        Turn the offload off (DeepSpeed "offload_optimizer": {"device": "none"}, FSDP
        cpu_offload false) and keep the memory on the GPU.

    Example:
        Bad (memlint.toml):

            model = "llama3-8b"
            gpu = "H100-80GB"
            world_size = 8
            zero = 3
            offload_optimizer = "cpu"
            seq_len = 2048
            recompute = "full"

        Good (memlint.toml):

            model = "llama3-8b"
            gpu = "H100-80GB"
            world_size = 8
            zero = 3
            seq_len = 2048
            recompute = "full"
    """

    code = "ML605"
    requires = ("estimate",)
    name = "offload-when-it-fits"
    severity = Severity.INFO
    options = {"margin": (float, 0.10)}

    def check(self, ctx):
        estimate = ctx.estimate
        scenario = ctx.scenario
        if estimate is None or not estimate.stages:
            return
        margin = float(ctx.options.get("margin", 0.10))
        capacity = estimate.capacity_bytes
        for field, off, what, cost in _OFFLOADS:
            value = getattr(scenario.parallelism, field)
            if value == off or value is False:
                continue
            if field == "offload_activations" and scenario.training.recompute == "full":
                # offloaded checkpoints (axolotl gradient_checkpointing: offload, LLaMA-Factory
                # use_unsloth_gc): one layer input per layer crosses PCIe, overlapped with the
                # compute; "only 1% slower" (unslothai/unsloth README), not worth a finding
                continue
            result = try_estimate(with_parallelism(scenario, **{field: off}), ctx.resolved)
            if result is None or result.peak_bytes > capacity * (1 - margin):
                continue
            yield Finding(
                f"{what} ({field}={value}) is on, but the run fits without it (peak "
                f"{size(ctx, result.peak_bytes)} of {size(ctx, capacity)}); it costs {cost}",
                keys=(field,),
                data={"peak_bytes": result.peak_bytes})


RULES = [MoeWithoutExpertParallel(), VisionEncoderOnFirstStage(), SequenceParallelOff(),
         Zero3WhenZero2Fits(), OffloadWhenItFits()]
