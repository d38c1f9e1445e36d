"""ML1xx: memory. Does the worst pipeline stage fit the GPU, and what dominates it?

Every rule here reads the Estimate (terms and components per stage) and the Scenario; none does
memory maths of its own.

A verdict that rests on a value no file gave (memory/inputs.py: `Estimate.assumed` entries whose
source is memlint's own default) says so. The out-of-memory verdict is bounded (rules/bounds.py):
re-estimated with every such value at its most memory-friendly plausible setting at once (micro
batch 1, the states alone, full recompute, pure bf16, ZeRO-3 over the known GPUs, the largest
GPU), it is an error when it still does not fit there and otherwise a warning naming the values
that would flip it. A file the run refers to that was not found (a DeepSpeed config named by a
trainer YAML) cannot be bounded: its ZeRO stage or offload could flip the verdict. The other
verdicts (headroom, context parallelism) keep the per-key test of `resting_defaults`.
"""
from __future__ import annotations

import math

from memlint.diagnostics import Severity
from memlint.facts.coverage import DIRECTIONS, describe, set_not_modeled
from memlint.ir import UNREAD_REFERENCE
from memlint.rules._support import (component, largest_terms, size, stage_label, try_estimate,
                                    with_parallelism, with_training)
from memlint.rules.base import Finding, Rule
from memlint.rules.bounds import bound, bound_note, resting_on

# Keys to point at, by what dominates the stage: the setting a user would change first.
_KEYS_BY_COMPONENT = {
    "activations": ("micro_batch", "seq_len", "recompute", "cp", "tp", "pp"),
    "logits": ("micro_batch", "seq_len", "pp", "last_stage_layers"),
    "weights": ("tp", "pp", "zero", "fsdp", "ep", "offload_params"),
    "gradients": ("zero", "fsdp", "tp", "pp", "ep"),
    "optimizer": ("zero", "fsdp", "offload_optimizer", "tp", "pp", "ep"),
    "vision": ("pp", "first_stage_layers", "micro_batch"),
    "buffers": ("zero", "fsdp", "reshard_after_forward"),
    "runtime": ("gpu", "gpu_memory"),
}
_FALLBACK_KEYS = ("gpu", "gpu_memory", "model", "world_size")


def _catalog_largest() -> int:
    # start-up: the GPU catalog loads only when this rule needs it
    from memlint.hardware import CATALOG

    return max(gpu.capacity_bytes for gpu in CATALOG)


# Defaults that scale the sequence-proportional memory. Whether the states fit without it is
# asked of the model itself (one token, one sample): the allocator's slack and any buffer sized
# from the activations shrink with them, which subtracting the two components misses.
_SEQUENCE_KEYS = {"seq_len", "micro_batch", "recompute"}

# frameworks whose launch config states recompute (absent: the framework's own "none")
_RECOMPUTE_STATED = ("megatron", "torchtitan")


def resting_defaults(ctx, stage, oom: bool = True) -> list:
    """The memlint defaults a verdict on `stage` rests on: [(key, value)] (see module doc)."""
    estimate, scenario = ctx.estimate, ctx.scenario
    assumed = {a["key"]: a for a in getattr(estimate, "assumed", ()) or ()
               if str(a.get("source", "")).startswith(("default", "assumed"))}
    if not assumed:
        return unread_references(scenario)
    sequence = component(stage, "activations") + component(stage, "logits")
    states = sum(component(stage, name) for name in ("weights", "gradients", "optimizer"))
    # an HF trainer's sharding left to the launcher: over an unknown number of GPUs ZeRO-3 could
    # shrink the states toward nothing; over a known number, the model is asked (below)
    world_known = "world_size" not in assumed
    shardable = states if "sharding" in assumed and not world_known else 0
    states_fit = (stage.total_bytes - sequence - shardable <= estimate.capacity_bytes or not oom
                  or (_SEQUENCE_KEYS & set(assumed) and _fits_as(ctx, stage, seq_len=1,
                                                                 micro_batch=1)))
    par = scenario.parallelism
    out = []
    for key, entry in assumed.items():
        if key in ("seq_len", "micro_batch"):
            rests = states_fit
        elif key == "recompute":
            rests = states_fit and scenario.training.framework not in _RECOMPUTE_STATED
        elif key == "gpu":
            rests = not oom or stage.total_bytes - shardable <= _catalog_largest()
        elif key == "world_size":
            rests = par.zero > 0 or par.fsdp != "none" or par.ep > 1
        elif key == "sharding":
            # sharding shrinks the states, never the activations, logits or runtime
            if not oom or not world_known:
                rests = not oom or stage.total_bytes - states <= estimate.capacity_bytes
            else:
                rests = _fits_as_sharded(ctx, stage)
        else:  # precision: would the lightest one (bf16 everything, no master) fit?
            rests = not oom or _fits_as(ctx, stage, precision="pure-bf16")
        if rests:
            out.append((key, entry["value"]))
    return out + unread_references(scenario)


