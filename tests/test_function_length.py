"""Functions stay short (issue 31, STYLE.md): no function or method in memlint/ is over 100
lines. A longer one is split by what it reads or decides, each part named for it."""
from __future__ import annotations

import ast
import functools
import os

import source_trees

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "memlint")
LIMIT = 100


@functools.lru_cache(maxsize=None)
def function_lengths() -> tuple:
    """(where, name, lines) of every function and method in memlint/, parsed once per run."""
    found = []
    for folder, _dirs, names in os.walk(PACKAGE):
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            for node in ast.walk(source_trees.tree(path)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.append((f"{os.path.relpath(path, ROOT)}:{node.lineno}", node.name,
                                  node.end_lineno - node.lineno + 1))
    return tuple(found)


def long_functions(limit: int = LIMIT) -> list:
    return [f"{where} {name}: {lines} lines" for where, name, lines in function_lengths()
            if lines > limit]


def test_no_function_is_over_100_lines():
    assert not long_functions(), "\n".join(long_functions())


def test_the_check_sees_functions():
    assert long_functions(limit=40), "the walk found no function over 40 lines at all"
