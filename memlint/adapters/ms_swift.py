"""ms-swift launch scripts: `swift sft|pt|rlhf ...` and `megatron sft|pt|rlhf ...`.

ms-swift (modelscope/ms-swift at 3602360) runs its trainers from one command line; its examples
set the processes in the environment (`NPROC_PER_NODE=2 CUDA_VISIBLE_DEVICES=0,1 swift sft ...`,
swift/cli/main.py hands NPROC_PER_NODE / NNODES to torchrun). The script is read statically by
the shell reader (never run); each `--name value...` is one argument.

`swift sft` / `swift pt` (swift/arguments/sft_args.py, on HF's TrainingArguments through
swift/trainers/arguments.py) are mapped by the HF Trainer argument mapping
(adapters/trainer_args.py) with ms-swift's own defaults: `tuner_type` lora (base_args.py),
`lora_rank` 8 and `target_modules` all-linear (tuner_args.py), `per_device_train_batch_size` 1 and
`gradient_checkpointing` True (trainers/arguments.py), gradient accumulation
ceil(16 / batch / world size) when not given, `torch_dtype` the checkpoint's own with bf16 / fp16
mixed precision set from it (model_args.py _init_mixed_precision), `quant_bits` 4 / 8 through
bitsandbytes, and `--deepspeed zero0|zero1|zero2|zero3|zero2_offload|zero3_offload` naming
ms-swift's bundled DeepSpeed configs (swift/config/*.json: ZeRO stage, optimizer and parameter
offload to the CPU).

`megatron sft` / `megatron pt` (swift/megatron/arguments/megatron_args.py) take Megatron-LM's
arguments with underscores; they are read by the Megatron adapter's interpretation
(adapters/ms_swift_megatron.py) with ms-swift's defaults.

Other commands (`infer`, `deploy`, `export`, `eval`, `sample`, ...) and the RLHF types with a
reference or reward model beside the policy get no memory verdict, with the reason.
"""
from __future__ import annotations

import os
import re

from memlint import verdicts
from memlint.adapters import _shell
from memlint.adapters.detection import MS_SWIFT_COMMANDS as COMMANDS
from memlint.adapters.detection import MS_SWIFT_TRAINING as TRAINING
from memlint.adapters.detection import ms_swift as detect  # noqa: F401 - the adapter's detect()
from memlint.adapters.detection import ms_swift_arguments_file as arguments_file  # noqa: F401 - as before
from memlint.adapters.ms_swift_launch import SOURCE, Launch
from memlint.adapters.trainer_args import Item, apply, to_int
from memlint.diagnostics import INVALID_VALUE, PARSE_ERROR, UNRESOLVED, Severity, make
from memlint.ir import NO_ESTIMATE, NO_ESTIMATE_REASON, Partial, Provenance
from memlint.loaders import suppressions

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

FORMAT = "ms-swift"
# `torchrun ... swift/cli/sft.py --model ...` / `accelerate launch ... swift/cli/sft.py`
_ENTRY = re.compile(r"(?:^|/)swift/(?:megatron/)?cli/(%s)\.py$" % "|".join(
    re.escape(c.replace("-", "_")) for c in COMMANDS))
# RLHF types that train one model alone (no reference or reward model beside it)
_SINGLE_MODEL_RLHF = ("orpo", "simpo", "cpo", "rm")
# ms-swift's bundled DeepSpeed configs (swift/config/<name>.json): stage, optimizer / param offload
DEEPSPEED_NAMES = {"zero0": (0, "none", "none"), "zero1": (1, "none", "none"),
                   "zero2": (2, "none", "none"), "zero3": (3, "none", "none"),
                   "zero2_offload": (2, "cpu", "none"), "zero3_offload": (3, "cpu", "cpu")}
# swift's arguments that are not TrainingArguments (or mean something else there); the mapping
# below reads the ones that change memory itself
_SWIFT_ONLY = ("model", "model_name", "model_author", "model_type", "tuner_type", "train_type",
               "lora_rank", "lora_alpha", "target_modules", "quant_bits", "quant_method",
               "deepspeed", "attn_impl", "dataset", "val_dataset", "system", "template",
               "sequence_parallel_size")


# Megatron-LM arguments of `megatron sft` (swift/megatron/arguments/megatron_args.py)
_MEGATRON_ONLY = frozenset(("tensor_model_parallel_size", "pipeline_model_parallel_size",
                            "micro_batch_size", "global_batch_size", "expert_model_parallel_size"))


