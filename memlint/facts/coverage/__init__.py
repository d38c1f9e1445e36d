"""The coverage contract: the memory class of every flag or key an adapter reads.

One data file per framework (`<framework>.json` beside this module) gives each key one class:
- *neutral*: it does not change the memory of a training step (logging, data paths, schedules);
- *modeled*: the memory model accounts for it; the entry names the components (or `host`,
  `checkpoint`, `no-estimate`) whose terms it changes;
- *not modeled*: it changes memory and memlint does not count that. The entry says which way the
  estimate errs when it is set (`low`: memlint counts too little, `high`: too much, `either`),
  what the framework does, and where the framework's code gives one, a bound. `when` lists the
  only values that are not modeled (the others are), `off` the values that change nothing;
  `scope: host` marks a setting that changes host RAM only (warned when the run's host is known);
  `requires` names other keys that must be set, to a value not among their neutral ones.
- *part of* another key: a sub-setting of a not-modeled parent (`--cuda-graph-scope` of
  `--cuda-graph-impl`); the parent's warning covers it.

Adapters record what a file set as `Partial.extra` entries under the table's `namespace`
(`megatron.<flag>`, `deepspeed.<key>`, ...); `set_not_modeled` finds the set, not-modeled ones in a
merged scenario for the `not-modeled` rule (ML107) and the verdicts that name them. A test
(tests/test_coverage.py) fails when a key an adapter knows has no class.
"""
from __future__ import annotations

import functools
import json
import os

from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Mapping, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
# What `modeled` entries may name: the Estimate's components, host memory, the checkpoint on disk,
# and `no-estimate` (the key makes the model refuse to estimate, ML008).
TERMS = frozenset(("weights", "gradients", "optimizer", "activations", "logits", "buffers",
                   "vision", "runtime", "host", "checkpoint", "no-estimate"))
DIRECTIONS = {"low": "too low", "high": "too high", "either": "off in either direction"}


@record(frozen=True)
class NotModeled:
    """A setting that changes memory in a way the estimate does not count."""

    key: str
    direction: str            # low | high | either
    effect: str               # what the framework does, with its source
    bound: Optional[str] = None
    when: tuple = ()          # only these values are not modeled (empty: any set value)
    off: tuple = ()           # values that change nothing (the framework's neutral default)
    scope: str = "gpu"        # gpu, or host: it changes host RAM only (checked with a host)
    # only with these other keys of the table set to a value other than their neutral ones
    # ((key, neutral values), ...): ("--context-parallel-size", ("1",)) only under context
    # parallelism
    requires: tuple = ()
    # the estimate's component this setting can at most take away ("weights"): a "high" setting
    # softens an OOM only when the stage would fit without that component (rules/memory.py ML101)
    at_most: Optional[str] = None

    def applies(self, value: Any) -> bool:
        """Whether a set value of this key makes the estimate wrong."""
        if value is False or value is None:
            return False
        if isinstance(value, dict):  # a block: {"enabled": false} changes nothing
            return value.get("enabled", True) not in (False, "false", "False")
        text = " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        text = text.strip().strip("'\"")
        if self.when:
            return text in self.when
        return text not in self.off


@record(frozen=True)
class Table:
    framework: str
    namespace: str            # Partial.extra prefix the adapter records the key under
    key_prefix: str           # what the table's keys add to the extra's name (`--` for flags)
    source: str
    modeled: Mapping[str, tuple]
    not_modeled: Mapping[str, NotModeled]
    part_of: Mapping[str, str]
    neutral: frozenset
    # blocks the adapter records without their name (DeepSpeed's zero keys: deepspeed.<key>)
    extra_prefixes: tuple = ("",)

    def memory_class(self, key: str) -> Optional[str]:
        """'modeled', 'not-modeled', 'part-of', 'neutral', or None (no class: a gap)."""
        if key in self.not_modeled:
            return "not-modeled" if key not in self.modeled else "modeled"
        if key in self.modeled:
            return "modeled"
        if key in self.part_of:
            return "part-of"
        if key in self.neutral:
            return "neutral"
        return None

    def key_of(self, extra_key: str) -> Optional[str]:
        """The table's key for a `Partial.extra` key of this framework, else None."""
        if not extra_key.startswith(self.namespace):
            return None
        name = extra_key[len(self.namespace):]
        for prefix in self.extra_prefixes:
            key = self.key_prefix + prefix + name
            if self.memory_class(key) is not None:
                return key
        return self.key_prefix + name


