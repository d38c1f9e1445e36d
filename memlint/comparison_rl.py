"""`memlint compare` on an RL run: what verl's, OpenRLHF's and TRL's memory lines measure.

An RL estimate's stage is one GPU's step, phase by phase (memory/rl). What a log's torch counters
show is not always one phase's tensors:
- an inference engine in the trainer's process (verl's hybrid worker, TRL's vllm_mode colocate)
  that sleeps between rollouts releases the physical memory behind its weights and KV cache, but
  the tensors stay alive in PyTorch's memory pool (vllm-project/vllm v0.12.0
  device_allocator/cumem.py CuMemAllocator.sleep: `unmap_and_release(handle)` under tensors
  that `pointer_to_data` keeps), so `torch.cuda.max_memory_allocated()` and `_reserved()` count
  them in every phase: verl reads the device with `mem_get_info` for this reason
  (volcengine/verl v0.7.0 utils/profiler/performance.py: "since vllm's sleep mode works below
  pytorch"). The measured peak is then the largest phase plus the sleeping engine's pool, and
  can exceed the GPU. `sides` compares with that;
- an engine in its own process (OpenRLHF's vLLM engines, TRL's vllm_mode server) is not in the
  trainer's counters; its own start-up lines (logs.py style `vllm`) are compared with the
  engine's budget: weights, KV cache, CUDA graphs, the sleep-mode pool.
verl's `perf/cpu_memory_used_gb` is the node's used host RAM (psutil): compared with the host
RAM estimate of the busiest node (memory/host_nodes.py), which counts what the run puts there
(offloaded states, engine weights asleep at level 1, model loading) and not the OS or the data.
"""
from __future__ import annotations

#: measured metric -> what it is compared with, in words (beside compare.METRICS)
METRICS = {
    "host_used": "host RAM used on the node",
    "engine_weights": "vLLM weights (one engine GPU)",
    "engine_kv_cache": "vLLM KV cache (one engine GPU)",
    "engine_cuda_graphs": "vLLM CUDA graphs (one engine GPU)",
    "engine_pool": "vLLM sleep-mode pool (weights + KV)",
}
SIDE = {"host_used": "host_bytes", "engine_weights": "engine_weights_bytes",
        "engine_kv_cache": "engine_kv_cache_bytes", "engine_cuda_graphs": "engine_cuda_graphs_bytes",
        "engine_pool": "engine_pool_bytes"}
#: current values (between phases) an RL stage has no single phase for
NOT_COMPARED = ("allocated", "reserved", "device")
#: the engine's tensors in the sleep-mode pool (vLLM allocates them under use_memory_pool)
POOL_TERMS = ("engine.weights", "engine.kv_cache")


def in_process_sleeping(summary) -> bool:
    """Whether the engine runs in the trainer's process and sleeps between rollouts."""
    return (summary.engine is not None and summary.placement == "hybrid"
            and summary.sleep_level >= 1 and summary.framework in ("verl", "trl"))


def sides(estimate, stage, base: dict) -> dict:
    """`base` (compare.estimate_sides) with what an RL run's counters and engine lines measure."""
    summary = estimate.rl
    out = dict(base)
    engine = summary.engine
    notes = []
    if engine is not None:
        inside = {t.name: t.bytes for t in engine.inside}
        out["engine_weights_bytes"] = inside.get("engine.weights", 0)
        out["engine_kv_cache_bytes"] = inside.get("engine.kv_cache", 0)
        out["engine_cuda_graphs_bytes"] = sum(t.bytes for t in engine.outside
                                              if t.name == "engine.cuda_graphs")
        out["engine_pool_bytes"] = sum(inside.get(name, 0) for name in POOL_TERMS)
        out["engine_kv_tokens"] = engine.pool_tokens
    if engine is not None and in_process_sleeping(summary) and _has_engine(stage):
        pool = [t for t in engine.inside if t.name in POOL_TERMS]
        best, best_phase, best_terms = -1, None, []
        for phase in stage.phases:
            names = {t.name for t in phase.terms}
            asleep = [t for t in pool if t.name not in names and f"{t.name}.awake" not in names]
            tensors = [t for t in phase.terms if t.component != "runtime"] + asleep
            total = sum(t.bytes for t in tensors)
            if total > best:
                best, best_phase, best_terms = total, phase.name, tensors
        slack = base["reserved_bytes"] - base["allocated_bytes"]
        out["allocated_bytes"] = best
        out["reserved_bytes"] = best + slack
        out["tensor_terms"] = best_terms
        notes.append(f"the engine sleeps in the trainer's process: PyTorch still counts its "
                     f"weights and KV cache ({_gib(out['engine_pool_bytes'])}) in every phase "
                     f"(vLLM's sleep mode releases the memory below PyTorch); the estimated peak "
                     f"is phase {best_phase} plus them")
    host = max((node.total_bytes for node in estimate.host), default=0)
    if host:
        out["host_bytes"] = host
        notes.append("host RAM: psutil's used is every process of the node (Ray, workers, data) "
                     "without the page cache; the estimate counts what the run itself puts there "
                     "(offloaded states, sleeping engine weights, model loading)")
    out["rl_notes"] = notes
    return out


def _has_engine(stage) -> bool:
    return any(t.name.startswith("engine.") for phase in stage.phases for t in phase.terms)


def _gib(value: int) -> str:
    return f"{value / 1024**3:.2f} GiB"


def rank_notes(measured: dict, sides_: dict) -> list:
    """Notes for one rank: the KV pool in tokens (a count: no row of its own) and the RL notes."""
    notes = list(sides_.get("rl_notes", ()))
    tokens = measured.get("engine_kv_tokens")
    if tokens is not None and "engine_kv_tokens" in sides_:
        value, reading = tokens
        estimated = sides_["engine_kv_tokens"]
        shift = f" ({(value - estimated) / estimated:+.1%})" if estimated else ""
        notes.append(f"vLLM's KV cache holds {value:,} tokens (log line "
                     f"{reading.line if reading.line is not None else '?'}), estimated "
                     f"{estimated:,}{shift}")
    dropped = sorted(m for m in measured if m in NOT_COMPARED)
    if dropped:
        notes.append(f"{', '.join(dropped)} between phases not compared: an RL step's resident "
                     "set changes from phase to phase (the peaks are compared)")
    return notes
