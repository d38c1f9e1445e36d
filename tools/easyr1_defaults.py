"""Dev-only: EasyR1's config defaults as data (memlint/facts/easyr1_defaults.json).

    python tools/easyr1_defaults.py GIT_DIR [COMMIT]

EasyR1 (hiyouga/EasyR1) builds its config from dataclasses (verl/trainer/config.py PPOConfig:
data, worker, algorithm, trainer; verl/workers/config.py WorkerConfig: actor, critic, ref, reward,
rollout), then merges the YAML given as `config=...` and the command line's `a.b=c` overrides
(verl/trainer/main.py: OmegaConf.merge(structured default, file, cli)). This reads the dataclasses
statically (ast; nothing imported or run) and writes every field a user can set (init=False fields
are computed by EasyR1) as a dotted key -> [default, "file:line"].
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "memlint", "facts", "easyr1_defaults.json")
FILES = ("verl/trainer/config.py", "verl/workers/config.py", "verl/workers/actor/config.py",
         "verl/workers/critic/config.py", "verl/workers/reward/config.py",
         "verl/workers/rollout/config.py")
ROOT_CLASS = "PPOConfig"


def _classes(git_dir: str, commit: str) -> dict:
    classes = {}
    for path in FILES:
        text = subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
                              check=True, capture_output=True, text=True).stdout
        for node in ast.parse(text).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = (path, node)
    return classes


def _value(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _fields(classes: dict, name: str, prefix: str, out: dict) -> None:
    path, node = classes[name]
    for item in node.body:
        if not isinstance(item, ast.AnnAssign) or not isinstance(item.target, ast.Name):
            continue
        key = prefix + item.target.id
        value = item.value
        factory = None
        if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "field":
            keywords = {k.arg: k.value for k in value.keywords}
            if "init" in keywords and _value(keywords["init"]) is False:
                continue
            if "default_factory" in keywords:
                factory = getattr(keywords["default_factory"], "id", None)
                value = None
            elif "default" in keywords:
                value = keywords["default"]
        if factory in classes:
            _fields(classes, factory, key + ".", out)
            continue
        default = {} if factory == "dict" else [] if factory == "list" else (
            _value(value) if value is not None else None)
        if isinstance(default, tuple):
            default = list(default)
        out[key] = [default, f"{path}:{item.lineno}"]


def main(git_dir: str, commit: str = "HEAD") -> None:
    full = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", f"{commit}^{{commit}}"],
                          check=True, capture_output=True, text=True).stdout.strip()
    keys: dict = {}
    _fields(_classes(git_dir, full), ROOT_CLASS, "", keys)
    data = {"about": "EasyR1's config defaults (dotted key -> [value, file:line]) from its "
                     "dataclasses, read by tools/easyr1_defaults.py; memlint/adapters/easyr1.py "
                     "lays a config file and command-line overrides over them",
            "repository": "hiyouga/EasyR1", "commit": full, "keys": dict(sorted(keys.items()))}
    with open(OUT, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)
        handle.write("\n")
    print(f"{len(keys)} keys at {full[:10]}")


if __name__ == "__main__":
    main(*sys.argv[1:])
