"""A module imported on first use.

`ast = lazy_import.module("ast")` at the top of a module that needs `ast` on one path only (the
torchtitan adapter reads a config_registry.py with it, not a TOML file or a launch script) keeps
the import off every other path of a one-file check (tests/test_startup.py), while the code reads
`ast.parse(...)`, `isinstance(node, ast.Name)` as before. The first attribute read imports the
module and copies its names onto the stand-in.
"""
from __future__ import annotations

import sys


class LazyModule:
    """Stands for the module `name` until one of its attributes is read."""

    def __init__(self, name: str):
        self.__dict__["_lazy_name"] = name

    def __getattr__(self, attr: str):
        name = self.__dict__["_lazy_name"]
        __import__(name)
        module = sys.modules[name]
        self.__dict__.update(module.__dict__)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"lazy_import.module({self.__dict__['_lazy_name']!r})"


def module(name: str) -> LazyModule:
    return LazyModule(name)


def imported(name: str):
    """The module `name`, imported now: importlib.import_module for an absolute name, without
    importing importlib (and with it warnings) on the start-up path."""
    __import__(name)
    return sys.modules[name]
