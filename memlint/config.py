"""memlint's own settings: `[tool.memlint]` in the nearest pyproject.toml, found by walking up.

```toml
[tool.memlint]
select = ["ML1", "ML3"]              # codes, names or family prefixes; default: every stable rule
extend-select = ["ML699"]            # add to the selection (preview rules need their code/name)
ignore = ["sequence-parallel-off"]
fail-on = "warning"                  # error (default) | warning | info
files = ["configs/*.json"]           # what `memlint check` lints without paths
exclude = ["legacy/**", "third_party"]  # skipped when `memlint check DIR` walks a folder
[tool.memlint.per-file-ignores]
"legacy/*.json" = ["ML3"]
[tool.memlint.severity]
low-memory-headroom = "error"
[tool.memlint.options.low-memory-headroom]
margin = 0.15
[[tool.memlint.runs]]                # files that describe one run, linted together
name = "pretrain"
files = ["train.sh", "ds_config.json"]
set = ["world_size=64"]
[tool.memlint.scenario]              # scenario keys (read by the native adapter)
model = "llama3-8b"
[tool.memlint.assumptions]           # runtime assumptions of this cluster (memlint compare
"runtime.allocator_fraction" = 0.08  # --write-assumptions fits them from a training log)
[tool.memlint.models]                # the project's own models, by the name its configs use
"acme/llm-7b" = "models/llm-7b/config.json"   # a config.json (relative to this file)
"acme/tiny" = { model_type = "llama", hidden_size = 512, num_hidden_layers = 4 }  # or its keys
```
"""
from __future__ import annotations

import os
import re
from functools import lru_cache

from memlint.diagnostics import Severity
from memlint.engine import LintConfig, SettingsError
from memlint.ir import Partial, Provenance
from memlint.keys import suggest
from memlint.loaders import MAX_FILE_BYTES, load_toml, read_text, repo_root

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

_KNOWN = {"select", "extend-select", "ignore", "fail-on", "per-file-ignores", "severity",
          "options", "files", "runs", "scenario", "allow-outside-root", "exclude",
          "assumptions", "models"}


def _read_toml(path: str) -> dict:
    """The pyproject.toml as data: read with the config size limit (a 1.5 GB file once took 3 GB
    of memory), as UTF-8, by loaders.load_toml; anything unreadable is a SettingsError naming the
    file, line and column."""
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read: {exc.strerror}") from None
    if size > MAX_FILE_BYTES:
        raise SettingsError(f"{path}: {size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit of a "
                          "pyproject.toml memlint reads; not read")
    text, problems = read_text(path, MAX_FILE_BYTES)
    if text is None:
        raise SettingsError(_located(problems[0]))
    doc = load_toml(path, text)
    if doc.data is None:
        raise SettingsError(_located(doc.diagnostics[0]))
    return doc.data


def _located(d) -> str:
    where = d.path + (f":{d.line}" if d.line else "") + (f":{d.column}" if d.line and d.column
                                                         else "")
    return f"{where}: {d.message}"


@lru_cache(maxsize=4096)   # a directory walk asks once per folder (check fixtures/: ~600)
def find_pyproject(directory: str) -> Optional[str]:
    """The nearest pyproject.toml at or above `directory` that has a [tool.memlint] table."""
    probe = os.path.abspath(directory)
    while True:
        candidate = os.path.join(probe, "pyproject.toml")
        if os.path.isfile(candidate):
            try:
                with open(candidate, "rb") as handle:
                    head = handle.read(MAX_FILE_BYTES + 1)
                # one over the size limit is taken, so that its error is reported: memlint
                # cannot tell whether it configures memlint
                if b"tool.memlint" in head or len(head) > MAX_FILE_BYTES:
                    return candidate
            except OSError:
                pass
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent


def _strings(value, where: str) -> tuple:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SettingsError(f"{where} must be a list of strings")
    return tuple(value)


def _severity(value, where: str) -> Severity:
    try:
        return Severity.parse(str(value))
    except ValueError as exc:
        raise SettingsError(f"{where}: {exc}") from None


