"""Merging: adapter outputs + `--model` + `--set` overrides + `[tool.memlint]` -> one Scenario.

Order (lowest to highest priority): defaults, the model's config.json, `[tool.memlint.scenario]`
(project-wide defaults: overriding one is no conflict), each file in the order
given (a later file overrides an earlier one, and a disagreement between two files is a
`conflicting-sources` warning), then `--set` and `--model` from the command line. Values are
converted through the key table in `memlint.keys`; a bad value or unknown key is a diagnostic that
points at the place that set it.
"""
from __future__ import annotations

import json
import os

from memlint import keys as K, lazy_import, verdicts
from memlint.assumptions import ASSUMPTIONS, profile_defaults
from memlint.diagnostics import (CONFLICT, INVALID_VALUE, MISSING_MODEL, UNKNOWN_KEY, UNRESOLVED,
                                 Severity, make)
from memlint.ir import (RL, Assumptions, Engine, Hardware, ModelSpec, Parallelism, Partial,
                        Provenance, Scenario, Setting, Training, frozen_mapping)
from memlint.loaders import NUL_PATH, inside, repo_root

# start-up: the presets load when a model is named (most runs name none)
presets = lazy_import.module("memlint.catalog.presets")

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Iterable, Optional



def parse_assignment(text: str, source: Optional[str] = None) -> tuple[str, str]:
    """'tp=8' -> ('tp', '8'). Raises ValueError for text without '='."""
    if "=" not in text:
        raise ValueError(f"expected key=value, got {text!r}")
    key, value = text.split("=", 1)
    key = key.strip()
    if not key:
        raise ValueError(f"expected key=value, got {text!r}")
    return key, value.strip()


def literal(text: str):
    """A command-line value as the JSON literal it spells (numbers, true/false/null, lists),
    else the string itself: `model.hidden_size=4096` must mean the number, as in config.json."""
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none"):
        return None
    try:
        number = float(stripped)
    except ValueError:
        number = None
    if number is not None and number == number and abs(number) != float("inf"):
        if number.is_integer() and "." not in stripped:
            return int(number)
        return number
    if stripped[:1] in "[{":
        try:
            return json.loads(stripped)
        except (ValueError, RecursionError):   # RecursionError: `[` nested 100,000 deep
            return text
    return text


def overrides_partial(assignments: Iterable[str], model: Optional[str] = None) -> Partial:
    """The command line (`--set key=value`, `--model PATH`) as a Partial of its own."""
    partial = Partial(source="<command line>", fmt="cli")
    for text in assignments:
        key, value = parse_assignment(text)
        if K.is_model_key(key):
            value = literal(value)
        partial.set(key, value, Provenance(None, None, None, f"--set {key}"))
    if model:
        partial.set("model", model, Provenance(None, None, None, "--model"))
    return partial


# Partials whose values are project-wide defaults ([tool.memlint.scenario]): a file overriding
# one of them is the point of a default, not a conflict.
DEFAULT_FORMATS = ("project",)


def merge(partials: list) -> tuple[dict, dict, list]:
    """Later partials override earlier ones. Two files disagreeing is a warning."""
    settings: dict = {}
    extra: dict = {}
    owner: dict = {}
    owner_fmt: dict = {}
    diagnostics: list = []
    for partial in partials:
        for key, setting in partial.settings.items():
            previous = settings.get(key)
            if (previous is not None and partial.fmt != "cli" and owner[key] != partial.source
                    and owner[key] != "<model>" and owner_fmt.get(key) not in DEFAULT_FORMATS
                    and _differs(previous.value, setting.value)):
                diagnostics.append(make(
                    CONFLICT, Severity.WARNING,
                    f"{key} = {setting.value!r} here overrides {previous.value!r} from "
                    f"{previous.prov.describe()}", setting.prov, key=key))
            settings[key] = setting
            owner[key] = partial.source
            owner_fmt[key] = partial.fmt
        extra.update(partial.extra)
    return settings, extra, diagnostics


def _differs(a: Any, b: Any) -> bool:
    if str(a).strip().lower() == str(b).strip().lower():
        return False
    try:
        return float(a) != float(b)
    except (TypeError, ValueError, OverflowError):
        return True


def _unflatten(settings: dict) -> dict:
    config: dict = {}
    for key, setting in settings.items():
        parts = key.split(".")[1:]
        node = config
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = setting.value
    return config


