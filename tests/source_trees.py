"""memlint's own source files, each read and parsed once per test run: the AST contract tests
(layering, conventions, function length) walk the same trees."""
from __future__ import annotations

import ast
import functools


@functools.lru_cache(maxsize=None)
def source(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


@functools.lru_cache(maxsize=None)
def tree(path: str) -> ast.Module:
    """The parsed module at `path`. Shared between tests: read it, never change it."""
    return ast.parse(source(path), path)
