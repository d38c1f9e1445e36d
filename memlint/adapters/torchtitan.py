"""torchtitan adapter: job-config TOML, Python config registries (read with `ast`), launch scripts.

Three inputs, one mapping:
- TOML job configs (`train_configs/*.toml`, the format until the Feb-2026 switch to Python): tables
  `[model]`, `[training]`, `[parallelism]`, `[activation_checkpoint]`, ... (before 2025 some
  parallel degrees lived under `[training]` and `[experimental]`; both schemas are read).
- Python config registries (`torchtitan/models/<name>/config_registry.py`, `train_configs/*.py`):
  functions returning `Trainer.Config(...)` or module-level `JobConfig(...)`. They are parsed with
  `ast` and never imported: only literal keyword values of constructor calls are read (plus
  `model_registry("8B")` for the flavor and `config = other(); config.x = ...` chains inside the
  same file). Anything else is an `unresolved-value` info naming the expression.
- Launch scripts: `NGPU=8 CONFIG_FILE=... ./run_train.sh --parallelism.tensor_parallel_degree 8`,
  or `torchrun --nproc_per_node N --nnodes M -m torchtitan.train ...`. The overrides are applied
  on top of the referenced config when that file is found next to the script.

Every value read is also stored raw as `partial.extra["torchtitan.<section>.<key>"]`.
Defaults are torchtitan's (`torchtitan/config/job_config.py`): local_batch_size 8, seq_len 2048,
mixed_precision_param bfloat16, data_parallel_shard_degree -1, fsdp_reshard_after_forward
"default" (reshard unless pipeline parallel is on), activation_checkpoint.mode "selective" with
selective_ac_option "2", optimizer AdamW with the fused implementation.
"""
from __future__ import annotations

import os
import re

from memlint import lazy_import, lazy_re, verdicts
from memlint import keys as K
from memlint.adapters.detection import torchtitan as detect  # noqa: F401 - the adapter's detect()
from memlint.catalog import presets
from memlint.catalog import torchtitan as catalog
from memlint.diagnostics import INVALID_VALUE, PARSE_ERROR, UNKNOWN_KEY, UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance
from memlint.loaders import NUL_PATH, inside, load_toml, read_text, repo_root, suppressions

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

# start-up: ast loads only when a config_registry.py is read (RegistryReader)
ast = lazy_import.module("ast")
# start-up: the shell reader loads only when a launch script is read (a TOML job file needs none)
_shell = lazy_import.module("memlint.adapters._shell")

FORMAT = "torchtitan"

_TABLES = ("job", "model", "training", "parallelism", "activation_checkpoint", "optimizer",
           "fault_tolerance", "memory_estimation", "liger_kernel", "dataloader",
           "lr_scheduler", "checkpoint", "float8", "compile", "metrics", "profiling",
           "experimental", "quantize", "validation", "comm", "mx")
_LOOPED_SCHEDULES = {"interleaved1f1b", "interleavedzerobubble", "zbvzerobubble", "loopedbfs",
                     "dualpipev"}


# ---------------------------------------------------------------------------------------------
# facts: (section, key) -> (value, Provenance); every reader fills one of these

class Facts(dict):
    def put(self, section: str, key: str, value: Any, prov: Provenance) -> None:
        self[(section, key)] = (value, prov)

    def get_value(self, section: str, key: str, default: Any = None) -> Any:
        item = self.get((section, key))
        return default if item is None else item[0]

    def find(self, key: str, *sections: str):
        for section in sections:
            if (section, key) in self:
                return self[(section, key)]
        return None


# torchtitan's integers go through the scenario-key converters (finite, whole, within 2**53;
# '1_000' and '8' read as numbers; booleans rejected)
_to_int = K.to_int
_positive = K.positive_int


def _shard(value: Any) -> int:
    """data_parallel_shard_degree: -1 (fill the remaining GPUs) or a positive whole number."""
    number = K.shard_degree(value)
    if number is None:
        raise ValueError(f"must be -1 (fill the remaining GPUs) or a positive whole number, "
                         f"got {value!r}")
    return number


def _global_batch(value: Any) -> Optional[int]:
    number = _to_int(value)
    if number == -1:
        return None  # torchtitan default: local_batch_size x data-parallel degree
    if number < 1:
        raise ValueError(f"must be -1 or a positive whole number, got {value!r}")
    return number


def _mp_param(value: Any) -> str:
    text = str(value).strip().lower()
    if text in ("bfloat16", "bf16"):
        return "bf16"  # fp32 sharded params, bf16 all-gather/compute (MixedPrecisionPolicy)
    if text in ("float32", "fp32"):
        return "fp32"
    raise ValueError(f"expected bfloat16 or float32, got {value!r}")


def _ac_mode(value: Any) -> str:
    text = str(value).strip().lower()
    if text not in ("none", "selective", "full", "memory_budget"):
        raise ValueError(f"expected none, selective or full, got {value!r}")
    return "selective" if text == "memory_budget" else text


def _optimizer(value: Any) -> str:
    text = str(value).strip().lower()
    known = {"adamw": "adamw", "adam": "adam", "muon": "muon", "sgd": "sgd"}
    if text not in known:
        raise ValueError(f"optimizer {value!r} is not one memlint models (AdamW, Adam, Muon, SGD)")
    return known[text]


def _impl(value: Any) -> str:
    text = str(value).strip().lower()
    if text not in ("for-loop", "foreach", "fused"):
        raise ValueError(f"expected for-loop, foreach or fused, got {value!r}")
    return text


