"""NeMo-RL's YAML configs (memlint/adapters/nemo_rl.py, nemo_rl_mapping.py) on its own examples
and recipes (fixtures/real-world/NVIDIA-NeMo__RL = NVIDIA-NeMo/RL examples/configs @81aa43dd,
v0.7.0, SOURCES.md)."""
from __future__ import annotations

import os

import pytest

from memlint.adapters import nemo_rl
from memlint.adapters.registry import load_file
from memlint.diagnostics import UNKNOWN_KEY, Severity
from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(ROOT, "fixtures", "real-world", "NVIDIA-NeMo__RL", "examples", "configs")
RECIPES = os.path.join(CONFIGS, "recipes", "llm")


def _partial(path: str):
    partial = load_file(path)
    assert partial.fmt == "nemo-rl"
    return partial


def _values(path: str) -> dict:
    return {k: s.value for k, s in _partial(path).settings.items()}


def _estimate(path: str, *sets: str):
    scenario, _ = build([_partial(path), overrides_partial(["gpu=H100-80GB", *sets])])
    return estimate(scenario)


def test_grpo_math_1b_maps_onto_the_rl_scenario_keys():
    values = _values(os.path.join(CONFIGS, "grpo_math_1B.yaml"))
    assert values["model"] == "Qwen/Qwen2.5-1.5B" and values["world_size"] == 1
    assert values["rl.framework"] == "nemo-rl"          # dtensor_cfg._v2: true (Automodel)
    assert values["rl.algorithm"] == "grpo" and values["rl.samples_per_prompt"] == 16
    assert values["rl.prompts_per_step"] == 32 and values["rl.reference"] == "model"
    # sequence_packing.train_mb_tokens = ${mul:${policy.max_total_sequence_length},
    # ${policy.train_micro_batch_size}} = 512 x 4, resolved statically
    assert values["rl.update_tokens"] == 2048 and values["rl.padding_free"] is True
    assert values["rl.logprob_tokens"] == 2048 and values["micro_batch"] == 1
    assert values["engine.name"] == "vllm" and values["engine.gpu_memory_utilization"] == 0.6
    assert values["engine.max_model_len"] == 512 and values["engine.sleep_level"] == 1
    assert values["rl.placement"] == "colocated"
    assert values["rl.actor_param_offload"] and values["rl.actor_optimizer_offload"]
    assert values["precision"] == "bf16" and values["framework"] == "fsdp2"


def test_a_recipe_inherits_its_parent_by_relative_path():
    path = os.path.join(RECIPES, "grpo-qwen2.5-32b-32n8g-fsdp2tp8-actckpt.v3.yaml")
    partial = _partial(path)
    values = {k: s.value for k, s in partial.settings.items()}
    assert values["world_size"] == 256 and values["tp"] == 8 and values["engine.tp"] == 4
    assert values["recompute"] == "full" and values["rl.update_tokens"] == 16384
    # gpu_memory_utilization comes from the parent, with the parent's line
    prov = partial.settings["engine.gpu_memory_utilization"].prov
    assert prov.file.endswith("grpo_math_1B.yaml") and prov.line
    assert values["engine.gpu_memory_utilization"] == 0.6


def test_the_v1_worker_and_non_colocated_generation():
    values = _values(os.path.join(RECIPES, "grpo-deepscaler-1.5b-8K.yaml"))
    assert values["rl.framework"] == "nemo-rl-v1"       # dtensor_cfg._v2: false
    values = _values(os.path.join(RECIPES,
                                  "grpo-llama3.1-8b-instruct-2n8g-fsdp2tp1-noncolocated.yaml"))
    # 2 nodes x 8: one node generates (grpo.py:646-660), the other trains
    assert values["world_size"] == 8 and values["engine.gpus"] == 8
    assert values["rl.placement"] == "separate" and "engine.sleep_level" not in values


def test_dpo_and_sft():
    values = _values(os.path.join(RECIPES, "dpo-llama3.1-8b-instruct-4n8g-fsdp2tp4.yaml"))
    assert values["rl.algorithm"] == "dpo" and values["rl.paired"] is True
    assert values["rl.reference"] == "model" and values["tp"] == 4 and values["world_size"] == 32
    values = _values(os.path.join(RECIPES, "sft-llama3.2-1b-2n8g-hsdp.yaml"))
    assert "rl.algorithm" not in values and values["fsdp"] == "hybrid"
    assert values["dp_replicate"] == 2 and values["dp_shard"] == 8


