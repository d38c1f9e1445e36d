"""DeepSpeed JSON config adapter (`ds_config.json`).

Reads the file the way DeepSpeed does (HJSON: `#`, `//` and `/* */` comments, trailing commas;
duplicate keys are an error, as `dict_raise_error_on_duplicate_keys` makes them), validates it
against `deepspeed.schema.json` (memlint's own schema: DeepSpeed publishes none, see its issue
#2355), then maps it into scenario keys through the table `_SCENARIO_TABLE` plus a few derived
keys (precision, offload, optimizer). DeepSpeed-only facts go to `partial.extra` under
`deepspeed.<key>`; `flags.fp16` / `flags.bf16` record enabled precision blocks for the engine-wide
`mixed-precision-conflict` rule.

Behaviour mirrored from DeepSpeed v0.19.6 (deepspeed/runtime/config.py and the pydantic models in
zero/config.py, zero/offload_config.py, precision_config.py):
- Pydantic blocks use `extra="forbid"`: an unknown key there fails at launch (error here).
  Unknown top-level keys are ignored by DeepSpeed (warning here).
- `DeepSpeedConfigModel.__init__` drops "auto" values inside pydantic blocks, so outside the HF
  Trainer the field's default applies; top-level "auto" values stay strings and break the batch
  arithmetic. Both are recorded in `deepspeed.auto_keys` for the `auto-outside-hf-trainer` rule.
- `bf16` is read from "bf16", else from the legacy "bfloat16".

Content is never executed; bad input becomes diagnostics, never an exception.
"""
from __future__ import annotations

import functools
import json
import os
import re

from memlint import lazy_re
from memlint import keys as K
from memlint.adapters.detection import deepspeed as detect  # noqa: F401 - the adapter's detect()
from memlint.diagnostics import (INVALID_VALUE, SCHEMA_ERROR, UNKNOWN_KEY, UNRESOLVED,
                                 Severity, make)
from memlint.facts import coverage
from memlint.facts.deepspeed import STAGE3_ALIASED
from memlint.ir import Partial, Provenance
from memlint.loaders import Document, load_json_mapping, read_text, suppressions

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

FORMAT = "deepspeed"
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "deepspeed.schema.json")

# ---------------------------------------------------------------------------------------------
# Schema validation (detect() is adapters/detection.py's deepspeed)


@functools.lru_cache(maxsize=1)
def schema() -> dict:
    with open(SCHEMA_PATH, encoding="utf-8") as handle:
        return json.load(handle)


@functools.lru_cache(maxsize=1)
def validator():
    """The compiled Draft 2020-12 validator (built once per process)."""
    # start-up: jsonschema loads only when a DeepSpeed config is validated
    import jsonschema

    return jsonschema.Draft202012Validator(schema())


# A config that passes `conforms` is valid, so jsonschema (70 ms to import, more to build the
# validator) is loaded only for a config with something to report, which jsonschema then walks
# (this module maps its errors onto positions and messages). `conforms` reads the subset of
# Draft 2020-12 that deepspeed.schema.json uses; any other keyword sends the config to jsonschema.
_ANNOTATIONS = {"description", "title", "$comment", "deprecated", "$schema", "$id", "version",
                "$defs", "default", "examples"}
_KEYWORDS = {"$ref", "type", "properties", "additionalProperties", "anyOf", "enum", "const",
             "pattern", "minimum", "maximum", "items"}


class _Unsupported(Exception):
    pass


def _is_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "null":
        return value is None
    raise _Unsupported(kind)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _conforms(value: Any, node: Any) -> bool:
    if node is True or node == {}:
        return True
    if node is False:
        return False
    if not isinstance(node, dict):
        raise _Unsupported(repr(node))
    for keyword in node:
        if keyword not in _KEYWORDS and keyword not in _ANNOTATIONS \
                and not keyword.startswith("x-"):
            raise _Unsupported(keyword)
    ref = node.get("$ref")
    if ref is not None:
        if not ref.startswith("#/$defs/"):
            raise _Unsupported(ref)
        if not _conforms(value, schema()["$defs"][ref[len("#/$defs/"):]]):
            return False
    if "type" in node:
        kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
        if not any(_is_type(value, kind) for kind in kinds):
            return False
    if "enum" in node and not any(_same(value, option) for option in node["enum"]):
        return False
    if "const" in node and not _same(value, node["const"]):
        return False
    if "anyOf" in node and not any(_conforms(value, branch) for branch in node["anyOf"]):
        return False
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and "minimum" in node and value < node["minimum"]:
        return False
    if number and "maximum" in node and value > node["maximum"]:
        return False
    if isinstance(value, str) and "pattern" in node \
            and not _pattern(node["pattern"]).search(value):
        return False
    if isinstance(value, list) and "items" in node:
        if not all(_conforms(item, node["items"]) for item in value):
            return False
    if isinstance(value, dict):
        properties = node.get("properties", {})
        extra = node.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                if not _conforms(item, properties[key]):
                    return False
            elif not _conforms(item, extra):
                return False
    return True