# -- reading ---------------------------------------------------------------------------------


def read_launch(path: str, text: str, partial: Partial) -> Optional[Launch]:
    try:
        script = _shell.parse(text)
    except _shell.ShellError as exc:
        line, column = _shell.Script(text, [], [0] + [m.end() for m in re.finditer("\n", text)]
                                     ).where(exc.offset)
        partial.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                        f"cannot read the script: {exc}",
                                        Provenance(path, line, column, None)))
        return None

    def prov(offset: int, key: Optional[str] = None) -> Provenance:
        line, column = script.where(offset)
        return Provenance(path, line, column, key)

    interpreter = _shell.Interpreter()
    for command in interpreter.run(script):
        texts = [f.text for f in command.fields]
        found = _command_at(texts)
        if found is None:
            continue
        i, tool, name, skip = found
        env = {key: (value.text, prov(value.origins[0] if value.origins else 0, key),
                     value.unresolved)
               for key, value in interpreter.env.items()
               if key in ("NPROC_PER_NODE", "NNODES", "CUDA_VISIBLE_DEVICES")
               and getattr(value, "text", None) is not None}
        words = command.fields[i + skip:]
        launch = Launch(tool, name, _items(words, prov), env,
                        prov(command.offset, f"{tool} {name}"))
        if i > 0:  # torchrun / accelerate launch in front of swift/cli/<command>.py
            launcher = [(f.text, f.origin, f.unresolved) for f in command.fields[:i]]
            # start-up: the HF Trainer's launcher reader loads only for such a launch
            from memlint.adapters.hf_trainer import _launcher
            _launcher(launcher, partial, prov)
            launch.launched = True
        if words and not words[0].text.startswith("-") and words[0].text.endswith(
                (".yaml", ".yml", ".json")):
            launch.config = (words[0].text, prov(words[0].origin, "arguments file"))
        return launch
    return None


def _command_at(texts: list) -> Optional[tuple]:
    """(index, tool, command, words to skip) of `swift CMD` / `megatron CMD` or of a
    swift/cli/CMD.py entry point in a command's words, else None."""
    for i, text in enumerate(texts):
        name = os.path.basename(text)
        if name in ("swift", "megatron") and i + 1 < len(texts) and texts[i + 1] in COMMANDS:
            return i, name, texts[i + 1], 2
        match = _ENTRY.search(text)
        if match:
            tool = "megatron" if "/megatron/" in text else "swift"
            return i, tool, match.group(1).replace("_", "-"), 1
    return None


def _items(fields: list, prov) -> list:
    """`--name v1 v2 ...` -> Items (value: the first word, or None for a bare flag; the others
    are list arguments such as --dataset)."""
    items, i = [], 0
    while i < len(fields):
        field = fields[i]
        if not field.text.startswith("--"):
            i += 1
            continue
        name, value, unresolved = field.text[2:], None, tuple(field.unresolved)
        if "=" in name:
            name, value = name.split("=", 1)
        j = i + 1
        while j < len(fields) and not fields[j].text.startswith("--"):
            if value is None:
                value, unresolved = fields[j].text, unresolved + tuple(fields[j].unresolved)
            j += 1
        items.append(Item(name.replace("-", "_"), value, prov(field.origin, f"--{name}"),
                          unresolved))
        i = j
    return items


# -- loading ---------------------------------------------------------------------------------


def load(path: str, text: str) -> Partial:
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    if os.path.basename(path).lower().endswith((".yaml", ".yml", ".json")):
        launch = read_arguments(path, text, partial)
    else:
        launch = read_launch(path, text, partial)
    if launch is None:
        partial.diagnostics.append(make(UNRESOLVED, Severity.INFO,
                                        "no `swift` / `megatron` command found; nothing was read",
                                        Provenance(path, 1, 1, None)))
        return partial
    partial.anchor = launch.anchor
    for item in launch.items:   # every argument as a fact (coverage/ms_swift.json)
        partial.set_extra(f"ms_swift.{item.name}", True if item.value is None else item.value,
                          item.prov)
    if launch.config is not None:
        _read_config(launch, partial)
    reason = _no_estimate(launch)
    if reason is not None:
        partial.set_extra(NO_ESTIMATE, reason, launch.anchor)
        if launch.command == "rlhf":   # it trains, beside models memlint does not model
            partial.set_extra(NO_ESTIMATE_REASON, verdicts.NOT_MODELED, launch.anchor)
        return partial
    if launch.command_line or "NPROC_PER_NODE" in launch.env or "NNODES" in launch.env:
        if not launch.launched:
            _world(launch, partial)
    elif launch.tool == "swift":   # (the Megatron reading says it for `megatron sft`)
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, "world size left unknown: the command that runs this "
            "arguments file gives it (NPROC_PER_NODE / NNODES, swift/cli/main.py)",
            launch.anchor, key="world_size"))
    if launch.tool == "megatron":
        # start-up: the Megatron interpretation loads only for `megatron sft`
        from memlint.adapters import ms_swift_megatron

        ms_swift_megatron.apply(launch, partial)
    else:
        _swift(launch, partial)
    return partial


