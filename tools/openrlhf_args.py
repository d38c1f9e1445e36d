"""Dev-only: write memlint/facts/openrlhf_args.json, the arguments of OpenRLHF's CLI entry points
with their defaults, read with `ast` from the sources at pinned tags (nothing is executed).

    python tools/openrlhf_args.py /path/to/OpenRLHF.git v0.9.9 v0.11.0

Each `parser.add_argument("--name", ..., default=D, action=...)` whose name and default are
literals gives name -> [default, kind, line]; kind is "flag" for store_true/store_false actions.
Names built at run time (f-strings) are expanded for the prefixes the file loops over.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

ENTRY_POINTS = ("openrlhf/cli/train_ppo_ray.py", "openrlhf/cli/train_dpo.py",
                "openrlhf/cli/train_rm.py", "openrlhf/cli/train_sft.py",
                "openrlhf/cli/train_kto.py")
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "memlint",
                   "facts", "openrlhf_args.json")


def _literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError):
        return "<expr>"


def _names(node, prefixes) -> list:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out = []
        for prefix in prefixes:
            text = "".join(p.value if isinstance(p, ast.Constant) else prefix
                           for p in node.values)
            out.append(text)
        return out
    return []


def arguments(source: str) -> dict:
    tree = ast.parse(source)
    prefixes = ["actor", "critic"]
    out = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument" and node.args):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        action = _literal(kw["action"]) if "action" in kw else None
        default = _literal(kw["default"]) if "default" in kw else (
            False if action == "store_true" else True if action == "store_false" else None)
        if "dest" in kw:
            continue  # an alias writing another argument (--no_x)
        kind = "flag" if action in ("store_true", "store_false") else "value"
        for name in _names(node.args[0], prefixes):
            if name.startswith("--"):
                out[name[2:]] = [default if not isinstance(default, tuple) else list(default),
                                 kind, node.lineno]
    return out


def main(git_dir: str, tags: list) -> None:
    data = {"about": "OpenRLHF CLI arguments (name -> [default, kind, line]) by tag, read with "
                     "ast by tools/openrlhf_args.py", "repository": "OpenRLHF/OpenRLHF",
            "versions": {}}
    for tag in tags:
        commit = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", f"{tag}^{{commit}}"],
                                check=True, capture_output=True, text=True).stdout.strip()
        entry = {"commit": commit, "entry_points": {}}
        for path in ENTRY_POINTS:
            shown = subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
                                   capture_output=True, text=True)
            if shown.returncode == 0:
                entry["entry_points"][path] = arguments(shown.stdout)
        data["versions"][tag.lstrip("v")] = entry
    with open(OUT, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=0, sort_keys=True)
        handle.write("\n")
    print(OUT, {t: {p.split("/")[-1]: len(a) for p, a in e["entry_points"].items()}
                for t, e in data["versions"].items()})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
