"""ML8xx: RL post-training. Which phase of an RL step breaks, and what the rollout engine does.

The rules read the RL estimate (memory/rl: every phase of the step per GPU, the rollout engine's
budget and KV pool, each length-dependent phase's floor). exceeds-gpu-memory (ML101) and
low-memory-headroom (ML102) leave RL estimates to these rules, which know that a rollout's budget
is fixed at start-up while an update's micro-batch grows with the generated lengths.
"""
from __future__ import annotations

from memlint.diagnostics import Severity
from memlint.ir import VERSION_DEPENDENT
from memlint.keys import version_numbers
from memlint.memory.rl import LENGTH_INDEPENDENT
from memlint.rules._support import size
from memlint.rules.base import Finding, Rule
from memlint.rules.memory import defaults_note, resting_defaults

_ROLLOUT_KEYS = ("engine.gpu_memory_utilization", "engine.sleep_level", "rl.actor_param_offload",
                 "rl.actor_optimizer_offload", "engine.tp", "world_size", "gpu")
_UPDATE_KEYS = ("micro_batch", "rl.logprob_micro_batch", "rl.update_tokens", "recompute",
                "rl.actor_param_offload", "rl.actor_optimizer_offload", "world_size", "gpu")


def rl_of(ctx):
    summary = getattr(ctx.estimate, "rl", None) if ctx.estimate is not None else None
    return summary


def _top(ctx, phase, count: int = 3) -> str:
    top = sorted(phase.terms, key=lambda t: (-t.bytes, t.name))[:count]
    return ", ".join(f"{t.name} {size(ctx, t.bytes)}" for t in top)


def _defaults(ctx, stage, phase) -> list:
    """The memlint defaults (a GPU no file named, an unread file, ...) the verdict on `phase`
    rests on (rules/memory.py resting_defaults, asked about the phase as a stage)."""
    # start-up: the term types load with the memory model, only when there is an estimate
    from memlint.memory.terms import StageEstimate

    as_stage = StageEstimate(stage=stage.stage, layers=stage.layers, phase=phase.name,
                             terms=phase.terms, phases=(phase,))
    found = resting_defaults(ctx, as_stage)
    # framework defaults whose version decides the verdict (adapters record them)
    found += [(key.split(":", 1)[1], setting.value) for key, setting in
              sorted(ctx.scenario.extra.items()) if key.startswith("rl.rests_on:")]
    return found


def _version_notes(ctx, phase, capacity: int) -> list:
    """What the adapters recorded as version-dependent (ir.VERSION_DEPENDENT) that decides the
    verdict on `phase`. `engine_awake`: a setting keeps the engine awake between phases only in
    some versions of the framework; it decides when the phase fits with the engine asleep (its
    `.awake` terms gone, memory/rl/phases.py)."""
    notes = []
    for key, setting in sorted(ctx.scenario.extra.items()):
        if not key.startswith(VERSION_DEPENDENT):
            continue
        what = key[len(VERSION_DEPENDENT):]
        if what == "engine_awake":
            awake = sum(t.bytes for t in phase.terms if t.name.endswith(".awake"))
            if not awake or phase.total - awake > capacity:
                continue
        notes.append(str(setting.value))
    return notes


def _worst(estimate, names=None):
    """(stage, phase) of the largest phase (among `names`), over every stage."""
    best = None
    for stage in estimate.stages:
        for phase in stage.phases:
            if names is not None and phase.name not in names:
                continue
            if best is None or phase.total > best[1].total:
                best = (stage, phase)
    return best


