"""Functions stay short (issue 31, STYLE.md): no function or method in memlint/ is over 100
lines. A longer one is split by what it reads or decides, each part named for it."""
from __future__ import annotations

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "memlint")
LIMIT = 100


def long_functions(limit: int = LIMIT) -> list:
    found = []
    for folder, _dirs, names in os.walk(PACKAGE):
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as handle:
                tree = ast.parse(handle.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > limit:
                        found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} "
                                     f"{node.name}: {lines} lines")
    return found


def test_no_function_is_over_100_lines():
    assert not long_functions(), "\n".join(long_functions())


def test_the_check_sees_functions():
    assert long_functions(limit=40), "the walk found no function over 40 lines at all"
