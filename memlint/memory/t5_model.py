"""T5 encoder-decoders: the layer plan (encoder layers, then decoder layers with cross-attention)
and exact parameter counts, for the HF `t5` config and for Megatron-LM's T5Model.

`t5_layout(config, model_type)` returns a `Layout` (memory/hybrid_model.py) whose layers are the
encoder's (`stack` "encoder") followed by the decoder's (`stack` "decoder", each with a
`cross_attention`), so stage code can give each stack its own sequence length.

HF `t5` (transformers 5.24 modeling_t5.py): a shared embedding V×d (the encoder's and decoder's
embed_tokens are tied to it); per encoder block a bias-free self-attention q, k, v, o of
heads · d_kv, a DenseReluDense wi -> wo (gated "gated-*" projections: wi_0, wi_1, wo) and one
T5LayerNorm (a weight of d) per sub-layer; the decoder block adds EncDecAttention q, k, v, o and
its norm; the first block of each stack owns a relative_attention_bias table (buckets × heads);
a final_layer_norm per stack; the lm_head is tied to the shared embedding (transformers 5 forces
tie_word_embeddings to True for T5, configuration_t5.py; T5 v1.1 / Flan-T5 configs that say
false keep only its other meaning, no decoder-output scaling).

Megatron `megatron_t5` (written by the Megatron adapter from pretrain_t5.py's flags;
megatron/core/models/T5/t5_model.py and t5_spec.py at NVIDIA/Megatron-LM@d98e8a64dd): word
embeddings V×d and, for learned_absolute positions (Megatron's default), max_position_embeddings×d
on the first stage; encoder layers of input LayerNorm + fused qkv + linear_proj + pre-MLP
LayerNorm + fc1/fc2 (biases with add_bias_linear, the default); decoder layers add a
pre-cross-attention LayerNorm and CrossAttention (linear_q, linear_kv of 2·kv width,
linear_proj); each TransformerBlock ends in a final LayerNorm; T5LMHead's output layer shares the
word embeddings and, when it does, adds a bias of V (its `bias=share_embeddings_and_output_weights`);
relative position embeddings (`--position-embedding-type relative`): one buckets × heads table for
the encoder and one for the decoder. pretrain_t5.py builds the decoder from `config.num_layers`,
which is `--encoder-num-layers` when `--num-layers` is not given (`--decoder-num-layers` only
enters the virtual-pipeline arithmetic), and raises "Pipeline parallelism is not supported for
T5." for pp > 1.
"""
from __future__ import annotations

from memlint.memory.architecture import MAX_LAYERS, ConfigError, LayerParams, ParamCounts
from memlint.memory.config_reader import ConfigReader
from memlint.memory.hybrid_model import FFN, Attention, HybridLayer, Layout

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Mapping


# transformers' T5Config defaults (configuration_t5.py, 5.24): t5-small
_HF_DEFAULTS = dict(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8,
                    relative_attention_num_buckets=32, feed_forward_proj="relu",
                    tie_word_embeddings=True)


def t5_layout(config: Mapping, model_type: str) -> Layout:
    if model_type == "megatron_t5":
        return _megatron(ConfigReader(config, model_type))
    return _hf(ConfigReader(config, model_type))


