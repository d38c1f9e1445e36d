"""The rule registry: built-in rule modules (an explicit list) plus `memlint.rules` entry points.

Every rule module exports `RULES = [instances]`. Modules are imported lazily, one at a time; a
built-in module that is not in this checkout is skipped silently (families are developed in
parallel), and a module or plugin that fails to import becomes an `internal-error` diagnostic
instead of sinking the run (STYLE.md 2).

The registry enforces its invariants: well-formed unique codes (`ML` + 3 digits), unique kebab-case
names, the four doc sections, and well-declared options. The reserved codes of problems found
before any rule runs (`memlint.diagnostics`, ML0xx) are registered as pseudo-rules, so that
`memlint rules` and `memlint explain` cover them.
"""
from __future__ import annotations

import importlib
import re
import shlex
from dataclasses import dataclass
from typing import Iterable, Optional

from memlint.diagnostics import INTERNAL_ERROR, Diagnostic, Severity, make
from memlint.ir import Provenance
from memlint.rules.base import DOC_SECTIONS, Rule

# Order is the order of `memlint rules` within a family; codes decide the listing order.
BUILTIN_MODULES = (
    "memlint.rules.reserved",
    "memlint.rules.memory",
    "memlint.rules.topology",
    "memlint.rules.deepspeed",
    "memlint.rules.megatron",
    "memlint.rules.fsdp",
    "memlint.rules.strategy",
    "memlint.rules.host",
)
ENTRY_POINT_GROUP = "memlint.rules"
# Where each rule's documentation is published (SARIF helpUri); `{code}` and `{name}` are filled.
HELP_URI = "https://memlint.readthedocs.io/en/latest/rules/{code}.html"

CODE_RE = re.compile(r"^ML\d{3}$")
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
OPTION_TYPES = (int, float, str, bool)


class RegistryError(ValueError):
    """A rule breaks a registry invariant (bad or duplicate code/name, missing doc section)."""


@dataclass(frozen=True)
class DocExample:
    """One snippet of a rule's *Example* section: `Bad (file.ext; --set k=v):` + indented block."""

    kind: str        # "bad" | "good"
    filename: str
    args: tuple      # extra command-line arguments (--set k=v, --model X, --gpu G, ...)
    text: str


_EXAMPLE_HEAD = re.compile(
    r"^\s*(Bad|Good)\s*\(\s*([\w./-]+\.\w+)\s*(?:;\s*([^)]*))?\)\s*:\s*$", re.I)


def doc_examples(rule: Rule) -> list:
    """The machine-checkable snippets of a rule's Example section (may be empty).

    A checkable snippet is headed `Bad (FILENAME):` or `Good (FILENAME; --set k=v ...):`, where
    FILENAME (e.g. memlint.toml, ds_config.json) picks the adapter, followed by an indented block.
    """
    import textwrap

    doc_lines = rule.doc.splitlines()
    starts = [i for i, line in enumerate(doc_lines) if line.strip() == "Example:"]
    if not starts:
        return []
    body_lines = []
    for line in doc_lines[starts[0] + 1:]:
        if line.strip().endswith(":") and line.strip()[:-1] in DOC_SECTIONS:
            break
        body_lines.append(line)
    lines = textwrap.dedent("\n".join(body_lines)).splitlines()
    out = []
    index = 0
    while index < len(lines):
        match = _EXAMPLE_HEAD.match(lines[index])
        index += 1
        if not match:
            continue
        head_indent = len(lines[index - 1]) - len(lines[index - 1].lstrip())
        block = []
        while index < len(lines):
            line = lines[index]
            if line.strip() and len(line) - len(line.lstrip()) <= head_indent:
                break
            block.append(line)
            index += 1
        while block and not block[0].strip():
            block.pop(0)
        while block and not block[-1].strip():
            block.pop()
        indent = min((len(b) - len(b.lstrip()) for b in block if b.strip()), default=0)
        body = "\n".join(b[indent:] for b in block) + "\n"
        args = tuple(shlex.split(match.group(3))) if match.group(3) else ()
        out.append(DocExample(match.group(1).lower(), match.group(2), args, body))
    return out


def validate_rule(rule: Rule) -> None:
    """Raise RegistryError unless `rule` keeps the registry's invariants (alone)."""
    label = f"{type(rule).__module__}.{type(rule).__name__}"
    if not isinstance(rule, Rule):
        raise RegistryError(f"{label}: not a memlint.rules.base.Rule instance")
    if not isinstance(rule.code, str) or not CODE_RE.match(rule.code):
        raise RegistryError(f"{label}: code {rule.code!r} is not ML + 3 digits")
    if not isinstance(rule.name, str) or not NAME_RE.match(rule.name):
        raise RegistryError(f"{label}: name {rule.name!r} is not kebab-case")
    if not isinstance(rule.severity, Severity):
        raise RegistryError(f"{rule.code}: severity must be a memlint.diagnostics.Severity")
    sections = rule.sections()
    missing = [title for title in DOC_SECTIONS if not sections.get(title)]
    if missing:
        raise RegistryError(f"{rule.code} {rule.name}: docstring lacks section(s) "
                            f"{', '.join(missing)}")
    for option, spec in dict(rule.options).items():
        if (not isinstance(spec, tuple) or len(spec) != 2 or spec[0] not in OPTION_TYPES
                or not _fits(spec[1], spec[0])):
            raise RegistryError(f"{rule.code}: option {option!r} must be (type, default) with a "
                                "default of that type")


