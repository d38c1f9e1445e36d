"""Hydra command-line overrides and OmegaConf interpolations, read statically.

verl (and EasyR1, NeMo-RL) start from a composed YAML config and take `key=value` overrides on the
command line: `a.b=1` changes a key the config has, `+a.b=1` adds one it lacks, `++a.b=1` sets it
either way, `~a.b` deletes it (Hydra's override grammar, hydra/core/override_parser). Values are
Hydra literals: null, true/false (any case), integers and floats (`1_000`, `1e-6`), quoted strings,
`[lists]`, `{dicts}`, and `${...}` interpolations that OmegaConf resolves against the composed
config when it is read (`${a.b}`, `${.sibling}`, `${oc.select:a.b,default}`, `${oc.env:VAR,default}`).

Nothing is evaluated: a value is parsed as data, an interpolation is looked up in the config this
module was given, and what it cannot know (an environment variable, a custom resolver) stays
unresolved for the caller to report.
"""
from __future__ import annotations

import re

from memlint import lazy_re
from memlint.ir import Provenance
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

MODES = {"": "set", "+": "add", "++": "force", "~": "delete"}
_KEY = lazy_re.compile(r"(\+\+|\+|~)?([A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]+|\[\d+\])*)"
                       r"(?:(=)(.*))?", re.S)
_INT = lazy_re.compile(r"[+-]?[0-9][0-9_]*")
_FLOAT = lazy_re.compile(r"[+-]?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9][0-9_]*|[0-9][0-9_]*)"
                         r"(?:[eE][+-]?[0-9]+)?")
MAX_DEPTH = 16


@record(frozen=True)
class Override:
    """One `key=value` word of a Hydra command line."""

    key: str
    value: Any
    mode: str             # set | add | force | delete
    prov: Provenance
    unresolved: tuple = ()


def split_override(text: str) -> Optional[tuple]:
    """(mode, key, value text or None) of an override word, None when it is not one."""
    match = _KEY.fullmatch(text)
    if match is None:
        return None
    prefix, key, equals, value = match.groups()
    if equals is None and prefix != "~":
        return None
    return MODES[prefix or ""], key, value


class _Reader:
    """A recursive reader of Hydra's value grammar (a subset: what configs write)."""

    def __init__(self, text: str):
        self.text, self.i = text, 0

    def value(self, depth: int = 0, stop: str = "") -> Any:
        self.blanks()
        if depth > MAX_DEPTH:
            raise ValueError("nested too deeply")
        char = self.text[self.i:self.i + 1]
        if char == "[":
            return self.sequence(depth)
        if char == "{" and not self.text.startswith("{", self.i + 1):
            return self.mapping(depth)
        if char in ("'", '"'):
            return self.quoted(char)
        return primitive(self.plain(stop))

    def blanks(self) -> None:
        while self.i < len(self.text) and self.text[self.i] in " \t":
            self.i += 1

    def quoted(self, quote: str) -> str:
        end = self.text.find(quote, self.i + 1)
        if end < 0:
            raise ValueError(f"unterminated {quote} string")
        text = self.text[self.i + 1:end]
        self.i = end + 1
        return text

    def plain(self, stop: str) -> str:
        start, depth = self.i, 0
        while self.i < len(self.text):
            char = self.text[self.i]
            if self.text.startswith("${", self.i):
                depth += 1
                self.i += 2
                continue
            if char == "}" and depth:
                depth -= 1
            elif char in stop and not depth:
                break
            self.i += 1
        return self.text[start:self.i].strip()

    def sequence(self, depth: int) -> list:
        self.i += 1
        items: list = []
        self.blanks()
        if self.text.startswith("]", self.i):
            self.i += 1
            return items
        while True:
            items.append(self.value(depth + 1, ",]"))
            self.blanks()
            char = self.text[self.i:self.i + 1]
            self.i += 1
            if char == "]":
                return items
            if char != ",":
                raise ValueError("expected , or ] in a list")

    def mapping(self, depth: int) -> dict:
        self.i += 1
        items: dict = {}
        self.blanks()
        if self.text.startswith("}", self.i):
            self.i += 1
            return items
        while True:
            self.blanks()
            key = self.quoted(self.text[self.i]) if self.text[self.i:self.i + 1] in "'\"" \
                else self.plain(":")
            if not self.text.startswith(":", self.i):
                raise ValueError("expected : in a mapping")
            self.i += 1
            items[str(key)] = self.value(depth + 1, ",}")
            self.blanks()
            char = self.text[self.i:self.i + 1]
            self.i += 1
            if char == "}":
                return items
            if char != ",":
                raise ValueError("expected , or } in a mapping")


