"""LLaMA-Factory training YAML (`llamafactory-cli train x.yaml`).

One flat YAML holds LLaMA-Factory's own arguments (ModelArguments, DataArguments,
FinetuningArguments) and HF `TrainingArguments`; the latter go through
`memlint.adapters.trainer_args.apply`. LLaMA-Factory's defaults are its own, read at
hiyouga/LLaMA-Factory@ff6d4d12 (`src/llamafactory/hparams/*.py`, `model/adapter.py`,
`model/loader.py`, `model/model_utils/checkpointing.py`, `hparams/parser.py`):
- `finetuning_type` defaults to lora, `lora_rank` to 8, `lora_target` to "all" (every linear);
- gradient checkpointing is on unless `disable_gradient_checkpointing: true`;
- `cutoff_len` (the sequence length) defaults to 2048; `packing` defaults to on for stage pt;
- the model is loaded with `torch_dtype="auto"` (the checkpoint's dtype, bf16 for the models in
  the catalog); trainable parameters are then cast to fp32 unless `pure_bf16`, BAdam, or
  ZeRO-3 without quantization (`model/adapter.py`), so a full fine-tune under `bf16: true`
  without DeepSpeed is autocast over fp32 weights, and a LoRA run keeps the frozen base in bf16;
- `quantization_bit` 4/8 with the default bitsandbytes method quantizes the frozen base;
- `use_kt: true` (KTransformers' AMX MoE backend) keeps the routed experts in host memory and runs
  them on the CPU (`offload_experts = "cpu"`).
"""
from __future__ import annotations

import os

from memlint.adapters import llamafactory_megatron, trainer_args
from memlint.adapters._lora import target_kind
from memlint.adapters.detection import llamafactory as detect  # noqa: F401 - the adapter's detect()
from memlint.diagnostics import INVALID_VALUE, UNRESOLVED, Severity, make
from memlint.facts import coverage
from memlint.ir import Partial, Provenance
from memlint.loaders import load_yaml_mapping, suppressions
from memlint.records import record

FORMAT = "llamafactory"
SOURCE = "hiyouga/LLaMA-Factory@ff6d4d12"

DEFAULTS = {
    "recompute": ("full", f"{SOURCE} model_args.py: disable_gradient_checkpointing defaults to "
                          "False, so checkpointing is on"),
    "seq_len": (2048, f"{SOURCE} data_args.py: cutoff_len defaults to 2048"),
    "lora_rank": (8, f"{SOURCE} finetuning_args.py: lora_rank defaults to 8"),
}

# LLaMA-Factory's optimizer switches (FinetuningArguments) -> the closest optimizer memlint
# models, and why. GaLore / APOLLO keep moments of rank-r projections (r = 128 in the examples:
# about r / d of AdamW's, e.g. 3% at d = 4096) and BAdam keeps them for one block of layers at a
# time, so they are counted like Adafactor's factored states; Adam-mini keeps one second moment
# per block, so about one moment per parameter.
_OPTIMIZERS = (
    ("use_muon", "muon", ""),
    ("use_galore", "adafactor", "GaLore keeps moments of low-rank projections only; counted as "
     "factored (Adafactor-like) optimizer states"),
    ("use_apollo", "adafactor", "APOLLO keeps moments of low-rank projections only; counted as "
     "factored (Adafactor-like) optimizer states"),
    ("use_badam", "adafactor", "BAdam keeps moments for one block of layers at a time; counted "
     "as factored (Adafactor-like) optimizer states"),
    ("use_adam_mini", "sgd", "Adam-mini keeps the first moment and one second moment per block; "
     "counted as one moment per parameter"),
)


