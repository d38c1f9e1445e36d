"""Pseudo-rules for the reserved codes (ML0xx) of problems found before any rule runs.

Adapters, scenario merging and the engine emit these through `memlint.diagnostics.make`; they are
registered here so that `memlint rules`, `memlint explain`, select/ignore and SARIF's rule table
cover them like any other rule. Their `check` finds nothing: the finding is made where the problem
is seen.
"""
from __future__ import annotations

from memlint import diagnostics as D
from memlint.diagnostics import Severity
from memlint.rules.base import Rule


class Reserved(Rule):
    reserved = True

    def check(self, ctx):
        return ()


class ParseError(Reserved):
    """A config file cannot be read or parsed, or its format cannot be recognised.

    What it checks:
        Reading (size limit, UTF-8, no NUL bytes), parsing (JSON with the comments DeepSpeed
        accepts, YAML, TOML, shell) and format detection of every file given or referenced.

    Why it matters:
        The launcher would fail on the same file after the job waited in the queue, often minutes
        to hours on a busy cluster, and then fail on all N ranks at once (512 tracebacks on 64
        nodes); and an unreadable file means none of its settings were linted.

    How to fix:
        Fix the syntax at the reported line and column. For a file memlint does not recognise,
        name it after its format (ds_config.json, memlint.toml) or describe the run in a
        memlint.toml that lists it under `files`.

    Example:
        Bad (memlint.toml):

            tp = 2
            pp = [

        Good (memlint.toml):

            tp = 2
            pp = 2
    """

    code, name = D.PARSE_ERROR
    severity = Severity.ERROR


class SchemaViolation(Reserved):
    """A value has the wrong type or shape for the format's schema.

    What it checks:
        Format-level validation where a schema exists (DeepSpeed's config schema, for example):
        types, enumerations and required sub-keys.

    Why it matters:
        Frameworks often read such a value only deep inside initialisation, so a typo in a
        nested table costs a full launch (and on 512 GPUs, 512 failed processes) to discover.

    How to fix:
        Use the type the schema documents at the reported key.

    Example:
        Bad (ds_config.json):

            {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": "two"}}

        Good (ds_config.json):

            {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}
    """

    code, name = D.SCHEMA_ERROR
    severity = Severity.ERROR


class UnknownKey(Reserved):
    """A key that memlint (or the format) does not know.

    What it checks:
        Scenario keys in memlint files, `--set` and `[tool.memlint.scenario]` against the
        documented vocabulary, with a did-you-mean suggestion; adapters report keys of their
        format they do not map.

    Why it matters:
        A misspelt key is silently ignored by most launchers, so the run uses a default (tp=1
        instead of tp=8 means 8x the weights per GPU) that nobody chose.

    How to fix:
        Spell the key as `memlint explain unknown-key` and DESIGN.md list it, or remove it.

    Example:
        Bad (memlint.toml):

            tpp = 2

        Good (memlint.toml):

            tp = 2
    """

    code, name = D.UNKNOWN_KEY
    severity = Severity.ERROR


class InvalidValue(Reserved):
    """A value that cannot be converted to what its key means.

    What it checks:
        Every scenario value through the key table's converter (whole numbers, positive sizes,
        choices such as attention = flash|sdpa|eager, ZeRO stage 0-3, GPU names, model paths).

    Why it matters:
        An impossible value (ZeRO stage 5, tp = 0) makes the memory estimate meaningless and the
        launcher fail at start-up.

    How to fix:
        Use a value from the key's documented range; the message lists the choices.

    Example:
        Bad (memlint.toml):

            zero = 5

        Good (memlint.toml):

            zero = 2
    """

    code, name = D.INVALID_VALUE
    severity = Severity.ERROR


class ConflictingSources(Reserved):
    """Two files of one run set the same setting to different values.

    What it checks:
        When several files describe one run (a launch script plus a DeepSpeed config, an
        accelerate YAML plus its deepspeed_config_file), each scenario key set by more than one
        file with different values.

    Why it matters:
        Which value wins depends on the framework's merge order (DeepSpeed's "auto" values, HF
        Trainer arguments over JSON); a micro batch of 4 in one file and 8 in the other is a
        factor of 2 in activation memory.

    How to fix:
        Set the value in one place and use "auto" (or leave it out) in the other.

    Example:
        A launch script with `--micro-batch-size 4` next to a DeepSpeed JSON with
        `"train_micro_batch_size_per_gpu": 8` is a conflict; setting it in one of them is not.
    """

    code, name = D.CONFLICT
    severity = Severity.WARNING


class NoModel(Reserved):
    """No model is known, so there is no memory estimate.

    What it checks:
        Whether any source names the model (a config.json, a preset, `model.*` keys). Without
        one, only the rules that need no memory estimate run.

    Why it matters:
        Memory is dominated by the parameter count: 16 bytes per parameter for mixed-precision
        Adam, 128 GB for an 8B model before activations. memlint cannot check it without a model.

    How to fix:
        Pass `--model PATH|PRESET`, or set `model = "llama3-8b"` in a memlint.toml next to the
        configs.

    Example:
        Bad (memlint.toml):

            tp = 2

        Good (memlint.toml):

            model = "llama3-8b"
            tp = 2
    """

    code, name = D.MISSING_MODEL
    severity = Severity.INFO


