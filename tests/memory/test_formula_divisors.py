"""Every divisor of a state term is in its formula (issue 16): tp, the pipeline stage, ep/etp and
the ZeRO/FSDP shard, the way Megatron-LM's theoretical_memory_usage.py writes params / (tp·pp)."""
from __future__ import annotations

import memlint


def _formula(stage, name):
    term = stage.term(name) or next(t for p in stage.phases for t in p.terms if t.name == name)
    return term.formula


def test_dense_states_show_tp_pp_and_shard():
    est = memlint.estimate(model="llama3-8b", world_size=16, tp=2, pp=2, zero=1,
                           gpu="H100-80GB")
    stage = est.stages[0]
    weights = _formula(stage, "weights")
    assert "a stage of pp 2" in weights and "/ tp 2" in weights and "shard" not in weights
    moments = _formula(stage, "optimizer.moments")
    assert "/ tp 2" in moments and "/ shard 4" in moments     # dp 4 shards ZeRO-1 states
    count = stage.term("weights").inputs["params"]
    assert f"params {count:,} (" in weights


def test_expert_states_show_etp_and_ep():
    est = memlint.estimate(model="mixtral-8x7b", world_size=16, tp=2, ep=4, zero=1,
                           gpu="H100-80GB")
    experts = _formula(est.stages[0], "weights.experts")
    assert "/ (etp 2 · ep 4)" in experts
