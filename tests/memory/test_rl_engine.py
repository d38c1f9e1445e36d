"""The inference-engine model (memory/rl/engine.py) against measured vLLM start-ups.

bench/data/calibration/vllm-startups/ (llm-d-planner, its README) gives, per start-up, what vLLM
logged: the budget, the weights, the profile run's peak, the non-torch memory, the KV cache in GiB
and tokens. Its split.json names the rows the engine's measured constants are fit to; the others
are held out. Every run whose model memlint's catalog knows is reproduced term by term
(bench/engine_startups.py, which bench/accuracy.py prints).
"""
from __future__ import annotations

import os
import statistics
import sys

import pytest

from memlint.assumptions import PROFILES
from memlint.memory.context import resolve_context
from memlint.memory.rl.engine import EngineSettings, budget
from memlint.memory.rl.shape import engine_shape
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CALIBRATION = os.path.join(ROOT, "bench", "data", "calibration")
sys.path.append(os.path.join(ROOT, "bench"))

from engine_startups import engine_rows, estimate_row, fitted_constants, startup_rows  # noqa: E402

GiB = 1024**3
ROWS = startup_rows(CALIBRATION)
RUNS = engine_rows(CALIBRATION)
# term by term: the unquantized v0.19 runs (gpt-oss's mxfp4 leaves its attention in bf16, which
# the engine's one weight width per checkpoint does not say: its weights are 19% low)
MEASURED = [(row, estimate_row(row)[0]) for row in ROWS
            if row["set"] != "version-sweep" and row["quantization"] == "None"
            and estimate_row(row)[0] is not None]


def _pool_errors(group: str) -> list:
    return [abs(r["kv_pool_error"]) for r in RUNS if r["set"] == group and "skipped" not in r]


def test_the_constants_are_the_fit_rows_medians():
    """Each measured constant is the median of its column over the fit rows (the log's numbers
    are rounded to 0.01 GiB); no held-out row enters it."""
    for name, median in fitted_constants(CALIBRATION).items():
        assert PROFILES["precise"][name] / GiB == pytest.approx(median, abs=0.005), name


def test_enough_runs_are_reproduced():
    assert len(MEASURED) >= 30, len(MEASURED)
    assert len(_pool_errors("fit")) == 23 and len(_pool_errors("held-out")) >= 12


def test_kv_pool_error_on_the_fit_rows():
    errors = _pool_errors("fit")
    assert statistics.median(errors) < 0.01 and max(errors) < 0.03


def test_kv_pool_error_on_the_held_out_rows():
    errors = _pool_errors("held-out")
    assert statistics.median(errors) < 0.015 and max(errors) < 0.03


def test_version_sweep_holds_from_vllm_0_17():
    """Qwen3-14B on vLLM 0.15-0.18, never fit: from 0.17 the pool is within 1%; 0.15 and 0.16
    logged a 3.4 GiB larger profile-run peak, which memlint does not model (README)."""
    sweep = {r["vllm"]: r for r in RUNS if r["set"] == "version-sweep"}
    assert abs(sweep["0.17.0"]["kv_pool_error"]) < 0.01
    assert abs(sweep["0.18.0"]["kv_pool_error"]) < 0.01
    assert sweep["0.15.0"]["activation_peak"][1] - sweep["0.17.0"]["activation_peak"][1] > 3


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