def parse_table(table: dict, source: str) -> LintConfig:
    """[tool.memlint] as a LintConfig; unknown keys and wrong types raise SettingsError."""
    config = LintConfig(source=source, root=os.path.dirname(os.path.abspath(source)))
    if not isinstance(table, dict):
        raise SettingsError(f"{source}: [tool.memlint] must be a table")
    for raw_key, value in table.items():
        key = raw_key.replace("_", "-")
        where = f"{source}: [tool.memlint] {raw_key}"
        if key not in _KNOWN:
            hint = suggest(key, _KNOWN)
            raise SettingsError(f"{where}: unknown setting" + (f"; did you mean {hint!r}?"
                                                               if hint else ""))
        if key == "select":
            config.select = _strings(value, where)
        elif key == "extend-select":
            config.extend_select = _strings(value, where)
        elif key == "ignore":
            config.ignore = _strings(value, where)
        elif key == "fail-on":
            config.fail_on = _severity(value, where)
        elif key == "files":
            config.files = _strings(value, where)
        elif key == "exclude":
            config.exclude = _strings(value, where)
        elif key == "allow-outside-root":
            if not isinstance(value, bool):
                raise SettingsError(f"{where} must be true or false")
            config.allow_outside_root = value
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise SettingsError(f"{where} must be a table of glob = [codes]")
            config.per_file_ignores = {glob: _strings(codes, f"{where}.{glob}")
                                       for glob, codes in value.items()}
        elif key == "severity":
            if not isinstance(value, dict):
                raise SettingsError(f"{where} must be a table of rule = severity")
            config.severities = {sel: _severity(sev, f"{where}.{sel}")
                                 for sel, sev in value.items()}
        elif key == "options":
            if not isinstance(value, dict) or not all(isinstance(v, dict)
                                                      for v in value.values()):
                raise SettingsError(f"{where} must hold one table per rule")
            config.options = {name: dict(opts) for name, opts in value.items()}
        elif key == "assumptions":
            if not isinstance(value, dict):
                raise SettingsError(f"{where} must be a table of assumption = value")
            config.assumptions = dict(value)
        elif key == "models":
            config.models = _models(value, where, config.root, source)
        elif key == "runs":
            config.runs = tuple(_run(item, f"{where}[{index}]", config.root)
                                for index, item in enumerate(value if isinstance(value, list)
                                                             else [value]))
    return config


def _models(table, where: str, root: str, source: str) -> dict:
    """[tool.memlint.models]: a Hub id (or any name a config uses) -> the path of its config.json
    (relative to the pyproject.toml) or an inline table of its config.json keys. A project's own
    models resolve before the HF cache and the bundled catalog (scenario.load_model_source)."""
    if not isinstance(table, dict):
        raise SettingsError(f"{where} must be a table of name = \"path/to/config.json\" or "
                            "name = { model_type = ..., hidden_size = ... }")
    models = {}
    for name, value in table.items():
        here = f"{where}.{name}"
        if isinstance(value, str) and value.strip():
            path = os.path.normpath(os.path.join(root, os.path.expanduser(value)))
            if os.path.isdir(path):
                path = os.path.join(path, "config.json")
            entry = {"id": name, "path": path, "source": source}
        elif isinstance(value, dict) and value:
            if not any(k in value for k in ("model_type", "hidden_size", "text_config")):
                raise SettingsError(f"{here} must give the model's config.json keys "
                                    "(model_type, hidden_size, ...)")
            entry = {"id": name, "config": dict(value), "source": source}
        else:
            raise SettingsError(f"{here} must be the path of a config.json or a table of its keys")
        key = name.strip().lower()
        if key in models:
            raise SettingsError(f"{here}: {name!r} is given twice (names are case-insensitive)")
        models[key] = entry
    return models


def _run(item, where: str, root: str) -> dict:
    if not isinstance(item, dict):
        raise SettingsError(f"{where} must be a table with files = [...]")
    unknown = set(item) - {"name", "files", "set", "model"}
    if unknown:
        raise SettingsError(f"{where}: unknown setting(s) {', '.join(sorted(unknown))} "
                          "(use name, files, set, model)")
    files = _strings(item.get("files", []), f"{where}.files")
    if not files:
        raise SettingsError(f"{where}.files must list at least one file")
    return {"name": str(item.get("name", files[0])),
            "files": tuple(os.path.normpath(os.path.join(root, f)) for f in files),
            "set": _strings(item.get("set", []), f"{where}.set"),
            "model": item.get("model")}


def load_config(pyproject: str) -> LintConfig:
    data = _read_toml(pyproject)
    table = data.get("tool", {}).get("memlint") if isinstance(data.get("tool"), dict) else None
    if table is None:
        return LintConfig(source=None, root=os.path.dirname(os.path.abspath(pyproject)))
    return parse_table(table, pyproject)


def config_for(path: str) -> LintConfig:
    """The LintConfig that governs `path` (a file or a directory)."""
    start = os.path.abspath(path)
    directory = start if os.path.isdir(start) else os.path.dirname(start)
    found = find_pyproject(directory)
    if found is None:
        return LintConfig(root=repo_root(directory))
    return load_config(found)


def assumptions_partial(config: LintConfig):
    """[tool.memlint.assumptions] as a Partial of scenario settings (each assumption is a
    scenario key), placed above the files and below the command line; None when it is empty.
    Values are converted and checked by `memlint.scenario.build`, at the line that sets them."""
    if not config.assumptions:
        return None

    lines = _key_lines(config.source, "tool.memlint.assumptions") if config.source else {}
    partial = Partial(source=config.source or "<config>", fmt="config")
    for name, value in config.assumptions.items():
        prov = Provenance(config.source, lines.get(name), 1 if name in lines else None,
                          f"[tool.memlint.assumptions] {name}")
        partial.set(name, value, prov)
    return partial


def _key_lines(path: str, table: str) -> dict:
    """key -> 1-based line of `key = ...` under `[table]` (tomllib gives no positions)."""
    out: dict = {}
    inside = False
    header = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$")
    key = re.compile(r'^\s*"?([^"=]+?)"?\s*=')
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                found = header.match(line)
                if found:
                    inside = found.group(1).replace(" ", "") == table
                    continue
                found = key.match(line) if inside else None
                if found:
                    out.setdefault(found.group(1).strip(), number)
    except OSError:
        pass
    return out

