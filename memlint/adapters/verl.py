"""verl launch scripts and config YAML: Hydra overrides laid over verl's own defaults.

A verl run is `python3 -m verl.trainer.main_ppo key=value ...` (also behind `ray job submit`, with
`--config-path/--config-name` naming a YAML of its own, and recipes' `python3 -m recipe.X.main_Y`
on the same config tree). The script is read with the static shell reader (never executed);
the overrides (`a.b=v`, `+a.b=v`, `++a.b=v`, `~a.b`; memlint/adapters/_hydra.py) are laid over the
composed defaults of a pinned verl release (memlint/facts/verl_defaults.json: volcengine/verl
v0.7.0 `_generated_ppo_trainer.yaml` / `_generated_ppo_megatron_trainer.yaml`), interpolations
resolved, and the result mapped onto scenario keys: the actor's training settings (the update
phase), the rollout engine (`engine.*`), and the RL roles (`rl.*`: reference, critic, reward model,
between-phase offload, log-prob micro-batches). The table `MAPPING` is the list of verl keys memlint
reads; every default it used is listed in one info diagnostic with the verl file and line.

What verl's code does with them (volcengine/verl@f9c855f7, v0.7.0) is in the notes beside each
mapping; the memory model's RL phases (memlint/memory/rl) read only the scenario keys.
"""
from __future__ import annotations

import json
import os
import re
from functools import lru_cache

from memlint import lazy_re
from memlint.adapters import _hydra
from memlint.adapters.detection import VERL_NOT_RL as _NOT_RL
from memlint.adapters.detection import verl as detect  # noqa: F401 - the adapter's detect()
from memlint.diagnostics import UNKNOWN_KEY, UNRESOLVED, Severity, make
from memlint.ir import UNREAD_REFERENCE, Partial, Provenance
from memlint.keys import suggest
from memlint.loaders import inside, load_yaml, read_text, repo_root, suppressions
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

FORMAT = "verl"
_DEFAULTS_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "facts",
                              "verl_defaults.json")
_ENTRY_MODULE = lazy_re.compile(r"^(?:verl\.trainer\.main_ppo|recipe\.[\w.]+\.main_\w+|"
                                r"verl\.trainer\.main_\w+)$")


@lru_cache(maxsize=1)
def defaults() -> dict:
    with open(_DEFAULTS_FILE, encoding="utf-8") as handle:
        return json.load(handle)


def version() -> str:
    return defaults()["version"]


def source(config: str = "ppo_trainer") -> str:
    data = defaults()
    return f"{data['repository']}@{data['commit'][:9]} (v{data['version']}) " \
           f"{data['configs'][config]['path']}"


# -- the composed config ---------------------------------------------------------------------

@lru_cache(maxsize=None)
def _table_parents(name: str) -> frozenset:
    """Every dotted prefix of the keys of verl's default config `name` (`a`, `a.b` of `a.b.c`)."""
    parents = set()
    for key in defaults()["configs"][name]["keys"]:
        dot = key.rfind(".")
        while dot >= 0:
            parents.add(key[:dot])
            dot = key.rfind(".", 0, dot)
    return frozenset(parents)


@record
class Entry:
    value: Any
    prov: Provenance
    default: bool          # verl's own default, no file gave it
    line: Optional[int] = None  # its line in verl's file (defaults)
    unresolved: tuple = ()