class RolloutExceedsGpuMemory(Rule):
    """The rollout phase of an RL step needs more memory than the GPU has.

    What it checks:
        The rollout phase on each GPU: the inference engine's budget (vLLM takes
        `gpu_memory_utilization` x the GPU's memory at start-up and keeps it; SGLang a fraction
        of what is free), its CUDA-graph pool, and whatever the trainer leaves on the GPU while
        the engine generates (the actor's and critic's parameters and optimizer states that are
        not offloaded between phases, a reference model not on the host), plus one CUDA
        context per process.

    Why it matters:
        It is the most common RL out-of-memory: the first rollout often passes (optimizer
        states do not exist before the first step) and the second dies. A 7B actor sharded over
        8 GPUs keeps 14 GiB of fp32 parameters and Adam moments per GPU; with the engine at
        gpu_memory_utilization 0.9 of 80 GiB that is 72 + 14 GiB on an 80 GiB card.

    How to fix:
        Lower the engine's share (verl `actor_rollout_ref.rollout.gpu_memory_utilization`, TRL
        `vllm_gpu_memory_utilization`, OpenRLHF `--vllm_gpu_memory_utilization`), offload the
        trainer's states between phases (verl `fsdp_config.param_offload` /
        `optimizer_offload`, OpenRLHF `--deepspeed_enable_sleep`), or shard the trainer over more
        GPUs.

    Example:
        Bad (memlint.toml):

            model = "qwen2.5-7b"
            gpu = "H100-80GB"
            world_size = 8
            framework = "fsdp2"
            fsdp = "full"
            seq_len = 2048
            engine.name = "vllm"
            engine.tp = 2
            engine.gpu_memory_utilization = 0.9
            engine.sleep_level = 2
            rl.framework = "verl"

        Good (memlint.toml):

            model = "qwen2.5-7b"
            gpu = "H100-80GB"
            world_size = 8
            framework = "fsdp2"
            fsdp = "full"
            seq_len = 2048
            engine.name = "vllm"
            engine.tp = 2
            engine.gpu_memory_utilization = 0.6
            engine.sleep_level = 2
            rl.framework = "verl"
    """

    code = "ML801"
    requires = ("rl",)
    name = "rollout-exceeds-gpu-memory"
    severity = Severity.ERROR

    def check(self, ctx):
        summary = rl_of(ctx)
        if summary is None or summary.engine is None:
            return
        found = _worst(ctx.estimate, ("rollout", "weight_sync"))
        if found is None:
            return
        stage, phase = found
        capacity = ctx.estimate.capacity_bytes
        if phase.total <= capacity:
            return
        engine = sum(t.bytes for t in phase.terms if t.name.startswith("engine."))
        trainer = phase.total - engine
        text = (f"the {phase.name} phase needs {size(ctx, phase.total)} of the "
                f"{size(ctx, capacity)} GPU: the engine {size(ctx, engine)} (its budget "
                f"{size(ctx, summary.engine.requested)} and CUDA graphs) beside "
                f"{size(ctx, trainer)} the trainer keeps; largest terms: {_top(ctx, phase)}; "
                f"lower the engine's gpu_memory_utilization to at most "
                f"{max(0.0, (capacity - trainer) / capacity) if capacity > 0 else 0.0:.2f} "
                "or offload the trainer's "
                "states")
        severity = None
        version = _version(ctx.scenario.engine.version)
        from_free = ctx.scenario.engine.name == "vllm" and _fits_from_free(
            phase, summary, capacity, trainer)
        if version is not None and version < (0, 7) and from_free:
            return  # that vLLM sized its budget from the memory the trainer left free
        found = _defaults(ctx, stage, phase)
        versioned = _version_notes(ctx, phase, capacity)
        if versioned:
            text += _versions_note(versioned)
            severity = Severity.WARNING
        if found:
            text += defaults_note(found)
            severity = Severity.WARNING
        elif version is None and from_free:
            # vLLM >= 0.7 takes its share of the total memory; verl's vLLM before 0.7 took it of
            # what the trainer left free (verl docs/perf/perf_tuning.rst, config.rst)
            text += ("; this holds for vLLM 0.7 and later, which take gpu_memory_utilization of "
                     "the total memory: older vLLM under verl took it of the memory the trainer "
                     "left free (set engine.version for a firm verdict)")
            severity = Severity.WARNING
        yield Finding(
            text, keys=_ROLLOUT_KEYS, severity=severity,
            data={"stage": stage.stage, "phase": phase.name, "total_bytes": phase.total,
                  "capacity_bytes": capacity, "engine_bytes": engine, "trainer_bytes": trainer})


def _versions_note(notes: list) -> str:
    return ("; it fits with the engine asleep, and that depends on the framework's version: "
            + "; ".join(notes))


def _version(text) -> "tuple | None":
    """(major, minor) of an engine version like "0.8.5", None when not given or not read."""
    numbers = version_numbers(text)
    return numbers[:2] if numbers is not None and len(numbers) >= 2 else None


def _fits_from_free(phase, summary, capacity: int, trainer: int) -> bool:
    """Would the phase fit with the engine's share taken of what the trainer leaves free?"""
    requested = summary.engine.requested
    share = requested / capacity if capacity else 0.0
    return phase.total - requested + int(share * max(0, capacity - trainer)) <= capacity


