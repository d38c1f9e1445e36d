"""Every worked number of the two seed articles, reproduced under `profile=seed` within 1%.

Articles (docs/seeds.md): 000 (the M3 training-memory model) and 003 (the basics). The articles
count decimal GB (1e9 bytes).
"""
import math

import pytest

from memlint.memory import activations as act
from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

GB = 1e9
# The M3 model (000 CH 7.1) with the article's own totals: N = 428B, ~398B of it in experts.
M3 = ["profile=seed", "model.total_params=428e9", "model.expert_params=398e9", "seq_len=8192"]
M3_TP4_PP4 = M3 + ["tp=4", "pp=4"]
M3_EP8 = M3_TP4_PP4 + ["dp=4", "ep=8", "zero=2", "recompute=full", "micro_batch=2"]


def seed(sets, model="seed-m3"):
    scenario, diagnostics = build([overrides_partial(sets, model=model)])
    assert not [d for d in diagnostics if d.severity.label == "error"], diagnostics
    return estimate(scenario)


def gb(estimate_, component=None, stage=0):
    st = estimate_.stages[stage]
    if component is None:
        return st.total_bytes / GB
    return st.components().get(component, 0) / GB


def close(value, expected, rel=0.01):
    return value == pytest.approx(expected, rel=rel)


# --- 000 CH 1.5: the single-GPU base equation ------------------------------------------------

def test_ch1_base_equation():
    e = seed(M3)
    assert close(gb(e, "weights"), 856)
    assert close(gb(e, "optimizer"), 5136)
    assert close(gb(e, "gradients"), 856)
    assert close(gb(e, "activations"), 103)
    assert close(gb(e), 6951)


# --- 000 CH 2.5: Megatron TP=4, PP=4, DP=8 --------------------------------------------------

def test_ch2_megatron_tp_pp_dp():
    e = seed(M3_TP4_PP4 + ["dp=8"])
    assert len(e.stages) == 4
    for stage in range(4):
        assert close(gb(e, "weights", stage), 53.5)
        assert close(gb(e, "optimizer", stage), 321.0)
        assert close(gb(e, "gradients", stage), 53.5)
        assert close(gb(e, "activations", stage), 25.7)
        assert close(gb(e, stage=stage), 453.7)


# --- 000 CH 3.5: + ZeRO-2 over DP=8 ---------------------------------------------------------

def test_ch3_zero2():
    e = seed(M3_TP4_PP4 + ["dp=8", "zero=2"])
    assert close(gb(e, "weights"), 53.5)
    assert close(gb(e, "optimizer"), 40.1)
    assert close(gb(e, "gradients"), 6.7)
    assert close(gb(e, "activations"), 25.7)
    assert close(gb(e), 126.0)


@pytest.mark.parametrize("zero,expected", [(1, 4 * 7 + 12 * 7 / 8), (2, 2 * 7 + 14 * 7 / 8),
                                           (3, 16 * 7 / 8)])
def test_003_zero_stage_formulas(zero, expected):
    """003 section 4.5: ZeRO-1 4Φ + 12Φ/N, ZeRO-2 2Φ + 14Φ/N, ZeRO-3 16Φ/N (Φ = 7B, N = 8)."""
    e = seed(["profile=seed", "model.total_params=7e9", "seq_len=1", f"zero={zero}", "dp=8"],
             model="llama3-8b")
    states = sum(gb(e, c) for c in ("weights", "gradients", "optimizer"))
    assert close(states, expected)


def test_003_mixed_precision_and_fp32_are_16_phi():
    """003 sections 2.3-2.4 and Q7: 16Φ either way; 7B -> 112 GB; ZeRO-3 on 2 GPUs -> 56 GB."""
    for precision in ("bf16", "fp32"):
        e = seed(["profile=seed", "model.total_params=7e9", "seq_len=1", f"precision={precision}"],
                 model="llama3-8b")
        assert close(sum(gb(e, c) for c in ("weights", "gradients", "optimizer")), 112)
    e = seed(["profile=seed", "model.total_params=7e9", "seq_len=1", "zero=3", "dp=2"],
             model="llama3-8b")
    assert close(sum(gb(e, c) for c in ("weights", "gradients", "optimizer")), 56)