# The one declarative table: (sections the key may sit in, key, scenario key, converter).
# Older schemas put degrees under [training] / [experimental]; the first section listed wins.
TABLE: tuple = (
    (("training",), "local_batch_size", "micro_batch", _positive),
    (("training",), "batch_size", "micro_batch", _positive),
    (("training",), "global_batch_size", "global_batch", _global_batch),
    (("training",), "seq_len", "seq_len", _positive),
    (("training",), "mixed_precision_param", "precision", _mp_param),
    (("parallelism", "training"), "data_parallel_replicate_degree", "dp_replicate", _positive),
    (("parallelism", "training"), "data_parallel_shard_degree", "dp_shard", _shard),
    (("parallelism", "training"), "tensor_parallel_degree", "tp", _positive),
    (("parallelism", "experimental", "training"), "context_parallel_degree", "cp", _positive),
    (("parallelism", "experimental", "training"), "pipeline_parallel_degree", "pp", _positive),
    (("parallelism",), "expert_parallel_degree", "ep", _positive),
    (("parallelism",), "expert_tensor_parallel_degree", "etp", _positive),
    (("activation_checkpoint",), "mode", "recompute", _ac_mode),
    (("optimizer",), "name", "optimizer", _optimizer),
    (("optimizer",), "implementation", "optimizer_impl", _impl),
    (("training",), "steps", "train_steps", _positive),
)

# torchtitan defaults that differ from memlint's own (torchtitan/config/job_config.py).
DEFAULTS = {"micro_batch": 8, "seq_len": 2048, "precision": "bf16", "dp_shard": -1,
            "recompute": "selective", "optimizer": "adamw", "optimizer_impl": "fused"}
_DEFAULT_SOURCE = {"micro_batch": ("training", "local_batch_size"),
                   "seq_len": ("training", "seq_len"),
                   "precision": ("training", "mixed_precision_param"),
                   "dp_shard": ("parallelism", "data_parallel_shard_degree"),
                   "recompute": ("activation_checkpoint", "mode"),
                   "optimizer": ("optimizer", "name"),
                   "optimizer_impl": ("optimizer", "implementation")}


def apply(facts: Facts, partial: Partial, anchor: Callable[[str], Provenance],
          base_dir: Optional[str] = None) -> None:
    """Map facts onto scenario keys (shared by the TOML, registry and script readers).

    `anchor(section)` gives the Provenance to use for a torchtitan default (the section header
    when the file has one, else the file itself).
    """
    for (section, key), (value, prov) in sorted(facts.items(), key=lambda kv: kv[0]):
        partial.set_extra(f"torchtitan.{section}.{key}", value, prov)

    seen: set = set()
    for sections, key, scenario_key, convert in TABLE:
        found = facts.find(key, *sections)
        if found is None or scenario_key in seen:
            continue
        value, prov = found
        try:
            converted = convert(value)
        except (ValueError, TypeError) as exc:
            partial.diagnostics.append(make(INVALID_VALUE, Severity.ERROR,
                                            f"{key}: {exc}", prov, key=key))
            continue
        seen.add(scenario_key)
        if converted is not None:
            partial.set(scenario_key, converted, prov)

    seen |= _tokens_per_microbatch(facts, partial, seen)
    for scenario_key, default in DEFAULTS.items():
        if scenario_key not in seen and scenario_key not in partial.settings:
            section, key = _DEFAULT_SOURCE[scenario_key]
            base = anchor(section)
            partial.set(scenario_key, default,
                        Provenance(base.file, base.line, base.column,
                                   f"{section}.{key} (torchtitan default)"))

    partial.set("framework", "fsdp2", anchor("parallelism"))
    # torchtitan's train.py forward_backward_step (9dec370, e7c0cae): `del pred` before
    # loss.backward(), so the logits live only in the loss's autograd graph
    base = anchor("training")
    partial.set_extra("loop.frees_logits", True,
                      Provenance(base.file, base.line, base.column, "torchtitan train.py del pred"))
    _derive_parallel(facts, partial, anchor)
    _derive_recompute(facts, partial)
    _derive_offload(facts, partial)
    _derive_compile(facts, partial)
    _derive_model(facts, partial, anchor, base_dir)
    _derive_float8(facts, partial)
    _derive_checkpoint(facts, partial)
    _derive_loss_parallel(facts, partial)


# TrainingConfig since 2026 (torchtitan/config/configs.py at b5bcd76): a data-parallel rank's
# microbatch is num_tokens_per_microbatch_per_dp_rank token slots (default 16384) in rows of
# max_context_length (default 2048): 8 x 2048, the old local_batch_size x seq_len defaults
_TOKENS, _CONTEXT = 16384, 2048


def _tokens_per_microbatch(facts: Facts, partial: Partial, seen: set) -> set:
    """micro_batch and seq_len from the token-slot fields, where a file gives one of them."""
    tokens = facts.find("num_tokens_per_microbatch_per_dp_rank", "training")
    context = facts.find("max_context_length", "training")
    if (tokens is None and context is None) or {"micro_batch", "seq_len"} & seen:
        return set()
    n, n_prov = tokens if tokens is not None else (_TOKENS, None)
    ctx, ctx_prov = context if context is not None else (_CONTEXT, None)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (n, ctx)):
        return set()
    rows = max(1, n // ctx)
    where = n_prov or ctx_prov
    partial.set("seq_len", ctx, ctx_prov or Provenance(
        where.file, where.line, where.column, "training.max_context_length (torchtitan "
        f"default {_CONTEXT})"))
    partial.set("micro_batch", rows, Provenance(
        where.file, where.line, where.column,
        f"micro batch {rows} = num_tokens_per_microbatch_per_dp_rank {n} // "
        f"max_context_length {ctx}"))
    if n % ctx:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, f"num_tokens_per_microbatch_per_dp_rank {n} is not a "
            f"multiple of max_context_length {ctx}: counted as {rows} full rows", where,
            key="num_tokens_per_microbatch_per_dp_rank"))
    return {"micro_batch", "seq_len"}