class Config:
    """verl's flat config (dotted key -> Entry) with the overrides applied."""

    def __init__(self, name: str, anchor: Provenance):
        self.name = name
        table = defaults()["configs"][name]["keys"]
        self.entries = {key: Entry(value, anchor, True, line)
                        for key, (value, line) in table.items()}
        self.used_defaults: dict = {}
        self._flat: Optional[dict] = None   # flat(), made again after a change
        self._parents: Optional[set] = None  # every dotted prefix of a key (`a`, `a.b` of `a.b.c`)
        self._table = table
        self._removed = False   # some key was removed since the defaults were copied

    def _is_parent(self, key: str) -> bool:
        """Some key lies under `key` (`key` + "." starts it). Made once, kept by set(), made
        again after a key's children are removed."""
        if self._parents is None:
            if self._removed:
                self._parents = set()
                for name in self.entries:
                    self._add_parents(name)
            else:
                # for speed: every default key is still there, so their prefixes are the
                # table's, made once per process; only the keys a file added are walked
                table = self._table
                self._parents = set(_table_parents(self.name))
                for name in self.entries:
                    if name not in table:
                        self._add_parents(name)
        return key in self._parents

    def _add_parents(self, name: str) -> None:
        if self._parents is None:
            return   # made from every key when first asked
        dot = name.rfind(".")
        while dot >= 0:
            self._parents.add(name[:dot])
            dot = name.rfind(".", 0, dot)

    def known(self, key: str) -> bool:
        return key in self.entries or self._is_parent(key)

    def set(self, key: str, value: Any, prov: Provenance, unresolved: tuple = ()) -> None:
        if not isinstance(value, dict) and self._is_parent(key):
            for child in [k for k in self.entries if k.startswith(key + ".")]:
                del self.entries[child]
            self._parents = None
            self._removed = True
        self._flat = None
        if isinstance(value, dict) and value:
            for name, item in _flatten(value, key + "."):
                self.entries[name] = Entry(item, prov, False, None, unresolved)
                self._add_parents(name)
            return
        self.entries[key] = Entry(value, prov, False, None, unresolved)
        self._add_parents(key)

    def delete(self, key: str) -> None:
        self._flat = self._parents = None
        self._removed = True
        for name in [k for k in self.entries if k == key or k.startswith(key + ".")]:
            del self.entries[name]

    def flat(self) -> dict:
        """Every key's value (made once per state of the config: each get() resolves against
        it). Read it, do not change it."""
        if self._flat is None:
            self._flat = {key: entry.value for key, entry in self.entries.items()}
        return self._flat

    def get(self, key: str) -> Optional[Entry]:
        """The entry of `key` with interpolations resolved (None when the config lacks it)."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        if entry.unresolved:
            return entry
        try:
            value = _hydra.resolve(self.flat(), key, entry.value)
        except _hydra.Unresolved as why:
            return Entry(entry.value, entry.prov, entry.default, entry.line, (str(why),))
        except ValueError as why:
            return Entry(entry.value, entry.prov, entry.default, entry.line, (str(why),))
        source_entry = entry
        if isinstance(entry.value, str) and "${" in entry.value:
            # an interpolation takes the position of the key it names when a file set that one
            source_entry = self._source_of(key, entry) or entry
        if source_entry.default:
            self.used_defaults[key] = (value, source_entry.line)
        return Entry(value, source_entry.prov, source_entry.default, source_entry.line)

    def _source_of(self, key: str, entry: Entry) -> Optional[Entry]:
        text = str(entry.value)
        match = re.search(r"\$\{(?:oc\.select:)?([^,}]+)", text)
        if match is None:
            return None
        target = self.entries.get(_hydra.absolute(key, match.group(1).strip()))
        if target is None or (isinstance(target.value, str) and "${" in target.value):
            return None
        return target if not target.default else None


def _flatten(data: dict, prefix: str):
    for key, value in data.items():
        if isinstance(value, dict) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


# -- reading a script ------------------------------------------------------------------------

@record
class Launch:
    """What the launch command says: the config name and path, and the overrides in order."""

    config_name: Optional[str] = None
    config_name_prov: Optional[Provenance] = None
    config_path: Optional[str] = None
    overrides: list = None
    anchor: Optional[Provenance] = None
    module: str = ""


def _read_script(path: str, text: str, partial: Partial) -> Optional[Launch]:
    # start-up: the shell reader loads only for a script
    from memlint.adapters import _script, _shell

    parsed = _script.parse(path, text, partial)
    if parsed is None:
        return None
    script, prov = parsed

    interpreter = _shell.Interpreter()
    launch = None
    for command in interpreter.run(script):
        texts = [f.text for f in command.fields]
        index = _entry_index(texts)
        if index is None or texts[index] in _NOT_RL:
            continue
        launch = Launch(overrides=[], anchor=prov(command.offset, "launch command"),
                        module=texts[index])
        _arguments(command.fields[index + 1:], launch, prov, partial)
        break  # the first training launch is the run (later ones are reruns / evaluation)
    for offset, message in interpreter.notes:
        partial.diagnostics.append(make(UNRESOLVED, Severity.INFO, message, prov(offset)))
    if launch is None:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, "no verl training launch found (python3 -m "
            "verl.trainer.main_ppo key=value ...); nothing was read from this script",
            Provenance(path, 1, 1, None)))
    return launch


def _entry_index(texts: list) -> Optional[int]:
    for index, text in enumerate(texts):
        if text == "-m" and index + 1 < len(texts) and _ENTRY_MODULE.match(texts[index + 1]):
            return index + 1
        if text.endswith("verl/trainer/main_ppo.py"):
            return index
    return None


_CONFIG_OPTIONS = {"--config-path": "path", "-cp": "path", "--config-name": "name", "-cn": "name",
                   "--config-dir": "dir", "-cd": "dir"}


def _arguments(fields: list, launch: Launch, prov, partial: Partial) -> None:
    i = 0
    while i < len(fields):
        field_ = fields[i]
        text = field_.text
        option, value, where = None, None, field_
        if text.split("=", 1)[0] in _CONFIG_OPTIONS:
            option = _CONFIG_OPTIONS[text.split("=", 1)[0]]
            if "=" in text:
                value = text.split("=", 1)[1]
            elif i + 1 < len(fields):
                i += 1
                value, where = fields[i].text, fields[i]
        if option is not None:
            if value is not None and not where.unresolved:
                if option == "name":
                    launch.config_name = value
                    launch.config_name_prov = prov(where.origin, text.split("=")[0])
                elif option == "path":
                    launch.config_path = value
            elif value is not None:
                partial.diagnostics.append(make(
                    UNRESOLVED, Severity.INFO, f"{text.split('=')[0]} {value}: not known "
                    "statically (" + ", ".join(where.unresolved) + ")", prov(where.origin)))
            i += 1
            continue
        if field_.unresolved and "=" not in text:
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.INFO, f"{text}: overrides given when the script is run "
                f"({', '.join(field_.unresolved)}) are not seen; the estimate is of the "
                "script's own settings", prov(field_.origin)))
            i += 1
            continue
        split = _hydra.split_override(text)
        if split is None:
            i += 1
            continue
        mode, key, raw = split
        where_ = prov(field_.origin, key)
        unresolved = tuple(field_.unresolved)
        if key.startswith("hydra.") or key == "hydra":
            i += 1
            continue
        try:
            parsed = _hydra.literal(raw) if raw is not None else None
        except ValueError as why:
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.WARNING, f"{key}: the value {raw!r} is not read ({why})",
                where_, key=key))
            i += 1
            continue
        launch.overrides.append(_hydra.Override(key, parsed, mode, where_, unresolved))
        i += 1


# -- composing -------------------------------------------------------------------------------

def _base_of(name: Optional[str]) -> str:
    stem = os.path.splitext(os.path.basename(name or "ppo_trainer"))[0]
    return "ppo_megatron_trainer" if "megatron" in stem else "ppo_trainer"


def compose(launch: Launch, path: str, partial: Partial) -> Config:
    """verl's defaults, the named config YAML's keys, then the overrides (Hydra's order)."""
    name = launch.config_name
    base = _base_of(name)
    yaml_file = None
    if name and os.path.splitext(os.path.basename(name))[0] not in ("ppo_trainer",
                                                                   "ppo_megatron_trainer"):
        yaml_file = _find_config(name, launch.config_path, path)
        if yaml_file is None:
            prov = launch.config_name_prov or launch.anchor
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.WARNING, f"--config-name {name}: its YAML "
                f"({launch.config_path or '.'}/{name}) is not found next to the script; its "
                f"settings are not read (verl's {base} defaults are used in their place)", prov,
                key="config-name"))
            partial.set_extra(UNREAD_REFERENCE + str(name), name, prov)
    config = Config(base, launch.anchor)
    if yaml_file is not None:
        base_from_yaml = _overlay_yaml(config, yaml_file, partial)
        if base_from_yaml and base_from_yaml != base:
            config = Config(base_from_yaml, launch.anchor)
            _overlay_yaml(config, yaml_file, partial)
    _apply(config, launch.overrides, partial)
    return config