class UnresolvedValue(Reserved):
    """A value that is decided only at launch time ("auto", an environment variable).

    What it checks:
        DeepSpeed "auto" values, shell variables in launch scripts and similar placeholders that
        memlint cannot resolve from the files alone.

    Why it matters:
        memlint then uses a default, which may be far from what the launcher picks (an "auto"
        micro batch resolved from the Trainer's arguments, say 1 versus 16).

    How to fix:
        Give the value with `--set key=value`, or write it into the config.

    Example:
        Bad (train.sh):

            torchrun --nproc_per_node 8 train.py \\
                --per_device_train_batch_size $BATCH \\
                --model_max_length 2048 \\
                --torch_dtype bfloat16 \\
                --bf16 True \\
                --optim adamw_torch \\
                --gradient_checkpointing True

        Good (train.sh):

            torchrun --nproc_per_node 8 train.py \\
                --per_device_train_batch_size 4 \\
                --model_max_length 2048 \\
                --torch_dtype bfloat16 \\
                --bf16 True \\
                --optim adamw_torch \\
                --gradient_checkpointing True
    """

    code, name = D.UNRESOLVED
    severity = Severity.INFO


class UnknownModelType(Reserved):
    """The model's architecture is not one memlint can count exactly.

    What it checks:
        The `model_type`: one memlint does not know gets no estimate (never another family's
        count); a few families it approximates through the generic keys (memlint/memory/
        model_types.py names what each count leaves out), and a custom type whose
        `architectures` names a transformers class memlint counts is read as that class; the
        adapters say the same of Megatron models memlint does not count.

    Why it matters:
        A guessed architecture can be off by the whole MoE expert count, or by a hybrid's Mamba
        layers: Mixtral-8x7B has 47B parameters, a dense reading of its config gives 7B;
        Nemotron-H-8B has 8.1B, a dense reading 17.0B; Llama-3.3-Nemotron-Super-49B (NAS
        blocks) read as llama gives 88B.

    How to fix:
        Give the counts with `model.total_params` / `model.expert_params`, or a model_type
        memlint counts with the `model.<hf_key>` values.

    Example:
        Bad (memlint.toml):

            world_size = 1
            [model]
            model_type = "mystery"
            hidden_size = 1024
            num_hidden_layers = 4
            num_attention_heads = 16
            intermediate_size = 4096
            vocab_size = 32000

        Good (memlint.toml):

            world_size = 1
            [model]
            model_type = "llama"
            hidden_size = 1024
            num_hidden_layers = 4
            num_attention_heads = 16
            intermediate_size = 4096
            vocab_size = 32000
    """

    code, name = D.UNKNOWN_MODEL_TYPE
    severity = Severity.WARNING


class InternalError(Reserved):
    """memlint itself failed: a rule raised, or a plugin could not be loaded.

    What it checks:
        Nothing in the config: the engine turns a rule's exception into this diagnostic so that
        one broken rule does not hide the others' findings.

    Why it matters:
        Results may be incomplete; a run with an internal error in a rule exits 2.

    How to fix:
        Run again with `--debug` for the traceback and report it; `--ignore` the failing rule
        meanwhile.

    Example:
        A third-party rule that raises KeyError shows up as `ML009 internal-error rule ML901
        failed: KeyError ...`; every other rule still reports.
    """

    code, name = D.INTERNAL_ERROR
    severity = Severity.ERROR


class DuplicateKey(Reserved):
    """The same key appears twice in one mapping of a JSON or YAML file.

    What it checks:
        Duplicate keys, reported at the second occurrence with the line of the first.

    Why it matters:
        JSON and YAML loaders keep the last value silently, so the value you read at the top of
        the file is not the one the launcher uses: 1 line of difference, and a micro batch of 4
        becomes 16.

    How to fix:
        Remove one of the two.

    Example:
        Bad (run.memlint.yaml):

            memlint:
              tp: 2
              tp: 4

        Good (run.memlint.yaml):

            memlint:
              tp: 2
    """

    code, name = D.DUPLICATE_KEY
    severity = Severity.ERROR


class UnusedSuppression(Reserved):
    """An inline `memlint: disable` directive that turns nothing off.

    What it checks:
        Each rule a `# memlint: disable=...` comment (or a JSON file's top-level
        `"memlint": {"disable": [...]}`) names, against the findings it suppressed in the run.
        Judged only where the rule's findings are known: the problems found before the rules
        run (parse, schema, keys, duplicates) always; any other rule only where it is enabled,
        applies to the run's formats and the run has a memory estimate; `all` only where every
        rule ran. A file shared by several runs of one check is reported only when no run used
        the directive. A name that is no rule at all is ML003's.

    Why it matters:
        A suppression outlives the finding it was written for: after the key or value that
        caused it is fixed, it stays and silently hides the next finding of that rule on those
        lines. A `disable=ML101` written for a micro batch of 4 that was then lowered to 1
        still hides the out-of-memory verdict when someone raises it to 8.

    How to fix:
        Remove the directive, or the names in it that no longer match a finding.

    Example:
        Bad (run.memlint.yaml):

            memlint:
              tp: 2
              pp: 1   # memlint: disable=unknown-key

        Good (run.memlint.yaml):

            memlint:
              tp: 2
              pp: 1
    """

    code, name = D.UNUSED_SUPPRESSION
    severity = Severity.WARNING


RULES = [ParseError(), SchemaViolation(), UnknownKey(), InvalidValue(), ConflictingSources(),
         NoModel(), UnresolvedValue(), UnknownModelType(), InternalError(), DuplicateKey(),
         UnusedSuppression()]