def read_arguments(path: str, text: str, partial: Partial) -> Optional[Launch]:
    """An arguments file alone: the command that takes it is not in the file, so it is read as
    `swift sft` (`swift rlhf` with an rlhf_type, `megatron sft` with Megatron's parallel sizes)
    over one process unless its ENV block says more."""
    # start-up: the YAML / JSON readers load only for an arguments file
    from memlint.loaders import load_json, load_yaml

    doc = load_json(path, text) if path.lower().endswith(".json") else load_yaml(path, text)
    data = getattr(doc, "data", None)
    if not isinstance(data, dict):
        partial.diagnostics.extend(getattr(doc, "diagnostics", []))
        return None
    anchor = Provenance(path, 1, 1, None)
    tool = "megatron" if _MEGATRON_ONLY & set(data) else "swift"
    command = "rlhf" if "rlhf_type" in data else "sft"
    launch = Launch(tool, command, [], {}, anchor)
    launch.command_line = False
    _arguments(launch, data, doc)
    return launch


def _arguments(launch: Launch, data: dict, doc) -> None:
    """An arguments file's keys as arguments before the command line's (swift/cli/main.py
    parse_yaml_args: each key is `--key value`, its ENV block the environment)."""
    env = data.get("ENV")
    if isinstance(env, dict):
        for key, value in env.items():
            if key in ("NPROC_PER_NODE", "NNODES") and key not in launch.env:
                launch.env[key] = (str(value), doc.prov(("ENV", key), key), ())
    given = {item.name for item in launch.items}
    for key, value in data.items():
        if key == "ENV" or key in given:
            continue
        first = value[0] if isinstance(value, list) and value else value
        launch.items.insert(0, Item(str(key), None if first is True else str(first),
                                    doc.prov((key,), str(key))))
    launch.args = {item.name: item for item in launch.items}


def _read_config(launch: Launch, partial: Partial) -> None:
    """`swift sft config.yaml`: the file's keys are arguments (swift/cli/main.py
    parse_yaml_args, its ENV block the environment), before those on the command line. The path
    is relative to the working directory: looked for as a launcher's relative paths are."""
    # start-up: the reference resolver and the YAML reader load only for such a launch
    from memlint.adapters.registry import find_reference
    from memlint.loaders import load_json, load_yaml, read_text, repo_root

    name, prov = launch.config
    found = find_reference(name, partial.source, repo_root(partial.source))
    if found is None:
        partial.diagnostics.append(make(UNRESOLVED, Severity.WARNING,
                                        f"arguments file {name!r} not found; its settings are "
                                        "not checked", prov))
        return
    text, problems = read_text(found)
    doc = (load_json(found, text) if found.endswith(".json") else load_yaml(found, text)) \
        if text is not None else None
    data = getattr(doc, "data", None)
    if not isinstance(data, dict):
        partial.diagnostics.extend(problems + list(getattr(doc, "diagnostics", [])))
        return
    _arguments(launch, data, doc)


def _no_estimate(launch: Launch) -> Optional[str]:
    if launch.command in TRAINING:
        return None
    if launch.command == "rlhf":
        kind = str(launch.value("rlhf_type") or "dpo")
        if kind in _SINGLE_MODEL_RLHF:
            return None
        return (f"`{launch.tool} rlhf --rlhf_type {kind}` trains beside a reference, reward or "
                "teacher model (or generates rollouts): memlint does not model ms-swift's RLHF")
    return (f"`{launch.tool} {launch.command}` does not train: memlint estimates the memory of "
            "training runs")


