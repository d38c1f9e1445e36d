"""axolotl trainer YAML: the keys that decide memory, nothing else.

axolotl (axolotl-ai-cloud/axolotl, `src/axolotl/utils/schemas/config.py`) builds HF Trainer
arguments from one YAML. Read here: micro_batch_size, sequence_len, gradient_accumulation_steps,
bf16/fp16, adapter lora/qlora with lora_r / lora_dropout / lora_target_linear, load_in_4bit /
load_in_8bit, gradient_checkpointing, fsdp / fsdp_version / fsdp_config, deepspeed (a JSON path,
recorded in `partial.references`), and the n-D parallel sizes (dp_shard_size, dp_replicate_size,
tensor_parallel_size, context_parallel_size, expert_parallel_size). `base_model` is a Hub name,
which memlint never downloads: it is reported as info.

`gradient_checkpointing: true` is transformers' checkpointing, which wraps each decoder layer's
call, FSDP hooks included, so under FSDP the recompute re-gathers the layer
(`recompute.scope = outside-unit`); `fsdp_config.activation_checkpointing` is FSDP's own wrapper
inside each unit (`inside-unit`).
"""
from __future__ import annotations

import os
from typing import Any

from memlint.diagnostics import INVALID_VALUE, SCHEMA_ERROR, UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance
from memlint.loaders import load_yaml, suppressions

FORMAT = "axolotl"

# (axolotl key, scenario key): plain positive integers
_INTS = (("micro_batch_size", "micro_batch"), ("sequence_len", "seq_len"),
         ("gradient_accumulation_steps", "grad_accum"), ("dp_shard_size", "dp_shard"),
         ("dp_replicate_size", "dp_replicate"), ("tensor_parallel_size", "tp"),
         ("context_parallel_size", "cp"), ("expert_parallel_size", "ep"))
_STRATEGIES = {"full_shard": ("full", True), "shard_grad_op": ("shard_grad_op", False),
               "hybrid_shard": ("hybrid", True), "no_shard": ("none", True)}


def detect(path: str, text: str) -> bool:
    if not os.path.basename(path).lower().endswith((".yaml", ".yml")):
        return False
    head = text[:16384]
    if "distributed_type:" in head or "compute_environment:" in head:
        return False
    return "base_model:" in head and ("micro_batch_size:" in head or "sequence_len:" in head)


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("true", "auto", "yes", "1")


def load(path: str, text: str) -> Partial:
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    doc = load_yaml(path, text)
    partial.diagnostics.extend(doc.diagnostics)
    data = doc.data
    if data is None:
        return partial
    if not isinstance(data, dict):
        partial.diagnostics.append(make(SCHEMA_ERROR, Severity.ERROR,
                                        "an axolotl config must be a mapping",
                                        Provenance(path, 1, 1, None)))
        return partial

    def prov(*keys: Any) -> Provenance:
        return doc.prov(tuple(keys), ".".join(str(k) for k in keys))

    for key, value in data.items():
        if not isinstance(value, (dict, list)):
            partial.set_extra(f"axolotl.{key}", value, prov(key))

    for key, scenario in _INTS:
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            partial.diagnostics.append(make(INVALID_VALUE, Severity.ERROR,
                                            f"{key} must be a positive whole number, got "
                                            f"{value!r}", prov(key), key=key))
            continue
        partial.set(scenario, value, prov(key))

    if data.get("base_model"):
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            f"base_model {data['base_model']!r} is a Hub name; memlint does not download it: "
            "give its config.json with --model", prov("base_model"), key="base_model"))

    bf16, fp16 = data.get("bf16"), data.get("fp16")
    if _truthy(bf16) and fp16 is True:
        partial.set_extra("flags.bf16", True, prov("bf16"))
        partial.set_extra("flags.fp16", True, prov("fp16"))
    if _truthy(bf16):
        partial.set("precision", "bf16", prov("bf16"))
    elif fp16 is True:
        partial.set("precision", "fp16", prov("fp16"))

    adapter = str(data.get("adapter") or "").strip().lower()
    if adapter in ("lora", "qlora"):
        rank = data.get("lora_r")
        if isinstance(rank, int) and not isinstance(rank, bool) and rank > 0:
            partial.set("lora_rank", rank, prov("lora_r"))
        else:
            partial.diagnostics.append(make(INVALID_VALUE, Severity.ERROR,
                                            f"adapter {adapter} needs a positive lora_r, got "
                                            f"{rank!r}", prov("lora_r" if "lora_r" in data
                                                              else "adapter"), key="lora_r"))
        if data.get("lora_target_linear") is True:
            partial.set("lora_targets", "all-linear", prov("lora_target_linear"))
        if data.get("lora_dropout") is not None:
            partial.set("lora_dropout", data["lora_dropout"], prov("lora_dropout"))
    if data.get("load_in_4bit") is True:
        partial.set("base_quant", "nf4", prov("load_in_4bit"))
    elif data.get("load_in_8bit") is True:
        partial.set("base_quant", "int8", prov("load_in_8bit"))

    fsdp_config = data.get("fsdp_config") if isinstance(data.get("fsdp_config"), dict) else {}
    fsdp_list = data.get("fsdp")
    uses_fsdp = bool(fsdp_list) or bool(fsdp_config) or data.get("fsdp_version") is not None
    framework, framework_prov = "hf", prov()
    if uses_fsdp:
        framework = "fsdp2"
        framework_prov = prov("fsdp" if "fsdp" in data else "fsdp_config")

        def fget(name: str) -> Any:
            return fsdp_config.get(name, fsdp_config.get(f"fsdp_{name}"))

        def fprov(name: str) -> Provenance:
            key = name if name in fsdp_config else f"fsdp_{name}"
            return prov("fsdp_config", key)

        mode, reshard, where = "full", True, framework_prov
        words = [str(w).lower() for w in fsdp_list] if isinstance(fsdp_list, list) else []
        strategy = fget("sharding_strategy")
        if strategy is not None:
            words.append(str(strategy).lower())
            where = fprov("sharding_strategy")
        for word in words:
            if word in _STRATEGIES:
                mode, reshard = _STRATEGIES[word]
        partial.set("fsdp", mode, where)
        value = fget("reshard_after_forward")
        if isinstance(value, bool):
            partial.set("reshard_after_forward", value, fprov("reshard_after_forward"))
        else:
            partial.set("reshard_after_forward", reshard, where)
        if fget("offload_params") is True:
            partial.set("offload_params", "cpu", fprov("offload_params"))
            partial.set("offload_optimizer", "cpu", fprov("offload_params"))
        if fget("activation_checkpointing") is True:
            partial.set("recompute", "full", fprov("activation_checkpointing"))
            partial.set_extra("recompute.scope", "inside-unit", fprov("activation_checkpointing"))
    if data.get("gradient_checkpointing") is True and "recompute" not in partial.settings:
        partial.set("recompute", "full", prov("gradient_checkpointing"))
        # transformers' checkpoint wraps the layer call, FSDP pre-forward hooks included
        partial.set_extra("recompute.scope", "outside-unit", prov("gradient_checkpointing"))

    deepspeed = data.get("deepspeed")
    if deepspeed:
        framework, framework_prov = "deepspeed", prov("deepspeed")
        target = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)),
                                               str(deepspeed)))
        partial.references.append(target)
        if not os.path.isfile(target):
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.INFO,
                f"deepspeed config {deepspeed!r} is not next to this file (axolotl also looks in "
                "its installed deepspeed_configs/); its ZeRO settings are not checked",
                prov("deepspeed"), key="deepspeed"))
    partial.set("framework", framework, framework_prov)
    return partial
