"""A decoder-only language model's config -> `Architecture`: dense and MoE families (Mixtral,
Qwen-MoE, OLMoE, DeepSeek, Llama-4), MLA, Megatron's GPTModel and its LLaVA vision tower.
"""
from __future__ import annotations

from memlint.memory.architecture import (FRAMEWORK_MODEL_TYPES, KNOWN_MODEL_TYPES, MAX_LAYERS, MLA,
                                         Architecture, ConfigError, MoE, Vision, mlp_params)
from memlint.memory.config_reader import ConfigReader

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


def text_architecture(r: ConfigReader, model_type: str, vision: Optional[Vision] = None,
                      tied: Optional[bool] = None) -> Architecture:
    """A decoder-only language model (the whole model, or the text part of a VLM)."""
    fam = model_type
    known = fam in KNOWN_MODEL_TYPES or fam in FRAMEWORK_MODEL_TYPES or fam in (
        "qwen2_vl_text", "qwen2_5_vl_text")
    arch = _shape(r, fam)
    if tied is None:
        tied = r.bool("tie_word_embeddings", default=False)
    arch.update(model_type=model_type, tied=tied, known=known)
    arch["attention_dropout"] = r.probability("attention_dropout", "attn_pdrop",
                                              "attention_probs_dropout_prob", "attn_dropout_prob")
    arch["hidden_dropout"] = r.probability("hidden_dropout", "resid_pdrop",
                                           "hidden_dropout_prob")
    arch["embedding_dropout"] = r.probability("embd_pdrop", "embedding_dropout", "emb_dropout_prob")
    _family_options(r, fam, known, arch)
    _experts(r, fam, known, arch)
    mla = _mla(r, fam, known)
    if mla is not None:
        arch["mla"] = mla
    if vision is None and fam == "megatron_gpt" and r.raw("vision_num_layers", required=False):
        vision = _megatron_vision(r, arch)
    arch["vision"] = vision
    return Architecture(**arch)