def unread_references(scenario) -> list:
    """[(UNREAD_REFERENCE, path)] for each file the run refers to that could not be read: its
    settings (a ZeRO stage, FSDP sharding, offload) may be what decides the verdict."""
    return sorted((UNREAD_REFERENCE, setting.value) for key, setting in scenario.extra.items()
                  if key.startswith(UNREAD_REFERENCE))


def _fits_as_sharded(ctx, stage) -> bool:
    """Would ZeRO-3 over the run's known GPUs make the stage fit? (No with one GPU.)"""
    if ctx.resolved is not None and ctx.resolved.topology is not None and \
            ctx.resolved.topology.dp <= 1:
        return False
    variant = try_estimate(with_parallelism(ctx.scenario, zero=3), ctx.resolved)
    if variant is None:
        return True  # cannot tell: the default may matter
    other = [s for s in variant.stages if s.stage == stage.stage]
    return bool(other) and other[0].total_bytes <= variant.capacity_bytes


def _fits_as(ctx, stage, **training) -> bool:
    variant = try_estimate(with_training(ctx.scenario, **training), ctx.resolved)
    if variant is None:
        return True  # cannot tell: the default may matter
    other = [s for s in variant.stages if s.stage == stage.stage]
    return bool(other) and other[0].total_bytes <= variant.capacity_bytes


# the scenario key that gives a verdict input (memory/inputs.py names the sharding as one input)
_SET_KEY = {"sharding": "zero"}


def defaults_note(found: list) -> str:
    defaults = [(key, value) for key, value in found if key != UNREAD_REFERENCE]
    unread = [value for key, value in found if key == UNREAD_REFERENCE]
    note = ""
    if defaults:
        listed = ", ".join(f"{key} {value}" for key, value in defaults)
        key = _SET_KEY.get(defaults[0][0], defaults[0][0])
        note += (f"; this rests on memlint defaults no file gave ({listed}): give the real values "
                 f"(e.g. --set {key}=...) for a firm verdict")
    if unread:
        listed = ", ".join(repr(path) for path in unread)
        note += (f"; the run refers to {listed}, which was not found, so its settings (a ZeRO "
                 "stage, sharding, offload) are not in this estimate: check the file together "
                 "with it for a firm verdict")
    return note


def keys_for(stage) -> tuple:
    parts = stage.components()
    biggest = max(parts, key=lambda name: parts[name]) if parts else "weights"
    return _KEYS_BY_COMPONENT.get(biggest, ()) + _FALLBACK_KEYS


