"""The `precise` profile's terms, pinned on small hand-checked cases.

Per-layer numbers are bytes per token of one decoder layer; each was derived op by op (which
tensor autograd keeps, see memory/activations_eager.py hf_layer_items) and checked against
`torch.autograd.graph.saved_tensors_hooks` on the calibration models (torch 2.13, transformers
5.24) and against `bench/data/calibration/records.json` per-layer bytes.
"""
from __future__ import annotations

import os

import pytest

from memlint.memory import activations as act
from memlint.memory import activations_eager as eager
from memlint.memory.estimate import estimate
from memlint.memory.params import architecture
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CALIB = os.path.join(ROOT, "bench", "data", "calibration", "models")
HAVE_CALIB = os.path.isdir(CALIB)

# The calibration llama: d 512, 8 heads × 64, 2 kv heads, ffn 1408 (SwiGLU), 8 layers.
LLAMA = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1408,
         "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 2,
         "vocab_size": 32000, "tie_word_embeddings": False}
GPT2 = {"model_type": "gpt2", "n_embd": 512, "n_layer": 8, "n_head": 8, "vocab_size": 50257,
        "n_positions": 1024, "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1,
        "tie_word_embeddings": True}


def per_token(items, seq):
    return sum(i.per_token + i.per_token_pair * seq for i in items)


def llama_items(**run):
    arch = architecture(LLAMA)
    return eager.hf_layer_items(act.shapes(arch, False), eager.HFRun(**run))


def test_llama_fp32_sdpa_full_finetune():
    # 2 RMSNorms × (x 4d + rsqrt 4 + normalized 4d + output 4d) = 12296; q 2048, k 512, v 512;
    # sdpa out 2048 + lse 4·8; SwiGLU gate, up, act, product 4 × 4 × 1408 = 22528.
    assert per_token(llama_items(c=4, autocast=False, attention="sdpa", device="cpu"), 512) == 39976


def test_llama_bf16_sdpa():
    # norms 2 × (4d + 4 + 2d + 2d) = 8200; q,k,v 2·(512+128+128); out 1024 + lse 32; MLP 4·2·1408
    assert per_token(llama_items(c=2, autocast=False, attention="sdpa", device="cpu"), 512) == 22056


def test_llama_fp32_eager_scales_with_seq():
    # k and v repeated to all heads (GQA under eager): 3 × 2048; fp32 softmax 4·H·T; transposed
    # output copy 2048. Matches the records: 47112 (T 128), 59400 (T 512), 75784 (T 1024).
    items = llama_items(c=4, autocast=False, attention="eager", device="cpu")
    assert [per_token(items, t) for t in (128, 512, 1024)] == [47112, 59400, 75784]


def test_lora_frozen_base_keeps_less():
    # Frozen base: norms keep no `normalized` (frozen weight), norm2's output and down's input are
    # not kept (frozen MLP); LoRA adds 4 rank-64 intermediates: 39976 - 4096 - 2048 - 5632 + 1024.
    items = llama_items(c=4, autocast=False, attention="sdpa", device="cpu", base_trainable=False,
                        lora_rank=64, lora_targets="qkvo")
    assert per_token(items, 512) == 29224
    # all-linear r8: every linear has an adapter that keeps its input; 39976 - 4096 + 7·8·4.
    items = llama_items(c=4, autocast=False, attention="sdpa", device="cpu", base_trainable=False,
                        lora_rank=8, lora_targets="all-linear")
    assert per_token(items, 512) == 36104


def test_lora_first_layer_input_needs_no_grad():
    # records.json lora-r64_all (bf16) measures 21928 per layer and 19876 on the first. A bf16
    # layer's measured delta also holds its bf16 output (2·512, freed in the next layer, not
    # kept by autograd), so the kept set is 20904; the first layer's input comes from a frozen
    # embedding and needs no grad, so norm1 keeps neither its fp32 upcast nor rsqrt (4·512 + 4).
    run = dict(c=2, autocast=False, attention="sdpa", device="cpu", base_trainable=False,
               lora_rank=64, lora_targets="all-linear")
    assert per_token(llama_items(**run), 512) + 2 * 512 == 21928
    assert per_token(llama_items(first_frozen_input=True, **run), 512) + 2 * 512 == 19876


def test_lora_dropout_adds_copies():
    run = dict(c=2, autocast=False, attention="sdpa", device="cuda", base_trainable=False,
               lora_rank=8, lora_targets="qkvo")
    plain = per_token(llama_items(**run), 512)
    dropped = per_token(llama_items(lora_dropout=0.05, **run), 512)
    # q, k, v inputs (d each) and o's input (H·hd): (2 B copy + 1 B mask) each
    assert dropped - plain == 3 * (3 * 512 + 512)