@pytest.mark.parametrize("dp,weights_grads,optimizer,total", [(8, 8.75, 3.28, 12.03),
                                                               (4, 8.75, 6.56, 15.3)])
def test_003_3d_parallel_with_zero1(dp, weights_grads, optimizer, total):
    """003 section 5.5 (128 GPUs, dp=4) and Q11 (256 GPUs, dp=8): 70B, tp=8, pp=4, ZeRO-1."""
    e = seed(["profile=seed", "model.total_params=70e9", "seq_len=1", "tp=8", "pp=4",
              f"dp={dp}", "zero=1"], model="llama3-70b")
    assert close(gb(e, "weights") + gb(e, "gradients"), weights_grads)
    assert close(gb(e, "optimizer"), optimizer)
    assert close(gb(e, "weights") + gb(e, "gradients") + gb(e, "optimizer"), total)


# --- 000 CH 4.3: when context parallelism is needed -----------------------------------------

@pytest.mark.parametrize("seq,recompute,expected", [(131072, "none", 8), (131072, "full", 1),
                                                    (1048576, "full", 4)])
def test_ch4_cp_needed(seq, recompute, expected):
    e = seed(M3_TP4_PP4 + [f"seq_len={seq}", f"recompute={recompute}"])
    activation = e.stages[0].components()["activations"]
    # the smallest cp with activations / cp <= what the GPU has left (80 GB - 27 GB of states)
    assert max(1, math.ceil(activation / (80e9 - 27e9) - 1e-9)) == expected


def test_ch4_cp_ratio_values():
    assert 34 * 15 * 131072 * 6144 / 53e9 == pytest.approx(7.7, rel=0.01)
    assert 2 * 15 * 1048576 * 6144 / 53e9 == pytest.approx(3.6, rel=0.02)


# --- 000 CH 5.4: + full recompute, and the B_micro table ------------------------------------

def test_ch5_full_recompute():
    e = seed(M3_TP4_PP4 + ["dp=8", "zero=2", "recompute=full"])
    assert close(gb(e, "activations"), 1.51)
    assert close(gb(e), 101.8)


@pytest.mark.parametrize("micro,no_ckpt,ckpt,total", [(1, 25.7, 1.51, 101.8), (2, 51.3, 3.0, 103.3),
                                                      (4, 102.6, 6.0, 106.3),
                                                      (8, 205.3, 12.1, 112.4)])
def test_ch5_micro_batch_table(micro, no_ckpt, ckpt, total):
    base = M3_TP4_PP4 + ["dp=8", "zero=2", f"micro_batch={micro}"]
    assert close(gb(seed(base), "activations"), no_ckpt)
    with_ckpt = seed(base + ["recompute=full"])
    assert close(gb(with_ckpt, "activations"), ckpt)
    assert close(gb(with_ckpt), total)


def test_ch5_selective_every_k_strict_form():
    """CH 5.2: (34 + 2(K-1)) · L/(pp·K) units, here K = 3 on 15 layers per stage."""
    e = seed(M3_TP4_PP4 + ["recompute=selective", "recompute_every=3"])
    expected = (34 + 2 * 2) * 15 / 3 * 8192 * 6144
    assert e.stages[0].components()["activations"] == pytest.approx(expected, rel=1e-9)


def test_no_flash_attention_adds_scores():
    """CH 1.4.2: 34 + 5·H·T/d per layer without FlashAttention (T=8192: ~350 units)."""
    e = seed(M3 + ["attention=eager"])
    units = 34 + 5 * 64 * 8192 / 6144
    assert e.stages[0].components()["activations"] == pytest.approx(60 * units * 8192 * 6144)