def _freeze(given, truth, partial: Partial, anchor: Provenance, notes: list) -> None:
    """Freeze tuning (model/adapter.py _setup_freeze_tuning): the base is frozen but for
    `freeze_trainable_layers` decoder layers (default 2): the last N, the first -N when
    negative, or with `use_llama_pro` every (L/N)-th layer (the expanded blocks)."""
    partial.set("train_base", False, anchor)
    item = given("freeze_trainable_layers")
    count = trainer_args.to_int(item.value) if item is not None else None
    if item is None:
        count = 2
        notes.append(f"freeze_trainable_layers 2 ({SOURCE} finetuning_args.py default)")
    elif count is None:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.WARNING,
            f"freeze_trainable_layers {item.value!r} is not an integer: the trained layers are "
            "not counted", item.prov, key="freeze_trainable_layers"))
        return
    if count == 0:
        return
    if truth("use_llama_pro"):
        spec = f"expanded:{abs(count)}"
    else:
        spec = f"last:{count}" if count > 0 else f"first:{-count}"
    partial.set("trainable_layers", spec, item.prov if item is not None else anchor)
    modules = given("freeze_trainable_modules")
    extra = given("freeze_extra_modules")
    if (modules is not None and str(modules.value).strip().lower() != "all") or extra is not None:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            "freeze_trainable_modules / freeze_extra_modules: memlint trains the whole of each "
            "trained layer and nothing outside the layers",
            (modules or extra).prov, key="freeze_trainable_modules"))


def load(path: str, text: str) -> Partial:
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    doc = load_yaml_mapping(path, text, "a LLaMA-Factory config", partial.diagnostics)
    if doc is None:
        return partial
    items = trainer_args.mapping_items(doc, doc.data)
    if llamafactory_megatron.is_megatron(doc.data):
        # mcore_adapter / Megatron-Bridge: Megatron-Core's parallelism stated in the YAML
        llamafactory_megatron.apply(partial, items, path)
        return partial
    apply_items(partial, items, path)
    return partial


@record
class _Args:
    """LLaMA-Factory's arguments of one run, with the Partial and the defaults taken."""

    by_name: dict
    partial: Partial
    anchor: Provenance
    notes: list

    def given(self, name: str):
        return self.by_name.get(name)

    def truth(self, name: str, default: bool = False) -> bool:
        item = self.given(name)
        value = trainer_args.to_bool(item.value) if item is not None else None
        return default if value is None else value

    def where(self, name: str) -> Provenance:
        item = self.given(name)
        return item.prov if item is not None else self.anchor


def apply_items(partial: Partial, items: list, path: str) -> None:
    """LLaMA-Factory's arguments (from its YAML, or `llamafactory-cli train --flags`)."""
    args = _Args({item.name: item for item in items}, partial, Provenance(path, 1, 1, None), [])
    stage_item = args.given("stage")
    stage = str((stage_item.value if stage_item is not None else None) or "sft").strip().lower()
    method, method_item = _method(args)
    lora = method in ("lora", "oft")
    quant_item = args.given("quantization_bit")
    quant_bits = trainer_args.to_int(quant_item.value) if quant_item is not None else None
    if lora:
        _adapters(args, method, method_item)
    elif method == "freeze":
        _freeze(args.given, args.truth, partial, method_item.prov, args.notes)
    if quant_bits is not None:
        _quantization(args, quant_bits, quant_item)
    loaded = _loaded_dtype(args, method, method_item, lora, quant_bits)
    _checkpointing(args, items)
    if "cutoff_len" not in args.by_name:
        args.notes.append(f"cutoff_len {DEFAULTS['seq_len'][0]} ({DEFAULTS['seq_len'][1]})")
    trainer_args.apply(items, partial, "llamafactory", args.anchor,
                       defaults=dict(DEFAULTS, dtype=(loaded, "LLaMA-Factory"),
                                     precision=("fp32", "transformers TrainingArguments: bf16 "
                                                "and fp16 default to False")),
                       loaded_dtype=loaded, lora=lora, assumed=args.notes)
    _optimizer_switches(args)
    if args.truth("use_unsloth_gc"):
        partial.set("offload_activations", True, args.given("use_unsloth_gc").prov)
    if args.truth("use_kt"):
        # KTransformers' AMX MoE backend: the routed experts live and run on the CPU
        # (hparams/model_args.py KTransformersArguments)
        partial.set("offload_experts", "cpu", args.given("use_kt").prov)
    if stage in ("dpo", "kto", "ppo", "rm"):
        _preference(stage, {item.name: item.value for item in items}, args.given, partial, lora,
                    args.anchor)
    packing = args.given("packing")
    partial.set_extra("hf_trainer.packing",
                      args.truth("packing") if packing is not None else stage == "pt",
                      args.where("packing"))
    trainer_args.check_deepspeed(partial, {i.name: i for i in items}, path)
    _record_not_modeled(args)


