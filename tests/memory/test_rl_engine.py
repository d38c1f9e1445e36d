"""The inference-engine model (memory/rl/engine.py) against 50 measured vLLM start-ups.

tests/data/engine/vllm-0.19.0-h100-startups.csv (llm-d-planner, see SOURCES.md there) gives, per
start-up, what vLLM logged: the budget, the weights, the profile run's peak, the non-torch
memory, the KV cache in GiB and tokens. Every run whose model memlint's catalog knows (text
models; vision towers memlint does not count are skipped) is reproduced term by term.
"""
from __future__ import annotations

import csv
import os
import statistics

import pytest

from memlint.memory.context import resolve_context
from memlint.memory.rl.engine import EngineSettings, budget
from memlint.memory.rl.shape import engine_shape
from memlint.scenario import build, overrides_partial

GiB = 1024**3
DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "engine",
                    "vllm-0.19.0-h100-startups.csv")
DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32"}
# memlint counts these models' language model only (their vision towers are read through the
# generic keys and not counted: catalog notes), and gemma-3's sliding-window layers hold only
# their window in vLLM's hybrid KV manager
NOT_COUNTED = ("gemma-3", "Llama-4-Scout")


def _rows():
    with open(DATA, encoding="utf-8") as handle:
        return [r for r in csv.DictReader(handle)
                if r["status"] == "ok" and r["quantization"] == "None"]


def _estimate(row):
    scenario, problems = build([overrides_partial([f"model={row['model']}"])])
    if scenario.model is None or any(p.severity.name == "ERROR" for p in problems):
        return None
    try:
        context = resolve_context(scenario)
        arch, counts = context.require("architecture"), context.require("counts")
    except Exception:  # noqa: BLE001 - a model the catalog does not have
        return None
    kv = row["kv_cache_dtype"]
    settings = EngineSettings(tp=int(row["tp"]), pp=int(row["pp"]),
                              utilization=float(row["gpu_memory_utilization"]),
                              max_model_len=int(row["max_model_len"]),
                              kv_dtype=None if kv == "auto" else kv, dtype=DTYPES[row["dtype"]])
    total = int(float(row["init_total_memory_gib"]) * GiB)
    return budget(engine_shape(arch, counts, scenario.model.config), settings, total,
                  scenario.assumptions)


def _measured():
    out = []
    for row in _rows():
        if any(name in row["model"] for name in NOT_COUNTED):
            continue
        found = _estimate(row)
        if found is not None:
            out.append((row, found))
    return out


MEASURED = _measured()


def test_enough_runs_are_reproduced():
    assert len(MEASURED) >= 30, len(MEASURED)


def test_kv_pool_median_error_is_under_one_percent():
    errors = [abs(b.kv_pool / GiB - float(r["kv_cache_memory_gib"])) / float(
        r["kv_cache_memory_gib"]) for r, b in MEASURED]
    assert statistics.median(errors) < 0.01, statistics.median(errors)
    assert max(errors) < 0.03, max(errors)


@pytest.mark.parametrize("row,found", MEASURED,
                         ids=[f"{r['model']}-tp{r['tp']}pp{r['pp']}-{i}"
                              for i, (r, _b) in enumerate(MEASURED)])
def test_each_run_term_by_term(row, found):
    assert found.requested / GiB == pytest.approx(float(row["requested_memory_gib"]), abs=0.01)
    assert found.weights / GiB == pytest.approx(float(row["weights_memory_gib"]), rel=0.02,
                                                abs=0.1) or int(row["pp"]) > 1
    tokens = int(row["kv_cache_tokens"])
    assert abs(found.pool_tokens - tokens) / tokens < 0.03
    concurrency = float(row["max_concurrency"])
    assert found.concurrency == pytest.approx(concurrency, rel=0.03)


def _llama(**settings):
    scenario, _ = build([overrides_partial(["model=meta-llama/Llama-3.1-8B-Instruct"])])
    context = resolve_context(scenario)
    shape = engine_shape(context.require("architecture"), context.require("counts"),
                         scenario.model.config)
    return shape, scenario.assumptions


def test_refuses_when_one_request_of_max_model_len_does_not_fit():
    shape, assumptions = _llama()
    # 0.25 x 80 GiB leaves 20 GiB - 15 GiB of weights - ~2.2 GiB: a 128k-token request needs 16 GiB
    found = budget(shape, EngineSettings(utilization=0.25, max_model_len=131072), 80 * GiB,
                   assumptions)
    assert found.refusal and "kv_cache_utils.py:708" in found.refusal
    fits = budget(shape, EngineSettings(utilization=0.25, max_model_len=8192), 80 * GiB,
                  assumptions)
    assert fits.refusal is None


def test_refuses_when_no_memory_is_left_for_the_kv_cache():
    shape, assumptions = _llama()
    found = budget(shape, EngineSettings(utilization=0.18, max_model_len=4096), 80 * GiB,
                   assumptions)
    assert found.kv_pool == 0 and "kv_cache_utils.py:687" in found.refusal


def test_refuses_when_less_is_free_than_the_budget():
    shape, assumptions = _llama()
    found = budget(shape, EngineSettings(utilization=0.6, max_model_len=4096), 80 * GiB,
                   assumptions, free_memory=40 * GiB)
    assert "gpu_worker.py:237" in found.refusal


def test_sglang_takes_its_fraction_of_free_memory():
    shape, assumptions = _llama()
    vllm = budget(shape, EngineSettings(name="vllm", utilization=0.5), 80 * GiB, assumptions,
                  free_memory=60 * GiB)
    sglang = budget(shape, EngineSettings(name="sglang", utilization=0.5), 80 * GiB, assumptions,
                    free_memory=60 * GiB)
    assert vllm.requested == 40 * GiB and sglang.requested == 30 * GiB
