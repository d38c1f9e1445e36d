"""Issue 27 classes 2 and 5: LLaMA-Factory's other backends state their parallelism in the YAML
and memlint reads it. Real files: hiyouga/LLaMA-Factory examples at ff6d4d1 (fixtures/real-world,
SOURCES.md):

- mcore_adapter / Megatron-Bridge YAMLs (adapters/llamafactory_megatron.py): tensor / pipeline /
  expert parallel sizes, sequence parallel, recompute and the distributed optimizer, read through
  the Megatron interpretation; examples/megatron/qwen3_moe_full.yaml states "GPU memory: 8 * 78GB"
  in its own comment, an independent check;
- KTransformers (`use_kt: true`): the routed experts live and run on the CPU;
- v1 YAMLs (`llamafactory-cli v1`, adapters/llamafactory_v1.py): model, dist_config, peft_config,
  quant_config.
"""
import os

import pytest

from memlint.adapters.registry import load_file
from memlint.api import Options, check_paths
from memlint.diagnostics import Severity

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EX = os.path.join(ROOT, "fixtures", "real-world", "hiyouga__LLaMA-Factory", "examples")
GIB = 2 ** 30


def settings(*parts, fmt="llamafactory") -> dict:
    partial = load_file(os.path.join(EX, *parts))
    assert partial.fmt == fmt
    return {key: s.value for key, s in partial.settings.items()}


def test_mcore_adapter_yaml_states_megatron_parallelism():
    found = settings("megatron", "qwen3_moe_full.yaml")
    assert found["framework"] == "megatron"
    assert (found["tp"], found["pp"], found["ep"]) == (1, 4, 2)
    assert found["recompute"] == "full" and found["zero"] == 1   # use_distributed_optimizer
    assert found["model"] == "Qwen/Qwen3-30B-A3B-Instruct-2507" and found["grad_accum"] == 8
    assert not any(k.startswith("model.") for k in found)       # the HF checkpoint is the model


def test_mcore_adapter_qwen3_moe_matches_its_stated_memory():
    # "# GPU memory: 8 * 78GB" (the file's own comment) on 8 GPUs
    result = check_paths([os.path.join(EX, "megatron", "qwen3_moe_full.yaml")],
                         Options(assignments=("world_size=8",)))
    [estimate] = result.estimates
    assert not [d for d in result.diagnostics if d.severity == Severity.ERROR]
    assert estimate.peak_bytes / (78e9) == pytest.approx(1.0, abs=0.25)


def test_megatron_bridge_backend_and_sequence_parallel():
    assert settings("megatron", "qwen2_vl_full.yaml")["sp"] is True
    bridge = settings("megatron_bridge", "llama3_sft.yaml")
    assert bridge["framework"] == "megatron" and bridge["lora_rank"] == 8


def test_ktransformers_keeps_routed_experts_on_the_cpu():
    found = settings("ktransformers", "train_lora", "qwen3moe_lora_sft_kt.yaml")
    assert found["offload_experts"] == "cpu"
    result = check_paths([os.path.join(EX, "ktransformers", "train_lora",
                                       "qwen3moe_lora_sft_kt.yaml")], Options(assignments=("world_size=1",)))
    [estimate] = result.estimates
    # Qwen3-235B-A22B: ~470 GB of bf16 weights, nearly all routed experts; on the GPU only the
    # attention, embeddings and router stay (~16 GB of bf16 weights)
    assert estimate.peak_bytes < 32 * GIB
    assert not [d for d in result.diagnostics if d.severity == Severity.ERROR]


def test_v1_yaml_reads_dist_peft_and_quant_configs():
    fsdp = settings("v1", "train_full", "train_full_fsdp2.yaml", fmt="llamafactory-v1")
    assert fsdp["framework"] == "fsdp2" and fsdp["fsdp"] == "full" and fsdp["model"] == "Qwen/Qwen3-0.6B"
    lora = settings("v1", "train_lora", "train_lora_sft.yaml", fmt="llamafactory-v1")
    assert lora["lora_rank"] == 16
    qlora = settings("v1", "train_qlora", "quantization.yaml", fmt="llamafactory-v1")
    assert qlora["base_quant"] == "nf4"
    freeze = settings("v1", "train_freeze", "train_freeze_sft.yaml", fmt="llamafactory-v1")
    assert freeze["train_base"] is False and freeze["trainable_layers"] == "last:2"
    assert settings("v1", "train_full", "train_full_ulysses_cp.yaml", fmt="llamafactory-v1")["cp"] == 2


def test_v1_deepspeed_dist_config_loads_the_named_json():
    result = check_paths([os.path.join(EX, "v1", "train_full", "train_full_deepspeed.yaml")],
                         Options(assignments=("world_size=8",)))
    [estimate] = result.estimates
    assert estimate.scenario.parallelism.zero == 3