def test_autocast_sdpa():
    # amp: fp32 norms (x, rsqrt, normalized), one bf16 cast per consuming linear (3 + 2),
    # bf16 q,k,v kept by sdpa, bf16 MLP intermediates.
    items = llama_items(c=4, autocast=True, attention="sdpa", device="cpu")
    assert per_token(items, 512) == 2 * (8 * 512 + 4) + 5 * 1024 + 1536 + 1024 + 32 + 4 * 2 * 1408


def test_autocast_eager_matches_record():
    # records.json llama|B2|T512|amp_bf16|eager: 58760 per layer per token = tokens part +
    # the layer's bf16 weight copies (2 B × 2,818,048 linear params / 1024 tokens = 5504).
    items = llama_items(c=4, autocast=True, attention="eager", device="cpu")
    assert per_token(items, 512) + 2 * 2_818_048 / 1024 == 58760


def test_gpt2_dropout_and_math_sdpa():
    arch = architecture(GPT2)
    sh = act.shapes(arch, False)
    base = dict(autocast=False, device="cpu", dropout_attn=0.1, dropout_hidden=0.1,
                fused_qkv=True, softmax_fp32=False)
    # fp32: eager and sdpa (math on the CPU: attention dropout) agree, records 110608 at T 512
    for attention in ("eager", "sdpa"):
        assert per_token(eager.hf_layer_items(sh, eager.HFRun(c=4, attention=attention, **base)),
                         512) == 110608
    # bf16 eager: everything halves (masks in bf16 on the CPU): 55304
    assert per_token(eager.hf_layer_items(sh, eager.HFRun(c=2, attention="eager", **base)), 512) == 55304
    # bf16 sdpa math upcasts q, k, v and the probabilities to fp32 on the CPU: 82952
    assert per_token(eager.hf_layer_items(sh, eager.HFRun(c=2, attention="sdpa", **base)), 512) == 82952
    assert eager.hf_kernel(sh, eager.HFRun(c=2, autocast=False, attention="sdpa", device="cuda",
                                       dropout_attn=0.1)) == "flash"


def _scenario(sets, config=None):
    partial = overrides_partial(sets, model=config)
    scenario, diagnostics = build([partial])
    assert not [d for d in diagnostics if d.severity.label == "error"], diagnostics
    return scenario


def test_autocast_weight_copies_term():
    sc = _scenario(["micro_batch=2", "seq_len=512", "precision=amp-bf16", "attention=sdpa",
                    "framework=hf", "device=cpu"], os.path.join(CALIB, "llama", "config.json"))
    stage = estimate(sc).stages[0]
    term = stage.term("activations.autocast_weight_copies")
    assert term.bytes == 2 * (8 * 2_818_048 + 32000 * 512)


def test_eager_mask_term():
    sc = _scenario(["micro_batch=2", "seq_len=512", "precision=fp32", "attention=eager",
                    "framework=hf", "device=cpu"], os.path.join(CALIB, "llama", "config.json"))
    assert estimate(sc).stages[0].term("activations.attention_mask").bytes == 4 * 2 * 512 * 512


def test_inflight_microbatches_1f1b_and_interleaved():
    assert act.inflight_microbatches(0, 4, 1, 8) == 4
    assert act.inflight_microbatches(3, 4, 1, 8) == 1
    assert act.inflight_microbatches(0, 4, 1, 2) == 2      # min(pp - i, m)
    assert act.inflight_microbatches(0, 4, 2, 16) == pytest.approx(4 * (1 + 3 / 8))


def test_fused_layer_gpt3_is_34_and_tp_sp_divide():
    # Korthikanti et al. 2022: 34·s·b·h with flash off but selective recompute of scores; with
    # tp and sp everything divides by t.
    sh = act.Shapes(d=1024, dq=1024, dk=1024, dv=1024, heads=16, do=1024, ffn=4096, gated=False,
                    layernorm=True)
    items = act.fused_layer_items(sh, 2, False, 1, False, True, True, True)
    assert per_token(items, 2048) == 34 * 1024
    items_tp = act.fused_layer_items(sh, 2, False, 8, True, True, True, True)
    assert per_token(items_tp, 2048) == 34 * 1024 / 8
    no_sp = act.fused_layer_items(sh, 2, False, 8, False, True, True, True)
    assert per_token(no_sp, 2048) == (10 + 24 / 8) * 1024
