"""Exact parameter counts by component (memlint.memory.params).

Every expected number below is what `sum(p.numel() for p in model.parameters())` reports for the
model transformers 5.24.0 (torch 2.13.0) builds on the meta device from the same config, recorded
with bench/param_truth.py. No torch is needed to run these tests.

Configs come from two places:
- fixtures/hf/*.json: byte copies of real config.json files (sources in fixtures/hf/SOURCES.md);
- PUBLISHED below: for families without a byte copy in this repository, the published
  hyperparameters of a real checkpoint, written out as a dict (facts, not a copy of the file).
"""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlint.memory.params import (KNOWN_MODEL_TYPES, MAX_LAYERS, Architecture, ConfigError,
                                   ParamCounts, architecture, count_params)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hf"


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def counts(config: dict) -> ParamCounts:
    return count_params(architecture(config))


# Published hyperparameters of real checkpoints (the keys transformers reads; values from the
# publishers' config.json files on the Hugging Face Hub).
PUBLISHED = {
    "Mistral-7B-v0.1": dict(
        architectures=["MistralForCausalLM"], model_type="mistral", hidden_size=4096,
        intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=32000, max_position_embeddings=32768,
        sliding_window=4096, rope_theta=10000.0, rms_norm_eps=1e-05, tie_word_embeddings=False),
    "gemma-2b": dict(
        architectures=["GemmaForCausalLM"], model_type="gemma", hidden_size=2048,
        intermediate_size=16384, num_hidden_layers=18, num_attention_heads=8,
        num_key_value_heads=1, head_dim=256, vocab_size=256000, max_position_embeddings=8192,
        rms_norm_eps=1e-06),
    "gemma-2-2b": dict(
        architectures=["Gemma2ForCausalLM"], model_type="gemma2", hidden_size=2304,
        intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, vocab_size=256000, max_position_embeddings=8192,
        query_pre_attn_scalar=256, sliding_window=4096, attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0),
    "Phi-3-mini-4k-instruct": dict(
        architectures=["Phi3ForCausalLM"], model_type="phi3", hidden_size=3072,
        intermediate_size=8192, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, vocab_size=32064, max_position_embeddings=4096,
        original_max_position_embeddings=4096, resid_pdrop=0.0, embd_pdrop=0.0,
        attention_dropout=0.0, tie_word_embeddings=False, bos_token_id=1, eos_token_id=32000,
        pad_token_id=32000),
    "pythia-160m": dict(
        architectures=["GPTNeoXForCausalLM"], model_type="gpt_neox", hidden_size=768,
        intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12, vocab_size=50304,
        max_position_embeddings=2048, rotary_pct=0.25, rotary_emb_base=10000,
        use_parallel_residual=True, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0),
    "Qwen1.5-MoE-A2.7B": dict(
        architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe", hidden_size=2048,
        intermediate_size=5632, moe_intermediate_size=1408, shared_expert_intermediate_size=5632,
        num_experts=60, num_experts_per_tok=4, decoder_sparse_step=1, num_hidden_layers=24,
        num_attention_heads=16, num_key_value_heads=16, vocab_size=151936,
        tie_word_embeddings=False),
    "DeepSeek-V2-Lite": dict(
        architectures=["DeepseekV2ForCausalLM"], model_type="deepseek_v2", hidden_size=2048,
        intermediate_size=10944, moe_intermediate_size=1408, num_hidden_layers=27,
        num_attention_heads=16, num_key_value_heads=16, n_routed_experts=64, n_shared_experts=2,
        num_experts_per_tok=6, first_k_dense_replace=1, moe_layer_freq=1, kv_lora_rank=512,
        q_lora_rank=None, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
        vocab_size=102400, tie_word_embeddings=False, n_group=1, topk_group=1,
        topk_method="greedy"),
    "OLMoE-1B-7B-0924": dict(
        architectures=["OlmoeForCausalLM"], model_type="olmoe", hidden_size=2048,
        intermediate_size=1024, num_hidden_layers=16, num_attention_heads=16,
        num_key_value_heads=16, num_experts=64, num_experts_per_tok=8, vocab_size=50304,
        tie_word_embeddings=False, clip_qkv=None, pad_token_id=1, eos_token_id=50279),
    "Qwen2-VL-2B-Instruct": dict(
        architectures=["Qwen2VLForConditionalGeneration"], model_type="qwen2_vl",
        hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
        num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
        image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
        vision_end_token_id=151653,
        vision_config=dict(depth=32, embed_dim=1280, mlp_ratio=4, num_heads=16, in_chans=3,
                           hidden_size=1536, patch_size=14, spatial_merge_size=2,
                           spatial_patch_size=14, temporal_patch_size=2)),
    "Qwen2.5-VL-3B-Instruct": dict(
        architectures=["Qwen2_5_VLForConditionalGeneration"], model_type="qwen2_5_vl",
        hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
        num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
        image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
        vision_end_token_id=151653,
        vision_config=dict(depth=32, hidden_act="silu", hidden_size=1280, intermediate_size=3420,
                           num_heads=16, in_chans=3, out_hidden_size=2048, patch_size=14,
                           spatial_merge_size=2, spatial_patch_size=14, window_size=112,
                           fullatt_block_indexes=[7, 15, 23, 31], tokens_per_second=2,
                           temporal_patch_size=2)),
    # bigcode/starcoder2-7b: dimensions as NVIDIA/NeMo's Starcoder2Config7B
    # (nemo/collections/llm/gpt/model/starcoder2.py at 8cfedd7), vocabulary 49,152, tied
    # embeddings; 7,173,923,840 is the model card's 7.17B
    "starcoder2-7b": dict(
        architectures=["Starcoder2ForCausalLM"], model_type="starcoder2", hidden_size=4608,
        intermediate_size=18432, num_hidden_layers=32, num_attention_heads=36,
        num_key_value_heads=4, vocab_size=49152, use_bias=True, tie_word_embeddings=True,
        norm_epsilon=1e-5, sliding_window=4096),
}


