"""Refresh `memlint/adapters/megatron/megatron_flags.json` from a Megatron-LM git directory.

Reads the sources statically (Python's `ast`, nothing imported or run) at one commit and lists
every flag its training parsers accept:
- `megatron/training/arguments.py`: every `add_argument('--x', ...)` string, and the flags that
  `ArgumentGroupFactory(Config, exclude=[...])` builds from a config dataclass's fields
  (`megatron/training/argument_utils.py`: `--field-name`; a bool field defaulting to True gives
  `--no-field-name` and `--disable-field-name`; `argparse_meta["arg_names"]` wins; fields of the
  base dataclasses included, `init=False` and excluded fields left out);
- the extra-argument providers of the training entry points (`ENTRY_POINT_FILES`: ModelOpt's
  `add_modelopt_args` for pretrain_gpt.py / pretrain_hybrid.py, Flextron's `add_flextron_args`
  for pretrain_hybrid_flex.py, pretrain_vlm.py's, the multimodal and MIMO examples', train_rl.py's
  inference arguments): every `add_argument` flag string in those files.

    python bench/megatron_flags.py GIT_DIR [COMMIT] [--write]

Without --write it prints what would change.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

JSON_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "memlint", "adapters",
                         "megatron", "megatron_flags.json")

MAIN_PARSER = "megatron/training/arguments.py"
# Files whose add_argument flags join the main parser through a training entry point's
# extra_args_provider (section name -> files).
ENTRY_POINT_FILES = {
    "megatron_lm_modelopt": ["megatron/post_training/arguments.py"],
    "megatron_lm_entry_points": [
        "megatron/elastification/arguments.py",          # pretrain_hybrid_flex.py (--flextron)
        "pretrain_vlm.py",                                # add_vlm_extra_args
        "examples/multimodal/multimodal_args.py",         # examples/multimodal/train.py
        "examples/mimo/train.py",                         # add_mimo_args
        "examples/mimo/pretrain_mimo.py",
        "examples/mimo/training/args.py",
        "examples/mimo/training/data.py",
        "examples/mimo/training/encoder_prefetch.py",
        "examples/mimo/model_providers/nemotron_moe_vlm.py",
        "examples/mimo/model_providers/radio_encoder.py",
        "examples/post_training/modelopt/finetune.py",    # add_finetune_args
        "megatron/inference/utils.py",                    # train_rl.py: add_inference_args
    ],
}


def git_show(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def git_files(git_dir: str, commit: str) -> list:
    out = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", commit],
                         check=True, capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.endswith(".py")]


def add_argument_flags(tree: ast.AST) -> set:
    flags = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "add_argument":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
                        and arg.value.startswith("--"):
                    flags.add(arg.value)
    return flags


class Classes:
    """Dataclass definitions by name, over the tree (first definition of a name wins)."""

    def __init__(self, git_dir: str, commit: str):
        self.git_dir, self.commit = git_dir, commit
        self.paths = [p for p in git_files(git_dir, commit)
                      if p.startswith("megatron/") and "/tests/" not in p]
        self._index: dict = {}

    def find(self, name: str):
        if not self._index:
            for path in self.paths:
                try:
                    tree = ast.parse(git_show(self.git_dir, self.commit, path))
                except (SyntaxError, subprocess.CalledProcessError):
                    continue
                for node in tree.body:
                    if isinstance(node, ast.ClassDef):
                        self._index.setdefault(node.name, node)
        return self._index.get(name)

    def fields(self, name: str, seen=None) -> list:
        """(field name, annotation text, default node, field() keywords) incl. base classes."""
        seen = seen or set()
        node = self.find(name)
        if node is None or name in seen:
            return []
        seen.add(name)
        out: list = []
        for base in node.bases:
            base_name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
            if base_name:
                out.extend(self.fields(base_name, seen))
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                keywords = {}
                default = item.value
                if isinstance(default, ast.Call) and getattr(default.func, "id", None) == "field":
                    keywords = {k.arg: k.value for k in default.keywords}
                    default = keywords.get("default")
                out = [f for f in out if f[0] != item.target.id]
                out.append((item.target.id, ast.unparse(item.annotation), default, keywords))
        return out


def factory_flags(fields: list, exclude: set) -> set:
    flags = set()
    for name, annotation, default, keywords in fields:
        if name in exclude or name.startswith("_"):
            continue
        init = keywords.get("init")
        if isinstance(init, ast.Constant) and init.value is False:
            continue
        if "ClassVar" in annotation:
            continue
        names = None
        meta = keywords.get("metadata")
        if isinstance(meta, ast.Dict):
            for key, value in zip(meta.keys, meta.values):
                if isinstance(key, ast.Constant) and key.value == "argparse_meta" \
                        and isinstance(value, ast.Dict):
                    for k2, v2 in zip(value.keys, value.values):
                        if isinstance(k2, ast.Constant) and k2.value == "arg_names" \
                                and isinstance(v2, (ast.List, ast.Tuple)):
                            names = [e.value for e in v2.elts if isinstance(e, ast.Constant)]
        dashed = name.replace("_", "-")
        if names:
            flags.update(names)
        elif annotation == "bool" and isinstance(default, ast.Constant) and default.value is True:
            flags.update((f"--no-{dashed}", f"--disable-{dashed}"))
        else:
            flags.add(f"--{dashed}")
    return flags


def main_parser_flags(git_dir: str, commit: str) -> set:
    tree = ast.parse(git_show(git_dir, commit, MAIN_PARSER))
    flags = add_argument_flags(tree)
    classes = Classes(git_dir, commit)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ArgumentGroupFactory":
            config = node.args[0].id if node.args and isinstance(node.args[0], ast.Name) else None
            exclude = set()
            for keyword in node.keywords:
                if keyword.arg == "exclude" and isinstance(keyword.value, ast.Name):
                    exclude = _list_assigned(tree, keyword.value.id)
                elif keyword.arg == "exclude" and isinstance(keyword.value, ast.List):
                    exclude = {e.value for e in keyword.value.elts if isinstance(e, ast.Constant)}
            if config:
                flags |= factory_flags(classes.fields(config), exclude)
    return flags


def _list_assigned(tree: ast.AST, name: str) -> set:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name
                                                for t in node.targets) \
                and isinstance(node.value, ast.List):
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return set()


def collect(git_dir: str, commit: str) -> dict:
    sections = {"megatron_lm": sorted(main_parser_flags(git_dir, commit))}
    for section, files in ENTRY_POINT_FILES.items():
        flags: set = set()
        for path in files:
            flags |= add_argument_flags(ast.parse(git_show(git_dir, commit, path)))
        sections[section] = sorted(flags - set(sections["megatron_lm"]))
    return sections


def main(argv: list) -> int:
    write = "--write" in argv
    argv = [a for a in argv if a != "--write"]
    git_dir = argv[0]
    commit = argv[1] if len(argv) > 1 else "HEAD"
    commit = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", commit], check=True,
                            capture_output=True, text=True).stdout.strip()
    found = collect(git_dir, commit)
    with open(JSON_PATH, encoding="utf-8") as handle:
        data = json.load(handle)
    for section, flags in found.items():
        old = set(data.get(section, {}).get("flags", ()))
        print(f"{section}: {len(flags)} flags, +{len(set(flags) - old)} -{len(old - set(flags))}")
        for flag in sorted(set(flags) - old):
            print("  +", flag)
        for flag in sorted(old - set(flags)):
            print("  -", flag)
    if write:
        every = set().union(*map(set, found.values()))
        earlier = set(data.get("megatron_lm_other", {}).get("flags", ()))
        for section in found:
            earlier |= set(data.get(section, {}).get("flags", ()))
        data["megatron_lm_other"] = {
            "note": "names an earlier extraction listed that the parsers above do not accept at "
                    "this commit (older Megatron-LM flags, config fields without a CLI flag): "
                    "kept known so that scripts written for older commits are not warned",
            "flags": sorted(earlier - every)}
        for section, flags in found.items():
            entry = data.setdefault(section, {})
            entry["repository"] = "NVIDIA/Megatron-LM"
            entry["commit"] = commit
            entry["flags"] = flags
        data["megatron_lm"]["read_from"] = [
            f"{MAIN_PARSER}: add_argument calls, and ArgumentGroupFactory over the config "
            "dataclasses (megatron/core/transformer/transformer_config.py, "
            "megatron/core/model_parallel_config.py, megatron/training/config/*.py)",
            "listed by bench/megatron_flags.py"]
        data["megatron_lm_entry_points"]["read_from"] = \
            ENTRY_POINT_FILES["megatron_lm_entry_points"]
        tmp = JSON_PATH + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=0, sort_keys=False)
            handle.write("\n")
        os.replace(tmp, JSON_PATH)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