class EngineRefusesToStart(Rule):
    """The inference engine would refuse to start with these settings.

    What it checks:
        vLLM's own start-up checks (vllm-project/vllm v0.12.0): no memory left for the KV cache
        after the weights, the profile run's peak and the memory outside PyTorch
        (vllm/v1/core/kv_cache_utils.py:687), or a KV pool smaller than one request of
        `max_model_len` tokens (kv_cache_utils.py:708, "To serve at least one request with the
        models's max seq len").

    Why it matters:
        The engine raises ValueError while it starts; an RL job dies before its first step.
        verl v0.7.0 starts its vLLM servers with max_model_len = the model's
        max_position_embeddings (vllm_async_server.py), so a 32k-context model needs one 32k
        request's KV cache inside a budget as small as gpu_memory_utilization 0.2 leaves.

    How to fix:
        Raise gpu_memory_utilization, lower max_model_len, shard the engine (a larger
        tensor_model_parallel_size divides its weights and KV heads), or store the KV cache in
        fp8 (kv_cache_dtype).

    Example:
        Bad (memlint.toml):

            model = "llama3.1-8b"
            gpu = "H100-80GB"
            world_size = 1
            engine.name = "vllm"
            engine.gpu_memory_utilization = 0.2
            engine.max_model_len = 131072

        Good (memlint.toml):

            model = "llama3.1-8b"
            gpu = "H100-80GB"
            world_size = 1
            engine.name = "vllm"
            engine.gpu_memory_utilization = 0.5
            engine.max_model_len = 131072
    """

    code = "ML802"
    requires = ("rl",)
    name = "engine-refuses-to-start"
    severity = Severity.ERROR

    def check(self, ctx):
        summary = rl_of(ctx)
        if summary is None or summary.engine is None or summary.engine.refusal is None:
            return
        if ctx.scenario.engine.name != "vllm":
            return  # the refusals are vLLM's; other engines are not read at a commit
        yield Finding(summary.engine.refusal,
                      keys=("engine.gpu_memory_utilization", "engine.max_model_len",
                            "engine.tp", "engine.kv_cache_dtype"),
                      data={"kv_cache_bytes": summary.engine.kv_pool,
                            "kv_bytes_per_token": summary.engine.kv_bytes_per_token,
                            "max_model_len": summary.engine.max_model_len})


class RolloutKvPreemption(Rule):
    """A rollout's KV demand exceeds the engine's KV pool: requests are preempted, not killed.

    What it checks:
        The sequences one engine generates at once (the step's prompts x samples per prompt
        over the engines, capped at max_num_seqs) times their full length (prompt + response
        tokens), against the tokens the engine's KV pool holds.

    Why it matters:
        vLLM does not run out of memory here: when the pool is full it preempts requests and
        recomputes them later, so the rollout slows down (often 2x or more) without an error.
        The numbers say how far over the pool a full-length rollout would go.

    How to fix:
        Give the engine a larger share (gpu_memory_utilization) if the rollout phase fits, use
        a larger engine tensor parallel size, fp8 KV cache, or fewer concurrent sequences
        (max_num_seqs).

    Example:
        Bad (memlint.toml):

            model = "qwen2.5-7b"
            gpu = "H100-80GB"
            world_size = 8
            engine.name = "vllm"
            engine.gpu_memory_utilization = 0.3
            engine.max_num_seqs = 1024
            rl.prompt_len = 1024
            rl.response_len = 4096
            rl.prompts_per_step = 1024
            rl.samples_per_prompt = 8

        Good (memlint.toml):

            model = "qwen2.5-7b"
            gpu = "H100-80GB"
            world_size = 8
            engine.name = "vllm"
            engine.gpu_memory_utilization = 0.3
            engine.max_num_seqs = 16
            rl.prompt_len = 1024
            rl.response_len = 4096
            rl.prompts_per_step = 1024
            rl.samples_per_prompt = 8
    """

    code = "ML803"
    requires = ("rl",)
    name = "rollout-kv-preemption"
    severity = Severity.INFO

    def check(self, ctx):
        summary = rl_of(ctx)
        if summary is None or summary.engine is None or not summary.kv_demand_tokens:
            return
        pool = summary.engine.pool_tokens
        if summary.kv_demand_tokens <= pool or pool <= 0:
            return
        yield Finding(
            f"a rollout at full length needs {summary.kv_demand_tokens:,} KV tokens per engine "
            f"({summary.sequences_per_engine:,} sequences x {summary.sequence_len:,} tokens), "
            f"{summary.kv_demand_tokens / pool:.1f}x the {pool:,} its KV pool of "
            f"{size(ctx, summary.engine.kv_pool)} holds: vLLM preempts and recomputes requests "
            "(slower, not an out-of-memory)",
            keys=("engine.gpu_memory_utilization", "engine.max_num_seqs", "rl.response_len"),
            data={"kv_demand_tokens": summary.kv_demand_tokens, "pool_tokens": pool})