@functools.lru_cache(maxsize=64)
def _pattern(text: str):
    return re.compile(text)


def _errors_of(data: Any) -> list:
    """Every schema error, as jsonschema walks them (only a config `conforms` cannot clear
    loads it)."""
    return list(validator().iter_errors(data))


def conforms(data: Any) -> bool:
    """True when `data` is certainly valid under the schema (False: ask jsonschema)."""
    try:
        return _conforms(data, schema())
    except (_Unsupported, RecursionError):
        return False


# Keys DeepSpeed renamed: the old spelling is ignored (or rejected) now.
_RENAMED = {
    ("aio", "thread_count"): "intra_op_parallelism",
}


def _dotted(path) -> str:
    return ".".join(str(p) for p in path) or "<root>"


def _resolve(subschema: dict) -> dict:
    ref = subschema.get("$ref") if isinstance(subschema, dict) else None
    if ref and ref.startswith("#/$defs/"):
        return schema()["$defs"][ref[len("#/$defs/"):]]
    return subschema


def _title(subschema: dict) -> Optional[str]:
    if not isinstance(subschema, dict):
        return None
    if subschema.get("title"):
        return subschema["title"]
    resolved = _resolve(subschema)
    if resolved is not subschema and resolved.get("title"):
        return resolved["title"]
    if "type" in subschema:
        kinds = subschema["type"] if isinstance(subschema["type"], list) else [subschema["type"]]
        words = {"integer": "a whole number", "number": "a number", "string": "a string",
                 "boolean": "true or false", "object": "an object", "array": "a list", "null": "null"}
        return " or ".join(words.get(k, k) for k in kinds)
    if "enum" in subschema:
        return "one of " + ", ".join(json.dumps(v) for v in subschema["enum"])
    return None


def _leaf_errors(error) -> list:
    """Descend into anyOf/oneOf when the value's type matched one branch (an object with a bad
    key, say): report that branch's own errors rather than 'not valid under any schema'."""
    if (error.validator not in ("anyOf", "oneOf") or not error.context
            or not isinstance(error.instance, (dict, list))):
        return [error]
    branches: dict = {}
    for sub in error.context:
        branches.setdefault(sub.schema_path[0], []).append(sub)
    for _, subs in sorted(branches.items()):
        type_mismatch = any(s.validator in ("type", "const", "enum") and not s.relative_path
                            for s in subs)
        if not type_mismatch:
            out = []
            for sub in subs:
                out.extend(_leaf_errors(sub))
            return out
    return [error]


def schema_diagnostics(doc: Document) -> list:
    """What memlint's DeepSpeed schema finds in `doc` (any object with data and prov): for the
    formats that embed DeepSpeed blocks in their own file (gpt-neox YAML)."""
    return _schema_diagnostics(doc)


def _schema_diagnostics(doc: Document) -> list:
    if conforms(doc.data):
        return []
    diagnostics = []
    seen = set()
    tuning = _autotuning_enabled(doc.data)
    neox = _neox_file(doc.data)
    for top in sorted(_errors_of(doc.data), key=lambda e: list(map(str, e.path))):
        for error in _leaf_errors(top):
            path = tuple(error.absolute_path)
            if error.validator == "additionalProperties":
                diagnostics.extend(_unknown_keys(doc, path, error.instance, error.schema, neox))
                continue
            key = (path, error.validator)
            if key in seen:
                continue
            seen.add(key)
            if tuning and isinstance(error.instance, list) and path and path[0] != "autotuning":
                # with the autotuner on, a list in place of a value is a search space that
                # DeepSpeed's autotuner expands into one config per value (autotuning/README)
                diagnostics.append(make(UNRESOLVED, Severity.INFO,
                                        f"{_dotted(path)}: autotuning search space "
                                        f"{json.dumps(error.instance)}; each value is tried",
                                        doc.prov(path), path=_dotted(path)))
                continue
            message = _message(error, path)
            if isinstance(error.instance, str) and _PLACEHOLDER.match(error.instance):
                message += (" (a template placeholder? DeepSpeed's hjson loader reads a bare word "
                            "as a string to the end of its line, and the config gets that string)")
            diagnostics.append(make(SCHEMA_ERROR, Severity.ERROR, message,
                                    doc.prov(path), path=_dotted(path)))
    return diagnostics


