"""Transformer Engine FP8 weights (memory/fp8.py): bf16 weights plus rowwise and columnwise FP8
copies of every linear weight, or FP8 parameters with a transposed copy (TE linear.py
_Linear.forward, base.py quantize_weight)."""
from __future__ import annotations

import os

from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLAMA8B = os.path.join(ROOT, "fixtures", "hf", "Meta-Llama-3.1-8B.json")
MIXTRAL = os.path.join(ROOT, "fixtures", "hf", "Mixtral-8x7B-v0.1.json")
BASE = ["framework=megatron", "seq_len=4096", "world_size=8", "tp=2"]


def run(sets, model=LLAMA8B):
    scenario, diagnostics = build([overrides_partial(BASE + sets, model=model)])
    assert not [d for d in diagnostics if d.severity.label == "error"]
    return estimate(scenario)


def weights(est):
    return {t.name: t.bytes for t in est.stages[0].terms if t.component == "weights"}


def test_fp8_keeps_bf16_weights_plus_two_fp8_copies():
    bf16, fp8 = run(["precision=bf16"]), run(["precision=fp8"])
    w = weights(fp8)
    # Llama-3.1-8B linear weights per layer: q 4096², k, v 4096·1024, o 4096², MLP 3·4096·14336
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336
    assert w["weights.fp8_copies"] == 2 * (32 * per_layer // 2)  # tp 2, 1 B + 1 B
    assert w["weights"] == weights(bf16)["weights"]
    assert fp8.peak_bytes > bf16.peak_bytes  # never less than bf16 for the same run


def test_fp8_params_replace_the_linear_weights():
    bf16 = run(["precision=bf16"])
    fp8p = run(["precision=fp8", "fp8_params=true"])
    w, b = weights(fp8p), weights(bf16)
    linear = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) // 2
    assert w["weights.fp8"] == linear and w["weights.fp8_transpose"] == linear
    assert w["weights"] == b["weights"] - 2 * linear  # bf16 for everything else
    assert "weights.fp8_copies" not in w


def test_fp8_experts_divided_by_etp_and_ep():
    est = run(["precision=fp8", "ep=4", "etp=1"], model=MIXTRAL)
    term = next(t for t in est.stages[0].terms if t.name == "weights.fp8_copies")
    assert term.inputs["expert_linear"] == 32 * 8 * 3 * 4096 * 14336 // 4


def test_no_fp8_terms_for_fsdp2_or_bf16():
    assert "weights.fp8_copies" not in weights(run(["precision=bf16"]))
    scenario, _ = build([overrides_partial(["framework=fsdp2", "fsdp=full", "world_size=8",
                                            "precision=fp8"], model=LLAMA8B)])
    assert not any(t.name.startswith("weights.fp8") for t in estimate(scenario).stages[0].terms)


def test_blackwell_needs_no_transpose():
    # TE utils.py is_non_tn_fp8_gemm_supported: sm100 reads FP8 in any layout
    hopper = weights(run(["precision=fp8", "gpu=H100-80GB"]))
    blackwell = weights(run(["precision=fp8", "gpu=B200"]))
    assert blackwell["weights.fp8_copies"] * 2 == hopper["weights.fp8_copies"]
    fp8p = weights(run(["precision=fp8", "fp8_params=true", "gpu=B200"]))
    assert "weights.fp8_transpose" not in fp8p