def config_of(name: str) -> dict:
    return copy.deepcopy(PUBLISHED[name]) if name in PUBLISHED else load(name)


# name -> (total, embedding incl. learned positions, lm_head, experts, vision, projector)
TRUTH = {
    # real config.json byte copies (fixtures/hf)
    "Meta-Llama-3.1-8B": (8030261248, 525336576, 525336576, 0, 0, 0),
    "Qwen2.5-7B": (7615616512, 544997376, 544997376, 0, 0, 0),
    "Qwen3-8B": (8190735360, 622329856, 622329856, 0, 0, 0),
    # Qwen v1 (remote code): the checkpoint's own count (fixtures/hf/SOURCES.md: its bf16 shards
    # hold 2 B x 7,721,324,544 + 28,200 B of safetensors headers)
    "Qwen-7B": (7721324544, 622329856, 622329856, 0, 0, 0),
    "gpt2": (124439808, 39383808, 0, 0, 0, 0),
    "Mixtral-8x7B-v0.1": (46702792704, 131072000, 131072000, 45097156608, 0, 0),
    "Qwen3-30B-A3B": (30532122624, 311164928, 311164928, 28991029248, 0, 0),
    "DeepSeek-V3": (671026404352, 926679040, 926679040, 653908770816, 0, 0),
    "llava-1.5-7b-hf": (7063427072, 131334144, 131334144, 0, 303507456, 20979712),
    "calib-llama": (55321088, 16384000, 16384000, 0, 0, 0),
    "calib-gpt2": (51475968, 26255872, 0, 0, 0, 0),
    "calib-mixtral": (29632768, 8192000, 8192000, 12582912, 0, 0),
    "calib-deepseek_v3": (20358016, 8192000, 8192000, 2359296, 0, 0),
    # published hyperparameters (PUBLISHED above)
    "Mistral-7B-v0.1": (7241732096, 131072000, 131072000, 0, 0, 0),
    "gemma-2b": (2506172416, 524288000, 0, 0, 0, 0),
    "gemma-2-2b": (2614341888, 589824000, 0, 0, 0, 0),
    "Phi-3-mini-4k-instruct": (3821079552, 98500608, 98500608, 0, 0, 0),
    "pythia-160m": (162322944, 38633472, 38633472, 0, 0, 0),
    "Qwen1.5-MoE-A2.7B": (14315784192, 311164928, 311164928, 12457082880, 0, 0),
    "DeepSeek-V2-Lite": (15706484224, 209715200, 209715200, 14394851328, 0, 0),
    "OLMoE-1B-7B-0924": (6919161856, 103022592, 103022592, 6442450944, 0, 0),
    "Qwen2-VL-2B-Instruct": (2208985600, 233373696, 0, 0, 631183360, 34087936),
    "Qwen2.5-VL-3B-Instruct": (3754622976, 311164928, 0, 0, 631975680, 36708608),
    # Qwen3-VL (fixtures/hf byte copies): vision = visual.patch_embed + pos_embed + blocks,
    # projector = visual.merger + deepstack_merger_list (transformers' totals, issue 27)
    "Qwen3-VL-8B-Instruct": (8767123696, 622329856, 622329856, 0, 415891440, 160496896),
    "Qwen3-VL-30B-A3B-Instruct": (31070754032, 311164928, 311164928, 28991029248, 415891440,
                                  122739968),
    "starcoder2-7b": (7173923840, 226492416, 0, 0, 0, 0),
}

