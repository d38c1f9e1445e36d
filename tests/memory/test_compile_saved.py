"""What a compiled torchtitan block keeps for its backward (memory/compile.py), against the
measurements bench/compile_saved.py made with torch 2.6, 2.8 and 2.13 (bench/data/compile/): under
op-level selective AC the compiled block does not keep w2's output (no backward op reads it;
eager SAC caches every MUST_SAVE output), under full AC it keeps what eager does. memlint counts
eager's set unless `compile.block_saved = partitioner` (the default is the upper bound)."""
from __future__ import annotations

import json
import os
import sys

import pytest

from memlint.memory import activations as act

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.append(os.path.join(ROOT, "bench"))  # after tests/: bench/fuzz.py must not hide tests/fuzz

from published import estimate_args  # noqa: E402

DATA = os.path.join(ROOT, "bench", "data", "compile")
VERSIONS = ("2.6", "2.8", "2.13")
TOML = os.path.join(ROOT, "fixtures", "adapters", "torchtitan", "good", "llama3_8b_9dec370.toml")


@pytest.fixture(scope="module", params=VERSIONS)
def measured(request):
    with open(os.path.join(DATA, f"saved_llama_block.torch-{request.param}.json")) as handle:
        data = json.load(handle)
    assert data["torch"].startswith(request.param + ".")
    return data, {(r["ac"], r["compiled"]): r for r in data["rows"] if not r.get("float8")}


def _bench_shapes(shape):
    d, heads, kv = shape["dim"], shape["heads"], shape["kv_heads"]
    head_dim = d // heads
    return act.Shapes(d=d, dq=heads * head_dim, dk=kv * head_dim, dv=kv * head_dim, heads=heads,
                      do=heads * head_dim, ffn=shape["ffn"], gated=True, layernorm=False)


def test_the_measurement_is_recorded_with_its_method(measured):
    data, rows = measured
    assert data["script"] == "bench/compile_saved.py"
    assert set(rows) == {(ac, c) for ac in ("op", "full", "none") for c in (False, True)}
    for row in rows.values():
        if row["named_bytes"] is not None:   # the named tensors are what the allocator holds
            assert abs(row["named_bytes"] - row["held_bytes"]) <= 0.001 * row["held_bytes"]


@pytest.mark.parametrize("compiled", [False, True])
def test_op_sac_items_are_the_measured_bytes(measured, compiled):
    data, rows = measured
    sh = _bench_shapes(data["shape"])
    per_token = sum(i.per_token for i in act.op_sac_items(sh, 2, 1, compiled))
    assert per_token / sh.d == pytest.approx(rows[("op", compiled)]["held_per_token_hidden"],
                                             abs=1e-3)


def test_the_compiled_block_drops_exactly_w2s_output(measured):
    _, rows = measured
    eager, compiled = rows[("op", False)], rows[("op", True)]
    assert eager["held_per_token_hidden"] - compiled["held_per_token_hidden"] == \
        pytest.approx(2.0, abs=1e-3)   # bf16 x d: the w2 output
    assert [t["node"] for t in eager["tensors"] if t["op"] == "mm"][-1] == "mm #7"
    # full AC keeps the block input, compiled or not (the CPU generator state aside)
    assert rows[("full", True)]["held_bytes"] - rows[("full", False)]["held_bytes"] < 8192
    assert rows[("full", False)]["held_per_token_hidden"] == pytest.approx(2.0)


def test_float8_linears_compiled_keep_the_same():
    """torchao float8 linears (pytorch/ao@0afa4c1, the H200 benchmark's): compiled, the block
    keeps what the bf16 one does; eager, 9dec370's list also caches every abs() output."""
    with open(os.path.join(DATA, "saved_llama_block.torch-2.13.json")) as handle:
        data = json.load(handle)
    rows = {(r["ac"], r["compiled"]): r for r in data["rows"] if r.get("float8")}
    assert data["torchao"] == "pytorch/ao@0afa4c1" and len(rows) == 4
    plain = {(r["ac"], r["compiled"]): r for r in data["rows"] if not r.get("float8")}
    assert rows[("op", True)]["held_per_token_hidden"] == pytest.approx(
        plain[("op", True)]["held_per_token_hidden"], abs=0.01)
    assert rows[("op", False)]["held_per_token_hidden"] > 2 * plain[("op", False)][
        "held_per_token_hidden"]


