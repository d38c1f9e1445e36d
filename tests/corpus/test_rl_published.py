"""Published RL verdicts, each a test: verl's docs/perf/device_tuning.rst (v0.7.0) lists, per model
size, the configuration that runs with the minimum resources, with the script behind it
(examples/tuning/*). memlint must not call any of them out of memory on the GPU its file name
names, and the phases whose size does not depend on generated lengths (weight sync, rollout) must
fit there. Where the published run's micro-batches hold only the real tokens (use_remove_padding),
an update over the GPU at full-length sequences is a warning that says the average sequence
length it fits up to (the tables' runs are GSM8K math, whose sequences are far shorter than the
configured maximum); the authors' own bisection comments (`58√ → 59×`) cannot be checked without
those lengths, so the tests pin that the estimate's threshold shrinks as their micro-batch grows.
"""
from __future__ import annotations

import os

import pytest

from memlint.adapters.registry import load_file
from memlint.api import Options, one_run, run_pipeline
from memlint.diagnostics import Severity
from memlint.memory.estimate import estimate
from memlint.rules import registry
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TUNING = os.path.join(ROOT, "fixtures", "real-world", "volcengine__verl", "examples", "tuning")
# script -> the GPU its name (and device_tuning.rst's Resource column) names
PUBLISHED = {
    "0.5b/qwen2-0.5b_grpo-lora_1_h100_fsdp_vllm.sh": "H100-80GB",
    "1.5b/qwen2-1.5b_grpo-lora_1_h100_fsdp_vllm.sh": "H100-80GB",
    "3b/qwen2-3b_grpo-lora_1_h100_fsdp_vllm.sh": "H100-80GB",
    "7b/qwen2-7b_grpo-lora_1_h100_fsdp_vllm.sh": "H100-80GB",
    "7b/qwen2-7b_grpo_2_h800_fsdp_vllm.sh": "H800",
    "14b/qwen2-14b_grpo-lora_2_h100_fsdp_vllm.sh": "H100-80GB",
    "14b/qwen2_14b_grpo_4_h800_fsdp_vllm.sh": "H800",
    "32b/qwen2-32b_grpo-lora_4_h100_fsdp_vllm.sh": "H100-80GB",
    "32b/qwen2_32B_grpo_8_h20_megatron_vllm.sh": "H20",
    "70b/qwen2-70b_grpo_32_h800_fsdp_vllm.sh": "H800",
    "70b/qwen2-72b_grpo-lora_8_h100_fsdp_vllm.sh": "H100-80GB",
    # the H20 70B script passes the literal string `model_path` as the model (a typo for
    # $model_path): no model to estimate, and no false error
    "70b/qwen2-70b_grpo_32_h20_fsdp_vllm.sh": "H20",
}


def _check(path: str, gpu: str):
    options = Options(assignments=(f"gpu={gpu}",))
    run = one_run([path], options)
    diagnostics, estimate_ = run_pipeline(run, options, registry())
    return diagnostics, estimate_


@pytest.mark.parametrize("name,gpu", sorted(PUBLISHED.items()))
def test_published_minimum_configuration_is_not_called_out_of_memory(name, gpu):
    diagnostics, est = _check(os.path.join(TUNING, name), gpu)
    errors = [d for d in diagnostics if d.severity == Severity.ERROR]
    assert not errors, [(d.code, d.message[:200]) for d in errors]
    if est is None:
        assert name.startswith("70b/qwen2-70b_grpo_32_h20"), name
        return
    for stage in est.stages:
        for phase in stage.phases:
            if phase.name in ("weight_sync", "rollout"):
                assert phase.total <= est.capacity_bytes, (name, phase.name, phase.total)


def _threshold(name: str, gpu: str, micro: int) -> int:
    partial = load_file(os.path.join(TUNING, name))
    scenario, _ = build([partial, overrides_partial([f"gpu={gpu}", f"micro_batch={micro}",
                                                     f"rl.logprob_micro_batch={micro}"])])
    est = estimate(scenario)
    stage = est.stages[0]
    update = next(p for p in stage.phases if p.name == "update_actor")
    found = est.rl.break_even(stage.stage, update, est.capacity_bytes)
    return est.rl.sequence_len if found is None else found


@pytest.mark.parametrize("name,fits,fails", [
    # the authors' bisection comments in the scripts (nproc_per_gpu: √ ran, × ran out of memory)
    ("14b/qwen2-14b_grpo-lora_2_h100_fsdp_vllm.sh", 58, 59),
    ("32b/qwen2-32b_grpo-lora_4_h100_fsdp_vllm.sh", 44, 46),
    ("70b/qwen2-72b_grpo-lora_8_h100_fsdp_vllm.sh", 22, 23),
])
def test_bisection_pairs_shrink_the_length_that_fits(name, fits, fails):
    assert _threshold(name, "H100-80GB", fits) >= _threshold(name, "H100-80GB", fails)
    assert _threshold(name, "H100-80GB", fits) > 2