def _world(launch: Launch, partial: Partial) -> None:
    """NPROC_PER_NODE x NNODES processes (swift/cli/main.py runs torchrun with them); one
    process without NPROC_PER_NODE, which spreads the model over every visible GPU
    (device_map) when there are several."""
    nproc, where = launch.env_int("NPROC_PER_NODE")
    nodes, node_prov = launch.env_int("NNODES")
    if "NPROC_PER_NODE" in launch.env and nproc is None:
        partial.diagnostics.append(make(UNRESOLVED, Severity.INFO,
                                        "NPROC_PER_NODE is known only when the script runs; "
                                        "world size left unknown", launch.env[
                                            "NPROC_PER_NODE"][1]))
        return
    if "NNODES" in launch.env and nodes is None:
        partial.diagnostics.append(make(UNRESOLVED, Severity.INFO,
                                        "NNODES is known only when the job runs; world size left "
                                        "unknown", launch.env["NNODES"][1]))
        return
    if nproc:
        partial.set("world_size", nproc * (nodes or 1), where)
        partial.set("gpus_per_node", nproc, where)
        return
    if "NNODES" in launch.env:
        # torchrun over NNODES nodes with the platform's NPROC_PER_NODE (1 when unset)
        partial.diagnostics.append(make(UNRESOLVED, Severity.INFO,
                                        "NNODES without NPROC_PER_NODE: the processes per node "
                                        "come from the platform; world size left unknown",
                                        launch.env["NNODES"][1]))
        return
    visible = launch.env.get("CUDA_VISIBLE_DEVICES")
    one = Provenance(launch.anchor.file, launch.anchor.line, launch.anchor.column,
                     "world size 1: no NPROC_PER_NODE, one process (swift/cli/main.py)")
    partial.set("world_size", 1, one)
    if visible is not None and not visible[2]:
        count = len([d for d in str(visible[0]).split(",") if d.strip()])
        if count > 1:
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.WARNING,
                f"one process over {count} visible GPUs (no NPROC_PER_NODE): ms-swift spreads "
                "the model's layers over them (device_map), which memlint does not model; the "
                "estimate is for one GPU holding everything (too high)", visible[1]))


def _swift(launch: Launch, partial: Partial) -> None:
    """`swift sft|pt`: HF TrainingArguments with ms-swift's defaults (module doc)."""
    assumed: list = []
    items = [i for i in launch.items if i.name not in _SWIFT_ONLY]
    model = launch.args.get("model")
    if model is not None:
        items.append(Item("model_name_or_path", model.value, model.prov, model.unresolved))
    attn = launch.args.get("attn_impl")
    if attn is not None:
        items.append(Item("attn_implementation", attn.value, attn.prov, attn.unresolved))
    if "torch_dtype" not in launch.args:
        assumed.append(f"torch_dtype = the checkpoint's own, bf16 assumed ({SOURCE} "
                       "swift/arguments/base_args/model_args.py _init_torch_dtype)")
    dtype = str(launch.value("torch_dtype") or "bfloat16")
    if "bf16" not in launch.args and "fp16" not in launch.args:
        # _init_mixed_precision: bf16 training for a bf16 model, fp16 for fp16 / fp32 ones
        flag = "bf16" if dtype in ("bfloat16", "bf16") else "fp16"
        items.append(Item(flag, "true", launch.anchor))
    lora = _tuner(launch, partial)
    _deepspeed(launch, partial)
    _sequence_parallel(launch, partial)
    _grad_accum(launch, partial, assumed)
    defaults = {"micro_batch": (1, f"{SOURCE} swift/trainers/arguments.py: "
                                   "per_device_train_batch_size defaults to 1"),
                "recompute": ("full", f"{SOURCE} swift/trainers/arguments.py: "
                                      "gradient_checkpointing defaults to True"),
                "dtype": ("bf16", "ms-swift's torch_dtype None: the checkpoint's own (bf16 "
                                  "assumed)")}
    apply(items, partial, "hf", launch.anchor, defaults=defaults, lora=lora, assumed=assumed)
    if "gradient_checkpointing" not in launch.args:
        partial.set("recompute", "full", Provenance(
            launch.anchor.file, launch.anchor.line, launch.anchor.column,
            f"gradient_checkpointing default True ({SOURCE} swift/trainers/arguments.py)"))