def test_under_fsdp2_the_compiled_blocks_keep_the_same():
    """Four op-SAC blocks under FSDP2 (rank 0 of 8, fake process group), as torchtitan wraps them:
    per layer the same bytes as the single block, with bf16 linears, float8 linears and float8
    all-gathers (the H200 benchmark's enable_fsdp_float8_all_gather)."""
    with open(os.path.join(DATA, "saved_llama_block.torch-2.13.json")) as handle:
        rows = {(r["linears"], r["compiled"]): r["held_per_layer_per_token_hidden"]
                for r in json.load(handle)["fsdp2"]}
    assert rows[("bf16", False)] == pytest.approx(15.625, abs=0.01)
    for kind in ("bf16", "float8", "float8_all_gather"):
        assert rows[(kind, True)] == pytest.approx(13.625, abs=0.01), kind


def test_compiled_loss_is_the_modeled_four_bytes_per_logit(measured):
    """logits.compiled_loss_term: the bf16 logits it keeps (2 B) and their bf16 gradient (2 B);
    the measurement counts above the logits, allocated before the loss."""
    data, _ = measured
    loss = {r["compiled"]: r for r in data["loss"]}
    assert 2 + loss[True]["fwd_held_per_logit"] + loss[True]["bwd_peak_per_logit"] == \
        pytest.approx(4, abs=0.01)
    assert loss[False]["fwd_held_per_logit"] + loss[False]["bwd_peak_per_logit"] == \
        pytest.approx(12, abs=0.01)   # the eager 3 x 4 B


def _estimate(args):
    here = os.getcwd()
    os.chdir(os.path.dirname(TOML))
    try:
        estimate, _ = estimate_args([os.path.basename(TOML), "--world-size", "8",
                                     "--set", "micro_batch=2", *args])
    finally:
        os.chdir(here)
    return estimate


def _activations(args, name="activations"):
    return _estimate(args).stages[0].term(name)


def test_the_block_assumption_is_listed_where_it_applies():
    keys = [a["key"] for a in _estimate(["--set", "compile=true"]).assumed]
    assert "compile.block_saved" in keys
    assert "compile.block_saved" not in [a["key"] for a in _estimate([]).assumed]
    full = [a["key"] for a in _estimate(["--set", "compile=true", "--set",
                                         "recompute=full"]).assumed]
    assert "compile.block_saved" not in full


def test_torchtitan_compiled_op_sac_keeps_no_w2_output():
    """torchtitan's llama3_8b.toml @9dec370 (selective op AC), as its benchmark ran it."""
    eager = _activations([])
    default = _activations(["--set", "compile=true"])
    assert default.bytes == eager.bytes   # compile.block_saved = eager, the upper bound
    compiled = _activations(["--set", "compile=true", "--set",
                             "compile.block_saved=partitioner"])
    d = 4096
    assert eager.inputs["bytes_per_token_per_layer"] - \
        compiled.inputs["bytes_per_token_per_layer"] == 2 * d
    assert "saved matmul outputs (wq, wv, w1)" in compiled.inputs["saved"]
    assert "bench/compile_saved.py" in compiled.source
    assert "compile" not in eager.source


def test_torchtitan_full_ac_keeps_the_same_compiled_or_not():
    full = [_activations(["--set", "recompute=full"] + extra, "activations.checkpoints")
            for extra in ([], ["--set", "compile=true", "--set",
                               "compile.block_saved=partitioner"])]
    assert full[0].bytes == full[1].bytes == 32 * 8192 * 16384
