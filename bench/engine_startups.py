"""The vLLM start-up set of bench/accuracy.py: `vllm-startups/` (issue 28).

Each row is one `vllm serve` start-up on one H100-80GB whose log llm-d-planner parsed (the set's
README): the budget vLLM asked for, the weights it loaded, the profile run's torch peak, the
memory outside PyTorch the profile run added, the KV pool in GiB and tokens, the maximum
concurrency and the CUDA-graph pool. memlint's engine model (memlint/memory/rl/engine.py)
reproduces each from the model's config and the start-up's settings, term by term.

The engine model's three measured constants (assumptions engine.non_torch_bytes,
engine.non_torch_tp_bytes, engine.cuda_graph_bytes) are medians of the FIT rows only
(`split.json`); every other row is held out and reported on its own, and so is the version
sweep (vLLM 0.15-0.18, which no fit has seen).
"""
from __future__ import annotations

import csv
import glob
import json
import os
import statistics

ENGINE_DIR = "vllm-startups"
RAW_CSV = "results_raw-v0.19.0.csv"
GiB = 2**30
DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32",
          "auto": None}
# memlint counts these models' language model only (their vision towers are read through the
# generic keys and not counted: catalog notes), and gemma-3's sliding-window layers hold only
# their window in vLLM's hybrid KV manager
NOT_COUNTED = {"gemma-3": "vLLM's hybrid KV manager keeps only the window of gemma-3's "
                          "sliding-window layers (not modeled)",
               "Llama-4-Scout": "vision tower not counted by memlint's catalog entry"}


def split(calib: str) -> dict:
    with open(os.path.join(calib, ENGINE_DIR, "split.json"), encoding="utf-8") as handle:
        return json.load(handle)


def startup_rows(calib: str) -> list:
    """Every successful start-up, as dicts with the CSV's columns plus `set` (fit, held-out,
    version-sweep) and `vllm` (the version)."""
    fit_models = set(split(calib)["fit_models"])
    with open(os.path.join(calib, ENGINE_DIR, RAW_CSV), encoding="utf-8") as handle:
        rows = [dict(r, set="fit" if r["model"] in fit_models else "held-out", vllm="0.19.0")
                for r in csv.DictReader(handle) if r["status"] == "ok"]
    pattern = os.path.join(calib, ENGINE_DIR, "version-sweep", "*.json")
    for path in sorted(glob.glob(pattern)):
        rows.append(_sweep_row(path))
    return rows


def _sweep_row(path: str) -> dict:
    """A version-sweep JSON in the CSV's column names. Its log's total memory is not in the
    JSON: vLLM's KV pool is `requested - non-KV` (gpu_worker.py:341), so the total is
    (kv + non-KV) / utilization."""
    with open(path, encoding="utf-8") as handle:
        run = json.load(handle)
    args = run["vllm_args"]
    requested = run["kv_cache_memory_gib"] + run["total_non_kv_memory_gib"]
    version = os.path.basename(path).split("-vllm-v")[1].split("--")[0].replace("-", ".")
    return {"log_file": os.path.basename(path), "model": run["model"], "set": "version-sweep",
            "vllm": version, "tp": str(args["tensor_parallel_size"]),
            "pp": str(args["pipeline_parallel_size"]), "max_model_len": str(args["max_model_len"]),
            "dtype": args["dtype"], "quantization": str(args["quantization"]),
            "kv_cache_dtype": args["kv_cache_dtype"],
            "gpu_memory_utilization": str(args["gpu_memory_utilization"]),
            "init_total_memory_gib": str(requested / args["gpu_memory_utilization"]),
            "requested_memory_gib": str(requested),
            "weights_memory_gib": str(run["profiling_weights_memory_gib"]),
            "activation_memory_gib": str(run["activation_memory_gib"]),
            "non_torch_forward_gib": str(run["non_torch_forward_memory_gib"]),
            "total_non_kv_cache_gib": str(run["total_non_kv_memory_gib"]),
            "cuda_graph_actual_gib": "", "kv_cache_memory_gib": str(run["kv_cache_memory_gib"]),
            "kv_cache_tokens": str(run["kv_cache_tokens"]),
            "max_concurrency": str(run["max_concurrency"])}


def fitted_constants(calib: str) -> dict:
    """assumption name -> the median (GiB) of its column over the fit rows split.json names."""
    fit = [r for r in startup_rows(calib) if r["set"] == "fit"]
    select = {"engine.non_torch_bytes": lambda r: r["tp"] == "1" and r["pp"] == "1",
              "engine.non_torch_tp_bytes": lambda r: int(r["tp"]) >= 2,
              "engine.cuda_graph_bytes": lambda r: True}
    out = {}
    for name, how in split(calib)["fit"].items():
        out[name] = statistics.median(float(r[how["column"]]) for r in fit if select[name](r))
    return out