# The legacy curriculum (enabled: true) does arithmetic on these at every step
# (deepspeed/runtime/data_pipeline/curriculum_scheduler.py __fixed_root_get_difficulty at
# edaa722): a string there fails at the first step. Checked here rather than in the schema,
# which has no conditional on `enabled`.
_CURRICULUM_NUMBERS = (("min_difficulty",), ("max_difficulty",),
                       ("schedule_config", "total_curriculum_step"),
                       ("schedule_config", "difficulty_step"), ("schedule_config", "root_degree"))


def _curriculum_diagnostics(doc: Document) -> list:
    block = doc.data.get("curriculum_learning") if isinstance(doc.data, dict) else None
    if not isinstance(block, dict) or block.get("enabled") is not True:
        return []
    out = []
    for keys in _CURRICULUM_NUMBERS:
        node = block
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        if node is None or (isinstance(node, (int, float)) and not isinstance(node, bool)):
            continue
        path = ("curriculum_learning",) + keys
        message = (f"{_dotted(path)}: expected a number, got {json.dumps(node)}; the enabled "
                   "legacy curriculum computes with it at the first step")
        if isinstance(node, str) and _PLACEHOLDER.match(node):
            message += (" (a template placeholder? DeepSpeed's hjson loader reads a bare word as "
                        "a string to the end of its line)")
        out.append(make(SCHEMA_ERROR, Severity.ERROR, message, doc.prov(path),
                        path=_dotted(path)))
    return out


# a bare upper-case word an HJSON quoteless string picked up (`"stage": ZERO_STAGE,`)
_PLACEHOLDER = lazy_re.compile(r"^[A-Z][A-Z0-9_]*,?$")


def _neox_file(data) -> bool:
    """A gpt-neox config: its own arguments (keys with '-') beside DeepSpeed's."""
    return isinstance(data, dict) and any("-" in str(key) for key in data)


# gpt-neox launches DeeperSpeed (EleutherAI's fork, pinned in its requirements; 0.16.5 at
# 65d9f99), forked before DeepSpeed v0.17.1 made the fp16/bf16 blocks pydantic models (commit
# e440506, "Enable pydantic configuration for mixed precision"): its runtime/config.py:160
# get_fp16_enabled reads the block key by key and ignores the rest. gpt-neox's own configs write
# `"fp16": {"fp16": true, ...}`.
_NEOX_LENIENT_BLOCKS = ("fp16", "bf16", "bfloat16")


def _autotuning_enabled(data) -> bool:
    block = data.get("autotuning") if isinstance(data, dict) else None
    return isinstance(block, dict) and block.get("enabled") is True


def _message(error, path: tuple) -> str:
    name = _dotted(path)
    value = error.instance
    shown = json.dumps(value) if not isinstance(value, (dict, list)) else type(value).__name__
    kind = error.validator
    if kind in ("anyOf", "oneOf", "type", "$ref", "const", "enum", "pattern"):
        expected = _title(error.schema) or _title(error.parent.schema if error.parent else {})
        if kind == "enum" and not expected:
            expected = "one of " + ", ".join(json.dumps(v) for v in error.validator_value)
        if kind == "type" and error.parent is not None and error.parent.validator in ("anyOf", "oneOf"):
            expected = _title(error.parent.schema) or expected
        hint = ""
        if isinstance(value, str) and expected and "whole number" in expected:
            try:
                float(value)
                hint = (" (DeepSpeed's pydantic model reads a whole number from a JSON number or a "
                        "string of digits, not from a string like this: drop the quotes)")
            except ValueError:
                pass
        return f"{name}: expected {expected or 'a valid value'}, got {shown}{hint}"
    if kind == "minimum":
        return f"{name}: must be >= {error.validator_value}, got {shown}"
    if kind == "maximum":
        return f"{name}: must be <= {error.validator_value}, got {shown}"
    return f"{name}: {error.message}"


