"""FSDP terms: hand-checked numbers, and the all-gather / unsharded categories of the FSDP2
calibration records (../shared/calibration/fsdp2-records.json)."""
from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, strategies as st

from memlint.memory import fsdp as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CALIBRATION = os.path.join(ROOT, "..", "shared", "calibration", "fsdp2-records.json")

# The calibration llama (models/llama/config.json): d=512, ffn=1408, 8 layers, 8 heads, 2 kv
# heads (head_dim 64), vocab 32000, untied. Per layer: q,o 2·512·512 + k,v 2·512·128
# + SwiGLU 3·512·1408 + 2 norms · 512 = 2,819,072. Root: 2·32000·512 + 512 = 32,768,512.
LAYER = 2 * 512 * 512 + 2 * 512 * 128 + 3 * 512 * 1408 + 2 * 512
ROOT_PARAMS = 2 * 32000 * 512 + 512
TOTAL = 8 * LAYER + ROOT_PARAMS


def test_hand_checked_counts():
    assert LAYER == 2_819_072 and ROOT_PARAMS == 32_768_512 and TOTAL == 55_321_088


def test_resident_shards():
    params, grads, states = F.resident_shards(TOTAL, shard=8)
    assert params["bytes"] == TOTAL * 4 // 8 == 27_660_544
    assert grads["bytes"] == 27_660_544 and grads["component"] == "gradients"
    assert states["bytes"] == TOTAL * 8 // 8 and states["component"] == "optimizer"
    assert F.sharded_params(10, 2, 3)["bytes"] == 7  # ceil(20 / 3)


def test_hsdp_divides_by_shard_only():
    terms = F.hsdp_resident_shards(TOTAL, dp_shard=4, dp_replicate=2)
    assert terms[0]["bytes"] == TOTAL * 4 // 4 and terms[0]["inputs"]["dp_replicate"] == 2


def test_unit_and_prefetch():
    assert F.unit_allgather(LAYER, 2, prefetched=1)["bytes"] == 2 * LAYER * 2
    peak = F.allgather_peak([10, 30, 20, 5], compute_bytes=2, prefetched=1)
    assert peak["bytes"] == (30 + 20) * 2


def test_no_reshard_keeps_all_units():
    term = F.no_reshard_unsharded([LAYER] * 8, 2, ROOT_PARAMS)
    assert term["bytes"] == TOTAL * 2


def test_mixed_precision_and_offload():
    shards, cast = F.mixed_precision_policy(TOTAL, LAYER, shard=2)
    assert shards["bytes"] == TOTAL * 4 // 2 and cast["bytes"] == LAYER * 2 // 2
    off = F.cpu_offload(TOTAL, LAYER, shard=2)
    assert [t["name"] for t in off["host"]] == ["fsdp.sharded_params.host",
                                                "fsdp.sharded_grads.host",
                                                "fsdp.sharded_optimizer.host"]
    assert off["gpu"][0]["bytes"] == LAYER * 4 // 2