def project_model(name: str, entry: dict, prov: Provenance,
                  max_bytes: Optional[int] = None) -> Partial:
    """A model of the project's own `[tool.memlint.models]`: its config.json or its inline keys,
    with an info saying where it came from."""
    # start-up: the HF config reader loads only when a model is given
    from memlint.adapters import hf_config

    where = f"[tool.memlint.models] of {os.path.relpath(entry['source'])}"
    if "path" in entry:
        path = entry["path"]
        if not os.path.exists(path):
            partial = Partial(source=name, fmt="hf_config")
            partial.diagnostics.append(make(
                MISSING_MODEL, Severity.WARNING,
                f"no memory estimate: model {name!r} is given in {where} as {path}, which does "
                "not exist", prov, key=prov.key or "model",
                no_estimate=verdicts.MODEL_NOT_RESOLVED))
            return partial
        partial = (hf_config.load_path(path, max_bytes) if max_bytes is not None
                   else hf_config.load_path(path))
        detail = f"{where}: {os.path.relpath(path)}"
    else:
        partial = Partial(source=f"project:{entry['id']}", fmt="catalog")
        for key, value in hf_config.flatten(entry["config"]):
            partial.set(f"model.{key}", value, prov)
        detail = f"{where} (its keys written there)"
    partial.diagnostics.append(make(
        UNRESOLVED, Severity.INFO, f"model {name!r} resolved from the project's own models, "
        f"{detail}", prov, key=prov.key or "model", origin="project"))
    return partial


def load_model_source(name: str, prov: Provenance, base_dir: Optional[str] = None,
                      allow_outside_root: bool = False, max_bytes: Optional[int] = None,
                      hub: Optional[bool] = None, models: Optional[dict] = None) -> Partial:
    """`model=PATH|PRESET` -> the model's settings (`model.<hf_key>`), as a Partial.

    A path written in a config file is relative to that file and is never read outside that
    file's repository root unless `allow_outside_root`; one given on the command line
    (`--model`, `--set model=`) is the user's own choice and is read as given. A name that is
    neither a preset nor an existing path but has the shape of a Hub id resolves through
    `load_hub_model` (HF cache, bundled catalog, then the Hub only if `hub` allows it). A name
    the project lists in `[tool.memlint.models]` (`models`) resolves there first.
    """
    # start-up: the HF config reader loads only when a model is given
    from memlint.adapters import hf_config

    entry = (models or {}).get(name.strip().lower())
    if entry is not None:
        return project_model(name, entry, prov, max_bytes)
    preset = presets.get(name)
    if preset is not None:
        partial = Partial(source=f"preset:{name}", fmt="preset")
        for key, value in hf_config.flatten(preset):
            partial.set(f"model.{key}", value, prov)
        return partial
    path = os.path.expanduser(name)
    if not os.path.isabs(path) and prov.file is not None:
        # a path written in a config file is relative to that file
        path = os.path.join(os.path.dirname(os.path.abspath(prov.file)), path)
    elif base_dir and not os.path.isabs(path):
        path = os.path.join(base_dir, path)
    if "\x00" in path:
        partial = Partial(source=name, fmt="hf_config")
        partial.diagnostics.append(make(INVALID_VALUE, Severity.ERROR,
                                        f"model {name!r} {NUL_PATH}", prov, key="model"))
        return partial
    if prov.file is not None and not allow_outside_root:
        root = repo_root(prov.file)
        if not inside(path, root):
            partial = Partial(source=name, fmt="hf_config")
            partial.diagnostics.append(make(
                INVALID_VALUE, Severity.ERROR,
                f"model {name!r} is outside the repository root {root}; not followed (pass "
                "--allow-outside-root to follow it)", prov, key="model"))
            return partial
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    if not os.path.exists(path) and hub_id(name):
        return load_hub_model(name, prov, hub, max_bytes)
    if not os.path.exists(path):
        partial = Partial(source=name, fmt="hf_config")
        known = ", ".join(sorted(presets.names())[:12])
        partial.diagnostics.append(make(
            INVALID_VALUE, Severity.ERROR,
            f"model {name!r} is neither a config.json path nor a known preset "
            f"(presets include: {known}; `memlint rules` lists none of them, see README)", prov,
            key="model"))
        return partial
    if max_bytes is not None:
        return hf_config.load_path(path, max_bytes)
    return hf_config.load_path(path)