def _derive_loss_parallel(facts: Facts, partial: Partial) -> None:
    """`disable_loss_parallel` ([parallelism] at e7c0cae, config_manager.py; `--training.` at
    9dec370): with tensor parallelism the output layer then returns full-vocabulary logits
    (models/llama3/parallelize_llama.py: ColwiseParallel output_layouts=Replicate()) and the loss
    runs without DTensor's loss_parallel (distributed/utils.py train_context)."""
    found = facts.find("disable_loss_parallel", "parallelism", "training")
    if found is not None and isinstance(found[0], bool):
        partial.set_extra("torchtitan.disable_loss_parallel", found[0], found[1])


def _derive_checkpoint(facts: Facts, partial: Partial) -> None:
    """Checkpoints are written only with checkpoint.enable (older: enable_checkpoint), every
    `interval` steps, the latest `keep_latest_k` kept (torchtitan components/checkpointer)."""
    enable = facts.find("enable", "checkpoint") or facts.find("enable_checkpoint", "checkpoint")
    if enable is None or enable[0] is not True:
        return
    for key, scenario_key, minimum in (("interval", "checkpoint_interval", 1),
                                       ("keep_latest_k", "checkpoint_keep", 0)):
        found = facts.find(key, "checkpoint")
        if found is None:
            continue
        value, prov = found
        try:
            number = _to_int(value)
        except (ValueError, TypeError):
            continue   # a step-schedule or unreadable value: no checkpoint count
        if number >= minimum:
            partial.set(scenario_key, number, prov)


def _setting(partial: Partial, key: str, default: Any = None) -> Any:
    setting = partial.settings.get(key)
    return default if setting is None else setting.value


def _derive_parallel(facts: Facts, partial: Partial, anchor) -> None:
    shard = _setting(partial, "dp_shard", -1)
    replicate = _setting(partial, "dp_replicate", 1)
    tp = _setting(partial, "tp", 1)
    pp = _setting(partial, "pp", 1)
    cp = _setting(partial, "cp", 1)
    shard_prov = (partial.settings["dp_shard"].prov if "dp_shard" in partial.settings
                  else anchor("parallelism"))
    world = _setting(partial, "world_size")
    if shard == -1 and world:
        rest = world // max(1, replicate * tp * pp * cp)
        fill = rest if rest >= 1 else None
    else:
        fill = shard if shard != -1 else None
    # torchtitan applies fully_shard when the shard degree (after filling) or cp is above 1.
    sharded = (fill is None and shard == -1) or (fill or 1) > 1 or cp > 1
    if sharded:
        partial.set("fsdp", "hybrid" if replicate > 1 else "full", shard_prov)
    else:
        partial.set("fsdp", "none", shard_prov)

    # fsdp_reshard_after_forward: "default" reshards unless pipeline parallel is on
    # (torchtitan parallelize: reshard_after_forward = not pp_enabled); always / never.
    found = facts.find("fsdp_reshard_after_forward", "parallelism")
    policy, prov = (found if found is not None else ("default", anchor("parallelism")))
    text = str(policy).strip().lower()
    if text == "always":
        partial.set("reshard_after_forward", True, prov)
    elif text == "never":
        partial.set("reshard_after_forward", False, prov)
    elif text == "default":
        label = prov if found is not None else Provenance(
            prov.file, prov.line, prov.column, "parallelism.fsdp_reshard_after_forward "
            "(torchtitan default)")
        partial.set("reshard_after_forward", pp <= 1, label)
    else:
        partial.diagnostics.append(make(INVALID_VALUE, Severity.ERROR,
                                        f"fsdp_reshard_after_forward: expected default, always "
                                        f"or never, got {policy!r}", prov,
                                        key="fsdp_reshard_after_forward"))

    if tp > 1:  # torchtitan's TP plan shards norms/dropout along the sequence (SequenceParallel)
        partial.set("sp", True, partial.settings["tp"].prov)
    found = facts.find("pipeline_parallel_schedule", "parallelism", "experimental")
    if found is not None and pp > 1:
        value, prov = found
        if str(value).strip().lower() in _LOOPED_SCHEDULES:
            # looped schedules place two stages per rank unless layers_per_stage says otherwise
            if facts.find("pipeline_parallel_layers_per_stage", "parallelism") is None:
                partial.set("vpp", 2, prov)


def _derive_recompute(facts: Facts, partial: Partial) -> None:
    if _setting(partial, "recompute") in ("selective", "full"):
        # torchtitan applies activation checkpointing to each block before fully_shard, so the
        # recompute runs inside the FSDP unit on the parameters the backward already gathered
        partial.set_extra("recompute.scope", "inside-unit", partial.settings["recompute"].prov)
    if _setting(partial, "recompute") != "selective":
        return
    found = facts.find("selective_ac_option", "activation_checkpoint")
    value, prov = found if found is not None else ("2", None)
    text = str(value).strip().lower()
    if text == "op":
        return
    try:
        every = int(text)
    except ValueError:
        if prov is not None:
            partial.diagnostics.append(make(INVALID_VALUE, Severity.ERROR,
                                            f"selective_ac_option: expected 'op' or a positive "
                                            f"integer, got {value!r}", prov,
                                            key="selective_ac_option"))
        return
    if every < 1:
        partial.diagnostics.append(make(INVALID_VALUE, Severity.ERROR,
                                        f"selective_ac_option must be positive, got {value!r}",
                                        prov, key="selective_ac_option"))
        return
    where = prov or partial.settings["recompute"].prov
    if prov is None:
        where = Provenance(where.file, where.line, where.column,
                           "activation_checkpoint.selective_ac_option (torchtitan default '2')")
    # layer-selective AC: every Nth block is checkpointed in full, the others keep activations
    partial.set("recompute_every", every, where)


