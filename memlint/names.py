"""Names as memlint's hardware catalogs index them (GPUs in hardware.py, nodes in catalog/nodes.py).

One small module of its own, so that a check that reads only node names does not import the GPU
catalog, and neither catalog compiles a pattern at import (start-up)."""
from __future__ import annotations


def norm_name(name: str) -> str:
    r"""re.sub(r"[\s_]+", "-", name.strip().lower()), without the pattern: `\s` in a str pattern
    is what str.isspace() says."""
    out, in_run = [], False
    for char in name.strip().lower():
        if char == "_" or char.isspace():
            if not in_run:
                out.append("-")
            in_run = True
        else:
            out.append(char)
            in_run = False
    return "".join(out)
