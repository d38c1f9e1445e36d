"""Imports follow the data (DESIGN.md): files -> adapters -> IR/scenario -> memory -> rules ->
engine -> reporters -> CLI. A module never imports from a layer to its right, and an import inside
a function is there only for start-up speed, with a comment saying so.

Read from the source with `ast` (nothing is imported), so a violation is named with its file,
line and the import it makes.
"""
from __future__ import annotations

import ast
import functools
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "memlint")

#: Layers from left (imported by everyone) to right; a module is in the layer of its longest
#: matching prefix. `memlint` alone is the package's public facade (the API, imported lazily).
LAYERS = (
    ("foundation", ("memlint.__version__", "memlint.errors", "memlint.escape",
                    "memlint.lazy_import", "memlint.lazy_re", "memlint.records", "memlint.units",
                    "memlint.ir", "memlint.diagnostics",
                    "memlint.keys", "memlint.plugins", "memlint.hardware", "memlint.catalog",
                    "memlint.facts", "memlint.verdicts")),
    ("files", ("memlint.loaders", "memlint.logs", "memlint.safe_write", "memlint.toml_edit")),
    ("adapters", ("memlint.adapters",)),
    ("scenario", ("memlint.scenario", "memlint.assumptions")),
    ("memory", ("memlint.memory", "memlint.planner")),
    ("rules", ("memlint.rules",)),
    ("engine", ("memlint.engine", "memlint.config", "memlint.runs", "memlint.api")),
    ("reporters", ("memlint.report",)),
    ("cli", ("memlint", "memlint.cli", "memlint.__main__", "memlint.commands")),
)
#: Names the package itself defines (not submodules): `from memlint import __version__`.
PACKAGE_FACTS = {"__version__": "memlint.__version__", "DISTRIBUTION": "memlint.__version__"}
#: The words that justify an import inside a function (on its line or the comment line above).
LAZY_REASON = "start-up"


def layer_of(module: str) -> int:
    best, index = -1, None
    for i, (_name, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, index = len(prefix), i
    assert index is not None, f"{module} is in no layer of tests/test_layering.py: add it"
    return index


def module_name(path: str) -> str:
    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def sources() -> list:
    out = []
    for folder, _dirs, names in os.walk(PACKAGE):
        out += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".py")]
    return sorted(out)


@functools.lru_cache(maxsize=None)
def is_package_path(module: str) -> bool:
    base = os.path.join(ROOT, *module.split("."))
    return os.path.isdir(base) or os.path.isfile(base + ".py")


@functools.lru_cache(maxsize=None)
def imports(path: str, text: str = "") -> list:
    """(line, imported module, inside a function, line of the comment that may justify it, source
    lines) for every import of `path` (or of `text`, read as if it were that file). An import in a
    function may share the comment above the first of a run of imports."""
    text = text or open(path, encoding="utf-8").read()
    lines = tuple(text.splitlines())
    tree = ast.parse(text, path)
    me = module_name(path)
    found = []  # (import node, inside a function, line of the first import of its run)

    def visit(node, lazy: bool) -> None:
        lazy = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for _field, value in ast.iter_fields(node):
            if isinstance(value, list):
                first = None
                for child in value:
                    if isinstance(child, (ast.Import, ast.ImportFrom)):
                        first = first or child
                        found.append((child, lazy, first.lineno))
                    else:
                        first = None
                    if isinstance(child, ast.AST):
                        visit(child, lazy)
            elif isinstance(value, ast.AST):
                visit(value, lazy)

    visit(tree, False)
    out = []
    for node, lazy, first in found:
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = me.split(".") if path.endswith("__init__.py") else me.split(".")[:-1]
                parts = parts[:len(parts) - node.level + 1]
                module = ".".join(parts + ([module] if module else []))
            for alias in node.names:
                full = f"{module}.{alias.name}"
                if module == "memlint" and alias.name in PACKAGE_FACTS:
                    targets.append(PACKAGE_FACTS[alias.name])
                else:
                    targets.append(full if is_package_path(full) else module)
        for target in dict.fromkeys(targets):
            out.append((node.lineno, target, lazy, first, lines))
    return tuple(out)


def test_every_module_is_in_a_layer():
    for path in sources():
        layer_of(module_name(path))


def test_no_import_from_a_layer_to_the_right():
    problems = []
    for path in sources():
        me = module_name(path)
        mine = layer_of(me)
        for line, target, _lazy, _first, _lines in imports(path):
            if not target.startswith("memlint") or target == me:
                continue
            theirs = layer_of(target)
            if theirs > mine:
                problems.append(f"{os.path.relpath(path, ROOT)}:{line}: {me} ({LAYERS[mine][0]}) "
                                f"imports {target} ({LAYERS[theirs][0]}), a later layer")
    assert not problems, "imports against the data flow (DESIGN.md):\n" + "\n".join(problems)


def test_imports_inside_functions_say_why():
    problems = {}
    for path in sources():
        for line, _target, lazy, first, lines in imports(path):
            if not lazy:
                continue
            here = lines[line - 1]
            above = lines[first - 2].strip() if first >= 2 else ""
            if LAZY_REASON in here or (above.startswith("#") and LAZY_REASON in above):
                continue
            problems[(path, line)] = (f"{os.path.relpath(path, ROOT)}:{line}: `{here.strip()}` inside a "
                            f"function without a '# {LAZY_REASON}: ...' comment (import it at the "
                            "top, or say why start-up needs it here)")
    assert not problems, "\n".join(problems.values())


@pytest.mark.parametrize("source, expected, lazy", [
    ("from memlint.rules import make_internal\n", "memlint.rules", False),
    ("def f():\n    from memlint.engine import LintConfig\n", "memlint.engine", True),
    ("from ..report import text_format\n", "memlint.report.text_format", False),
])
def test_the_checker_sees_an_upward_import(source, expected, lazy):
    """The check can fail: an adapter importing rules, the engine or a reporter is caught."""
    adapter = os.path.join(PACKAGE, "adapters", "deepspeed.py")
    (line, target, inside, _first, _lines), = imports(adapter, source)
    assert (target, inside) == (expected, lazy)
    assert layer_of(target) > layer_of(module_name(adapter))