def test_every_phase_follows_nemo_rl_conventions():
    est = _estimate(os.path.join(CONFIGS, "grpo_math_8B.yaml"))
    phases = {p.name: p for p in est.stages[0].phases}
    assert list(phases) == ["weight_sync", "rollout", "logprob_actor", "logprob_reference",
                            "update_actor"]
    # the refit: the policy's weights on the GPU beside the woken engine weights; then the
    # rollout holds the engine only (the policy offloaded after the refit)
    assert any(t.name.startswith("actor.weights") for t in phases["weight_sync"].terms)
    assert not [t for t in phases["rollout"].terms if t.name.startswith("actor.")]
    # the reference pass is the policy's model holding the reference weights; the reference
    # itself is a pinned host copy (a host term, not a GPU one)
    assert not [t for t in phases["logprob_reference"].terms if t.name.startswith("reference.")]
    host = {t.name for t in est.stages[0].host_terms}
    assert "host.reference_weights" in host and "host.engine_weights" in host
    assert est.peak_bytes < est.capacity_bytes


def test_the_v1_worker_gathers_the_whole_model_for_its_log_prob_pass():
    est = _estimate(os.path.join(RECIPES, "grpo-deepscaler-1.5b-8K.yaml"))
    phases = {p.name: p for p in est.stages[0].phases}
    names = {t.name for t in phases["logprob_actor"].terms}
    assert "actor.unsharded_model" in names and "actor.gathered_units" not in names
    v2 = _estimate(os.path.join(CONFIGS, "grpo_math_8B.yaml"))
    names = {t.name for t in {p.name: p for p in v2.stages[0].phases}["logprob_actor"].terms}
    assert "actor.gathered_units" in names and "actor.unsharded_model" not in names


def test_the_megatron_backend_is_named_not_modeled():
    from memlint.facts.coverage import set_not_modeled

    partial = _partial(os.path.join(CONFIGS, "grpo_math_8B_megatron.yaml"))
    assert partial.settings["rl.framework"].value == "nemo-rl-megatron"
    found = [f.entry.key for f in set_not_modeled(partial.extra)]
    assert "policy.megatron_cfg.enabled" in found


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(CONFIGS) if n.endswith(".yaml")))
def test_every_example_reads_without_an_error_or_an_unknown_key(name):
    partial = _partial(os.path.join(CONFIGS, name))
    bad = [d for d in partial.diagnostics if d.severity == Severity.ERROR
           or d.code == UNKNOWN_KEY[0] or "not known statically" in d.message]
    assert bad == [], [d.message for d in bad]


def _write(tmp_path, name: str, text: str) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


BASE = ("grpo:\n  num_prompts_per_step: 8\n  num_generations_per_prompt: 4\n"
        "loss_fn:\n  reference_policy_kl_penalty: 0.0\n"
        "policy:\n  model_name: Qwen/Qwen2.5-1.5B\n  max_total_sequence_length: 1024\n"
        "  train_micro_batch_size: 2\n  train_global_batch_size: 16\n  precision: bfloat16\n"
        "  dtensor_cfg:\n    enabled: true\n    tensor_parallel_size: 1\n"
        "    context_parallel_size: 1\n"
        "  generation:\n    backend: vllm\n    vllm_cfg:\n      tensor_parallel_size: 1\n"
        "      gpu_memory_utilization: 0.5\n"
        "      max_model_len: ${policy.max_total_sequence_length}\n"
        "    colocated:\n      enabled: true\n"
        "cluster:\n  gpus_per_node: 2\n  num_nodes: 1\n")


def test_a_missing_parent_is_a_warning_naming_it(tmp_path):
    path = _write(tmp_path, "child.yaml", "defaults: nowhere/parent.yaml\n" + BASE)
    partial = _partial(path)
    found = [d for d in partial.diagnostics if d.data.get("parent") == "nowhere/parent.yaml"]
    assert found and found[0].severity == Severity.WARNING
    assert "not found" in found[0].message


def test_a_parent_outside_the_repository_root_is_not_read(tmp_path):
    (tmp_path / "parent.yaml").write_text(BASE)
    path = _write(tmp_path / "repo", "child.yaml", "defaults: ../parent.yaml\n"
                  "grpo:\n  num_prompts_per_step: 8\npolicy:\n  model_name: x\n")
    partial = _partial(path)
    found = [d for d in partial.diagnostics if d.data.get("parent") == "../parent.yaml"]
    assert found and "outside the repository root" in found[0].message
    assert "world_size" not in partial.settings


def test_override_marker_replaces_the_parents_mapping(tmp_path):
    _write(tmp_path, "parent.yaml", BASE)
    path = _write(tmp_path, "child.yaml", "defaults: parent.yaml\ncluster:\n  _override_: true\n"
                  "  gpus_per_node: 4\n  num_nodes: 2\ngrpo:\n  num_prompts_per_step: 16\n")
    values = {k: s.value for k, s in _partial(path).settings.items()}
    assert values["world_size"] == 8 and values["rl.prompts_per_step"] == 16
    assert values["rl.samples_per_prompt"] == 4 and values["engine.max_model_len"] == 1024


