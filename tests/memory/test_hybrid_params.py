"""Exact parameter counts of hybrid, linear-attention and encoder-decoder models
(memlint.memory.hybrid_model, t5_model, megatron_hybrid).

Every expected total below is what `sum(p.numel() for p in model.parameters())` reports for the
model transformers 5.24.0 (torch 2.13.0+cpu) builds on the meta device from the same
fixtures/hf/<name>.json, recorded with bench/param_truth.py (sources of the configs:
fixtures/hf/SOURCES.md). No torch is needed to run these tests.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlint.memory.architecture import ConfigError
from memlint.memory.hybrid_model import hybrid_layout
from memlint.facts import hybrid_pattern as hp
from memlint.memory.megatron_hybrid import megatron_hybrid_layout
from memlint.memory.t5_model import t5_layout

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hf"


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def layout(name: str):
    config = load(name)
    kind = config["model_type"]
    return t5_layout(config, kind) if kind == "t5" else hybrid_layout(config, kind)


# name: (transformers total, mixer kinds per layer)
TRUTH = {
    "Nemotron-H-8B-Base-8K": (8_100_852_736, {"mamba2": 24, "none": 24, "attention": 4}),
    "Nemotron-H-56B-Base-8K": (56_324_350_464, {"mamba2": 54, "none": 54, "attention": 10}),
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": (31_577_937_344,
                                            {"mamba2": 23, "none": 23, "attention": 6}),
    "NVIDIA-Nemotron-3-Super-120B-A12B-FP8": (120_668_687_360,
                                              {"mamba2": 40, "none": 40, "attention": 8}),
    "AI21-Jamba-1.5-Mini": (51_570_323_328, {"mamba1": 28, "attention": 4}),
    "Zamba2-7B": (7_356_749_648, {"mamba2": 81}),
    "Falcon-H1-7B-Base": (7_585_513_568, {"parallel": 44}),
    "Falcon-H1-3B-Base": (3_149_256_192, {"parallel": 32}),
    "Bamba-9B": (9_780_235_392, {"mamba2": 29, "attention": 3}),
    "granite-4.0-h-tiny": (6_939_037_248, {"mamba2": 36, "attention": 4}),
    "granite-4.0-h-1b": (1_461_538_368, {"mamba2": 36, "attention": 4}),
    "LFM2-2.6B": (2_569_272_320, {"shortconv": 22, "attention": 8}),
    "Mamba-Codestral-7B-v0.1": (7_285_403_648, {"mamba2": 64}),
    "mamba2-780m": (780_161_280, {"mamba2": 48}),
    "Qwen3-Next-80B-A3B-Instruct": (79_674_391_296, {"gdn": 36, "attention": 12}),
    "Qwen3.5-27B": (26_895_998_464, {"gdn": 48, "attention": 16}),
    "Qwen3.5-35B-A3B": (34_660_610_688, {"gdn": 30, "attention": 10}),
    "Qwen3.5-397B-A17B": (396_346_350_336, {"gdn": 45, "attention": 15}),
    "t5-base": (222_903_552, {"attention": 24}),
    "flan-t5-base": (222_903_552, {"attention": 24}),
}


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_total_equals_transformers(name):
    total, mixers = TRUTH[name]
    got = layout(name)
    assert got.counts.total == total
    assert got.mixers == mixers


def test_the_issue_numbers():
    """Issue 26: Nemotron-H-8B has 8.1B parameters (memlint said 17.0B), Jamba-1.5-mini 51.6B
    (92B), Zamba2-7B 7.4B (16.9B)."""
    assert round(layout("Nemotron-H-8B-Base-8K").counts.total / 1e9, 1) == 8.1
    assert round(layout("AI21-Jamba-1.5-Mini").counts.total / 1e9, 1) == 51.6
    assert round(layout("Zamba2-7B").counts.total / 1e9, 1) == 7.4


def test_experts_are_counted_where_the_config_puts_them():
    jamba = layout("AI21-Jamba-1.5-Mini")
    # 16 MoE layers (odd ones) x 16 experts x 3 x 4096 x 14336
    assert jamba.counts.experts == 16 * 16 * 3 * 4096 * 14336
    super_ = layout("NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    # 40 MoE layers x 512 relu2 experts (up, down) in the 1024-wide latent space, plus the
    # fc1/fc2 latent projections (2 x 4096 x 1024)
    assert super_.counts.experts == 40 * (512 * 2 * 1024 * 2688 + 2 * 4096 * 1024)
    assert layout("granite-4.0-h-1b").counts.experts == 0  # num_local_experts: 0 -> dense


def test_zamba2_shared_blocks_are_counted_once():
    z = layout("Zamba2-7B")
    hybrid = [i for i, t in enumerate(load("Zamba2-7B")["layers_block_type"]) if t == "hybrid"]
    extra = [z.layers[i].params.attention - z.layers[0].params.attention for i in hybrid]
    # the first num_mem_blocks (2) hybrid layers carry a shared block; the others only their
    # LoRA adapter (128 x (3584 + 2 x 14336)) and their 3584 x 3584 linear
    adapter_and_linear = 128 * (3584 + 2 * 14336) + 3584 * 3584
    assert extra[2:] == [adapter_and_linear] * (len(hybrid) - 2)
    assert extra[0] == extra[1] > adapter_and_linear


def test_qwen35_reads_its_text_config_and_tying():
    dense = layout("Qwen3.5-27B")
    assert dense.hidden == 5120 and not dense.tied
    assert dense.counts.lm_head == 248320 * 5120


def test_t5_is_encoder_then_decoder():
    t5 = layout("t5-base")
    stacks = [x.stack for x in t5.layers]
    assert stacks == ["encoder"] * 12 + ["decoder"] * 12
    assert all(x.cross_attention is not None for x in t5.layers if x.stack == "decoder")
    assert t5.counts.lm_head == 0  # transformers 5 always ties T5's lm_head


def test_unknown_nemotron_pattern_symbol_is_a_config_error():
    config = dict(load("Nemotron-H-8B-Base-8K"), hybrid_override_pattern="M-X*")
    with pytest.raises(ConfigError, match="hybrid_override_pattern"):
        hybrid_layout(config, "nemotron_h")


# Megatron-LM hybrids: the CI model of gpu-megatron-ci's hybrid records
# (tests/functional_tests/test_cases/hybrid/hybrid_mr_mcore_te_*: d 1024, 16 heads, 8 query
# groups, GeLU MLP 4096, LayerNorm, biases, tied learned positions of 1024, GPT-2 vocabulary
# padded to 50,304), counted shape by shape from megatron/core/ssm/mamba_mixer.py and the
# TransformerLayer / MLPLayer of hybrid_stack_spec (NVIDIA/Megatron-LM@d98e8a64dd).
CI_HYBRID = dict(hybrid_layer_pattern="M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M-",
                 hidden_size=1024, num_attention_heads=16, num_key_value_heads=8,
                 intermediate_size=4096, vocab_size=50304, learned_positions=1024,
                 norm="layernorm", gated_mlp=False, attention_bias=True, output_bias=True,
                 mlp_bias=True, tie_word_embeddings=True)


def test_megatron_mamba_layer_shapes():
    got = megatron_hybrid_layout(CI_HYBRID)
    mamba = (2 * 1024                 # in_proj's fused LayerNorm (weight, bias)
             + 1024 * 6176            # in_proj: z 2048, x 2048, B 8x128, C 8x128, dt 32
             + 4096 * 4 + 4096        # conv1d over x, B, C
             + 3 * 32                 # dt_bias, A_log, D
             + 2048                   # RMSNormGated
             + 2048 * 1024)           # out_proj, no bias
    attention = 2 * 1024 + 1024 * (1024 + 2 * 512) + (1024 + 2 * 512) + 1024 * 1024 + 1024
    mlp = 2 * 1024 + 1024 * 4096 + 4096 + 4096 * 1024 + 1024
    assert got.layers[0].params.total == mamba
    assert got.layers[1].params.total == mlp
    assert got.layers[7].params.total == attention
    assert got.counts.total == 20 * mamba + 20 * mlp + 4 * attention \
        + 50304 * 1024 + 1024 * 1024 + 2 * 1024


def test_megatron_pattern_helpers():
    assert hp.segments("M-M-|M*-M/MM/MM") == ["M-M-", "M*-M"]
    assert hp.mtp_depths("M-M-|M*-M/MM/MM") == 2
    assert hp.uncounted("MGM*|D-") == "DG"
    assert hp.uncounted("M*-E") == ""


def test_lora_adapts_each_layers_own_linears():
    from memlint.memory.params import architecture, lora_params_per_layer

    arch = architecture(load("Nemotron-H-8B-Base-8K"))
    qkvo = lora_params_per_layer(arch, 16, "qkvo")
    # only the 4 attention layers have q/k/v/o: 16 x ((4096 + 4096) + 2 x (4096 + 1024) +
    # (4096 + 4096)) each; Mamba and MLP layers get no qkvo adapter
    assert [i for i, n in enumerate(qkvo) if n] == [7, 16, 27, 38] or sum(
        1 for n in qkvo if n) == 4
    assert sum(qkvo) == 4 * 16 * (8192 + 2 * 5120 + 8192)
    every = lora_params_per_layer(arch, 16, "all-linear")
    mamba = 16 * ((4096 + 18560) + (8192 + 4096))    # in_proj, out_proj
    mlp = 16 * ((4096 + 21504) + (21504 + 4096))     # up, down (relu2)
    assert every[0] == mamba and every[1] == mlp
