"""DeepSpeed-Chat launch scripts (`deepspeed main.py --model_name_or_path ... --zero_stage 2 ...`).

DeepSpeed-Chat's training steps parse their own arguments (microsoft/DeepSpeedExamples
applications/DeepSpeed-Chat at 83757d9: training/step1_supervised_finetuning/main.py and
step2_reward_model_finetuning/main.py `parse_args`) and build the DeepSpeed config themselves
(dschat/utils/ds_utils.py get_train_ds_config), so the sharding, offload and precision are on the
command line, not in a DeepSpeed JSON:

- `--zero_stage` (default 0) is the ZeRO stage;
- `--offload` puts `offload_optimizer` and `offload_param` on the CPU (the latter only acts at
  ZeRO-3) and picks DeepSpeedCPUAdam;
- `--dtype` fp16 (default) or bf16: DeepSpeed mixed precision with fp32 master weights;
- `--gradient_checkpointing`: the HF model's gradient checkpointing (full recompute);
- `--lora_dim R` wraps every nn.Linear under `--lora_module_name` (default "decoder.layers.":
  every linear of the decoder layers) in a rank-R LoRA; the base stays trainable unless
  `--only_optimize_lora` (dschat/utils/module/lora.py only_optimize_lora_parameters);
- `--per_device_train_batch_size` (default 16), `--gradient_accumulation_steps` (1),
  `--max_seq_len` (512).

Step 3 (`step3_rlhf_finetuning/main.py`: an actor and a critic trained beside frozen reference and
reward models) and the DPO step (a policy beside a frozen reference model) are read as such and
get no memory verdict: memlint does not model DeepSpeed-Chat's RLHF engine or its reference
model. Every argument is kept as a `deepspeed_chat.<name>` fact, classed in
memlint/facts/coverage/deepspeed_chat.json (a set, not-modeled one gets ML107). The script is read statically by the HF Trainer's script reader (never run).
"""
from __future__ import annotations

import os

from memlint import verdicts
from memlint.adapters import hf_trainer
from memlint.adapters.detection import deepspeed_chat as detect  # noqa: F401 - the adapter's detect()
from memlint.adapters.trainer_args import local_or_hub_model, to_bool, to_int
from memlint.diagnostics import INVALID_VALUE, UNRESOLVED, Severity, make
from memlint.ir import NO_ESTIMATE, NO_ESTIMATE_REASON, Partial, Provenance

FORMAT = "deepspeed-chat"
SOURCE = "microsoft/DeepSpeedExamples applications/DeepSpeed-Chat at 83757d9"

# (argument, default) of step 1 and step 2's parse_args
DEFAULTS = {"per_device_train_batch_size": 16, "gradient_accumulation_steps": 1,
            "max_seq_len": 512, "zero_stage": 0, "dtype": "fp16", "lora_dim": 0}


def load(path: str, text: str) -> Partial:
    partial, items, _script = hf_trainer._load_script(path, text)  # noqa: SLF001 - one reader
    partial.fmt = FORMAT
    if items is None:
        return partial
    args = {item.name: item for item in items}
    anchor = partial.anchor or Provenance(path, 1, 1, None)
    if "actor_model_name_or_path" in args:
        item = args["actor_model_name_or_path"]
        partial.set_extra(NO_ESTIMATE, "DeepSpeed-Chat step 3 (RLHF: an actor and a critic "
                          "trained beside frozen reference and reward models, the hybrid engine "
                          "generating between steps) is not modeled", item.prov)
        partial.set_extra(NO_ESTIMATE_REASON, verdicts.NOT_MODELED, item.prov)
        return partial
    for item in items:   # every argument as a fact (coverage/deepspeed_chat.json classes them)
        partial.set_extra(f"deepspeed_chat.{item.name}", True if item.value is None
                          else item.value, item.prov)
    if "beta" in args or "/step2_dpo_finetuning/" in path.replace(os.sep, "/"):
        partial.set_extra(NO_ESTIMATE, "DeepSpeed-Chat DPO (a policy trained beside a frozen "
                          "reference model, step2_dpo_finetuning/main.py) is not modeled",
                          anchor)
        partial.set_extra(NO_ESTIMATE_REASON, verdicts.NOT_MODELED, anchor)
        return partial
    _map(args, partial, anchor)
    return partial