def test_an_unresolved_interpolation_is_a_warning_and_unknown(tmp_path):
    path = _write(tmp_path, "run.yaml", BASE.replace(
        "gpu_memory_utilization: 0.5", "gpu_memory_utilization: ${oc.env:UTIL}").replace(
        "train_micro_batch_size: 2", "train_micro_batch_size: ${.missing}"))
    partial = _partial(path)
    messages = [d.message for d in partial.diagnostics if d.severity == Severity.WARNING]
    assert any("environment variable UTIL" in m for m in messages)
    assert any("policy.missing" in m for m in messages)
    assert "engine.gpu_memory_utilization" not in partial.settings
    assert "micro_batch" not in partial.settings


def test_an_unknown_key_is_a_warning(tmp_path):
    path = _write(tmp_path, "run.yaml", BASE.replace("  precision: bfloat16\n",
                                                     "  precision: bfloat16\n  precisoin: x\n"))
    found = [d for d in _partial(path).diagnostics if d.code == UNKNOWN_KEY[0]]
    assert found and found[0].severity == Severity.WARNING
    assert "policy.precisoin" in found[0].message


def test_both_backends_enabled_is_refused(tmp_path):
    # nemo_rl/models/policy/lm_policy.py:93-97 @81aa43dd raises ValueError
    path = _write(tmp_path, "run.yaml", BASE.replace(
        "  dtensor_cfg:\n    enabled: true\n",
        "  megatron_cfg:\n    enabled: true\n  dtensor_cfg:\n    enabled: true\n"))
    errors = [d for d in _partial(path).diagnostics if d.severity == Severity.ERROR]
    assert len(errors) == 1 and "lm_policy.py:93-97" in errors[0].message


def test_a_world_size_not_divisible_by_the_model_parallel_size_is_refused(tmp_path):
    # nemo_rl/models/policy/lm_policy.py:205-208 @81aa43dd raises ValueError
    path = _write(tmp_path, "run.yaml", BASE.replace("tensor_parallel_size: 1\n    context",
                                                     "tensor_parallel_size: 4\n    context"))
    errors = [d for d in _partial(path).diagnostics if d.severity == Severity.ERROR]
    assert len(errors) == 1 and "lm_policy.py:197-208" in errors[0].message


def test_detection_is_specific():
    easyr1 = os.path.join(ROOT, "fixtures", "real-world", "hiyouga__EasyR1", "examples",
                          "config.yaml")
    with open(easyr1, encoding="utf-8") as handle:
        assert not nemo_rl.detect(easyr1, handle.read())
    assert not nemo_rl.detect("x.json", BASE) and nemo_rl.detect("x.yaml", BASE)


HEAD = "grpo:\n  num_prompts_per_step: 8\npolicy:\n  model_name: Qwen/Qwen2.5-1.5B\n"


@pytest.mark.parametrize("text,said", [
    (HEAD + "  train_micro_batch_size: " + "${mul:" * 300 + "2" + ", 2}" * 300 + "\n",
     "nested deeper"),
    (HEAD + "".join(f"  k{i}: ${{policy.k{i + 1}}}\n" for i in range(200)) + "  k200: 1\n"
     "  train_micro_batch_size: ${policy.k0}\n", "more than 16 keys"),
    (HEAD + "  max_total_sequence_length: ${mul:1e308, " + "9" * 400 + "}\n", "mul:1e308"),
    (HEAD + "  precision: ${policy.precision}\n", "refers back to itself"),
    (HEAD + "  precision: ${policy.model_name\n", "unclosed"),
    ("defaults: run.yaml\n" + HEAD, "a cycle"),
    ("defaults: [a.yaml, 3]\n" + HEAD, "expected a YAML path"),
    ('defaults: "a\\0b.yaml"\n' + HEAD, "NUL byte"),
], ids=["deep-mul", "deep-references", "overflow", "self", "unclosed", "cycle", "bad-defaults",
        "nul-in-parent"])
def test_odd_input_is_a_warning_never_an_error(tmp_path, text, said):
    partial = _partial(_write(tmp_path, "run.yaml", text))
    assert not [d for d in partial.diagnostics if d.severity == Severity.ERROR]
    assert any(said in d.message for d in partial.diagnostics
               if d.severity == Severity.WARNING), [d.message for d in partial.diagnostics]


def test_a_config_naming_no_backend_is_a_warning_unless_it_says_false(tmp_path):
    # lm_policy.py:128-132 refuses it; a config that does not set the key may get it from a
    # parent or the command line, so only an explicit `enabled: false` is the refusal
    partial = _partial(_write(tmp_path, "run.yaml", HEAD))
    assert not [d for d in partial.diagnostics if d.severity == Severity.ERROR]
    text = HEAD + "  dtensor_cfg:\n    enabled: false\n"
    errors = [d for d in _partial(_write(tmp_path, "off.yaml", text)).diagnostics
              if d.severity == Severity.ERROR]
    assert len(errors) == 1 and "lm_policy.py:128-132" in errors[0].message
