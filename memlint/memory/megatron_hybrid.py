"""Megatron-LM's hybrid models (HybridModel, pretrain_hybrid.py / pretrain_mamba.py) from the keys
the Megatron adapter writes (`model_type` "megatron_hybrid"): the layer plan of
`--hybrid-layer-pattern` and the exact parameters of each layer.

Sources (NVIDIA/Megatron-LM@d98e8a64dd):
- megatron/core/models/hybrid/hybrid_layer_allocation.py: the symbols (M Mamba, * attention,
  - MLP, E MoE; G GatedDeltaNet, D DSA, + MLA), '|' pipeline segments, '/' the MTP patterns;
- megatron/core/models/hybrid/hybrid_layer_specs.py `hybrid_stack_spec`: a Mamba layer is
  MambaMixer with in_proj a TELayerNormColumnParallelLinear (the layer's norm fused into it); an
  attention layer is a TransformerLayer with self-attention only (norm fused into linear_qkv);
  an MLP layer an MLPLayer (norm fused into linear_fc1); a MoE layer a MoETransformerLayer with
  a pre-MLP TENorm and the MoE block;
- megatron/core/ssm/mamba_mixer.py: d_inner = expand · d (expand 2) or mamba_num_heads ·
  mamba_head_dim, heads = d_inner / mamba_head_dim, in_proj d -> 2·d_inner + 2·G·N + H without
  bias, conv1d weight and bias over d_inner + 2·G·N channels (d_conv 4), dt_bias, A_log and D
  per head, RMSNormGated over d_inner, out_proj d_inner -> d without bias;
- megatron/core/transformer/transformer_config.py: mamba_state_dim 128, mamba_head_dim 64,
  mamba_num_groups 8; the HybridStack ends in a final norm.
The embedding, positions, output layer, biases and norm kind follow Megatron's GPT flags
(the adapter writes them as for megatron_gpt).
"""
from __future__ import annotations

from memlint.facts import hybrid_pattern as hp
from memlint.memory.architecture import MAX_LAYERS, ConfigError, LayerParams, ParamCounts
from memlint.memory.config_reader import ConfigReader
from memlint.memory.hybrid_model import FFN, Attention, HybridLayer, Layout
from memlint.memory.mixers import Mamba2

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Mapping

def megatron_hybrid_layout(config: Mapping) -> Layout:
    r = ConfigReader(config, "megatron_hybrid")
    pattern = r.str("hybrid_layer_pattern")
    main = "".join(hp.segments(pattern))
    bad = sorted(set(main) - hp.SYMBOLS)
    if bad:
        raise ConfigError(r.key("hybrid_layer_pattern"),
                          f"unknown layer symbol(s) {''.join(bad)!r} in the hybrid layer pattern")
    if not main or len(main) > MAX_LAYERS:
        raise ConfigError(r.key("hybrid_layer_pattern"), f"{len(main)} layers is not a model")
    d = r.int("hidden_size", minimum=1)
    per_norm = 2 * d if r.str("norm", default="layernorm") == "layernorm" else d
    head_dim = r.int("mamba_head_dim", default=64, minimum=1)
    heads = r.int("mamba_num_heads", required=False)
    d_inner = heads * head_dim if heads else r.int("mamba_expand", default=2, minimum=1) * d
    mixer = Mamba2(d_inner=d_inner, heads=heads or d_inner // head_dim, head_dim=head_dim,
                   groups=r.int("mamba_num_groups", default=8, minimum=1),
                   state=r.int("mamba_state_dim", default=128, minimum=1), conv_kernel=4,
                   chunk=128)
    n_heads = r.int("num_attention_heads", minimum=1)
    attn = Attention(heads=n_heads, kv_heads=r.int("num_key_value_heads", default=n_heads,
                                                   minimum=1),
                     head_dim=r.int("head_dim", default=d // n_heads, minimum=1), width=d,
                     bias=r.bool("attention_bias", default=True),
                     qk_norm=r.bool("qk_layernorm", default=False))
    out_bias = r.bool("output_bias", default=True)
    mlp = FFN("dense", ffn=r.int("intermediate_size", minimum=1),
              gated=r.bool("gated_mlp", default=False), bias=r.bool("mlp_bias", default=True))
    moe = _moe(r) if "E" in main else None
    layers = []
    for symbol in main:
        if symbol == "M":
            layers.append(HybridLayer("mamba2", FFN("none"), ssm=mixer,
                                      params=LayerParams(attention=mixer.params(d),
                                                         norms=per_norm)))
        elif symbol == "*":
            p = attn.params(d) - (0 if out_bias or not attn.bias else d)
            layers.append(HybridLayer("attention", FFN("none"), attention=attn,
                                      params=LayerParams(attention=p, norms=per_norm)))
        elif symbol == "-":
            layers.append(HybridLayer("none", mlp, params=LayerParams(
                attention=0, norms=per_norm, **mlp.parts(d))))
        elif symbol == "E":
            layers.append(HybridLayer("none", moe, params=LayerParams(
                attention=0, norms=per_norm, **moe.parts(d))))
        else:
            # G, D, +: not counted (the adapter reports the model as "no estimate")
            raise ConfigError(r.key("hybrid_layer_pattern"),
                              f"layer symbol {symbol!r} is not counted by memlint")
    vocab = r.int("vocab_size", minimum=1)
    tied = r.bool("tie_word_embeddings", default=True)
    positions = r.int("learned_positions", default=0)
    counts = ParamCounts(embedding=vocab * d, position_embedding=positions * d,
                         lm_head=0 if tied else vocab * d, final_norm=per_norm,
                         layers=tuple(x.params for x in layers))
    return Layout(model_type="megatron_hybrid", hidden=d, vocab=vocab, tied=tied,
                  layers=tuple(layers), counts=counts)


def _moe(r: ConfigReader) -> FFN:
    experts = r.int("num_local_experts", minimum=1)
    return FFN("moe", gated=r.bool("gated_mlp", default=False), experts=experts,
               top_k=r.int("num_experts_per_tok", default=2, minimum=1),
               expert_ffn=r.int("moe_intermediate_size", minimum=1),
               shared_ffn=r.int("shared_expert_intermediate_size", default=0),
               shared_gate=r.bool("shared_expert_gate", default=False))