# --- 000 CH 7.3-7.5: M3 with EP=8 -------------------------------------------------------------

def test_ch7_m3_with_expert_parallelism():
    e = seed(M3_EP8)
    assert close(gb(e, "weights"), 10.0)
    assert close(gb(e, "optimizer"), 14.9)
    assert close(gb(e, "gradients"), 2.5)
    assert close(gb(e, "activations"), 3.0)
    assert close(gb(e), 30.4)


def test_ch7_muon():
    e = seed(M3_EP8 + ["optimizer=muon"])
    assert close(gb(e, "optimizer"), 10.0)
    assert close(gb(e), 25.5)


@pytest.mark.parametrize("micro,activations,total", [(1, 1.5, 28.9), (2, 3.0, 30.4), (4, 6.0, 33.4),
                                                     (8, 12.1, 39.5)])
def test_ch7_micro_batch_sensitivity(micro, activations, total):
    e = seed([s for s in M3_EP8 if not s.startswith("micro_batch")] + [f"micro_batch={micro}"])
    assert close(gb(e, "activations"), activations)
    assert close(gb(e), total)


@pytest.mark.parametrize("seq,cp,activations,total", [(131072, 1, 48.3, 75.7), (131072, 2, 24.2, 51.6),
                                                      (1048576, 1, 386, None),
                                                      (1048576, 8, 48.3, 75.7)])
def test_ch7_long_sequences_and_cp(seq, cp, activations, total):
    e = seed(M3_EP8 + [f"seq_len={seq}", f"cp={cp}"])
    assert close(gb(e, "activations"), activations)
    if total is not None:
        assert close(gb(e), total)


# --- 000 CH 8: visual tokens, K/V for backward, the ViT ---------------------------------------

@pytest.mark.parametrize("images,tokens,ckpt,no_ckpt", [(0, 0, 3.0, 51.3), (1, 576, 3.2, None),
                                                        (4, 576, 3.9, None), (1, 2916, 4.1, None),
                                                        (4, 2916, 7.3, 124.5)])
def test_ch8_visual_tokens_lengthen_t(images, tokens, ckpt, no_ckpt):
    base = M3_TP4_PP4 + ["micro_batch=2", f"images_per_sample={images}",
                         f"tokens_per_image={tokens}"]
    assert close(gb(seed(base + ["recompute=full"]), "activations"), ckpt, rel=0.015)
    if no_ckpt is not None:
        assert close(gb(seed(base), "activations"), no_ckpt)


VLM = {
    "model.model_type": "llava", "model.vision_config.model_type": "clip_vision_model",
    "model.vision_config.hidden_size": 1280, "model.vision_config.num_hidden_layers": 32,
    "model.vision_config.num_attention_heads": 16, "model.vision_config.intermediate_size": 5120,
    "model.vision_config.image_size": 336, "model.vision_config.patch_size": 14,
    "model.text_config.model_type": "llama", "model.text_config.hidden_size": 6144,
    "model.text_config.num_hidden_layers": 60, "model.text_config.num_attention_heads": 64,
    "model.text_config.num_key_value_heads": 4, "model.text_config.intermediate_size": 12288,
    "model.text_config.vocab_size": 200064, "model.projector_hidden_act": "gelu",
}


def _vlm(extra):
    return seed(["profile=seed", "seq_len=8192", "micro_batch=2"]
                + [f"{k}={v}" for k, v in VLM.items()] + extra, model=None)


@pytest.mark.parametrize("tokens,expected", [(576, 1.6), (2916, 8.1)])
def test_ch8_vit_activations(tokens, expected):
    """CH 8.3: 34 × L_vit × B × N_img × d_vit (576 tokens: 1.6 GB; a 2916-token image: ~8 GB)."""
    e = _vlm(["images_per_sample=1", f"tokens_per_image={tokens}"])
    vision = e.stages[0].term("vision.activations")
    assert close(vision.bytes / GB, expected)


