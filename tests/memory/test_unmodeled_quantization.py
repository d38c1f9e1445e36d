"""Quantized checkpoints memlint does not model are named, never silently counted unquantized.

transformers applies a config.json `quantization_config` whenever it loads the checkpoint
(quantizers/auto.py AutoHfQuantizer). memlint models bitsandbytes 4/8-bit and GPTQ 4-bit in groups
of 128 (base_quant); every other method (fp8, ModelOpt, MXFP4, AWQ, compressed-tensors, GPTQ at
other widths) is counted in the run's parameter dtype and gets an ML107 warning saying so
(memlint/facts/coverage/checkpoint.json), direction "high": the weights are really smaller.
Megatron-LM and torchtitan train converted checkpoints: no warning there.

Configs: fixtures/shared-real/hf-configs (ai-dynamo/aiconfigurator@095f58a vendored copies of the
models' Hugging Face config.json: Qwen3-32B-FP8, Qwen3-32B-FP8-Static-PerTensor (ModelOpt),
gpt-oss-120b (MXFP4)). The AWQ and GPTQ cases put the fields transformers' AwqConfig / GPTQConfig
write (utils/quantization_config.py: quant_method, bits, group_size, zero_point, version /
desc_act) onto the real Qwen3-32B-FP8 config in place of its fp8 block.
"""
from __future__ import annotations

import json
import os

import pytest

import memlint
from memlint.scenario import UNMODELED_QUANTIZATION

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(ROOT, "fixtures", "shared-real", "hf-configs")


def _ml107(path, **scenario):
    result = memlint.check([path], world_size=8, lora_rank=16, **scenario)
    found = [d for d in result.diagnostics if d.code == "ML107"
             and d.message.startswith("quantization_config")]
    return found, result


@pytest.mark.parametrize("name,shown,line", [
    ("Qwen3-32B-FP8.json", "fp8 e4m3 block 128x128", 33),
    ("Qwen3-32B-FP8-Static-PerTensor.json", "FP8 8-bit float", None),
    ("gpt-oss-120b.json", "mxfp4", 69),
])
def test_real_quantized_configs_are_named_not_modeled(name, shown, line):
    found, result = _ml107(os.path.join(CONFIGS, name), framework="hf")
    assert len(found) == 1, [d.message for d in result.diagnostics]
    warning = found[0]
    assert warning.severity.name == "WARNING"
    assert warning.message.startswith(f"quantization_config {shown} is not modeled")
    assert "counts them unquantized, in the run's parameter dtype" in warning.message
    assert warning.data["direction"] == "high"
    assert warning.path.endswith(name)
    if line is not None:
        assert warning.line == line   # the quant_method line
    assert result.estimates[0].scenario.training.base_quant == "none"


def _with_block(tmp_path, block: dict) -> str:
    with open(os.path.join(CONFIGS, "Qwen3-32B-FP8.json"), encoding="utf-8") as handle:
        config = json.load(handle)
    config["quantization_config"] = block
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("block,shown", [
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
      "version": "gemm"}, "awq 4-bit group 128"),
    ({"quant_method": "gptq", "bits": 8, "group_size": 128, "desc_act": False}, "gptq 8-bit group 128"),
    ({"quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": False}, "gptq 4-bit group -1"),
])
def test_awq_and_other_gptq_widths_are_named(tmp_path, block, shown):
    found, _ = _ml107(_with_block(tmp_path, block), framework="hf")
    assert [d.message.split(" is not modeled")[0] for d in found] == [f"quantization_config {shown}"]


def test_modeled_and_empty_quantizations_are_not_named(tmp_path):
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}
    found, result = _ml107(_with_block(tmp_path, gptq), framework="hf")
    assert not found and result.estimates[0].scenario.training.base_quant == "gptq"
    nothing = {"quant_method": "bitsandbytes", "load_in_4bit": False, "load_in_8bit": False}
    found, result = _ml107(_with_block(tmp_path, nothing), framework="hf")
    assert not found and UNMODELED_QUANTIZATION not in result.estimates[0].scenario.extra


def test_frameworks_that_convert_the_checkpoint_are_not_warned():
    path = os.path.join(CONFIGS, "Qwen3-32B-FP8.json")
    found, result = _ml107(path, framework="megatron")
    assert not found and result.estimates
    titan = os.path.join(ROOT, "bench", "data", "calibration", "gpu-published", "configs",
                         "torchtitan", "llama3_8b_9dec370.toml")
    result = memlint.check([titan], model=path, world_size=8)
    assert result.estimates
    assert not [d for d in result.diagnostics if d.message.startswith("quantization_config")]


def test_an_oom_stays_an_error_unless_it_would_fit_without_the_weights():
    """The quantized weights can at most take the weights component away (checkpoint.json
    at_most): an OOM that holds without it stays an error, one that would fit is a warning."""
    path = os.path.join(CONFIGS, "Qwen3-32B-FP8.json")
    settings = dict(framework="hf", world_size=1, lora_rank=16, seq_len=16384, micro_batch=4,
                    recompute="none", precision="bf16", optimizer="adamw", attention="flash")
    small = memlint.check([path], gpu="H100-80GB", **settings)
    [oom] = [d for d in small.diagnostics if d.code == "ML101"]
    stage = small.estimates[0].peak_stage
    weights = stage.components()["weights"]
    assert stage.total_bytes - weights > 80 * 2**30       # still over without any weights
    assert oom.severity.name == "ERROR" and "quantization_config" in oom.message
    roomy = memlint.check([path], gpu_memory=stage.total_bytes - weights // 2, **settings)
    [soft] = [d for d in roomy.diagnostics if d.code == "ML101"]
    assert soft.severity.name == "WARNING"
