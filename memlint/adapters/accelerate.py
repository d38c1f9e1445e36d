"""HF accelerate config YAML (`accelerate launch --config_file ...`): FSDP1/FSDP2, DeepSpeed, DDP.

What accelerate itself does with such a file, read at huggingface/accelerate@16cb6eb:
- `commands/config/config_args.py`: `load_config_from_file` -> `ClusterConfig.from_yaml_file`
  rejects every top-level key that is not a field of `BaseConfig`/`ClusterConfig` ("had unknown
  keys"); `fp16` and `dynamo_backend` are converted first (`process_config`). `distributed_type`
  is required.
- `commands/launch.py` (`_validate_launch_command`) copies `fsdp_config.x` to `--fsdp_x` and
  `utils/launch.py` exports them as `FSDP_*` variables; `utils/dataclasses.py`
  (`FullyShardedDataParallelPlugin.__post_init__`) reads them back. With `fsdp_version: 2`,
  `reshard_after_forward` goes through `str_to_bool` (a strategy name raises), `backward_prefetch`
  is dropped with a warning, `forward_prefetch` is only read for version 1, and
  `LOCAL_STATE_DICT` raises. `utils/launch.py` raises when cpu-RAM-efficient loading is on and
  `fsdp_sync_module_states` is false.
- `DeepSpeedPlugin._deepspeed_config_checks` raises when a `deepspeed_config_file` is combined
  with inline zero_stage / offload / gradient_accumulation_steps / gradient_clipping / ... keys.

The DeepSpeed JSON a config points to is recorded in `partial.references` (resolved relative to
the YAML, never outside its repository) for the DeepSpeed adapter; this adapter does not read it.
"""
from __future__ import annotations

import os

from memlint.adapters.detection import accelerate as detect  # noqa: F401 - the adapter's detect()
from memlint.diagnostics import (INVALID_VALUE, PARSE_ERROR, SCHEMA_ERROR, UNKNOWN_KEY, UNRESOLVED,
                                 Severity, make)
from memlint.ir import Partial, Provenance
from memlint.keys import parse_bool, suggest
from memlint.loaders import inside, load_yaml, repo_root, suppressions

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

FORMAT = "accelerate"

BASE_KEYS = ("compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug")
CLUSTER_KEYS = (
    "num_processes", "machine_rank", "num_machines", "gpu_ids", "main_process_ip",
    "main_process_port", "rdzv_backend", "same_network", "main_training_function",
    "enable_cpu_affinity", "fp8_config", "deepspeed_config", "fsdp_config",
    "parallelism_config", "megatron_lm_config", "mpirun_config", "downcast_bf16", "tpu_name",
    "tpu_zone", "tpu_use_cluster", "tpu_use_sudo", "command_file", "commands", "tpu_vm",
    "tpu_env", "dynamo_config",
    # accepted by process_config and converted before the field check
    "fp16", "dynamo_backend",
    # older releases had these ClusterConfig fields; newer ones dropped them
    "tp_config", "ipex_config",
)
SAGEMAKER_KEYS = (
    "ec2_instance_type", "iam_role_name", "image_uri", "profile", "region", "num_machines",
    "gpu_ids", "base_job_name", "pytorch_version", "transformers_version", "py_version",
    "sagemaker_inputs_file", "sagemaker_metrics_file", "additional_args", "dynamo_config",
    "enable_cpu_affinity", "fp16", "dynamo_backend",
)
# SageMakerDistributedType (utils/dataclasses.py), used when compute_environment is SageMaker
SAGEMAKER_TYPES = ("NO", "DATA_PARALLEL", "MODEL_PARALLEL")
DISTRIBUTED_TYPES = ("NO", "MULTI_CPU", "MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA",
                     "MULTI_MUSA", "MULTI_XPU", "DEEPSPEED", "FSDP", "XLA", "MEGATRON_LM",
                     "MULTI_HPU", "MULTI_NEURON", "TPU")
