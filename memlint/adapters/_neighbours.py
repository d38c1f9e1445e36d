"""Files that sit beside training configs and look like them, but are not memlint's formats.

A trainer's argument file (HF `TrainingArguments` / TRL / LLaMA-Factory / ms-swift JSON:
`"learning_rate"`, `"output_dir"`, `"per_device_train_batch_size"`, ..., often with
`"deepspeed": "zero2"` naming a DeepSpeed config) shares keys with a DeepSpeed config
(`gradient_accumulation_steps`, `bf16`) and with an HF model config (`model_type` is ms-swift's
model id there). Read as either, its keys turn into false errors ("missing hidden_size", "batch
values inconsistent"). The DeepSpeed and HF-config detectors decline such files, so that they fall
through to an adapter that reads argument files (or to the "cannot tell the format" warning).

Checked on real files in fixtures/real-world (ms-swift sft.json / sft_args.json / train configs).

`neighbour_format` names the formats of neighbouring frameworks (nanotron, picotron, NeMo,
NeMo 2 test cases, Megatron-Bridge, torchtune, LitGPT) by their own top-level structure: such a file is reported as
that framework's config, which memlint does not read (a warning, skipped under --skip-unknown),
never read as one of memlint's formats.
"""
from __future__ import annotations

import os
import re

from memlint import lazy_re
from memlint.adapters._toplevel import top_level_keys
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

# Keys that only a trainer's argument file has at its top level: none is a DeepSpeed config key
# (deepspeed/runtime/config.py, constants.py) nor an HF PretrainedConfig attribute.
ARGUMENT_KEYS = frozenset((
    "learning_rate", "num_train_epochs", "output_dir", "per_device_train_batch_size",
    "per_device_eval_batch_size", "lr_scheduler_type", "warmup_ratio", "logging_steps",
    "save_steps", "eval_steps", "save_total_limit", "report_to", "model_name_or_path",
    "model_id_or_path", "dataset", "dataset_dir", "sft_type", "train_type", "finetuning_type",
    "template", "template_type", "cutoff_len", "lora_rank", "lora_alpha", "lora_target",
    "lora_target_modules", "overwrite_output_dir", "do_train", "dataloader_num_workers",
))
# (not weight_decay / max_grad_norm / warmup_*: DeepSpeed optimizer and scheduler params; not
# max_length: old HF config.json files carry it; keys are matched at any depth)
_KEY = lazy_re.compile(r'^[ \t]*"([A-Za-z_][A-Za-z0-9_]*)"\s*:', re.M)
# `"deepspeed": "ds_z3.json"` / `"zero2"`: an argument that names a DeepSpeed config
_NAMES_DEEPSPEED = lazy_re.compile(r'"deepspeed"\s*:\s*"')


def training_arguments(text: str) -> bool:
    """True for a JSON trainer-argument file: three or more argument keys, or a "deepspeed"
    key whose value is a string (a DeepSpeed config has no such key)."""
    head = text[:65536]
    if '"deepspeed"' in head and _NAMES_DEEPSPEED.search(head):
        return True
    keys = set(_KEY.findall(head))
    return len(keys & ARGUMENT_KEYS) >= 3


# A Hydra launch (verl: `python3 -m verl.trainer.main_ppo ... actor_rollout_ref.actor.megatron.
# tensor_model_parallel_size=4 ...`) names Megatron in its dotted overrides, but they are the
# trainer's config tree, not Megatron-LM flags. Megatron's own scripts pass `--flag value`.
_OVERRIDE = lazy_re.compile(r"^[ \t]*\+{0,2}[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+=", re.M)
_MEGATRON_FLAGS = ("tensor-model-parallel-size", "num-layers", "hidden-size", "micro-batch-size",
                   "num-attention-heads", "pipeline-model-parallel-size")
_ENTRY = lazy_re.compile(r"\bpretrain_[a-z0-9_]+\.py\b")


