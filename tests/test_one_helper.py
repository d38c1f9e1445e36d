"""One helper each (issue 31): the per-GPU sequence length, booleans as users write them and the
path-containment check are each computed in one function, not re-derived where they are used.
Read from the source with `ast`; a new copy is named with its file and line."""
from __future__ import annotations

import ast
import os

import source_trees

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "memlint")
TRUE_WORDS = {"1", "true", "yes", "on", "y", "t"}
FALSE_WORDS = {"0", "false", "no", "off", "n", "f"}
#: where each helper lives, and the few places that read the words some other program defines
HOMES = {
    "seq": {"memlint/memory/conventions.py:seq_per_gpu"},
    "bool": {"memlint/keys.py:",    # parse_bool / to_bool and their word sets
             # huggingface_hub's own ENV_VARS_TRUE_VALUES (HF_HUB_OFFLINE means what it means there)
             "memlint/catalog/hub.py:_truthy"},
    "inside": {"memlint/loaders.py:inside",
               # showing a path relative to the working directory: lexical on purpose, no check
               "memlint/report/__init__.py:display_path", "memlint/runs.py:_shown"},
}


def _is_cp(node) -> bool:
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "max":
        return any(_is_cp(arg) for arg in node.args)
    return (isinstance(node, ast.Name) and node.id == "cp") or (
        isinstance(node, ast.Attribute) and node.attr == "cp")


def _kind(node) -> str:
    """Which helper `node` re-implements, or ''."""
    if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "ceil" and node.args
            and isinstance(node.args[0], ast.BinOp) and isinstance(node.args[0].op, ast.Div)
            and _is_cp(node.args[0].right)):
        return "seq"            # math.ceil(x / cp)
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.BinOp) and isinstance(node.operand.op, ast.FloorDiv)
            and isinstance(node.operand.left, ast.UnaryOp) and _is_cp(node.operand.right)):
        return "seq"            # -(-x // cp)
    if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn))
                                             for op in node.ops):
        for side in node.comparators:
            if isinstance(side, (ast.Tuple, ast.List, ast.Set)):
                words = {e.value.lower() for e in side.elts
                         if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                if ("true" in words and words & (TRUE_WORDS - {"true"})) or (
                        "false" in words and words & (FALSE_WORDS - {"false"})):
                    return "bool"   # value in ("true", "1", ...): a boolean converter
    if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "startswith"
            and node.args and isinstance(node.args[0], ast.BinOp)
            and isinstance(node.args[0].op, ast.Add) and "os.sep" in ast.unparse(node.args[0])):
        return "inside"         # path.startswith(root + os.sep)
    return ""


def copies(sources: dict = None) -> list:
    """'file:line function: kind' for each re-implementation outside its home."""
    if sources is None:
        sources = {}
        for folder, _dirs, names in os.walk(PACKAGE):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    sources[os.path.relpath(path, ROOT).replace(os.sep, "/")] = \
                        source_trees.tree(path)
    found = []
    for rel, tree in sorted(sources.items()):
        functions = [n for n in ast.walk(tree)
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for node in ast.walk(tree):
            kind = _kind(node)
            if not kind:
                continue
            owner = min((f for f in functions
                         if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)),
                        key=lambda f: (f.end_lineno or f.lineno) - f.lineno, default=None)
            name = owner.name if owner else ""
            if f"{rel}:{name}" not in HOMES[kind] and f"{rel}:" not in HOMES[kind]:
                found.append(f"{rel}:{node.lineno} {name}: {kind}")
    return found


def test_each_is_computed_in_one_helper():
    assert not copies(), ("use memlint.memory.conventions.seq_per_gpu / memlint.keys.parse_bool "
                          "/ memlint.loaders.inside:\n" + "\n".join(copies()))


def test_the_check_finds_each_copy():
    source = ("import math, os\n"
              "def f(seq, cp, v, p, root):\n"
              "    a = math.ceil(seq / cp)\n"
              "    b = -(-seq // max(1, cp))\n"
              "    c = str(v).lower() in ('true', '1', 'yes')\n"
              "    d = v not in ('false', '0')\n"
              "    e = p.startswith(root + os.sep)\n"
              "    g = v in ('true', 'false')\n")   # a literal's syntax, not a converter
    found = copies({"memlint/x.py": ast.parse(source)})
    assert [f.split(" ")[-1] for f in found] == ["seq", "seq", "bool", "bool", "inside"], found
