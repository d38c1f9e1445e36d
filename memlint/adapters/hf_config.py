"""HF `config.json` adapter: every key becomes a `model.<key>` setting with its position.

Nested configs (VLMs' `text_config` / `vision_config`) become dotted keys
(`model.vision_config.hidden_size`). The architecture itself is interpreted by
`memlint.memory.params.architecture`, so that configs from any source (this file, a Megatron
script, a torchtitan flavor) go through one reader.
"""
from __future__ import annotations

import os

from memlint.adapters._neighbours import training_arguments
from memlint.adapters._toplevel import top_level_keys
from memlint.ir import Partial
from memlint.loaders import MAX_FILE_BYTES, load_json_mapping, read_text

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Iterator

FORMAT = "hf_config"
# PretrainedConfig's own top-level keys; nested ones do not count (a trainer config with a
# "model": {"num_hidden_layers": ...} section is not a model config).
_SENTINELS = ("model_type", "architectures", "num_hidden_layers", "n_layer")


def detect(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    if not name.endswith(".json"):
        return False
    if name == "config.json":
        return True
    if training_arguments(text):
        return False  # ms-swift / HF argument files carry a model_type too (_neighbours)
    keys = top_level_keys(text)
    return len(keys.intersection(_SENTINELS)) >= 2 or (
        "model_type" in keys and not keys.intersection(
            ("zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu")))


def flatten(data: dict, prefix: str = "") -> Iterator[tuple]:
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and key.endswith("_config"):
            yield from flatten(value, name + ".")
        else:
            yield name, value


def load(path: str, text: str) -> Partial:
    partial = Partial(source=path, fmt=FORMAT)
    doc = load_json_mapping(path, text, "an HF config.json", partial.diagnostics)
    if doc is None:
        return partial
    for key, value in flatten(doc.data):
        path_tuple = tuple(key.split("."))
        partial.set(f"model.{key}", value, doc.prov(path_tuple, key))
    return partial


def load_path(path: str, max_bytes: int = MAX_FILE_BYTES) -> Partial:
    text, diagnostics = read_text(path, max_bytes)
    if text is None:
        partial = Partial(source=path, fmt=FORMAT)
        partial.diagnostics.extend(diagnostics)
        return partial
    return load(path, text)
