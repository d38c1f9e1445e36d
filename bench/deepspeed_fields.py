"""Read DeepSpeed's config fields and defaults from its source at a commit (dev tool, no torch).

    python bench/deepspeed_fields.py GIT_DIR [COMMIT] [--write]

GIT_DIR is a DeepSpeed clone (e.g. the `fetch github:deepspeedai/DeepSpeed` mirror); COMMIT
defaults to the one memlint's DeepSpeed schema is written for. Nothing is imported or run: the
Python files are parsed with `ast`.

- Every pydantic config class (a subclass of DeepSpeedConfigModel, runtime/config_utils.py,
  extra="forbid" unless the class says otherwise): each field's key (its name, and its alias,
  which populate_by_name makes a second accepted spelling), default (a literal, pp_int(5e8),
  an enum member, {} / [] / None; absent when computed at run time), the nested config class
  its annotation names, and, for a field marked deprecated, the `new_param` that replaces it
  and whether a `new_param_fn` changes the value on the way.
- The `NAME = "key"` / `NAME_DEFAULT = value` constant pairs of the modules whose blocks
  DeepSpeed reads with get_scalar_param (top level, aio, flops_profiler, activation
  checkpointing, ...).

--write stores the result as memlint/schemas/deepspeed_fields.json, the facts that
memlint's shipped DeepSpeed schema takes its defaults and deprecations from
(memlint/schemas/deepspeed.py); without it the JSON is printed.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys

COMMIT = "edaa72212"   # deepspeedai/DeepSpeed@edaa722 (v0.19.5-27, "v0.19.6" in memlint)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "memlint", "schemas", "deepspeed_fields.json")

# Which pydantic class reads each block (the getters in deepspeed/runtime/config.py).
BLOCKS = {
    "zero_optimization": "DeepSpeedZeroConfig",
    "fp16": "DeepSpeedFP16Config",
    "bf16": "DeepSpeedBF16Config",
    "bfloat16": "DeepSpeedBF16Config",
    "compile": "CompileConfig",
    "comms_logger": "CommsLoggerConfig",
    "tensorboard": "TensorBoardConfig",
    "wandb": "WandbConfig",
    "csv_monitor": "CSVConfig",
    "comet": "CometConfig",
    "hybrid_engine": "HybridEngineConfig",
    "tensor_parallel": "TPTrainingConfig",
    "timers": "DeepSpeedThroughputTimerConfig",
}
# Which constants module holds the get_scalar_param keys of each block ("" = the top level).
CONSTANTS = {
    "": "deepspeed/runtime/constants.py",
    "aio": "deepspeed/runtime/swap_tensor/constants.py",
    "flops_profiler": "deepspeed/profiling/constants.py",
    "activation_checkpointing": "deepspeed/runtime/activation_checkpointing/config.py",
    "sparse_attention": "deepspeed/runtime/constants.py",
    "progressive_layer_drop": "deepspeed/runtime/constants.py",
    "checkpoint": "deepspeed/runtime/constants.py",
    "data_types": "deepspeed/runtime/constants.py",
    "pipeline": "deepspeed/runtime/constants.py",
    "autotuning": "deepspeed/autotuning/constants.py",
    "elasticity": "deepspeed/elasticity/constants.py",
    "nebula": "deepspeed/nebula/constants.py",
    "eigenvalue": "deepspeed/runtime/constants.py",
}


def _show(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def _files(git_dir: str, commit: str) -> list:
    listed = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", commit,
                             "deepspeed"], check=True, capture_output=True, text=True).stdout
    return [p for p in listed.splitlines() if p.endswith(".py")
            and not p.startswith(("deepspeed/inference/", "deepspeed/ops/"))]


_NO_DEFAULT = object()


def _literal(node, enums: dict):
    """A default as JSON, or _NO_DEFAULT when it is computed (a call, a lambda, a name)."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "pp_int" and node.args:
        value = _literal(node.args[0], enums)
        return int(value) if isinstance(value, (int, float)) else _NO_DEFAULT
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        members = enums.get(node.value.id)
        if members and node.attr in members:
            return members[node.attr]
        return _NO_DEFAULT
    if isinstance(node, ast.BinOp):   # 10 * 1024 * 1024
        try:
            return ast.literal_eval(ast.unparse(node))
        except ValueError:
            return _NO_DEFAULT
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return _NO_DEFAULT
    return value if isinstance(value, (str, int, float, bool, list, dict, type(None))) else \
        _NO_DEFAULT


def _keyword(call: ast.Call, name: str):
    return next((k.value for k in call.keywords if k.arg == name), None)