def _derive_offload(facts: Facts, partial: Partial) -> None:
    found = facts.find("enable_cpu_offload", "training")
    if found is not None and found[0] is True:
        # FSDP2 CPUOffloadPolicy keeps sharded params, grads and optimizer states on the host
        partial.set("offload_params", "cpu", found[1])
        partial.set("offload_optimizer", "cpu", found[1])


def _derive_compile(facts: Facts, partial: Partial) -> None:
    """torch.compile and whether the loss is compiled with the model.

    `[compile] enable` + `components` (torchtitan from mid-2025; default ["model", "loss"],
    torchtitan/config/job_config.py Compile); before it `[training] compile`, which compiled
    each TransformerBlock and, from bbb1b616e (2025-04-02, components/loss.py
    build_cross_entropy_loss), the loss too. At 9dec370 (2024-12) the loss compile was commented
    out in train.py ("compiling loss function causes CUDA errors"). The old `batch_size` key
    (renamed `local_batch_size` at 8570415c3, 2025-06-05) marks a file of that era, read as
    model-only: a file from April-June 2025 compiled its loss as well."""
    found = facts.find("enable", "compile")
    if found is None:
        found = facts.find("compile", "training")
    if found is None or not isinstance(found[0], bool):
        return
    components = facts.find("components", "compile")
    if components is not None and facts.find("enable", "compile") is found:
        # train.py / parallelize.py: the blocks compile under `enable and "model" in
        # components`, the loss under `enable and "loss" in components` (components/loss.py)
        value = components[0]
        items = {str(i).strip() for i in (value if isinstance(value, list)
                                          else str(value).split(","))}
        partial.set("compile", found[0] and "model" in items, components[1])
        partial.set("compile_loss", found[0] and "loss" in items, components[1])
        return
    partial.set("compile", found[0], found[1])
    if components is not None:
        value = components[0]
        items = value if isinstance(value, list) else str(value).split(",")
        partial.set("compile_loss", any(str(i).strip() == "loss" for i in items), components[1])
    elif facts.find("compile", "training") is found and facts.find("batch_size", "training"):
        partial.set("compile_loss", False, found[1])


def _derive_model(facts: Facts, partial: Partial, anchor, base_dir: Optional[str]) -> None:
    name = facts.find("name", "model")
    flavor = facts.find("flavor", "model")
    if name is None and flavor is None:
        return
    model_name = str(name[0]) if name else "llama3"
    flavor_name = str(flavor[0]) if flavor else "debugmodel"
    prov = (flavor or name)[1]
    config = catalog.lookup(model_name, flavor_name)
    if config is not None:
        preset = catalog.preset_name(model_name, flavor_name)

        presets.register(preset, config)
        partial.set("model", preset, prov)
        return
    assets = facts.find("hf_assets_path", "model")
    if assets is not None and base_dir is not None:
        candidate = os.path.normpath(os.path.join(base_dir, str(assets[0]), "config.json"))
        root = _repo_root(os.path.join(base_dir, "_"))
        if "\x00" in candidate:
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.INFO, f"hf_assets_path {str(assets[0])!r} {NUL_PATH}; "
                "memlint does not follow it (give --model path/to/config.json)", assets[1],
                key="model.hf_assets_path"))
        elif not inside(candidate, root):
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.INFO,
                f"hf_assets_path {str(assets[0])!r} points outside this repository; memlint does "
                "not follow it (give --model path/to/config.json)", assets[1],
                key="model.hf_assets_path"))
        elif os.path.isfile(candidate):
            partial.set("model", candidate, assets[1])
            return
    known = ", ".join(catalog.flavors_of(model_name)) or "none"
    partial.diagnostics.append(make(
        UNRESOLVED, Severity.INFO,
        f"torchtitan model {model_name!r} flavor {flavor_name!r} is not in memlint's catalog "
        f"(known {model_name} flavors: {known}); give the architecture with --model "
        "path/to/config.json", prov, key="model.flavor", no_estimate=verdicts.MODEL_NOT_RESOLVED))


def _derive_float8(facts: Facts, partial: Partial) -> None:
    converters = facts.find("converters", "model")
    gather = facts.find("enable_fsdp_float8_all_gather", "float8", "quantize.linear.float8")
    enabled = False
    if converters is not None:
        value = converters[0]
        items = value if isinstance(value, list) else str(value).split(",")
        enabled = any("float8" in str(item).lower() for item in items)
    old_style = facts.find("enable_float8_linear", "float8")
    if not enabled and old_style is not None and old_style[0] is True:
        enabled, converters = True, old_style   # torchtitan 2024: [float8] enable_float8_linear
    if enabled:
        # torchao Float8Linear (dynamic tensorwise scaling) over bf16 weights: precision=fp8.
        # The spelling dates the file: `[float8] enable_float8_linear` 2024-07-17 (69fe8defc) to
        # 2025-02-15 (57387af0e, the ModelConverter `converters`), which brackets the op-level
        # SAC list's aten.abs (bcebc0de5 2024-11-26 .. 88247277c 2025-02-06; memory/
        # activations.py float8_abs_items)
        partial.set("precision", "fp8", converters[1])
        partial.set_extra("float8.switch",
                          "enable_float8_linear" if old_style is converters else "converters",
                          converters[1])
    # Float8LinearConfig.from_recipe_name (torchtitan components/quantization/float8.py
    # @e7c0cae): a recipe asserts `not enable_fsdp_float8_all_gather`, so the weights are
    # all-gathered in bf16 (the recipe itself: a not-modeled key, facts/coverage)
    recipe = facts.find("recipe_name", "float8", "quantize.linear.float8")
    if enabled and (recipe is None or not recipe[0]) and gather is not None \
            and gather[0] is True:
        # FSDP all-gathers float8 weights (1 byte per parameter) instead of bf16
        partial.set_extra("fsdp.allgather_dtype_bytes", 1, gather[1])


