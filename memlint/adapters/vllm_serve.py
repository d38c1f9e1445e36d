"""`vllm serve` command lines and vLLM's YAML config files: one inference engine to estimate.

A script runs `vllm serve MODEL --flag value ...` (or `python -m vllm.entrypoints.openai.api_server
--model MODEL ...`), optionally with `--config file.yaml`, a flat mapping of the same flags without
their dashes (vllm/utils/argparse_utils.py load_config_file; the command line wins over it). Read
statically (never executed) against vLLM 0.12.0's engine arguments (vllm/engine/arg_utils.py):
- `--gpu-memory-utilization` (0.9, config/cache.py:49), `--tensor-parallel-size` / `-tp`,
  `--pipeline-parallel-size` / `-pp`, `--data-parallel-size` / `-dp`, `--max-model-len` (the
  model's own context when absent), `--max-num-seqs` and `--max-num-batched-tokens` (for the API
  server on a GPU of 70 GiB or more that is not an A100: 1024 and 8192, else 256 and 2048,
  arg_utils.py:1827-1845), `--kv-cache-dtype`, `--quantization`, `--dtype`, `--enforce-eager`.
The estimate is the engine's budget on one GPU (memory/rl/engine.py): weights, profile-run peak,
memory outside PyTorch, the KV pool, its CUDA-graph pool, the concurrency at max_model_len, and
vLLM's own start-up refusals (rule ML802).
"""
from __future__ import annotations

import os
import re

from memlint import verdicts
from memlint.adapters.detection import vllm_serve as detect  # noqa: F401 - the adapter's detect()
from memlint.diagnostics import UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance
from memlint.keys import parse_bool
from memlint.loaders import load_yaml, read_text, suppressions

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

FORMAT = "vllm-serve"
SOURCE = "vllm-project/vllm v0.12.0 (4fd9d6a85) vllm/engine/arg_utils.py"
# flags (without dashes, underscores as dashes) -> (scenario key, kind)
FLAGS = {
    "tensor-parallel-size": ("engine.tp", int), "tp": ("engine.tp", int),
    "pipeline-parallel-size": ("engine.pp", int), "pp": ("engine.pp", int),
    "data-parallel-size": ("engine.dp", int), "dp": ("engine.dp", int),
    "gpu-memory-utilization": ("engine.gpu_memory_utilization", float),
    "max-model-len": ("engine.max_model_len", "length"),
    "max-num-seqs": ("engine.max_num_seqs", int),
    "max-num-batched-tokens": ("engine.max_num_batched_tokens", int),
    "kv-cache-dtype": ("engine.kv_cache_dtype", str), "quantization": ("engine.quantization", str),
    "q": ("engine.quantization", str), "dtype": ("engine.dtype", str),
    "enforce-eager": ("engine.enforce_eager", bool),
}
_SHORT = {"-tp": "tp", "-pp": "pp", "-dp": "dp", "-q": "q"}


def load(path: str, text: str) -> Partial:
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    if path.lower().endswith((".yaml", ".yml")):
        anchor = Provenance(path, 1, 1, "config")
        items = _yaml_items(path, text, partial)
    else:
        found = _script_items(path, text, partial)
        if found is None:
            return partial
        items, anchor = found
    partial.anchor = anchor
    _apply(items, partial, anchor)
    return partial


def _yaml_items(path: str, text: str, partial: Partial) -> dict:
    doc = load_yaml(path, text)
    partial.diagnostics.extend(doc.diagnostics)
    if not isinstance(doc.data, dict):
        return {}
    return {str(k).replace("_", "-"): (v, doc.prov((k,), str(k)), ()) for k, v in doc.data.items()}


def _script_items(path: str, text: str, partial: Partial) -> Optional[tuple]:
    # start-up: the shell reader loads only for a script
    from memlint.adapters import _script, _shell

    parsed = _script.parse(path, text, partial)
    if parsed is None:
        return None
    script, prov = parsed

    interpreter = _shell.Interpreter()
    for command in interpreter.run(script):
        texts = [f.text for f in command.fields]
        start = _start(texts)
        if start is None:
            continue
        fields = command.fields[start:]
        items: dict = {}
        if fields and not fields[0].text.startswith("-"):
            items["model"] = (fields[0].text, prov(fields[0].origin, "model"),
                              tuple(fields[0].unresolved))
            fields = fields[1:]
        items.update(_flags(fields, prov))
        config = items.pop("config", None)
        if config is not None and not config[2]:
            base = items
            items = _config_file(str(config[0]), path, partial)
            items.update(base)   # the command line wins over the config file
        _notes(interpreter, prov, partial)
        return items, prov(command.offset, "launch command")
    _notes(interpreter, prov, partial)
    partial.diagnostics.append(make(UNRESOLVED, Severity.INFO, "no `vllm serve` command found; "
                                    "nothing was read from this script",
                                    Provenance(path, 1, 1, None)))
    return None


