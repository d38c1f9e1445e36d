"""HF `config.json` adapter: every key becomes a `model.<key>` setting with its position.

Nested configs (VLMs' `text_config` / `vision_config`) become dotted keys
(`model.vision_config.hidden_size`). The architecture itself is interpreted by
`memlint.memory.params.architecture`, so that configs from any source (this file, a Megatron
script, a torchtitan flavor) go through one reader.
"""
from __future__ import annotations

from memlint.adapters.detection import hf_config as detect  # noqa: F401 - the adapter's detect()
from memlint.ir import Partial
from memlint.loaders import MAX_FILE_BYTES, load_json_mapping, read_text

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Iterator

FORMAT = "hf_config"


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
