"""axolotl trainer YAML: every key that changes memory.

Read at axolotl-ai-cloud/axolotl@067b021 (src/axolotl/utils/schemas/*.py for keys and defaults):
- sizes: micro_batch_size (default 1, `schemas/training.py`), sequence_len (default 512,
  `schemas/config.py`), gradient_accumulation_steps, and the n-D parallel sizes dp_shard_size,
  dp_replicate_size, tensor_parallel_size, context_parallel_size (sequence_parallel_degree is its
  deprecated name, `schemas/validation.py`), expert_parallel_size;
- the weight dtype: `resolve_dtype` (`utils/config/__init__.py`) loads the model in bf16 when
  bf16 is true/auto, fp16 when fp16 or load_in_8bit, else fp32, and the loader passes it as
  `dtype=` to from_pretrained (`loaders/model.py`). The HF Trainer then trains those bf16
  parameters directly: no fp32 master copy, bf16 gradients, and torch's AdamW keeps its moments
  in the parameter dtype (`zeros_like(param)`). axolotl's FSDP2 wrap
  (`monkeypatch/accelerate/fsdp2.py`, `fsdp2_prepare_model`) does not upcast either, so
  bf16 is `pure-bf16` there too. Under DeepSpeed the engine keeps fp32 master partitions of
  its own (`bf16` in DeepSpeed's convention);
- `optimizer` (default adamw_torch_fused, `schemas/training.py`): HF `OptimizerNames` plus
  axolotl's `CustomSupportedOptimizers` (`schemas/enums.py`); `_OPTIMIZERS` below maps each
  name to memlint's optimizer, implementation and state width (8-bit bitsandbytes/torchao
  states: 1 byte per moment element);
- adapter lora/qlora with lora_r, lora_dropout, lora_target_linear / lora_target_modules,
  load_in_4bit / load_in_8bit (the frozen base is quantized);
- recompute: gradient_checkpointing true | "offload" | "offload_disk" (offload: the checkpoints
  go to host memory), activation_offloading true | legacy | disk | hidden_states;
- the loss: Cut-Cross-Entropy (`integrations/cut_cross_entropy`, `cut_cross_entropy` defaults
  to true once the plugin is listed) and Liger's fused linear cross entropy
  (`liger_fused_linear_cross_entropy`) never materialize the full logits;
- `tiled_mlp` (ALST tiled MLP): recorded, not modelled (the estimate keeps the untiled MLP);
- fsdp / fsdp_version / fsdp_config, and `deepspeed:` (a JSON path). axolotl opens that path
  as given, i.e. relative to its working directory (`utils/config/__init__.py`:
  `os.path.exists(cfg.deepspeed)`), normally the project root it runs from: it is looked for in
  the working directory, at the repository root and in every folder from the YAML's up to the
  root, never only beside the YAML. One of axolotl's own `deepspeed_configs/*.json` that is not
  found is taken from `_SHIPPED_DEEPSPEED` (the files' facts at that commit).
`base_model` (or `base_model_config`) is the model: a Hub id resolves through the HF cache and
memlint's bundled catalog (never the network unless --hub), else a warning and no verdict.

`gradient_checkpointing: true` is transformers' checkpointing, which wraps each decoder layer's
call, FSDP hooks included, so under FSDP the recompute re-gathers the layer
(`recompute.scope = outside-unit`); `fsdp_config.activation_checkpointing` is FSDP's own wrapper
inside each unit (`inside-unit`).
"""
from __future__ import annotations

import os

from memlint.adapters._lora import target_kind
from memlint.adapters.detection import axolotl as detect  # noqa: F401 - the adapter's detect()
from memlint.adapters.registry import find_reference
from memlint.diagnostics import INVALID_VALUE, UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance
from memlint.keys import parse_bool
from memlint.loaders import load_yaml_mapping, repo_root, suppressions

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

FORMAT = "axolotl"
COMMIT = "axolotl-ai-cloud/axolotl@067b021"

# (axolotl key, scenario key): plain positive integers
_INTS = (("micro_batch_size", "micro_batch"), ("sequence_len", "seq_len"),
         ("gradient_accumulation_steps", "grad_accum"), ("dp_shard_size", "dp_shard"),
         ("dp_replicate_size", "dp_replicate"), ("tensor_parallel_size", "tp"),
         ("context_parallel_size", "cp"), ("sequence_parallel_degree", "cp"),
         ("expert_parallel_size", "ep"))