# What a misspelt top-level block leaves off: DeepSpeedConfig reads each block by its exact key
# and takes the defaults when it is absent (deepspeed/runtime/zero/config.py get_zero_config at
# edaa722: no "zero_optimization" -> DeepSpeedZeroConfig(), stage 0; runtime/config.py
# get_bfloat16_config / get_fp16_enabled: absent -> disabled); unknown top-level keys are never
# checked, so the typo is silent at launch.
_IGNORED_BLOCK = {
    "zero_optimization": "ZeRO stays off (stage 0): every GPU keeps the whole optimizer state, "
                         "gradients and weights",
    "bf16": "bf16 stays off (fp32 training, unless fp16 is on)",
    "fp16": "fp16 stays off (fp32 training, unless bf16 is on)",
    "activation_checkpointing": "DeepSpeed's activation-checkpointing settings are not applied",
    "optimizer": "DeepSpeed builds no optimizer from this file (the client's one is used)",
    "train_micro_batch_size_per_gpu": "the micro batch size is derived from the other batch keys",
    "gradient_accumulation_steps": "gradient accumulation is derived from the other batch keys",
}


def _unknown_severity(key, path: tuple, mode: str, neox: bool) -> Severity:
    if not path and str(key).startswith("_"):
        return Severity.INFO
    if mode == "error" and not (neox and path and path[0] in _NEOX_LENIENT_BLOCKS):
        return Severity.ERROR
    return Severity.WARNING


def _unknown_keys(doc: Document, path: tuple, instance: Any, subschema: dict,
                  neox: bool = False) -> list:
    allowed = list((subschema.get("properties") or {}).keys())
    mode = subschema.get("x-unknown-keys", "error")
    block = _dotted(path) if path else "top level"
    out = []
    launcher_args = []
    # a key with '-' marks a gpt-neox-style file: then every unknown top-level key is one of
    # that framework's own arguments
    framework_file = not path and any("-" in str(k) for k in instance if k not in allowed)
    rest = []
    for key in instance:
        if key in allowed:
            continue
        if framework_file and not str(key).startswith("_"):
            # DeepSpeed's keys never contain '-': gpt-neox (and Megatron-DeepSpeed) configs put
            # their own arguments (num-layers, hidden-size, ...) beside DeepSpeed's keys
            launcher_args.append(key)
            continue
        severity = _unknown_severity(key, path, mode, neox)
        if len(out) >= K.MAX_UNKNOWN_LISTED:
            rest.append((key, severity))   # counted only: 120,000 keys took 22 s (issue 30)
            continue
        where = doc.prov(path + (key,), _dotted(path + (key,)))
        if severity == Severity.INFO:
            out.append(make(UNKNOWN_KEY, Severity.INFO,
                            f"top-level key {key!r} is not a DeepSpeed option; read as a comment "
                            "(DeepSpeed ignores it)", where, key=key))
            continue
        hint = _RENAMED.get((path[-1] if path else None, key)) or K.suggest(str(key), allowed)
        tail = f"; did you mean {hint!r}?" if hint else ""
        note = subschema.get("x-unknown-note")
        if mode == "error" and severity == Severity.WARNING:
            message = (f"unknown key {key!r} in {block}: gpt-neox runs DeeperSpeed, which reads "
                       f"this block key by key and ignores it (DeepSpeed >= 0.17.1 would reject "
                       f"it){tail}")
        elif mode == "error":
            reason = note or ("DeepSpeed validates this block with a pydantic model that "
                              "forbids extra keys; it fails at launch")
            message = f"unknown key {key!r} in {block}: {reason}{tail}"
        elif not path:
            lost = _IGNORED_BLOCK.get(hint) if hint and hint not in instance else None
            message = (f"unknown top-level key {key!r}: DeepSpeed ignores it"
                       + (f", so {lost}; memlint estimates what DeepSpeed will do" if lost
                          else "") + tail)
        else:
            message = f"unknown key {key!r} in {block}: {note or 'DeepSpeed ignores it'}{tail}"
        out.append(make(UNKNOWN_KEY, severity, message, where, key=key, suggestion=hint))
    if rest:
        first = rest[0][0]
        out.append(make(UNKNOWN_KEY, max(severity for _key, severity in rest),
                        f"{len(rest)} more unknown keys in {block}, from {str(first)[:80]!r} on "
                        f"(only the first {K.MAX_UNKNOWN_LISTED} are listed)",
                        doc.prov(path + (first,), _dotted(path + (first,))), key=first))
    if launcher_args:
        first_key = launcher_args[0]
        first_where = doc.prov((first_key,), _dotted((first_key,)))
        out.append(make(UNKNOWN_KEY, Severity.INFO,
                        f"{len(launcher_args)} top-level keys (e.g. {first_key!r}) are not "
                        "DeepSpeed options but a training framework's own arguments (keys with "
                        "'-', gpt-neox style); DeepSpeed ignores them and memlint does not read "
                        "them",
                        first_where, key=first_key))
    return out