def _same_file(name: str, prov: Provenance, source: str, base_dir: Optional[str]) -> bool:
    """Whether the model a setting names is the config.json `source` itself."""
    path = os.path.expanduser(name)
    if not os.path.isabs(path):
        base = (os.path.dirname(os.path.abspath(prov.file)) if prov.file is not None
                else base_dir or os.getcwd())
        path = os.path.join(base, path)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    try:
        return os.path.samefile(path, source)
    except OSError:
        return False


def _explicit_model_wins(settings: dict, partials: list, base_dir: Optional[str]) -> list:
    """A model named explicitly (--model, `model =` in a memlint.toml, a trainer's
    model_name_or_path) wins over an HF config.json that joined the run as a file (one found
    beside a DeepSpeed config, or listed among the files): that file's model.* keys are dropped
    (explicit `model.<key>` overrides still apply on top). Returns the files not used."""
    chosen = settings["model"]
    found = []
    for partial in partials:
        if partial.fmt != "hf_config" or not any(K.is_model_key(k) for k in partial.settings):
            continue
        if _same_file(str(chosen.value), chosen.prov, partial.source, base_dir):
            continue
        found.append(partial.source)
        for key, setting in partial.settings.items():
            if K.is_model_key(key) and settings.get(key) is setting:
                del settings[key]
    return found


def _model_conflict(chosen: Setting, found: list) -> list:
    """The warning that names the model used and the model config it was preferred to."""
    if not found:
        return []
    files = ", ".join(os.path.relpath(f) if os.path.isabs(f) else f for f in found)
    return [make(CONFLICT, Severity.WARNING,
                 f"the model is {chosen.value!r}, named by {chosen.prov.describe()}; the model "
                 f"config {files} of this run describes another model and is not used (the "
                 "explicit model wins; drop one of the two to silence this)", chosen.prov,
                 key="model")]


def hub_id(name: str) -> bool:
    """Whether `name` has the shape of a Hugging Face Hub id (org/name or a bare name)."""
    # start-up: the Hub catalog (a JSON table) loads only when a model name is read
    from memlint.catalog.hub import looks_like_hub_id

    return looks_like_hub_id(name)


def load_hub_model(name: str, prov: Provenance, hub: Optional[bool] = None,
                   max_bytes: Optional[int] = None) -> Partial:
    """A Hub id -> the model's settings, each resolution step named in an info diagnostic; an id
    that resolves nowhere is a warning that says how to resolve it, and gives no model keys (so
    no memory verdict rests on a guessed model)."""
    # start-up: the HF reader and the Hub catalog load only when a Hub model is read
    from memlint.adapters import hf_config
    from memlint.catalog import hub as hubs

    found = hubs.resolve(name, hub=hub)
    steps = "; ".join(found.steps)
    if found.config is None:
        partial = Partial(source=name, fmt="hub")
        partial.diagnostics.append(make(
            MISSING_MODEL, Severity.WARNING,
            f"no memory estimate: model {name!r} is a Hugging Face Hub id that memlint could not "
            f"resolve ({steps}); {hubs.how_to_resolve(name)}", prov, key=prov.key or "model",
            no_estimate=verdicts.MODEL_NOT_RESOLVED))
        return partial
    if found.path is not None:
        partial = (hf_config.load_path(found.path, max_bytes) if max_bytes is not None
                   else hf_config.load_path(found.path))
    else:
        partial = Partial(source=f"catalog:{found.entry['id']}", fmt="catalog")
        for key, value in hf_config.flatten(found.config):
            partial.set(f"model.{key}", value, prov)
    note = found.entry.get("note") if found.entry else None
    partial.diagnostics.append(make(
        UNRESOLVED, Severity.INFO,
        f"model {name!r} resolved from {found.source}" + (f" ({note})" if note else "")
        + f"; steps: {steps}", prov, key=prov.key or "model", origin=found.origin))
    return partial