# axolotl's own defaults for keys a YAML may leave out (schemas/training.py, schemas/config.py)
_DEFAULTS = (("micro_batch", 1, "micro_batch_size"), ("seq_len", 512, "sequence_len"))
_STRATEGIES = {"full_shard": ("full", True), "shard_grad_op": ("shard_grad_op", False),
               "hybrid_shard": ("hybrid", True), "no_shard": ("none", True)}


class Opt:
    """What one optimizer name means for memory: memlint's optimizer, its implementation, the
    bits per optimizer-state element (None: the parameter dtype) and whether the states live in
    bitsandbytes' paged (CUDA unified) memory."""

    def __init__(self, optimizer: str, impl: Optional[str] = None, bits: Optional[int] = None,
                 paged: bool = False, origin: str = ""):
        self.optimizer, self.impl, self.bits, self.paged, self.origin = (
            optimizer, impl, bits, paged, origin)


# HF transformers `OptimizerNames` (training_args.py) and axolotl `CustomSupportedOptimizers`
# (schemas/enums.py). 8-bit: bitsandbytes Adam8bit / torchao AdamW8bit (int8 moments plus one
# fp32 scale per 256-element block); 4-bit: torchao AdamW4bit; fp8: torchao AdamWFp8.
_OPTIMIZERS = {
    "adamw_torch_fused": Opt("adamw", "fused", origin="torch.optim.AdamW(fused=True)"),
    "adamw_torch": Opt("adamw", origin="torch.optim.AdamW"),
    "adamw_hf": Opt("adamw", origin="transformers AdamW"),
    "adamw_apex_fused": Opt("adamw", "fused", origin="apex FusedAdam"),
    "optimi_adamw": Opt("adamw", origin="torch-optimi AdamW"),
    "adopt_adamw": Opt("adamw", origin="ADOPT AdamW"),
    "adamw_torch_8bit": Opt("adamw", bits=8, origin="torchao AdamW8bit"),
    "ao_adamw_8bit": Opt("adamw", bits=8, origin="torchao AdamW8bit"),
    "adamw_torch_4bit": Opt("adamw", bits=4, origin="torchao AdamW4bit"),
    "ao_adamw_4bit": Opt("adamw", bits=4, origin="torchao AdamW4bit"),
    "ao_adamw_fp8": Opt("adamw", bits=8, origin="torchao AdamWFp8"),
    "adamw_bnb_8bit": Opt("adamw", bits=8, origin="bitsandbytes AdamW8bit"),
    "adamw_8bit": Opt("adamw", bits=8, origin="bitsandbytes AdamW8bit"),
    "paged_adamw_8bit": Opt("adamw", bits=8, paged=True, origin="bitsandbytes PagedAdamW8bit"),
    "paged_adamw_32bit": Opt("adamw", paged=True, origin="bitsandbytes PagedAdamW32bit"),
    "adafactor": Opt("adafactor", origin="transformers Adafactor"),
    "sgd": Opt("sgd", origin="torch.optim.SGD"),
    "muon": Opt("muon", origin="axolotl Muon"),
}
DEFAULT_OPTIMIZER = "adamw_torch_fused"

# axolotl's shipped deepspeed_configs/*.json (repository root at the commit above): ZeRO stage,
# optimizer offload, parameter offload. Used only when the named file cannot be found.
_SHIPPED_DEEPSPEED = {
    "zero1.json": (1, "none", "none"), "zero1_torch_compile.json": (1, "none", "none"),
    "zero2.json": (2, "cpu", "none"), "zero2_torch_compile.json": (2, "cpu", "none"),
    "zero3.json": (3, "none", "none"), "zero3_bf16.json": (3, "none", "none"),
    "zero3_bf16_cpuoffload_all.json": (3, "cpu", "cpu"),
    "zero3_bf16_cpuoffload_params.json": (3, "none", "cpu"),
}

_CCE_PLUGIN = "cut_cross_entropy"
_LIGER_PLUGIN = "liger"


def _truthy(value: Any) -> bool:
    """On: a true boolean, or axolotl's "auto" (bf16: auto)."""
    return parse_bool(value) is True or str(value).strip().lower() == "auto"


def _state_settings(spec: "Opt") -> dict:
    """Scenario settings for an optimizer's states: bitsandbytes and torchao 8-bit / 4-bit
    optimizers keep block-quantized moments (`int8` / `int4`: codes plus one fp32 scale per
    block, updated by fused kernels; memory/optimizer_quant.py), torchao AdamWFp8 plain fp8
    moments; bitsandbytes Paged* optimizers keep them in CUDA unified memory
    (`optimizer_paged`)."""
    out = {}
    if spec.bits == 8:
        out["optimizer_state_dtype"] = "fp8" if "Fp8" in spec.origin else "int8"
    elif spec.bits == 4:
        out["optimizer_state_dtype"] = "int4"
    if spec.paged:
        out["optimizer_paged"] = True
    return out