def flag_given(text: str, names, line_start: bool = False) -> bool:
    r"""Whether `text` holds `--NAME` for one of `names` (each ending in a letter), not followed
    by a word character: re.search(r"--(n1|n2|...)\b", text), without compiling a pattern
    (start-up: each costs a one-file check about 0.5M instructions). A word character is what
    `\w` matches in a str pattern: str.isalnum() or "_". `line_start`: only a flag that begins
    its line after blanks, re.search(r"^[ \t]*--(n1|n2|...)\b", text, re.M)."""
    end = len(text)
    for name in names:
        flag = "--" + name
        at = text.find(flag)
        while at >= 0:
            after = at + len(flag)
            if (after == end or not (text[after].isalnum() or text[after] == "_")) and (
                    not line_start or not text[text.rfind("\n", 0, at) + 1:at].strip(" \t")):
                return True
            at = text.find(flag, at + 1)
    return False


def hydra_launch(text: str) -> bool:
    """True for a shell script that launches a trainer with Hydra dotted overrides (five or more
    `a.b=value` lines) and passes no Megatron-LM flag nor a pretrain_*.py entry point."""
    head = text[:65536]
    # anywhere, as Megatron's detect
    if flag_given(text, _MEGATRON_FLAGS) or ("pretrain_" in text and _ENTRY.search(text)):
        return False
    return len(_OVERRIDE.findall(head)) >= 5


# ---------------------------------------------------------------------------------------------
# Formats of neighbouring frameworks, recognised positively by their own top-level structure, so
# that they are named ("a nanotron config") and never read as one of memlint's formats. Each
# signature is the set of keys that framework's loader requires or alone writes, at the commit
# cited (fixtures/real-world/SOURCES.md lists the real files each was checked on).


@record(frozen=True)
class Neighbour:
    """A framework whose config format memlint recognises but does not read."""

    name: str
    loader: str     # what reads the file in that framework (file at a pinned commit)


NANOTRON = Neighbour("nanotron", "nanotron's get_config_from_file, Config(general, parallelism, "
                     "model, ...) in src/nanotron/config/config.py at 2411b02")
PICOTRON = Neighbour("picotron", "picotron's train.py, which reads config['distributed'], "
                     "['model'] and ['training'] (huggingface/picotron at 59714b1)")
MEGATRON_BRIDGE = Neighbour("Megatron-Bridge / NeMo 2", "Megatron-Bridge's ConfigContainer "
                            "override YAML (src/megatron/bridge/training/config.py at 067f987)")
NEMO = Neighbour("NeMo", "NeMo's Hydra config (trainer / exp_manager / model, "
                 "NVIDIA/NeMo examples/*/conf at 8cfedd7)")
TORCHTUNE = Neighbour("torchtune", "torchtune's `tune run` recipe config (_component_ "
                      "instantiation, pytorch/torchtune recipes/configs at bd2a0fc)")
NEMO_RUN = Neighbour("NeMo 2", "`nemo llm pretrain --factory <recipe>` with NeMo-Run's dotted "
                    "overrides (trainer.*, model.config.*, data.*): Megatron-LM's gpt-nemo test "
                    "cases, run by tests/test_utils/recipes/h100/gpt-nemo.yaml at d98e8a6")
LITGPT = Neighbour("LitGPT", "LitGPT's jsonargparse CLI config (litgpt finetune/pretrain "
                   "--config, Lightning-AI/litgpt config_hub at 2685705)")

# Megatron-Bridge ConfigContainer's fields (training/config.py at 067f987)
_CONTAINER = frozenset((
    "env_vars", "rng", "rerun_state_machine", "train", "model", "optimizer",
    "optimizer_config_override_provider", "ddp", "validation", "scheduler", "dataset", "logger",
    "tokenizer", "checkpoint", "dist", "ft", "straggler", "nvrx_straggler", "profiling", "peft",
    "comm_overlap", "mixed_precision", "tensor_inspect", "inprocess_restart"))