def _hf(r: ConfigReader) -> Layout:
    def get(name, *aliases, **kw):
        return r.int(name, *aliases, default=_HF_DEFAULTS.get(name), **kw)
    d = get("d_model", "hidden_size", minimum=1)
    heads = get("num_heads", "num_attention_heads", minimum=1)
    d_kv = get("d_kv", minimum=1)
    ffn = get("d_ff", minimum=1)
    enc = get("num_layers", minimum=1)
    dec = r.int("num_decoder_layers", default=enc, minimum=1)
    _check(r, enc + dec)
    proj = r.str("feed_forward_proj", default="relu")
    gated = proj.startswith("gated-")
    buckets = get("relative_attention_num_buckets", minimum=1)
    vocab = get("vocab_size", minimum=1)
    # transformers 5 ties T5's lm_head to the shared embedding whatever the config says
    # (configuration_t5.py: "we tie weights always"; tie_word_embeddings false now only turns off
    # the decoder-output scaling of T5 v1.1 / Flan-T5)
    r.bool("tie_word_embeddings", default=True)
    tied = True
    attn = Attention(heads=heads, kv_heads=heads, head_dim=d_kv, width=d)
    block = FFN("dense", ffn=ffn, gated=gated)
    layers = []
    for stack, count, norms in (("encoder", enc, 2), ("decoder", dec, 3)):
        for i in range(count):
            cross = attn if stack == "decoder" else None
            mixer = attn.params(d) + (attn.params(d) if cross else 0) + (
                buckets * heads if i == 0 else 0)
            layers.append(HybridLayer("attention", block, attention=attn, stack=stack,
                                      cross_attention=cross,
                                      params=LayerParams(attention=mixer, norms=norms * d,
                                                         **block.parts(d))))
    counts = ParamCounts(embedding=vocab * d, position_embedding=0,
                         lm_head=0 if tied else vocab * d, final_norm=2 * d,
                         layers=tuple(x.params for x in layers))
    return Layout(model_type="t5", hidden=d, vocab=vocab, tied=tied, layers=tuple(layers),
                  counts=counts)


def _megatron(r: ConfigReader) -> Layout:
    d = r.int("hidden_size", minimum=1)
    heads = r.int("num_attention_heads", minimum=1)
    kv = r.int("num_key_value_heads", default=heads, minimum=1)
    head_dim = r.int("head_dim", "kv_channels", default=d // heads, minimum=1)
    ffn = r.int("intermediate_size", minimum=1)
    enc = r.int("num_hidden_layers", "num_layers", minimum=1)
    dec = r.int("num_decoder_layers", default=enc, minimum=1)
    _check(r, enc + dec)
    bias = r.bool("attention_bias", default=True)
    mlp_bias = r.bool("mlp_bias", default=True)
    gated = r.bool("gated_mlp", default=False)
    per_norm = 2 * d if r.str("norm", default="layernorm") == "layernorm" else d
    vocab = r.int("vocab_size", minimum=1)
    tied = r.bool("tie_word_embeddings", default=True)
    buckets = r.int("relative_attention_num_buckets", default=0)
    attn = Attention(heads=heads, kv_heads=kv, head_dim=head_dim, width=d, bias=bias)
    # CrossAttention: linear_q (d -> q), linear_kv (d -> 2·kv), linear_proj: the same count as
    # the fused self-attention qkv + proj
    block = FFN("dense", ffn=ffn, gated=gated, bias=mlp_bias)
    layers = []
    for stack, count, norms in (("encoder", enc, 2), ("decoder", dec, 3)):
        for _ in range(count):
            cross = attn if stack == "decoder" else None
            mixer = attn.params(d) + (attn.params(d) if cross else 0)
            layers.append(HybridLayer("attention", block, attention=attn, stack=stack,
                                      cross_attention=cross,
                                      params=LayerParams(attention=mixer, norms=norms * per_norm,
                                                         **block.parts(d))))
    positions = r.int("learned_positions", default=0)
    lm_bias = vocab if tied else 0
    counts = ParamCounts(embedding=vocab * d + 2 * buckets * heads,
                         position_embedding=positions * d,
                         lm_head=(0 if tied else vocab * d) + lm_bias, final_norm=2 * per_norm,
                         layers=tuple(x.params for x in layers))
    return Layout(model_type="megatron_t5", hidden=d, vocab=vocab, tied=tied,
                  layers=tuple(layers), counts=counts,
                  decoder_seq=r.int("decoder_seq_length", default=0))


def _check(r: ConfigReader, n: int) -> None:
    if n > MAX_LAYERS:
        raise ConfigError(r.key("num_layers"), f"{n} layers is not a model")