def _record_not_modeled(args: _Args) -> None:
    """The set arguments memlint/facts/coverage/llamafactory.json says are not modeled, as
    `llamafactory.<name>` facts for the not-modeled rule (ML107)."""
    for name in coverage.table("llamafactory").not_modeled:
        item = args.given(name)
        if item is not None and not item.unresolved:
            args.partial.set_extra(f"llamafactory.{name}", item.value, item.prov)


def _method(args: _Args) -> tuple:
    """(finetuning_type, its item): lora by default; one LLaMA-Factory refuses is counted as a
    full fine-tune, with a warning."""
    method_item = args.given("finetuning_type")
    method = str(method_item.value).strip().lower() if method_item is not None else "lora"
    if method_item is None:
        args.notes.append(f"finetuning_type lora ({SOURCE} finetuning_args.py default)")
    if method not in ("lora", "oft", "freeze", "full"):
        args.partial.diagnostics.append(make(
            INVALID_VALUE, Severity.WARNING, f"finetuning_type {method!r}: LLaMA-Factory accepts "
            "lora, oft, freeze or full", method_item.prov, key="finetuning_type"))
        method = "full"
    return method, method_item


def _adapters(args: _Args, method: str, method_item) -> None:
    """LoRA (or OFT, counted as LoRA) rank, targets, modules to save and dropout."""
    partial = args.partial
    if method == "oft":
        rank_item = args.given("oft_rank")
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, "OFT adapters are counted as LoRA adapters of the same "
            "rank (both are small next to the frozen base)", method_item.prov,
            key="finetuning_type"))
    else:
        rank_item = args.given("lora_rank")
    rank = trainer_args.to_int(rank_item.value) if rank_item is not None else None
    if rank is None or rank < 1:
        rank = DEFAULTS["lora_rank"][0] if method == "lora" else 8
        args.notes.append(f"{method}_rank {rank} ({DEFAULTS['lora_rank'][1]})")
        partial.set("lora_rank", rank, method_item.prov if method_item else args.anchor)
    else:
        partial.set("lora_rank", rank, rank_item.prov)
    target = args.given("lora_target")
    partial.set("lora_targets", target_kind(target.value if target is not None else "all"),
                args.where("lora_target"))
    if target is None:
        args.notes.append(f"lora_target all ({SOURCE} finetuning_args.py default)")
    extra = args.given("additional_target")   # PEFT modules_to_save (finetuning_args.py)
    if extra is not None and extra.value:
        partial.set("lora_modules_to_save", extra.value, extra.prov)
    dropout = args.given("lora_dropout")
    if dropout is not None:
        try:
            partial.set("lora_dropout", float(dropout.value), dropout.prov)
        except (TypeError, ValueError):
            pass


def _quantization(args: _Args, quant_bits: int, quant_item) -> None:
    item = args.given("quantization_method")
    quant_method = str(item.value if item is not None else "bnb").strip().lower()
    if quant_method in ("bnb", "bitsandbytes") and quant_bits in (4, 8):
        args.partial.set("base_quant", "nf4" if quant_bits == 4 else "int8", quant_item.prov)
    else:
        args.partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            f"quantization_bit {quant_bits} with {quant_method}: memlint counts bitsandbytes "
            "4/8-bit bases only; the base is counted in its loaded dtype", quant_item.prov,
            key="quantization_bit"))