class ExceedsGpuMemory(Rule):
    """The worst pipeline stage needs more memory than one GPU has.

    What it checks:
        The peak of every pipeline stage (the most it holds at once: forward end, backward or
        optimizer step) against the GPU's capacity. The message names the worst stage, its
        total, the capacity and its three largest terms.

    Why it matters:
        The job dies with CUDA out-of-memory at the first step, after waiting in the queue. With
        mixed-precision Adam each parameter costs 16 bytes (2 weights + 2 gradients + 12 fp32
        master and moments): a 70B model needs 1.12 TB of states before one activation, 14
        H100-80GB GPUs' worth, so it cannot train unsharded on 8 of them.

    How to fix:
        Shard what dominates: weights and optimizer with ZeRO / FSDP (zero = 3, fsdp = "full"),
        tensor or pipeline parallelism (tp, pp); activations with recompute = "full", a smaller
        micro_batch or context parallelism (cp). `memlint estimate --explain` shows each term.

    Example:
        Bad (memlint.toml):

            model = "llama3-70b"
            gpu = "H100-80GB"
            world_size = 8
            micro_batch = 1
            seq_len = 4096

        Good (memlint.toml):

            model = "llama3-70b"
            gpu = "H100-80GB"
            world_size = 32
            micro_batch = 1
            seq_len = 4096
            fsdp = "full"
            recompute = "full"
    """

    code = "ML101"
    requires = ("estimate",)
    name = "exceeds-gpu-memory"
    severity = Severity.ERROR

    def check(self, ctx):
        estimate = ctx.estimate
        if estimate is None or not estimate.stages or getattr(estimate, "rl", None):
            return  # an RL step: rules/rl.py reports each phase
        capacity = estimate.capacity_bytes
        stage = estimate.peak_stage
        total = stage.total_bytes
        if total <= capacity:
            return
        over = [s for s in estimate.stages if s.total_bytes > capacity]
        terms = ", ".join(f"{t.name} {size(ctx, t.bytes)}" for t in largest_terms(stage))
        count = (f" ({len(over)} of {len(estimate.stages)} stages exceed it)"
                 if len(estimate.stages) > 1 else "")
        unmodeled = flipping_settings(ctx, oom=True)
        unread = unread_references(ctx.scenario)
        # the verdict at the friendliest value of every default (rules/bounds.py): an error only
        # when it still holds there
        limits = bound(ctx, stage, ((None, "a file the run refers to was not found"),) if unread
                       else ())
        defaults = resting_on(ctx, limits) + unread if limits.could_fit else []
        soft = bool(defaults) or any(_could_fit_without(f.entry, stage, capacity)
                                     for f in unmodeled)
        yield Finding(
            f"{stage_label(estimate, stage)} needs {size(ctx, total)} at its {stage.phase} peak, "
            f"{size(ctx, total - capacity)} more than the {size(ctx, capacity)} of one "
            f"{estimate.gpu_name}{count}; largest terms: {terms}"
            + (defaults_note(defaults) if defaults else "")
            + (bound_note(ctx, limits, size) if defaults or limits.firm else "")
            + not_modeled_note(unmodeled),
            keys=keys_for(stage),
            severity=Severity.WARNING if soft else None,
            data={"stage": stage.stage, "total_bytes": total, "capacity_bytes": capacity,
                  "excess_bytes": total - capacity,
                  "rests_on_defaults": [key for key, _ in defaults if key != UNREAD_REFERENCE],
                  "rests_on_unread_files": [path for key, path in defaults
                                            if key == UNREAD_REFERENCE],
                  "not_modeled": [f.entry.key for f in unmodeled]})


_ORDER_NOTE = (" (this run's allocator fragmentation is not modeled, reserved = allocated: it "
               "comes out of this margin)")


def _order_not_modeled(estimate) -> bool:
    """The estimate counts no idle cached block for this run (memory/allocator.py
    allocator_assumed: Megatron's and DeepSpeed's allocation order)."""
    return any(a.get("key") == "runtime.allocator" for a in getattr(estimate, "assumed", ()) or ())


