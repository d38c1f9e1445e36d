"""torch.autocast under full recompute: what the layer checkpoints and the cast weight copies hold.

- The checkpoint of a layer is its input, the residual stream: under autocast over fp32 params
  the embedding output is fp32 and fp32 + bf16 matmul outputs promote to fp32, so 4 B per hidden
  unit (bf16 params keep a bf16 stream).
- autocast's cached bf16 copies of fp32 leaves live until the outermost autocast context exits
  (aten/src/ATen/autocast_mode.cpp cached_cast); a checkpointed forward saves none of them
  (torch/utils/checkpoint.py), so under full recompute they are there at the end of the forward,
  not when the backward starts, and one layer's again while it is recomputed.
The CPU records (bench/data/calibration/records.json: HF llama, amp_bf16, gradient checkpointing
use_reentrant False, MemTracker live bytes) are the measurements these follow.
"""
from __future__ import annotations

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.append(os.path.join(ROOT, "bench"))  # after tests/: bench/fuzz.py must not hide tests/fuzz

import accuracy  # noqa: E402
from published import GiB, estimate_args  # noqa: E402

CALIB = os.path.join(ROOT, "bench", "data", "calibration")
AMP_CKPT = ("llama|B2|T512|amp_bf16|sdpa|ckpt|adamw", "llama|B4|T1024|amp_bf16|sdpa|ckpt|adamw")


@pytest.fixture(scope="module")
def records():
    with open(os.path.join(CALIB, "records.json"), encoding="utf-8") as handle:
        return {r["id"]: r for r in json.load(handle)["records"]}


def _phases(stage) -> dict:
    return {p.name: {t.name: t for t in p.terms} for p in stage.phases}


@pytest.mark.parametrize("rid", AMP_CKPT)
def test_amp_checkpointed_records_peak_within_one_percent(records, rid):
    record = records[rid]
    predicted, stage, _ = accuracy.run_one(CALIB, record["config_file"],
                                           accuracy.hf_settings(record))
    measured = record["peak"]["total_bytes"]
    # before: +3.02% (every layer's copies held into the backward) and the bf16 checkpoints
    assert abs(predicted - measured) / measured < 0.01, (predicted, measured)
    terms = _phases(stage)
    hidden, layers = record["params"]["hidden_size"], record["params"]["n_layers"]
    checkpoints = terms["backward_start"]["activations.checkpoints"]
    assert checkpoints.bytes == layers * record["tokens"] * hidden * 4
    copies = terms["backward_start"]["activations.autocast_weight_copies"]
    assert copies.inputs["layer_linear_params"] == 0           # the LM head's alone
    assert copies.inputs["head_params"] == 32000 * hidden
    assert terms["forward_end"]["activations.autocast_weight_copies"].inputs[
        "layer_linear_params"] > 0


def test_fp32_adapters_over_a_bf16_base_are_cast_and_cached():
    """Qwen 7B LoRA, HF Trainer bf16 over a bf16 base (gpu-published qwen-7b-lora-T256): peft's
    fp32 adapters are leaves that require grad, so autocast caches their bf16 copies for the
    forward; the base is bf16 (nothing to cast), so the copies are the adapters' alone."""
    folder = os.path.join(CALIB, "gpu-published")
    with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as handle:
        row = next(r for r in json.load(handle) if r["id"] == "qwen-7b-lora-T256")
    before = os.getcwd()
    os.chdir(folder)
    try:
        estimate, _ = estimate_args(list(row["args"]))
    finally:
        os.chdir(before)
    terms = _phases(estimate.stages[0])
    lora = terms["forward_end"]["weights.lora"]
    copies = terms["forward_end"]["activations.autocast_weight_copies"]
    assert lora.inputs["bytes_per_param"] == 4
    assert copies.inputs["lora_params"] == lora.inputs["params"]
    assert copies.inputs["layer_linear_params"] == 0 and copies.inputs["head_params"] == 0
    assert copies.bytes == 2 * lora.inputs["params"]
    assert "activations.autocast_weight_copies" not in terms["backward_start"]
    assert terms["backward_start"]["activations.checkpoints"].inputs["bytes_per_token"] == 2 * 4096
    assert estimate.stages[0].total_bytes < 20.1 * GiB   # still under the README's figure