# ---------------------------------------------------------------------------------------------
# Value helpers (schema errors are already reported; converters never raise past `_Skip`)


class _Skip(Exception):
    """The value is "auto", absent or invalid: set nothing."""


def _get(data: Any, path: tuple) -> Any:
    node = data
    for part in path:
        if not isinstance(node, dict) or part not in node:
            raise _Skip
        node = node[part]
    return node


def _is_auto(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() == "auto"


def _int(value: Any) -> int:
    if _is_auto(value) or value is None:
        raise _Skip
    try:
        return K.to_int(value)
    except ValueError:
        raise _Skip from None


def _flag(value: Any) -> bool:
    if _is_auto(value) or value is None:
        raise _Skip
    found = K.parse_bool(value)
    if found is None:
        raise _Skip
    return found


def _positive(value: Any) -> int:
    number = _int(value)
    if number <= 0:
        raise _Skip
    return number


def _stage(value: Any) -> int:
    if isinstance(value, bool):  # legacy "zero_optimization": true|false
        return 1 if value else 0
    number = _int(value)
    if number not in (0, 1, 2, 3):
        raise _Skip
    return number


def _autotp(value: Any) -> int:
    number = _int(value)
    if number < 1:  # 0 disables AutoTP
        raise _Skip
    return number


def _device(value: Any) -> str:
    if _is_auto(value) or value is None:
        raise _Skip
    text = str(value).strip().lower()
    if text not in ("none", "cpu", "nvme"):
        raise _Skip
    return text


def _extra_value(value: Any) -> Any:
    """Numbers DeepSpeed reads as ints (1e9) become ints; "auto" and the rest stay as written."""
    if isinstance(value, bool) or _is_auto(value):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+").isdigit():
        return int(value)
    return value


# ---------------------------------------------------------------------------------------------
# The declarative mapping: (source path, scenario key, converter)

_SCENARIO_TABLE: list = [
    (("train_micro_batch_size_per_gpu",), "micro_batch", _positive),
    (("gradient_accumulation_steps",), "grad_accum", _positive),
    (("train_batch_size",), "global_batch", _positive),
    (("zero_optimization", "stage"), "zero", _stage),
    (("zero_optimization",), "zero", _stage),          # legacy boolean form
    (("tensor_parallel", "autotp_size"), "tp", _autotp),
]

DEPRECATED = {
    ("zero_optimization", "cpu_offload"): "zero_optimization.offload_optimizer (device: cpu)",
    ("zero_optimization", "cpu_offload_param"): "zero_optimization.offload_param (device: cpu)",
    ("zero_optimization", "cpu_offload_use_pin_memory"): "offload_*.pin_memory",
    ("zero_optimization", "stage3_gather_fp16_weights_on_model_save"):
        "stage3_gather_16bit_weights_on_model_save",
    ("bfloat16",): "bf16",
}

# DeepSpeed optimizer type (lower case) -> memlint optimizer. DeepSpeed's "Adam" is AdamW unless
# params.adam_w_mode is false (ADAM_W_MODE_DEFAULT = True, runtime/config.py / engine.py).
_OPTIMIZERS = {
    "adam": "adamw", "adamw": "adamw", "fusedadam": "adamw", "cpuadam": "adamw",
    "deepspeedcpuadam": "adamw", "muadam": "adamw", "muadamw": "adamw",
    "onebitadam": "adam", "zerooneadam": "adam",
    "muon": "muon", "sgd": "sgd", "musgd": "sgd", "adafactor": "adafactor",
}


def load(path: str, text: str) -> Partial:
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    # DeepSpeedConfig reads a config file with hjson.load (deepspeed/runtime/config.py at
    # edaa722): comments, quoteless keys and strings, optional commas
    doc = load_json_mapping(path, text, "a DeepSpeed config", partial.diagnostics,
                            allow_comments=True, hjson=True)
    if doc is None:
        return partial
    partial.diagnostics.extend(_schema_diagnostics(doc))
    partial.diagnostics.extend(_curriculum_diagnostics(doc))
    _map(doc, partial)
    sibling = find_sibling_model(path)
    if sibling:
        partial.references.append(sibling)
    return partial


def load_path(path: str) -> Partial:
    text, diagnostics = read_text(path)
    if text is None:
        partial = Partial(source=path, fmt=FORMAT)
        partial.diagnostics.extend(diagnostics)
        return partial
    return load(path, text)


def _map(doc: Document, partial: Partial) -> None:
    data = doc.data
    prov = doc.prov
    partial.set("framework", "deepspeed", Provenance(doc.path, None, None, "<deepspeed config>"))
    # Marks a DeepSpeed config that parsed; rules that report what the file lacks point here.
    partial.set_extra("deepspeed.config", doc.path, Provenance(doc.path, 1, 1, "<deepspeed config>"))

    for source, key, convert in _SCENARIO_TABLE:
        try:
            value = convert(_get(data, source))
        except _Skip:
            continue
        partial.set(key, value, prov(source, _dotted(source)))

    # The raw batch triple, "auto" included, for the batch rules.
    for name in ("train_batch_size", "train_micro_batch_size_per_gpu",
                 "gradient_accumulation_steps"):
        if name in data:
            partial.set_extra(f"deepspeed.{name}", _extra_value(data[name]), prov((name,), name))
    if "sequence_parallel_size" in data:
        partial.set_extra("deepspeed.sequence_parallel_size", data["sequence_parallel_size"],
                          prov(("sequence_parallel_size",)))

    _map_zero(doc, partial)
    _map_precision(doc, partial)
    _map_optimizer(doc, partial)
    _map_activation_checkpointing(doc, partial)
    _record_not_modeled(doc, partial)

    autos = _auto_paths(data)
    if autos:
        partial.set_extra("deepspeed.auto_keys", tuple(_dotted(p) for p in autos),
                          prov(autos[0], _dotted(autos[0])))
    for source, replacement in DEPRECATED.items():
        try:
            _get(data, source)
        except _Skip:
            continue
        if source == ("bfloat16",) and "bf16" in data:
            continue
        partial.set_extra(f"deepspeed.deprecated.{_dotted(source)}", replacement,
                          prov(source, _dotted(source)))


def map_zero_block(doc: Document, partial: Partial) -> None:
    """The `zero_optimization` block of `doc` as DeepSpeed reads it: `zero` (the stage, or the
    legacy boolean), offload devices, bucket and stage-3 facts. Shared with the formats that embed
    the block in their own file (gpt-neox YAML, adapters/gpt_neox.py)."""
    for source, key, convert in _SCENARIO_TABLE:
        if source[0] != "zero_optimization":
            continue
        try:
            value = convert(_get(doc.data, source))
        except _Skip:
            continue
        partial.set(key, value, doc.prov(source, _dotted(source)))
    _map_zero(doc, partial)


def _map_zero(doc: Document, partial: Partial) -> None:
    zero = doc.data.get("zero_optimization")
    if not isinstance(zero, dict):
        return
    base = ("zero_optimization",)
    for key, value in zero.items():
        if key in ("offload_optimizer", "offload_param"):
            continue
        name = "stage3_" + key if key in STAGE3_ALIASED else key
        partial.set_extra(f"deepspeed.{name}", _extra_value(value),
                          doc.prov(base + (key,), _dotted(base + (key,))))

    # Offload: the blocks, then the deprecated booleans (DeepSpeed maps them the same way and
    # refuses both spellings together).
    for block, scenario_key, legacy in (("offload_optimizer", "offload_optimizer", "cpu_offload"),
                                        ("offload_param", "offload_params", "cpu_offload_param")):
        node = zero.get(block)
        if isinstance(node, dict):
            for key, value in node.items():
                partial.set_extra(f"deepspeed.{block}.{key}", _extra_value(value),
                                  doc.prov(base + (block, key), _dotted(base + (block, key))))
            device_path = base + (block, "device")
            try:
                device = _device(node.get("device", "none"))
            except _Skip:
                device = None
            if device is not None:
                where = doc.prov(device_path if "device" in node else base + (block,),
                                 _dotted(device_path))
                partial.set(scenario_key, device, where)
        if legacy in zero:
            try:
                on = _flag(zero[legacy])
            except _Skip:
                continue
            where = doc.prov(base + (legacy,), _dotted(base + (legacy,)))
            if isinstance(node, dict):
                partial.diagnostics.append(make(
                    INVALID_VALUE, Severity.ERROR,
                    f"zero_optimization.{legacy} (deprecated) and zero_optimization.{block} are "
                    "both given: DeepSpeed refuses a deprecated key together with its "
                    "replacement", where, key=legacy))
            elif on:
                partial.set(scenario_key, "cpu", where)


def _enabled(doc: Document, block: str) -> tuple:
    """(state, provenance) of `<block>.enabled`: state is True, False, "auto" or None (absent)."""
    node = doc.data.get(block)
    if not isinstance(node, dict):
        return None, None
    where = doc.prov((block, "enabled"), f"{block}.enabled")
    if "enabled" not in node:
        return False, where
    value = node["enabled"]
    if _is_auto(value):
        return "auto", where
    try:
        return _flag(value), where
    except _Skip:
        return None, where


def _map_precision(doc: Document, partial: Partial) -> None:
    data = doc.data
    bf16_block = "bf16" if "bf16" in data else ("bfloat16" if "bfloat16" in data else "bf16")
    fp16, fp16_where = _enabled(doc, "fp16")
    bf16, bf16_where = _enabled(doc, bf16_block)
    if fp16 is True:
        partial.set_extra("flags.fp16", True, fp16_where)
    if bf16 is True:
        partial.set_extra("flags.bf16", True, bf16_where)
    if fp16 is True and bf16 is True:
        return  # mixed-precision-conflict reports it; no precision is in force
    if bf16 is True:
        partial.set("precision", "bf16", bf16_where)
        node = data[bf16_block]
        try:
            if _flag(node.get("bf16_master_weights_and_grads", False)):
                where = doc.prov((bf16_block, "bf16_master_weights_and_grads"))
                partial.set("master_weights", False, where)
                partial.set("grad_dtype", "bf16", where)
            if _flag(node.get("bf16_optimizer_states", False)):
                partial.set("optimizer_state_dtype", "bf16",
                            doc.prov((bf16_block, "bf16_optimizer_states")))
        except _Skip:
            pass
        return
    if fp16 is True:
        partial.set("precision", "fp16", fp16_where)
        try:
            if _flag(data["fp16"].get("fp16_master_weights_and_grads", False)):
                partial.set("master_weights", False,
                            doc.prov(("fp16", "fp16_master_weights_and_grads")))
        except _Skip:
            pass
        return
    if "auto" in (fp16, bf16):
        partial.set_extra("deepspeed.precision_auto", True,
                          fp16_where if fp16 == "auto" else bf16_where)
        return
    autocast = data.get("torch_autocast")
    if isinstance(autocast, dict) and autocast.get("enabled") is True:
        dtype = str(autocast.get("dtype", "")).lower()
        if dtype in ("torch.bfloat16", "bf16", "bfloat16"):
            partial.set("precision", "amp-bf16", doc.prov(("torch_autocast", "dtype")))
        return
    amp = data.get("amp")
    if isinstance(amp, dict) and amp.get("enabled") is True:
        partial.set_extra("deepspeed.amp", True, doc.prov(("amp", "enabled")))
        return
    if fp16 is None and bf16 is None and _auto_paths(data):
        return  # an HF-Trainer-style file without precision blocks: the trainer decides
    where = fp16_where or bf16_where or Provenance(doc.path, None, None, "fp16/bf16 (absent)")
    partial.set("precision", "fp32", where)


def _map_optimizer(doc: Document, partial: Partial) -> None:
    node = doc.data.get("optimizer")
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        return
    kind = node["type"]
    where = doc.prov(("optimizer", "type"), "optimizer.type")
    partial.set_extra("deepspeed.optimizer_type", kind, where)
    mapped = _OPTIMIZERS.get(kind.strip().lower().replace("_", ""))
    params = node.get("params") if isinstance(node.get("params"), dict) else {}
    if kind.strip().lower() == "adam" and params.get("adam_w_mode") is False:
        mapped = "adam"
    if mapped is None:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            f"optimizer {kind!r} has no memlint equivalent; the default optimizer (adamw: two "
            "fp32 moments per parameter) is assumed — set `optimizer=` to override", where,
            key="optimizer.type"))
        return
    partial.set("optimizer", mapped, where)