class LowMemoryHeadroom(Rule):
    """The worst stage fits, but with less free memory than the margin.

    What it checks:
        Whether the peak stage leaves at least `margin` (default 0.10, i.e. 10%) of the GPU
        free beside what the caching allocator cannot give back (its cached idle blocks,
        `runtime.allocator.*`, are released on an out-of-memory retry). It stays silent when the
        stage does not fit at all (exceeds-gpu-memory reports that).

    Why it matters:
        An estimate is not a measurement: allocator fragmentation commonly takes 5-10% of a
        GPU, NCCL grows its buffers with more process groups, and the first step or a longer
        batch peaks higher than a steady step. A run planned at 76 of 80 GiB often dies at
        step 1 or hours later on an unusual batch.

    How to fix:
        Free a little memory (a smaller micro_batch, selective recompute, one more ZeRO stage)
        or accept the risk by raising the threshold: `[tool.memlint.options.low-memory-headroom]
        margin = 0.05`.

    Example:
        Bad (memlint.toml):

            model = "llama3-8b"
            gpu = "H100-80GB"
            world_size = 8
            fsdp = "full"
            micro_batch = 2
            seq_len = 5632
            recompute = "selective"

        Good (memlint.toml):

            model = "llama3-8b"
            gpu = "H100-80GB"
            world_size = 8
            fsdp = "full"
            micro_batch = 1
            seq_len = 4096
            recompute = "full"
    """

    code = "ML102"
    requires = ("estimate",)
    name = "low-memory-headroom"
    severity = Severity.WARNING
    options = {"margin": (float, 0.10)}

    def check(self, ctx):
        estimate = ctx.estimate
        if estimate is None or not estimate.stages or getattr(estimate, "rl", None):
            return  # RL and serving estimates: the ML8xx rules (an engine fills its share by design)
        margin = float(ctx.options.get("margin", 0.10))
        capacity = estimate.capacity_bytes
        stage = estimate.peak_stage
        total = stage.total_bytes
        # the allocator's cached idle blocks (memory/allocator.py) are given back on an
        # out-of-memory retry: the margin is kept beside what it cannot give back
        held = stage.held_bytes
        if total > capacity or held <= capacity * (1 - margin):
            return
        free = capacity - total
        defaults = resting_defaults(ctx, stage, oom=False)
        yield Finding(
            f"{stage_label(estimate, stage)} peaks at {size(ctx, total)} of "
            f"{size(ctx, capacity)} ({total / capacity:.0%}), leaving {size(ctx, free)}"
            + (f" ({size(ctx, held)} without the allocator's cached blocks)" if held < total
               else "")
            + f": under the {margin:.0%} margin kept for fragmentation and spikes"
            + (_ORDER_NOTE if _order_not_modeled(estimate) else "")
            + (defaults_note(defaults) if defaults else "")
            + not_modeled_note(flipping_settings(ctx, oom=False)),
            keys=keys_for(stage),
            data={"stage": stage.stage, "total_bytes": total, "capacity_bytes": capacity,
                  "free_bytes": free, "held_bytes": held, "margin": margin})


def next_power_of_two(value: float) -> int:
    return 1 if value <= 1 else 2 ** math.ceil(math.log2(value))


