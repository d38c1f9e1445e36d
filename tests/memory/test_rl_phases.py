"""The RL phase model (memlint/memory/rl) on real verl, OpenRLHF and TRL files, term by term.

Each number below is worked out by hand from the file's settings and the framework's code the
module docstrings cite; the tests pin the terms, not only the totals.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from memlint.adapters.registry import load_file
from memlint.memory.estimate import estimate
from memlint.memory.rl.result import RLEstimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "fixtures", "real-world")
GiB = 1024**3
QWEN2_7B = 7_615_616_512       # Qwen/Qwen2-7B (memlint's catalog; transformers' count)
LLAMA3_8B = 8_030_261_248


def _estimate(name: str, *settings: str) -> RLEstimate:
    partial = load_file(os.path.join(CORPUS, name))
    scenario, _problems = build([partial, overrides_partial(list(settings))])
    result = estimate(scenario)
    assert isinstance(result, RLEstimate)
    return result


def _phase(stage, name):
    return next(p for p in stage.phases if p.name == name)


def _term(phase, name):
    return next(t for t in phase.terms if t.name == name)


VERL_PPO = "volcengine__verl/examples/grpo_trainer/run_qwen2-7b.sh"


def test_verl_ppo_step_has_every_phase_with_its_resident_set():
    est = _estimate(VERL_PPO)
    stage = est.stages[0]
    names = [p.name for p in stage.phases]
    assert names == ["weight_sync", "rollout", "logprob_actor", "logprob_reference",
                     "values_critic", "update_critic", "update_actor"]
    rollout = _phase(stage, "rollout")
    # vLLM's budget: gpu_memory_utilization 0.6 of the 80 GiB card (gpu_worker.py:233)
    assert sum(t.bytes for t in rollout.terms if t.name.startswith("engine.")
               and t.name != "engine.cuda_graphs") == int(0.6 * 80 * GiB)
    # the actor's fp32 shard over 8 GPUs stays on the GPU (param_offload False)
    assert _term(rollout, "actor.weights").bytes == QWEN2_7B * 4 // 8
    # the reference is on the host (verl forces CPU offload of the reference under FSDP)
    assert not [t for t in rollout.terms if t.name.startswith("reference.")]
    host = {t.name: t.bytes for t in stage.host_terms}
    assert host["reference.weights"] == -(-QWEN2_7B * 4 // 8)
    # the engine sleeps at level 2 between rollouts: only its CUDA-graph pool stays
    update = _phase(stage, "update_actor")
    assert [t.name for t in update.terms if t.name.startswith("engine.")] == ["engine.cuda_graphs"]
    # the peak is the rollout, over every other phase
    assert stage.phase == "rollout" and stage.total_bytes == rollout.total


def test_verl_logits_are_bf16_kept_for_backward_and_entropy_in_the_old_logprob_pass():
    est = _estimate(VERL_PPO, "rl.logprob_micro_batch=4")
    stage = est.stages[0]
    # 4 sequences x (512 prompt + 512 response) tokens x vocab 152,064 x 2 B (bf16 logits)
    logits = _term(_phase(stage, "logprob_actor"), "actor.logits")
    assert logits.bytes == 4 * 1024 * 152_064 * 2
    # the old log-probs come with the entropy (fsdp_workers.py calculate_entropy=not is_lora):
    # softmax and softmax x logits, 2 + 2 B per element
    assert _term(_phase(stage, "logprob_actor"), "actor.entropy").bytes == 4 * 1024 * 152_064 * 4
    # the reference pass computes no entropy
    assert not [t for t in _phase(stage, "logprob_reference").terms if "entropy" in t.name]


def test_openrlhf_separate_gpus_are_stages_of_their_own():
    est = _estimate("OpenRLHF__OpenRLHF/examples/scripts/train_ppo_llama_ray.sh",
                    "model=llama3-8b")
    labels = est.rl.groups
    assert labels == {0: "actor + reference, 2 GPUs", 1: "reward, 2 GPUs", 2: "engine, 4 GPUs"}
    actor, reward, engine = est.stages
    assert {p.name for p in engine.phases} == {"weight_sync", "rollout"}
    # vllm_gpu_memory_utilization defaults to 0.95 in OpenRLHF v0.9.9
    rollout = _phase(engine, "rollout")
    budget = sum(t.bytes for t in rollout.terms if t.name.startswith("engine.")
                 and t.name != "engine.cuda_graphs")
    assert budget == int(0.95 * 80 * GiB)
    # ZeRO-3 shards the colocated reference over the actor's 2 GPUs, in bf16
    ref = _term(_phase(actor, "update_actor"), "reference.weights")
    assert ref.bytes == LLAMA3_8B * 2 // 2
    # four processes' CUDA contexts on an actor GPU? two roles: actor and reference
    context = _term(_phase(actor, "update_actor"), "runtime.cuda_context")
    assert context.inputs["processes"] == 2


def test_trl_grpo_colocates_vllm_in_the_training_process():
    est = _estimate("huggingface__open-r1/recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml",
                    "world_size=8")
    scenario = est.scenario
    assert scenario.engine.name == "vllm" and scenario.rl.placement == "hybrid"
    stage = est.stages[0]
    rollout = _phase(stage, "rollout")
    assert len([t for t in rollout.terms if t.name == "runtime.cuda_context"]) == 1
    # GRPO keeps the completion tokens' logits only (grpo_trainer.py logits_to_keep)
    micro, completion = scenario.training.micro_batch, scenario.rl.response_len
    logits = _term(_phase(stage, "update_actor"), "actor.logits")
    assert logits.inputs["tokens"] == micro * completion


def test_dpo_reference_model_counts_beside_the_policy():
    """alignment-handbook zephyr-7b-beta full DPO: TRL keeps a frozen copy of the policy."""
    est = _estimate("huggingface__alignment-handbook/recipes/zephyr-7b-beta/dpo/config_full.yaml",
                    "model=mistral-7b", "world_size=8")
    stage = est.stages[0]
    update = _phase(stage, "update_actor")
    ref = _term(update, "reference.weights")
    actor = sum(t.bytes for t in update.terms if t.name.startswith("actor.weights"))
    assert ref.bytes == actor      # the same model in the same dtype, unsharded
    # chosen and rejected in one forward: twice the micro-batch's sequences
    assert est.scenario.rl.paired
    assert _term(update, "actor.logits").inputs["tokens"] == 2 * 8 * 1024


def test_llamafactory_lora_dpo_reference_is_the_base_with_the_adapter_disabled():
    est = _estimate("hiyouga__LLaMA-Factory/examples/train_lora/llama3_lora_dpo.yaml",
                    "world_size=1")
    stage = est.stages[0]
    assert est.scenario.rl.reference == "adapter"
    assert not [t for p in stage.phases for t in p.terms if t.name.startswith("reference.")]
    assert "logprob_reference" in [p.name for p in stage.phases]


def test_llamafactory_full_kto_keeps_a_reference_copy():
    # LLaMA-Factory's own KTO example with the LoRA switched off (create_ref_model: a copy)
    est = _estimate("hiyouga__LLaMA-Factory/examples/train_lora/llama3_lora_kto.yaml",
                    "world_size=1", "lora_rank=0", "rl.reference=model")
    update = _phase(est.stages[0], "update_actor")
    assert _term(update, "reference.weights").bytes > 0


def test_padding_free_phase_reports_the_length_it_fits_up_to():
    est = _estimate("volcengine__verl/examples/tuning/7b/qwen2-7b_grpo_2_h800_fsdp_vllm.sh",
                    "gpu=H800")
    stage = est.stages[0]
    update = _phase(stage, "update_actor")
    assert update.total > est.capacity_bytes
    fits = est.rl.break_even(stage.stage, update, est.capacity_bytes)
    assert 2 < fits < 2048
    # at that length the phase fits, a tenth longer it does not
    assert est.rl.floors[(stage.stage, "update_actor")] <= est.capacity_bytes


def test_json_and_explain_show_every_phase():
    path = os.path.join(CORPUS, VERL_PPO)
    env = dict(os.environ, NO_COLOR="1")
    result = subprocess.run([sys.executable, "-m", "memlint", "estimate", path, "--format",
                             "json"], capture_output=True, text=True, cwd=ROOT, timeout=120,
                            env=env)
    data = json.loads(result.stdout)
    phases = data["estimates"][0]["stages"][0]["phases"]
    assert [p["phase"] for p in phases][:2] == ["weight_sync", "rollout"]
    assert all(sum(t["bytes"] for t in p["terms"]) == p["total_bytes"] for p in phases)
    assert sum(p["peak"] for p in phases) == 1
    explain = subprocess.run([sys.executable, "-m", "memlint", "estimate", path, "--explain"],
                             capture_output=True, text=True, cwd=ROOT, timeout=120,
                             env=env).stdout
    assert "phases of stage 0" in explain
    assert "Stage 0, phase update_critic" in explain and "engine.kv_cache" in explain


@pytest.mark.parametrize("util,fits", [(0.9, False), (0.6, True)])
def test_rollout_verdict_follows_the_engine_share(util, fits):
    est = _estimate(VERL_PPO, f"engine.gpu_memory_utilization={util}", "gpu=H100-80GB")
    rollout = _phase(est.stages[0], "rollout")
    assert (rollout.total <= est.capacity_bytes) is fits


@pytest.mark.parametrize("host,fits", [("128GiB", False), ("2TiB", True)])
def test_host_ram_per_node_is_a_limit_of_an_rl_run(host, fits):
    """play-verl's Qwen2-7B PPO with actor and critic offloaded (fixtures/logs/SOURCES.md): 8
    ranks of one node keep the actor's and critic's fp32 weights and Adam moments and the fp32
    reference on the host, 192.5 GiB."""
    from memlint.api import Options, one_run, run_pipeline
    from memlint.rules import registry

    path = os.path.join(ROOT, "fixtures", "logs", "verl-qwen2-7b-ppo-offload.sh")
    options = Options(assignments=("gpu=H100-80GB", f"host_memory={host}"))
    diagnostics, est = run_pipeline(one_run([path], options), options, registry())
    [node] = est.host
    assert node.total_bytes == pytest.approx(192.5 * GiB, rel=0.01)
    assert any(d.code == "ML701" for d in diagnostics) is not fits


OPENRLHF_PPO = "OpenRLHF__OpenRLHF/examples/scripts/train_ppo_llama_ray.sh"
TRL_GRPO = "huggingface__open-r1/recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml"
# (file, settings the file does not give: OpenRLHF's SFT checkpoint is Llama-3-8B's architecture)
NEMO_RL_GRPO = "NVIDIA-NeMo__RL/examples/configs/grpo_math_8B.yaml"
RUNS = [(VERL_PPO, ()), (OPENRLHF_PPO, ("--model", "meta-llama/Meta-Llama-3-8B")),
        (TRL_GRPO, ("--world-size", "8")), (NEMO_RL_GRPO, ())]


def _memlint(*argv) -> str:
    env = dict(os.environ, NO_COLOR="1")
    done = subprocess.run([sys.executable, "-m", "memlint", "estimate", *argv, "--gpu",
                           "H100-80GB"], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env=env)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize("name,extra", RUNS, ids=["verl", "openrlhf", "trl-grpo", "nemo-rl"])
def test_each_framework_gets_a_per_phase_estimate_in_every_format(name, extra):
    path = os.path.join(CORPUS, name)
    text = _memlint(path, *extra)
    assert "phases of stage 0" in text and "update_actor" in text
    doc = json.loads(_memlint(path, *extra, "--format", "json"))
    [est] = doc["estimates"]
    phases = [p["phase"] for s in est["stages"] for p in s["phases"]]
    assert "update_actor" in phases and ("rollout" in phases or "weight_sync" in phases)
    assert "Stage 0, phase" in _memlint(path, *extra, "--explain")
    html = _memlint(path, *extra, "--format", "html")
    assert 'class="rl-phases"' in html and "update_actor" in html


def test_openrlhf_kto_keeps_a_sharded_reference_beside_the_policy():
    """OpenRLHF's own KTO example (full parameters, ZeRO-3; its SFT checkpoint has Llama-3-8B's
    architecture): train_kto.py builds the reference with the eval config of the same ZeRO stage."""
    est = _estimate("OpenRLHF__OpenRLHF/examples/scripts/train_kto_llama.sh",
                    "model=meta-llama/Meta-Llama-3-8B", "world_size=8")
    update = _phase(est.stages[0], "update_actor")
    ref = _term(update, "reference.weights")
    assert ref.bytes == pytest.approx(LLAMA3_8B * 2 / 8, rel=0.01)   # bf16, sharded over 8
    assert est.scenario.rl.reference == "model" and not est.scenario.rl.paired


def test_llamafactory_lora_ppo_reference_is_the_adapter_disabled():
    """LLaMA-Factory's PPO example: LoRA policy, reward model a LoRA adapter on it (the default
    reward_model_type); the reference pass runs the base with the adapter disabled."""
    est = _estimate("hiyouga__LLaMA-Factory/examples/train_lora/llama3_lora_ppo.yaml",
                    "world_size=1")
    stage = est.stages[0]
    assert est.scenario.rl.reference == "adapter"
    assert [p.name for p in stage.phases] == ["logprob_reference", "update_actor"]
    assert not [t for p in stage.phases for t in p.terms if t.name.startswith("reference.")]


def test_json_phases_carry_the_three_numbers(capsys):
    """Each RL phase in the JSON has allocated / reserved / device bytes, as each stage has: the
    peak phase's are its stage's, device is the phase's total, allocated leaves the runtime out."""
    from memlint.cli import main

    main(["estimate", os.path.join(CORPUS, VERL_PPO), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    stage = data["estimates"][0]["stages"][0]
    runtime = {p["phase"]: sum(t["bytes"] for t in p["terms"] if t["component"] == "runtime")
               for p in stage["phases"]}
    reserved = {p["phase"]: sum(t["bytes"] for t in p["terms"]
                                if t["name"] == "runtime.allocator"
                                or t["name"].startswith("runtime.allocator."))
                for p in stage["phases"]}
    for phase in stage["phases"]:
        assert phase["device_bytes"] == phase["total_bytes"]
        assert phase["allocated_bytes"] == phase["total_bytes"] - runtime[phase["phase"]]
        assert phase["reserved_bytes"] == phase["allocated_bytes"] + reserved[phase["phase"]]
        if phase["peak"]:
            assert (phase["allocated_bytes"], phase["reserved_bytes"], phase["device_bytes"]) \
                == (stage["allocated_bytes"], stage["reserved_bytes"], stage["device_bytes"])
    assert any(phase["allocated_bytes"] < phase["device_bytes"] for phase in stage["phases"])
