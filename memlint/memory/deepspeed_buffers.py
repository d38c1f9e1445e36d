"""Memory DeepSpeed adds on top of weights, gradients, optimizer states and activations.

Pure functions, one per term, for the memory model owner to call in the precise profile. Each
returns a Term-like dict: name, component ("buffers"), device ("gpu" or "host": host terms are
node RAM and must never be added to a GPU total), bytes (int), formula, inputs, source. Sizes in
a DeepSpeed config are element counts; bytes come from the dtype the buffer is allocated in.

Sources are DeepSpeed v0.19.6 (deepspeedai/DeepSpeed@edaa722); defaults are those of
deepspeed/runtime/zero/config.py (reduce/allgather bucket 5e8, prefetch bucket 5e7, max live
parameters 1e9, persistence threshold 1e5).
"""
from __future__ import annotations

from typing import Iterable, Optional

from memlint.memory.states import DTYPE_BYTES

DEFAULT_REDUCE_BUCKET = 500_000_000
DEFAULT_ALLGATHER_BUCKET = 500_000_000
DEFAULT_PREFETCH_BUCKET = 50_000_000
DEFAULT_MAX_LIVE_PARAMETERS = 1_000_000_000
DEFAULT_PERSISTENCE_THRESHOLD = 100_000


def _term(name: str, nbytes: int, formula: str, inputs: dict, source: str,
          device: str = "gpu") -> dict:
    return {"name": name, "component": "buffers", "device": device, "bytes": int(nbytes),
            "formula": formula, "inputs": inputs, "source": source}


def _bytes(dtype: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]


def reduce_bucket(stage: int, reduce_bucket_size: int = DEFAULT_REDUCE_BUCKET,
                  grad_dtype: str = "bf16", contiguous_gradients: bool = True,
                  overlap_comm: bool = False, comm_dtypes: int = 1) -> dict:
    """Gradient reduction (IPG) bucket: reduce_bucket_size elements in the optimizer's dtype.

    ZeRO-1/2: `DeepSpeedZeroOptimizer.setup_buckets` (runtime/zero/stage_1_and_2.py) allocates
    one flat buffer of reduce_bucket_size elements per communication dtype when
    contiguous_gradients is on, and a second one when overlap_comm is on ("double buffers to
    avoid data access conflict"). ZeRO-3: `DeepSpeedZeroOptimizer_Stage3` (runtime/zero/stage3.py)
    allocates one buffer per communication dtype (no doubling). Without contiguous_gradients no
    flat buffer is allocated (gradients are reduced in place).
    """
    per = _bytes(grad_dtype)
    if stage < 1 or not contiguous_gradients:
        count = 0
        why = "no flat bucket (stage 0 or contiguous_gradients off)"
    elif stage in (1, 2):
        count = (2 if overlap_comm else 1) * comm_dtypes
        why = "x2 with overlap_comm" if overlap_comm else "single buffer"
    else:
        count = comm_dtypes
        why = "stage 3: one buffer per comm dtype"
    nbytes = count * int(reduce_bucket_size) * per
    return _term("zero_reduce_bucket", nbytes,
                 f"{count} x reduce_bucket_size {int(reduce_bucket_size)} x {per} B ({why})",
                 {"stage": stage, "reduce_bucket_size": int(reduce_bucket_size),
                  "grad_dtype": grad_dtype, "contiguous_gradients": contiguous_gradients,
                  "overlap_comm": overlap_comm, "comm_dtypes": comm_dtypes},
                 "deepspeed/runtime/zero/stage_1_and_2.py setup_buckets; stage3.py IPG buffer")


def allgather_bucket(stage: int, allgather_bucket_size: int = DEFAULT_ALLGATHER_BUCKET,
                     param_dtype: str = "bf16") -> dict:
    """Parameter all-gather after the ZeRO-1/2 step: no extra buffer (0 bytes).

    `all_gather_dp_groups` (runtime/utils.py) gathers the updated partitions straight into the
    flat low-precision parameter buffers; allgather_bucket_size only splits the collective into
    shards when all_gather_into_tensor is unavailable. The term is kept, at 0 bytes, so reports
    show that the setting was considered.
    """
    return _term("zero_allgather_bucket", 0,
                 "0: all-gather writes in place into the flat parameter buffer; "
                 f"allgather_bucket_size {int(allgather_bucket_size)} only chunks the collective",
                 {"stage": stage, "allgather_bucket_size": int(allgather_bucket_size),
                  "param_dtype": param_dtype},
                 "deepspeed/runtime/utils.py all_gather_dp_groups")