def _fits(value, kind) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def configure(rule: Rule, given: Optional[dict]) -> dict:
    """The rule's options: defaults overlaid with `given`, checked once. Raises ValueError."""
    out = {name: spec[1] for name, spec in dict(rule.options).items()}
    for name, value in (given or {}).items():
        key = str(name).replace("-", "_")
        if key not in out:
            known = ", ".join(sorted(out)) or "none"
            raise ValueError(f"{rule.code} {rule.name}: unknown option {name!r} (options: {known})")
        kind = rule.options[key][0]
        if not _fits(value, kind):
            raise ValueError(f"{rule.code} {rule.name}: option {name!r} must be "
                             f"{kind.__name__}, got {value!r}")
        out[key] = float(value) if kind is float else value
    return out


class Registry:
    """Rules by code and by name; load problems kept as diagnostics."""

    def __init__(self) -> None:
        self.rules: dict = {}
        self.by_name: dict = {}
        self.diagnostics: list = []

    def add(self, rule: Rule) -> None:
        validate_rule(rule)
        if rule.code in self.rules:
            raise RegistryError(f"duplicate rule code {rule.code} ({rule.name} and "
                                f"{self.rules[rule.code].name})")
        if rule.name in self.by_name:
            raise RegistryError(f"duplicate rule name {rule.name!r} ({rule.code} and "
                                f"{self.by_name[rule.name].code})")
        self.rules[rule.code] = rule
        self.by_name[rule.name] = rule

    def add_all(self, rules: Iterable, origin: str) -> None:
        for rule in rules:
            if isinstance(rule, type) and issubclass(rule, Rule):
                try:
                    rule = rule()  # a module that lists its rule classes: instantiate them
                except Exception as exc:  # noqa: BLE001
                    self._problem(f"rule {rule.__name__} from {origin} cannot be created: {exc}")
                    continue
            try:
                self.add(rule)
            except RegistryError as exc:
                self._problem(f"rule from {origin} not registered: {exc}")

    def _problem(self, message: str) -> None:
        self.diagnostics.append(make(INTERNAL_ERROR, Severity.WARNING, message,
                                     Provenance(None, None, None, None), internal=False))

    def get(self, code_or_name: str) -> Optional[Rule]:
        text = code_or_name.strip()
        return self.rules.get(text.upper()) or self.by_name.get(text.lower())

    def __iter__(self):
        return iter(sorted(self.rules.values(), key=lambda r: r.code))

    def __len__(self) -> int:
        return len(self.rules)

    def load_module(self, module_name: str, builtin: bool) -> None:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if builtin and exc.name == module_name:
                return  # that family is not in this checkout yet
            self._problem(f"rule module {module_name} failed to import: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 - one broken module must not sink the run
            self._problem(f"rule module {module_name} failed to import: "
                          f"{type(exc).__name__}: {exc}")
            return
        rules = getattr(module, "RULES", None)
        if not isinstance(rules, (list, tuple)):
            self._problem(f"rule module {module_name} has no RULES list")
            return
        self.add_all(rules, module_name)

    def load_plugins(self) -> None:
        try:
            from memlint.plugins import entry_points

            found = entry_points(ENTRY_POINT_GROUP)
        except Exception as exc:  # noqa: BLE001
            self._problem(f"cannot list {ENTRY_POINT_GROUP} entry points: {exc}")
            return
        for entry in sorted(found, key=lambda e: e.name):
            try:
                target = entry.load()
                if callable(target) and not isinstance(target, type):
                    target = target()
                if hasattr(target, "RULES"):
                    target = target.RULES
                if isinstance(target, Rule):
                    target = [target]
                if not isinstance(target, (list, tuple)):
                    raise TypeError("an entry point must give a module with RULES, a list of "
                                    "rules, or a function returning one")
            except Exception as exc:  # noqa: BLE001 - each plugin in its own try/except
                self._problem(f"plugin {entry.name!r} ({entry.value}) failed to load: "
                              f"{type(exc).__name__}: {exc}")
                continue
            self.add_all(target, f"plugin {entry.name!r}")


_CACHE: dict = {}


def registry(plugins: bool = True) -> Registry:
    """The registry of built-in rules (and plugins), built once per process."""
    if plugins not in _CACHE:
        reg = Registry()
        for module_name in BUILTIN_MODULES:
            reg.load_module(module_name, builtin=True)
        if plugins:
            reg.load_plugins()
        _CACHE[plugins] = reg
    return _CACHE[plugins]


def help_uri(rule: Rule) -> str:
    return HELP_URI.format(code=rule.code, name=rule.name)


def make_internal(message: str, prov: Optional[Provenance] = None) -> Diagnostic:
    """An internal-error diagnostic that makes the run exit 2 (a rule or the model failed)."""
    return make(INTERNAL_ERROR, Severity.ERROR, message, prov, internal=True)
