"""Imports follow the data (DESIGN.md): files -> adapters -> IR/scenario -> memory -> rules ->
engine -> reporters -> CLI. A module never imports from a layer to its right, nor across one of
DESIGN's "never" pairs (adapters never import rules, the engine or settings code; memory never
imports adapters or rules; rules never import adapters or reporters): each layer names the layers
it may import (`MAY_IMPORT`). No two modules import each other, directly or around a loop, at
module level or inside a function. An import inside a function is there only for start-up speed,
with a comment saying so; what a one-file check loads is measured by the start-up tests
(tests/fuzz/test_speed.py, issue 29), which is what those comments answer to.

Read from the source with `ast` (nothing is imported), so a violation is named with its file,
line and the import it makes.
"""
from __future__ import annotations

import ast
import functools
import os

import pytest
import source_trees

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "memlint")

#: Layers from left (imported by everyone) to right; a module is in the layer of its longest
#: matching prefix. `memlint` alone is the package's public facade (the API, imported lazily).
LAYERS = (
    ("foundation", ("memlint.__version__", "memlint.errors", "memlint.escape",
                    "memlint.lazy_import", "memlint.lazy_re", "memlint.records", "memlint.units",
                    "memlint.ir", "memlint.diagnostics",
                    "memlint.keys", "memlint.plugins", "memlint.hardware", "memlint.names",
                    "memlint.catalog",
                    "memlint.facts", "memlint.verdicts")),
    ("files", ("memlint.loaders", "memlint.logs", "memlint.safe_write", "memlint.toml_edit",
               "memlint.toml_subset", "memlint.yaml_resolvers", "memlint.yaml_subset")),
    ("adapters", ("memlint.adapters",)),
    ("scenario", ("memlint.scenario", "memlint.assumptions")),
    ("memory", ("memlint.memory", "memlint.planner")),
    ("rules", ("memlint.rules",)),
    ("engine", ("memlint.engine", "memlint.suppressions", "memlint.config", "memlint.runs",
                "memlint.api",
                "memlint.fitting", "memlint.comparison", "memlint.comparison_rl")),
    ("reporters", ("memlint.report",)),
    ("cli", ("memlint", "memlint.cli", "memlint.__main__", "memlint.commands")),
)
#: The layers each layer may import (besides its own): DESIGN's flow with its "never" pairs. The
#: memory model is pure (no file I/O, adapters or rules); rules see no adapters or reporters (their
#: docs generator writes its pages through the one safe writer, a files module).
MAY_IMPORT = {
    "foundation": set(),
    "files": {"foundation"},
    "adapters": {"foundation", "files"},
    "scenario": {"foundation", "files", "adapters"},
    "memory": {"foundation", "scenario"},
    "rules": {"foundation", "files", "scenario", "memory"},
    "engine": {"foundation", "files", "adapters", "scenario", "memory", "rules"},
    "reporters": {"foundation", "memory", "rules"},
    "cli": {"foundation", "files", "adapters", "scenario", "memory", "rules", "engine",
            "reporters"},
}
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
    lines = tuple((text or source_trees.source(path)).splitlines())
    tree = ast.parse(text, path) if text else source_trees.tree(path)
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


def test_no_import_across_a_never_pair():
    problems = []
    for path in sources():
        me = module_name(path)
        mine = LAYERS[layer_of(me)][0]
        for line, target, _lazy, _first, _lines in imports(path):
            if not target.startswith("memlint") or target == me:
                continue
            theirs = LAYERS[layer_of(target)][0]
            if theirs != mine and theirs not in MAY_IMPORT[mine]:
                problems.append(f"{os.path.relpath(path, ROOT)}:{line}: {me} ({mine}) imports "
                                f"{target} ({theirs}); {mine} may import only "
                                f"{', '.join(sorted(MAY_IMPORT[mine])) or 'the foundation'}")
    assert not problems, "imports DESIGN.md forbids:\n" + "\n".join(problems)


def import_graph() -> dict:
    """module -> {module it imports, at module level or in a function} within memlint."""
    graph: dict = {}
    for path in sources():
        me = module_name(path)
        targets = graph.setdefault(me, set())
        for _line, target, _lazy, _first, _lines in imports(path):
            if target.startswith("memlint") and target != me:
                targets.add(target)
    return graph


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict = {}
    low: dict = {}
    on_stack: set = set()
    stack: list = []
    found = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_at_module_or_function_level():
    found = cycles(import_graph())
    assert not found, "modules that import each other (directly or around a loop):\n" + \
        "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_check_finds_a_loop():
    graph = {"memlint.a": {"memlint.b"}, "memlint.b": {"memlint.c"}, "memlint.c": {"memlint.a"},
             "memlint.d": {"memlint.a"}}
    assert cycles(graph) == [["memlint.a", "memlint.b", "memlint.c"]]


def test_the_never_pairs_are_stricter_than_the_order():
    """memory -> adapters and rules -> adapters pass the left-to-right order; the pairs forbid
    them."""
    order = [name for name, _ in LAYERS]
    for mine, theirs in (("memory", "adapters"), ("rules", "adapters"), ("memory", "rules"),
                         ("rules", "reporters"), ("adapters", "rules")):
        assert theirs not in MAY_IMPORT[mine]
    assert order.index("adapters") < order.index("memory") < order.index("rules")


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
