"""Named assumptions of the memory model, and the two profiles that set them (DESIGN.md).

A profile is only a named set of assumption values; the model has one code path and reads these
values where the two profiles differ. Each assumption is overridable with `--set NAME=VALUE`.
"""
from __future__ import annotations

from memlint.keys import non_negative_float, non_negative_int, to_bool
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Callable


@record(frozen=True)
class Assumption:
    name: str
    convert: Callable[[Any], Any]
    doc: str
    source: str


def _at_least_one(value: Any) -> float:
    number = non_negative_float(value)
    if number < 1.0:
        raise ValueError(f"must be at least 1.0 (1.0 = balanced routing), got {value!r}")
    return number


_LIST = [
    Assumption("activations.model", lambda v: _choice(v, ("seed", "precise")),
               "seed: the articles' C_act coefficients per B·T·d; precise: per-architecture saved "
               "tensors", "DESIGN.md, memory model"),
    Assumption("activations.c_act", non_negative_float,
               "seed: activation bytes per B·T·d per layer with FlashAttention",
               "Korthikanti et al. 2022 (34 with FlashAttention)"),
    Assumption("activations.c_act_full_recompute", non_negative_float,
               "seed: activation bytes per B·T·d per layer under full recompute",
               "Chen et al. 2016 (only the layer input is kept: 2 B per element)"),
    Assumption("activations.c_attn_scores", non_negative_float,
               "seed: bytes per B·H·T² per layer when attention scores are materialized",
               "Korthikanti et al. 2022 (the 5·a·s/h term)"),
    Assumption("activations.tp_divides", to_bool,
               "whether tensor parallelism divides activations (seed profile: no; "
               "precise: yes, Korthikanti et al. 2022 Table 2)", "Korthikanti et al. 2022"),
    Assumption("states.model", lambda v: _choice(v, ("seed", "precise")),
               "seed: the articles' model states: parameters split evenly per layer from the "
               "totals, experts over tp·ep, 2 + 2 + 12 bytes per parameter, LoRA as L·8·d·r, "
               "nf4 at 0.5 B, QLoRA dequantizing d² at a time, an even pipeline split, no FP8 "
               "weight copies, no multi-token-prediction layers; precise: exact per-layer "
               "counts and the framework's dtypes",
               "seed 000 CH 1-3, 7.4, 9.2, 9.4; memory/params.py, memory/states.py"),
    Assumption("step.phases", lambda v: _choice(v, ("one", "timeline")),
               "one: a single moment holding weights, gradients, optimizer states and "
               "activations together (the articles' sum); timeline: end of forward, start of "
               "backward, recompute and optimizer step, each with what is alive then",
               "seed 000 CH 1; memory/estimate.py"),
    Assumption("buffers.enabled", to_bool,
               "count the frameworks' buffers and workspaces (ZeRO/FSDP buckets and all-gathers, "
               "cuBLAS and Transformer Engine workspaces)",
               "memory/buffers.py, memory/runtime.py workspace_terms"),
    Assumption("pipeline.inflight_microbatches", to_bool,
               "count the micro-batches a pipeline stage holds at once (1F1B / interleaved)",
               "Narayanan et al. 2021; Megatron-LM schedules.py"),
    Assumption("logits.enabled", to_bool, "count logits and loss buffers on the last stage",
               "transformers ForCausalLMLoss; Megatron fused cross entropy"),
    Assumption("parallel.ep_in_dp", to_bool,
               "expert parallelism is carved out of data parallelism (Megatron: world = "
               "tp·pp·cp·dp, expert dp = world/(etp·ep·pp)); seed: world = tp·pp·ep·dp",
               "Megatron-LM parallel_state.py"),
    Assumption("runtime.cuda_context_bytes", non_negative_int,
               "CUDA context + cuBLAS/cuDNN workspaces per process", "measured, see memory/runtime.py"),
    Assumption("runtime.nccl_bytes_per_group", non_negative_int,
               "NCCL communicator buffers per process group a rank joins",
               "NCCL default NCCL_BUFFSIZE 4 MiB x channels, see memory/runtime.py"),
    Assumption("runtime.allocator_fraction", non_negative_float,
               "a flat caching-allocator reserve as a fraction of tensor bytes, on top of the "
               "modeled one (memory/allocator.py); 0 unless measured (memlint compare "
               "--write-assumptions fits what the modeled terms leave)",
               "PyTorch caching allocator, see memory/runtime.py"),
    Assumption("compile.loss_saved", lambda v: _choice(v, ("logits", "eager")),
               "what a compiled cross-entropy keeps for its backward: logits (the compute-dtype "
               "logits and per-row statistics; the fp32 upcast, log-probabilities and their "
               "gradient are recomputed in one fused kernel and never materialized) or eager "
               "(the eager loss's fp32 buffers, an upper bound)",
               "torch/_functorch/partitioners.py min_cut_rematerialization_partition; "
               "memory/compile.py"),
    Assumption("compile.block_saved", lambda v: _choice(v, ("eager", "partitioner")),
               "what a compiled TransformerBlock under torchtitan's op-level activation "
               "checkpointing keeps for its backward: eager (the outputs the policy marks "
               "MUST_SAVE, as eager SAC caches them: an upper bound) or partitioner (what "
               "Inductor's min-cut partitioner saves, measured: w2's output, which no backward "
               "op reads, is not kept)",
               "bench/compile_saved.py (torch 2.6, 2.8 and 2.13); torch/_functorch/partitioners.py "
               "min_cut_rematerialization_partition; memory/compile.py"),
    Assumption("moe.routing_imbalance", _at_least_one,
               "max/mean tokens routed to one expert-parallel rank; multiplies routed-expert "
               "activations when ep > 1 (1.0: balanced; a capacity factor C caps it at C)",
               "memory/moe_balance.py (GShard capacity factor; Megatron "
               "--moe-expert-capacity-factor); default 1.0: no sourced typical value"),
    Assumption("host.pinned_pow2_rounding", to_bool,
               "pinned host buffers are rounded up to a power of two (PyTorch's caching host "
               "allocator); false where PyTorch is configured not to round",
               "aten/src/ATen/core/CachingHostAllocator.h; pytorch/pytorch#95823"),
    Assumption("sac.float8_abs", lambda v: _choice(v, ("recomputed", "saved")),
               "eager torchao float8 linears under torchtitan's op-level SAC, where the file's "
               "spelling does not date its torchtitan: whether the policy's list names aten.abs "
               "(saved: torchtitan bcebc0de5..88247277c, 2024-11-26..2025-02-06, which caches "
               "abs(input) and abs(weight) of every float8 cast; recomputed: every torchtitan "
               "since, and every file that spells float8 as model.converters)",
               "pytorch/torchtitan parallelize_llama.py _save_list at 9dec370 and e7c0cae; "
               "measured: bench/compile_saved.py --float8-sac (bench/data/compile/"
               "float8_sac.torch-2.13.json); memory/activations.py float8_abs_items"),
    Assumption("ssm.kernels", lambda v: _choice(v, ("auto", "fused", "torch")),
               "the kernels transformers' Mamba / Gated DeltaNet / short-conv layers run: fused "
               "(mamba_ssm, causal-conv1d, flash-linear-attention installed), torch (the "
               "modules' fallbacks, which keep the chunked scan's fp32 intermediates), auto "
               "(fused on CUDA, torch on a CPU)",
               "transformers integrations/hub_kernels.py use_kernel_func_from_hub_with_fallback; "
               "memory/mixer_activations.py"),
    Assumption("engine.non_torch_bytes", non_negative_int,
               "an inference engine's memory outside PyTorch that its profile run adds at tensor "
               "parallel size 1 (cuBLAS workspaces, allocator metadata)",
               "median of the fit rows of bench/data/calibration/vllm-startups (vLLM 0.19 on "
               "H100, llm-d-planner): non-torch forward increase 0.25 GiB at tp 1, pp 1"),
    Assumption("engine.non_torch_tp_bytes", non_negative_int,
               "the same at tensor parallel size 2 or more (NCCL communicators and vLLM's "
               "custom all-reduce buffers)",
               "median of the fit rows of bench/data/calibration/vllm-startups: 2.10 GiB at tp "
               "2 and 4"),
    Assumption("engine.cuda_graph_bytes", non_negative_int,
               "the engine's CUDA-graph pool, captured after the KV cache and kept through "
               "sleep mode (0 with enforce_eager)",
               "median of the fit rows of bench/data/calibration/vllm-startups ('Graph "
               "capturing finished ... took' 0.87 GiB; 0.51-1.85 GiB over the set); verl "
               "docs/perf/perf_tuning.rst"),
    Assumption("units", lambda v: _choice(v, ("GiB", "GB")),
               "default units of the text report", "GPU vendors state capacity in decimal GB"),
]