def test_recompute_traffic_is_not_a_memory_term():
    traffic = F.recompute_allgather_traffic([LAYER] * 8, 2, shard=8)
    assert "component" not in traffic
    assert traffic["bytes"] == -(-8 * LAYER * 2 * 7 // 8)
    assert F.recompute_allgather_traffic([LAYER], 2, shard=1)["bytes"] == 0


def test_terms_build_the_contract_type():
    from memlint.memory.terms import Term

    for term in F.resident_shards(TOTAL, 2) + [F.root_unsharded(ROOT_PARAMS, 2)]:
        Term(**term)


def test_shard_degree_fill():
    assert F.shard_degree(64, tp=8) == 8
    assert F.shard_degree(64, tp=8, dp_replicate=2) == 4
    assert F.shard_degree(64, dp_shard=4, cp=2) == 8


@given(st.integers(1, 10**12), st.sampled_from([1, 2, 4]), st.integers(1, 4096))
def test_shards_cover_the_whole(count, width, shard):
    assert F.sharded_params(count, width, shard)["bytes"] * shard >= count * width


@pytest.mark.skipif(not os.path.exists(CALIBRATION), reason="calibration not present")
def test_against_fsdp2_calibration_records():
    records = json.load(open(CALIBRATION))["records"]
    assert records
    for record in records:
        peak = record["peak_by_category"]
        width = 4 if record["dtype_mode"] == "fp32" else 2
        world = record["world_size"]
        assert record["params_total"] == TOTAL
        assert F.sharded_params(TOTAL, 4, world)["bytes"] == peak["Sharded Param"]
        # AdamW moments; the tracker also counts one fp32 `step` scalar per parameter tensor
        assert 0 <= peak["OptState"] - F.sharded_optimizer(TOTAL, 8, world)["bytes"] <= 400
        measured = peak["Unsharded Param"] + peak["All Gather"]
        if record["reshard_after_forward"]:
            # the peak falls at the loss: root unit unsharded + the last layer being gathered
            estimate = (F.root_unsharded(ROOT_PARAMS, width)["bytes"]
                        + F.unit_allgather(LAYER, width, prefetched=0)["bytes"])
            assert peak["All Gather"] == LAYER * width
        else:
            estimate = F.no_reshard_unsharded([LAYER] * 8, width, ROOT_PARAMS)["bytes"]
            assert record["forward_end"]["Unsharded Param"] == estimate
        assert estimate == measured


# -- mid-backward: prefetch of the unit before, unsharded grads, fp32 reduce-scatter buffers ----

def test_backward_unit_buffers_hand_checked():
    # bf16 compute, fp32 reduce (torchtitan mixed_precision_reduce = float32), 8 shards
    named = {t["name"]: t["bytes"] for t in F.backward_unit_buffers(LAYER, 2, 4, 8)}
    assert named == {"fsdp.backward_prefetch": 2 * LAYER,
                     "fsdp.unsharded_grads": 2 * LAYER,
                     "fsdp.reduce_scatter_input": 4 * LAYER,
                     "fsdp.reduce_scatter_output": 4 * LAYER // 8}


def _fsdp_estimate(sets):
    from memlint.memory.estimate import estimate
    from memlint.scenario import build, overrides_partial

    model = os.path.join(ROOT, "fixtures", "hf", "Meta-Llama-3.1-8B.json")
    scenario, _ = build([overrides_partial(
        ["framework=fsdp2", "fsdp=full", "world_size=8", "dp_shard=8", "seq_len=2048"] + sets,
        model=model)])
    return estimate(scenario)


def test_backward_layer_phase_on_a_real_model():
    est = _fsdp_estimate([])
    stage = est.stages[0]
    phase = {p.name: p for p in stage.phases}["backward_layer"]
    names = {t.name: t for t in phase.terms}
    # Llama-3.1-8B decoder layer: 218,112,000 parameters; bf16 gathers, fp32 reduce-scatter
    layer = 218_112_000
    assert names["buffers.fsdp.backward_prefetch"].bytes == 2 * layer
    assert names["buffers.fsdp.reduce_scatter_input"].bytes == 4 * layer
    assert "logits" not in names
    start = {p.name: p for p in stage.phases}["backward_start"]
    acts = next(t for t in start.terms if t.name == "activations")
    assert names["activations"].bytes == acts.bytes * 31 // 32


def test_backward_layer_without_reshard_keeps_all_but_the_last_unit():
    est = _fsdp_estimate(["reshard_after_forward=false"])
    phase = {p.name: p for p in est.stages[0].phases}["backward_layer"]
    names = {t.name: t for t in phase.terms}
    assert names["buffers.fsdp.unsharded_no_reshard"].inputs["units"] == 31
    assert "buffers.fsdp.backward_prefetch" not in names
