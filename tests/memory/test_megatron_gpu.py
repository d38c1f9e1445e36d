"""The memory model on real Megatron-LM runs (issue 13): schedule, defaults, workspaces, MoE.

Measured values are Megatron-LM CI golden values on DGX H100 (world size 8), as recorded in
`../shared/calibration/gpu-megatron-ci/records.json`; the configs are byte copies of the same
cases (fixtures/megatron-ci/SOURCES.md).
"""
from __future__ import annotations

import os

import pytest

from memlint.adapters import megatron as M
from memlint.ir import Provenance
from memlint.memory import activations as act
from memlint.memory import extras
from memlint.memory.estimate import estimate
from memlint.memory.params import architecture, count_params
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CI = os.path.join(ROOT, "fixtures", "megatron-ci")
MiB = 1024**2


def ci_estimate(name: str, *sets: str):
    path = os.path.join(CI, name)
    with open(path, encoding="utf-8") as handle:
        partial = M.load(path, handle.read())
    cli = overrides_partial(["world_size=8", "gpu=H100-80GB", *sets])
    scenario, diagnostics = build([partial, cli])
    assert not [d for d in diagnostics if d.severity.label == "error"]
    return scenario, estimate(scenario)


def args_scenario(text: str, *sets: str):
    partial = M.load("run.txt", text)
    scenario, _ = build([partial, overrides_partial(["world_size=8", "gpu=H100-80GB", *sets])])
    return scenario


# -- whole runs: last-stage allocated vs Megatron's mem-max-allocated-bytes -------------------

@pytest.mark.parametrize("name, measured, after_step", [
    # interleaved 1F1B, pp 4, 3 virtual stages of 1 layer, TE spec, dropout defaults
    ("gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist.yaml", 2643299328, 763220480),
    # local spec (Megatron's own attention with its global memory buffer), 1F1B pp 2
    ("gpt3_mcore_tp1_pp2.yaml", 3633177600, 948653056),
])
def test_ci_runs_last_stage(name, measured, after_step):
    _, result = ci_estimate(name)
    last = result.stages[-1]
    assert abs(last.allocated_bytes - measured) / measured < 0.03
    persistent = sum(t.bytes for t in next(p for p in last.phases if p.name == "optimizer").terms
                     if t.component != "runtime")
    assert abs(persistent - after_step) / after_step < 0.05


def test_three_numbers_per_stage():
    _, result = ci_estimate("gpt3_mcore_tp1_pp2.yaml")
    for stage in result.stages:
        assert stage.allocated_bytes < stage.reserved_bytes < stage.device_bytes
        assert stage.device_bytes == stage.total_bytes
        data = stage.to_dict()
        assert data["allocated_bytes"] == stage.allocated_bytes
        assert data["reserved_bytes"] == stage.reserved_bytes


# -- workspaces ------------------------------------------------------------------------------

def test_workspace_terms_te_and_local():
    _, te = ci_estimate("gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist.yaml")
    last = te.stages[-1]
    # CUBLAS_WORKSPACE_CONFIG :4096:8 (ENV_VARS) = 32 MiB, forward + autograd threads
    assert last.term("buffers.cublas_workspace").bytes == 2 * 4096 * 1024 * 8
    assert last.term("buffers.te_workspace").bytes == 32 * MiB + 256
    assert last.term("buffers.attention_matmul_buffer") is None
    _, local = ci_estimate("gpt3_mcore_tp1_pp2.yaml")
    last = local.stages[-1]
    assert last.term("buffers.te_workspace") is None
    # bf16 × B 4 × 8 heads × 1024² (dot_product_attention.py, global memory buffer "mpu")
    assert last.term("buffers.attention_matmul_buffer").bytes == 2 * 4 * 8 * 1024 * 1024
    assert last.term("buffers.cublaslt_workspace").bytes == 2 * 1024 * 1024  # biased linears
    for stage in local.stages:   # in every phase, they never go away
        for phase in stage.phases:
            assert any(t.name == "buffers.cublas_workspace" for t in phase.terms)


def test_cublas_workspace_sizes():
    assert extras.cublas_workspace_bytes(None, (9, 0))[0] == 32 * MiB
    assert extras.cublas_workspace_bytes(None, (8, 0))[0] == 4096 * 1024 * 2 + 16 * 1024 * 8
    assert extras.cublas_workspace_bytes(":4096:2:16:8", (9, 0))[0] == 8 * MiB + 128 * 1024
    assert extras.cublas_workspace_bytes("garbage", (9, 0))[0] == 32 * MiB


def test_no_workspaces_on_cpu_or_seed():
    sc = args_scenario("--num-layers 2 --hidden-size 256 --num-attention-heads 4 "
                       "--seq-length 128 --micro-batch-size 1 --bf16\n", "device=cpu")
    assert not any(t.name.startswith("buffers.") for t in estimate(sc).stages[0].terms)


# -- interleaved 1F1B: Megatron's warm-up rule, every stage ----------------------------------