def checkpoint_quantization(model_settings: dict) -> Optional[tuple]:
    """(base_quant, provenance) of a checkpoint saved quantized: its config.json's
    `quantization_config`, which transformers applies when it loads the weights whatever the
    training config says (quantizers/auto.py AutoHfQuantizer): bitsandbytes `load_in_4bit` /
    `load_in_8bit` (hugging-quants' and axolotl-quants' NF4 uploads) and 4-bit GPTQ in groups of
    128 (`gptq`, memory/lora.py GPTQ_BYTES: Qwen's *-Int4 checkpoints). None for other
    checkpoints and other quantization methods."""
    def value(name):
        setting = model_settings.get(f"model.quantization_config.{name}")
        return (setting.value, setting.prov) if setting is not None else (None, None)

    method, prov = value("quant_method")
    if method == "gptq":
        bits, group = value("bits")[0], value("group_size")[0]
        return ("gptq", prov) if bits == 4 and group == 128 else None
    if method not in (None, "bitsandbytes"):
        return None
    for flag, quant in (("load_in_4bit", "nf4"), ("load_in_8bit", "int8")):
        on, where = value(flag)
        if on is True:
            return quant, where or prov
    return None


# The extra key (coverage table memlint/facts/coverage/checkpoint.json) under which a checkpoint's
# quantization that memlint does not model is recorded for ML107.
UNMODELED_QUANTIZATION = "checkpoint.quantization_config"


def unmodeled_quantization(model_settings: dict) -> Optional[tuple]:
    """(description, provenance) of a config.json `quantization_config` that
    `checkpoint_quantization` does not model (AWQ, fp8, compressed-tensors, ModelOpt, MXFP4,
    bitsandbytes without a 4/8-bit flag set, GPTQ other than 4-bit in groups of 128, ...); None
    without one or for a modeled one. Its weights are then counted unquantized."""
    prefix = "model.quantization_config."
    given = {k[len(prefix):]: s for k, s in model_settings.items() if k.startswith(prefix)}
    if not given or checkpoint_quantization(model_settings) is not None:
        return None

    def value(name):
        setting = given.get(name)
        return setting.value if setting is not None else None

    method = value("quant_method") or value("quant_algo") or "unnamed method"
    if method == "bitsandbytes" and not (value("load_in_4bit") or value("load_in_8bit")
                                         or value("_load_in_4bit") or value("_load_in_8bit")):
        return None   # a bitsandbytes block that quantizes nothing
    parts = [str(method)]
    groups = value("config_groups")   # compressed-tensors / ModelOpt: the first group's weights
    first = next(iter(groups.values()), None) if isinstance(groups, dict) and groups else None
    weights = first.get("weights") if isinstance(first, dict) else None
    weights = weights if isinstance(weights, dict) else {}
    bits = value("bits") or value("w_bit") or weights.get("num_bits")
    kind = weights.get("type") or value("fmt")
    group = value("group_size") or value("q_group_size") or weights.get("group_size")
    block = value("weight_block_size")
    if bits:
        parts.append(f"{bits}-bit{' ' + str(kind) if kind else ''}")
    elif kind:
        parts.append(str(kind))
    if group:
        parts.append(f"group {group}")
    if isinstance(block, (list, tuple)) and block:
        parts.append("block " + "x".join(map(str, block)))
    where = given.get("quant_method") or given.get("quant_algo") or next(iter(given.values()))
    return " ".join(parts), where.prov


def build(partials: list, base_dir: Optional[str] = None, allow_outside_root: bool = False,
          max_bytes: Optional[int] = None, hub: Optional[bool] = None,
          models: Optional[dict] = None) -> tuple[Scenario, list]:
    """Merge partials (lowest priority first) and build the typed Scenario. `models`: the
    project's `[tool.memlint.models]` (LintConfig.models)."""
    diagnostics: list = []
    for partial in partials:
        diagnostics.extend(partial.diagnostics)
    settings, extra, conflicts = merge(partials)
    diagnostics.extend(conflicts)
    unused: list = []
    if "model" in settings:
        unused = _explicit_model_wins(settings, partials, base_dir)
        diagnostics.extend(_model_conflict(settings["model"], unused))
        # The model source ranks below every explicit model.* key: load it and merge underneath.
        model_setting = settings["model"]
        model_partial = load_model_source(str(model_setting.value), model_setting.prov, base_dir,
                                          allow_outside_root, max_bytes, hub, models)
        model_partial.source = "<model>"
        diagnostics.extend(model_partial.diagnostics)
        for key, setting in model_partial.settings.items():
            settings.setdefault(key, setting)

    values, provenance, model_settings = _convert(settings, diagnostics)
    _recorded_conventions(extra, values["conventions"], provenance)
    if "base_quant" not in values["training"]:
        found = checkpoint_quantization(model_settings)
        if found is not None:
            values["training"]["base_quant"], provenance["base_quant"] = found
        elif not _converts_checkpoints(values["training"], extra):
            unmodeled = unmodeled_quantization(model_settings)
            if unmodeled is not None:
                extra[UNMODELED_QUANTIZATION] = Setting(*unmodeled)

    load = extra.get(DEFAULT_LOAD_DTYPE)
    if load is not None:
        diagnostics.extend(_remote_code_load(values["training"], provenance, load,
                                             model_settings))

    model = None
    if model_settings or "name" in values["model"]:
        model = ModelSpec(config=frozen_mapping(_unflatten(model_settings)), **values["model"])
    elif values["model"]:
        model = ModelSpec(config=frozen_mapping({}), **values["model"])
    _gpu(values["hardware"], provenance, diagnostics)
    profile = values["assumptions"].pop("profile", "precise")
    assumption_values = dict(profile_defaults(profile))
    assumption_values.update(values["assumptions"])

    scenario = Scenario(
        model=model,
        training=Training(**values["training"]),
        parallelism=Parallelism(**values["parallelism"]),
        hardware=Hardware(**values["hardware"]),
        assumptions=Assumptions(profile=profile, values=frozen_mapping(assumption_values)),
        provenance=frozen_mapping(provenance),
        sources=tuple(p.source for p in partials if p.fmt not in ("cli",)
                      and p.source not in unused),
        extra=frozen_mapping(extra),
        rl=RL(**values["rl"]),
        engine=Engine(**values["engine"]),
        convention_keys=frozen_mapping(values["conventions"]),
    )
    return scenario, diagnostics