def load(path: str, text: str) -> Partial:
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    doc = load_yaml_mapping(path, text, "an axolotl config", partial.diagnostics)
    if doc is None:
        return partial
    data = doc.data

    def prov(*keys: Any) -> Provenance:
        return doc.prov(tuple(keys), ".".join(str(k) for k in keys))

    def default(key: str, value: Any) -> Provenance:
        return Provenance(path, None, None, f"{key} (axolotl default {value})")

    for key, value in data.items():
        if not isinstance(value, (dict, list)):
            partial.set_extra(f"axolotl.{key}", value, prov(key))

    for key, scenario in _INTS:
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            partial.diagnostics.append(make(INVALID_VALUE, Severity.ERROR,
                                            f"{key} must be a positive whole number, got "
                                            f"{value!r}", prov(key), key=key))
            continue
        if key == "sequence_parallel_degree" and data.get("context_parallel_size"):
            continue  # the deprecated alias only applies without context_parallel_size
        partial.set(scenario, value, prov(key))
    ep, shard = partial.settings.get("ep"), partial.settings.get("dp_shard")
    if ep is not None and shard is not None and ep.value > 1:
        # axolotl's mesh gives EP its own axis: world = ep·tp·cp·dp_shard·dp_replicate
        # (utils/distributed.py _get_parallel_config_kwargs); memlint carves ep out of the
        # data-parallel ranks (memory/topology.py), whose count is then dp_shard·ep. Experts
        # are FSDP-sharded over the non-EP axis, dp_shard_size (monkeypatch/accelerate/fsdp2.py).
        partial.set("dp_shard", shard.value * ep.value, shard.prov)
    for scenario, value, key in _DEFAULTS:
        if scenario not in partial.settings and data.get(key) is None:
            partial.set(scenario, value, default(key, value))

    model_key = "base_model_config" if data.get("base_model_config") else "base_model"
    model = data.get(model_key)
    if isinstance(model, str) and model.strip():
        # axolotl loads the config from base_model_config, else base_model (utils/config):
        # a Hub id resolves through the HF cache and memlint's catalog (scenario.load_hub_model)
        partial.set("model", model.strip(), prov(model_key))

    deepspeed = data.get("deepspeed")
    _precision(data, partial, prov, default, bool(deepspeed))
    _optimizer(data, partial, prov, default)
    _adapter(data, partial, prov)
    framework, framework_prov = _fsdp(data, partial, prov)
    _recompute(data, partial, prov)
    _loss_and_kernels(data, partial, prov)
    _attention(data, partial, prov)

    if deepspeed:
        framework, framework_prov = "deepspeed", prov("deepspeed")
        if isinstance(deepspeed, dict):
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.INFO, "an inline deepspeed mapping is not read; its ZeRO "
                "settings are not checked", prov("deepspeed"), key="deepspeed"))
        else:
            _deepspeed(str(deepspeed), path, partial, prov("deepspeed"))
    partial.set("framework", framework, framework_prov)
    return partial


def _precision(data: dict, partial: Partial, prov, default, deepspeed: bool) -> None:
    """The dtype axolotl loads the weights in (`resolve_dtype`), and what trains them."""
    bf16, fp16 = data.get("bf16", "auto"), data.get("fp16")
    where = prov("bf16") if "bf16" in data else default("bf16", "auto")
    if _truthy(bf16) and fp16 is True:
        partial.set_extra("flags.bf16", True, where)
        partial.set_extra("flags.fp16", True, prov("fp16"))
    if fp16 is True and (bf16 == "auto" or not _truthy(bf16)):
        partial.set("precision", "fp16", prov("fp16"))
    elif _truthy(bf16):
        # bf16 weights trained as they are, unless DeepSpeed's engine keeps its fp32 master
        partial.set("precision", "bf16" if deepspeed else "pure-bf16", where)
    elif data.get("load_in_8bit") is not True:
        partial.set("precision", "fp32", where)


