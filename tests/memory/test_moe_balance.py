"""MoE routing imbalance (memory/moe_balance.py): a named, overridable assumption, default 1.0."""
from __future__ import annotations

import os

import pytest

from memlint.memory import activations as act
from memlint.memory import moe_balance
from memlint.memory.estimate import estimate
from memlint.memory.params import architecture
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIXTRAL = os.path.join(ROOT, "fixtures", "hf", "Mixtral-8x7B-v0.1.json")
BASE = ["framework=megatron", "world_size=8", "ep=8", "seq_len=4096", "recompute=none"]


def run(sets):
    scenario, diagnostics = build([overrides_partial(BASE + sets, model=MIXTRAL)])
    assert not [d for d in diagnostics if d.severity.label == "error"], diagnostics
    return estimate(scenario), scenario


def activations(est):
    phase = {p.name: p for p in est.stages[0].phases}["forward_end"]
    return next(t for t in phase.terms if t.name == "activations")


def test_default_is_balanced():
    est, scenario = run([])
    assert scenario.assumptions["moe.routing_imbalance"] == 1.0


def test_imbalance_scales_only_routed_items():
    arch = architecture({"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 128,
                         "num_hidden_layers": 2, "num_attention_heads": 4,
                         "num_key_value_heads": 2, "num_local_experts": 8,
                         "num_experts_per_tok": 2, "vocab_size": 100})
    items = act.fused_layer_items(act.shapes(arch, True), 2, True, 1, False, False, False, False)
    scaled = moe_balance.scale_routed(items, 1.5)
    for before, after in zip(items, scaled):
        factor = 1.5 if "(top-" in before.name else 1.0
        assert after.per_token == pytest.approx(before.per_token * factor)
    assert any("(top-" in i.name for i in items)


def test_imbalance_raises_activations_under_ep():
    balanced, _ = run([])
    skewed, _ = run(["moe.routing_imbalance=1.25"])
    assert activations(skewed).bytes > activations(balanced).bytes
    saved = activations(skewed).inputs["saved"]
    assert any("imbalance 1.25" in name for name in saved)


def test_no_effect_without_expert_parallelism():
    a, _ = run(["ep=1"])
    b, _ = run(["ep=1", "moe.routing_imbalance=2"])
    assert activations(a).bytes == activations(b).bytes


def test_below_one_is_refused():
    _, diagnostics = build([overrides_partial(["moe.routing_imbalance=0.5"])])
    assert any(d.severity.label == "error" for d in diagnostics)