# One representative per family (the brief's list), so each family has its own test.
FAMILY = {
    "llama": "Meta-Llama-3.1-8B", "mistral": "Mistral-7B-v0.1", "qwen2": "Qwen2.5-7B",
    "qwen3": "Qwen3-8B", "gemma": "gemma-2b", "gemma2": "gemma-2-2b",
    "phi3": "Phi-3-mini-4k-instruct", "gpt2": "gpt2", "gpt_neox": "pythia-160m",
    "mixtral": "Mixtral-8x7B-v0.1", "qwen2_moe": "Qwen1.5-MoE-A2.7B", "qwen3_moe": "Qwen3-30B-A3B",
    "deepseek_v2": "DeepSeek-V2-Lite", "deepseek_v3": "DeepSeek-V3", "olmoe": "OLMoE-1B-7B-0924",
    "llava": "llava-1.5-7b-hf", "qwen2_vl": "Qwen2-VL-2B-Instruct",
    "qwen2_5_vl": "Qwen2.5-VL-3B-Instruct", "qwen3_vl": "Qwen3-VL-8B-Instruct",
    "qwen3_vl_moe": "Qwen3-VL-30B-A3B-Instruct", "starcoder2": "starcoder2-7b",
    "qwen": "Qwen-7B",
}


def check(name: str) -> ParamCounts:
    total, embedding, lm_head, experts, vision, projector = TRUTH[name]
    got = counts(config_of(name))
    assert got.total == total
    assert got.embedding + got.position_embedding == embedding
    assert got.lm_head == lm_head
    assert got.experts == experts
    assert got.vision == vision
    assert got.projector == projector
    return got


def test_every_family_has_a_case():
    assert set(FAMILY) == set(KNOWN_MODEL_TYPES)
    for family, name in FAMILY.items():
        assert config_of(name)["model_type"] == family


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_exact_against_transformers(name):
    check(name)


# --- one test per family, with what is particular to it ----------------------------------------

def test_llama():
    got = check("Meta-Llama-3.1-8B")
    assert got.total == 8_030_261_248  # Meta-Llama-3-8B has the same shape
    arch = architecture(load("Meta-Llama-3.1-8B"))
    assert (arch.heads, arch.kv_heads, arch.head_dim, arch.tied) == (32, 8, 128, False)
    assert arch.gated_mlp and arch.norm == "rmsnorm" and not arch.qkv_bias