def test_interleaved_inflight_by_schedule_rule():
    # pp 4, vpp 3, m 4: last rank warm-up (3-1)·4 = 8 chunk forwards, holds 9 chunks = 3 stages
    assert act.inflight_microbatches(3, 4, 3, 4) == 3
    # first rank: 2·3 + 8 = 14 >= m·vpp = 12: every chunk of the step is in flight
    assert act.inflight_microbatches(0, 4, 3, 4) == 4
    # a group size of 6 and m 12: last rank 2·6 + 1 = 13 chunks
    assert act.inflight_microbatches(3, 4, 3, 12, group=6) == pytest.approx(13 / 3)
    # --overlap-moe-expert-parallel-comm: one more warm-up forward
    assert act.inflight_microbatches(3, 4, 3, 12, extra_warmup=1) == pytest.approx(10 / 3)
    # 1F1B unchanged: pp - i, at most m
    assert act.inflight_microbatches(0, 4, 1, 8) == 4
    assert act.inflight_microbatches(0, 4, 1, 2) == 2


def test_group_size_flag_reaches_the_schedule():
    base = ("--num-layers 8 --hidden-size 256 --num-attention-heads 4 --seq-length 128 "
            "--micro-batch-size 1 --global-batch-size 24 --bf16 "
            "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 ")
    plain = estimate(args_scenario(base + "\n")).stages[-1]
    grouped = estimate(args_scenario(base + "--microbatch-group-size-per-virtual-pipeline-stage"
                                            " 6\n")).stages[-1]
    ratio = (grouped.term("activations").inputs["inflight"]
             / plain.term("activations").inputs["inflight"])
    assert ratio == pytest.approx((6 + 1) / (2 + 1))   # (vpp-1)·g + 1 chunks on the last rank


# -- framework defaults and the model family -------------------------------------------------

def test_dropout_defaults_are_megatrons():
    sc = args_scenario("--num-layers 2 --hidden-size 256 --num-attention-heads 4\n")
    config = sc.model.config
    assert config["hidden_dropout"] == 0.1 and config["attention_dropout"] == 0.1
    assert config["embedding_dropout"] == 0.1
    assert "Megatron default 0.1" in sc.where("model.hidden_dropout").key
    sc = args_scenario("--num-layers 2 --hidden-size 256 --num-attention-heads 4 "
                       "--hidden-dropout 0.0 --attention-dropout 0\n")
    assert sc.model.config["hidden_dropout"] == 0.0
    assert sc.model.config["attention_dropout"] == 0.0


def test_dropout_masks_saved_with_defaults():
    text = ("--num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 128 "
            "--micro-batch-size 1 --bf16 --attention-backend unfused")
    with_dropout = estimate(args_scenario(text + "\n")).stages[0]
    without = estimate(args_scenario(text + " --hidden-dropout 0 --attention-dropout 0\n")
                       ).stages[0]
    saved = with_dropout.term("activations").inputs["saved"]
    assert "attention dropout mask" in saved and "mlp dropout mask" in saved
    assert "attention dropout mask" not in without.term("activations").inputs["saved"]


def test_gelu_layernorm_moe_has_experts():
    sc = args_scenario("--num-layers 4 --hidden-size 256 --num-attention-heads 4 "
                       "--num-experts 8 --moe-router-topk 2 --ffn-hidden-size 512\n")
    arch = architecture(sc.model.config)
    assert arch.moe is not None and arch.moe.num_experts == 8 and all(arch.moe_layers)
    assert arch.norm == "layernorm" and not arch.gated_mlp
    layer = count_params(arch).layers[0]
    assert layer.experts == 8 * 2 * 256 * 512          # fc1 + fc2 per GeLU expert
    assert layer.router == 256 * 8


def test_mla_without_experts_is_dense():
    sc = args_scenario("--num-layers 4 --hidden-size 256 --num-attention-heads 4 "
                       "--multi-latent-attention --kv-lora-rank 64 --swiglu "
                       "--normalization RMSNorm\n")
    arch = architecture(sc.model.config)
    assert arch.moe is None and arch.mla is not None and arch.mla.kv_lora_rank == 64
    assert count_params(arch).experts == 0


def test_megatron_gpt_count_matches_megatron_formula():
    """GPTModel, TE spec, LayerNorm, GeLU, biases, learned positions, tied embeddings:
    V·d + P·d + L·(12d² + 13d) + 2d (Megatron's own count for this layout)."""
    sc = args_scenario("--num-layers 12 --hidden-size 512 --num-attention-heads 8 "
                       "--max-position-embeddings 1024 --seq-length 1024 --vocab-size 50257\n")
    counts = count_params(architecture(sc.model.config))
    d, v = 512, 50304
    assert counts.total == v * d + 1024 * d + 12 * (12 * d * d + 13 * d) + 2 * d
    rope = args_scenario("--num-layers 12 --hidden-size 512 --num-attention-heads 8 "
                         "--position-embedding-type rope --vocab-size 50257\n")
    assert count_params(architecture(rope.model.config)).position_embedding == 0


def test_env_vars_recorded_from_yaml():
    path = os.path.join(CI, "gpt3_mcore_tp1_pp2.yaml")
    with open(path, encoding="utf-8") as handle:
        partial = M.load(path, handle.read())
    setting = partial.extra["env.CUBLAS_WORKSPACE_CONFIG"]
    assert setting.value == ":4096:8" and isinstance(setting.prov, Provenance)
    assert setting.prov.line == 5