def _notes(interpreter, prov, partial: Partial) -> None:
    for offset, message in interpreter.notes:
        partial.diagnostics.append(make(UNRESOLVED, Severity.INFO, message, prov(offset)))


def _start(texts: list) -> Optional[int]:
    for index, text in enumerate(texts):
        if text == "serve" and index > 0 and texts[index - 1].endswith("vllm"):
            return index + 1
        if text == "vllm.entrypoints.openai.api_server":
            return index + 1
    return None


def _flags(fields: list, prov) -> dict:
    items: dict = {}
    i = 0
    while i < len(fields):
        text = fields[i].text
        if not text.startswith("-"):
            i += 1
            continue
        name, value = (_SHORT.get(text) or text.lstrip("-")).replace("_", "-"), None
        unresolved = tuple(fields[i].unresolved)
        if "=" in name:
            name, value = name.split("=", 1)
        elif i + 1 < len(fields) and not fields[i + 1].text.startswith("-"):
            value, unresolved = fields[i + 1].text, unresolved + tuple(fields[i + 1].unresolved)
            i += 1
        items[name] = (value if value is not None else True, prov(fields[i].origin, text),
                       unresolved)
        i += 1
    return items


def _config_file(name: str, script: str, partial: Partial) -> dict:
    path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(script)), name))
    if not os.path.isfile(path):
        return {}
    text, problems = read_text(path)
    partial.diagnostics.extend(problems)
    return _yaml_items(path, text, partial) if text is not None else {}


def _apply(items: dict, partial: Partial, anchor: Provenance) -> None:
    partial.set("rl.algorithm", "serve", anchor)
    partial.set("engine.name", "vllm", anchor)
    model = items.get("model")
    if model is not None and model[2]:
        partial.diagnostics.append(make(UNRESOLVED, Severity.INFO, "the served model is not known "
                                        f"statically ({', '.join(model[2])}): give --model",
                                        model[1], key="model",
                                        no_estimate=verdicts.RUNTIME_VALUE))
    elif model is not None and str(model[0]).strip():
        # start-up: the shared Hub-id / local-folder rule of the HF trainer reader
        from memlint.adapters.trainer_args import local_or_hub_model

        local_or_hub_model(str(model[0]).strip(), model[1], partial)
    gpus = 1
    for name, (key, kind) in FLAGS.items():
        item = items.get(name)
        if item is None:
            continue
        value, prov, unresolved = item
        if unresolved:
            partial.diagnostics.append(make(UNRESOLVED, Severity.INFO, f"--{name}: not known "
                                            "statically", prov, key=name))
            continue
        if kind == "length" and str(value).lower() in ("auto", "-1"):
            continue   # vLLM fits the longest length the memory allows
        if kind is bool:
            partial.set(key, parse_bool(value) is not False, prov)
            continue
        converted = value
        if kind is float:
            try:
                converted = float(value)
            except ValueError:
                converted = value   # the key's own check reports it
        if kind in (int, "length"):
            converted = _size(str(value))
            if converted is None:
                continue
        partial.set(key, converted, prov)
        if key in ("engine.tp", "engine.pp", "engine.dp") and isinstance(converted, int):
            gpus *= converted
    partial.set("world_size", gpus, anchor)


def _size(text: str) -> Optional[int]:
    """vLLM's human-readable integers: 32768, 32k, 1M (arg_utils.py human_readable_int)."""
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([kKmMgG]?)", text.strip())
    if match is None:
        return None
    scale = {"": 1, "k": 1000, "m": 10**6, "g": 10**9}[match.group(2).lower()]
    if match.group(2).isupper():
        scale = {"K": 1024, "M": 1024**2, "G": 1024**3}[match.group(2)]
    whole, _, fraction = match.group(1).partition(".")
    # exact integers (int(float(...)) overflowed on a 400-digit length): the key's own check
    # then refuses a value too large, with its position
    return int(whole) * scale + int(fraction or 0) * scale // 10 ** len(fraction)