class ContextParallelNeeded(Rule):
    """At this sequence length the activations do not fit next to the model states without cp.

    What it checks:
        For each stage, the memory left for activations (capacity minus everything else the
        stage holds) against its sequence-proportional memory: activations, and on the last
        stage the logits, which cp splits too. When they do not fit, it suggests the smallest
        power-of-two context-parallel size by the rule cp >= activations / available (ring
        attention splits them evenly over cp ranks, Liu et al. 2023), with activations counted
        at cp = 1. Error when the stage does not fit at all;
        warning when it fits but within `margin` of the capacity. Only at long sequences
        (seq_len >= `min_seq_len`, default 8192), where cp is the right tool. In an RL step
        the advice is a warning: whether the update fits is rl-phase-exceeds-gpu-memory's
        verdict (ML804), which knows when a micro-batch grows with the generated lengths.

    Why it matters:
        Activations grow linearly with the sequence: 34·L·B·T·d bytes with FlashAttention. For
        a 428B MoE at T = 128K, 15 layers per stage, d = 6144, that is 411 GB per
        micro-batch against 53 GB left after the states: cp >= 7.7, so cp = 8.

    How to fix:
        Set cp to the suggested size (it must divide the data-parallel GPUs and seq_len / 2cp
        must be whole for load-balanced ring attention); full recompute first, when it is off,
        often helps more (34 -> 2 bytes per B·T·d per layer).

    Example:
        Bad (memlint.toml):

            model = "llama3-8b"
            gpu = "H100-80GB"
            world_size = 8
            fsdp = "full"
            micro_batch = 1
            seq_len = 131072
            recompute = "full"

        Good (memlint.toml):

            model = "llama3-8b"
            gpu = "H100-80GB"
            world_size = 8
            fsdp = "full"
            micro_batch = 1
            seq_len = 131072
            recompute = "full"
            cp = 8
    """

    code = "ML103"
    requires = ("estimate",)
    name = "context-parallel-needed"
    severity = Severity.WARNING
    options = {"margin": (float, 0.10), "min_seq_len": (int, 8192)}

    def check(self, ctx):
        estimate = ctx.estimate
        if estimate is None or not estimate.stages:
            return
        if ctx.scenario.training.seq_len < int(ctx.options.get("min_seq_len", 8192)):
            return
        margin = float(ctx.options.get("margin", 0.10))
        capacity = estimate.capacity_bytes
        cp = ctx.scenario.parallelism.cp
        worst = None
        for stage in estimate.stages:
            activations = component(stage, "activations") + component(stage, "logits")
            available = capacity - (stage.total_bytes - activations)
            if activations <= 0 or available <= 0:
                continue  # nothing to split, or the states alone do not fit (cp cannot help)
            ratio = activations * cp / available
            if activations > available * (1 - margin) and (worst is None or ratio > worst[0]):
                worst = (ratio, stage, activations, available)
        if worst is None:
            return
        ratio, stage, activations, available = worst
        suggested = max(next_power_of_two(ratio), cp * 2)
        oom = activations > available
        recompute = ("; full recompute (recompute = \"full\") is the cheaper first step"
                     if ctx.scenario.training.recompute != "full" else "")
        defaults = resting_defaults(ctx, stage, oom=oom)
        # An RL step's out-of-memory verdict is ML804's, which knows when an update's
        # micro-batch grows with the generated lengths: here only the cp advice, as a warning.
        judged_elsewhere = getattr(estimate, "rl", None) is not None
        yield Finding(
            f"{stage_label(estimate, stage)}: activations (with logits) at seq_len "
            f"{ctx.scenario.training.seq_len} take {size(ctx, activations)} with cp={cp}, but "
            f"only {size(ctx, available)} is left beside the model states; cp >= "
            f"{size(ctx, activations * cp)} / {size(ctx, available)} = {ratio:.1f}, so "
            f"cp={suggested}{recompute}" + (defaults_note(defaults) if defaults else ""),
            keys=("seq_len", "cp", "micro_batch", "recompute"),
            severity=Severity.ERROR if oom and not defaults and not judged_elsewhere else None,
            data={"stage": stage.stage, "activation_bytes": activations,
                  "available_bytes": available, "suggested_cp": suggested})


class AttentionScoresMaterialized(Rule):
    """Attention scores (T x T per head) are kept for backward: no fused attention at long seq.

    What it checks:
        Whether any stage holds the term `activations.attention_scores` (eager attention, or
        a kernel that materializes softmax(QK^T)) at seq_len >= `min_seq_len` (default 2048),
        and how many bytes it takes. When the estimate folds the scores into its activation
        terms, the bytes are what re-estimating with flash attention saves.

    Why it matters:
        Scores grow with the square of the sequence: 5·H·T/d bytes per B·T·d per layer beside
        the 34 of everything else (Korthikanti et al. 2022, Table 2). At T = 4096 with 32 heads
        and d = 4096 that is 160, nearly 6x the rest; FlashAttention takes C_act from about 354
        to 34.

    How to fix:
        Use a fused kernel: attention = "flash" (Megatron --use-flash-attn, HF
        attn_implementation="flash_attention_2") or "sdpa".

    Example:
        Bad (memlint.toml):

            model = "llama3-8b"
            gpu = "H100-80GB"
            world_size = 8
            fsdp = "full"
            seq_len = 4096
            attention = "eager"

        Good (memlint.toml):

            model = "llama3-8b"
            gpu = "H100-80GB"
            world_size = 8
            fsdp = "full"
            seq_len = 4096
            attention = "flash"
    """

    code = "ML104"
    requires = ("estimate",)
    name = "attention-scores-materialized"
    severity = Severity.WARNING
    options = {"min_seq_len": (int, 2048)}

    def check(self, ctx):
        estimate = ctx.estimate
        if estimate is None:
            return
        seq_len = ctx.scenario.training.seq_len
        if seq_len < int(ctx.options.get("min_seq_len", 2048)):
            return
        found = []
        for stage in estimate.stages:
            term = stage.term("activations.attention_scores")
            if term is not None and term.bytes > 0:
                found.append((term.bytes, stage))
        if not found and ctx.scenario.training.attention == "eager":
            found = self._by_reestimate(ctx)
        if not found:
            return
        scores, stage = max(found, key=lambda item: item[0])
        share = scores / max(1, stage.total_bytes)
        yield Finding(
            f"attention scores are materialized ({ctx.scenario.training.attention} attention): "
            f"{size(ctx, scores)} on {stage_label(estimate, stage)} at seq_len {seq_len}, "
            f"{share:.0%} of its peak; flash or sdpa attention does not keep them",
            keys=("attention", "seq_len"),
            data={"stage": stage.stage, "bytes": scores})

    @staticmethod
    def _by_reestimate(ctx) -> list:
        """Without a separate scores term: the activations flash attention would save."""
        fused = try_estimate(with_training(ctx.scenario, attention="flash"), ctx.resolved)
        if fused is None:
            return []
        saved = {s.stage: component(s, "activations") for s in fused.stages}
        out = []
        for stage in ctx.estimate.stages:
            delta = component(stage, "activations") - saved.get(stage.stage, 0)
            if delta > 0:
                out.append((delta, stage))
        return out


