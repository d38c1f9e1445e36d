"""DeepSpeed launch-time checks (family ML3xx).

Each rule repeats a check DeepSpeed makes only once the job has started (DeepSpeedConfig's
`_batch_assertion`, the fp16/bf16 assert, the ZeRO optimizer constructors), or points at an option
DeepSpeed silently ignores. They read the Scenario and the `deepspeed.*` / `flags.*` extras that
`memlint.adapters.deepspeed` records; `mixed-precision-conflict` is generic over `flags.*`.

Examples in the docstrings follow one convention, which tests/rules/test_deepspeed_rules.py runs:
a `Bad` and a `Good` block of DeepSpeed JSON, each optionally followed by `--set key=value` lines
for what the config alone does not say (the world size, say). The bad block must fire the rule and
the good one must not.
"""
from __future__ import annotations

from memlint.diagnostics import Severity
from memlint.facts.deepspeed import AUTO_DROPPED_BLOCKS, STAGE3_ONLY
from memlint.rules.base import Context, Finding, Rule

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Iterable, Optional

_TRIPLE = (("global_batch", "train_batch_size"),
           ("micro_batch", "train_micro_batch_size_per_gpu"),
           ("grad_accum", "gradient_accumulation_steps"))

# Formats whose tools fill DeepSpeed's "auto" values (transformers' HfTrainerDeepSpeedConfig,
# accelerate's DeepSpeedPlugin, and trainers built on them).
HF_FORMATS = ("hf", "hf_trainer", "hf_args", "accelerate", "axolotl", "trl", "llama_factory",
              "llamafactory")


def _parsed(ctx: Context) -> bool:
    """A DeepSpeed config was read (a file that failed to parse leaves nothing to check)."""
    return ctx.has_extra("deepspeed.config")