def stage3_prefetch_bucket(prefetch_bucket_size: int = DEFAULT_PREFETCH_BUCKET,
                           param_dtype: str = "bf16",
                           max_live_parameters: int = DEFAULT_MAX_LIVE_PARAMETERS) -> dict:
    """ZeRO-3 prefetch: up to min(prefetch_bucket_size, max_live_parameters) parameter elements
    gathered ahead of the module that needs them, in the parameter dtype.

    `PartitionedParameterCoordinator.fetch_sub_module` (runtime/zero/partitioned_param_coordinator.py)
    prefetches at most min(max available - currently available, prefetch_bucket_sz) elements.
    """
    elements = min(int(prefetch_bucket_size), int(max_live_parameters))
    per = _bytes(param_dtype)
    return _term("zero3_prefetch_bucket", elements * per,
                 f"min(prefetch_bucket_size {int(prefetch_bucket_size)}, max_live_parameters "
                 f"{int(max_live_parameters)}) x {per} B",
                 {"prefetch_bucket_size": int(prefetch_bucket_size), "param_dtype": param_dtype,
                  "max_live_parameters": int(max_live_parameters)},
                 "deepspeed/runtime/zero/partitioned_param_coordinator.py fetch_sub_module")


def stage3_live_parameters(max_live_parameters: int = DEFAULT_MAX_LIVE_PARAMETERS,
                           param_dtype: str = "bf16", total_params: Optional[int] = None,
                           largest_module_params: int = 0) -> dict:
    """ZeRO-3 ceiling on gathered (unpartitioned) parameters held at once, prefetch included.

    The coordinator counts gathered elements (`__n_available_params`) and releases parameters
    once max_live_parameters is reached, except those of the module running now, so the
    ceiling is max(min(max_live_parameters, total_params), largest_module_params) elements.
    This term bounds stage3_prefetch_bucket: add one or the other, not both.
    """
    limit = int(max_live_parameters)
    if total_params is not None:
        limit = min(limit, int(total_params))
    elements = max(limit, int(largest_module_params))
    per = _bytes(param_dtype)
    return _term("zero3_live_parameters", elements * per,
                 f"max(min(max_live_parameters {int(max_live_parameters)}, total params "
                 f"{total_params}), largest module {int(largest_module_params)}) x {per} B",
                 {"max_live_parameters": int(max_live_parameters), "param_dtype": param_dtype,
                  "total_params": total_params, "largest_module_params": int(largest_module_params)},
                 "deepspeed/runtime/zero/partitioned_param_coordinator.py (__max_n_available_params)")


def stage3_persistent_parameters(tensor_numels: Iterable[int], dp: int,
                                 param_dtype: str = "bf16",
                                 threshold: int = DEFAULT_PERSISTENCE_THRESHOLD,
                                 model_threshold: Optional[int] = None) -> dict:
    """ZeRO-3 parameters small enough to stay unpartitioned on every rank.

    `DeepSpeedZeRoOffload.mark_persistent_parameters` (runtime/zero/parameter_offload.py) keeps
    each parameter with numel <= stage3_param_persistence_threshold whole on every GPU, in
    model order, until their running total would exceed stage3_model_persistence_threshold.
    The extra memory over sharding them is numel x bytes x (1 - 1/dp).
    """
    per = _bytes(param_dtype)
    total = 0
    count = 0
    for numel in tensor_numels:
        numel = int(numel)
        if model_threshold is not None and numel + total > int(model_threshold):
            continue
        if numel <= int(threshold):
            total += numel
            count += 1
    dp = max(1, int(dp))
    extra = total * per - (total * per) // dp
    return _term("zero3_persistent_parameters", extra,
                 f"{count} tensors <= threshold {int(threshold)}: {total} elements x {per} B x "
                 f"(1 - 1/dp {dp})",
                 {"threshold": int(threshold), "model_threshold": model_threshold, "dp": dp,
                  "param_dtype": param_dtype, "persistent_numel": total, "tensors": count},
                 "deepspeed/runtime/zero/parameter_offload.py mark_persistent_parameters")