def _record_not_modeled(doc: Document, partial: Partial) -> None:
    """Keys the coverage table (memlint/facts/coverage/deepspeed.json) says are not modeled, as
    `deepspeed.<dotted path>` facts for the not-modeled rule (the blocks read above are already
    recorded under their own names)."""
    for dotted in coverage.table("deepspeed").not_modeled:
        path = tuple(dotted.split("."))
        node: Any = doc.data
        for part in path:
            node = node.get(part, _MISSING) if isinstance(node, dict) else _MISSING
        if node is _MISSING or f"deepspeed.{path[-1]}" in partial.extra \
                or f"deepspeed.{dotted}" in partial.extra:
            continue
        partial.set_extra(f"deepspeed.{dotted}", _extra_value(node), doc.prov(path, dotted))


_MISSING = object()


def _map_activation_checkpointing(doc: Document, partial: Partial) -> None:
    data = doc.data
    node = data.get("activation_checkpointing")
    if isinstance(node, dict):
        # Settings of deepspeed.checkpointing: they take effect only if the model code calls it,
        # so `recompute` stays unset.
        partial.set_extra("deepspeed.activation_checkpointing", True,
                          doc.prov(("activation_checkpointing",)))
        for key in ("partition_activations", "cpu_checkpointing", "contiguous_memory_optimization",
                    "number_checkpoints", "synchronize_checkpoint_boundary"):
            if key in node:
                partial.set_extra(f"deepspeed.{key}", node[key],
                                  doc.prov(("activation_checkpointing", key)))
    pipeline = data.get("pipeline")
    if isinstance(pipeline, dict):
        interval = pipeline.get("activation_checkpoint_interval")
        if isinstance(interval, int) and not isinstance(interval, bool):
            where = doc.prov(("pipeline", "activation_checkpoint_interval"))
            partial.set_extra("deepspeed.pipeline.activation_checkpoint_interval", interval, where)
            if interval > 0:
                # The pipeline engine checkpoints every `interval` layers of a PipelineModule
                # (runtime/pipe/engine.py): full recomputation, driven by the config itself.
                partial.set("recompute", "full", where)


