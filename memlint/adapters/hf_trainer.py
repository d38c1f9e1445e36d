"""Hugging Face Trainer / TRL arguments, wherever they are written.

Three places hold `TrainingArguments` (transformers) and TRL's `SFTConfig` / `DPOConfig` /
`ModelConfig` fields:
- a launch script: `torchrun` / `python -m torch.distributed.run` / `accelerate launch` /
  `deepspeed` / `python`, then `train.py --per_device_train_batch_size 4 --bf16 ...` (read with
  `memlint.adapters._shell`, never executed; the launcher's process counts give the world size);
- a YAML recipe (TRL, alignment-handbook, open-instruct): the same fields as keys;
- a JSON argument file (`HfArgumentParser.parse_json_file`), also when a script passes one as its
  only argument (`python train.py args.json`).
This module finds and reads them into `Item`s (detection, the argument mapping, the launch
script's command line); `memlint.adapters.trainer_args` maps the items onto scenario keys with
the trainers' defaults, compares a named `deepspeed` file's explicit values with the Trainer's,
and reports what a verdict rests on that no file gave. Arguments memlint does not know are the
script's own (every training script adds some): they are not reported. A launch script that runs
`llamafactory-cli train --flags` goes to `memlint.adapters.llamafactory`.
"""
from __future__ import annotations

import os

from memlint import lazy_import

from memlint.adapters._values import to_bool, to_int  # noqa: F401 - hf_trainer.to_int, as before
from memlint.adapters.detection import hf_trainer as detect  # noqa: F401 - the adapter's detect()
from memlint.diagnostics import PARSE_ERROR, SCHEMA_ERROR, UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance
from memlint.loaders import load_json, load_yaml, suppressions

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

FORMAT = "hf_trainer"

# start-up: the argument mapping (trainer_args, and llamafactory for `llamafactory-cli train`)
# loads when a file is read, not when one is only detected (a DeepSpeed JSON is offered here first)
trainer_args = lazy_import.module("memlint.adapters.trainer_args")
llamafactory = lazy_import.module("memlint.adapters.llamafactory")
# the names other readers took from this module before the mapping moved to trainer_args
_MOVED = ("Item", "apply", "check_deepspeed", "local_or_hub_model", "mapping_items", "trainer_of")


def __getattr__(name: str):
    if name in _MOVED:
        return getattr(trainer_args, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- loading ---------------------------------------------------------------------------------


def load(path: str, text: str) -> Partial:
    name = os.path.basename(path).lower()
    if name.endswith((".yaml", ".yml", ".json")):
        partial, items = _load_mapping(path, text)
        script = ""
    else:
        partial, items, script = _load_script(path, text)
    if items is None:
        return partial
    if not items and partial.references:
        return partial  # `python train.py args.yaml`: the arguments file holds them all
    if script == _LLAMAFACTORY_CLI:
        llamafactory.apply_items(partial, items, path)
        return partial
    anchor = Provenance(path, 1, 1, None)
    args = trainer_args.apply(items, partial, trainer_args.trainer_of(items, script), anchor,
                              script=script)
    trainer_args.check_deepspeed(partial, args, path)
    return partial


def _load_mapping(path: str, text: str) -> tuple:
    partial = Partial(source=path, fmt=FORMAT)
    if path.lower().endswith(".json"):
        doc = load_json(path, text, allow_comments=False)
    else:
        partial.suppressions = suppressions(text)
        doc = load_yaml(path, text)
    partial.diagnostics.extend(doc.diagnostics)
    if doc.data is None:
        return partial, None
    if not isinstance(doc.data, dict):
        partial.diagnostics.append(make(SCHEMA_ERROR, Severity.ERROR,
                                        "Trainer arguments must be a mapping",
                                        Provenance(path, 1, 1, None)))
        return partial, None
    return partial, trainer_args.mapping_items(doc, doc.data)


_ENTRY_MODULES = ("torch.distributed.run", "torch.distributed.launch")
_LAUNCH_OPTIONS = {"nproc_per_node": "per_node", "nproc-per-node": "per_node",
                   "num_gpus": "per_node", "num-gpus": "per_node", "nnodes": "nodes",
                   "num_nodes": "nodes", "num-nodes": "nodes", "num_processes": "total",
                   "num-processes": "total", "num_machines": "nodes", "num-machines": "nodes",
                   "config_file": "config", "config-file": "config"}


def _load_script(path: str, text: str) -> tuple:
    """The first command that runs a Python entry point with --flags: its arguments, and the
    launcher's process counts."""
    # start-up: the shell reader and other adapters load only for a file that needs them
    from memlint.adapters import _shell

    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    try:
        script = _shell.parse(text)
    except _shell.ShellError as exc:
        line, column = _where(text, exc.offset)
        partial.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                        f"cannot read the script: {exc}",
                                        Provenance(path, line, column, None)))
        return partial, None, ""

    def prov(offset: int, key: Optional[str] = None) -> Provenance:
        line, column = script.where(offset)
        return Provenance(path, line, column, key)

    expander = _shell.Expander()
    for command in script.commands:
        words = list(command.words)
        while words and _shell.assignment(words[0]) is not None:
            _set_variable(expander, words.pop(0))
        if words and _literal(words[0]) in ("export", "declare", "local", "readonly"):
            for word in words[1:]:
                if _shell.assignment(word) is not None:
                    _set_variable(expander, word)
            continue
        fields = [(f.text, f.origin, f.unresolved) for w in words for f in expander.fields(w)]
        entry = _entry(fields)
        if entry is None:
            continue
        tail = fields[entry + 1:]
        if not any(t.startswith("--") for t, _, _ in tail) and not (
                tail and tail[0][0].endswith((".json", ".yaml", ".yml"))):
            continue
        _launcher(fields[:entry], partial, prov)
        script_name = fields[entry][0]
        if entry > 0 and fields[entry - 1][0] in ("llamafactory-cli", "lmf"):
            script_name = _LLAMAFACTORY_CLI
        if tail and tail[0][0].endswith((".json", ".yaml", ".yml")) and not tail[0][0].startswith(
                "-"):
            partial.references.append((tail[0][0], prov(tail[0][1], "arguments file")))
            tail = tail[1:]
        return partial, _argv(tail, prov), script_name
    partial.diagnostics.append(make(
        UNRESOLVED, Severity.INFO,
        "no training command found (a command running a .py entry point with --flags); nothing "
        "was read from this script", Provenance(path, 1, 1, None)))
    return partial, None, ""


