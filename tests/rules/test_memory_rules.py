"""ML1xx on hand-built Estimates: each rule fires on its bad case and stays silent on the good."""
from helpers import GiB, estimate, run_rule, scenario, stage

from memlint.diagnostics import Severity
from memlint.memory.terms import Term
from memlint.rules.memory import (AttentionScoresMaterialized, ContextParallelNeeded,
                                  ExceedsGpuMemory, LogitsMemoryDominates, LowMemoryHeadroom)


def test_exceeds_fires_on_worst_stage_with_three_largest_terms():
    est = estimate(stage(0, weights=20 * GiB, optimizer=40 * GiB, activations=30 * GiB,
                         gradients=5 * GiB),
                   stage(1, weights=10 * GiB, activations=10 * GiB))
    [finding] = run_rule(ExceedsGpuMemory(), scenario(parallelism={"pp": 2}), est)
    assert "stage 0" in finding.message and "95.0 GiB" in finding.message
    assert "80.0 GiB" in finding.message and "H100-80GB" in finding.message
    assert "optimizer.total 40.0 GiB, activations.total 30.0 GiB, weights.total 20.0 GiB" \
        in finding.message
    assert "1 of 2 stages" in finding.message
    assert finding.data["excess_bytes"] == 15 * GiB
    assert finding.keys[0] == "zero"  # optimizer dominates: point at the sharding


def test_exceeds_silent_when_it_fits_or_without_estimate():
    est = estimate(stage(0, weights=20 * GiB, activations=30 * GiB))
    assert run_rule(ExceedsGpuMemory(), scenario(), est) == []
    assert run_rule(ExceedsGpuMemory(), scenario(), None) == []


def test_exceeds_uses_seed_units():
    est = estimate(stage(0, weights=90 * 10**9), capacity=80 * 10**9, profile="seed")
    [finding] = run_rule(ExceedsGpuMemory(), scenario(profile="seed"), est)
    assert "90.0 GB" in finding.message


def test_low_headroom_margin():
    tight = estimate(stage(0, weights=40 * GiB, activations=34 * GiB))  # 92.5%
    roomy = estimate(stage(0, weights=40 * GiB, activations=30 * GiB))  # 87.5%
    over = estimate(stage(0, weights=90 * GiB))
    [finding] = run_rule(LowMemoryHeadroom(), scenario(), tight)
    assert "92%" in finding.message or "93%" in finding.message
    assert run_rule(LowMemoryHeadroom(), scenario(), roomy) == []
    assert run_rule(LowMemoryHeadroom(), scenario(), over) == []
    assert run_rule(LowMemoryHeadroom(), scenario(), tight, margin=0.05) == []


def test_context_parallel_article_rule():
    # 50 GiB of states, 100 GiB of activations at cp=1: available 30 GiB -> 3.3 -> cp=4.
    est = estimate(stage(0, weights=50 * GiB, activations=100 * GiB))
    scen = scenario(training={"seq_len": 131072, "recompute": "full"})
    [finding] = run_rule(ContextParallelNeeded(), scen, est)
    assert finding.severity == Severity.ERROR
    assert finding.data["suggested_cp"] == 4
    assert "3.3" in finding.message and "cp=4" in finding.message
    assert "recompute" not in finding.message.split("cp=4")[1]


def test_context_parallel_counts_current_cp_and_warns_when_tight():
    # cp=2 already: 28 GiB of activations, 30 GiB available -> fits, within 10% -> warning.
    est = estimate(stage(0, weights=50 * GiB, activations=28 * GiB))
    scen = scenario(training={"seq_len": 131072}, parallelism={"cp": 2})
    [finding] = run_rule(ContextParallelNeeded(), scen, est)
    assert finding.severity is None  # the rule's default, warning
    assert finding.data["suggested_cp"] == 4
    assert "full recompute" in finding.message


def test_context_parallel_silent_cases():
    est = estimate(stage(0, weights=50 * GiB, activations=100 * GiB))
    short = scenario(training={"seq_len": 4096})
    assert run_rule(ContextParallelNeeded(), short, est) == []
    states_too_big = estimate(stage(0, weights=90 * GiB, activations=10 * GiB))
    assert run_rule(ContextParallelNeeded(), scenario(training={"seq_len": 131072}),
                    states_too_big) == []
    fits = estimate(stage(0, weights=20 * GiB, activations=20 * GiB))
    assert run_rule(ContextParallelNeeded(), scenario(training={"seq_len": 131072}), fits) == []


def test_attention_scores_materialized():
    scores = Term("activations.attention_scores", "activations", 12 * GiB, "5·H·T²·B·L", {})
    est = estimate(stage(0, weights=10 * GiB, activations=10 * GiB, terms=(scores,)))
    scen = scenario(training={"attention": "eager", "seq_len": 4096})
    [finding] = run_rule(AttentionScoresMaterialized(), scen, est)
    assert "12.0 GiB" in finding.message and "eager" in finding.message
    assert finding.keys[0] == "attention"
    assert run_rule(AttentionScoresMaterialized(), scenario(training={"seq_len": 1024}),
                    est) == []
    flash = estimate(stage(0, weights=10 * GiB, activations=10 * GiB))
    assert run_rule(AttentionScoresMaterialized(), scen, flash) == []


def test_logits_share_on_last_stage_only():
    est = estimate(stage(0, weights=10 * GiB, logits=1 * GiB),
                   stage(1, weights=10 * GiB, activations=10 * GiB, logits=10 * GiB))
    [finding] = run_rule(LogitsMemoryDominates(), scenario(parallelism={"pp": 2}), est)
    assert "stage 1" in finding.message and "33%" in finding.message
    assert run_rule(LogitsMemoryDominates(), scenario(parallelism={"pp": 2}), est,
                    share=0.4) == []
    first_only = estimate(stage(0, weights=10 * GiB, logits=20 * GiB),
                          stage(1, weights=10 * GiB, activations=10 * GiB))
    assert run_rule(LogitsMemoryDominates(), scenario(parallelism={"pp": 2}), first_only) == []
