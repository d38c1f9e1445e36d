"""DeepSpeed facts (DeepSpeed v0.19.6, deepspeedai/DeepSpeed@edaa722): which ZeRO keys only the
stage-3 optimizer reads, which take a second (aliased) name, which config blocks drop "auto"
values, and the defaults of the sizes the memory model reads. Read by the DeepSpeed adapter, the
memory model (memory/deepspeed_buffers.py, memory/host.py) and the rules."""
from __future__ import annotations

# ZeRO fields DeepSpeed accepts under two names (pydantic alias + populate_by_name); the extra key
# uses the documented stage3_ spelling.
STAGE3_ALIASED = ("prefetch_bucket_size", "param_persistence_threshold",
                  "model_persistence_threshold", "max_live_parameters", "max_reuse_distance",
                  "gather_16bit_weights_on_model_save", "module_granularity_threshold",
                  "use_all_reduce_for_fetch_params", "allgather_sequential")

# ZeRO keys read only by the stage-3 optimizer (DeepSpeedZeroOptimizer_Stage3 /
# DeepSpeedZeRoOffload); stages 1-2 never receive them (engine.py, _configure_zero_optimizer).
STAGE3_ONLY = tuple("stage3_" + name for name in STAGE3_ALIASED) + (
    "stage3_gather_fp16_weights_on_model_save", "sub_group_size", "zero_hpz_partition_size",
    "zero_quantized_weights", "zero_quantized_nontrainable_weights", "mics_shard_size",
    "mics_hierarchical_params_gather", "memory_efficient_linear", "override_module_apply",
    "leaf_module", "zeropp_loco_param", "cpu_offload_param")

# Blocks DeepSpeed validates with DeepSpeedConfigModel (non-strict), which drops "auto" values so
# that the field's default applies. Elsewhere "auto" reaches DeepSpeed as a string.
AUTO_DROPPED_BLOCKS = ("zero_optimization", "fp16", "bf16", "bfloat16", "tensor_parallel",
                       "compile", "comms_logger", "tensorboard", "wandb", "csv_monitor", "comet",
                       "hybrid_engine")

# Defaults of deepspeed/runtime/zero/config.py (DeepSpeedZeroConfig), in elements.
REDUCE_BUCKET_SIZE = 500_000_000                 # reduce_bucket_size
MAX_LIVE_PARAMETERS = 1_000_000_000              # stage3_max_live_parameters
MAX_REUSE_DISTANCE = 1_000_000_000               # stage3_max_reuse_distance
PREFETCH_BUCKET_SIZE = 50_000_000                # stage3_prefetch_bucket_size
PARAM_PERSISTENCE_THRESHOLD = 100_000            # stage3_param_persistence_threshold
SUB_GROUP_SIZE = 1_000_000_000                   # sub_group_size
CONTIGUOUS_GRADIENTS = True                      # contiguous_gradients
MEMORY_EFFICIENT_LINEAR = True                   # memory_efficient_linear (stage 3)
# ZeRO-3's memory-efficient linear (runtime/zero/linear.py LinearFunctionForZeroStage3 replaces
# torch.nn.functional.linear) is installed by zero.Init: before v0.19.4 only by the context a model
# is built in (partition_parameters.py patch_init_and_builtins, e.g. v0.14.2 5f631abc), from
# v0.19.4 also for a built model passed to deepspeed.initialize ("Enable ZeRO-3 linear wrapper for
# existing models", #8189, 617061d6b)
LINEAR_WRAPPER_FOR_BUILT_MODELS = (0, 19, 4)
# overlap_comm: None in the config, read as True under ZeRO-3 and False otherwise
# (DeepSpeedZeroConfig overlap_comm_valid)

# Defaults of deepspeed/runtime/zero/offload_config.py (DeepSpeedZeroOffloadParamConfig,
# DeepSpeedZeroOffloadOptimizerConfig).
PARAM_BUFFER_COUNT = 5                           # offload_param.buffer_count
PARAM_BUFFER_SIZE = 100_000_000                  # offload_param.buffer_size (elements)
PARAM_MAX_IN_CPU = 1_000_000_000                 # offload_param.max_in_cpu (elements)
OPTIMIZER_BUFFER_COUNT = 4                       # offload_optimizer.buffer_count
PIN_MEMORY = False                               # offload_param / offload_optimizer .pin_memory
