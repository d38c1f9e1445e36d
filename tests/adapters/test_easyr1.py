"""EasyR1's launch scripts and config (memlint/adapters/easyr1.py) on its own examples
(fixtures/real-world/hiyouga__EasyR1 at the commit SOURCES.md names)."""
from __future__ import annotations

import os

import pytest

from memlint.adapters.registry import load_file
from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "fixtures", "real-world", "hiyouga__EasyR1", "examples")


def _values(name: str) -> dict:
    partial = load_file(os.path.join(EXAMPLES, name))
    assert partial.fmt == "easyr1"
    return {key: setting.value for key, setting in partial.settings.items()}


def test_script_lays_its_overrides_over_the_config_file_and_the_defaults():
    values = _values("qwen2_5_7b_math_grpo.sh")
    assert values["world_size"] == 8 and values["engine.tp"] == 2
    assert values["engine.gpu_memory_utilization"] == 0.6
    assert values["rl.samples_per_prompt"] == 5 and values["rl.prompts_per_step"] == 512
    # global_batch_size 128 x n 5 over 8 GPUs (fsdp_workers.py:141-146)
    assert values["rl.update_sequences"] == 80
    # dynamic batching: micro-batch x the longest sequence (dp_actor.py:198, :242)
    assert values["rl.update_tokens"] == 1 * 4096 and values["rl.logprob_tokens"] == 2 * 4096
    assert values["rl.actor_param_offload"] and values["rl.actor_optimizer_offload"]
    assert values["rl.reference"] == "model" and values["rl.reference_offload"]
    assert values["rl.reference_dtype"] == "bf16"      # fsdp_workers.py:198-199
    assert values["engine.sleep_level"] == 1 and values["engine.max_model_len"] == 4096
    assert values["model"] == "Qwen/Qwen2.5-7B-Instruct"


def test_lora_reference_is_the_actor_with_its_adapter_disabled():
    values = _values("qwen3_4b_math_grpo_lora.sh")
    assert values["lora_rank"] == 64 and values["rl.reference"] == "adapter"
    assert values["world_size"] == 1 and values["engine.tp"] == 1


def test_config_file_alone_is_read():
    values = _values("config.yaml")
    assert values["engine.tp"] == 2 and values["rl.framework"] == "easyr1"


def test_every_phase_follows_easyr1_conventions():
    partial = load_file(os.path.join(EXAMPLES, "qwen2_5_7b_math_grpo.sh"))
    scenario, _ = build([partial, overrides_partial(["gpu=H100-80GB"])])
    est = estimate(scenario)
    phases = {p.name: p for p in est.stages[0].phases}
    assert list(phases) == ["weight_sync", "rollout", "logprob_actor", "logprob_reference",
                            "update_actor"]
    # the offloaded actor is back on the GPU while the engine's weights wake for the sync
    assert any(t.name.startswith("actor.weights") for t in phases["weight_sync"].terms)
    # no entropy in the log-prob pass (dp_actor.py compute_log_prob)
    assert not [t for t in phases["logprob_actor"].terms if t.name.endswith("entropy")]
    assert est.peak_bytes < est.capacity_bytes


def test_an_unknown_field_is_a_warning(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main worker.actor.model.model_path=Qwen/Qwen2.5-7B "
                      "worker.rollout.gpu_memory_utilisation=0.5\n")
    partial = load_file(str(script))
    [warning] = [d for d in partial.diagnostics if d.code == "ML003"]
    assert "gpu_memory_utilization" in warning.message


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(EXAMPLES) if n.endswith(".sh")))
def test_every_example_is_read_without_an_error(name):
    partial = load_file(os.path.join(EXAMPLES, name))
    assert not [d for d in partial.diagnostics if d.severity.name == "ERROR"]


@pytest.mark.parametrize("util", ["9" * 400, "1.5", "0"])
def test_a_gpu_memory_utilization_that_is_no_share_is_a_warning(tmp_path, util):
    # found by bench/fuzz.py (seed 7091130): float() of a 400-digit YAML integer overflowed
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main worker.actor.model.model_path=Qwen/Qwen2.5-7B "
                      f"worker.rollout.gpu_memory_utilization={util}\n")
    partial = load_file(str(script))
    assert "engine.gpu_memory_utilization" not in partial.settings
    [warning] = [d for d in partial.diagnostics if "gpu_memory_utilization: expected" in d.message]
    assert warning.severity.name == "WARNING"