FSDP_KEYS = ("fsdp_version", "fsdp_offload_params", "fsdp_min_num_params",
             "fsdp_sharding_strategy", "fsdp_reshard_after_forward", "fsdp_auto_wrap_policy",
             "fsdp_transformer_layer_cls_to_wrap", "fsdp_backward_prefetch",
             "fsdp_backward_prefetch_policy", "fsdp_state_dict_type", "fsdp_forward_prefetch",
             "fsdp_use_orig_params", "fsdp_cpu_ram_efficient_loading", "fsdp_sync_module_states",
             "fsdp_activation_checkpointing", "fsdp_ignored_modules")
DEEPSPEED_KEYS = ("deepspeed_config_file", "zero_stage", "offload_optimizer_device",
                  "offload_param_device", "offload_optimizer_nvme_path", "offload_param_nvme_path",
                  "gradient_accumulation_steps", "gradient_clipping", "zero3_init_flag",
                  "zero3_save_16bit_model", "deepspeed_multinode_launcher", "deepspeed_hostfile",
                  "deepspeed_exclusion_filter", "deepspeed_inclusion_filter",
                  "deepspeed_moe_layer_cls_names", "deepspeed_plugins")
# Inline keys accelerate refuses next to a deepspeed_config_file (_deepspeed_config_checks).
DS_FILE_EXCLUSIVE = ("gradient_accumulation_steps", "gradient_clipping", "zero_stage",
                     "offload_optimizer_device", "offload_param_device",
                     "offload_param_nvme_path", "offload_optimizer_nvme_path",
                     "zero3_save_16bit_model")
PARALLELISM_KEYS = {"parallelism_config_dp_replicate_size": "dp_replicate",
                    "parallelism_config_dp_shard_size": "dp_shard",
                    "parallelism_config_tp_size": "tp", "parallelism_config_cp_size": "cp"}
PARALLELISM_EXTRA = ("parallelism_config_cp_backend", "parallelism_config_cp_comm_strategy",
                     "parallelism_config_sp_size", "parallelism_config_sp_backend",
                     "parallelism_config_sp_seq_length",
                     "parallelism_config_sp_seq_length_is_variable",
                     "parallelism_config_sp_attn_implementation")
# accelerate's ShardingStrategy names; numbers 1-5 are the torch enum values older files used.
STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2")
_STRATEGY_MAP = {"FULL_SHARD": ("full", True), "SHARD_GRAD_OP": ("shard_grad_op", False),
                 "NO_SHARD": ("none", True), "HYBRID_SHARD": ("hybrid", True),
                 "HYBRID_SHARD_ZERO2": ("hybrid", False)}
_WRAP_POLICIES = ("TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP")

SRC_CONFIG = "accelerate commands/config/config_args.py (BaseConfig.from_yaml_file)"
SRC_PLUGIN = "accelerate utils/dataclasses.py (FullyShardedDataParallelPlugin.__post_init__)"


def _truth(value: Any) -> Optional[bool]:
    """accelerate's str_to_bool on the exported string; None when it would raise."""
    return parse_bool(value)


def _strategy(value: Any) -> Optional[str]:
    if isinstance(value, bool):
        return None
    text = str(value).strip().upper()
    if text.isdigit() and 1 <= int(text) <= len(STRATEGIES):
        return STRATEGIES[int(text) - 1]
    return text if text in STRATEGIES else None


class _FsdpBlock:
    """An fsdp_config block: its keys by their full `fsdp_` name, the short ones accelerate also
    takes read alike."""

    def __init__(self, fsdp: dict):
        self.fsdp = fsdp

    def get(self, name: str):
        return self.fsdp.get(name, self.fsdp.get(name[5:]))

    def where(self, name: str) -> tuple:
        return ("fsdp_config", name if name in self.fsdp else name[5:])