def _optimizer(data: dict, partial: Partial, prov, default) -> None:
    name = data.get("optimizer")
    where = prov("optimizer") if name is not None else default("optimizer", DEFAULT_OPTIMIZER)
    name = str(name if name is not None else DEFAULT_OPTIMIZER).strip().lower()
    spec = _OPTIMIZERS.get(name)
    if spec is None:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            f"optimizer {name!r}: its state memory is not modelled; AdamW's (two moments per "
            "trainable parameter) is assumed", where, key="optimizer"))
        return
    partial.set("optimizer", spec.optimizer, where)
    if spec.impl:
        partial.set("optimizer_impl", spec.impl, where)
    for key, value in _state_settings(spec).items():
        partial.set(key, value, where)
    if spec.bits or spec.paged:
        partial.set_extra("optimizer.bits", spec.bits or 32, where)
    if spec.paged:
        partial.set_extra("optimizer.paged", True, where)
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            f"optimizer {name!r} ({spec.origin}) keeps its states in paged memory that "
            "the CUDA driver moves to the host under pressure; they are counted as host memory, "
            "not in the GPU verdict",
            where, key="optimizer"))


def _adapter(data: dict, partial: Partial, prov) -> None:
    adapter = str(data.get("adapter") or "").strip().lower()
    if adapter in ("lora", "qlora"):
        rank = data.get("lora_r")
        if isinstance(rank, int) and not isinstance(rank, bool) and rank > 0:
            partial.set("lora_rank", rank, prov("lora_r"))
        else:
            partial.diagnostics.append(make(INVALID_VALUE, Severity.ERROR,
                                            f"adapter {adapter} needs a positive lora_r, got "
                                            f"{rank!r}", prov("lora_r" if "lora_r" in data
                                                              else "adapter"), key="lora_r"))
        modules = data.get("lora_target_modules")
        if data.get("lora_target_linear") is True:
            partial.set("lora_targets", "all-linear", prov("lora_target_linear"))
        elif modules:
            partial.set("lora_targets", target_kind(modules), prov("lora_target_modules"))
        if data.get("lora_dropout") is not None:
            partial.set("lora_dropout", data["lora_dropout"], prov("lora_dropout"))
        if data.get("lora_modules_to_save"):
            partial.set("lora_modules_to_save", data["lora_modules_to_save"],
                        prov("lora_modules_to_save"))
    if data.get("load_in_4bit") is True:
        partial.set("base_quant", "nf4", prov("load_in_4bit"))
    elif data.get("load_in_8bit") is True:
        partial.set("base_quant", "int8", prov("load_in_8bit"))


def _fsdp(data: dict, partial: Partial, prov) -> tuple:
    fsdp_config = data.get("fsdp_config") if isinstance(data.get("fsdp_config"), dict) else {}
    fsdp_list = data.get("fsdp")
    uses_fsdp = bool(fsdp_list) or bool(fsdp_config) or data.get("fsdp_version") is not None
    if not uses_fsdp:
        return "hf", prov()
    framework_prov = prov("fsdp" if "fsdp" in data else "fsdp_config")

    def fget(name: str) -> Any:
        return fsdp_config.get(name, fsdp_config.get(f"fsdp_{name}"))

    def fprov(name: str) -> Provenance:
        key = name if name in fsdp_config else f"fsdp_{name}"
        return prov("fsdp_config", key)

    mode, reshard, where = "full", True, framework_prov
    words = [str(w).lower() for w in fsdp_list] if isinstance(fsdp_list, list) else []
    strategy = fget("sharding_strategy")
    if strategy is not None:
        words.append(str(strategy).lower())
        where = fprov("sharding_strategy")
    for word in words:
        if word in _STRATEGIES:
            mode, reshard = _STRATEGIES[word]
    partial.set("fsdp", mode, where)
    value = fget("reshard_after_forward")
    if isinstance(value, bool):
        partial.set("reshard_after_forward", value, fprov("reshard_after_forward"))
    else:
        partial.set("reshard_after_forward", reshard, where)
    if fget("offload_params") is True:
        partial.set("offload_params", "cpu", fprov("offload_params"))
        partial.set("offload_optimizer", "cpu", fprov("offload_params"))
    if fget("activation_checkpointing") is True:
        partial.set("recompute", "full", fprov("activation_checkpointing"))
        partial.set_extra("recompute.scope", "inside-unit", fprov("activation_checkpointing"))
    return "fsdp2", framework_prov