@functools.lru_cache(maxsize=1)
def frameworks() -> tuple:
    """The frameworks with a coverage table, sorted (the package's files: read once a run)."""
    return tuple(sorted(name[:-5] for name in os.listdir(HERE) if name.endswith(".json")))


@functools.lru_cache(maxsize=None)
def table(framework: str) -> Table:
    with open(os.path.join(HERE, f"{framework}.json"), encoding="utf-8") as handle:
        data = json.load(handle)
    not_modeled = {key: NotModeled(key, entry["direction"], entry["effect"], entry.get("bound"),
                                   tuple(entry.get("when", ())), tuple(entry.get("off", ())),
                                   entry.get("scope", "gpu"),
                                   tuple((k, tuple(v)) for k, v in entry.get("requires", {}).items()),
                                   entry.get("at_most"))
                   for key, entry in data.get("not_modeled", {}).items()}
    return Table(data["framework"], data["namespace"], data.get("key_prefix", ""),
                 data.get("source", ""),
                 {key: tuple(terms) for key, terms in data.get("modeled", {}).items()},
                 not_modeled, dict(data.get("part_of", {})), frozenset(data.get("neutral", ())),
                 tuple(data.get("extra_prefixes", ("",))))


@record(frozen=True)
class Found:
    """A not-modeled setting a run sets: the table entry, the extra key and the value."""

    entry: NotModeled
    extra_key: str
    value: Any
    framework: str


_KEY_OF: dict = {}   # (framework, extra key) -> its table's key_of


def set_not_modeled(extra: Mapping) -> list:
    """Every set, not-modeled setting of a merged scenario's `extra` (key -> Setting), in the
    order the tables list them (one per key)."""
    found = []
    # a table is read only when a key of the run is in its namespace (its file's name and a dot,
    # tests/test_coverage.py): a one-file check read all of them, 300 KB of JSON (start-up)
    spaces = {key.split(".", 1)[0] for key in extra}
    for name in frameworks():
        if name not in spaces:
            continue
        spec = table(name)
        namespace = spec.namespace
        for extra_key, setting in extra.items():
            if not extra_key.startswith(namespace):
                continue   # another framework's key (key_of would say None): bulk speed
            known = (name, extra_key)
            key = _KEY_OF.get(known, _KEY_OF)
            if key is _KEY_OF:   # a table and a key: the same answer every run (bulk speed)
                if len(_KEY_OF) >= 100_000:
                    _KEY_OF.clear()
                key = _KEY_OF[known] = spec.key_of(extra_key)
            entry = spec.not_modeled.get(key) if key is not None else None
            if entry is None:
                continue
            value = getattr(setting, "value", setting)
            if entry.applies(value) and _required(spec, entry, extra):
                found.append(Found(entry, extra_key, value, name))
    return found


def _required(spec: Table, entry: NotModeled, extra: Mapping) -> bool:
    """Whether the other keys an entry needs are set to one of their non-neutral values."""
    for key, neutral in entry.requires:
        setting = extra.get(spec.namespace + key[len(spec.key_prefix):])
        value = getattr(setting, "value", setting)
        if value is None or value is False or str(value).strip() in neutral:
            return False
    return True


def describe(found: Found) -> str:
    """`--tp-comm-overlap (estimate too low)`: a short mention for other verdicts."""
    return f"{found.entry.key} (estimate {DIRECTIONS[found.entry.direction]})"