def _field(stmt: ast.AnnAssign, enums: dict, classes: set) -> dict:
    out = {"type": ast.unparse(stmt.annotation)}
    nested = [n.id for n in ast.walk(stmt.annotation) if isinstance(n, ast.Name) and n.id in classes]
    if nested:
        out["model"] = nested[0]
    value = stmt.value
    if value is None:
        out["required"] = True
        return out
    if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "Field":
        alias = _keyword(value, "alias")
        if isinstance(alias, ast.Constant):
            out["alias"] = alias.value
        extra = _keyword(value, "json_schema_extra")
        if isinstance(extra, ast.Dict):
            info = {k.value: v for k, v in zip(extra.keys, extra.values)
                    if isinstance(k, ast.Constant)}
            if isinstance(info.get("deprecated"), ast.Constant) and info["deprecated"].value:
                out["deprecated"] = True
                if isinstance(info.get("new_param"), ast.Constant):
                    out["new_param"] = info["new_param"].value
                out["value_changes"] = "new_param_fn" in info
                if isinstance(info.get("set_new_param"), ast.Constant):
                    out["sets_new_param"] = bool(info["set_new_param"].value)
        value = value.args[0] if value.args else _keyword(value, "default")
        if value is None:
            return out   # default_factory or required
    default = _literal(value, enums)
    if default is not _NO_DEFAULT:
        out["default"] = default
    return out


def _enums(tree) -> dict:
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any("Enum" in ast.unparse(b) for b in node.bases):
            members = {}
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
                    for target in stmt.targets:
                        if isinstance(target, ast.Name):
                            members[target.id] = stmt.value.value
            out[node.name] = members
    return out


def config_classes(git_dir: str, commit: str) -> dict:
    """{class: {"file", "extra", "fields": {key: {...}}}} for every DeepSpeedConfigModel."""
    trees = {path: ast.parse(_show(git_dir, commit, path)) for path in _files(git_dir, commit)}
    bases, where = {}, {}
    for path, tree in trees.items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [ast.unparse(b).split(".")[-1] for b in node.bases]
                where[node.name] = (path, node)

    def is_model(name, seen=()):
        if name == "DeepSpeedConfigModel":
            return True
        return any(is_model(b, seen + (name,)) for b in bases.get(name, ()) if b not in seen)

    models = {name for name in bases if is_model(name) and name != "DeepSpeedConfigModel"}
    out = {}
    for name in sorted(models):
        path, node = where[name]
        enums = _enums(trees[path])
        extra = "forbid"
        fields = {}
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "model_config"
                                                    for t in stmt.targets):
                call = stmt.value
                found = _keyword(call, "extra") if isinstance(call, ast.Call) else None
                if isinstance(found, ast.Constant):
                    extra = found.value
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if stmt.target.id == "model_config":
                    continue
                fields[stmt.target.id] = _field(stmt, enums, models)
        out[name] = {"file": path, "extra": extra, "fields": fields}
    return out


def constant_defaults(git_dir: str, commit: str) -> dict:
    """{block: {key: default}} from the NAME = "key" / NAME_DEFAULT = value pairs."""
    out = {}
    for block, path in CONSTANTS.items():
        names = {}
        for node in ast.parse(_show(git_dir, commit, path)).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                    node.targets[0], ast.Name):
                names[node.targets[0].id] = node.value
        values = {}
        for name, value in names.items():
            if name.endswith("_DEFAULT") or not isinstance(value, ast.Constant) \
                    or not isinstance(value.value, str) or f"{name}_DEFAULT" not in names:
                continue
            default = names[f"{name}_DEFAULT"]
            if isinstance(default, ast.Name) and default.id in names:   # X_DEFAULT = OTHER
                default = names[default.id]
            literal = _literal(default, {})
            if literal is not _NO_DEFAULT:
                values.setdefault(value.value, literal)
        out[block] = {"file": path, "defaults": values}
    return out


def read(git_dir: str, commit: str = COMMIT) -> dict:
    full = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", commit], check=True,
                          capture_output=True, text=True).stdout.strip()
    return {"_about": "DeepSpeed's config fields and defaults, read by bench/deepspeed_fields.py "
                      "from the source at the commit below (ast, nothing imported)",
            "source": f"deepspeedai/DeepSpeed@{full[:9]}",
            "blocks": BLOCKS, "classes": config_classes(git_dir, commit),
            "constants": constant_defaults(git_dir, commit)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir")
    parser.add_argument("commit", nargs="?", default=COMMIT)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    git_dir = args.git_dir
    if os.path.isdir(os.path.join(git_dir, ".git")):
        git_dir = os.path.join(git_dir, ".git")
    text = json.dumps(read(git_dir, args.commit), indent=1, sort_keys=True) + "\n"
    if args.write:
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        with open(OUT, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