def _recompute(data: dict, partial: Partial, prov) -> None:
    checkpointing = data.get("gradient_checkpointing")
    offload = isinstance(checkpointing, str) and checkpointing.strip().lower() in (
        "offload", "offload_disk")
    if (checkpointing is True or offload) and "recompute" not in partial.settings:
        partial.set("recompute", "full", prov("gradient_checkpointing"))
        # transformers' checkpoint wraps the layer call, FSDP pre-forward hooks included
        partial.set_extra("recompute.scope", "outside-unit", prov("gradient_checkpointing"))
    if offload:
        # axolotl's offloaded checkpointing keeps each layer's input on the host
        partial.set("offload_activations", True, prov("gradient_checkpointing"))
    if "recompute" not in partial.settings and not checkpointing:
        # gradient_checkpointing defaults to false (schemas/config.py): axolotl's own "none"
        where = (prov("gradient_checkpointing") if "gradient_checkpointing" in data
                 else Provenance(prov().file, None, None,
                                 "gradient_checkpointing (axolotl default false)"))
        partial.set("recompute", "none", where)
    offloading = data.get("activation_offloading")
    if offloading is True or (isinstance(offloading, str) and offloading.strip().lower() in (
            "legacy", "disk", "hidden_states", "true")):
        partial.set("offload_activations", True, prov("activation_offloading"))


def _attention(data: dict, partial: Partial, prov) -> None:
    """The attention kernel: attn_implementation (transformers' names), else the switches
    flash_attention / sdp_attention / eager_attention (schemas/config.py); axolotl passes it to
    from_pretrained as attn_implementation (loaders/model.py)."""
    from memlint.adapters.trainer_args import _ATTENTION  # start-up: loaded with the reader

    kind = _ATTENTION.get(str(data.get("attn_implementation") or "").strip().lower())
    if kind is not None:
        partial.set("attention", kind, prov("attn_implementation"))
        return
    for key, kind in (("flash_attention", "flash"), ("sdp_attention", "sdpa"),
                      ("eager_attention", "eager")):
        if data.get(key) is True:
            partial.set("attention", kind, prov(key))
            return


def _loss_and_kernels(data: dict, partial: Partial, prov) -> None:
    plugins = data.get("plugins") if isinstance(data.get("plugins"), list) else []
    plugins = [str(p).lower() for p in plugins]
    cce = (any(_CCE_PLUGIN in p for p in plugins)
           and data.get("cut_cross_entropy", True) is not False)
    liger = (any(_LIGER_PLUGIN in p for p in plugins)
             and data.get("liger_fused_linear_cross_entropy") is True)
    if cce or liger:
        key = "cut_cross_entropy" if cce and "cut_cross_entropy" in data else (
            "liger_fused_linear_cross_entropy" if liger else "plugins")
        # the fused loss computes the cross entropy block by block from the hidden states
        partial.set("logits.enabled", False, prov(key))
        partial.set_extra("loss.fused", "cut-cross-entropy" if cce else "liger-flce", prov(key))
    if data.get("tiled_mlp") is True:
        partial.set_extra("axolotl.tiled_mlp", True, prov("tiled_mlp"))
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            "tiled_mlp (ALST tiled MLP) is not modelled: the estimate keeps the untiled MLP "
            "activations, an over-estimate at long sequences", prov("tiled_mlp"),
            key="tiled_mlp"))


def _deepspeed(target: str, path: str, partial: Partial, where: Provenance) -> None:
    # axolotl opens it relative to its working directory (utils/config/__init__.py:
    # os.path.exists(cfg.deepspeed)): the folder the user runs `axolotl train` from
    found = find_reference(target, path, repo_root(path))
    if found is not None:
        partial.references.append((found, where))
        return
    shipped = _SHIPPED_DEEPSPEED.get(os.path.basename(target))
    if shipped is None or os.path.basename(os.path.dirname(target)) != "deepspeed_configs":
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.WARNING,
            f"deepspeed config {target!r} not found (axolotl opens it relative to its working "
            "directory; looked there, at the repository root and in every folder from this "
            "file's up to the root); its ZeRO settings are not checked", where, key="deepspeed"))
        return
    stage, optimizer, params = shipped
    partial.set("zero", stage, where)
    partial.set("offload_optimizer", optimizer, where)
    partial.set("offload_params", params, where)
    partial.diagnostics.append(make(
        UNRESOLVED, Severity.INFO,
        f"deepspeed config {target!r} not found here; read as axolotl's shipped "
        f"{os.path.basename(target)} ({COMMIT}: ZeRO-{stage}, optimizer offload {optimizer}, "
        f"parameter offload {params}); `axolotl fetch deepspeed_configs` puts it in the working "
        "directory", where, key="deepspeed"))
