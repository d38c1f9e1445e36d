"""Transformer Engine's userbuffers under Megatron's `--tp-comm-overlap`.

Megatron calls `initialize_ub` once (megatron/training/initialize.py _initialize_tp_communicators,
NVIDIA/Megatron-LM@d98e8a64) with the buffer shape [(seq x micro-batch) // cp, hidden] and one
quantization mode (FP8 under `--fp8-format`, else none; a second, unquantized set when
`--first-last-layers-bf16` keeps bf16 layers). Transformer Engine then registers one buffer per
overlapped GEMM (transformer_engine/pytorch/module/base.py initialize_ub, add_ub; read at
NVIDIA/TransformerEngine@f4debf66): the ring-exchange all-gathers qkv_fprop, fc1_fprop,
proj_dgrad, fc2_dgrad, the pipelined reduce-scatters proj_fprop, fc2_fprop, the bulk overlaps
qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad and the external proj_wgrad, fc2_wgrad, each of the full
shape; under FP8 the all-gather ones (qkv_fprop, qkv_dgrad, proj_dgrad, proj_wgrad, fc1_fprop,
fc1_dgrad, fc2_dgrad, fc2_wgrad) are uint8, the others bf16 (Megatron passes no dtype). The
buffers are allocated with cudaMalloc / cuMemCreate (common/comm_gemm_overlap/userbuffers/
userbuffers-host.cpp register_user_buffer_collective), outside PyTorch's caching allocator: device
memory, not in `torch.cuda.memory_allocated`. A `--tp-comm-overlap-cfg` file can move a dgrad
overlap from bulk to ring-exchange or pipeline (same buffer size); its methods are not read.
"""
from __future__ import annotations

from memlint.memory.model import Model
from memlint.memory.terms import Term

# TE initialize_ub: every overlapped GEMM, and those whose buffer is FP8 under FP8
# (layers_all_gather_overlap, fp8_buf)
GEMMS = ("qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad", "proj_fprop", "fc2_fprop",
         "qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad", "proj_wgrad", "fc2_wgrad")
FP8_BUFFERS = frozenset(("qkv_fprop", "qkv_dgrad", "proj_dgrad", "proj_wgrad", "fc1_fprop",
                         "fc1_dgrad", "fc2_dgrad", "fc2_wgrad"))
SOURCE = ("NVIDIA/TransformerEngine@f4debf66 pytorch/module/base.py initialize_ub; "
          "common/comm_gemm_overlap/userbuffers/userbuffers-host.cpp; NVIDIA/Megatron-LM@d98e8a64 "
          "megatron/training/initialize.py _initialize_tp_communicators")


def userbuffer_terms(model: Model) -> list:
    """The userbuffers of a `--tp-comm-overlap` run, one set per quantization mode."""
    overlap = model.conv.tp_comm_overlap
    if overlap is None or model.scenario.hardware.device == "cpu":
        return []
    rows = model.tr.micro_batch * overlap.seq // max(1, model.topo.cp)
    elements = rows * model.arch.hidden
    # initialize_ub's quantization modes: FP8 under --fp8-format (plus an unquantized set for
    # --first-last-layers-bf16's bf16 layers), else none
    modes = (["fp8", "bf16"] if overlap.bf16_set else ["fp8"]) if overlap.fp8 else ["bf16"]
    per_mode = {mode: sum(1 if mode == "fp8" and gemm in FP8_BUFFERS else 2 for gemm in GEMMS)
                for mode in modes}
    total = elements * sum(per_mode.values())
    sets = " + ".join(f"{mode} set {per} B" for mode, per in per_mode.items())
    return [Term("runtime.te_userbuffers", "runtime", total,
                 f"{len(GEMMS)} userbuffers of (B {model.tr.micro_batch} × T {overlap.seq}"
                 + (f" / cp {model.topo.cp}" if model.topo.cp > 1 else "")
                 + f") × d {model.arch.hidden} = {elements:,} elements; per element over the "
                 f"buffers: {sets} (cudaMalloc'd outside PyTorch's allocator)",
                 {"rows": rows, "hidden": model.arch.hidden, "bytes_per_element": per_mode},
                 SOURCE)]