def offload_optimizer_host(params: int, shard: int, device: str = "cpu",
                           master_dtype: str = "fp32", moments: int = 2,
                           state_dtype: str = "fp32", grad_dtype: str = "fp32",
                           ranks_per_node: int = 1) -> dict:
    """Host RAM for ZeRO optimizer offload (ZeRO-Offload / ZeRO-Infinity), per node.

    With offload_optimizer.device cpu, each rank keeps on the CPU its partition of the fp32
    master weights (4 B/param), of the fp32 gradients the CPU optimizer reads (4 B/param:
    `single_partition_of_fp32_groups` grads in stage_1_and_2.py, `grad_partitions_flat_buffer`
    on the CPU in stage3.py) and of the Adam moments (2 x 4 B/param, DeepSpeedCPUAdam): 16 B per
    parameter / shard. With nvme the same bytes live on the NVMe drive and the host keeps only
    swap buffers (see nvme_swap_buffers_host); this term is then 0. Pinned memory
    (pin_memory: true) cannot be paged out.
    """
    if device != "cpu":
        return _term("offload_optimizer_host", 0, f"0: optimizer states on {device}",
                     {"device": device, "params": params, "shard": shard},
                     "deepspeed/runtime/zero/offload_config.py", device="host")
    per_param = _bytes(master_dtype) + moments * _bytes(state_dtype) + _bytes(grad_dtype)
    shard = max(1, int(shard))
    per_rank = -(-int(params) * per_param // shard)
    return _term("offload_optimizer_host", per_rank * int(ranks_per_node),
                 f"ceil(params {int(params)} x ({_bytes(master_dtype)} master + {moments} x "
                 f"{_bytes(state_dtype)} moments + {_bytes(grad_dtype)} grads) B / shard {shard})"
                 f" x {int(ranks_per_node)} ranks per node",
                 {"params": int(params), "shard": shard, "bytes_per_param": per_param,
                  "ranks_per_node": int(ranks_per_node), "device": device},
                 "deepspeed/runtime/zero/stage_1_and_2.py and stage3.py (cpu_offload paths); "
                 "deepspeed/ops/adam/cpu_adam.py", device="host")


def offload_param_host(params: int, shard: int, device: str = "cpu", param_dtype: str = "bf16",
                       ranks_per_node: int = 1) -> dict:
    """Host RAM for ZeRO-3 parameter offload, per node.

    With offload_param.device cpu each rank's parameter partition (ds_tensor, param dtype) lives
    in CPU memory: params x bytes / shard per rank (runtime/zero/partition_parameters.py,
    offload_param). With nvme it lives on the drive (see nvme_swap_buffers_host).
    """
    if device != "cpu":
        return _term("offload_param_host", 0, f"0: parameters on {device}",
                     {"device": device, "params": params, "shard": shard},
                     "deepspeed/runtime/zero/offload_config.py", device="host")
    per = _bytes(param_dtype)
    shard = max(1, int(shard))
    per_rank = -(-int(params) * per // shard)
    return _term("offload_param_host", per_rank * int(ranks_per_node),
                 f"ceil(params {int(params)} x {per} B / shard {shard}) x {int(ranks_per_node)} "
                 "ranks per node",
                 {"params": int(params), "shard": shard, "param_dtype": param_dtype,
                  "ranks_per_node": int(ranks_per_node)},
                 "deepspeed/runtime/zero/partition_parameters.py (offload_param)", device="host")


def nvme_swap_buffers_host(param_buffer_count: int = 5, param_buffer_size: int = 100_000_000,
                           param_dtype: str = "bf16", param_offload_nvme: bool = False,
                           ranks_per_node: int = 1) -> dict:
    """Pinned host buffers ZeRO-Infinity uses to stage parameters to and from NVMe, per node.

    offload_param with device nvme allocates buffer_count x buffer_size elements of the
    parameter dtype in pinned CPU memory per rank (AsyncPartitionedParameterSwapper,
    runtime/swap_tensor/partitioned_param_swapper.py; defaults 5 x 1e8 in
    zero/offload_config.py). Optimizer-state swapping to NVMe also stages through pinned
    buffers sized from the largest sub-group; the memory model adds that with sub_group_size.
    """
    if not param_offload_nvme:
        return _term("nvme_param_swap_buffers", 0, "0: no parameter offload to NVMe",
                     {"param_offload_nvme": False},
                     "deepspeed/runtime/swap_tensor/partitioned_param_swapper.py", device="host")
    per = _bytes(param_dtype)
    per_rank = int(param_buffer_count) * int(param_buffer_size) * per
    return _term("nvme_param_swap_buffers", per_rank * int(ranks_per_node),
                 f"buffer_count {int(param_buffer_count)} x buffer_size {int(param_buffer_size)}"
                 f" x {per} B x {int(ranks_per_node)} ranks per node",
                 {"buffer_count": int(param_buffer_count), "buffer_size": int(param_buffer_size),
                  "param_dtype": param_dtype, "ranks_per_node": int(ranks_per_node)},
                 "deepspeed/runtime/swap_tensor/partitioned_param_swapper.py", device="host")