def _find_config(name: str, config_path: Optional[str], script: str) -> Optional[str]:
    file = name if name.endswith((".yaml", ".yml")) else name + ".yaml"
    root = repo_root(script)
    here = os.path.dirname(os.path.abspath(script))
    places = []
    if config_path:
        places += [os.path.join(d, config_path) for d in (here, root)]
        places.append(os.path.join(root, "verl", "trainer", config_path))
    places += [here, os.path.join(here, "config")]
    for place in places:
        candidate = os.path.normpath(os.path.join(place, file))
        if inside(candidate, root) and os.path.isfile(candidate):
            return candidate
    return None


def _overlay_yaml(config: Config, yaml_file: str, partial: Partial) -> Optional[str]:
    """The keys of a config YAML laid over `config`; returns the base its `defaults` names."""
    text, problems = read_text(yaml_file)
    if text is None:
        partial.diagnostics.extend(problems)
        return None
    doc = load_yaml(yaml_file, text)
    partial.diagnostics.extend(doc.diagnostics)
    if not isinstance(doc.data, dict):
        return None
    base = None
    for item in doc.data.get("defaults") or []:
        if isinstance(item, str) and item in ("ppo_trainer", "ppo_megatron_trainer"):
            base = item
    for key, value in _flatten({k: v for k, v in doc.data.items()
                                if k not in ("defaults", "hydra")}, ""):
        config.set(key, value, doc.prov(tuple(key.split(".")), key))
    return base


