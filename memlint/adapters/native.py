"""memlint scenario files: the DESIGN.md scenario keys, written down next to the configs.

Recognised files:
- `memlint.toml` and `*.memlint.toml`: the keys at the top level, or under `[scenario]`;
- `pyproject.toml` with a `[tool.memlint.scenario]` table;
- `.yaml` / `.yml` files with a top-level `memlint:` or `scenario:` mapping (and `*.memlint.yaml`).

Nested tables become dotted keys (`[model] hidden_size = 4096` is `model.hidden_size`,
`[activations] c_act = 34` is the assumption `activations.c_act`). Two keys are special:
`files = [...]` lists the other files of the same run (followed as references, relative to this
file), and in a `[model]` table `preset` or `path` name the model (the `model` key itself).
"""
from __future__ import annotations

import os

from memlint.adapters.detection import native as detect  # noqa: F401 - the adapter's detect()
from memlint.diagnostics import PARSE_ERROR, Severity, make
from memlint.ir import Partial, Provenance, Setting
from memlint.loaders import load_toml, load_yaml, suppressions

FORMAT = "native"

_MODEL_SOURCE_KEYS = ("preset", "path")


def _table(data, name: str) -> tuple:
    """(the scenario mapping, its key path in the document)."""
    if not isinstance(data, dict):
        return None, ()
    if name == "pyproject.toml":
        tool = data.get("tool")
        memlint = tool.get("memlint") if isinstance(tool, dict) else None
        scenario = memlint.get("scenario") if isinstance(memlint, dict) else None
        return scenario, ("tool", "memlint", "scenario")
    for key in ("scenario", "memlint"):
        if isinstance(data.get(key), dict):
            return data[key], (key,)
    if name.endswith((".yaml", ".yml")) and not name.endswith((".memlint.yaml", ".memlint.yml")):
        return None, ()
    return data, ()


def load(path: str, text: str) -> Partial:
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    name = os.path.basename(path).lower()
    doc = load_toml(path, text) if name.endswith(".toml") else load_yaml(path, text)
    partial.diagnostics.extend(doc.diagnostics)
    if doc.data is None:
        return partial
    table, base = _table(doc.data, name)
    if table is None:
        partial.diagnostics.append(make(
            PARSE_ERROR, Severity.ERROR,
            "no scenario table (expected a top-level `memlint:` or `scenario:` mapping)",
            Provenance(path, 1, 1, None)))
        return partial
    if not isinstance(table, dict):
        partial.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                        "the scenario must be a table of key = value",
                                        doc.prov(base)))
        return partial
    for keys, value in _flatten(table, ()):
        prov = doc.prov(base + keys, ".".join(map(str, keys)))
        dotted = ".".join(map(str, keys))
        if keys == ("files",):
            items = value if isinstance(value, list) else [value]
            for index, item in enumerate(items):
                item_prov = doc.prov(base + keys + (index,), "files")
                if not isinstance(item, str) or not item.strip():
                    partial.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                                    f"files: expected a path, got {item!r}",
                                                    item_prov, key="files"))
                    continue
                partial.references.append(Setting(item, item_prov))
            continue
        if len(keys) == 2 and keys[0] == "model" and keys[1] in _MODEL_SOURCE_KEYS:
            dotted = "model"
        partial.set(dotted, value, prov)
    return partial


def _flatten(table: dict, prefix: tuple):
    for key, value in table.items():
        keys = prefix + (str(key),)
        if isinstance(value, dict):
            yield from _flatten(value, keys)
        else:
            yield keys, value