class _Reader:
    def __init__(self, path: str, text: str):
        self.path = path
        self.partial = Partial(source=path, fmt=FORMAT)
        self.partial.suppressions = suppressions(text)
        self.doc = load_yaml(path, text)
        self.partial.diagnostics.extend(self.doc.diagnostics)

    def prov(self, *path: Any) -> Provenance:
        return self.doc.prov(tuple(path), ".".join(str(p) for p in path))

    def diag(self, kind, severity, message: str, *path: Any) -> None:
        self.partial.diagnostics.append(make(kind, severity, message, self.prov(*path),
                                             key=".".join(str(p) for p in path)))

    def extra(self, key: str, value: Any, *path: Any) -> None:
        self.partial.set_extra(f"accelerate.{key}", value, self.prov(*path))

    def set(self, key: str, value: Any, *path: Any) -> None:
        self.partial.set(key, value, self.prov(*path))

    # -----------------------------------------------------------------------------------------
    def read(self) -> Partial:
        data = self.doc.data
        if data is None:
            return self.partial
        if not isinstance(data, dict):
            self.partial.diagnostics.append(make(SCHEMA_ERROR, Severity.ERROR,
                                                 "an accelerate config must be a mapping",
                                                 Provenance(self.path, 1, 1, None)))
            return self.partial
        for key, value in data.items():
            self.extra(str(key), value, key)
        sagemaker = str(data.get("compute_environment", "LOCAL_MACHINE")) == "AMAZON_SAGEMAKER"
        allowed = set(BASE_KEYS) | set(SAGEMAKER_KEYS if sagemaker else CLUSTER_KEYS)
        for key in data:
            if key not in allowed:
                hint = suggest(str(key), allowed)
                tail = f"; did you mean {hint!r}?" if hint else ""
                self.diag(UNKNOWN_KEY, Severity.ERROR,
                          f"unknown key {key!r}: accelerate refuses the whole file (\"had unknown "
                          f"keys\", {SRC_CONFIG}){tail}", key)
        if "distributed_type" not in data:
            self.partial.diagnostics.append(make(
                SCHEMA_ERROR, Severity.ERROR,
                f"distributed_type is required ({SRC_CONFIG}: process_config)",
                Provenance(self.path, 1, 1, "distributed_type")))
            dtype = "NO"
        elif data["distributed_type"] is False:
            # YAML 1.1 reads a bare `NO` as false; accelerate keeps it (BaseConfig.__post_init__
            # converts only strings) and `accelerate launch` then starts no distributed backend
            dtype = "NO"
        else:
            dtype = str(data["distributed_type"]).strip().upper()
            sagemaker = str(data.get("compute_environment", "")).strip().upper() == \
                "AMAZON_SAGEMAKER"
            allowed = SAGEMAKER_TYPES if sagemaker else DISTRIBUTED_TYPES
            if dtype not in allowed:
                self.diag(INVALID_VALUE, Severity.ERROR,
                          f"distributed_type {data['distributed_type']!r} is not one of "
                          f"{', '.join(allowed[:11])}", "distributed_type")
        self.dtype = dtype
        fsdp = data.get("fsdp_config") if isinstance(data.get("fsdp_config"), dict) else {}
        self.version = 1
        if fsdp and "fsdp_version" in fsdp:
            try:
                self.version = int(str(fsdp["fsdp_version"]).strip())
            except ValueError:
                self.version = 0
            if self.version not in (1, 2):
                self.diag(INVALID_VALUE, Severity.ERROR,
                          f"fsdp_version must be 1 or 2, got {fsdp['fsdp_version']!r}",
                          "fsdp_config", "fsdp_version")
                self.version = 1
        self._framework(data)
        self._processes(data)
        self._precision(data)
        if dtype == "FSDP":
            self._fsdp(fsdp, data)
        elif fsdp:
            self.diag(UNRESOLVED, Severity.INFO,
                      f"fsdp_config is ignored with distributed_type {dtype}", "fsdp_config")
        ds = data.get("deepspeed_config")
        if isinstance(ds, dict) and ds:
            if dtype == "DEEPSPEED":
                self._deepspeed(ds, data)
            else:
                self.diag(UNRESOLVED, Severity.INFO,
                          f"deepspeed_config is ignored with distributed_type {dtype}",
                          "deepspeed_config")
        par = data.get("parallelism_config")
        if isinstance(par, dict) and par:
            self._parallelism(par)
        for section in ("fsdp_config", "deepspeed_config", "parallelism_config", "fp8_config",
                        "dynamo_config"):
            if section in data and data[section] is not None and not isinstance(
                    data[section], dict):
                self.diag(SCHEMA_ERROR, Severity.ERROR,
                          f"{section} must be a mapping, got {type(data[section]).__name__}",
                          section)
        return self.partial

    def _framework(self, data: dict) -> None:
        framework = {"FSDP": "fsdp2", "DEEPSPEED": "deepspeed"}.get(self.dtype, "hf")
        where = ("distributed_type",) if "distributed_type" in data else ()
        self.partial.set("framework", framework, self.prov(*where))
        # the launcher states the sharding (none for MULTI_GPU's DDP): conventions read it
        self.partial.set_extra("accelerate.distributed_type", self.dtype, self.prov(*where))
        if self.dtype == "FSDP":
            self.partial.set_extra("accelerate.fsdp_version", self.version,
                                   self.prov("fsdp_config", "fsdp_version"))

    def _processes(self, data: dict) -> None:
        count = data.get("num_processes")
        machines = data.get("num_machines", 1)
        if count is None:
            if self.dtype == "NO":
                self.set("world_size", 1, "distributed_type")
            return
        if isinstance(count, bool) or not isinstance(count, int):
            self.diag(INVALID_VALUE, Severity.ERROR,
                      f"num_processes must be a whole number, got {count!r}", "num_processes")
            return
        if count == -1:
            self.diag(UNRESOLVED, Severity.INFO,
                      "num_processes is -1: `accelerate launch` requires --num_processes on the "
                      "command line; world_size left unset", "num_processes")
            return
        if count < 1:
            self.diag(INVALID_VALUE, Severity.ERROR,
                      f"num_processes must be positive, got {count!r}", "num_processes")
            return
        self.set("world_size", count, "num_processes")
        if isinstance(machines, int) and not isinstance(machines, bool) and machines > 1:
            if count % machines:
                self.diag(INVALID_VALUE, Severity.WARNING,
                          f"num_processes {count} (all machines together) is not divisible by "
                          f"num_machines {machines}", "num_machines")
            else:
                # the launcher starts num_processes / num_machines ranks on each node
                self.set("gpus_per_node", count // machines, "num_machines")

    def _precision(self, data: dict) -> None:
        raw = data.get("mixed_precision")
        legacy_fp16 = data.get("fp16")
        if raw is None:
            if legacy_fp16 is True:
                raw, where = "fp16", ("fp16",)
            else:
                return
        else:
            where = ("mixed_precision",)
        text = str(raw).strip().lower()
        if text not in ("no", "fp16", "bf16", "fp8"):
            self.diag(INVALID_VALUE, Severity.ERROR,
                      f"mixed_precision must be no, fp16, bf16 or fp8, got {raw!r}", *where)
            return
        if legacy_fp16 is True and text == "bf16":
            # the config asks for both; process_config drops `fp16` and keeps bf16
            self.partial.set_extra("flags.fp16", True, self.prov("fp16"))
            self.partial.set_extra("flags.bf16", True, self.prov("mixed_precision"))
        if text == "no":
            value = "fp32"
        elif text == "fp8":
            value = "fp8"
        elif self.dtype in ("FSDP", "DEEPSPEED"):
            value = text  # sharded fp32 (or master) copy, low-precision compute copies
        else:
            value = "amp-bf16" if text == "bf16" else "fp16"  # DDP: autocast over fp32 params
        self.set("precision", value, *where)

    # -----------------------------------------------------------------------------------------
    def _fsdp(self, fsdp: dict, data: dict) -> None:
        v2 = self.version == 2
        for key, value in fsdp.items():
            self.extra(f"fsdp_config.{key}", value, "fsdp_config", key)
            name = key if str(key).startswith("fsdp_") else f"fsdp_{key}"
            if name not in FSDP_KEYS:
                hint = suggest(name, FSDP_KEYS)
                tail = f"; did you mean {hint!r}?" if hint else ""
                self.diag(UNKNOWN_KEY, Severity.WARNING,
                          f"{key!r} is not an accelerate FSDP option; `accelerate launch` copies "
                          f"it to an unused argument and ignores it{tail}", "fsdp_config", key)
        block = _FsdpBlock(fsdp)
        self._fsdp_sharding(block, v2, data)
        self._fsdp_offload_and_recompute(block)
        self._fsdp_policy(block)
        if v2:
            self._fsdp_v2_ignored(block)
        self._fsdp_loading(block)

    def _fsdp_sharding(self, block: "_FsdpBlock", v2: bool, data: dict) -> None:
        """fsdp and reshard_after_forward from the sharding strategy (FSDP1) or
        fsdp_reshard_after_forward (FSDP2)."""
        get, where = block.get, block.where
        mode, reshard = "full", True
        strategy_raw = get("fsdp_sharding_strategy")
        reshard_raw = get("fsdp_reshard_after_forward")
        if strategy_raw is not None:
            strategy = _strategy(strategy_raw)
            if strategy is None:
                self.diag(INVALID_VALUE, Severity.ERROR,
                          f"fsdp_sharding_strategy {strategy_raw!r} is not one of "
                          f"{', '.join(STRATEGIES)} (or 1-5)", *where("fsdp_sharding_strategy"))
            else:
                mode, reshard = _STRATEGY_MAP[strategy]
                self.set("fsdp", mode, *where("fsdp_sharding_strategy"))
                if v2:
                    self.diag(UNRESOLVED, Severity.INFO,
                              "fsdp_sharding_strategy is not read with fsdp_version 2 "
                              "(deprecated in favour of fsdp_reshard_after_forward)",
                              *where("fsdp_sharding_strategy"))
                else:
                    self.set("reshard_after_forward", reshard, *where("fsdp_sharding_strategy"))
        if reshard_raw is not None:
            if v2:
                value = _truth(reshard_raw)
                if value is None:
                    self.diag(INVALID_VALUE, Severity.ERROR,
                              f"fsdp_reshard_after_forward must be a bool with fsdp_version 2, got "
                              f"{reshard_raw!r}: accelerate's str_to_bool raises \"invalid truth "
                              f"value\" ({SRC_PLUGIN})", *where("fsdp_reshard_after_forward"))
                else:
                    self.set("reshard_after_forward", value, *where("fsdp_reshard_after_forward"))
                    if strategy_raw is None:
                        self.set("fsdp", "full", *where("fsdp_reshard_after_forward"))
            else:
                strategy = _strategy(reshard_raw)
                if isinstance(reshard_raw, bool) or strategy is None:
                    self.diag(INVALID_VALUE, Severity.WARNING,
                              f"fsdp_reshard_after_forward {reshard_raw!r} is not a sharding "
                              "strategy; FSDP1 expects FULL_SHARD, SHARD_GRAD_OP, ... here "
                              f"({SRC_PLUGIN})", *where("fsdp_reshard_after_forward"))
                elif strategy_raw is None:
                    # launch exports FSDP_SHARDING_STRATEGY (default FULL_SHARD), which wins
                    self.set("fsdp", "full", *where("fsdp_reshard_after_forward"))
                    self.set("reshard_after_forward", True, *where("fsdp_reshard_after_forward"))
                    self.diag(UNRESOLVED, Severity.INFO,
                              "with fsdp_version 1, `accelerate launch` always exports "
                              "FSDP_SHARDING_STRATEGY (default FULL_SHARD), so "
                              "fsdp_reshard_after_forward is not read; use "
                              "fsdp_sharding_strategy", *where("fsdp_reshard_after_forward"))
        if strategy_raw is None and reshard_raw is None:
            anchor = ("fsdp_config",) if "fsdp_config" in data else ("distributed_type",)
            self.set("fsdp", "full", *anchor)
            self.set("reshard_after_forward", True, *anchor)

    def _fsdp_offload_and_recompute(self, block: "_FsdpBlock") -> None:
        get, where = block.get, block.where
        offload = get("fsdp_offload_params")
        if offload is not None:
            value = _truth(offload)
            if value is None:
                self.diag(INVALID_VALUE, Severity.ERROR,
                          f"fsdp_offload_params must be true or false, got {offload!r}",
                          *where("fsdp_offload_params"))
            elif value:
                # CPU offload keeps sharded params and grads on the host; the step runs there
                self.set("offload_params", "cpu", *where("fsdp_offload_params"))
                self.set("offload_optimizer", "cpu", *where("fsdp_offload_params"))
        ac = get("fsdp_activation_checkpointing")
        if ac is not None and _truth(ac):
            self.set("recompute", "full", *where("fsdp_activation_checkpointing"))
            # accelerate applies FSDP's checkpoint wrapper inside each wrapped unit
            self.partial.set_extra("recompute.scope", "inside-unit",
                                   self.prov(*where("fsdp_activation_checkpointing")))

    def _fsdp_policy(self, block: "_FsdpBlock") -> None:
        get, where = block.get, block.where
        policy = get("fsdp_auto_wrap_policy")
        if policy is not None and str(policy).upper() not in _WRAP_POLICIES:
            self.diag(INVALID_VALUE, Severity.ERROR,
                      f"fsdp_auto_wrap_policy {policy!r} is not one of "
                      f"{', '.join(_WRAP_POLICIES)}: accelerate raises \"Invalid auto wrap "
                      f"policy\" ({SRC_PLUGIN})", *where("fsdp_auto_wrap_policy"))

    def _fsdp_v2_ignored(self, block: "_FsdpBlock") -> None:
        """What accelerate ignores or refuses under fsdp_version 2."""
        get, where = block.get, block.where
        forward = get("fsdp_forward_prefetch")
        if forward is not None:
            on = _truth(forward)
            self.diag(UNRESOLVED, Severity.WARNING if on else Severity.INFO,
                      "fsdp_forward_prefetch has no effect with fsdp_version 2: the plugin "
                      "reads it only for version 1, and raises \"forward_prefetch is not yet "
                      f"implemented in FSDP2\" when it is passed in code ({SRC_PLUGIN})",
                      *where("fsdp_forward_prefetch"))
        if get("fsdp_backward_prefetch") not in (None, "NO_PREFETCH"):
            self.diag(UNRESOLVED, Severity.INFO,
                      "fsdp_backward_prefetch is not supported with fsdp_version 2; "
                      f"accelerate sets it to None with a warning ({SRC_PLUGIN})",
                      *where("fsdp_backward_prefetch"))
        for name in ("fsdp_use_orig_params", "fsdp_sync_module_states"):
            if get(name) is not None:
                self.diag(UNRESOLVED, Severity.INFO,
                          f"{name} is obsolete with fsdp_version 2 and ignored "
                          f"({SRC_PLUGIN})", *where(name))
        if str(get("fsdp_state_dict_type") or "").upper() == "LOCAL_STATE_DICT":
            self.diag(INVALID_VALUE, Severity.ERROR,
                      "fsdp_state_dict_type LOCAL_STATE_DICT is not supported with "
                      f"fsdp_version 2; accelerate raises ({SRC_PLUGIN})",
                      *where("fsdp_state_dict_type"))

    def _fsdp_loading(self, block: "_FsdpBlock") -> None:
        get, where = block.get, block.where
        efficient, sync = get("fsdp_cpu_ram_efficient_loading"), get("fsdp_sync_module_states")
        if efficient is True and sync is False:
            self.diag(INVALID_VALUE, Severity.ERROR,
                      "fsdp_cpu_ram_efficient_loading needs fsdp_sync_module_states: true; "
                      "`accelerate launch` raises (utils/launch.py, prepare_multi_gpu_env)",
                      *where("fsdp_sync_module_states"))
        elif efficient is True:
            # only rank 0 loads the weights on its CPU; the others start on the meta device and
            # receive them through sync_module_states (accelerate utils/fsdp_utils.py)
            self.set("model_init", "rank0-cpu", *where("fsdp_cpu_ram_efficient_loading"))

    def _deepspeed(self, ds: dict, data: dict) -> None:
        for key, value in ds.items():
            self.extra(f"deepspeed_config.{key}", value, "deepspeed_config", key)
            if key not in DEEPSPEED_KEYS:
                hint = suggest(str(key), DEEPSPEED_KEYS)
                tail = f"; did you mean {hint!r}?" if hint else ""
                self.diag(UNKNOWN_KEY, Severity.WARNING,
                          f"{key!r} is not an accelerate DeepSpeed option and is ignored{tail}",
                          "deepspeed_config", key)
        config_file = ds.get("deepspeed_config_file")
        if config_file:
            self._reference(str(config_file))
            clashing = [k for k in DS_FILE_EXCLUSIVE if k in ds]
            if "mixed_precision" in data:
                clashing.append("mixed_precision")
            for key in clashing:
                path = ("deepspeed_config", key) if key in ds else (key,)
                self.diag(INVALID_VALUE, Severity.ERROR,
                          f"{key} cannot be set here together with deepspeed_config_file: "
                          "accelerate raises \"the following accelerate config variables will "
                          "be ignored\" (utils/dataclasses.py, _deepspeed_config_checks); set it "
                          "in the DeepSpeed JSON", *path)
        stage = ds.get("zero_stage")
        if stage is not None:
            if isinstance(stage, int) and not isinstance(stage, bool) and 0 <= stage <= 3:
                self.set("zero", stage, "deepspeed_config", "zero_stage")
            else:
                self.diag(INVALID_VALUE, Severity.ERROR,
                          f"zero_stage must be 0, 1, 2 or 3, got {stage!r}",
                          "deepspeed_config", "zero_stage")
        for key, scenario in (("offload_optimizer_device", "offload_optimizer"),
                              ("offload_param_device", "offload_params")):
            value = ds.get(key)
            if value is None:
                continue
            text = str(value).strip().lower()
            if text not in ("none", "cpu", "nvme"):
                self.diag(INVALID_VALUE, Severity.ERROR,
                          f"{key} must be none, cpu or nvme, got {value!r}",
                          "deepspeed_config", key)
            else:
                self.set(scenario, text, "deepspeed_config", key)
        steps = ds.get("gradient_accumulation_steps")
        if steps is not None:
            if isinstance(steps, int) and not isinstance(steps, bool) and steps >= 1:
                self.set("grad_accum", steps, "deepspeed_config", "gradient_accumulation_steps")
            elif str(steps).strip().lower() != "auto":
                self.diag(INVALID_VALUE, Severity.ERROR,
                          f"gradient_accumulation_steps must be a positive whole number, got "
                          f"{steps!r}", "deepspeed_config", "gradient_accumulation_steps")

    def _reference(self, name: str) -> None:
        base = os.path.dirname(os.path.abspath(self.path))
        root = _repo_root(base)
        target = os.path.normpath(os.path.join(base, name)) if not os.path.isabs(name) else name
        prov = self.prov("deepspeed_config", "deepspeed_config_file")
        # outside the repository root: load_with_references refuses it unless allowed
        self.partial.references.append(target)
        if not inside(target, root):
            return
        if not os.path.isfile(target):
            self.partial.diagnostics.append(make(
                UNRESOLVED, Severity.INFO,
                f"deepspeed_config_file {name!r} (resolved to {os.path.relpath(target, root)}) "
                "does not exist here; its settings are not checked", prov,
                key="deepspeed_config_file"))

    def _parallelism(self, par: dict) -> None:
        for key, value in par.items():
            self.extra(f"parallelism_config.{key}", value, "parallelism_config", key)
            if key not in PARALLELISM_KEYS and key not in PARALLELISM_EXTRA:
                hint = suggest(str(key), list(PARALLELISM_KEYS) + list(PARALLELISM_EXTRA))
                tail = f"; did you mean {hint!r}?" if hint else ""
                self.diag(UNKNOWN_KEY, Severity.WARNING,
                          f"{key!r} is not an accelerate parallelism_config option{tail}",
                          "parallelism_config", key)
        if self.dtype == "FSDP" and self.version != 2:
            self.diag(UNRESOLVED, Severity.WARNING,
                      "parallelism_config needs fsdp_version 2 under FSDP: accelerate's "
                      "ParallelismConfig._validate_accelerator refuses FSDP1 when its sizes "
                      "multiply past 1", "parallelism_config")
        elif self.dtype != "FSDP" and self.dtype != "DEEPSPEED" and not self.dtype.startswith(
                "MULTI_"):
            self.diag(UNRESOLVED, Severity.INFO,
                      f"parallelism_config is not exported with distributed_type {self.dtype} "
                      "(accelerate utils/launch.py exports it for multi-GPU, FSDP and DeepSpeed "
                      "launches)", "parallelism_config")
        sizes = {}
        for key, scenario in PARALLELISM_KEYS.items():
            value = par.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                self.diag(INVALID_VALUE, Severity.ERROR,
                          f"{key} must be a positive whole number, got {value!r}",
                          "parallelism_config", key)
                continue
            sizes[scenario] = value
            if self.dtype == "DEEPSPEED" and scenario in ("dp_shard", "dp_replicate"):
                # DeepSpeed shards with ZeRO over its own data-parallel group, not this mesh axis
                continue
            self.set(scenario, value, "parallelism_config", key)
        self._sequence_parallel(par, sizes)
        replicate = par.get("parallelism_config_dp_replicate_size")
        shard = par.get("parallelism_config_dp_shard_size")
        if not isinstance(shard, int) or isinstance(shard, bool):
            shard = 1  # a bad shard size is reported above
        if isinstance(replicate, int) and replicate > 1 and self.dtype == "FSDP":
            self.set("fsdp", "hybrid" if shard > 1 else "none", "parallelism_config",
                     "parallelism_config_dp_replicate_size")

    def _sequence_parallel(self, par: dict, sizes: dict) -> None:
        """`parallelism_config_sp_size`: DeepSpeed ALST/Ulysses sequence parallelism. Each rank
        holds 1/sp of every sequence, as under context parallelism (memlint's `cp`), and it is a
        factor of `ParallelismConfig.total_size` = dp_replicate·dp_shard·tp·cp·sp
        (accelerate parallelism_config.py). cp and sp > 1 together raise there."""
        value = par.get("parallelism_config_sp_size")
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            self.diag(INVALID_VALUE, Severity.ERROR,
                      f"parallelism_config_sp_size must be a positive whole number, got "
                      f"{value!r}", "parallelism_config", "parallelism_config_sp_size")
            return
        if value == 1:
            return
        if sizes.get("cp", 1) > 1:
            self.diag(INVALID_VALUE, Severity.ERROR,
                      f"parallelism_config_cp_size {sizes['cp']} and parallelism_config_sp_size "
                      f"{value} are both over 1: accelerate's ParallelismConfig refuses context "
                      "and sequence parallelism together", "parallelism_config",
                      "parallelism_config_sp_size")
            return
        backend = par.get("parallelism_config_sp_backend", "deepspeed")
        if self.dtype != "DEEPSPEED" or str(backend).lower() != "deepspeed":
            self.diag(UNRESOLVED, Severity.WARNING,
                      f"parallelism_config_sp_size {value} is DeepSpeed's (ALST/Ulysses) "
                      f"sequence parallelism; with distributed_type {self.dtype} and backend "
                      f"{backend!r} it is not set up", "parallelism_config",
                      "parallelism_config_sp_size")
        self.set("cp", value, "parallelism_config", "parallelism_config_sp_size")


def _repo_root(directory: str) -> str:
    """The repository root above `directory` (memlint.loaders.repo_root: .git or pyproject.toml)."""
    return repo_root(os.path.join(directory, "_"))


def load(path: str, text: str) -> Partial:
    """Read an accelerate config YAML into a Partial. Never raises on bad input."""
    try:
        return _Reader(path, text).read()
    except RecursionError:
        partial = Partial(source=path, fmt=FORMAT)
        partial.diagnostics.append(make(PARSE_ERROR, Severity.ERROR, "input nests too deeply",
                                        Provenance(path, 1, 1, None)))
        return partial
