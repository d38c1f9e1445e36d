"""FSDP terms: hand-checked numbers, and the sharded / all-gather / unsharded categories of the
FSDP2 calibration records (bench/data/calibration/fsdp2-records.json); the resident shards are
memory/states.py's terms."""
from __future__ import annotations

import json
import os

from hypothesis import given, strategies as st

from memlint.memory import fsdp as F
from memlint.memory import states

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CALIBRATION = os.path.join(ROOT, "bench", "data", "calibration", "fsdp2-records.json")

# The calibration llama (models/llama/config.json): d=512, ffn=1408, 8 layers, 8 heads, 2 kv
# heads (head_dim 64), vocab 32000, untied. Per layer: q,o 2·512·512 + k,v 2·512·128
# + SwiGLU 3·512·1408 + 2 norms · 512 = 2,819,072. Root: 2·32000·512 + 512 = 32,768,512.
LAYER = 2 * 512 * 512 + 2 * 512 * 128 + 3 * 512 * 1408 + 2 * 512
ROOT_PARAMS = 2 * 32000 * 512 + 512
TOTAL = 8 * LAYER + ROOT_PARAMS


def test_hand_checked_counts():
    assert LAYER == 2_819_072 and ROOT_PARAMS == 32_768_512 and TOTAL == 55_321_088


def _sharded(count: int, width: int, shard: int, kind: str) -> int:
    """The resident shard the model counts (memory/states.py) for `count` parameters."""
    group = [states.ShardedCount("dense", count, shard)]
    dt = states.Dtypes(param=width, grad=width, master=0, state=4, compute=2, autocast=False,
                       grads_persistent=False, note="")
    if kind == "weights":
        return sum(t.bytes for t in states.weight_terms(group, dt, 0, "full", "none"))
    return sum(t.bytes for t in states.optimizer_terms(group, dt, "adamw", 0, "full", "none"))


def test_resident_shards():
    assert _sharded(TOTAL, 4, 8, "weights") == TOTAL * 4 // 8 == 27_660_544
    assert _sharded(10, 2, 3, "weights") == 8   # ceil(10 / 3) = 4 parameters × 2 B


def test_unit_and_root():
    assert F.unit_allgather(LAYER, 2, prefetched=1).bytes == 2 * LAYER * 2
    root = F.root_unsharded(ROOT_PARAMS, 2)
    assert root.bytes == 2 * ROOT_PARAMS and root.name == "buffers.fsdp.root_unsharded"


def test_no_reshard_keeps_all_units():
    term = F.no_reshard_unsharded([LAYER] * 8, 2, ROOT_PARAMS)
    assert term.bytes == (8 * LAYER + ROOT_PARAMS) * 2


def test_recompute_traffic_is_not_a_memory_term():
    traffic = F.recompute_allgather_traffic([LAYER] * 8, 2, shard=8)
    assert "component" not in traffic
    assert traffic["bytes"] == -(-8 * LAYER * 2 * 7 // 8)
    assert F.recompute_allgather_traffic([LAYER], 2, shard=1)["bytes"] == 0


@given(st.integers(1, 10**12), st.sampled_from([1, 2, 4]), st.integers(1, 4096))
def test_shards_cover_the_whole(count, width, shard):
    assert _sharded(count, width, shard, "weights") * shard >= count * width


def test_against_fsdp2_calibration_records():
    records = json.load(open(CALIBRATION))["records"]
    assert records
    for record in records:
        peak = record["peak_by_category"]
        width = 4 if record["dtype_mode"] == "fp32" else 2
        world = record["world_size"]
        assert record["params_total"] == TOTAL
        assert _sharded(TOTAL, 4, world, "weights") == peak["Sharded Param"]
        # AdamW moments; the tracker also counts one fp32 `step` scalar per parameter tensor
        assert 0 <= peak["OptState"] - _sharded(TOTAL, 4, world, "optimizer") <= 400
        measured = peak["Unsharded Param"] + peak["All Gather"]
        if record["reshard_after_forward"]:
            # the peak falls at the loss: root unit unsharded + the last layer being gathered
            estimate = (F.root_unsharded(ROOT_PARAMS, width).bytes
                        + F.unit_allgather(LAYER, width, prefetched=0).bytes)
            assert peak["All Gather"] == LAYER * width
        else:
            estimate = F.no_reshard_unsharded([LAYER] * 8, width, ROOT_PARAMS).bytes
            assert record["forward_end"]["Unsharded Param"] == estimate
        assert estimate == measured


# -- mid-backward: prefetch of the unit before, unsharded grads, fp32 reduce-scatter buffers ----

def test_backward_unit_buffers_hand_checked():
    # bf16 compute, fp32 reduce (torchtitan mixed_precision_reduce = float32), 8 shards
    named = {t.name: t.bytes for t in F.backward_unit_buffers(LAYER, 2, 4, 8)}
    assert named == {"buffers.fsdp.backward_prefetch": 2 * LAYER,
                     "buffers.fsdp.unsharded_grads": 2 * LAYER,
                     "buffers.fsdp.reduce_scatter_input": 4 * LAYER,
                     "buffers.fsdp.reduce_scatter_output": 4 * LAYER // 8}


def test_backward_unit_buffers_gather_and_gradient_widths():
    """The prefetched unit in the gather width (float8 all-gather: 1 B); gradients only for
    the parameters that have them (FSDP2 + LoRA: the adapters)."""
    named = {t.name: t.bytes for t in F.backward_unit_buffers(LAYER, 2, 4, 8, gather_bytes=1,
                                                              grad_params=1000)}
    assert named == {"buffers.fsdp.backward_prefetch": LAYER,
                     "buffers.fsdp.unsharded_grads": 2 * 1000,
                     "buffers.fsdp.reduce_scatter_input": 4 * 1000,
                     "buffers.fsdp.reduce_scatter_output": 4 * 1000 // 8}


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
    float8 = _fsdp_estimate(["fsdp.allgather_dtype_bytes=1"])
    f8 = {t.name: t for t in {p.name: p for p in float8.stages[0].phases}["backward_layer"].terms}
    assert f8["buffers.fsdp.backward_prefetch"].bytes == layer   # float8 all-gather: 1 B
    start = {p.name: p for p in stage.phases}["backward_start"]
    acts = next(t for t in start.terms if t.name == "activations")
    assert names["activations"].bytes == acts.bytes * 31 // 32


def test_backward_layer_without_reshard_keeps_all_but_the_last_unit():
    est = _fsdp_estimate(["reshard_after_forward=false"])
    phase = {p.name: p for p in est.stages[0].phases}["backward_layer"]
    names = {t.name: t for t in phase.terms}
    assert names["buffers.fsdp.unsharded_no_reshard"].inputs["units"] == 31
    assert "buffers.fsdp.backward_prefetch" not in names