_CONTAINER_ONLY = frozenset(("train", "ddp", "dist", "rng", "scheduler", "rerun_state_machine",
                             "comm_overlap", "mixed_precision", "nvrx_straggler"))
_TORCHTUNE = lazy_re.compile(r"^[ \t]*_component_[ \t]*:[ \t]*torchtune\.", re.M)
_LITGPT_RUN = frozenset(("checkpoint_dir", "model_name", "initial_checkpoint_dir", "precision",
                         "devices"))


# a Megatron test case's MODEL_ARGS entry: `--flag: value` for Megatron-LM itself, a dotted
# NeMo-Run override (`trainer.strategy.tensor_model_parallel_size: 2`) for NeMo 2
_ARG_KEY = lazy_re.compile(r"^[ \t]+(--[\w-]+|[A-Za-z_]\w*(?:\.\w+)+)[ \t]*:", re.M)
_NEMO_ROOTS = ("trainer.", "model.config.", "data.", "log.", "optim.", "resume.")


def _nemo_run_args(keys: frozenset, head: str) -> bool:
    """True for a test-case YAML whose MODEL_ARGS are NeMo-Run overrides, not Megatron flags."""
    if "MODEL_ARGS" not in keys:
        return False
    found = _ARG_KEY.findall(head)
    dotted = [k for k in found if k.startswith(_NEMO_ROOTS)]
    return len(dotted) >= 2 and not any(k.startswith("--") for k in found)


def _yaml_neighbour(keys: frozenset, head: str) -> Optional[Neighbour]:
    if _nemo_run_args(keys, head):
        return NEMO_RUN
    if {"general", "parallelism", "model"} <= keys:
        return NANOTRON
    if "_component_" in head and _TORCHTUNE.search(head):
        return TORCHTUNE
    if "trainer" in keys and ("exp_manager" in keys or "model" in keys):
        return NEMO
    if "out_dir" in keys and "train" in keys and keys & _LITGPT_RUN:
        return LITGPT
    if len(keys) >= 2 and keys <= _CONTAINER and keys & _CONTAINER_ONLY:
        return MEGATRON_BRIDGE
    return None


MEGATRON_BRIDGE_LAUNCH = Neighbour("Megatron-Bridge", "a launch of Megatron-Bridge's "
                                   "scripts/training/run_recipe.py or its MIMO trainers "
                                   "(ConfigContainer built in Python from a recipe and dotted "
                                   "overrides, NVIDIA-NeMo/Megatron-Bridge at 067f987)")
# the entry points of Megatron-Bridge a script runs (its own arguments, not Megatron-LM's)
_BRIDGE_ENTRY = lazy_re.compile(
    r"scripts/training/run_recipe\.py|megatron_mimo_training_\w+\.py|\$\{?BRIDGE_ROOT\}?/scripts/")
_SCRIPT = (".sh", ".bash", ".slurm", ".sbatch")


def neighbour_format(path: str, text: str) -> Optional[Neighbour]:
    """The neighbouring framework whose config this YAML / JSON file or launch script is, or
    None."""
    name = os.path.basename(path).lower()
    head = text[:65536]
    if name.endswith(_SCRIPT):
        # each of _BRIDGE_ENTRY's alternatives holds one of these (start-up: most scripts hold
        # none, and the pattern is not compiled)
        if not any(s in text for s in ("run_recipe.py", "megatron_mimo_training_", "BRIDGE_ROOT")):
            return None
        return MEGATRON_BRIDGE_LAUNCH if _BRIDGE_ENTRY.search(text) else None
    if name.endswith((".yaml", ".yml")):
        return _yaml_neighbour(top_level_keys(head), head)
    if name.endswith(".json"):
        if {"distributed", "model", "training"} <= top_level_keys(head):
            return PICOTRON
    return None