class RlPhaseExceedsGpuMemory(Rule):
    """A log-prob pass or an update of an RL step needs more memory than the GPU has.

    What it checks:
        Every phase besides the rollout: the actor's and reference's log-prob passes, the
        critic's values, the reward model's scores and the updates, each with what the other
        roles and the sleeping engine keep on the GPU meanwhile. When micro-batches hold only
        the real tokens (verl use_remove_padding, OpenRLHF --packing_samples, TRL
        padding_free), their size depends on the generated lengths: the phase is then
        estimated at full length, and if it fits at shorter sequences the finding is a warning
        that says up to which average sequence length it fits.

    Why it matters:
        The update holds the actor's parameters, gradients and optimizer states with the
        micro-batch's activations and its logits ([tokens, vocabulary], 2 to 10 bytes each):
        16 sequences of 2,048 tokens with a 152k vocabulary are 9 GiB of logits alone.

    How to fix:
        Smaller micro-batches (verl ppo_micro_batch_size_per_gpu /
        log_prob_micro_batch_size_per_gpu, or dynamic batching with a token budget), gradient
        checkpointing, entropy computed in chunks, or more GPUs to shard the states over.

    Example:
        Bad (memlint.toml):

            model = "qwen2.5-7b"
            gpu = "H100-80GB"
            world_size = 2
            framework = "fsdp2"
            fsdp = "full"
            micro_batch = 64
            seq_len = 2048
            recompute = "full"
            engine.name = "vllm"
            engine.gpu_memory_utilization = 0.4
            engine.sleep_level = 2
            rl.framework = "verl"
            rl.prompt_len = 1024
            rl.response_len = 1024
            rl.logprob_micro_batch = 16

        Good (memlint.toml):

            model = "qwen2.5-7b"
            gpu = "H100-80GB"
            world_size = 2
            framework = "fsdp2"
            fsdp = "full"
            micro_batch = 4
            seq_len = 2048
            recompute = "full"
            engine.name = "vllm"
            engine.gpu_memory_utilization = 0.4
            engine.sleep_level = 2
            rl.framework = "verl"
            rl.prompt_len = 1024
            rl.response_len = 1024
            rl.logprob_micro_batch = 4
    """

    code = "ML804"
    requires = ("rl",)
    name = "rl-phase-exceeds-gpu-memory"
    severity = Severity.ERROR

    def check(self, ctx):
        summary = rl_of(ctx)
        if summary is None:
            return
        estimate, capacity = ctx.estimate, ctx.estimate.capacity_bytes
        names = {p.name for s in estimate.stages for p in s.phases} - set(LENGTH_INDEPENDENT)
        found = _worst(estimate, names)
        if found is None or found[1].total <= capacity:
            return
        stage, phase = found
        over = sorted({p.name for s in estimate.stages for p in s.phases
                       if p.name in names and p.total > capacity})
        text = (f"the {phase.name} phase needs {size(ctx, phase.total)}, "
                f"{size(ctx, phase.total - capacity)} more than the {size(ctx, capacity)} of one "
                f"{estimate.gpu_name}; largest terms: {_top(ctx, phase)}"
                + (f" (phases over the GPU: {', '.join(over)})" if len(over) > 1 else ""))
        severity = None
        tokens = None
        found = _defaults(ctx, stage, phase)
        if found:
            text += defaults_note(found)
            severity = Severity.WARNING
        versioned = _version_notes(ctx, phase, capacity)
        if versioned:
            text += _versions_note(versioned)
            severity = Severity.WARNING
        if summary.padding_free:
            tokens = summary.break_even(stage.stage, phase, capacity)
            if tokens:
                severity = Severity.WARNING
                text += (f"; micro-batches hold only the real tokens, and it fits while sequences "
                         f"average at most about {tokens:,} tokens (prompt + response; "
                         f"{summary.sequence_len:,} at most): it runs out of memory on batches "
                         "of longer generations")
            elif tokens == 0:
                text += "; it does not fit even with the shortest sequences"
        yield Finding(text, keys=_UPDATE_KEYS, severity=severity,
                      data={"stage": stage.stage, "phase": phase.name,
                            "total_bytes": phase.total, "capacity_bytes": capacity,
                            "fits_up_to_tokens": tokens})


RULES = [RolloutExceedsGpuMemory(), EngineRefusesToStart(), RolloutKvPreemption(),
         RlPhaseExceedsGpuMemory()]
