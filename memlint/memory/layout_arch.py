"""Models with a per-layer plan (hybrids, linear attention, T5: memory/hybrid_model.py,
t5_model.py, megatron_hybrid.py) as an `Architecture`: the summary fields the rest of the memory
model reads (width, the attention of the attention layers, the dense MLP, MoE, vocabulary) plus
the `Layout` itself, and their exact counts for the vocabulary the framework builds.
"""
from __future__ import annotations

from memlint.memory.architecture import (HYBRID_MODEL_TYPES, T5_MODEL_TYPES, Architecture, MoE,
                                         ParamCounts)
from memlint.records import replace

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Mapping

    from memlint.memory.hybrid_model import Layout

#: model types counted through a per-layer plan
LAYOUT_MODEL_TYPES = HYBRID_MODEL_TYPES | T5_MODEL_TYPES | {"megatron_hybrid"}


def layout_of(config: Mapping, model_type: str) -> Layout:
    # each plan's reader loads when a model of its kind is counted (a dense model needs none)
    if model_type in T5_MODEL_TYPES:
        from memlint.memory.t5_model import t5_layout  # start-up: T5 only

        return t5_layout(config, model_type)
    if model_type == "megatron_hybrid":
        # start-up: Megatron's hybrid layer patterns only
        from memlint.memory.megatron_hybrid import megatron_hybrid_layout

        return megatron_hybrid_layout(config)
    from memlint.memory.hybrid_model import hybrid_layout  # start-up: the hybrids only

    return hybrid_layout(config, model_type)


def layout_architecture(config: Mapping, model_type: str) -> Architecture:
    layout = layout_of(config, model_type)
    d = layout.hidden
    attn = next((x.attention for x in layout.layers if x.attention is not None), None)
    dense = next((x.ffn for x in layout.layers if x.ffn.kind == "dense"), None)
    moe_ffn = next((x.ffn for x in layout.layers if x.ffn.kind == "moe"), None)
    moe = None
    if moe_ffn is not None:
        moe = MoE(num_experts=moe_ffn.experts, top_k=moe_ffn.top_k, expert_ffn=moe_ffn.expert_ffn,
                  shared_ffn=moe_ffn.shared_ffn, shared_gate=moe_ffn.shared_gate)
    heads = attn.heads if attn else 1
    ffn = (dense or moe_ffn)
    r = config
    norm = "layernorm" if str(r.get("norm", "")) == "layernorm" else "rmsnorm"
    return Architecture(
        model_type=layout.model_type, hidden=d, layers=len(layout.layers), heads=heads,
        kv_heads=attn.kv_heads if attn else 1, head_dim=attn.head_dim if attn else d,
        ffn=(ffn.ffn or ffn.expert_ffn) if ffn else 0, vocab=layout.vocab, tied=layout.tied,
        gated_mlp=ffn.gated if ffn else True, norm=norm,
        learned_positions=layout.counts.position_embedding // d,
        attention_dropout=_prob(r, "attention_dropout", "dropout_rate"),
        hidden_dropout=_prob(r, "hidden_dropout", "dropout_rate"),
        embedding_dropout=_prob(r, "embedding_dropout", "dropout_rate"),
        moe=moe, moe_layers=tuple(x.ffn.kind == "moe" for x in layout.layers),
        qkv_bias=bool(attn and attn.bias), output_bias=bool(attn and attn.bias),
        mlp_bias=bool(dense and dense.bias), qk_norm="head" if attn and attn.qk_norm else "",
        layout=layout)


def layout_counts(arch: Architecture) -> ParamCounts:
    """The layout's counts with the vocabulary of `arch` (padded by the framework)."""
    layout = arch.layout
    counts = layout.counts
    d = layout.hidden
    embedding = counts.embedding - layout.vocab * d + arch.vocab * d
    lm_head = counts.lm_head
    if lm_head:
        per_row = lm_head // layout.vocab
        lm_head = per_row * arch.vocab
    return replace(counts, embedding=embedding, lm_head=lm_head)


def layout_lora_per_layer(arch: Architecture, rank: int, targets: str) -> list:
    """LoRA adapter parameters of each layer of a plan (A: in×r, B: r×out per adapted linear).
    `qkvo` adapts the attention projections only, so Mamba, Gated DeltaNet, short-conv and
    MLP-only layers get none (their linears have other names); `all-linear` (PEFT: every
    nn.Linear but the output layer) adds the mixers' in/out projections, the dense MLP's
    linears and, in MoE layers, the router and the shared expert (routed experts are fused 3-D
    parameters in transformers 5, which PEFT does not wrap)."""
    d = arch.hidden
    out = []
    for layer in arch.layout.layers:
        pairs = []
        for a in (layer.attention, layer.cross_attention):
            if a is not None:
                q = a.heads * a.head_dim
                kv = a.kv_heads * a.head_dim
                pairs += [(a.width, 2 * q if a.output_gate else q), (a.width, kv), (a.width, kv),
                          (q, d)]
        if targets.startswith("all-linear"):
            m = layer.ssm
            if hasattr(m, "in_proj_out"):            # Mamba-2
                pairs += [(d, m.in_proj_out), (m.d_inner, d)]
            elif hasattr(m, "dt_rank"):              # Mamba-1: in, x, dt, out projections
                pairs += [(d, 2 * m.d_inner), (m.d_inner, m.dt_rank + 2 * m.state),
                          (m.dt_rank, m.d_inner), (m.d_inner, d)]
            elif hasattr(m, "conv_dim"):             # Gated DeltaNet
                pairs += [(d, m.conv_dim + m.v_width), (d, 2 * m.value_heads), (m.v_width, d)]
            elif m is not None:                      # LFM2 short conv
                pairs += [(d, 3 * d), (d, d)]
            f = layer.ffn
            mats = 3 if f.gated else 2
            if f.kind == "dense":
                pairs += [(d, f.ffn)] * (mats - 1) + [(f.ffn, d)]
            elif f.kind == "moe":
                pairs.append((d, f.experts))
                if f.shared_ffn:
                    pairs += [(d, f.shared_ffn)] * (mats - 1) + [(f.shared_ffn, d)]
                if targets == "all-linear+experts":
                    width = f.latent or d
                    pairs += [(width, f.expert_ffn)] * ((mats - 1) * f.experts) + \
                        [(f.expert_ffn, width)] * f.experts
        out.append(sum(rank * (a + b) for a, b in pairs))
    return out


def decoder_seq(arch: Architecture) -> int:
    """The decoder's sequence length of an encoder-decoder (0: not one, or not given)."""
    return arch.layout.decoder_seq if arch.layout is not None else 0


def _prob(config: Mapping, *names: str) -> float:
    for name in names:
        value = config.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1:
            return float(value)
    return 0.0