# adapters/trainer_args.py DEFAULT_LOAD_DTYPE: the HF Trainer reader took from_pretrained's
# default dtype for the weights (no torch_dtype argument)
DEFAULT_LOAD_DTYPE = "hf_trainer.default_load_dtype"
QWEN_REMOTE_DTYPE = (
    "Qwen v1 remote code modeling_qwen.py QWenLMHeadModel.__init__ (zhangningboo/Qwen-7B@ffe04dd, "
    "a copy of Qwen/Qwen-7B's, lines 939-988): with none of config.json's bf16/fp16/fp32 true it "
    "sets bf16 where torch.cuda.is_bf16_supported() (else fp16, fp32 without CUDA) and casts "
    "transformer and lm_head to it")


def remote_code_dtype(model_settings: dict) -> Optional[tuple]:
    """(dtype, why, provenance) of the weights as a model's own remote code casts them whatever
    from_pretrained loaded: Qwen v1 (model_type qwen) casts to the one of config.json's bf16 /
    fp16 / fp32 that is true, and with none true to bf16 (QWEN_REMOTE_DTYPE; the GPU is taken
    to support bf16). None for other models."""
    model_type = model_settings.get("model.model_type")
    if model_type is None or model_type.value != "qwen":
        return None
    given = {name: model_settings.get(f"model.{name}") for name in ("bf16", "fp16", "fp32")}
    on = [name for name, setting in given.items() if setting is not None and setting.value is True]
    if len(on) == 1:
        return on[0], f"config.json {on[0]}: true; {QWEN_REMOTE_DTYPE}", given[on[0]].prov
    if on:
        return None   # the remote code refuses more than one (its assert)
    return "bf16", f"config.json sets none of bf16/fp16/fp32; {QWEN_REMOTE_DTYPE}", model_type.prov


def _remote_code_load(training: dict, provenance: dict, load: Setting,
                      model_settings: dict) -> list:
    """The HF Trainer reader's precision, derived from from_pretrained's default dtype, redone
    for the dtype the model's remote code casts its weights to (`remote_code_dtype`), by the
    reader's own rule (adapters/trainer_args.py _precision): autocast over bf16 weights is pure
    bf16; over fp16 weights the flag's precision with fp16 params. Not when another source set
    the precision or the dtypes agree."""
    recorded = load.value if isinstance(load.value, dict) else {}
    found = remote_code_dtype(model_settings)
    if (found is None or found[0] == recorded.get("dtype")
            or training.get("precision") != recorded.get("precision")
            or provenance.get("precision") != recorded.get("precision_prov")):
        return []
    dtype, why, _where = found
    flag = recorded.get("flag")
    if dtype == "bf16":
        training["precision"] = "pure-bf16"
    elif dtype == "fp16":
        training["precision"] = flag or "fp16"
        if flag and "param_dtype" not in training:
            training["param_dtype"] = "fp16"
    else:
        training["precision"] = flag or "fp32"
    prov = load.prov
    provenance["precision"] = Provenance(
        file=prov.file, line=prov.line, column=prov.column,
        key=f"weights {dtype}: Qwen v1 remote code default")
    return [make(UNRESOLVED, Severity.INFO,
                 f"weights held in {dtype}, not the {recorded.get('dtype')} from_pretrained loads "
                 f"without torch_dtype ({why}): precision {training['precision']}",
                 prov, key="defaults")]