def test_llama3_8b_matches_seed_article_003_formula():
    cfg = load("Meta-Llama-3.1-8B")
    V, d, L = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"]
    n_h, n_kv, d_ffn = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]
    # V·d + L·[d + (2 + 2·n_kv/n_h)·d² + d + 3·d·d_ffn] + d + d·V, in exact integers
    per_layer = d + (2 * d * d + 2 * n_kv * d * d // n_h) + d + 3 * d * d_ffn
    formula = V * d + L * per_layer + d + d * V
    assert formula == counts(cfg).total == 8_030_261_248


def test_mistral_tied_and_untied():
    check("Mistral-7B-v0.1")
    tied = config_of("Mistral-7B-v0.1")
    tied["tie_word_embeddings"] = True
    got = counts(tied)
    assert got.total == 7110660096 and got.lm_head == 0


def test_qwen2_qkv_bias():
    got = check("Qwen2.5-7B")
    arch = architecture(load("Qwen2.5-7B"))
    assert arch.qkv_bias and not arch.output_bias
    d, kv = 3584, 4 * 128
    assert got.layers[0].attention == d * (d + 2 * kv) + d * d + (d + 2 * kv)
    tied = load("Qwen2.5-7B")
    tied["tie_word_embeddings"] = True
    assert counts(tied).total == 7070619136


def test_qwen3_qk_norm():
    got = check("Qwen3-8B")
    arch = architecture(load("Qwen3-8B"))
    assert arch.qk_norm == "head" and arch.head_dim == 128
    assert got.layers[0].attention == 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 2 * 128


def test_gemma_head_dim_and_tied():
    got = check("gemma-2b")
    arch = architecture(config_of("gemma-2b"))
    assert arch.tied and arch.head_dim == 256 and arch.kv_heads == 1
    no_head_dim = config_of("gemma-2b")
    del no_head_dim["head_dim"]  # GemmaConfig's default is 256, not hidden / heads
    assert counts(no_head_dim).total == got.total


def test_gemma2_extra_norms():
    got = check("gemma-2-2b")
    assert architecture(config_of("gemma-2-2b")).norms_per_layer == 4
    assert got.layers[0].norms == 4 * 2304


def test_phi3_fused_projections():
    check("Phi-3-mini-4k-instruct")
    arch = architecture(config_of("Phi-3-mini-4k-instruct"))
    assert arch.fused_qkv and arch.gated_mlp and not arch.tied


def test_gpt2_naming_positions_layernorm_biases():
    got = check("gpt2")
    arch = architecture(load("gpt2"))
    assert (arch.hidden, arch.layers, arch.heads, arch.ffn) == (768, 12, 12, 3072)
    assert arch.learned_positions == 1024 and got.position_embedding == 1024 * 768
    assert arch.norm == "layernorm" and not arch.gated_mlp and arch.tied
    assert arch.qkv_bias and arch.output_bias and arch.mlp_bias
    assert (arch.attention_dropout, arch.hidden_dropout, arch.embedding_dropout) == (0.1, 0.1, 0.1)
    assert got.final_norm == 2 * 768


def test_gpt_neox_parallel_biases_untied():
    got = check("pythia-160m")
    arch = architecture(config_of("pythia-160m"))
    assert arch.parallel_attention and arch.norm == "layernorm" and not arch.tied
    assert got.lm_head == 50304 * 768
    no_bias = config_of("pythia-160m")
    no_bias["attention_bias"] = False
    assert counts(no_bias).total == 162286080


def test_mixtral():
    got = check("Mixtral-8x7B-v0.1")
    assert got.total == 46_702_792_704
    arch = architecture(load("Mixtral-8x7B-v0.1"))
    assert arch.is_moe and arch.moe.num_experts == 8 and arch.moe.top_k == 2
    assert got.layers[0].router == 8 * 4096


def test_qwen2_moe_shared_expert_and_sparse_layers():
    got = check("Qwen1.5-MoE-A2.7B")
    arch = architecture(config_of("Qwen1.5-MoE-A2.7B"))
    assert arch.moe.shared_ffn == 5632 and arch.moe.shared_gate and arch.qkv_bias
    assert got.layers[0].shared_experts == 3 * 2048 * 5632 + 2048  # + shared_expert_gate
    sparse = config_of("Qwen1.5-MoE-A2.7B")
    sparse.update(decoder_sparse_step=2, mlp_only_layers=[0, 5])
    arch = architecture(sparse)
    assert arch.moe_layers[:6] == (False, True, False, True, False, False)
    assert counts(sparse).total == 7566573568


def test_qwen3_moe_mlp_only_layers():
    check("Qwen3-30B-A3B")
    cfg = load("Qwen3-30B-A3B")
    cfg["mlp_only_layers"] = [0, 1]
    arch = architecture(cfg)
    assert arch.moe_layers[:3] == (False, False, True) and arch.qk_norm == "head"
    assert counts(cfg).total == 29399136256


def test_deepseek_v2_mla_without_q_lora():
    got = check("DeepSeek-V2-Lite")
    arch = architecture(config_of("DeepSeek-V2-Lite"))
    assert arch.mla.q_lora_rank == 0 and arch.mla.kv_lora_rank == 512
    assert arch.moe_layers[0] is False and all(arch.moe_layers[1:])
    assert arch.moe.shared_ffn == 2 * 1408 and not arch.moe.router_bias
    assert got.layers[0].mlp == 3 * 2048 * 10944


def test_deepseek_v3():
    got = check("DeepSeek-V3")
    arch = architecture(load("DeepSeek-V3"))
    assert arch.mla.q_lora_rank == 1536 and arch.moe.router_bias
    assert arch.moe_layers[:4] == (False, False, False, True)
    assert got.total == 671_026_404_352  # without the MTP layer, as transformers builds it
    no_q_lora = load("calib-deepseek_v3")
    no_q_lora["q_lora_rank"] = None
    assert counts(no_q_lora).total == 20505088


def test_deepseek_moe_layer_freq_follows_deepseek():
    cfg = load("calib-deepseek_v3")
    cfg["moe_layer_freq"] = 2
    assert architecture(cfg).moe_layers == (False, False, True, False)


def test_olmoe_qk_norm():
    check("OLMoE-1B-7B-0924")
    arch = architecture(config_of("OLMoE-1B-7B-0924"))
    assert arch.qk_norm == "full" and arch.moe.num_experts == 64 and arch.moe.top_k == 8


def test_llava_vision_and_projector():
    got = check("llava-1.5-7b-hf")
    arch = architecture(load("llava-1.5-7b-hf"))
    v = arch.vision
    assert (v.hidden, v.layers, v.heads, v.ffn, v.patch_size, v.image_size) == \
        (1024, 24, 16, 4096, 14, 336)
    assert v.tokens_per_image == 576 and v.params == got.vision == 303507456
    assert v.projector_params == 1024 * 4096 + 4096 + 4096 * 4096 + 4096
    assert arch.hidden == 4096 and arch.vocab == 32064  # text_config defaults from LlamaConfig
    multi = load("llava-1.5-7b-hf")
    multi.update(vision_feature_layer=[-2, -5], multimodal_projector_bias=False)
    assert counts(multi).total == 7067613184


def test_qwen2_vl_vision_and_merger():
    check("Qwen2-VL-2B-Instruct")
    v = architecture(config_of("Qwen2-VL-2B-Instruct")).vision
    assert v.tokens_per_image == (448 // 28) ** 2 == 256
    assert (v.hidden, v.layers, v.spatial_merge_size, v.temporal_patch_size) == (1280, 32, 2, 2)


def test_qwen2_vl_nested_text_config_layout():
    flat = config_of("Qwen2-VL-2B-Instruct")
    text_keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "vocab_size")
    nested = {k: v for k, v in flat.items() if k not in text_keys}
    nested["text_config"] = {k: flat[k] for k in text_keys}
    nested["text_config"]["model_type"] = "qwen2_vl_text"
    assert counts(nested).total == TRUTH["Qwen2-VL-2B-Instruct"][0]


def test_qwen2_5_vl():
    check("Qwen2.5-VL-3B-Instruct")
    v = architecture(config_of("Qwen2.5-VL-3B-Instruct")).vision
    assert v.norm == "rmsnorm" and v.ffn == 3420 and v.tokens_per_image == 256


# --- unknown model types and bad configs --------------------------------------------------------

def test_unknown_model_type_uses_generic_llama_keys():
    cfg = load("Meta-Llama-3.1-8B")
    cfg["model_type"] = "my_llama_fork"
    arch = architecture(cfg)
    assert not arch.known and arch.model_type == "my_llama_fork"
    assert count_params(arch).total == 8_030_261_248
    assert architecture(load("Meta-Llama-3.1-8B")).known


def test_unknown_mla_moe_model_type_reads_deepseek_keys():
    cfg = load("DeepSeek-V3")
    cfg["model_type"] = "kimi_k2"
    arch = architecture(cfg)
    assert arch.mla is not None and arch.is_moe and not arch.known
    assert count_params(arch).total == 671026404352


@pytest.mark.parametrize("key", ["hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "vocab_size"])
def test_missing_required_key_names_it(key):
    cfg = load("Meta-Llama-3.1-8B")
    del cfg[key]
    with pytest.raises(ConfigError) as err:
        architecture(cfg)
    assert err.value.key == key and key in str(err.value)


def test_missing_moe_key_names_it():
    cfg = load("calib-deepseek_v3")
    del cfg["qk_rope_head_dim"]
    del cfg["model_type"]  # a model given by its dimensions: no family default to fall back on
    cfg.pop("architectures", None)
    with pytest.raises(ConfigError) as err:
        architecture(cfg)
    assert err.value.key == "qk_rope_head_dim"
    cfg = load("Qwen3-30B-A3B")
    del cfg["moe_intermediate_size"]
    del cfg["model_type"]
    cfg.pop("architectures", None)
    assert architecture(cfg).moe.expert_ffn == cfg["intermediate_size"]  # generic fallback


def test_missing_vision_config_names_it():
    cfg = load("llava-1.5-7b-hf")
    del cfg["vision_config"]
    with pytest.raises(ConfigError) as err:
        architecture(cfg)
    assert err.value.key == "vision_config"


@pytest.mark.parametrize("key,value", [
    ("hidden_size", "4096"), ("hidden_size", -1), ("hidden_size", 0), ("hidden_size", 4096.5),
    ("hidden_size", float("nan")), ("hidden_size", float("inf")), ("num_hidden_layers", True),
    ("num_attention_heads", [32]), ("vocab_size", {"n": 1}), ("num_key_value_heads", -8),
    ("intermediate_size", "big"), ("tie_word_embeddings", "false"), ("attention_dropout", 1.5),
    ("attention_dropout", "0.1"), ("num_hidden_layers", 10 ** 12), ("model_type", 7),
])
def test_wrong_types_raise_config_error(key, value):
    cfg = load("Meta-Llama-3.1-8B")
    cfg[key] = value
    with pytest.raises(ConfigError) as err:
        architecture(cfg)
    assert err.value.key == key


def test_integral_floats_are_accepted():
    cfg = load("Meta-Llama-3.1-8B")
    cfg["hidden_size"] = 4096.0
    assert counts(cfg).total == 8_030_261_248


def test_nested_errors_name_the_nested_key():
    cfg = load("llava-1.5-7b-hf")
    cfg["vision_config"]["patch_size"] = "14"
    with pytest.raises(ConfigError) as err:
        architecture(cfg)
    assert err.value.key == "vision_config.patch_size"


def test_not_a_mapping():
    for bad in ([], "config", None, 3):
        with pytest.raises(ConfigError):
            architecture(bad)


# --- property test: random mutations of real configs never raise anything but ConfigError -------

_BASES = [load(p.stem) for p in sorted(FIXTURES.glob("*.json"))] + \
    [copy.deepcopy(c) for c in PUBLISHED.values()]

_junk = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10 ** 6, max_value=10 ** 6),
    st.integers(min_value=-2 ** 70, max_value=2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.lists(st.integers(min_value=-4, max_value=64), max_size=4),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _paths(config, prefix=()):
    for key, value in config.items():
        yield prefix + (key,)
        if isinstance(value, dict):
            yield from _paths(value, prefix + (key,))


@st.composite
def mutated_configs(draw):
    config = copy.deepcopy(draw(st.sampled_from(_BASES)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = list(_paths(config))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = config
        for key in path[:-1]:
            parent = parent[key]
        if draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(_junk)
    return config


@pytest.mark.slow  # 400 generated configs
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_configs())
def test_mutated_real_configs_give_counts_or_config_error(config):
    try:
        arch = architecture(config)
    except ConfigError as err:
        assert isinstance(err.key, str) and err.key
        return
    assert isinstance(arch, Architecture)
    assert 1 <= arch.layers <= MAX_LAYERS
    got = count_params(arch)
    assert isinstance(got.total, int) and got.total > 0
    for value in (arch.attention_dropout, arch.hidden_dropout, arch.embedding_dropout):
        assert 0.0 <= value <= 1.0 and math.isfinite(value)


# Llama 4: transformers modeling_llama4.py. A MoE layer holds num_local_experts experts and one
# shared expert of width intermediate_size plus a bias-free router; a dense layer's MLP is
# intermediate_size_mlp wide; layer i is MoE when i is in range(step - 1, L, step).
SCOUT = Path(__file__).resolve().parents[2] / "fixtures" / "shared-real" / "hf-configs" / \
    "Llama-4-Scout-17B-16E-Instruct.json"


def _llama4_text_counts(config: dict):
    arch = architecture(config)
    got = count_params(arch)
    d, ffn = arch.hidden, arch.moe.expert_ffn
    routed_active = sum(arch.moe_layers) * arch.moe.top_k * 3 * d * ffn
    return arch, got, got.total - got.experts + routed_active


def test_llama4_scout_and_maverick_match_the_published_counts():
    """Scout (every layer MoE, 16 experts) is published as 17B active / 109B total with its
    vision tower; Maverick (interleave_moe_layer_step 2, 128 experts, otherwise Scout's text
    dimensions: Meta's config.json) as 17B active / 400B total. Counted 778B before, with every
    layer taken as MoE."""
    scout = json.loads(SCOUT.read_text(encoding="utf-8"))
    arch, got, active = _llama4_text_counts(scout)
    assert sum(arch.moe_layers) == 48 and arch.ffn == 16384
    # text model alone: 48 × (attention 62,914,560 + 16 experts 2,013,265,920 + shared
    # 125,829,120 + router 81,920 + norms 10,240) + embeddings and head 2 × 1,034,485,760 + norm
    assert got.total == 107_769_861_120
    assert round(active / 1e9, 1) == 17.2
    maverick = copy.deepcopy(scout)
    maverick["text_config"].update(interleave_moe_layer_step=2, num_local_experts=128)
    arch, got, active = _llama4_text_counts(maverick)
    assert arch.moe_layers[:4] == (False, True, False, True) and sum(arch.moe_layers) == 24
    assert got.total == 400_711_848_960 and abs(got.total / 400e9 - 1) < 0.002
    assert round(active / 1e9, 1) == 17.2
    # an explicit moe_layers list wins over the step (configuration_llama4.py)
    maverick["text_config"]["moe_layers"] = [0, 1]
    assert sum(architecture(maverick).moe_layers) == 2
