"""LLaMA-Factory v1 training YAML (`llamafactory-cli sft examples/v1/...yaml` with the v1 engine):
hiyouga/LLaMA-Factory@ff6d4d12 src/llamafactory/v1/config/{model_args,training_args}.py.

The v1 layout names the model `model` (not model_name_or_path) and configures each part through
a plugin block: `dist_config` (fsdp2, fsdpturbo with `ep_size`, deepspeed with `config_file`),
`peft_config` (lora with `r` / `target_modules`, freeze with `freeze_trainable_layers`),
`quant_config` (bnb `quantization_bit`), `kernel_config`, `init_config`. Defaults (its dataclass
fields): `micro_batch_size` 1, `cutoff_len` 2048, `enable_activation_checkpointing` True, `bf16`
True, `cp_size` 1; the optimizer is torch's AdamW (v1/core/base_trainer.py _init_optimizer).
A full fine-tune is cast to fp32 before FSDP2 shards it with a bf16 / fp32-reduce mixed-precision
policy (v1/core/model_engine.py, plugins/trainer_plugins/distributed/fsdp2.py get_mp_policy); a
LoRA run keeps the checkpoint's dtype (bf16) for the frozen base.
"""
from __future__ import annotations

from memlint.adapters.detection import llamafactory_v1 as detect  # noqa: F401 - the adapter's detect()
from memlint.adapters.trainer_args import to_bool, to_int
from memlint.diagnostics import UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance
from memlint.loaders import load_yaml_mapping, suppressions

FORMAT = "llamafactory-v1"
SOURCE = "hiyouga/LLaMA-Factory@ff6d4d12 src/llamafactory/v1"


class _Doc:
    def __init__(self, doc, path: str):
        self.doc, self.data = doc, doc.data
        self.anchor = Provenance(path, 1, 1, None)

    def where(self, *keys) -> Provenance:
        return self.doc.prov(tuple(keys), ".".join(keys))

    def default(self, key: str, value) -> Provenance:
        return Provenance(self.anchor.file, 1, 1, f"{key} default {value} ({SOURCE}/config)")

    def block(self, name: str) -> dict:
        value = self.data.get(name)
        return value if isinstance(value, dict) else {}


def load(path: str, text: str) -> Partial:
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    doc = load_yaml_mapping(path, text, "a LLaMA-Factory v1 config", partial.diagnostics)
    if doc is None:
        return partial
    d = _Doc(doc, path)
    if isinstance(d.data.get("model"), str):
        partial.set("model", d.data["model"], d.where("model"))
    for key, scenario_key, default in (("micro_batch_size", "micro_batch", 1),
                                       ("cutoff_len", "seq_len", 2048),
                                       ("global_batch_size", "global_batch", None),
                                       ("cp_size", "cp", 1)):
        value = to_int(d.data.get(key)) if key in d.data else default
        if value is not None:
            partial.set(scenario_key, value, d.where(key) if key in d.data else
                        d.default(key, value))
    checkpointing = to_bool(d.data.get("enable_activation_checkpointing", True))
    partial.set("recompute", "full" if checkpointing is not False else "none",
                d.where("enable_activation_checkpointing")
                if "enable_activation_checkpointing" in d.data
                else d.default("enable_activation_checkpointing", True))
    bf16 = to_bool(d.data.get("bf16", True)) is not False
    partial.set("optimizer", "adamw", d.default("optimizer", "torch AdamW"))
    lora = _peft(d, partial)
    _precision(d, partial, bf16, lora)
    _dist(d, partial)
    quant = d.block("quant_config")
    bits = to_int(quant.get("quantization_bit")) if quant else None
    if bits in (4, 8):
        partial.set("base_quant", "nf4" if bits == 4 else "int8",
                    d.where("quant_config", "quantization_bit"))
    return partial


def _precision(d: _Doc, partial: Partial, bf16: bool, lora: bool) -> None:
    where = d.where("bf16") if "bf16" in d.data else d.default("bf16", True)
    if not bf16:
        partial.set("precision", "fp32", where)
    elif lora:
        partial.set("precision", "pure-bf16", where)   # dtype="auto": the bf16 checkpoint
    else:
        partial.set("precision", "bf16", where)        # fp32 weights, bf16 compute (FSDP2 policy)


def _peft(d: _Doc, partial: Partial) -> bool:
    peft = d.block("peft_config")
    name = str(peft.get("name", "")).lower()
    if name == "lora":
        partial.set("lora_rank", to_int(peft.get("r", 8)) or 8, d.where("peft_config", "r")
                    if "r" in peft else d.where("peft_config"))
        target = str(peft.get("target_modules", "all"))
        partial.set("lora_targets", "all-linear" if target in ("all", "all-linear") else "qkvo",
                    d.where("peft_config"))
        return True
    if name == "freeze":
        layers = to_int(peft.get("freeze_trainable_layers", 2)) or 2
        partial.set("train_base", False, d.where("peft_config"))
        partial.set("trainable_layers", f"last:{layers}" if layers > 0 else f"first:{-layers}",
                    d.where("peft_config"))
    elif name:
        partial.diagnostics.append(make(UNRESOLVED, Severity.INFO,
                                        f"peft_config {name!r} is not modeled; counted as full "
                                        "fine-tuning", d.where("peft_config")))
    return False


def _dist(d: _Doc, partial: Partial) -> None:
    dist = d.block("dist_config")
    name = str(dist.get("name", "")).lower()
    where = d.where("dist_config")
    if name in ("fsdp2", "fsdpturbo"):
        partial.set("framework", "fsdp2", where)
        partial.set("fsdp", "full", where)
        if "reshard_after_forward" in dist:
            partial.set("reshard_after_forward", to_bool(dist["reshard_after_forward"]),
                        d.where("dist_config", "reshard_after_forward"))
        if to_bool(dist.get("offload_params", False)):
            partial.set("offload_params", "cpu", d.where("dist_config", "offload_params"))
        if name == "fsdpturbo" and to_int(dist.get("ep_size")):
            partial.set("ep", to_int(dist["ep_size"]), d.where("dist_config", "ep_size"))
    elif name == "deepspeed":
        partial.set("framework", "deepspeed", where)
        if isinstance(dist.get("config_file"), str):
            partial.references.append((dist["config_file"],
                                       d.where("dist_config", "config_file")))
    else:
        partial.set("framework", "hf", where if dist else d.anchor)
