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
_KEY = re.compile(r'^\s*"([A-Za-z_][A-Za-z0-9_]*)"\s*:', re.M)
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