# ---------------------------------------------------------------------------------------------
# TOML

def _flatten_toml(data: dict, prefix: tuple = ()) -> list:
    out = []
    for key, value in data.items():
        if isinstance(value, dict):
            out.extend(_flatten_toml(value, prefix + (key,)))
        else:
            out.append((prefix, key, value))
    return out


def load_toml_text(path: str, text: str, partial: Partial) -> tuple:
    doc = load_toml(path, text)
    partial.diagnostics.extend(doc.diagnostics)
    facts = Facts()
    if not isinstance(doc.data, dict):
        return facts, doc
    reported: set = set()
    for section_path, key, value in _flatten_toml(doc.data):
        section = ".".join(section_path)
        if not section_path:
            partial.diagnostics.append(make(UNKNOWN_KEY, Severity.WARNING,
                                            f"top-level key {key!r} outside any table; torchtitan "
                                            "reads options from tables like [training]",
                                            doc.prov((key,), key), key=key))
            continue
        if section_path[0] not in _TABLES and section_path[0] not in reported:
            reported.add(section_path[0])
            partial.diagnostics.append(make(UNKNOWN_KEY, Severity.INFO,
                                            f"table [{section_path[0]}] is not a torchtitan "
                                            "job-config section memlint knows; its keys are kept "
                                            "as facts", doc.prov(section_path[:1], section),
                                            key=section))
        facts.put(section, key, value, doc.prov(section_path + (key,), f"{section}.{key}"))
    return facts, doc


def _toml_anchor(doc, path: str):
    def anchor(section: str) -> Provenance:
        if doc is not None and (section,) in doc.positions:
            line, col = doc.positions[(section,)]
            return Provenance(path, line, col, f"[{section}]")
        return Provenance(path, None, None, None)
    return anchor


# ---------------------------------------------------------------------------------------------
# Python config registries, read with ast (never imported)

_CONFIG_CALLS = ("Trainer.Config", "JobConfig")
# activation-checkpointing policies of Trainer.Config (torchtitan/distributed/
# activation_checkpoint.py at b5bcd76): SelectiveAC is per-op SAC, MemoryBudgetAC is read as
# selective as its TOML `mode = "memory_budget"` is
_AC_POLICIES = {"FullAC.Config": "full", "SelectiveAC.Config": "selective",
                "MemoryBudgetAC.Config": "memory_budget"}
