"""ML6xx on hand-built Estimates, with the memory model replaced by a table of variants."""

import pytest
from helpers import GiB, at, estimate, run_rule, scenario, stage

from memlint.diagnostics import Severity
from memlint.ir import ModelSpec
from memlint.rules import _support
from memlint.rules.strategy import (MoeWithoutExpertParallel, OffloadWhenItFits,
                                    SequenceParallelOff, VisionEncoderOnFirstStage,
                                    Zero3WhenZero2Fits)

MIXTRAL = ModelSpec(config={"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
                        "num_hidden_layers": 32, "num_attention_heads": 32,
                        "num_key_value_heads": 8, "num_local_experts": 8,
                        "num_experts_per_tok": 2, "vocab_size": 32000}, name="mixtral-8x7b")


@pytest.fixture
def model(monkeypatch):
    """Replace the memory model: `table` maps a function of the scenario to an Estimate."""
    calls = []

    def install(rule):
        def fake(scen, context=None):
            assert context is None or context.scenario is scen   # the variant's own context
            calls.append(scen)
            return rule(scen)
        monkeypatch.setattr(_support, "estimate_of", fake)
        return calls
    return install


def test_moe_without_ep_suggests_smallest_fitting_ep(model):
    calls = model(lambda s: estimate(stage(0, weights=int(200 * GiB / s.parallelism.ep))))
    scen = scenario(model=MIXTRAL, parallelism={"world_size": 16},
                    provenance={"world_size": at(2, "world_size")})
    est = estimate(stage(0, weights=200 * GiB),
                   params={"total": 46_700_000_000, "experts": 45_000_000_000})
    [finding] = run_rule(MoeWithoutExpertParallel(), scen, est)
    assert finding.severity is None  # the rule's warning: exceeds-gpu-memory is the error
    assert finding.data["suggested_ep"] == 4  # 200/4 = 50 GiB fits, 200/2 = 100 does not
    assert "8 routed experts" in finding.message and "ep=4" in finding.message
    assert [c.parallelism.ep for c in calls] == [2, 4]


def test_moe_without_ep_only_where_it_helps(model):
    """Fits with room, one GPU, or a framework without expert parallelism: silent. Tight:
    info."""
    model(lambda s: estimate(stage(0, weights=int(76 * GiB / s.parallelism.ep))))
    moe = {"total": 10, "experts": 9}
    known = {"world_size": at(2, "world_size")}
    roomy = estimate(stage(0, weights=40 * GiB), params=moe)
    assert run_rule(MoeWithoutExpertParallel(), scenario(
        model=MIXTRAL, parallelism={"world_size": 8}, provenance=known), roomy) == []
    tight = estimate(stage(0, weights=76 * GiB), params=moe)
    [finding] = run_rule(MoeWithoutExpertParallel(), scenario(
        model=MIXTRAL, parallelism={"world_size": 8}, provenance=known), tight)
    assert finding.severity == Severity.INFO and finding.data["suggested_ep"] == 2
    over = estimate(stage(0, weights=200 * GiB), params=moe)
    assert run_rule(MoeWithoutExpertParallel(), scenario(
        model=MIXTRAL, parallelism={"world_size": 1}, provenance=known), over) == []
    assert run_rule(MoeWithoutExpertParallel(), scenario(model=MIXTRAL), over) == []  # GPUs?
    for framework in ("hf", "deepspeed", "fsdp2"):
        assert run_rule(MoeWithoutExpertParallel(), scenario(
            model=MIXTRAL, training={"framework": framework}, parallelism={"world_size": 8},
            provenance=known), over) == []


def test_moe_silent_for_dense_or_with_ep():
    est = estimate(stage(0, weights=40 * GiB), params={"total": 10, "experts": 0})
    assert run_rule(MoeWithoutExpertParallel(), scenario(), est) == []
    moe = estimate(stage(0, weights=40 * GiB), params={"total": 10, "experts": 9})
    assert run_rule(MoeWithoutExpertParallel(),
                    scenario(model=MIXTRAL, parallelism={"ep": 8}), moe) == []


