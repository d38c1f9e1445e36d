"""NeMo-RL (NVIDIA-NeMo/RL) YAML: GRPO, DPO and SFT configs with their `defaults:` parents.

Read statically (nothing is executed) as NeMo-RL v0.7.0 (81aa43dd) composes them:
- nemo_rl/utils/config.py load_config_with_inheritance: `defaults:` names one parent YAML or a
  list of them, each relative to the file's own folder (a parent's own `defaults:` relative to
  the parent's), merged depth-first with OmegaConf.merge, the child last; a mapping holding
  `_override_: true` replaces the parent's mapping instead of merging into it
  (merge_with_override). memlint follows parents inside the repository root only; a parent that
  is missing (or outside) is a warning naming it.
- OmegaConf interpolations are resolved statically by the Hydra reader's resolution
  (adapters/_hydra.py: `${a.b}`, relative `${.x}` / `${..x}`, `${oc.select:...}`) with the `mul`
  resolver NeMo-RL registers (nemo_rl/utils/config.py register_omegaconf_resolvers:
  `${mul:a, b}`); an environment variable, any other resolver or a reference that does not
  resolve leaves the value unknown, with a warning when it is read.
The mapping onto scenario keys is memlint/adapters/nemo_rl_mapping.py.
"""
from __future__ import annotations

import os

from memlint.adapters import _hydra
from memlint.adapters.detection import nemo_rl as detect  # noqa: F401 - the adapter's detect()
from memlint.diagnostics import UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance
from memlint.loaders import NUL_PATH, inside, load_yaml, read_text, repo_root, suppressions

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

FORMAT = "nemo-rl"
VERSION = "v0.7.0"
COMMIT = "81aa43dd"
SOURCE = f"NVIDIA-NeMo/RL@{COMMIT} ({VERSION})"
MAX_PARENTS = 8


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


_READ: dict = {}   # (path, text) -> _read's answer for a parent config without diagnostics


def _compose(path: str, text: str, root: str, partial: Partial, chain: tuple) -> Optional[dict]:
    """The file's tree with its parents merged under it (load_config_with_inheritance)."""
    if len(chain) > 1:
        # for speed: a parent (NeMo-RL's grpo_math_1B.yaml under most recipes) is read once per
        # process; its trees are never changed (_merge makes new mappings)
        read = _READ.get((path, text))
        if read is None:
            read = _read(path, text)
            if not read[0]:
                if len(_READ) >= 256:
                    _READ.clear()
                _READ[(path, text)] = read
    else:
        read = _read(path, text)
    diagnostics, tree, parents, prov = read
    partial.diagnostics.extend(diagnostics)
    if tree is None:
        return None
    if parents is None:
        return tree
    names = [parents] if isinstance(parents, str) else parents
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


def _read(path: str, text: str) -> tuple:
    """(the YAML's diagnostics, its tree without `defaults` (None when it is no mapping), the
    `defaults` value, where `defaults` is)."""
    doc = load_yaml(path, text)
    if not isinstance(doc.data, dict):
        return doc.diagnostics, None, None, None
    data = dict(doc.data)
    parents = data.pop("defaults", None)
    prov = doc.prov(("defaults",), "defaults") if parents is not None else None
    return doc.diagnostics, _tree(data, doc, ()), parents, prov


def _parent(name: str, path: str, root: str, chain: tuple, prov: Provenance,
            partial: Partial) -> Optional[dict]:
    target = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), name))
    problem = None
    if "\x00" in name:
        problem = f"{NUL_PATH}; not read"
    elif not inside(target, root):
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
    """Every leaf's Entry, its `${...}` interpolations resolved where they can be statically
    (the Hydra reader's resolution, _hydra.resolve, with NeMo-RL's `mul` resolver)."""
    values = {key: leaf.value for key, leaf in flat.items()}
    out = {}
    for key, leaf in flat.items():
        try:
            value, unresolved = _hydra.resolve(values, key, leaf.value, resolvers=RESOLVERS), ()
        except _hydra.Unresolved as why:
            value, unresolved = leaf.value, (str(why),)
        out[key] = Entry(value, leaf.prov, unresolved)
    return out


def _mul(body: str, values: list):
    """NeMo-RL's `mul` resolver (nemo_rl/utils/config.py register_omegaconf_resolvers: a * b)."""
    if len(values) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                   for v in values):
        raise _hydra.Unresolved(f"${{{body}}}: mul of {values!r} is not a product of two numbers")
    try:
        return values[0] * values[1]
    except OverflowError:
        raise _hydra.Unresolved(f"${{{body}}}: the product overflows") from None


RESOLVERS = {"mul": _mul}
