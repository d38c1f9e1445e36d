"""Eager torchao float8 linears under torchtitan's op-level SAC (memory/activations.py
float8_abs_items, assumption sac.float8_abs): torchtitan's _save_list named aten.abs from
bcebc0de5 (2024-11-26; 9dec370's list) to 88247277c (2025-02-06; not in e7c0cae's), and eager SAC
caches the abs() output of every float8 cast. Measured by bench/compile_saved.py --float8-sac
(torch 2.13 CPU, pytorch/ao@0afa4c1; bench/data/compile/float8_sac.torch-2.13.json), checked on
torchtitan's own llama3_8b.toml @9dec370 (fixtures/adapters/torchtitan/good) and the e7c0cae
benchmark config."""
from __future__ import annotations

import json
import os

import pytest

from memlint.adapters import torchtitan
from memlint.memory import activations as act

# test_compile_saved puts bench/ on the path; its `_estimate` runs torchtitan's 9dec370 file
from test_compile_saved import ROOT, _estimate

DATA = os.path.join(ROOT, "bench", "data", "compile", "float8_sac.torch-2.13.json")
GOOD = os.path.join(ROOT, "fixtures", "adapters", "torchtitan", "good")
TOKENS, D = 2 * 8192, 4096


@pytest.fixture(scope="module")
def measured():
    with open(DATA) as handle:
        return json.load(handle)


def _bench_shapes(data):
    s = data["shape"]
    hd = s["dim"] // s["heads"]
    return act.Shapes(d=s["dim"], dq=s["heads"] * hd, dk=s["kv_heads"] * hd,
                      dv=s["kv_heads"] * hd, heads=s["heads"], do=s["heads"] * hd,
                      ffn=s["ffn"], gated=True, layernorm=False), s["batch"] * s["seq"]


def _per_unit(items, data):
    return sum(i.per_token for i in items) / data["shape"]["dim"]


def test_the_abs_items_are_the_measured_difference(measured):
    """41.125 (9dec370's list) - 15.625 (e7c0cae's, the bf16 set) for tensorwise and rowwise;
    34.625 under FSDP2 with float8 all-gather: the weights' abs are gone."""
    sh, tokens = _bench_shapes(measured)
    rows = {(r.get("save_list"), r.get("recipe")): r["held_per_token_hidden"]
            for r in measured["rows"]}
    base = sum(i.per_token for i in act.op_sac_items(sh, 2)) / sh.d
    for recipe in ("tensorwise", "rowwise"):
        assert rows[("e7c0cae", recipe)] == pytest.approx(base, abs=1e-3)
        cast = act.float8_abs_items(sh, 2, 1, tokens, weights_cast=True)
        assert rows[("9dec370", recipe)] == pytest.approx(base + _per_unit(cast, measured),
                                                          abs=1e-3)
    fsdp = {(r.get("save_list"), r["linears"], r.get("recipe")):
            r["held_per_layer_per_token_hidden"] for r in measured["fsdp2"]}
    gathered = act.float8_abs_items(sh, 2, 1, tokens, weights_cast=False)
    assert fsdp[("9dec370", "float8_all_gather", "tensorwise")] == pytest.approx(
        base + _per_unit(gathered, measured), abs=1e-3)
    assert fsdp[("e7c0cae", "float8_all_gather", "tensorwise")] == pytest.approx(base, abs=1e-3)


def test_the_backward_peak_does_not_depend_on_the_list(measured):
    from memlint.memory import sac_backward
    peaks = {(r.get("save_list"), r.get("recipe")): r["bwd_peak_per_token_hidden"]
             for r in measured["rows"] if r.get("float8")}
    assert peaks[("9dec370", "tensorwise")] == peaks[("e7c0cae", "tensorwise")] \
        == sac_backward.BWD_PEAK[("eager", True)]


def _assumed(args):
    return {a["key"]: a["value"] for a in _estimate(args).assumed}


def test_an_undated_float8_run_names_the_assumption_and_counts_nothing_by_default():
    fp8 = ["--set", "precision=fp8"]
    assert _assumed(fp8)["sac.float8_abs"] == "recomputed"
    default = _estimate(fp8)
    assert default.stages[0].term("activations").bytes == \
        _estimate([]).stages[0].term("activations").bytes
    assert any("sac.float8_abs=saved" in n for n in default.notes)
    saved = _estimate(fp8 + ["--set", "sac.float8_abs=saved"])
    extra = (saved.stages[0].term("activations").bytes
             - default.stages[0].term("activations").bytes)
    # 8B: abs(input) 2 B x (6 d + ffn 14336) per token, abs(weight) 2 B x 218,103,808 per layer
    assert extra == pytest.approx(32 * (2 * (6 * D + 14336) * TOKENS + 2 * 218_103_808), rel=1e-6)
    assert "abs(weight)" in str(saved.stages[0].term("activations").inputs["saved"])


@pytest.mark.parametrize("args", [
    ["--set", "compile=true"],            # compiled: the partitioner keeps no abs
    ["--set", "recompute=full"],          # full AC keeps only the block input
    [],                                   # bf16
])
def test_the_assumption_only_where_it_applies(args):
    args = args + ([] if args == [] else ["--set", "precision=fp8"])
    assert "sac.float8_abs" not in _assumed(args)


def _load(name=None, text=None):
    path = os.path.join(GOOD, name) if name else "train.toml"
    return torchtitan.load(path, text if text is not None else open(path, encoding="utf-8").read())


def test_the_float8_switch_dates_the_file():
    converters = _load("llama3_8b_e7c0cae_float8_compile.toml")
    assert converters.extra["float8.switch"].value == "converters"
    old = _load(text="[float8]\nenable_float8_linear = true\n")
    assert old.extra["float8.switch"].value == "enable_float8_linear"
    assert "float8.switch" not in _load("llama3_8b_9dec370.toml").extra


def test_a_recipe_gathers_the_weights_in_bf16():
    """torchtitan components/quantization/float8.py @e7c0cae: a recipe_name asserts that
    enable_fsdp_float8_all_gather is off; the weights are all-gathered in bf16."""
    text = ('[model]\nconverters = ["float8"]\n[float8]\nrecipe_name = "rowwise"\n'
            'enable_fsdp_float8_all_gather = true\n')
    partial = _load(text=text)
    assert partial.extra["torchtitan.float8.recipe_name"].value == "rowwise"
    assert "fsdp.allgather_dtype_bytes" not in partial.extra
    tensorwise = _load(text=text.replace('recipe_name = "rowwise"\n', ""))
    assert tensorwise.extra["fsdp.allgather_dtype_bytes"].value == 1


def test_a_converters_file_is_after_the_abs_list():
    """`model.converters` came 2025-02-15 (57387af0e), after aten.abs left the list
    (88247277c, 2025-02-06): no assumption, nothing counted, even when asked."""
    from published import estimate_args
    here = os.getcwd()
    os.chdir(GOOD)
    try:
        estimate, _ = estimate_args(["llama3_8b_e7c0cae_float8_compile.toml", "--world-size",
                                     "8", "--set", "compile=false", "--set",
                                     "sac.float8_abs=saved"])
    finally:
        os.chdir(here)
    assert "sac.float8_abs" not in [a["key"] for a in estimate.assumed]
    saved = estimate.stages[0].term("activations").inputs["saved"]
    assert not any("abs(" in name for name in saved)