def _and(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _data_parallel(ctx: Context) -> Optional[int]:
    """DeepSpeed's `world_size` in the batch check: the data-parallel size (mpu's, or the world
    divided by the Ulysses sequence-parallel size). None when the scenario does not know it."""
    scenario = ctx.scenario
    par = scenario.parallelism
    if par.world_size is None and par.dp is None:
        return None

    dp = ctx.resolved.topology.dp
    sp = ctx.extra("deepspeed.sequence_parallel_size")
    if par.dp is None and isinstance(sp, int) and not isinstance(sp, bool) and sp > 1:
        dp = max(1, dp // sp)
    return dp


class _Triple:
    """The batch triple as DeepSpeed will see it: each value an int, "auto" or None (absent)."""

    def __init__(self, ctx: Context):
        self.values: dict = {}
        self.keys: dict = {}
        for scenario_key, ds_name in _TRIPLE:
            if ctx.scenario.is_set(scenario_key):
                self.values[ds_name] = getattr(ctx.scenario.training, scenario_key)
                self.keys[ds_name] = scenario_key
            elif ctx.has_extra(f"deepspeed.{ds_name}"):
                raw = ctx.extra(f"deepspeed.{ds_name}")
                self.values[ds_name] = raw if raw == "auto" or _whole(raw) else "invalid"
                self.keys[ds_name] = f"deepspeed.{ds_name}"
            else:
                self.values[ds_name] = None
        self.dp = _data_parallel(ctx)

    def get(self, name: str):
        return self.values[name]

    def known(self, name: str) -> bool:
        return _whole(self.values[name])

    def where(self, *names: str) -> tuple:
        return tuple(self.keys[n] for n in names if n in self.keys)

    def derive(self) -> tuple:
        """(derived values, failure message or None), following `_set_batch_related_parameters`.
        Needs the data-parallel size unless train_batch_size is the missing one."""
        gb, mb, ga = (self.get(n) if self.known(n) else None for _, n in _TRIPLE)
        if any(self.get(n) in ("auto", "invalid") for _, n in _TRIPLE):
            return {}, None  # filled by the HF Trainer, or already a schema error
        dp = self.dp
        if gb is not None and mb is not None and ga is not None:
            return {}, None
        if dp is None:
            return {}, None
        derived: dict = {}
        if gb is not None and mb is not None:
            ga = gb // mb // dp
            derived["gradient_accumulation_steps"] = ga
        elif gb is not None and ga is not None:
            mb = gb // dp // ga
            derived["train_micro_batch_size_per_gpu"] = mb
        elif mb is not None and ga is not None:
            gb = mb * ga * dp
            derived["train_batch_size"] = gb
        elif gb is not None:
            ga, mb = 1, gb // dp
            derived.update(gradient_accumulation_steps=1, train_micro_batch_size_per_gpu=mb)
        elif mb is not None:
            ga, gb = 1, mb * dp
            derived.update(train_batch_size=gb, gradient_accumulation_steps=1)
        else:
            return {}, None
        if mb <= 0 or ga <= 0:
            return derived, (f"DeepSpeed derives {_show(derived)} with data-parallel size {dp}, "
                             "and its check that both are > 0 fails at launch")
        if gb != mb * ga * dp:
            return derived, (f"DeepSpeed derives {_show(derived)} with data-parallel size {dp} "
                             f"(integer division), then train_batch_size {gb} != {mb} x {ga} x "
                             f"{dp} = {mb * ga * dp} and its batch assertion fails at launch")
        return derived, None


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _show(derived: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in derived.items())


class BatchSizeMismatch(Rule):
    """train_batch_size must equal micro batch x gradient accumulation x data-parallel size.

    What it checks:
        DeepSpeed's batch assertion (`DeepSpeedConfig._batch_assertion`): train_batch_size ==
        train_micro_batch_size_per_gpu x gradient_accumulation_steps x data-parallel size. With
        all three given it needs the world size (`--set world_size=` or `dp=`); without it, it
        still checks that train_batch_size is a multiple of micro x accumulation. When one or two
        are missing it repeats DeepSpeed's integer-division derivation and reports a derivation
        that cannot satisfy the assertion. It also reports a config with neither
        train_batch_size nor train_micro_batch_size_per_gpu, which DeepSpeed refuses.

    Why it matters:
        The assertion runs inside deepspeed.initialize, after the job has been queued, the
        model has been built and (for ZeRO-3) partitioned: minutes of an allocation of, say,
        64 GPUs lost to a one-line arithmetic error. Derived values round down silently:
        train_batch_size 256 with micro batch 3 on 8 GPUs derives 10 accumulation steps, 240
        samples, and fails.

    How to fix:
        Make the product match, or give only two of the three and let DeepSpeed derive the
        third (with the HF Trainer, set them to "auto").

    Example:
        Bad (ds_config.json; --set world_size=8):

            {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4,
             "gradient_accumulation_steps": 4}

        Good (ds_config.json; --set world_size=8):

            {"train_batch_size": 128, "train_micro_batch_size_per_gpu": 4,
             "gradient_accumulation_steps": 4}
    """

    code = "ML301"
    requires = ("extra:deepspeed.config",)
    name = "batch-size-mismatch"
    severity = Severity.ERROR
    formats = ("deepspeed",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not _parsed(ctx):
            return
        triple = _Triple(ctx)
        gb, mb, ga = (triple.get(n) for _, n in _TRIPLE)
        names = [n for _, n in _TRIPLE]
        if all(triple.known(n) for n in names):
            if triple.dp is not None:
                if gb != mb * ga * triple.dp:
                    yield Finding(
                        f"train_batch_size {gb} != train_micro_batch_size_per_gpu {mb} x "
                        f"gradient_accumulation_steps {ga} x data-parallel size {triple.dp} = "
                        f"{mb * ga * triple.dp}: DeepSpeed's batch assertion fails at launch",
                        triple.where(*names), data={"expected": mb * ga * triple.dp})
            elif gb % (mb * ga):
                yield Finding(
                    f"train_batch_size {gb} is not a multiple of train_micro_batch_size_per_gpu "
                    f"{mb} x gradient_accumulation_steps {ga} = {mb * ga}: no data-parallel size "
                    "satisfies DeepSpeed's batch assertion", triple.where(*names))
            return
        if gb is None and mb is None:
            # A config with no batch values at all is usually completed by its launcher
            # (transformers' Trainer wrote them in before v4.6; scripts pass config_params),
            # so this is a warning: DeepSpeed itself asserts if nothing fills them in.
            yield Finding(
                "neither train_batch_size nor train_micro_batch_size_per_gpu is set: DeepSpeed "
                "asserts that one of them is provided, unless the launcher fills them in (older "
                "HF Trainer versions did)", ("deepspeed.config",), severity=Severity.WARNING)
            return
        _, failure = triple.derive()
        if failure:
            yield Finding(failure, triple.where(*names))


class BatchSizeDerived(Rule):
    """Says which batch values DeepSpeed (or the HF Trainer) will fill in, and how.

    What it checks:
        Reports, as information, each of train_batch_size, train_micro_batch_size_per_gpu and
        gradient_accumulation_steps that the config leaves out or sets to "auto", with the rule
        that fills it: DeepSpeed's `_set_batch_related_parameters` for absent values (integer
        division by the data-parallel size; a lone value gets 1 accumulation step), the HF
        Trainer's TrainingArguments for "auto" ones.

    Why it matters:
        The global batch sets the learning-rate schedule and the micro batch sets activation
        memory (linear in it: 2x micro batch, 2x activations). A value derived from a world size
        the author did not expect (8 GPUs instead of 64) changes both without any message.

    How to fix:
        Nothing to fix when the derivation is intended; otherwise write the values out, or
        give memlint the world size (`--set world_size=64`) to see the numbers.

    Example:
        Bad (ds_config.json):

            {"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4}

        Good (ds_config.json; --set world_size=8):

            {"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4,
             "gradient_accumulation_steps": 8}
    """

    code = "ML302"
    requires = ("extra:deepspeed.config",)
    name = "batch-size-derived"
    severity = Severity.INFO
    formats = ("deepspeed",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not _parsed(ctx):
            return
        triple = _Triple(ctx)
        names = [n for _, n in _TRIPLE]
        autos = [n for n in names if triple.get(n) == "auto"]
        missing = [n for n in names if triple.get(n) is None]
        if autos:
            how = {"train_batch_size": "per_device_train_batch_size x gradient_accumulation_steps"
                                       " x world size",
                   "train_micro_batch_size_per_gpu": "per_device_train_batch_size",
                   "gradient_accumulation_steps": "gradient_accumulation_steps"}
            yield Finding(
                f"{_and(autos)} {'is' if len(autos) == 1 else 'are'} \"auto\": the HF "
                "Trainer / accelerate fills "
                + "; ".join(f"{n} from {how[n]}" for n in autos),
                triple.where(*autos))
        if not missing or (triple.get("train_batch_size") is None
                           and triple.get("train_micro_batch_size_per_gpu") is None):
            return
        if any(triple.get(n) == "auto" for n in names):
            return  # the HF Trainer fills "auto" and the absent ones together
        derived, failure = triple.derive()
        if failure:
            return  # batch-size-mismatch reports it
        gb, mb, ga = (triple.get(n) for n in names)
        formulas = {
            ("gradient_accumulation_steps",): f"gradient_accumulation_steps = train_batch_size "
                                              f"{gb} // (micro batch {mb} x data-parallel size)",
            ("train_micro_batch_size_per_gpu",): f"train_micro_batch_size_per_gpu = "
                                                 f"train_batch_size {gb} // data-parallel size // "
                                                 f"accumulation {ga}",
            ("train_batch_size",): f"train_batch_size = micro batch {mb} x accumulation {ga} x "
                                   "data-parallel size",
            ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps"):
                f"gradient_accumulation_steps = 1 and train_micro_batch_size_per_gpu = "
                f"train_batch_size {gb} // data-parallel size",
            ("train_batch_size", "gradient_accumulation_steps"):
                f"gradient_accumulation_steps = 1 and train_batch_size = micro batch {mb} x "
                "data-parallel size",
        }
        text = formulas.get(tuple(n for n in names if n in missing))
        if text is None:
            return
        tail = (f": {_show(derived)} with data-parallel size {triple.dp}" if derived
                else " (give --set world_size= to see the numbers)")
        present = [n for n in names if n not in missing]
        yield Finding(f"{_and(missing)} not set: DeepSpeed derives {text}{tail}",
                      triple.where(*present), data={"derived": derived})


class MixedPrecisionConflict(Rule):
    """fp16 and bf16 are both enabled.

    What it checks:
        Any source that enables both fp16 and bf16 mixed precision (adapters record
        `flags.fp16` / `flags.bf16`), such as a DeepSpeed config with "fp16": {"enabled": true}
        and "bf16": {"enabled": true}. "auto" does not count: the HF Trainer enables one of
        them.

    Why it matters:
        DeepSpeed asserts 'bfloat16 and fp16 modes cannot be simultaneously enabled' while
        parsing the config, so the job dies at start-up; other frameworks pick one silently, and
        the memory estimate cannot know which (fp16 adds loss-scaling state, bf16 does not).

    How to fix:
        Enable exactly one: bf16 on Ampere or newer GPUs, fp16 on V100/T4.

    Example:
        Bad (ds_config.json):

            {"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": true},
             "bf16": {"enabled": true}}

        Good (ds_config.json):

            {"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": false},
             "bf16": {"enabled": true}}
    """

    code = "ML303"
    requires = ("extra:flags.fp16", "extra:flags.bf16")
    name = "mixed-precision-conflict"
    severity = Severity.ERROR
    formats = ()

    def check(self, ctx: Context) -> Iterable[Finding]:
        if ctx.extra("flags.fp16") is True and ctx.extra("flags.bf16") is True:
            fp16 = ctx.scenario.extra["flags.fp16"].prov
            bf16 = ctx.scenario.extra["flags.bf16"].prov
            yield Finding(
                f"fp16 ({fp16.describe()}) and bf16 ({bf16.describe()}) are both enabled: "
                "DeepSpeed asserts 'bfloat16 and fp16 modes cannot be simultaneously enabled' "
                "at launch; enable one", ("flags.bf16", "flags.fp16"))


def _zero_stage(ctx: Context) -> int:
    return ctx.scenario.parallelism.zero


class OffloadParamWithoutZero3(Rule):
    """Parameter offload is set but ZeRO stage is below 3.

    What it checks:
        zero_optimization.offload_param with device cpu or nvme (or the deprecated
        cpu_offload_param: true) while zero_optimization.stage is 0, 1 or 2.

    Why it matters:
        Only the stage-3 optimizer receives offload_param (DeepSpeed engine,
        `_configure_zero_optimizer`); stages 1-2 ignore it without a message. The parameters
        stay on the GPU: 2 bytes per parameter in bf16/fp16, 14 GB for a 7B model, that the
        plan counted as offloaded.

    How to fix:
        Use "stage": 3, or remove offload_param (offload_optimizer does work at stages 1-2).

    Example:
        Bad (ds_config.json):

            {"train_micro_batch_size_per_gpu": 1,
             "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}

        Good (ds_config.json):

            {"train_micro_batch_size_per_gpu": 1,
             "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}
    """

    code = "ML304"
    requires = ("extra:deepspeed.config",)
    name = "offload-param-without-zero3"
    severity = Severity.WARNING
    formats = ("deepspeed",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not _parsed(ctx):
            return
        stage = _zero_stage(ctx)
        if stage >= 3:
            return
        device = ctx.extra("deepspeed.offload_param.device")
        if device in ("cpu", "nvme"):
            yield Finding(
                f"offload_param (device {device}) only works with ZeRO stage 3; at stage {stage} "
                "DeepSpeed ignores it and the parameters stay on the GPU",
                ("deepspeed.offload_param.device", "zero"))
        elif ctx.extra("deepspeed.cpu_offload_param") is True:
            yield Finding(
                f"cpu_offload_param only works with ZeRO stage 3; at stage {stage} DeepSpeed "
                "ignores it and the parameters stay on the GPU",
                ("deepspeed.cpu_offload_param", "zero"))


class NvmeOffloadWithoutPath(Rule):
    """NVMe offload without an nvme_path.

    What it checks:
        offload_optimizer or offload_param with "device": "nvme" and no nvme_path (or null).

    Why it matters:
        DeepSpeed builds its swap folder with os.path.join(nvme_path, "zero_stage_3"), which
        fails on None after the model is built; ZeRO-Infinity jobs are the largest ones
        (hundreds of GPUs), so the failure is expensive.

    How to fix:
        Set nvme_path to a directory on a local NVMe drive of every node, e.g. "/local_nvme".

    Example:
        Bad (ds_config.json):

            {"train_micro_batch_size_per_gpu": 1,
             "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}}

        Good (ds_config.json):

            {"train_micro_batch_size_per_gpu": 1,
             "zero_optimization": {"stage": 3,
                                   "offload_optimizer": {"device": "nvme",
                                                         "nvme_path": "/local_nvme"}}}
    """

    code = "ML305"
    requires = ("extra:deepspeed.config",)
    name = "nvme-offload-without-path"
    severity = Severity.ERROR
    formats = ("deepspeed",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not _parsed(ctx):
            return
        for block in ("offload_optimizer", "offload_param"):
            if ctx.extra(f"deepspeed.{block}.device") != "nvme":
                continue
            path = ctx.extra(f"deepspeed.{block}.nvme_path")
            if path in (None, "", "auto"):
                yield Finding(
                    f"{block} uses device nvme but sets no nvme_path: DeepSpeed fails at launch "
                    "when it builds the swap folder from it",
                    (f"deepspeed.{block}.device",))


class Stage3OptionIgnored(Rule):
    """A ZeRO stage-3 option is set while the stage is below 3.

    What it checks:
        zero_optimization keys read only by the stage-3 optimizer (stage3_* options and their
        unprefixed aliases, sub_group_size, MiCS and ZeRO++ hpZ/qwZ settings) when
        zero_optimization.stage is 0, 1 or 2.

    Why it matters:
        DeepSpeed accepts them and ignores them silently. A stage3_max_live_parameters or
        stage3_param_persistence_threshold tuned to fit memory does nothing at stage 2, and the
        config reads as if it did; it usually means the stage itself was meant to be 3.

    How to fix:
        Set "stage": 3 if stage 3 was intended; otherwise delete the stage-3 keys.

    Example:
        Bad (ds_config.json):

            {"train_micro_batch_size_per_gpu": 1,
             "zero_optimization": {"stage": 2, "stage3_max_live_parameters": 1e9}}

        Good (ds_config.json):

            {"train_micro_batch_size_per_gpu": 1,
             "zero_optimization": {"stage": 3, "stage3_max_live_parameters": 1e9}}
    """

    code = "ML306"
    requires = ("extra:deepspeed.config",)
    name = "stage3-option-ignored"
    severity = Severity.WARNING
    formats = ("deepspeed",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not _parsed(ctx):
            return

        stage = _zero_stage(ctx)
        if stage >= 3:
            return
        for name in STAGE3_ONLY:
            key = f"deepspeed.{name}"
            if ctx.has_extra(key):
                written = ctx.scenario.extra[key].prov.key or name
                yield Finding(f"{written} has no effect at ZeRO stage {stage}: only the stage-3 "
                              "optimizer reads it, and DeepSpeed ignores it silently", (key,))


class AutoOutsideHfTrainer(Rule):
    """"auto" values with no HF Trainer or accelerate config to fill them in.

    What it checks:
        A DeepSpeed config with "auto" values, linted without a source from a tool that
        replaces them (the HF Trainer, accelerate, or a trainer built on them).

    Why it matters:
        Only those integrations fill "auto" in. Given straight to deepspeed.initialize,
        DeepSpeed keeps top-level "auto" strings (train_batch_size, gradient_clipping: its batch
        arithmetic fails) and drops "auto" inside validated blocks, where the defaults then apply
        (reduce_bucket_size 5e8 elements = 1 GB per bucket in bf16, stage3_prefetch_bucket_size
        5e7, stage3_param_persistence_threshold 1e5), so memlint's estimate uses those defaults.

    How to fix:
        Nothing, if the HF Trainer or accelerate launches the job (lint it together with that
        config, or `--set framework=hf`); otherwise write numbers.

    Example:
        Bad (ds_config.json):

            {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}

        Good (ds_config.json):

            {"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}
    """

    code = "ML307"
    requires = ("extra:deepspeed.config",)
    name = "auto-outside-hf-trainer"
    severity = Severity.INFO
    formats = ("deepspeed",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not _parsed(ctx):
            return
        autos = ctx.extra("deepspeed.auto_keys") or ()
        if not autos:
            return
        if ctx.scenario.training.framework == "hf" or any(f in HF_FORMATS for f in ctx.formats):
            return

        dropped = [a for a in autos if a.split(".")[0] in AUTO_DROPPED_BLOCKS]
        kept = [a for a in autos if a not in dropped]
        parts = []
        if kept:
            parts.append(f"passes {_listed(kept)} on as the string \"auto\", which fails")
        if dropped:
            parts.append(f"drops {_listed(dropped)} (validated blocks), so their defaults apply")
        yield Finding(
            f"{len(autos)} value{'s are' if len(autos) > 1 else ' is'} \"auto\", which only the "
            "HF Trainer / accelerate fill in; launched directly, DeepSpeed "
            + ", and ".join(parts),
            ("deepspeed.auto_keys",), data={"auto_keys": list(autos)})


def _listed(names: list) -> str:
    shown = ", ".join(names[:3])
    return shown + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")


class DeprecatedDeepSpeedKey(Rule):
    """A deprecated DeepSpeed key.

    What it checks:
        Keys DeepSpeed still accepts but has replaced: zero_optimization.cpu_offload,
        cpu_offload_param, cpu_offload_use_pin_memory, stage3_gather_fp16_weights_on_model_save,
        and the "bfloat16" block (now "bf16").

    Why it matters:
        DeepSpeed maps them to the new keys with a warning, and refuses a deprecated key given
        together with its replacement; deprecated keys are removed in later releases.
        A config written for DeepSpeed 0.8 (`cpu_offload: true`) still starts on 0.19; one
        removal in a later release turns it into a launch failure on every GPU of the job.

    How to fix:
        Use the replacement the message names.

    Example:
        Bad (ds_config.json):

            {"train_micro_batch_size_per_gpu": 1,
             "zero_optimization": {"stage": 2, "cpu_offload": true}}

        Good (ds_config.json):

            {"train_micro_batch_size_per_gpu": 1,
             "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    """

    code = "ML308"
    requires = ("extra:deepspeed.config",)
    name = "deprecated-deepspeed-key"
    severity = Severity.INFO
    formats = ("deepspeed",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not _parsed(ctx):
            return
        prefix = "deepspeed.deprecated."
        for key in sorted(k for k in ctx.scenario.extra if k.startswith(prefix)):
            yield Finding(f"{key[len(prefix):]} is deprecated; use {ctx.extra(key)}", (key,))


RULES = [BatchSizeMismatch(), BatchSizeDerived(), MixedPrecisionConflict(),
         OffloadParamWithoutZero3(), NvmeOffloadWithoutPath(), Stage3OptionIgnored(),
         AutoOutsideHfTrainer(), DeprecatedDeepSpeedKey()]