_ARITHMETIC = {"Mult": lambda a, b: a * b, "Add": lambda a, b: a + b,
               "Sub": lambda a, b: a - b, "FloorDiv": lambda a, b: a // b}


def _constant(node: ast.AST):
    """A literal, or integer arithmetic of literals (`1 * 8192`, `4 * 1024`), as the registry
    files write token counts; anything else raises ValueError."""
    op = type(getattr(node, "op", None)).__name__
    if isinstance(node, ast.BinOp) and op in _ARITHMETIC:
        left, right = _constant(node.left), _constant(node.right)
        if not all(isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**40
                   for v in (left, right)) or (op == "FloorDiv" and not right):
            raise ValueError("not integer arithmetic")
        return _ARITHMETIC[op](left, right)
    return ast.literal_eval(node)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _dotted(node.func) + "()"
    return type(node).__name__


class RegistryReader:
    """Static reader of one registry file: config functions and module-level configs."""

    def __init__(self, path: str, text: str, partial: Partial):
        self.path = path
        self.partial = partial
        self.tree: Optional[ast.Module] = None
        self.functions: dict = {}
        self.module_configs: dict = {}
        try:
            self.tree = ast.parse(text, filename=path)
        except SyntaxError as exc:
            partial.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                            f"invalid Python: {exc.msg}",
                                            Provenance(path, exc.lineno, exc.offset, None)))
            return
        except (ValueError, RecursionError) as exc:
            partial.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                            f"invalid Python: {exc}", Provenance(path, 1, 1, None)))
            return
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef) and self._returns_config(node):
                self.functions[node.name] = node
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                if _dotted(node.value.func) in _CONFIG_CALLS:
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            self.module_configs[target.id] = node.value
        package = os.path.basename(os.path.dirname(os.path.abspath(path)))
        if package == "train_configs":
            package = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(path))))
        self.package = package

    @staticmethod
    def _returns_config(node: ast.FunctionDef) -> bool:
        for child in ast.walk(node):
            if isinstance(child, ast.Call) and _dotted(child.func) in _CONFIG_CALLS:
                return True
        returns = node.returns
        return returns is not None and _dotted(returns) in _CONFIG_CALLS

    def names(self) -> list:
        return list(self.module_configs) + list(self.functions)

    def prov(self, node: ast.AST, key: str) -> Provenance:
        return Provenance(self.path, getattr(node, "lineno", None),
                          (getattr(node, "col_offset", -1) + 1) or None, key)

    def unresolved(self, node: ast.AST, what: str) -> None:
        try:
            source = ast.unparse(node)
        except Exception:  # pragma: no cover - unparse is total on parsed trees
            source = type(node).__name__
        if len(source) > 80:
            source = source[:77] + "..."
        self.partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            f"{what} = {source} is not a literal; memlint reads config files statically and "
            "leaves it unresolved", self.prov(node, what), key=what))

    def read(self, name: str, facts: Facts, depth: int = 0) -> bool:
        """Read config `name` (a function or module-level assignment) into facts."""
        if depth > 8:
            return False
        if name in self.module_configs:
            self._read_call(self.module_configs[name], facts)
            return True
        function = self.functions.get(name)
        if function is None:
            return False
        local: dict = {}
        self.bindings = {}   # `model_spec = model_registry("8B")`: names a later keyword uses
        for statement in function.body:
            if isinstance(statement, ast.Return) and statement.value is not None:
                value = statement.value
                if isinstance(value, ast.Call) and _dotted(value.func) in _CONFIG_CALLS:
                    self._read_call(value, facts)
                elif isinstance(value, ast.Name) and value.id in local:
                    pass  # already applied below, statement by statement
                else:
                    self.unresolved(value, f"{name}() return value")
                return True
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target, value = statement.targets[0], statement.value
                if isinstance(target, ast.Name) and isinstance(value, ast.Call):
                    callee = _dotted(value.func)
                    if callee in _CONFIG_CALLS:
                        self._read_call(value, facts)
                        local[target.id] = True
                    elif callee in self.functions and not value.args and not value.keywords:
                        self.read(callee, facts, depth + 1)
                        local[target.id] = True
                    elif callee.endswith("model_registry"):
                        self.bindings[target.id] = value
                    else:
                        self.unresolved(value, target.id)
                elif isinstance(target, ast.Attribute):
                    self._read_attribute(target, value, facts)
            elif isinstance(statement, (ast.Expr,)) and isinstance(statement.value, ast.Constant):
                continue  # docstring
            elif isinstance(statement, (ast.FunctionDef, ast.ImportFrom, ast.Import, ast.Pass)):
                continue
            elif isinstance(statement, (ast.For, ast.If, ast.While, ast.With, ast.AugAssign)):
                self.unresolved(statement, f"{name}() statement")
        if function.returns is not None and _dotted(function.returns) == "Trainer.Config" \
                and facts.find("mode", "activation_checkpoint") is None:
            # Trainer.Config's default policy is SelectiveAC, per-op (trainer.py at b5bcd76)
            where = self.prov(function, "activation_checkpoint (Trainer.Config default "
                              "SelectiveAC: per-op, torchtitan/trainer.py at b5bcd76)")
            facts.put("activation_checkpoint", "mode", "selective", where)
            facts.put("activation_checkpoint", "selective_ac_option", "op", where)
        return True

    def _read_attribute(self, target: ast.Attribute, value: ast.AST, facts: Facts) -> None:
        chain = []
        node: ast.AST = target
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        chain.reverse()
        if len(chain) == 1:
            self._read_section(chain[0], value, facts)
        elif len(chain) == 2:
            self._put_literal(chain[0], chain[1], value, facts)
        else:
            self.unresolved(value, ".".join(chain))

    def _read_call(self, call: ast.Call, facts: Facts) -> None:
        for keyword in call.keywords:
            if keyword.arg is None:
                self.unresolved(keyword.value, "**kwargs")
                continue
            self._read_section(keyword.arg, keyword.value, facts)

    def _read_section(self, section: str, value: ast.AST, facts: Facts) -> None:
        if section == "model_spec":
            if isinstance(value, ast.Name) and value.id in getattr(self, "bindings", {}):
                value = self.bindings[value.id]
            self._read_model_spec(value, facts)
            return
        if section == "activation_checkpoint" and isinstance(value, ast.Call):
            policy = _AC_POLICIES.get(_dotted(value.func))
            if policy is not None:   # torchtitan/distributed/activation_checkpoint.py, b5bcd76
                facts.put("activation_checkpoint", "mode", policy,
                          self.prov(value, "activation_checkpoint"))
                if policy == "selective":
                    facts.put("activation_checkpoint", "selective_ac_option", "op",
                              self.prov(value, "activation_checkpoint (SelectiveAC: per-op)"))
        if isinstance(value, ast.Call):
            if section == "model_converters":
                names = [_dotted(node.func).split(".")[0] for node in ast.walk(value)
                         if isinstance(node, ast.Call) and node is not value]
                converters = [n for n in names if n.endswith("Converter")]
                facts.put("model", "converters",
                          ["float8" if "Float8" in n else n for n in converters],
                          self.prov(value, "model_converters"))
                for node in ast.walk(value):
                    if isinstance(node, ast.Call) and "Float8" in _dotted(node.func):
                        for keyword in node.keywords:
                            if keyword.arg:
                                self._put_literal("float8", keyword.arg, keyword.value, facts)
                return
            for keyword in value.keywords:
                if keyword.arg is None:
                    self.unresolved(keyword.value, f"{section}.**kwargs")
                    continue
                self._put_literal(section, keyword.arg, keyword.value, facts)
            return
        self._put_literal("job", section, value, facts)

    def _put_literal(self, section: str, key: str, value: ast.AST, facts: Facts) -> None:
        try:
            literal = _constant(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            if section in ("training", "parallelism", "activation_checkpoint", "model",
                           "optimizer", "compile", "float8"):
                self.unresolved(value, f"{section}.{key}")
            return
        facts.put(section, key, literal, self.prov(value, f"{section}.{key}"))

    def _read_model_spec(self, value: ast.AST, facts: Facts) -> None:
        if (isinstance(value, ast.Call) and _dotted(value.func).endswith("model_registry")
                and value.args):
            try:
                flavor = ast.literal_eval(value.args[0])
            except (ValueError, TypeError, SyntaxError):
                self.unresolved(value, "model_spec")
                return
            facts.put("model", "name", self.package, self.prov(value, "model_spec"))
            facts.put("model", "flavor", flavor, self.prov(value.args[0], "model_spec flavor"))
            return
        self.unresolved(value, "model_spec")


# ---------------------------------------------------------------------------------------------
# launch scripts

_OVERRIDE = lazy_re.compile(r"^--([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z0-9_.\-]+?)(?:=(.*))?$")
_LAUNCH_WORDS = ("torchrun", "python", "python3")


def _coerce(text: str) -> Any:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(text) if len(text) <= 40 else text
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


class ScriptReader:
    """A torchtitan launch script, read by the one shell reader (memlint.adapters._shell):
    `NGPU=8 CONFIG_FILE=... ./run_train.sh --section.key value` or `torchrun ... -m
    torchtitan.train ...`, with variables, `if`/`case` and `sh -c` handled as for Megatron."""

    def __init__(self, path: str, text: str, partial: Partial):
        self.path = path
        self.text = text
        self.partial = partial
        self.overrides = Facts()
        self.launches = 0
        self.world: Optional[tuple] = None
        self.per_node: Optional[tuple] = None
        self.config_file: Optional[tuple] = None
        self.module: Optional[tuple] = None
        self.config: Optional[tuple] = None
        self.script = None

    def read(self) -> None:
        try:
            self.script = _shell.parse(self.text)
        except _shell.ShellError as exc:
            self.script = _shell.Script(self.text, [], [0] + [m.end() for m in
                                                              re.finditer("\n", self.text)])
            self.partial.diagnostics.append(make(PARSE_ERROR, Severity.WARNING,
                                                 f"cannot read the script: {exc}",
                                                 self._at(exc.offset, None)))
            return
        interpreter = _shell.Interpreter()
        for command in interpreter.run(self.script):
            self._command(command, interpreter)
        for offset, message in interpreter.notes:
            self.partial.diagnostics.append(make(UNRESOLVED, Severity.INFO, message,
                                                 self._at(offset, None)))

    def _at(self, offset: int, key: Optional[str]) -> Provenance:
        line, col = self.script.where(offset)
        return Provenance(self.path, line, col, key)

    def _command(self, command, interpreter) -> None:
        fields = command.fields
        texts = [f.text for f in fields]
        start = next((i for i, t in enumerate(texts)
                      if t.endswith("run_train.sh") or os.path.basename(t) in _LAUNCH_WORDS),
                     None)
        if start is None:
            return
        joined = " ".join(texts[start:])
        is_run_train = texts[start].endswith("run_train.sh")
        is_torchrun = not is_run_train and (
            "torchtitan.train" in joined or "torchtitan/train.py" in joined)
        if not (is_run_train or is_torchrun):
            return
        self.launches += 1
        env = interpreter.env

        def variable(name: str) -> tuple:
            at = interpreter.assigned_at.get(name)
            return env[name].text, (self._at(at, name) if at is not None else None)

        if is_run_train:
            if "NGPU" in env:
                self._world(*variable("NGPU"))
            else:
                self._world("8", self._at(command.offset, "NGPU (run_train.sh default 8)"))
            for var, attribute in (("CONFIG_FILE", "config_file"), ("MODULE", "module"),
                                   ("CONFIG", "config")):
                if var in env:
                    setattr(self, attribute, variable(var))
        self._options(fields[start + 1:], is_torchrun)

    def _world(self, value: str, prov: Optional[Provenance], nodes: str = "1") -> None:
        count = K.to_int(value) * K.to_int(nodes) if _is_count(value) and _is_count(nodes) \
            else None
        if count is None:
            self.partial.diagnostics.append(make(UNRESOLVED, Severity.INFO,
                                                 f"GPU count {value!r} is not a number; "
                                                 "world_size left unset", prov, key="NGPU"))
            return
        self.world = (count, prov)
        self.per_node = (K.to_int(value), prov)

    def _options(self, args: list, torchrun: bool) -> None:
        nproc = nnodes = None
        index = 0
        while index < len(args):
            token = args[index].text
            here = args[index].origin
            match = _OVERRIDE.match(token)
            if torchrun and (token.startswith("--nproc") or token.startswith("--nnodes")):
                name, _, inline = token.partition("=")
                if not inline and index + 1 < len(args):
                    inline = args[index + 1].text
                    index += 1
                prov = self._at(here, name)
                if name.startswith("--nproc"):
                    nproc = (inline, prov)
                else:
                    nnodes = inline.split(":")[-1]
                index += 1
                continue
            if token in ("--module", "--config") and index + 1 < len(args):
                prov = self._at(here, token)
                value = args[index + 1].text
                if token == "--module":
                    self.module = (value, prov)
                else:
                    self.config = (value, prov)
                index += 2
                continue
            if not match:
                index += 1
                continue
            section, key, inline = match.group(1), match.group(2), match.group(3)
            prov = self._at(here, f"--{section}.{key}")
            value_field = None
            if inline is not None:
                value_token, unresolved = inline, args[index].unresolved
            elif index + 1 < len(args) and not args[index + 1].text.startswith("--"):
                value_field = args[index + 1]
                value_token, unresolved = value_field.text, value_field.unresolved
                index += 1
            else:
                value_token, unresolved = None, ()
            index += 1
            key = key.replace("-", "_")
            if value_token is None:
                value: Any = True
                if key.startswith("no_"):
                    key, value = key[3:], False
            else:
                if unresolved:
                    self.partial.diagnostics.append(make(
                        UNRESOLVED, Severity.INFO,
                        f"--{section}.{key} {value_token}: {', '.join(unresolved)}; the value "
                        "is left unresolved", prov, key=f"{section}.{key}"))
                    continue
                value = _coerce(value_token)
                if key in ("converters", "filter_fqns", "components") and isinstance(value, str):
                    value = [item for item in value.split(",") if item]
            if (section, key) == ("job", "config_file"):
                self.config_file = (str(value), prov)
                continue
            self.overrides.put(section, key, value, prov)
        if nproc is not None:
            self._world(nproc[0], nproc[1], nnodes or "1")


def _is_count(text: str) -> bool:
    return bool(re.fullmatch(r"\s*[0-9]{1,9}\s*", str(text)))


def _repo_root(path: str) -> str:
    """The repository root above the file `path` (memlint.loaders.repo_root)."""
    return repo_root(path)


def _find_referenced(path: str, name: str) -> Optional[str]:
    """A file the script names, relative to the script or its repository root (never outside)."""
    root = _repo_root(path)
    for base in (os.path.dirname(os.path.abspath(path)), root):
        candidate = os.path.normpath(os.path.join(base, name))
        if inside(candidate, root) and os.path.isfile(candidate):
            return candidate
    return None


# ---------------------------------------------------------------------------------------------
# entry point

def load(path: str, text: str, select: Optional[str] = None) -> Partial:
    """Read a torchtitan TOML, registry .py or launch script. Never raises on bad input."""
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    try:
        lower = path.lower()
        if lower.endswith(".toml"):
            facts, doc = load_toml_text(path, text, partial)
            if doc.data is not None:
                apply(facts, partial, _toml_anchor(doc, path), os.path.dirname(path))
        elif lower.endswith(".py"):
            facts = _registry_facts(path, text, partial, select)
            if facts is not None:
                apply(facts, partial, lambda s: Provenance(path, None, None, None),
                      os.path.dirname(path))
        else:
            _load_script(path, text, partial)
    except RecursionError:
        partial.diagnostics.append(make(PARSE_ERROR, Severity.ERROR, "input nests too deeply",
                                        Provenance(path, 1, 1, None)))
    return partial


def _registry_facts(path: str, text: str, partial: Partial, select: Optional[str]):
    reader = RegistryReader(path, text, partial)
    if reader.tree is None:
        return None
    names = reader.names()
    facts = Facts()
    if select:
        if not reader.read(select, facts):
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.WARNING,
                f"config {select!r} is not defined in {os.path.basename(path)} (it defines: "
                f"{', '.join(names) or 'none'})", Provenance(path, 1, 1, None), key="config"))
            return None
        partial.set_extra("torchtitan.config", select, Provenance(path, None, None, "config"))
        return facts
    if len(names) == 1:
        reader.read(names[0], facts)
        partial.set_extra("torchtitan.config", names[0], Provenance(path, None, None, "config"))
        return facts
    if names:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            f"{os.path.basename(path)} defines {len(names)} configs ({', '.join(names[:8])}"
            f"{', ...' if len(names) > 8 else ''}); name one with CONFIG=<name> in a launch "
            "script to check it", Provenance(path, 1, 1, None), key="config",
            no_estimate=verdicts.RUNTIME_VALUE))
    else:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            f"{os.path.basename(path)} defines no function returning Trainer.Config or JobConfig "
            "(its configs are another trainer's, e.g. FluxTrainer.Config): memlint does not read "
            "them", Provenance(path, 1, 1, None), key="config",
            no_estimate=verdicts.FORMAT_NOT_READ))
    return None


