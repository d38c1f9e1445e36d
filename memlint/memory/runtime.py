"""The runtime every process holds: CUDA context, NCCL buffers, the caching allocator's
fragmentation, and the cuBLAS / cuBLASLt workspaces (their sizes from PyTorch's and Transformer
Engine's code per GPU generation).
"""
from __future__ import annotations

import re

from memlint.memory.model import Model
from memlint.memory.terms import Term
from memlint.memory.userbuffers import userbuffer_terms


MiB = 1024**2


def runtime_terms(model: Model) -> list:
    """What a real GPU process adds outside PyTorch's caching allocator: the CUDA context (module
    images, cuDNN handles) and NCCL communicator buffers, one per process group with more than
    one rank, and Transformer Engine's userbuffers under Megatron's --tp-comm-overlap
    (memory/userbuffers.py). cuBLAS, cuBLASLt and Transformer Engine workspaces are allocated
    through the caching allocator and are `buffers.*` terms (`workspace_terms`)."""
    if model.scenario.hardware.device == "cpu":
        return []
    assume, topo = model.assume, model.topo
    terms = [Term("runtime.cuda_context", "runtime", int(assume["runtime.cuda_context_bytes"]),
                  "CUDA context outside the caching allocator (assumption "
                  "runtime.cuda_context_bytes)",
                  {}, "PyTorch on H100: ~500-700 MiB outside the caching allocator")]
    groups = sum(1 for size in (topo.tp, topo.pp, topo.cp, topo.dp, topo.ep) if size > 1)
    if groups:
        per = int(assume["runtime.nccl_bytes_per_group"])
        terms.append(Term("runtime.nccl", "runtime", per * groups,
                          f"{groups} process groups × {per // MiB} MiB",
                          {"groups": groups, "bytes_per_group": per},
                          "NCCL buffers: NCCL_BUFFSIZE 4 MiB × channels per communicator"))
    return terms + userbuffer_terms(model)


def allocator_terms(model: Model, terms) -> list:
    """The caching allocator's rounding and fragmentation, a fraction of the tensor bytes."""
    if model.scenario.hardware.device == "cpu":
        return []
    fraction = float(model.assume["runtime.allocator_fraction"])
    tensors = sum(t.bytes for t in terms if t.component != "runtime")
    return [Term("runtime.allocator", "runtime", int(tensors * fraction),
                 f"{fraction:g} × tensor bytes {tensors:,}", {"fraction": fraction},
                 "PyTorch caching allocator (block rounding, fragmentation)")]


KiB = 1024

# CUDA compute capability by catalog GPU (NVIDIA data sheets); None: not an NVIDIA GPU.
_COMPUTE_CAPABILITY = (("H100", (9, 0)), ("H200", (9, 0)), ("B200", (10, 0)), ("B300", (10, 3)),
                       ("A100", (8, 0)), ("V100", (7, 0)), ("L40S", (8, 9)), ("A10G", (8, 6)),
                       ("RTX-4090", (8, 9)), ("H800", (9, 0)), ("H20", (9, 0)),
                       ("A800", (8, 0)), ("A40", (8, 6)), ("RTX-A6000", (8, 6)),
                       ("RTX-6000-Ada", (8, 9)), ("RTX-PRO-6000", (12, 0)), ("L4", (8, 9)),
                       ("T4", (7, 5)), ("RTX-5090", (12, 0)), ("RTX-4080", (8, 9)),
                       ("RTX-3090", (8, 6)), ("RTX-3060", (8, 6)), ("RTX-2080", (7, 5)),
                       ("MI", None))


def compute_capability(gpu: str):
    for prefix, cc in _COMPUTE_CAPABILITY:
        if (gpu or "").upper().startswith(prefix.upper()):
            return cc
    return (9, 0)  # an unknown GPU: the Hopper sizes (the largest defaults below)