def test_ch8_vit_states_follow_the_dense_equation():
    """CH 8.3: weights 2·N_ViT, optimizer 12·N_ViT, gradients 2·N_ViT on stage 0 only."""
    e = _vlm(["images_per_sample=1", "tokens_per_image=576", "pp=4"])
    stage0 = e.stages[0]
    n = stage0.term("vision.weights").inputs["params"]
    assert stage0.term("vision.weights").bytes == 2 * n
    assert stage0.term("vision.optimizer").bytes == 12 * n
    assert stage0.term("vision.gradients").bytes == 2 * n
    assert e.stages[1].term("vision.weights") is None


# --- 000 CH 9: LoRA and QLoRA on Llama-70B ----------------------------------------------------

LORA70 = ["profile=seed", "model.total_params=70e9", "lora_rank=16", "seq_len=8192",
          "model.hidden_size=8192", "model.num_hidden_layers=80"]


def test_ch9_lora_parameter_count():
    e = seed(LORA70, model="llama3-70b")
    assert e.params["trainable"] == 83_886_080


def test_ch9_lora_70b_single_gpu():
    e = seed(LORA70, model="llama3-70b")
    st = e.stages[0]
    assert close(st.term("weights.frozen").bytes / GB, 140)
    assert close(st.term("weights.lora").bytes / GB, 0.17, rel=0.02)
    assert close(gb(e, "optimizer"), 1.0, rel=0.01)
    assert close(gb(e, "gradients"), 0.17, rel=0.02)
    assert close(gb(e, "activations"), 183)
    assert close(gb(e), 324)
    ckpt = seed(LORA70 + ["recompute=full"], model="llama3-70b")
    assert close(gb(ckpt, "activations"), 10.7)
    assert close(gb(ckpt), 152)


def test_ch9_qlora_70b_single_gpu():
    e = seed(LORA70 + ["recompute=full", "base_quant=nf4"], model="llama3-70b")
    st = e.stages[0]
    assert close(st.term("weights.frozen").bytes / GB, 35)
    lora_states = (st.term("weights.lora").bytes + st.components()["optimizer"]
                   + st.components()["gradients"]) / GB
    assert close(lora_states, 1.3, rel=0.05)
    assert close(st.term("buffers.dequantized_weight").bytes / 1e6, 134, rel=0.01)
    assert close(gb(e), 47)


@pytest.mark.parametrize("seq,micro,expected", [(2048, 1, 2.7), (2048, 2, 5.4), (2048, 4, 10.7),
                                                (8192, 1, 10.7), (8192, 2, 21.5), (8192, 4, 43),
                                                (32768, 1, 43), (32768, 2, 86)])
def test_ch9_qlora_activation_table(seq, micro, expected):
    sets = [s for s in LORA70 if not s.startswith("seq_len")]
    e = seed(sets + [f"seq_len={seq}", f"micro_batch={micro}", "recompute=full", "base_quant=nf4"],
             model="llama3-70b")
    assert close(gb(e, "activations"), expected)


# --- 003 section 3.3: the per-layer activation formula with GQA and d_FFN ----------------------

def test_003_llama3_8b_attention_activation():
    """Llama-3 8B, b=1, s=4096: the 5·b·s²·n_h attention-matrix term is the article's ≈2.7 GB
    (its full attention sum 8bsd + 4(n_kv/n_h)bsd + 5bs²n_h is 2.84 GB: the article rounds to
    the dominant term)."""
    b, s, d, heads = 1, 4096, 4096, 32
    # the seed model's per-layer coefficient without FlashAttention: C_act + 5·H·T/d per b·s·d
    flash = act.seed_layer_coefficient(34.0, 5.0, heads, s, d, flash=True)
    eager = act.seed_layer_coefficient(34.0, 5.0, heads, s, d, flash=False)
    scores = (eager - flash) * b * s * d
    assert scores == 5 * b * s * s * heads
    assert scores / GB == pytest.approx(2.7, rel=0.01)