ASSUMPTIONS: dict = {a.name: a for a in _LIST}


def _choice(value: Any, options: tuple) -> str:
    text = str(value).strip()
    for option in options:
        if text.lower() == option.lower():
            return option
    raise ValueError(f"expected one of {', '.join(options)}, got {value!r}")


MiB = 1024**2

PROFILES: dict = {
    "seed": {
        "states.model": "seed",
        "step.phases": "one",
        "buffers.enabled": False,
        "activations.model": "seed",
        "activations.c_act": 34.0,
        "activations.c_act_full_recompute": 2.0,
        "activations.c_attn_scores": 5.0,
        "activations.tp_divides": False,
        "pipeline.inflight_microbatches": False,
        "logits.enabled": False,
        "parallel.ep_in_dp": False,
        "runtime.cuda_context_bytes": 0,
        "runtime.nccl_bytes_per_group": 0,
        "runtime.allocator_fraction": 0.0,
        "moe.routing_imbalance": 1.0,
        "compile.loss_saved": "eager",
        "compile.block_saved": "eager",
        "host.pinned_pow2_rounding": True,
        "sac.float8_abs": "recomputed",
        "ssm.kernels": "auto",
        "engine.non_torch_bytes": 256 * MiB,
        "engine.non_torch_tp_bytes": 2150 * MiB,
        "engine.cuda_graph_bytes": 891 * MiB,
        "units": "GB",
    },
    "precise": {
        "states.model": "precise",
        "step.phases": "timeline",
        "buffers.enabled": True,
        "activations.model": "precise",
        "activations.c_act": 34.0,
        "activations.c_act_full_recompute": 2.0,
        "activations.c_attn_scores": 5.0,
        "activations.tp_divides": True,
        "pipeline.inflight_microbatches": True,
        "logits.enabled": True,
        "parallel.ep_in_dp": True,
        "runtime.cuda_context_bytes": 600 * MiB,
        "runtime.nccl_bytes_per_group": 64 * MiB,
        "runtime.allocator_fraction": 0.0,
        "moe.routing_imbalance": 1.0,
        "compile.loss_saved": "logits",
        "compile.block_saved": "eager",
        "host.pinned_pow2_rounding": True,
        "sac.float8_abs": "recomputed",
        "ssm.kernels": "auto",
        "engine.non_torch_bytes": 256 * MiB,
        "engine.non_torch_tp_bytes": 2150 * MiB,
        "engine.cuda_graph_bytes": 891 * MiB,
        "units": "GiB",
    },
}


def profile_defaults(profile: str) -> dict:
    return PROFILES.get(profile, PROFILES["precise"])


def assumed(assumptions, name: str):
    """The value of assumption `name` in force (the precise profile's when a hand-built
    Assumptions leaves it out)."""
    return assumptions.get(name, PROFILES["precise"][name])