def _apply(config: Config, overrides: list, partial: Partial) -> None:
    unknown = []
    known = list(config.entries)
    for item in overrides:
        if item.mode == "delete":
            config.delete(item.key)
            continue
        if item.mode == "set" and not config.known(item.key):
            unknown.append(item)
        config.set(item.key, item.value, item.prov, item.unresolved)
    for item in unknown[:20]:
        hint = suggest(item.key, [k for k in known if k != item.key])
        partial.diagnostics.append(make(
            UNKNOWN_KEY, Severity.WARNING,
            f"{item.key} is not a key of verl {version()}'s {config.name} config: Hydra refuses "
            "to set a key the config lacks unless it is written +" + item.key +
            (f"; did you mean {hint!r}?" if hint else " (a key of another verl version?)"),
            item.prov, key=item.key))


# -- loading ---------------------------------------------------------------------------------

def load(path: str, text: str) -> Partial:
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    if path.lower().endswith((".yaml", ".yml")):
        anchor = Provenance(path, 1, 1, "config")
        launch = Launch(config_name=os.path.basename(path), config_path=".",
                        overrides=[], anchor=anchor)
        launch.config_name_prov = anchor
        config = Config(_base_of(None), anchor)
        base = _overlay_yaml(config, path, partial)
        if base and base != config.name:
            config = Config(base, anchor)
            _overlay_yaml(config, path, partial)
    else:
        launch = _read_script(path, text, partial)
        if launch is None:
            return partial
        config = compose(launch, path, partial)
    partial.anchor = launch.anchor
    # start-up: the mapping (and the shared trainer helpers it uses) loads only for verl files
    from memlint.adapters import verl_mapping

    verl_mapping.apply(config, partial, launch.anchor, version(), source(config.name))
    return partial
