"""Reading Megatron YAML: test-case files (`MODEL_ARGS:` maps of flags), the experimental
`--yaml-cfg` layout (argument names with underscores, `language_model:` / `model_parallel:`
sections) and verl's Megatron engine config -> the same `Arg`s as a launch script."""
from __future__ import annotations

from memlint.adapters.megatron.flags import (FLAG_BY_DEST, MEGATRON_VERSION, MEMORY_ENV,
                                             _YAML_ALIASES, known_dests)
from memlint.adapters.megatron.readers import Arg, Read, dollar_refs
from memlint.diagnostics import PARSE_ERROR, UNKNOWN_KEY, Severity, make
from memlint.ir import Provenance
from memlint.loaders import load_yaml_mapping

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any


_YAML_SECTIONS = ("language_model", "model_parallel", "override_transformer_config",
                  "override_ddp_config", "override_mcore_model_config")


def read_yaml(path: str, text: str) -> Read:
    read = Read()
    doc = load_yaml_mapping(path, text, "a Megatron YAML config", read.diagnostics,
                            code=PARSE_ERROR)
    if doc is None:
        return read
    if isinstance(doc.data.get("MODEL_ARGS"), dict):
        env = doc.data.get("ENV_VARS")
        if isinstance(env, dict):
            for key, value in env.items():
                if str(key) in MEMORY_ENV and value is not None:
                    read.env[str(key)] = (str(value), doc.prov(("ENV_VARS", key), str(key)))
        if isinstance(doc.data.get("MODE"), str):
            read.mode = (doc.data["MODE"], doc.prov(("MODE",), "MODE"))
        for key, value in doc.data["MODEL_ARGS"].items():
            prov = doc.prov(("MODEL_ARGS", key), str(key))
            _yaml_flag(str(key), value, prov, read)
        return read
    if doc.data.get("MODEL_ARGS") is not None:
        read.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                     "MODEL_ARGS must be a mapping of flags to values",
                                     doc.prov(("MODEL_ARGS",), "MODEL_ARGS")))
        return read
    read.yaml_style = True
    _yaml_dests(doc, doc.data, (), read)
    return read


def _yaml_flag(key: str, value: Any, prov: Provenance, read: Read) -> None:
    if not key.startswith("-"):
        key = "--" + key
    if value is None or value is False:
        return
    if value is True:
        values: list = []
    elif isinstance(value, list):
        values = [str(v) for v in value]
    else:
        values = [str(value)]
    unresolved = tuple(u for v in values for u in dollar_refs(v))
    read.args.append(Arg(key, values, prov, [prov] * len(values), unresolved))


# verl's Megatron engine config (verl/workers/config: McoreEngineConfig) besides Megatron names.
_VERL = {"param_offload": ("offload_params", "cpu"), "optimizer_offload": ("offload_optimizer", "cpu")}
_VERL_KEYS = {"grad_offload", "use_dist_checkpointing", "dist_checkpointing_path",
              "dist_checkpointing_prefix", "use_mbridge", "vanilla_mbridge", "use_remove_padding",
              "forward_only", "dtype"}


def _yaml_dests(doc, data: dict, path: tuple, read: Read) -> None:
    for key, value in data.items():
        key_text = str(key)
        here = path + (key,)
        prov = doc.prov(here, ".".join(str(p) for p in here))
        if isinstance(value, dict):
            if key_text in _YAML_SECTIONS:
                _yaml_dests(doc, value, here, read)
            continue
        if value is None:
            continue
        dest = _YAML_ALIASES.get(key_text, key_text)
        if dest == "activation_func":
            if str(value).lower() == "swiglu":
                read.args.append(Arg("--swiglu", [], prov))
            continue
        if dest in ("dtype", "params_dtype") and isinstance(value, str):
            flag = {"bfloat16": "--bf16", "bf16": "--bf16", "float16": "--fp16",
                    "fp16": "--fp16"}.get(value.lower())
            if flag:
                read.args.append(Arg(flag, [], prov))
            continue
        if dest in _VERL:
            if value is True:
                read.args.append(Arg(f"--verl-{dest.replace('_', '-')}", [], prov))
            continue
        if dest in _VERL_KEYS:
            continue
        spec = FLAG_BY_DEST.get(dest)
        if spec is not None:
            if spec.nargs == 0:
                present = (value is False) if spec.negates else (value is True or
                                                                  str(value).lower() == "true")
                if present:
                    read.args.append(Arg(spec.name, [], prov))
                continue
            values = [str(v) for v in value] if isinstance(value, list) else [str(value)]
            read.args.append(Arg(spec.name, values, prov, [prov] * len(values),
                                 tuple(u for v in values for u in dollar_refs(v))))
            continue
        if dest not in known_dests() and not dest.startswith("_") and path[:1] != ("ENV_VARS",):
            read.diagnostics.append(make(
                UNKNOWN_KEY, Severity.INFO,
                f"{key_text!r} is not a Megatron-LM argument name ({MEGATRON_VERSION}); ignored",
                prov))


# ---------------------------------------------------------------------------------------------
# Interpreting the flags
