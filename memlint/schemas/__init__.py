"""JSON Schemas memlint publishes (`memlint schema NAME`, and as files in this folder).

    memlint          memlint.toml / *.memlint.toml (the scenario keys, files)
    tool-memlint     [tool.memlint] of pyproject.toml (SchemaStore's pyproject schema can refer
                     to it for its tool.memlint table)
    deepspeed        DeepSpeed's ds_config*.json (memlint/schemas/deepspeed.py)
    catalog          the SchemaStore catalog entries (fileMatch patterns) for the three

`build(name)` makes one; the `<name>.schema.json` files beside this module are the same JSON,
written by `python -m memlint.schemas` and kept current by tests/test_schemas.py.
"""
from __future__ import annotations

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = ("memlint", "tool-memlint", "deepspeed", "catalog")


def build(name: str) -> dict:
    if name == "memlint":
        # start-up: each schema's builder (keys, assumptions, data files) loads when asked for
        from memlint.schemas.memlint_toml import memlint_toml

        return memlint_toml()
    if name == "tool-memlint":
        # start-up: each schema's builder (keys, assumptions, data files) loads when asked for
        from memlint.schemas.memlint_toml import tool_memlint

        return tool_memlint()
    if name == "deepspeed":
        # start-up: each schema's builder (keys, assumptions, data files) loads when asked for
        from memlint.schemas import deepspeed

        return deepspeed.build()
    if name == "catalog":
        # start-up: each schema's builder (keys, assumptions, data files) loads when asked for
        from memlint.schemas.catalog import catalog

        return catalog()
    raise KeyError(name)


def render(name: str) -> str:
    return json.dumps(build(name), indent=2, ensure_ascii=False) + "\n"


def path_of(name: str) -> str:
    return os.path.join(HERE, f"{name}.schema.json" if name != "catalog" else "catalog.json")


def main() -> int:
    """Write every schema file (python -m memlint.schemas)."""
    for name in NAMES:
        with open(path_of(name), "w", encoding="utf-8") as handle:
            handle.write(render(name))
    return 0
