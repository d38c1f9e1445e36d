"""Memory DeepSpeed ZeRO adds on the GPU on top of weights, gradients, optimizer states and
activations: the gradient-reduction bucket and, under ZeRO-3, the gathered parameters (and the
gathered weights standard linear layers keep for the backward).

Pure functions of plain numbers, one per term, each returning a `Term` of the `buffers`
component (memory/buffers.py calls them with the sizes of the run's DeepSpeed config). Sizes in
a DeepSpeed config are element counts; bytes come from the dtype the buffer is allocated in.
DeepSpeed's defaults are in memlint/facts/deepspeed.py; host memory of ZeRO offload is
memory/offload.py's and memory/host.py's.

Sources are DeepSpeed v0.19.6 (deepspeedai/DeepSpeed@edaa722).
"""
from __future__ import annotations

from memlint.facts import deepspeed as facts
from memlint.memory.states import DTYPE_BYTES
from memlint.memory.terms import Term

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Iterable, Optional


def _term(name: str, nbytes: int, formula: str, inputs: dict, source: str) -> Term:
    return Term("buffers." + name, "buffers", int(nbytes), formula, inputs, source)


def _bytes(dtype: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]


def reduce_bucket(stage: int, reduce_bucket_size: int = facts.REDUCE_BUCKET_SIZE,
                  grad_dtype: str = "bf16",
                  contiguous_gradients: bool = facts.CONTIGUOUS_GRADIENTS,
                  overlap_comm: bool = False, comm_dtypes: int = 1) -> Term:
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