def cublas_workspace_bytes(config, cc) -> tuple:
    """(bytes, how) of one PyTorch cuBLAS workspace: `CUBLAS_WORKSPACE_CONFIG` (:SIZE_KiB:COUNT
    pairs, summed), else PyTorch's default: 4096 KiB x 8 = 32 MiB on sm90, otherwise
    4096 KiB x 2 + 16 KiB x 8 (aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize)."""
    if isinstance(config, str):
        pairs = re.findall(r":([0-9]+):([0-9]+)", config)
        # PyTorch reads each number with std::stoi: one past INT_MAX is not a workspace size
        if pairs and all(int(n) <= 2**31 - 1 for pair in pairs for n in pair):
            total = sum(int(size) * KiB * int(count) for size, count in pairs)
            return total, f"CUBLAS_WORKSPACE_CONFIG {config}"
    if cc == (9, 0):
        return 4096 * 8 * KiB, "PyTorch default on sm90: 4096 KiB x 8"
    return 4096 * KiB * 2 + 16 * KiB * 8, "PyTorch default: 4096 KiB x 2 + 16 KiB x 8"


def workspace_terms(model: Model) -> list:
    """GEMM workspaces that are allocated once through the caching allocator and never freed.

    - PyTorch's cuBLAS workspace is kept per (cuBLAS handle, stream) (CublasHandlePool.cpp
      `setWorkspaceForHandle`), and each thread gets its own handle (thread-local pool window).
      The forward runs on the Python thread and the backward on the autograd engine's device
      thread (torch/csrc/autograd/engine.cpp, one worker thread per device), so a training step
      holds two workspaces.
    - cuBLASLt (addmm with a bias through `gemm_and_bias`): `CUBLASLT_WORKSPACE_SIZE`, default
      1024 KiB, also per handle and stream; only when some torch linear has a bias.
    - Transformer Engine's GEMM workspace (transformer_engine/pytorch/module/base.py
      `get_cublas_workspace_size_bytes`: 32 MiB + 256 B from sm90, 4 MiB before), and for
      grouped GEMMs (MoE experts) one per cuBLAS stream (`get_num_cublas_streams()` = 4).
    Megatron's global memory buffer is a stage's own (memory/global_buffer.py).
    """
    if model.scenario.hardware.device == "cpu" or not model.assume["buffers.enabled"]:
        return []
    arch = model.arch
    cc = compute_capability(model.scenario.hardware.gpu)
    if cc is None:
        return []  # ROCm: hipBLAS/hipBLASLt sizes are not modelled
    terms = []
    conv = model.conv
    size, how = cublas_workspace_bytes(conv.cublas_workspace_config, cc)
    terms.append(Term("buffers.cublas_workspace", "buffers", 2 * size,
                      f"2 threads (forward, autograd backward) × {how} = 2 × {size:,} B",
                      {"bytes_each": size, "threads": 2},
                      "aten/src/ATen/cuda/CublasHandlePool.cpp; torch/csrc/autograd/engine.cpp"))
    local, te = conv.local_spec, conv.te_spec
    biased = arch.qkv_bias or arch.mlp_bias or arch.output_bias
    if biased and (local or not conv.megatron_modules):
        lt = _lt_workspace_bytes(conv.cublaslt_workspace_size)
        terms.append(Term("buffers.cublaslt_workspace", "buffers", 2 * lt,
                          f"2 threads × CUBLASLT_WORKSPACE_SIZE {lt // KiB} KiB",
                          {"bytes_each": lt, "threads": 2},
                          "aten/src/ATen/cuda/CublasHandlePool.cpp parseCUDABlasLtWorkspaceSize"))
    if te:
        one = 32 * MiB + 256 if cc >= (9, 0) else 4 * MiB
        grouped = arch.moe is not None and conv.grouped_gemm
        count = 1 + (4 if grouped else 0)
        terms.append(Term("buffers.te_workspace", "buffers", count * one,
                          f"{count} × {one:,} B (GEMM workspace"
                          + (" + 4 grouped-GEMM streams" if grouped else "") + ")",
                          {"bytes_each": one, "count": count},
                          "transformer_engine/pytorch/module/base.py get_workspace, "
                          "get_multi_stream_cublas_workspace"))
    return terms


def _lt_workspace_bytes(setting) -> int:
    try:
        return int(str(setting).strip()) * KiB if setting is not None else 1024 * KiB
    except ValueError:
        return 1024 * KiB
