"""A profile is only a set of assumption values (memlint/assumptions.py): the precise profile with
every value of the seed profile set one by one estimates exactly what the seed profile does."""
from __future__ import annotations

import pytest

import memlint
from memlint.assumptions import PROFILES

CASES = [
    dict(model="llama3-8b", world_size=16, tp=4, pp=2, zero=1, seq_len=8192),
    dict(model="mixtral-8x7b", world_size=32, tp=2, pp=2, ep=4, zero=2, recompute="full"),
    dict(model="llama3-8b", world_size=8, lora_rank=16, base_quant="nf4", framework="hf"),
    dict(model="llama3-70b", world_size=64, tp=8, pp=4, vpp=2, global_batch=64,
         precision="fp8"),
]


def _stages(est):
    return [s.to_dict() for s in est.stages], est.params


@pytest.mark.parametrize("case", CASES)
def test_seed_profile_is_its_assumption_values(case):
    seed = memlint.estimate(profile="seed", gpu="H100-80GB", **case)
    as_values = memlint.estimate(profile="precise", gpu="H100-80GB",
                                 settings=dict(PROFILES["seed"]), **case)
    assert _stages(seed) == _stages(as_values)


def test_one_value_changes_one_thing():
    base = dict(model="llama3-8b", world_size=8, zero=1, gpu="H100-80GB")
    precise = memlint.estimate(**base)
    one = memlint.estimate(settings={"step.phases": "one"}, **base)
    assert [p.name for p in one.stages[0].phases] == ["backward"]
    assert {p.name for p in precise.stages[0].phases} >= {"forward_end", "optimizer"}
    lean = memlint.estimate(settings={"buffers.enabled": False}, **base)
    assert not [t for t in lean.stages[0].terms if t.name.startswith("buffers.")]
    assert [t for t in precise.stages[0].terms if t.name.startswith("buffers.")]