def _converts_checkpoints(training: dict, extra: dict) -> bool:
    """Megatron-LM and torchtitan train from their own checkpoints, converted from the Hub's
    (dequantized): a quantized config.json is no statement about their weights."""
    return (training.get("framework") == "megatron"
            or any(key.startswith("torchtitan.") for key in extra))


def _convert(settings: dict, diagnostics: list) -> tuple:
    """(values by IR section, provenance by key, the model.* settings) of the merged settings,
    each converted through the key table; an unknown key or a bad value is a diagnostic."""
    values: dict = {name: {} for name in ("training", "parallelism", "hardware", "assumptions",
                                          "model", "conventions", "rl", "engine")}
    provenance: dict = {}
    model_settings: dict = {}
    assumption_names = _assumption_names()
    for key in sorted(settings):
        setting = settings[key]
        if K.is_model_key(key):
            model_settings[key] = setting
            provenance[key] = setting.prov
            continue
        spec = K.KEYS.get(key)
        if spec is None and key in assumption_names:
            try:
                values["assumptions"][key] = assumption_names[key](setting.value)
                provenance[key] = setting.prov
            except ValueError as exc:
                diagnostics.append(make(INVALID_VALUE, Severity.ERROR, f"{key}: {exc}",
                                        setting.prov, key=key))
            continue
        if spec is None:
            hint = K.suggest(key, list(K.KEYS) + list(assumption_names))
            tail = f"; did you mean {hint!r}?" if hint else ""
            diagnostics.append(make(UNKNOWN_KEY, Severity.ERROR,
                                    f"unknown scenario key {key!r}{tail}", setting.prov, key=key))
            continue
        try:
            converted = spec.convert(setting.value)
        except ValueError as exc:
            diagnostics.append(make(INVALID_VALUE, Severity.ERROR, f"{key}: {exc}", setting.prov,
                                    key=key))
            continue
        values[spec.section][spec.field] = converted
        provenance[key] = setting.prov
    return values, provenance, model_settings


def _gpu(hardware_values: dict, provenance: dict, diagnostics: list) -> None:
    """A named GPU's capacity from the catalog; an unknown one is a warning and the default GPU
    applies; a capacity without a name is a custom GPU."""
    if "gpu" in hardware_values and "gpu_memory" not in hardware_values:
        # start-up: the GPU catalog loads only when a GPU is named
        from memlint.hardware import lookup

        gpu = lookup(hardware_values["gpu"])
        if gpu is None:
            # start-up: the GPU catalog loads only when a GPU is named
            from memlint.hardware import known_names

            # memlint not knowing a card is no fault of the config: a warning, and the memory
            # verdict falls back to the default GPU (and says it rests on it)
            diagnostics.append(make(
                INVALID_VALUE, Severity.WARNING,
                f"unknown GPU {hardware_values['gpu']!r}: the memory verdict uses the default "
                f"{Hardware().gpu} instead; known: {', '.join(known_names())} (or give its "
                "memory, e.g. gpu_memory=24GiB)", provenance.pop("gpu"), key="gpu"))
            del hardware_values["gpu"]
        else:
            hardware_values["gpu"] = gpu.name
            hardware_values["gpu_memory"] = gpu.capacity_bytes
    elif "gpu_memory" in hardware_values and "gpu" not in hardware_values:
        hardware_values["gpu"] = "custom"


def _recorded_conventions(extra: dict, conventions: dict, provenance: dict) -> None:
    """The convention keys an adapter recorded (`Partial.extra` under the declared name), below
    any value a setting gave. A recorded value that does not convert is left out: the format's
    own rules report it, and the framework's default applies."""
    for name, spec in K.CONVENTION_KEYS.items():
        setting = extra.get(name)
        if setting is None or name in conventions:
            continue
        try:
            conventions[name] = spec.convert(setting.value)
        except ValueError:
            continue
        provenance.setdefault(name, setting.prov)


def _assumption_names() -> dict:
    return {name: spec.convert for name, spec in ASSUMPTIONS.items()}

