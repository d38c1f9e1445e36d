"""NeMo-RL (NVIDIA-NeMo/RL) YAML: GRPO, DPO and SFT configs with their `defaults:` parents.

Read statically (nothing is executed) as NeMo-RL v0.7.0 (81aa43dd) composes them:
- nemo_rl/utils/config.py load_config_with_inheritance: `defaults:` names one parent YAML or a
  list of them, each relative to the file's own folder (a parent's own `defaults:` relative to
  the parent's), merged depth-first with OmegaConf.merge, the child last; a mapping holding
  `_override_: true` replaces the parent's mapping instead of merging into it
  (merge_with_override). memlint follows parents inside the repository root only; a parent that
  is missing (or outside) is a warning naming it.
- OmegaConf interpolations are resolved statically here: `${a.b}`, relative `${.x}` / `${..x}`,
  and the `mul` resolver NeMo-RL registers (nemo_rl/utils/config.py
  register_omegaconf_resolvers: `${mul:a, b}`); any other resolver (`${oc.env:...}`) or a
  reference that does not resolve leaves the value unknown, with a warning when it is read.
The mapping onto scenario keys is memlint/adapters/nemo_rl_mapping.py.
"""
from __future__ import annotations

import os
import re

from memlint.adapters.detection import nemo_rl as detect  # noqa: F401 - the adapter's detect()
from memlint.diagnostics import UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance
from memlint.loaders import inside, load_yaml, read_text, repo_root, suppressions

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

FORMAT = "nemo-rl"
VERSION = "v0.7.0"
COMMIT = "81aa43dd"
SOURCE = f"NVIDIA-NeMo/RL@{COMMIT} ({VERSION})"
MAX_PARENTS = 8
MAX_NESTING = 64   # interpolations inside interpolations, references through references
class Entry:
    __slots__ = ("value", "prov", "default", "line", "unresolved")

    def __init__(self, value, prov, unresolved=()):
        self.value, self.prov, self.default = value, prov, False
        self.line, self.unresolved = None, unresolved


class Config:
    """The composed config, flat (dotted key -> Entry), interpolations resolved."""

    def __init__(self, entries: dict):
        self.entries = entries
        self.used_defaults: dict = {}

    def get(self, key: str) -> Optional[Entry]:
        return self.entries.get(key)


class _Leaf:
    __slots__ = ("value", "prov")

    def __init__(self, value, prov):
        self.value, self.prov = value, prov


def load(path: str, text: str) -> Partial:
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    anchor = Provenance(path, 1, 1, "config")
    partial.anchor = anchor
    root = os.path.abspath(repo_root(path))
    tree = _compose(path, text, root, partial, (os.path.realpath(path),))
    if tree is None:
        return partial
    config = Config(_resolve(_flatten(tree)))
    # start-up: the mapping loads with the reader
    from memlint.adapters import nemo_rl_mapping

    nemo_rl_mapping.apply(config, partial, anchor)
    return partial


def _compose(path: str, text: str, root: str, partial: Partial, chain: tuple) -> Optional[dict]:
    """The file's tree with its parents merged under it (load_config_with_inheritance)."""
    doc = load_yaml(path, text)
    partial.diagnostics.extend(doc.diagnostics)
    if not isinstance(doc.data, dict):
        return None
    data = dict(doc.data)
    parents = data.pop("defaults", None)
    tree = _tree(data, doc, ())
    if parents is None:
        return tree
    names = [parents] if isinstance(parents, str) else parents
    prov = doc.prov(("defaults",), "defaults")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.WARNING, f"defaults: expected a YAML path or a list of them, got "
            f"{parents!r}; no parent config read", prov, key="defaults"))
        return tree
    base: dict = {}
    for name in names:
        parent = _parent(name, path, root, chain, prov, partial)
        if parent is not None:
            base = _merge(base, parent)
    return _merge(base, tree)


def _parent(name: str, path: str, root: str, chain: tuple, prov: Provenance,
            partial: Partial) -> Optional[dict]:
    target = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), name))
    problem = None
    if not inside(target, root):
        problem = (f"is outside the repository root {root}; not read, so the settings it gives "
                   "are unknown")
    elif not os.path.isfile(target):
        problem = "is not found; the settings it gives are unknown"
    elif os.path.realpath(target) in chain:
        problem = "is already a parent of this config (a cycle); not read again"
    elif len(chain) > MAX_PARENTS:
        problem = f"is more than {MAX_PARENTS} parents deep; not read"
    if problem is not None:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.WARNING, f"defaults: parent config {name!r} ({target}) {problem}",
            prov, key="defaults", parent=name))
        return None
    text, problems = read_text(target)
    partial.diagnostics.extend(problems)
    if text is None:
        return None
    return _compose(target, text, root, partial, chain + (os.path.realpath(target),))


def _tree(data: dict, doc, path: tuple) -> dict:
    out: dict = {}
    for key, value in data.items():
        here = path + (key,)
        if isinstance(value, dict) and value:
            out[str(key)] = _tree(value, doc, here)
        else:
            out[str(key)] = _Leaf(value, doc.prov(here, ".".join(map(str, here))))
    return out


