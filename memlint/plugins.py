"""Entry points of the `memlint.rules` / `memlint.adapters` groups, found without importing
`importlib.metadata` (15 ms and an e-mail parser) in the usual case where no installed
distribution declares either group.

`declared(group)` scans the `*.dist-info` / `*.egg-info` folders on `sys.path` for an
`entry_points.txt` naming the group; only when one does (or when `sys.path` holds something a
scan cannot read, such as a zip file) is `importlib.metadata.entry_points` asked.
"""
from __future__ import annotations

import os
import sys

_GROUPS: dict = {}


def _scan() -> frozenset:
    """Every memlint entry-point group declared on sys.path (the only groups `declared` is asked
    about: a file that does not name memlint is not parsed), or None when the scan cannot be
    trusted."""
    groups: set = set()
    for entry in sys.path:
        where = entry or os.getcwd()
        if os.path.isfile(where):
            return None  # a zip or egg: let importlib.metadata read it
        try:
            names = os.listdir(where)
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(where, name, "entry_points.txt"), "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            if b"memlint" not in data:
                continue   # start-up: most environments hold many distributions, none of them ours
            for line in data.decode("utf-8", errors="replace").split("\n"):
                line = line.strip()
                if line.startswith("[") and line.endswith("]"):
                    groups.add(line[1:-1].strip())
    return frozenset(groups)


def declared(group: str) -> bool:
    key = tuple(sys.path)
    if key not in _GROUPS:
        _GROUPS[key] = _scan()
    groups = _GROUPS[key]
    return groups is None or group in groups


def entry_points(group: str) -> list:
    if not declared(group):
        return []
    # start-up: entry points are read only when plugins are looked up
    from importlib.metadata import entry_points as _entry_points

    return list(_entry_points(group=group))
