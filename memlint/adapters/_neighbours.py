"""Files that sit beside training configs and look like them, but are not memlint's formats.

A trainer's argument file (HF `TrainingArguments` / TRL / LLaMA-Factory / ms-swift JSON:
`"learning_rate"`, `"output_dir"`, `"per_device_train_batch_size"`, ..., often with
`"deepspeed": "zero2"` naming a DeepSpeed config) shares keys with a DeepSpeed config
(`gradient_accumulation_steps`, `bf16`) and with an HF model config (`model_type` is ms-swift's
model id there). Read as either, its keys turn into false errors ("missing hidden_size", "batch
values inconsistent"). The DeepSpeed and HF-config detectors decline such files, so that they fall
through to an adapter that reads argument files (or to the "cannot tell the format" warning).

Checked on real files in fixtures/real-world (ms-swift sft.json / sft_args.json / train configs).
"""
from __future__ import annotations

import re

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
_KEY = re.compile(r'^[ \t]*"([A-Za-z_][A-Za-z0-9_]*)"\s*:', re.M)
# `"deepspeed": "ds_z3.json"` / `"zero2"`: an argument that names a DeepSpeed config
_NAMES_DEEPSPEED = re.compile(r'"deepspeed"\s*:\s*"')


def training_arguments(text: str) -> bool:
    """True for a JSON trainer-argument file: three or more argument keys, or a "deepspeed"
    key whose value is a string (a DeepSpeed config has no such key)."""
    head = text[:65536]
    if _NAMES_DEEPSPEED.search(head):
        return True
    keys = set(_KEY.findall(head))
    return len(keys & ARGUMENT_KEYS) >= 3


# A Hydra launch (verl: `python3 -m verl.trainer.main_ppo ... actor_rollout_ref.actor.megatron.
# tensor_model_parallel_size=4 ...`) names Megatron in its dotted overrides, but they are the
# trainer's config tree, not Megatron-LM flags. Megatron's own scripts pass `--flag value`.
_OVERRIDE = re.compile(r"^[ \t]*\+{0,2}[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+=", re.M)
_MEGATRON_FLAG = re.compile(r"--(tensor-model-parallel-size|num-layers|hidden-size|"
                            r"micro-batch-size|num-attention-heads|pipeline-model-parallel-size)\b")
_ENTRY = re.compile(r"\bpretrain_[a-z0-9_]+\.py\b")


def hydra_launch(text: str) -> bool:
    """True for a shell script that launches a trainer with Hydra dotted overrides (five or more
    `a.b=value` lines) and passes no Megatron-LM flag nor a pretrain_*.py entry point."""
    head = text[:65536]
    if _MEGATRON_FLAG.search(text) or _ENTRY.search(text):   # anywhere, as Megatron's detect
        return False
    return len(_OVERRIDE.findall(head)) >= 5