def _overrides(node: dict) -> bool:
    marker = node.get("_override_")
    return isinstance(marker, _Leaf) and marker.value is True


def _merge(base: dict, over: dict) -> dict:
    """OmegaConf.merge of two trees (mappings merge key by key, anything else replaces), with
    merge_with_override's `_override_: true` (the mapping replaces the parent's)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict):
            if _overrides(value):
                out[key] = {k: v for k, v in value.items() if k != "_override_"}
            elif isinstance(out.get(key), dict):
                out[key] = _merge(out[key], value)
            else:
                out[key] = value
        else:
            out[key] = value
    return out


def _flatten(tree: dict, prefix: str = "") -> dict:
    out: dict = {}
    for key, value in tree.items():
        name = prefix + key
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _resolve(flat: dict) -> dict:
    """Every leaf's Entry, its `${...}` interpolations resolved where they can be statically."""
    resolver = _Resolver(flat)
    return {key: resolver.entry(key) for key in flat}


class _Unresolved(Exception):
    pass


class _Resolver:
    def __init__(self, flat: dict):
        self.flat, self.done, self.busy, self.depth = flat, {}, set(), 0

    def entry(self, key: str) -> Entry:
        if key not in self.done:
            leaf = self.flat[key]
            value, reason = leaf.value, ()
            if isinstance(value, str) and "${" in value:
                self.busy.add(key)
                try:
                    value = self._interpolate(value, key)
                except _Unresolved as exc:
                    reason = (str(exc),)
                finally:
                    self.busy.discard(key)
            self.done[key] = Entry(value, leaf.prov, reason)
        return self.done[key]

    def _interpolate(self, text: str, key: str) -> Any:
        parts, i = [], 0
        while i < len(text):
            start = text.find("${", i)
            if start == -1:
                parts.append(text[i:])
                break
            parts.append(text[i:start])
            value, i = self._expression(text, start + 2, key)
            parts.append(value)
        pieces = [p for p in parts if p != ""]
        if len(pieces) == 1:
            return pieces[0]   # a whole-value interpolation keeps the referenced type
        return "".join(str(p) for p in pieces)

    def _expression(self, text: str, i: int, key: str) -> tuple:
        """(value, index after the closing brace) of the interpolation whose body starts at i."""
        if self.depth >= MAX_NESTING or len(self.busy) > MAX_NESTING:
            raise _Unresolved(f"interpolations nested deeper than {MAX_NESTING}")
        self.depth += 1
        try:
            return self._evaluate(text, i, key)
        finally:
            self.depth -= 1

    def _evaluate(self, text: str, i: int, key: str) -> tuple:
        depth, j = 1, i
        while j < len(text) and depth:
            if text.startswith("${", j):
                depth, j = depth + 1, j + 2
                continue
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        if depth:
            raise _Unresolved(f"{text!r} has an unclosed interpolation")
        body = text[i:j - 1].strip()
        match = re.fullmatch(r"([\w.-]+):(.*)", body, re.S)
        if match is None:
            return self._reference(body, key), j
        name, args = match.group(1), match.group(2)
        if name != "mul":
            raise _Unresolved(f"${{{body}}} uses the {name} resolver, which memlint does not run")
        values = [self._argument(a, key) for a in _split(args)]
        if len(values) != 2 or not all(_numeric(v) for v in values):
            raise _Unresolved(f"${{{body}}}: mul of {values!r} is not a product of two numbers")
        try:
            product = values[0] * values[1]
        except OverflowError:
            raise _Unresolved(f"${{{body}}}: the product overflows") from None
        return product, j

    def _argument(self, text: str, key: str) -> Any:
        text = text.strip()
        if "${" in text:
            return self._interpolate(text, key)
        # start-up: the YAML scalar reading is the Hydra reader's (shared with verl)
        from memlint.adapters._hydra import primitive

        return primitive(text)

    def _reference(self, body: str, key: str) -> Any:
        if body.startswith("."):
            dots = len(body) - len(body.lstrip("."))
            base = key.split(".")[:-dots]
            target = ".".join(base + [body[dots:]]) if body[dots:] else ".".join(base)
        else:
            target = body
        if target not in self.flat:
            raise _Unresolved(f"${{{body}}} names {target}, which the composed config lacks "
                              "(or which is a mapping)")
        if target in self.busy:
            raise _Unresolved(f"${{{body}}} refers back to itself")
        entry = self.entry(target)
        if entry.unresolved:
            raise _Unresolved(f"${{{body}}}: {entry.unresolved[0]}")
        return entry.value


def _split(args: str) -> list:
    """The comma-separated arguments of a resolver call, nested interpolations kept whole."""
    out, depth, start = [], 0, 0
    for index, char in enumerate(args):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            out.append(args[start:index])
            start = index + 1
    out.append(args[start:])
    return out


def _numeric(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