def primitive(text: str) -> Any:
    """A plain (unquoted) Hydra value: null, a bool, an int, a float, else the string."""
    lower = text.lower()
    if lower == "null":
        return None
    if lower in ("true", "false"):
        return lower == "true"
    if _INT.fullmatch(text) and len(text) <= 40:
        return int(text.replace("_", ""))
    if _FLOAT.fullmatch(text) and any(c.isdigit() for c in text) and len(text) <= 64:
        return float(text.replace("_", ""))
    if lower in ("inf", "+inf", "-inf", "nan"):
        return float(lower)
    return text


def literal(text: str) -> Any:
    """The value of an override's right-hand side. Raises ValueError on broken syntax."""
    reader = _Reader(text)
    value = reader.value()
    reader.blanks()
    if reader.i != len(text):
        # `a=b,c` (a sweep) or trailing text: Hydra reads the rest as part of a string / sweep
        rest = text[reader.i:]
        if rest.startswith(","):
            raise ValueError("a comma-separated sweep (the launcher runs one job per value)")
        return text.strip()
    return value


# -- interpolation ---------------------------------------------------------------------------

_WHOLE = lazy_re.compile(r"\$\{([^${}]*(?:\$\{[^{}]*\}[^${}]*)*)\}")


class Unresolved(Exception):
    """An interpolation this reader cannot resolve (an environment variable, a resolver)."""


def resolve(config: dict, key: str, value: Any, seen: tuple = (),
            resolvers: Optional[dict] = None) -> Any:
    """`value` of dotted `key` with OmegaConf interpolations resolved against the flat
    `config` (dotted key -> value). `resolvers`: the custom resolvers a framework registers
    (name -> function of the resolved arguments, raising Unresolved), e.g. NeMo-RL's `mul`.
    Raises Unresolved when it cannot."""
    if not isinstance(value, str) or "${" not in value:
        return value
    if key in seen:
        raise Unresolved(f"{key}: an interpolation that refers back to itself (a loop)")
    if len(seen) > MAX_DEPTH:
        raise Unresolved(f"{key}: interpolations through more than {MAX_DEPTH} keys")
    match = _WHOLE.fullmatch(value.strip())
    if match is None:
        raise Unresolved(f"{value!r} is not one interpolation memlint reads (a string built "
                         "from interpolations, an unclosed one, or one nested deeper)")
    return _expression(config, key, match.group(1).strip(), seen + (key,), resolvers or {})


def _expression(config: dict, key: str, body: str, seen: tuple, resolvers: dict) -> Any:
    if body.startswith("oc.select:"):
        target, _, default = body[len("oc.select:"):].partition(",")
        found = _lookup(config, key, target.strip(), seen, resolvers)
        if found is not _MISSING and found is not None:
            return found
        return literal(default.strip()) if default.strip() else None
    if body.startswith("oc.env:"):
        name, _, default = body[len("oc.env:"):].partition(",")
        if default.strip():
            raise Unresolved(f"environment variable {name.strip()} (default {default.strip()})")
        raise Unresolved(f"environment variable {name.strip()}")
    name, colon, arguments = body.partition(":")
    if colon and name.strip() in resolvers:
        values = [_argument(config, key, text, seen, resolvers) for text in _split(arguments)]
        return resolvers[name.strip()](body, values)
    if ":" in body.split(".")[0]:
        raise Unresolved(f"resolver {body.split(':')[0]}, which memlint does not run")
    found = _lookup(config, key, body, seen, resolvers)
    if found is _MISSING:
        raise Unresolved(f"${{{body}}} names {absolute(key, body)}, which the config lacks "
                         "(or which is a mapping)")
    return found


def _argument(config: dict, key: str, text: str, seen: tuple, resolvers: dict) -> Any:
    """One argument of a resolver call: an interpolation of its own, or a literal."""
    text = text.strip()
    match = _WHOLE.fullmatch(text)
    if match is not None:
        return _expression(config, key, match.group(1).strip(), seen, resolvers)
    if "${" in text:
        raise Unresolved(f"{text!r} is a string built from interpolations")
    return literal(text)


def _split(arguments: str) -> list:
    """The comma-separated arguments of a resolver call, nested interpolations kept whole."""
    out, depth, start = [], 0, 0
    for index, char in enumerate(arguments):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            out.append(arguments[start:index])
            start = index + 1
    out.append(arguments[start:])
    return out


_MISSING = object()


def absolute(key: str, target: str) -> str:
    """The dotted key `target` names when written inside `key`'s node (`.x`, `..x` relative)."""
    if not target.startswith("."):
        return target
    dots = len(target) - len(target.lstrip("."))
    parts = key.split(".")[:-1]
    parts = parts[:len(parts) - (dots - 1)] if dots > 1 else parts
    return ".".join(parts + [target.lstrip(".")])


def _lookup(config: dict, key: str, target: str, seen: tuple, resolvers: dict) -> Any:
    name = absolute(key, target)
    if name not in config:
        return _MISSING
    return resolve(config, name, config[name], seen, resolvers)