class LogitsMemoryDominates(Rule):
    """The last stage's logits and loss buffers are a large share of its memory.

    What it checks:
        The `logits` component of the last pipeline stage (logits in the compute dtype, their
        fp32 upcast for the loss, and its gradient) against `share` (default 0.25) of the
        stage's total.

    Why it matters:
        Logits are B·T·V values, several copies: at micro_batch 4, seq_len 8192 and a 128K
        vocabulary one bf16 copy is 8.4 GB and the fp32 upcast 16.8 GB, more than the weights
        of an 8B model sharded over 8 GPUs.

    How to fix:
        Use a fused or chunked cross-entropy that never materializes the full fp32 logits
        (Megatron's fused cross entropy, Liger kernel, Cut Cross-Entropy), a smaller micro
        batch, or fewer layers on the last stage (last_stage_layers).

    Example:
        Bad (memlint.toml):

            model = "llama3-8b"
            gpu = "H100-80GB"
            world_size = 8
            fsdp = "full"
            recompute = "full"
            micro_batch = 8
            seq_len = 8192

        Good (memlint.toml):

            model = "llama3-8b"
            gpu = "H100-80GB"
            world_size = 8
            fsdp = "full"
            recompute = "full"
            micro_batch = 1
            seq_len = 2048
    """

    code = "ML105"
    requires = ("estimate",)
    name = "logits-memory-dominates"
    severity = Severity.WARNING
    options = {"share": (float, 0.25)}

    def check(self, ctx):
        estimate = ctx.estimate
        if estimate is None or not estimate.stages:
            return
        stage = max(estimate.stages, key=lambda s: s.stage)
        logits = component(stage, "logits")
        total = stage.total_bytes
        limit = float(ctx.options.get("share", 0.25))
        if total <= 0 or logits <= total * limit:
            return
        yield Finding(
            f"logits and loss buffers take {size(ctx, logits)} of {size(ctx, total)} "
            f"({logits / total:.0%}) on {stage_label(estimate, stage)}, over the {limit:.0%} "
            "share; a fused or chunked cross-entropy avoids most of it",
            keys=("micro_batch", "seq_len", "model.vocab_size", "last_stage_layers"),
            data={"stage": stage.stage, "logits_bytes": logits, "total_bytes": total})


# Families whose position embedding is a learned table indexed by position (transformers:
# GPT2Model.wpe = nn.Embedding(n_positions, d); BertEmbeddings.position_embeddings =
# nn.Embedding(max_position_embeddings, d) with a position_ids buffer of that length).
_LEARNED_TABLE_KEYS = {"bert": "max_position_embeddings"}