def _where(text: str, offset: int) -> tuple:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _literal(word) -> str:
    return "".join(s.text for s in word.segs if s.kind == "lit")


def _set_variable(expander, word) -> None:
    # start-up: the shell reader and other adapters load only for a file that needs them
    from memlint.adapters import _shell

    name, append, prefix = _shell.assignment(word)
    if word.array is not None:
        expander.env[name] = _shell.Value(items=expander.array_value(word))
        return
    value = expander.assign_value(word, prefix)
    current = expander.env.get(name)
    if append and current is not None and current.items is None:
        value = _shell.Value(current.text + value.text, [*current.origins, *value.origins],
                             current.unresolved + value.unresolved)
    expander.env[name] = value


_LLAMAFACTORY_CLI = "llamafactory-cli train"


def _entry(fields: list) -> Optional[int]:
    """Index of the training script (`train.py`), of the module after `-m` that is not a
    launcher module, or of `train` in `llamafactory-cli train`."""
    for index, (text, _, _) in enumerate(fields):
        if text in ("llamafactory-cli", "lmf") and index + 1 < len(fields) and \
                fields[index + 1][0] == "train":
            return index + 1
        if text.endswith(".py") and not text.startswith("-"):
            return index
        if text == "-m" and index + 1 < len(fields):
            module = fields[index + 1][0]
            if module not in _ENTRY_MODULES and not module.startswith("-"):
                return index + 1
    return None


def _launcher(fields: list, partial: Partial, prov) -> None:
    """torchrun --nproc_per_node N --nnodes M, deepspeed --num_gpus N --num_nodes M, accelerate
    launch --num_processes N (all processes) --config_file F -> world_size."""
    found: dict = {}
    i = 0
    while i < len(fields):
        text, offset, unresolved = fields[i]
        name, value = text.lstrip("-"), None
        if "=" in name and text.startswith("-"):
            name, value = name.split("=", 1)
        elif text.startswith("--") and name in _LAUNCH_OPTIONS and i + 1 < len(fields):
            value, unresolved = fields[i + 1][0], fields[i + 1][2]
            i += 1
        kind = _LAUNCH_OPTIONS.get(name)
        if kind is not None and value is not None:
            found[kind] = (value, prov(offset, text.split("=")[0]), unresolved)
        i += 1
    config = found.get("config")
    if config is not None and not config[2]:
        partial.references.append((config[0], config[1]))
        partial.set_extra("hf_trainer.launcher_config", config[0], config[1])
    total = found.get("total")
    per_node, nodes = found.get("per_node"), found.get("nodes")
    if total is not None and not total[2] and to_int(total[0]):
        partial.set("world_size", to_int(total[0]), total[1])
    elif per_node is not None and not per_node[2] and to_int(per_node[0]):
        count = to_int(per_node[0])
        node_count = to_int(nodes[0]) if nodes is not None and not nodes[2] else None
        if nodes is not None and node_count is None:
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.INFO, f"{nodes[1].key} {nodes[0]}: the node count is not "
                "known statically; world size left unknown", nodes[1], key=nodes[1].key))
            return
        partial.set("world_size", count * (node_count or 1), per_node[1])
        partial.set("gpus_per_node", count, per_node[1])


def _argv(words: list, prov) -> list:
    """`--name value`, `--name=value`, bare `--flag` -> Items (dashes in names become '_')."""
    items: list = []
    i = 0
    while i < len(words):
        text, offset, unresolved = words[i]
        if not text.startswith("--"):
            i += 1
            continue
        name, value = text[2:], None
        if "=" in name:
            name, value = name.split("=", 1)
        elif i + 1 < len(words) and not words[i + 1][0].startswith("--"):
            value, unresolved = words[i + 1][0], tuple(unresolved) + tuple(words[i + 1][2])
            i += 1
        items.append(trainer_args.Item(name.replace("-", "_"), value,
                                       prov(offset, text.split("=")[0]), tuple(unresolved)))
        i += 1
    return items