def _value(args: dict, name: str):
    """(value, prov, from the file) of an argument, else its DeepSpeed-Chat default."""
    item = args.get(name)
    if item is None:
        return DEFAULTS.get(name), None, False
    return item.value, item.prov, True


def _number(partial: Partial, args: dict, name: str):
    value, prov, given = _value(args, name)
    item = args.get(name)
    if item is not None and item.unresolved:
        partial.diagnostics.append(make(UNRESOLVED, Severity.INFO,
                                        f"--{name} {value}: known only when the script runs; "
                                        f"DeepSpeed-Chat's default {DEFAULTS.get(name)} assumed",
                                        prov))
        return DEFAULTS.get(name), None
    number = to_int(value)
    if number is None:
        partial.diagnostics.append(make(INVALID_VALUE, Severity.ERROR,
                                        f"--{name}: expected a whole number, got {value!r} "
                                        "(argparse type=int refuses it)", prov))
        return None, None
    return number, prov if given else None


def _set(partial: Partial, key: str, value, prov, anchor: Provenance, name: str) -> None:
    """A scenario key from an argument, or from DeepSpeed-Chat's default (said so)."""
    if value is None:
        return
    if prov is None:
        prov = Provenance(anchor.file, anchor.line, anchor.column,
                          f"--{name} default {value} ({SOURCE} main.py)")
    partial.set(key, value, prov)


def _map(args: dict, partial: Partial, anchor: Provenance) -> None:
    partial.set("framework", "deepspeed", anchor)
    model = args.get("model_name_or_path")
    if model is not None and model.value and not model.unresolved:
        local_or_hub_model(str(model.value), model.prov, partial)
    for name, key in (("per_device_train_batch_size", "micro_batch"),
                      ("gradient_accumulation_steps", "grad_accum"), ("max_seq_len", "seq_len"),
                      ("zero_stage", "zero")):
        value, prov = _number(partial, args, name)
        _set(partial, key, value, prov, anchor, name)
    dtype, prov, _ = _value(args, "dtype")
    if str(dtype) not in ("fp16", "bf16"):
        partial.diagnostics.append(make(INVALID_VALUE, Severity.ERROR,
                                        f"--dtype {dtype!r}: main.py takes fp16 or bf16 "
                                        "(argparse choices)", prov))
    else:
        _set(partial, "precision", str(dtype), prov, anchor, "dtype")
    checkpointing = args.get("gradient_checkpointing")
    _set(partial, "recompute", "full" if checkpointing is not None else "none",
         checkpointing.prov if checkpointing is not None else None, anchor,
         "gradient_checkpointing")
    _set(partial, "optimizer", "adamw", None, anchor, "optimizer FusedAdam/DeepSpeedCPUAdam")
    offload = args.get("offload")
    if offload is not None and to_bool(offload.value) is not False:
        zero = to_int(_value(args, "zero_stage")[0]) or 0
        partial.set("offload_optimizer", "cpu", offload.prov)
        if zero >= 3:  # DeepSpeed reads offload_param only at ZeRO-3
            partial.set("offload_params", "cpu", offload.prov)
    _lora(args, partial)


def _lora(args: dict, partial: Partial) -> None:
    item = args.get("lora_dim")
    rank = to_int(item.value) if item is not None else 0
    if not rank:
        return
    only = args.get("only_optimize_lora") is not None
    module = args.get("lora_module_name")
    target = str(module.value) if module is not None else "decoder.layers."
    if only:
        partial.set("lora_rank", rank, item.prov)
        partial.set("lora_targets", "all-linear", module.prov if module else item.prov)
        if target not in ("decoder.layers.", "layers.", "model.layers."):
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.INFO,
                f"--lora_module_name {target!r}: LoRA wraps the linears whose name contains it; "
                "memlint counts every linear of the decoder layers", module.prov))
        return
    # LoRA beside a base that is still trained: full fine-tuning plus small adapters
    partial.diagnostics.append(make(
        UNRESOLVED, Severity.INFO,
        f"--lora_dim {rank} without --only_optimize_lora: DeepSpeed-Chat trains the base as well "
        "as the adapters (dschat/utils/module/lora.py); counted as full fine-tuning, the rank-"
        f"{rank} adapters' own states not included (the estimate errs low by about their size)",
        item.prov))