def _positions(config, resolved) -> tuple:
    """(kind, limit, key): 'learned' with the table's rows, 'rope' with the trained length, or
    (None, None, None) when the config names neither. `resolved`: the run's context, whose
    architecture is that of `config`."""
    model_type = str(config.get("model_type", "") or "")
    key = _LEARNED_TABLE_KEYS.get(model_type)
    if key is not None and isinstance(config.get(key), int):
        return "learned", config[key], key
    arch = resolved.architecture
    if arch is None:   # an unreadable config is reported by the adapters
        return None, None, None
    if arch.learned_positions:
        key = "n_positions" if "n_positions" in config else "max_position_embeddings"
        return "learned", arch.learned_positions, key
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    limit = text.get("max_position_embeddings")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return "rope", limit, "max_position_embeddings"
    return None, None, None


class SeqLenBeyondPositions(Rule):
    """The sequence is longer than the model has positions for.

    What it checks:
        seq_len against the model config. A learned absolute position table (GPT-2
        `n_positions`, BERT `max_position_embeddings`) has one row per position: a longer
        sequence indexes past it and the first forward fails (error; a warning when seq_len is
        memlint's default, which no file gave). Rotary models (Llama, Qwen, Mistral, ...) run at
        any length, but past `max_position_embeddings` they are beyond their trained length
        (info).

    Why it matters:
        GPT-2's position table has 1,024 rows: at seq_len 2048 `wpe(position_ids)` raises an
        index error (a device-side assert on CUDA) in the first step, after the job waited in the
        queue; BERT's 512-row table fails the same way at 513 tokens. A RoPE model trained at
        8,192 tokens and run at 32,768 trains, but on positions it never saw unless its
        rope_scaling extends them.

    How to fix:
        Lower seq_len to the table's size, or use a model whose positions cover it; for RoPE
        models set rope_scaling (YaRN, linear) in the config, or accept the extrapolation.

    Example:
        Bad (memlint.toml):

            seq_len = 2048
            world_size = 1
            "model.model_type" = "gpt2"
            "model.n_embd" = 768
            "model.n_layer" = 12
            "model.n_head" = 12
            "model.vocab_size" = 50257
            "model.n_positions" = 1024

        Good (memlint.toml):

            seq_len = 1024
            world_size = 1
            "model.model_type" = "gpt2"
            "model.n_embd" = 768
            "model.n_layer" = 12
            "model.n_head" = 12
            "model.vocab_size" = 50257
            "model.n_positions" = 1024
    """

    code = "ML106"
    requires = ("model",)
    name = "seq-len-beyond-positions"
    severity = Severity.ERROR

    def check(self, ctx):
        scenario = ctx.scenario
        if scenario is None or scenario.model is None or not scenario.model.config:
            return
        kind, limit, key = _positions(scenario.model.config, ctx.resolved)
        seq_len = scenario.training.seq_len
        if kind is None or seq_len <= limit:
            return
        given = scenario.is_set("seq_len")
        if kind == "learned":
            default = "" if given else (" (memlint's default, which no file gave: give the real "
                                        "seq_len)")
            yield Finding(
                f"seq_len {seq_len}{default} exceeds the model's {limit} learned positions "
                f"({key}): the position embedding has no row past {limit - 1}, so the first "
                "forward fails",
                keys=("seq_len", f"model.{key}", "model"),
                severity=None if given else Severity.WARNING,
                data={"seq_len": seq_len, "positions": limit, "kind": kind})
        elif given:
            yield Finding(
                f"seq_len {seq_len} is beyond the model's trained length {limit} ({key}); "
                "rotary positions extrapolate (check rope_scaling)",
                keys=("seq_len", f"model.{key}", "model"), severity=Severity.INFO,
                data={"seq_len": seq_len, "positions": limit, "kind": kind})


