"""The DeepSpeed config schema memlint ships (ds_config*.json; for editors and SchemaStore).

Built from two sources, both pinned to the same DeepSpeed commit:
- memlint's own validation schema (memlint/adapters/deepspeed.schema.json: which blocks
  DeepSpeed validates with pydantic, each value's lax-mode type, "auto");
- the fields DeepSpeed's config classes declare (deepspeed_fields.json, read from the
  source by bench/deepspeed_fields.py): each key's default, its alias, and for a deprecated key
  the key that replaces it.

What DeepSpeed accepts, this schema accepts: unknown top-level keys (DeepSpeed ignores them:
`_comment`, `comms_config`, keys of other versions) and unknown keys in the blocks that DeepSpeed
reads with get_scalar_param or whose fields changed across versions; only the blocks DeepSpeed's
pydantic models close (`extra="forbid"`: zero_optimization, its offload blocks, fp16, bf16, ...)
reject a key they do not define. Every key has a description (memlint's words, from
deepspeed_descriptions.json where written, else what the source says of it: its class,
file and default) and, where DeepSpeed gives one, its default.
"""
from __future__ import annotations

import copy
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
INTERNAL = os.path.join(os.path.dirname(HERE), "adapters", "deepspeed.schema.json")
FIELDS = os.path.join(HERE, "deepspeed_fields.json")
WORDS = os.path.join(HERE, "deepspeed_descriptions.json")
ID = "https://json.schemastore.org/deepspeed.json"


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


class _Facts:
    """Defaults and deprecations by dotted key path, from deepspeed_fields.json."""

    def __init__(self, data: dict):
        self.classes, self.blocks, self.constants = (data["classes"], data["blocks"],
                                                     data["constants"])
        self.source = data["source"]

    def class_of(self, path: tuple):
        """The pydantic class that reads the block at `path` (None: get_scalar_param)."""
        if not path:
            return None
        name = self.blocks.get(path[0])
        for key in path[1:]:
            if name is None:
                return None
            name = self.field(name, key)[1].get("model")
        return name

    def field(self, cls: str, key: str) -> tuple:
        """(the field's name, what the source says of it) for a key or its alias."""
        fields = self.classes[cls]["fields"]
        if key in fields:
            return key, fields[key]
        return next(((n, f) for n, f in fields.items() if f.get("alias") == key), (key, {}))

    def of(self, path: tuple) -> dict:
        """What the source says of the key at `path`: default, deprecation, class and file."""
        cls = self.class_of(path[:-1])
        if cls is not None:
            name, found = self.field(cls, path[-1])
            info = dict(found)
            if info:
                info["name"] = name
                info["where"] = f"{cls}.{name} ({self.classes[cls]['file']})"
            return info
        block = self.constants.get(".".join(path[:-1]))
        if block and path[-1] in block["defaults"]:
            return {"default": block["defaults"][path[-1]],
                    "where": f"{path[-1]} ({block['file']})"}
        return {}


def _block(node: dict, defs: dict):
    """The object schema (with properties) that a property's schema is or refers to."""
    if "$ref" in node:
        return _block(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    if "properties" in node:
        return node
    for branch in node.get("anyOf", ()):
        found = _block(branch, defs)
        if found is not None:
            return found
    return None


def _canonical(path: tuple, info: dict) -> str:
    """The path that carries the text of a second spelling: a field's name for its alias
    (stage3_prefetch_bucket_size -> prefetch_bucket_size), bf16 for the bfloat16 block."""
    parts = list(path)
    if parts[0] == "bfloat16":
        parts[0] = "bf16"
    if info.get("name"):
        parts[-1] = info["name"]
    return ".".join(parts)


def _describe(prop: dict, path: tuple, facts: _Facts, words: dict) -> None:
    info = facts.of(path)
    dotted = ".".join(path)
    if info.get("default") is not None:
        prop["default"] = info["default"]
    if info.get("deprecated"):
        prop["deprecated"] = True
        replacement = info.get("new_param")
        prop["deprecationMessage"] = (f"deprecated by DeepSpeed; use {replacement} instead"
                                      if replacement else "deprecated by DeepSpeed")
    text = words.get(dotted) or words.get(_canonical(path, info)) or prop.get("description")
    if not text:
        where = info.get("where")
        text = f"DeepSpeed {where}" if where else f"DeepSpeed config key {dotted}"
        if "default" in info:
            text += f"; default {json.dumps(info['default'])}"
    prop["description"] = text


def _walk(node: dict, path: tuple, facts: _Facts, words: dict, defs: dict, done: set) -> None:
    block = _block(node, defs)
    if block is None or id(block) in done:
        return
    done.add(id(block))
    if block.get("x-unknown-keys") == "warning" or not path:
        # DeepSpeed ignores the key (or only some versions refuse it): accept it
        block.pop("additionalProperties", None)
    for key, prop in block.get("properties", {}).items():
        _describe(prop, path + (key,), facts, words)
        _walk(prop, path + (key,), facts, words, defs, done)


def _strip(node):
    """memlint's own keywords (x-unknown-keys, ...) are not part of the published schema."""
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if not k.startswith("x-")}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def build() -> dict:
    """The published DeepSpeed schema (deterministic: the same facts give the same JSON)."""
    schema = copy.deepcopy(_load(INTERNAL))
    facts, words = _Facts(_load(FIELDS)), _load(WORDS)
    words.pop("_about", None)
    _walk(schema, (), facts, words, schema["$defs"], set())
    out = _strip(schema)
    out.pop("version", None)
    out.update({
        "$id": ID,
        "title": "DeepSpeed configuration (ds_config.json)",
        "description": "The JSON (or HJSON) config DeepSpeed reads (deepspeed.initialize(config="
                       "...), --deepspeed_config, the HF Trainer's deepspeed=...). Keys, types, "
                       f"defaults and deprecations of DeepSpeed at {facts.source}.",
        "$comment": "Made by memlint (`memlint schema deepspeed`) from DeepSpeed's config "
                    f"classes and constants at {facts.source}. Unknown top-level keys are "
                    "allowed because DeepSpeed ignores them; the blocks its pydantic models "
                    "validate with extra=\"forbid\" reject unknown keys, as DeepSpeed does.",
    })
    return out