def _shape(r: ConfigReader, fam: str) -> dict:
    """hidden, layers, heads, kv_heads, head_dim, ffn and vocab, as the family reads them."""
    hidden = r.int("hidden_size", "n_embd", "d_model", minimum=1)
    layers = r.int("num_hidden_layers", "n_layer", "num_layers", minimum=1)
    if layers > MAX_LAYERS:
        raise ConfigError(r.key("num_hidden_layers"), f"{layers} decoder layers is not a model")
    heads = r.int("num_attention_heads", "n_head", minimum=1)
    vocab = r.int("vocab_size", minimum=1)
    if fam == "gpt_neox":  # no GQA in GPTNeoX: query_key_value is 3·d wide
        kv_heads = heads
        head_dim = hidden // heads
    elif fam == "qwen":    # Qwen v1 (QWenLMHeadModel): no GQA, heads of kv_channels
        kv_heads = heads
        head_dim = r.int("kv_channels", default=hidden // heads, minimum=1)
    else:
        kv_heads = r.int("num_key_value_heads", default=heads, minimum=1)
        if fam in ("qwen2_vl_text", "qwen2_5_vl_text"):
            head_dim = hidden // heads  # the Qwen2-VL text attention ignores head_dim
        else:
            head_dim = r.int("head_dim", default=hidden // heads, minimum=1)
    if fam == "gpt2":
        ffn = r.int("n_inner", default=4 * hidden, minimum=1)
    elif fam == "qwen":    # QWenMLP: w1, w2 and c_proj are intermediate_size // 2 wide
        ffn = r.int("intermediate_size", minimum=2) // 2
    else:
        ffn = r.int("intermediate_size", "n_inner", "ffn_hidden_size", default=4 * hidden,
                    minimum=1)
    return dict(hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads,
                head_dim=head_dim, ffn=ffn, vocab=vocab)


def _family_options(r: ConfigReader, fam: str, known: bool, arch: dict) -> None:
    """Biases, norms, fused projections and positions the family builds."""
    if fam == "megatron_gpt":
        # Megatron-LM's GPTModel as its arguments describe it (written by the Megatron adapter):
        # every choice explicit, no family defaults (megatron/core/models/gpt/gpt_model.py,
        # gpt_layer_specs.py).
        arch.update(gated_mlp=r.bool("gated_mlp"), norm=r.str("norm"),
                    qkv_bias=r.bool("attention_bias"), output_bias=r.bool("output_bias"),
                    mlp_bias=r.bool("mlp_bias"),
                    learned_positions=r.int("learned_positions", default=0),
                    qk_norm="head" if r.bool("qk_layernorm", default=False) else "",
                    bert_heads=r.str("bert_heads", default=""))
    elif fam == "gpt2":
        arch.update(gated_mlp=False, norm="layernorm", qkv_bias=True, output_bias=True,
                    mlp_bias=True, fused_qkv=True,
                    learned_positions=r.int("n_positions", "max_position_embeddings",
                                            minimum=1))
    elif fam == "gpt_neox":
        bias = r.bool("attention_bias", default=True)
        arch.update(gated_mlp=False, norm="layernorm", qkv_bias=bias, output_bias=bias,
                    mlp_bias=True, fused_qkv=True,
                    parallel_attention=r.bool("use_parallel_residual", default=True),
                    embedding_dropout=arch["hidden_dropout"])  # emb_dropout uses hidden_dropout
    elif fam in ("qwen2", "qwen2_vl_text", "qwen2_5_vl_text"):
        arch.update(qkv_bias=True)
    elif fam == "qwen":
        # Qwen v1's remote modeling_qwen.py (a copy: zhangningboo/Qwen-7B@1ff2086): one biased
        # c_attn (3 x kv_channels x heads), c_proj and the MLP biased only without `no_bias`
        biased = not r.bool("no_bias", default=True)
        arch.update(qkv_bias=True, fused_qkv=True, output_bias=biased, mlp_bias=biased)
    elif fam == "qwen2_moe":
        arch.update(qkv_bias=r.bool("qkv_bias", default=True))
    elif fam == "phi3":
        # Phi3Attention.qkv_proj and Phi3MLP.gate_up_proj: one nn.Linear each
        # (transformers models/phi3/modeling_phi3.py)
        arch.update(fused_qkv=True, fused_gate_up=True)
    elif fam == "starcoder2":
        # Starcoder2: LayerNorm (with bias), biased q/k/v/o and a plain GELU MLP (c_fc, c_proj),
        # all biased when `use_bias` (transformers models/starcoder2/modeling_starcoder2.py)
        bias = r.bool("use_bias", default=True)
        arch.update(gated_mlp=False, norm="layernorm", qkv_bias=bias, output_bias=bias,
                    mlp_bias=bias)
    elif fam in ("mistral", "mixtral"):
        pass
    else:  # llama, gemma*, qwen3*, olmoe, deepseek*, and the generic path
        bias = r.bool("attention_bias", default=False)
        arch.update(qkv_bias=bias, output_bias=bias)
        if fam in ("llama", "deepseek_v2") or not known:
            arch.update(mlp_bias=r.bool("mlp_bias", default=False))
    if fam in ("qwen3", "qwen3_moe", "qwen3_vl_text", "qwen3_vl_moe_text"):
        arch["qk_norm"] = "head"
    elif fam == "olmoe":
        arch["qk_norm"] = "full"
    elif fam == "gemma2":
        arch["norms_per_layer"] = 4


def _experts(r: ConfigReader, fam: str, known: bool, arch: dict) -> None:
    """Mixture of experts: `moe` and which layers are MoE layers (`moe_layers`)."""
    layers, ffn = arch["layers"], arch["ffn"]
    moe_layers = (False,) * layers
    moe = None
    if fam in ("qwen2_moe", "qwen3_moe"):
        n_exp = r.int("num_experts", "num_local_experts")
        if n_exp > 0:
            step = r.int("decoder_sparse_step", minimum=1)
            only = set(r.int_list("mlp_only_layers"))
            moe_layers = tuple(i not in only and (i + 1) % step == 0 for i in range(layers))
            shared = r.int("shared_expert_intermediate_size", default=0) \
                if fam == "qwen2_moe" else 0
            moe = MoE(num_experts=n_exp, top_k=r.int("num_experts_per_tok"),
                      expert_ffn=r.int("moe_intermediate_size", minimum=1), shared_ffn=shared,
                      shared_gate=fam == "qwen2_moe")
    elif fam in ("mixtral", "olmoe"):
        n_exp = r.int("num_local_experts", "num_experts", minimum=1)
        moe = MoE(num_experts=n_exp, top_k=r.int("num_experts_per_tok"), expert_ffn=ffn)
        moe_layers = (True,) * layers
    elif fam == "megatron_gpt":
        moe, moe_layers = _megatron_moe(r, layers)
    elif fam in ("deepseek_v2", "deepseek_v3") or (not known and "kv_lora_rank" in r.data):
        moe, moe_layers = _deepseek_moe(r, fam, layers)
    elif fam == "llama4_text":
        moe, moe_layers, dense_ffn = _llama4_moe(r, layers, ffn)
        arch["ffn"] = dense_ffn
    elif not known:
        n_exp = r.int("num_local_experts", "n_routed_experts", "num_experts", required=False)
        if n_exp:
            moe = MoE(num_experts=n_exp, top_k=r.int("num_experts_per_tok", default=2),
                      expert_ffn=r.int("moe_intermediate_size", default=ffn, minimum=1))
            moe_layers = (True,) * layers
    arch.update(moe=moe, moe_layers=moe_layers)


def _mla(r: ConfigReader, fam: str, known: bool) -> Optional[MLA]:
    """Multi-head latent attention (DeepSeek-V2/V3, Megatron --multi-latent-attention)."""
    mla_family = fam in ("deepseek_v2", "deepseek_v3") or (
        fam == "megatron_gpt" and r.bool("multi_latent_attention", default=False)) or (
        not known and "kv_lora_rank" in r.data)
    if not mla_family:
        return None
    if "q_lora_rank" in r.data and r.data["q_lora_rank"] is None:
        q_rank = None  # an explicit null: a plain q_proj (DeepSeek-V2-Lite)
    else:
        q_rank = r.int("q_lora_rank", required=False)
    return MLA(q_lora_rank=q_rank or 0, kv_lora_rank=r.int("kv_lora_rank", minimum=1),
               qk_nope_head_dim=r.int("qk_nope_head_dim"),
               qk_rope_head_dim=r.int("qk_rope_head_dim"),
               v_head_dim=r.int("v_head_dim", minimum=1))


def _megatron_vision(r: ConfigReader, lm: dict) -> Vision:
    """Megatron-LM LLaVA (pretrain_vlm.py): a CLIP ViT built from a copy of the language model's
    TransformerConfig (same width, heads, MLP, norm and biases; `--encoder-num-layers` layers) and
    an MLP projection with the language MLP's spec (megatron/core/models/vision/clip_vit_model.py,
    megatron/core/models/multimodal/llava_model.py). Parameters: conv1 patch embedding (no bias),
    class token, learned positions for every patch (+ class token), ln_pre, the layers
    (LayerNorm-fused qkv + proj, fc1 / fc2, biased when the LM's linears are), and the projection
    fc1 (d_vit x ffn) + fc2 (ffn x d)."""
    d = lm["hidden"]
    layers = r.int("vision_num_layers", minimum=1)
    patch = r.int("vision_patch_dim", minimum=1)
    height = r.int("vision_img_h", minimum=1)
    width = r.int("vision_img_w", minimum=1)
    class_token = r.bool("vision_class_token", default=True)
    patches = (height // patch) * (width // patch)
    # CLIPViTModel always adds the class token (llava_model.py add_class_token=True for clip):
    # it keeps a position and runs through the layers even when the LM drops it
    positions = patches + 1
    tokens = patches + (1 if class_token else 0)
    ffn = lm["ffn"]
    gated = lm.get("gated_mlp", False)
    bias = lm.get("mlp_bias", False)
    per_norm = 2 * d if lm.get("norm") == "layernorm" else d
    attention = 4 * d * d + (4 * d if bias else 0)
    mlp = mlp_params(d, ffn, gated, bias)
    tower = 3 * patch * patch * d + d + positions * d + per_norm \
        + layers * (attention + mlp + 2 * per_norm)
    projector = mlp_params(d, ffn, gated, bias)
    # whole on every tensor-parallel rank: conv1, class token, positions, ln_pre, and per layer
    # its norms and the row-parallel (proj, fc2) biases; the projection's fc2 bias
    row_biases = 2 * d if bias else 0
    replicated = 3 * patch * patch * d + d + positions * d + per_norm \
        + layers * (2 * per_norm + row_biases) + (d if bias else 0)
    return Vision(hidden=d, layers=layers, heads=lm["heads"], ffn=ffn, patch_size=patch,
                  image_size=height, tokens_per_image=tokens, params=tower,
                  projector_params=projector, model_type="megatron_clip",
                  norm=lm.get("norm", "layernorm"), tp_replicated=replicated,
                  encoder_tokens=patches + 1)


def _deepseek_moe(r: ConfigReader, fam: str, layers: int):
    n_exp = r.int("n_routed_experts", required=False)
    if not n_exp:
        return None, (False,) * layers
    first = r.int("first_k_dense_replace", default=0)
    freq = r.int("moe_layer_freq", default=1, minimum=1)
    n_shared = r.int("n_shared_experts", default=0)
    expert_ffn = r.int("moe_intermediate_size", minimum=1)
    moe = MoE(num_experts=n_exp, top_k=r.int("num_experts_per_tok", default=n_exp),
              expert_ffn=expert_ffn, shared_ffn=expert_ffn * n_shared,
              router_bias=fam == "deepseek_v3" or r.raw("topk_method", default="") == "noaux_tc")
    return moe, tuple(i >= first and i % freq == 0 for i in range(layers))


def _llama4_moe(r: ConfigReader, layers: int, ffn: int):
    """Llama 4 (transformers configuration_llama4.py / modeling_llama4.py): layer i is MoE when
    it is in `moe_layers`, by default range(step - 1, L, step) for `interleave_moe_layer_step`
    (Scout 1: every layer; Maverick 2: every other one). A MoE layer holds `num_local_experts`
    gated experts of width `intermediate_size`, one shared expert of that width and a bias-free
    router; a dense layer's MLP is `intermediate_size_mlp` wide."""
    n_exp = r.int("num_local_experts", minimum=1)
    step = r.int("interleave_moe_layer_step", default=1, minimum=1)
    if r.data.get("moe_layers") is not None:
        chosen = set(r.int_list("moe_layers"))
    else:
        chosen = set(range(step - 1, layers, step))
    moe = MoE(num_experts=n_exp, top_k=r.int("num_experts_per_tok", default=1),
              expert_ffn=ffn, shared_ffn=ffn)
    dense_ffn = r.int("intermediate_size_mlp", default=ffn, minimum=1)
    return moe, tuple(i in chosen for i in range(layers)), dense_ffn


def _megatron_moe(r: ConfigReader, layers: int):
    """Megatron `--num-experts` (any activation and norm): MoE on the layers `--moe-layer-freq`
    selects (written as moe_layer_freq / first_k_dense_replace / mlp_only_layers)."""
    n_exp = r.int("num_local_experts", default=0)
    if not n_exp:
        return None, (False,) * layers
    first = r.int("first_k_dense_replace", default=0)
    freq = r.int("moe_layer_freq", default=1, minimum=1)
    only = set(r.int_list("mlp_only_layers"))
    moe = MoE(num_experts=n_exp, top_k=r.int("num_experts_per_tok", default=2, minimum=1),
              expert_ffn=r.int("moe_intermediate_size", minimum=1),
              shared_ffn=r.int("shared_expert_intermediate_size", default=0),
              shared_gate=r.bool("shared_expert_gate", default=False))
    return moe, tuple(i >= first and i % freq == 0 and i not in only for i in range(layers))