def estimate_row(row: dict):
    """(EngineBudget, None) for one start-up, or (None, the reason memlint cannot estimate it)."""
    from memlint.memory.context import resolve_context
    from memlint.memory.rl.engine import EngineSettings, budget
    from memlint.memory.rl.shape import engine_shape
    from memlint.scenario import build, overrides_partial

    for name, why in NOT_COUNTED.items():
        if name in row["model"]:
            return None, why
    scenario, problems = build([overrides_partial([f"model={row['model']}"])])
    if (scenario.model is None or not scenario.model.config
            or any(p.severity.name == "ERROR" for p in problems)):
        return None, "model not in memlint's catalog"
    try:
        context = resolve_context(scenario)
        arch, counts = context.require("architecture"), context.require("counts")
    except Exception as error:  # noqa: BLE001 - a model memlint cannot count
        return None, f"model not counted: {error}"
    kv = row["kv_cache_dtype"]
    settings = EngineSettings(tp=int(row["tp"]), pp=int(row["pp"]),
                              utilization=float(row["gpu_memory_utilization"]),
                              max_model_len=int(row["max_model_len"]),
                              kv_dtype=None if kv == "auto" else kv, dtype=DTYPES[row["dtype"]],
                              quantization=None if row["quantization"] == "None"
                              else row["quantization"])
    total = int(float(row["init_total_memory_gib"]) * GiB)
    return budget(engine_shape(arch, counts, scenario.model.config), settings, total,
                  scenario.assumptions), None


def _term(found, name: str) -> int:
    return sum(t.bytes for t in found.inside + found.outside if t.name == name)


def engine_run(row: dict) -> dict:
    """One start-up through memlint: the estimated and measured numbers (GiB) and the errors."""
    found, why = estimate_row(row)
    out = {"id": f"{row['model']} tp{row['tp']} pp{row['pp']} len {row['max_model_len']} "
                 f"{row['dtype']} kv {row['kv_cache_dtype']} vLLM {row['vllm']}",
           "set": row["set"], "vllm": row["vllm"]}
    if found is None:
        out["skipped"] = why
        return out
    measured_pool = float(row["kv_cache_memory_gib"])
    non_kv = sum(t.bytes for t in found.inside[:-1]) / GiB
    out.update({
        "kv_pool": (found.kv_pool / GiB, measured_pool),
        "kv_tokens": (found.pool_tokens, int(row["kv_cache_tokens"])),
        "concurrency": (found.concurrency, float(row["max_concurrency"])),
        "non_kv": (non_kv, float(row["total_non_kv_cache_gib"])),
        "weights": (found.weights / GiB, float(row["weights_memory_gib"])),
        "activation_peak": (_term(found, "engine.activation_peak") / GiB,
                            float(row["activation_memory_gib"])),
        "non_torch": (_term(found, "engine.non_torch") / GiB, float(row["non_torch_forward_gib"])),
    })
    if row["cuda_graph_actual_gib"]:
        out["cuda_graphs"] = (_term(found, "engine.cuda_graphs") / GiB,
                              float(row["cuda_graph_actual_gib"]))
    out["kv_pool_error"] = (out["kv_pool"][0] - measured_pool) / measured_pool
    return out


def engine_rows(calib: str) -> list:
    return [engine_run(row) for row in startup_rows(calib)]


def _errors(rows: list, key: str) -> list:
    """Relative errors of `key` ((estimated, measured) pairs), or absolute GiB for the small
    terms (non-torch memory, CUDA graphs) whose relative error says little."""
    out = []
    for row in rows:
        if key in row:
            got, want = row[key]
            out.append(got - want if key in ("non_torch", "cuda_graphs") else
                       (got - want) / want if want else 0.0)
    return out


def print_engine(rows: list, constants: dict, assumed: dict) -> None:
    print("\nvLLM start-up set (vllm-startups/: llm-d-planner, H100-80GB; memory/rl/engine.py)")
    print("fit constants (median of the fit rows) and the assumptions' values:")
    for name, median in constants.items():
        print(f"  {name:<28} fit {median:.3f} GiB   assumed {assumed[name] / GiB:.3f} GiB")
    print(f"{'set':<15}{'runs':>5}{'skipped':>8}  {'KV pool |err| median':>21}{'max':>8}"
          f"{'non-KV median':>15}{'tokens max':>12}{'non-torch':>11}{'graphs':>9}")
    for name in ("fit", "held-out", "version-sweep"):
        group = [r for r in rows if r["set"] == name]
        done = [r for r in group if "skipped" not in r]
        pool = [abs(e) for e in _errors(done, "kv_pool")]
        non_kv = [abs(e) for e in _errors(done, "non_kv")]
        tokens = [abs(e) for e in _errors(done, "kv_tokens")]
        torch_out = [abs(e) for e in _errors(done, "non_torch")]
        graphs = [abs(e) for e in _errors(done, "cuda_graphs")]
        print(f"{name:<15}{len(done):>5}{len(group) - len(done):>8}  "
              f"{_median(pool):>20.2%}{_max(pool):>8.2%}{_median(non_kv):>15.2%}"
              f"{_max(tokens):>12.2%}{_gib(_max(torch_out)):>10}{_gib(_max(graphs)):>9}")
    print("  (non-torch, graphs: largest absolute error in GiB)")
    print("held-out and version-sweep runs, KV pool estimated vs measured (GiB):")
    for row in rows:
        if row["set"] != "fit" and "skipped" not in row:
            got, want = row["kv_pool"]
            print(f"  {row['kv_pool_error']:+7.2%}  {got:6.2f} / {want:6.2f}  {row['id']}")
    skipped = [r for r in rows if "skipped" in r]
    if skipped:
        print("not estimated:")
        for row in skipped:
            print(f"  {row['id']}: {row['skipped']}")


def _gib(value: float) -> str:
    return "-" if value != value else f"{value:.2f}G"   # NaN: the set logs no such number


def _median(values: list) -> float:
    return statistics.median(values) if values else float("nan")


def _max(values: list) -> float:
    return max(values) if values else float("nan")
