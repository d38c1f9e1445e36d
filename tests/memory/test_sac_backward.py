"""The last layer's backward under torchtitan's op-level selective AC (memory/sac_backward.py):
its recompute and activation-gradient transients, measured by bench/compile_saved.py (torch 2.13
CPU, bench/data/compile/), and what is held beside them (the logits freed by torchtitan's
`del pred`, the LM head's gradient kept by FSDP2's root until the end of the backward). Runs on
torchtitan's own llama3_8b.toml @9dec370 (fixtures/adapters/torchtitan/good)."""
from __future__ import annotations

import json
import os

import pytest

from memlint.memory import sac_backward

# test_compile_saved puts bench/ on the path; its `_estimate` runs the same torchtitan file
from test_compile_saved import ROOT, _estimate

DATA = os.path.join(ROOT, "bench", "data", "compile")
TOKENS, D, VOCAB = 2 * 8192, 4096, 128256


def _load(name):
    with open(os.path.join(DATA, name)) as handle:
        return json.load(handle)


def test_the_constants_are_the_measured_backward_peaks():
    rows = {(r["compiled"], bool(r.get("float8"))): r["bwd_peak_per_token_hidden"]
            for r in _load("saved_llama_block.torch-2.13.json")["rows"] if r["ac"] == "op"}
    for (kind, float8), value in sac_backward.BWD_PEAK.items():
        assert value == rows[(kind == "compiled", float8)]


def test_the_bf16_peaks_scale_with_the_tokens_alone():
    """Nothing weight-sized in the bf16 peaks: the same bytes per token at 1024-4096 tokens."""
    rows = _load("bwd_peak_scaling.torch-2.13.json")["rows"]
    for compiled in (False, True):
        values = {r["bwd_peak_per_token_hidden"] for r in rows
                  if r["compiled"] == compiled and not r["float8"]}
        assert len(values) == 1
        assert values.pop() == sac_backward.BWD_PEAK[("compiled" if compiled else "eager",
                                                      False)]


def _phase(args, name):
    phases = {p.name: p for p in _estimate(args).stages[0].phases}
    return {t.name: t for t in phases[name].terms}


@pytest.mark.parametrize("args, per", [
    ([], 65.0469),
    (["--set", "compile=true"], 65.0469),   # compile.block_saved = eager: eager's
    (["--set", "compile=true", "--set", "compile.block_saved=partitioner"], 39.0156),
])
def test_the_last_layers_backward_is_in_the_recompute_phase(args, per):
    terms = _phase(args, "backward_recompute")
    term = terms["activations.backward_layer"]
    assert term.bytes == int(per * TOKENS * D)
    assert "bench/compile_saved.py" in term.source
    assert "activations.backward_layer" not in _phase(args, "backward_start")


def test_at_the_last_layers_backward_the_logits_are_gone_and_the_head_gradient_held():
    recompute, start = _phase([], "backward_recompute"), _phase([], "backward_start")
    assert "logits" in start and "logits" not in recompute
    head = recompute["gradients.lm_head"]
    assert head.bytes == (VOCAB * D + D) * 2   # FSDP2: unsharded, bf16
    assert "gradients.lm_head" not in start


def test_full_ac_recomputes_its_layer_after_the_loss_freed_the_logits():
    """Full AC: the layer's own recompute term, not op-SAC's measured one; the same `del pred`
    physics (the logits gone, the LM head's gradient held unsharded by FSDP2's root)."""
    terms = _phase(["--set", "recompute=full"], "backward_recompute")
    assert "activations.backward_layer" not in terms
    assert "activations.recomputed_layer" in terms and "logits" not in terms
    assert terms["gradients.lm_head"].bytes == (VOCAB * D + D) * 2
    assert "logits" in _phase(["--set", "recompute=full"], "backward_start")


def test_fsdp2_mid_backward_without_ac_holds_the_head_gradient():
    """No AC: FSDP2's mid-backward phase (a unit's backward) holds the root's unsharded LM head
    gradient beside the unit's, and no logits."""
    terms = _phase(["--set", "recompute=none"], "backward_layer")
    assert "logits" not in terms
    assert terms["gradients.lm_head"].bytes == (VOCAB * D + D) * 2
    assert "_root_post_backward_final_callback" in terms["gradients.lm_head"].source
    assert "buffers.fsdp.unsharded_grads" in terms


def test_gradient_accumulation_counts_the_head_gradient_once():
    """With the gradients persistent (micro-batches > 1), the head's is among them."""
    terms = _phase(["--set", "recompute=full", "--set", "global_batch=32"], "backward_recompute")
    assert "gradients.lm_head" not in terms