def _auto_paths(data: Any, path: tuple = ()) -> list:
    found = []
    if isinstance(data, dict):
        for key, value in data.items():
            found.extend(_auto_paths(value, path + (key,)))
    elif isinstance(data, list):
        # "auto" is filled in by key (transformers' HfDeepSpeedConfig.fill_match), never deep
        # inside a data array: the first items are looked at, a 2M-item array is not walked
        for index, value in enumerate(data[:1000]):
            found.extend(_auto_paths(value, path + (index,)))
    elif _is_auto(data):
        found.append(path)
    return found


def find_sibling_model(path: str) -> Optional[str]:
    """The HF `config.json` next to a DeepSpeed config, if there is one.

    A DeepSpeed config carries no model. When it sits in a model or run directory, the
    `config.json` beside it (with `model_type`, `architectures` or `num_hidden_layers`) is the
    model it trains; the caller decides whether to load it (memlint never guesses silently: the
    path is recorded in `Partial.references`).
    """
    directory = os.path.dirname(os.path.abspath(path))
    candidate = os.path.join(directory, "config.json")
    if os.path.abspath(path) == candidate or not os.path.isfile(candidate):
        return None
    try:
        with open(candidate, "rb") as handle:
            head = handle.read(65536).decode("utf-8", "replace")
    except OSError:
        return None
    if any(f'"{key}"' in head for key in ("model_type", "architectures", "num_hidden_layers")):
        return candidate
    return None