class NotModeled(Rule):
    """A setting that changes memory in a way the estimate does not count.

    What it checks:
        Every flag or key the run sets whose memory class is *not modeled* in memlint's coverage
        tables (memlint/facts/coverage/<framework>.json): CUDA graphs, tensor-parallel
        communication overlap buffers, fine-grained activation offloading, more than one
        distributed-optimizer instance, a router in fp32, and the rest listed there. The message
        names the setting, what the framework does, which way the estimate errs (too low, too
        high, either way) and, where the framework's code gives one, a bound. Only runs that
        have an estimate are checked; a value that changes nothing (the framework's default,
        `off` in the table) is silent, and so is a setting that changes host RAM only (an
        asynchronous checkpoint's staging copy) unless the run's node or host memory is given.

    Why it matters:
        An estimate is only as good as what it counts. On Megatron-LM's CI runs memlint is
        within 2-3% where it models every setting, but fine-grained activation offloading made
        it 81% too high, `--num-distributed-optimizer-instances 2` 21% too low, Transformer
        Engine CUDA graphs 18% too low and FP8 with `--tp-comm-overlap` 15% too low, with no
        sign that those numbers were any worse than the others.

    How to fix:
        Nothing is wrong with the config: treat the estimate as the bound the message gives,
        keep more headroom in the direction it names, or measure one step. Silence it for a run
        with `--ignore not-modeled` or `# memlint: disable=ML107` on the flag's line.

    Example:
        Bad (args.txt):

            # launcher: torchrun --nproc_per_node 8
            --tensor-model-parallel-size 2
            --sequence-parallel
            --tp-comm-overlap
            --num-layers 12
            --hidden-size 1024
            --num-attention-heads 16
            --seq-length 2048
            --max-position-embeddings 2048
            --micro-batch-size 2
            --bf16

        Good (args.txt):

            # launcher: torchrun --nproc_per_node 8
            --tensor-model-parallel-size 2
            --sequence-parallel
            --num-layers 12
            --hidden-size 1024
            --num-attention-heads 16
            --seq-length 2048
            --max-position-embeddings 2048
            --micro-batch-size 2
            --bf16
    """

    code = "ML107"
    requires = ("estimate",)
    name = "not-modeled"
    severity = Severity.WARNING

    def check(self, ctx):
        estimate = ctx.estimate
        if estimate is None or not estimate.stages or ctx.scenario is None:
            return
        hardware = ctx.scenario.hardware
        host_known = hardware.host_memory is not None or hardware.node is not None
        for found in set_not_modeled(ctx.scenario.extra):
            entry = found.entry
            if entry.scope == "host" and not host_known:
                continue
            shown = "" if found.value is True else " " + _shown(found.value)
            bound = f"; bound: {entry.bound}" if entry.bound else ""
            yield Finding(
                f"{entry.key}{shown} is not modeled: {entry.effect}. The estimate is "
                f"{DIRECTIONS[entry.direction]}{bound}",
                keys=(found.extra_key,),
                data={"setting": entry.key, "direction": entry.direction,
                      "framework": found.framework, "bound": entry.bound})


def _shown(value) -> str:
    text = " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _could_fit_without(entry, stage, capacity: int) -> bool:
    """Whether a not-modeled setting could make an OOM stage fit: one that makes the estimate
    too high, and, when it can at most take away one component (its `at_most`), only if the
    stage fits without that component."""
    if entry.direction != "high":
        return False
    if entry.at_most is None:
        return True
    return stage.total_bytes - stage.components().get(entry.at_most, 0) <= capacity


def flipping_settings(ctx, oom: bool) -> list:
    """The set, not-modeled settings that could flip a memory verdict: for an OOM those that may
    make the estimate too high (the run may fit), for a fit those that may make it too low; both
    include the ones that err either way. Only a setting that makes an OOM estimate too high
    turns the OOM into a warning."""
    if ctx.scenario is None:
        return []
    could = ("high", "either") if oom else ("low", "either")
    return [found for found in set_not_modeled(ctx.scenario.extra)
            if found.entry.direction in could and found.entry.scope == "gpu"]


def not_modeled_note(found: list) -> str:
    if not found:
        return ""
    listed = ", ".join(describe(f) for f in found)
    return (f"; settings memlint does not model could change this verdict: {listed} "
            "(see not-modeled, ML107)")


RULES = [ExceedsGpuMemory(), LowMemoryHeadroom(), ContextParallelNeeded(),
         AttentionScoresMaterialized(), LogitsMemoryDominates(), SeqLenBeyondPositions(),
         NotModeled()]