def _tuner(launch: Launch, partial: Partial) -> bool:
    """LoRA (the default tuner_type) or full; QLoRA through quant_bits. True for LoRA."""
    item = launch.args.get("tuner_type") or launch.args.get("train_type")
    kind = str(item.value) if item is not None and item.value else "lora"
    where = item.prov if item is not None else Provenance(
        launch.anchor.file, launch.anchor.line, launch.anchor.column,
        f"tuner_type default lora ({SOURCE} swift/arguments/base_args/base_args.py)")
    if kind == "full":
        return False
    if kind not in ("lora", "longlora", "adalora", "lora_llm"):
        partial.set_extra(NO_ESTIMATE, f"tuner_type {kind} is not modeled (memlint counts LoRA "
                          "and full fine-tuning)", where)
        partial.set_extra(NO_ESTIMATE_REASON, verdicts.NOT_MODELED, where)
        return False
    rank = to_int(launch.value("lora_rank") or 8) or 8
    partial.set("lora_rank", rank, launch.args["lora_rank"].prov if "lora_rank" in launch.args
                else where)
    targets = launch.args.get("target_modules")
    partial.set("lora_targets", "all-linear" if targets is None or str(targets.value) in (
        "all-linear", "all_linear") else "qkvo", targets.prov if targets is not None else where)
    if targets is not None and str(targets.value) not in ("all-linear", "all_linear"):
        partial.diagnostics.append(make(UNRESOLVED, Severity.INFO,
                                        f"target_modules {targets.value!r}: counted as the "
                                        "attention projections", targets.prov))
    bits = launch.args.get("quant_bits")
    if bits is not None and not bits.unresolved:
        quant = {"4": "nf4", "8": "int8"}.get(str(bits.value))
        if quant is None:
            partial.diagnostics.append(make(INVALID_VALUE, Severity.WARNING,
                                            f"quant_bits {bits.value!r}: only bitsandbytes 4 / "
                                            "8 bit are modeled", bits.prov))
        else:
            partial.set("base_quant", quant, bits.prov)
    return True


def _deepspeed(launch: Launch, partial: Partial) -> None:
    item = launch.args.get("deepspeed")
    if item is None or item.unresolved or not item.value:
        return
    name = str(item.value)
    if name in DEEPSPEED_NAMES:
        stage, optimizer, params = DEEPSPEED_NAMES[name]
        partial.set("framework", "deepspeed", item.prov)
        partial.set("zero", stage, item.prov)
        if optimizer != "none":
            partial.set("offload_optimizer", optimizer, item.prov)
        if params != "none":
            partial.set("offload_params", params, item.prov)
        return
    partial.set("framework", "deepspeed", item.prov)
    partial.references.append((name, item.prov))


def _sequence_parallel(launch: Launch, partial: Partial) -> None:
    """`--sequence_parallel_size N`: ms-swift's Ulysses / ring-attention sequence parallelism
    (swift/sequence_parallel): each GPU holds 1/N of the sequence in every layer, as context
    parallelism does; it is counted as cp = N."""
    item = launch.args.get("sequence_parallel_size")
    size = to_int(item.value) if item is not None and not item.unresolved else None
    if size and size > 1:
        partial.set("cp", size, item.prov)
        partial.diagnostics.append(make(UNRESOLVED, Severity.INFO,
                                        f"sequence_parallel_size {size}: ms-swift's Ulysses / "
                                        f"ring sequence parallelism, counted as cp = {size} (the "
                                        "sequence split over the GPUs in every layer)",
                                        item.prov))


def _grad_accum(launch: Launch, partial: Partial, assumed: list) -> None:
    """ms-swift's default: ceil(16 / per_device_train_batch_size / world size)."""
    if "gradient_accumulation_steps" in launch.args:
        return
    batch = to_int(launch.value("per_device_train_batch_size") or 1) or 1
    world = partial.settings.get("world_size")
    if world is None:
        return
    accum = max(1, -(-16 // (batch * int(world.value))))
    partial.set("grad_accum", accum, Provenance(
        launch.anchor.file, launch.anchor.line, launch.anchor.column,
        f"gradient_accumulation_steps default ceil(16 / {batch} / {world.value}) ({SOURCE} "
        "swift/trainers/arguments.py)"))
    assumed.append(f"grad_accum = {accum} (ms-swift's ceil(16 / batch / world size))")