def _loaded_dtype(args: _Args, method: str, method_item, lora: bool, quant_bits) -> str:
    """The dtype LLaMA-Factory's trainable parameters end up in (model/adapter.py)."""
    deepspeed = args.given("deepspeed")
    zero3 = deepspeed is not None and "3" in os.path.basename(str(deepspeed.value))
    pure = args.truth("pure_bf16") or args.truth("use_badam")
    if lora:
        loaded = "bf16"   # torch_dtype="auto": the frozen base stays in the checkpoint's dtype
        args.notes.append("base weights loaded in the checkpoint's dtype, taken as bf16 "
                          f"({SOURCE} model/loader.py torch_dtype='auto')")
    elif pure or (zero3 and quant_bits is None):
        loaded = "bf16"
    else:
        loaded = "fp32"   # trainable parameters upcast to float32
    if method == "freeze" and loaded == "fp32":
        # only the trained layers are upcast (model/adapter.py _setup_freeze_tuning)
        args.partial.set("frozen_dtype", "bf16", method_item.prov)
        args.notes.append("frozen layers in the checkpoint's dtype, taken as bf16 "
                          f"({SOURCE} model/loader.py torch_dtype='auto'); the trained ones in "
                          "fp32")
    return loaded


def _checkpointing(args: _Args, items: list) -> None:
    """Gradient checkpointing is on unless disable_gradient_checkpointing: an item for apply."""
    disabled = args.truth("disable_gradient_checkpointing")
    if not disabled and "gradient_checkpointing" not in args.by_name:
        items.append(trainer_args.Item("gradient_checkpointing", True, args.anchor))
        args.notes.append(DEFAULTS["recompute"][1].replace("checkpointing is on",
                                                           "gradient checkpointing on"))
    elif disabled:
        items.append(trainer_args.Item("gradient_checkpointing", False,
                                       args.given("disable_gradient_checkpointing").prov))


def _optimizer_switches(args: _Args) -> None:
    for flag, optimizer, why in _OPTIMIZERS:
        if args.truth(flag):
            args.partial.set("optimizer", optimizer, args.given(flag).prov)
            args.partial.settings.pop("optimizer_impl", None)
            if why:
                args.partial.diagnostics.append(make(UNRESOLVED, Severity.INFO, f"{flag}: {why}",
                                                     args.given(flag).prov, key=flag))
            break


def _preference(stage: str, data: dict, given, partial: Partial, lora: bool,
                anchor: Provenance) -> None:
    """The models a preference or RL stage holds (LLaMA-Factory @ff6d4d12): DPO keeps a reference
    unless pref_loss is orpo or simpo (hparams/finetuning_args.py:593 use_ref_model), KTO and PPO
    always (train/*/workflow.py); create_ref_model (train/trainer_utils.py) loads `ref_model`
    when given, else a copy of the model, or none under LoRA (the adapter disabled). DPO, ORPO
    and SimPO run chosen and rejected in one concatenated forward (dpo/trainer.py
    concatenated_forward); the reward stage scores pairs with a value head; PPO's policy carries
    the value head (AutoModelForCausalLMWithValueHead) and a reward model that is an API, a LoRA
    adapter on the policy, or a full model (create_reward_model)."""
    prov = given("stage").prov if given("stage") else anchor
    loss = str(data.get("pref_loss") or "sigmoid").strip().lower()
    partial.set("rl.framework", "llamafactory", prov)
    partial.set("rl.algorithm", {"rm": "reward", "dpo": loss if loss in ("orpo", "simpo")
                                 else "dpo"}.get(stage, stage), prov)
    uses_ref = stage in ("kto", "ppo") or (stage == "dpo" and loss not in ("orpo", "simpo"))
    if uses_ref:
        ref_item = given("ref_model")
        if ref_item is not None and ref_item.value:
            partial.set("rl.reference", "model", ref_item.prov)
            partial.set("rl.reference_model", str(ref_item.value), ref_item.prov)
        else:
            partial.set("rl.reference", "adapter" if lora else "model", prov)
    else:
        partial.set("rl.reference", "none", given("pref_loss").prov if given("pref_loss")
                    else prov)
    if stage in ("dpo", "rm"):
        partial.set("rl.paired", True, prov)
    if stage == "ppo":
        kind = str(data.get("reward_model_type") or "lora").strip().lower()
        reward = given("reward_model")
        if kind == "full" and reward is not None and reward.value:
            partial.set("rl.reward_model", str(reward.value), reward.prov)
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, "stage ppo generates with transformers' generate: the "
            "KV cache of generation is not counted (ppo/trainer.py get_inputs)", prov,
            key="stage"))