def stage3_live_parameters(max_live_parameters: int = facts.MAX_LIVE_PARAMETERS,
                           param_dtype: str = "bf16", total_params: Optional[int] = None,
                           largest_module_params: int = 0) -> Term:
    """ZeRO-3 ceiling on gathered (unpartitioned) parameters held at once, prefetch included.

    The coordinator counts gathered elements (`__n_available_params`) and releases parameters
    once max_live_parameters is reached, except those of the module running now, so the
    ceiling is max(min(max_live_parameters, total_params), largest_module_params) elements.
    The prefetch bucket (stage3_prefetch_bucket_size) lives inside this ceiling
    (`PartitionedParameterCoordinator.fetch_sub_module`), so it is not a term of its own.
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
                                 threshold: int = facts.PARAM_PERSISTENCE_THRESHOLD,
                                 model_threshold: Optional[int] = None) -> Term:
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


def stage3_saved_gathered_weights(linear_params: int, param_dtype: str, live_bytes: int,
                                  why: str) -> Term:
    """Gathered weights that ZeRO-3's forward leaves to autograd when linear layers are torch's own.

    `torch.nn.functional.linear` saves `weight.t()` for the input's gradient: a view that keeps the
    gathered storage alive after ZeRO-3 frees the parameter (`free_param` swaps `param.data` for an
    empty tensor), until that layer's backward. DeepSpeed's LinearFunctionForZeroStage3 saves the
    parameter instead so the storage can go (runtime/zero/linear.py); without it, at the end of
    the forward every linear weight of the layers that were not recomputed is held whole. The
    parameters the coordinator keeps gathered (the live-parameter term) are among them, so this
    term counts what lies beyond that ceiling. DeepSpeed v0.14.2 (5f631abc) installs the wrapper
    only inside zero.Init; #8189 (617061d6b, v0.19.4) says "the standard Linear implementation can
    retain the gathered weight storage until backward completes".
    """
    per = _bytes(param_dtype)
    held = int(linear_params) * per
    extra = max(0, held - int(live_bytes))
    return _term("zero3_saved_gathered_weights", extra,
                 f"linear weights {int(linear_params):,} x {per} B kept by autograd ({why}) - "
                 f"the live-parameter ceiling {int(live_bytes):,} B counted above (among them)",
                 {"linear_params": int(linear_params), "param_dtype": param_dtype,
                  "live_bytes": int(live_bytes), "why": why},
                 "deepspeed/runtime/zero/linear.py LinearFunctionForZeroStage3; "
                 "partition_parameters.py free_param; deepspeedai/DeepSpeed#8189 (617061d6b)")


SRC_ZERO2_ACCUMULATION = (
    "deepspeedai/DeepSpeed runtime/zero/stage_1_and_2.py independent_gradient_partition_epilogue: "
    "the micro-batch's partition is kept as views of grads_in_partition (v0.14.2 5f631abc: "
    "averaged_gradients; v0.19.6 edaa722: all_grad_tensors), accumulated with add_ from the "
    "second micro-batch on, then _release_ipg_buffers sets grads_in_partition = None; the next "
    "backward's copy_grads_in_partition allocates a new one (torch.empty of the partition's size) "
    "while the accumulated one is still held")


def zero2_accumulation_partition(partition_bytes: int, microbatches: int) -> Term:
    """ZeRO-2 under gradient accumulation (no optimizer offload, contiguous_gradients): from the
    second micro-batch of a step on, the backward fills a new gradient partition
    (`grads_in_partition`) while the partition accumulated so far (`averaged_gradients`) is still
    held; the new one is added into it and freed only at the backward's end. So a backward holds
    two partitions where a single micro-batch holds one: one more partition's bytes, the same as
    the gradients term's. With offload the gradients go to the host (copy_grads_in_partition
    returns before allocating)."""
    return Term("gradients.zero2_accumulation", "gradients", int(partition_bytes),
                f"one more gradient partition {int(partition_bytes):,} B (the backward of "
                f"micro-batch 2..{microbatches} fills a new one beside the accumulated one)",
                {"partition_bytes": int(partition_bytes), "microbatches": int(microbatches)},
                SRC_ZERO2_ACCUMULATION)


SRC_REUSE = ("deepspeedai/DeepSpeed v0.14.2 (5f631abc) runtime/zero/partitioned_param_coordinator.py: "
             "release_sub_module releases a module's parameters unless __params_to_release finds "
             "them again in __submodule_order within max_reuse_distance elements; fetch_sub_module "
             "prefetches at most min(max_live_parameters - available, prefetch_bucket_size) elements")


def stage3_gathered_recompute(phase: str, layer_params: list, head_params: int,
                              largest_module: int, max_reuse_distance: int,
                              prefetch_bucket_size: int, max_live_parameters: int,
                              param_dtype: str = "bf16") -> Term:
    """ZeRO-3's gathered parameters under full recompute (transformers' gradient checkpointing),
    from the coordinator's release rule over the traced module order: a module's parameters stay
    gathered after it runs only when the trace reaches them again within max_reuse_distance
    elements, and the prefetcher adds at most min(max_live_parameters - gathered,
    prefetch_bucket_size) elements.

    At the loss (`forward_end`, `backward_start`) the trace after the last layer's forward is the
    LM head's forward and backward, then for each layer from the last: its recompute and its
    backward. The LM head is kept (its backward follows the loss). A layer with k elements of
    layers after it is reached again after 3k (their forward, recompute and backward) + 2 x the
    head + its own elements past the module: it is kept while 3k + 2·head + (its elements - its
    largest module) < max_reuse_distance, counting from the last layer. In the middle of the
    backward (`backward_recompute`) a layer's parameters are next used in the next step's
    forward, beyond the distance: only the layer being recomputed is gathered, beside the
    prefetch."""
    per = _bytes(param_dtype)
    reuse = int(max_reuse_distance)
    if phase == "backward_recompute":
        kept_layers = 0
        kept = max(layer_params or [0])
        what = f"the layer in its recompute {kept:,}"
    else:
        kept, after, kept_layers = int(head_params), 0, 0
        for params in reversed(layer_params):
            if 3 * after + 2 * int(head_params) + params - int(largest_module) >= reuse:
                break
            kept += params
            after += params
            kept_layers += 1
        what = (f"LM head {int(head_params):,} + {kept_layers} last layer(s) within "
                f"max_reuse_distance {reuse:,} ({kept - int(head_params):,})")
    prefetch = max(0, min(int(prefetch_bucket_size), int(max_live_parameters) - kept))
    elements = kept + prefetch
    return _term("zero3_gathered_parameters", elements * per,
                 f"({what} + prefetch min(prefetch_bucket_size {int(prefetch_bucket_size):,}, "
                 f"max_live_parameters {int(max_live_parameters):,} - gathered) {prefetch:,}) "
                 f"x {per} B",
                 {"phase": phase, "kept_elements": kept, "kept_layers": kept_layers,
                  "prefetch_elements": prefetch, "max_reuse_distance": reuse,
                  "prefetch_bucket_size": int(prefetch_bucket_size),
                  "max_live_parameters": int(max_live_parameters), "param_dtype": param_dtype},
                 SRC_REUSE)