def test_vision_on_first_stage(model):
    def variant(s):
        first = s.parallelism.first_stage_layers
        return estimate(stage(0, layers=first, weights=(first * 2 + 10) * GiB, vision=5 * GiB),
                        stage(1, layers=8, weights=16 * GiB))
    model(variant)
    est = estimate(stage(0, layers=8, weights=26 * GiB, vision=5 * GiB),
                   stage(1, layers=8, weights=16 * GiB))
    [finding] = run_rule(VisionEncoderOnFirstStage(), scenario(parallelism={"pp": 2}), est)
    assert "5.0 GiB" in finding.message and "15.0 GiB more" in finding.message
    assert "first_stage_layers=0" in finding.message or "first_stage_layers=" in finding.message
    assert finding.data["excess_bytes"] == 15 * GiB
    text = estimate(stage(0, weights=26 * GiB), stage(1, weights=16 * GiB))
    assert run_rule(VisionEncoderOnFirstStage(), scenario(parallelism={"pp": 2}), text) == []
    assert run_rule(VisionEncoderOnFirstStage(), scenario(),
                    estimate(stage(0, weights=26 * GiB, vision=5 * GiB))) == []


def test_sequence_parallel_off(model):
    model(lambda s: estimate(stage(0, weights=10 * GiB, activations=8 * GiB)))
    est = estimate(stage(0, weights=10 * GiB, activations=10 * GiB))
    [finding] = run_rule(SequenceParallelOff(), scenario(parallelism={"tp": 4}), est)
    assert "tp=4" in finding.message and "2.0 GiB" in finding.message
    [no_estimate] = run_rule(SequenceParallelOff(), scenario(parallelism={"tp": 4}), None)
    assert "tp=4" in no_estimate.message
    assert run_rule(SequenceParallelOff(), scenario(parallelism={"tp": 4, "sp": True}), est) == []
    assert run_rule(SequenceParallelOff(), scenario(), est) == []


def test_zero3_when_zero2_fits(model):
    model(lambda s: estimate(stage(0, weights=(60 if s.parallelism.zero == 2 else 40) * GiB)))
    est = estimate(stage(0, weights=40 * GiB))
    [finding] = run_rule(Zero3WhenZero2Fits(), scenario(parallelism={"zero": 3}), est)
    assert "zero=2" in finding.message and "1.5x" in finding.message
    model(lambda s: estimate(stage(0, weights=75 * GiB)))
    assert run_rule(Zero3WhenZero2Fits(), scenario(parallelism={"zero": 3}), est) == []
    assert run_rule(Zero3WhenZero2Fits(), scenario(parallelism={"zero": 2}), est) == []


def test_zero3_covers_fsdp_full(model):
    calls = model(lambda s: estimate(stage(0, weights=50 * GiB)))
    est = estimate(stage(0, weights=40 * GiB))
    [finding] = run_rule(Zero3WhenZero2Fits(), scenario(parallelism={"fsdp": "full"}), est)
    assert "shard_grad_op" in finding.message
    assert calls[0].parallelism.fsdp == "shard_grad_op"


def test_offload_when_it_fits(model):
    def variant(s):
        extra = 30 if s.parallelism.offload_params == "none" else 0
        return estimate(stage(0, weights=(20 + extra) * GiB, optimizer=(
            60 if s.parallelism.offload_optimizer == "none" else 0) * GiB))
    model(variant)
    scen = scenario(parallelism={"zero": 3, "offload_optimizer": "cpu",
                                 "offload_params": "cpu"})
    est = estimate(stage(0, weights=20 * GiB))
    findings = run_rule(OffloadWhenItFits(), scen, est)
    # without optimizer offload: 20 + 60 = 80 > 72 -> no; without param offload: 50 -> yes
    assert [f.keys for f in findings] == [("offload_params",)]
    assert "5-20x" in findings[0].message
    none = scenario(parallelism={"zero": 3})
    assert run_rule(OffloadWhenItFits(), none, est) == []


def test_with_parallelism_keeps_the_rest():
    scen = scenario(parallelism={"tp": 2}, training={"seq_len": 8192})
    changed = _support.with_parallelism(scen, ep=4)
    assert changed.parallelism.ep == 4 and changed.parallelism.tp == 2
    assert changed.training == scen.training and scen.parallelism.ep == 1
    assert type(changed) is type(scen)