def _load_script(path: str, text: str, partial: Partial) -> None:
    reader = ScriptReader(path, text, partial)
    reader.read()
    if reader.launches == 0:
        partial.diagnostics.append(make(UNRESOLVED, Severity.INFO,
                                        "no torchtitan launch (run_train.sh or torchtitan.train) "
                                        "found in this script", Provenance(path, 1, 1, None)))
        return
    base = Facts()
    anchor = lambda s: Provenance(path, None, None, None)  # noqa: E731
    if reader.config_file is not None:
        name, prov = reader.config_file
        found = _find_referenced(path, name)
        if found is None:
            partial.diagnostics.append(make(UNRESOLVED, Severity.INFO,
                                            f"config file {name!r} not found next to the script "
                                            "or in its repository; only the overrides are read",
                                            prov, key="CONFIG_FILE"))
        else:
            partial.references.append(found)

            body, problems = read_text(found)
            if body is not None:
                inner = Partial(source=found, fmt=FORMAT)
                base, doc = load_toml_text(found, body, inner)
                partial.diagnostics.extend(inner.diagnostics)
                anchor = _toml_anchor(doc, found)
            partial.diagnostics.extend(problems)
    elif reader.config is not None:
        module = reader.module[0] if reader.module else "llama3"
        name, prov = reader.config
        registry = _find_referenced(path, os.path.join("torchtitan", "models", module,
                                                       "config_registry.py"))
        if registry is None:
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.INFO,
                f"config {name!r} of module {module!r} lives in torchtitan/models/{module}/"
                "config_registry.py, which is not in this repository; only the overrides are "
                "read", prov, key="CONFIG"))
        else:
            partial.references.append(registry)

            body, problems = read_text(registry)
            partial.diagnostics.extend(problems)
            if body is not None:
                inner = Partial(source=registry, fmt=FORMAT)
                base = _registry_facts(registry, body, inner, name) or Facts()
                partial.diagnostics.extend(inner.diagnostics)
    if reader.world is not None:
        count, prov = reader.world
        partial.set("world_size", count, prov or Provenance(path, None, None, "NGPU"))
        # torchrun starts nproc_per_node ranks on each node (run_train.sh passes NGPU)
        partial.set("gpus_per_node", reader.per_node[0],
                    reader.per_node[1] or Provenance(path, None, None, "NGPU"))
    base.update(reader.overrides)
    apply(base, partial, anchor, os.path.dirname(path))
