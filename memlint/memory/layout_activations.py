"""Saved activations of one layer of a per-layer plan (memory/hybrid_model.py `HybridLayer`):
its token mixer and its feed-forward block, each from the model that fits the framework.

A layer is cut out of the uniform decoder layer's items where the two halves meet: the
attention half ends where the second norm begins ("norm2 input" in the fused Megatron/TE model
of memory/activations.py, "post-attention norm" in the eager transformers model of
activations_eager.py, whose single residual-dropout item covers both halves and is split
evenly). An attention-only layer keeps the first half (Megatron's hybrid attention layer is a
TransformerLayer without MLP: hybrid_layer_specs.py), an MLP-only or MoE layer the second (MLPLayer,
MoETransformerLayer), and a Mamba, Gated DeltaNet or short-conv layer its mixer's own items
(memory/mixer_activations.py) in place of the attention half: for Megatron the whole MambaLayer
(norm fused into in_proj, dropout mask), for transformers the layer's input norm plus the mixer.
"""
from __future__ import annotations

import re

from memlint import lazy_import
from memlint.memory.terms import Item

# start-up: the mixers' activations (Mamba, Gated DeltaNet, short convolutions) load when a plan
# has such a layer
mix = lazy_import.module("memlint.memory.mixer_activations")

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Callable

#: the SSM / linear-attention kernels transformers dispatches to: "fused" (mamba_ssm,
#: causal-conv1d, fla installed: the CUDA training path) or "torch" (the modules' own fallbacks,
#: which transformers uses when those packages are absent and on a CPU); "auto": fused on CUDA,
#: torch on a CPU (assumption ssm.kernels)
KERNELS_SOURCE = ("assumption ssm.kernels (transformers integrations/hub_kernels.py "
                  "use_kernel_func_from_hub_with_fallback: hub kernels, else the mamba_ssm / "
                  "causal_conv1d / fla package, else the torch path)")


def fused_kernels(model) -> bool:
    setting = str(model.assume.get("ssm.kernels", "auto"))
    if setting == "auto":
        return model.scenario.hardware.device != "cpu"
    return setting == "fused"


def layout_source(model) -> str:
    """The activations Term's source for a per-layer plan: the kernels its mixers' items come
    from (memory/mixer_activations.py)."""
    layout = model.arch.layout
    kinds = {x.mixer for x in layout.layers}
    if any(x.stack == "encoder" for x in layout.layers):
        return ("Megatron T5 (megatron/core/models/T5/t5_spec.py: encoder layers over T_enc, "
                "decoder layers over T_dec with CrossAttention) on Korthikanti et al. 2022 "
                "section 4 (memory/layout_activations.py t5_layer_items)")
    parts = []
    if model.conv.eager_modules:
        which = "fused kernels" if fused_kernels(model) else "torch fallbacks"
        parts.append(f"transformers modules with the {which} ({KERNELS_SOURCE}) "
                     "(memory/mixer_activations.py hf_mixer_items)")
    elif "mamba2" in kinds:
        parts.append("Megatron MambaLayer through mamba_ssm mamba_split_conv1d_scan_combined "
                     "(mamba_ssm/ops/triton/ssd_combined.py at state-spaces/mamba@e9594ce; "
                     "memory/mixer_activations.py megatron_mamba_items)")
    parts.append("attention and FFN halves of the decoder layer items (memory/activations.py, "
                 "activations_eager.py)")
    return "; ".join(parts)


def plan_layer_items(model, layer, uniform: Callable[[bool], list], eager: bool) -> list:
    """Items of layer `layer` of the model's plan (T5 layers, or a hybrid's mixer and FFN)."""
    arch, topo, par, tr = model.arch, model.topo, model.par, model.tr
    c = model.dt.compute
    gemm = 1 if tr.precision == "fp8" else 0
    if layer.stack == "encoder" or layer.cross_attention is not None:
        layout = arch.layout
        return t5_layer_items(
            layer, uniform, c=c, tp=topo.tp, sp=par.sp, d=arch.hidden,
            dq=arch.heads * arch.head_dim, dkv=arch.kv_heads * arch.head_dim,
            hidden_dropout=arch.hidden_dropout > 0, t_enc=model.seq_local,
            t_dec=layout.decoder_seq or model.seq_local,
            decoder_layers=sum(x.stack == "decoder" for x in layout.layers), gemm=gemm,
            eager=eager)
    return layer_items(layer, uniform, eager, d=arch.hidden, c=c, tp=topo.tp, sp=par.sp,
                       hidden_dropout=arch.hidden_dropout > 0,
                       fused_kernels=fused_kernels(model), gemm=gemm,
                       model_type=arch.model_type, autocast=model.dt.autocast)

_DROPOUT_BOTH = "residual dropout masks (attention, MLP)"


def split_fused(items: list) -> tuple:
    """(attention half, MLP half) of a fused Megatron/TE layer's items."""
    cut = next((i for i, item in enumerate(items) if item.name == "norm2 input"), len(items))
    return items[:cut], items[cut:]


def split_eager(items: list) -> tuple:
    """(attention half, MLP half) of an eager transformers layer's items."""
    cut = next((i for i, item in enumerate(items)
                if item.name.startswith("post-attention norm")), len(items))
    first, second = [], []
    for item in items[:cut]:
        if item.name == _DROPOUT_BOTH:
            half = Item("residual dropout mask", item.per_token / 2)
            first.append(half)
            second.append(half)
        else:
            first.append(item)
    return first, second + items[cut:]


def _eager_attention_extras(a, c: int, norm_c: int) -> list:
    """What transformers' q/k norms (RMSNorm over head_dim: Qwen3-Next, Qwen3.5, LFM2) and the
    sigmoid output gate (Qwen3-Next, Qwen3.5: q_proj yields the query and the gate) keep beyond
    a plain attention: the q/k projections (the q view keeps the whole q_proj output), their
    rstd and normalized copies; the gate's sigmoid, the attention output before the gate and
    the gated output (o_proj's input)."""
    dq, dk = a.heads * a.head_dim, a.kv_heads * a.head_dim
    out = []
    if a.qk_norm:
        q_out = 2 * dq if a.output_gate else dq
        # the norm's fp32 input: a copy below fp32; in an fp32 model a view that keeps the whole
        # q_proj output (query and gate)
        first = 4 * (dq + dk) if c < 4 else c * (q_out + dk)
        out.append(Item("q/k norms: fp32 inputs, rstd, normalized q and k",
                        first + 4 * (a.heads + a.kv_heads) + norm_c * (dq + dk)))
    if a.output_gate:
        out.append(Item("output gate: sigmoid(gate), attention output, gated output",
                        3 * c * dq))
    return out


#: transformers RMSNorms that multiply by their weight in fp32, so the normalized tensor they
#: keep is fp32 whatever the model's dtype (NemotronHRMSNorm; Qwen3NextRMSNorm, Qwen3_5RMSNorm:
#: `output * (1.0 + self.weight.float())`); the others cast first (LlamaRMSNorm style)
FP32_NORM_TYPES = frozenset({"nemotron_h", "qwen3_next", "qwen3_5", "qwen3_5_moe"})


def _fp32_normalized(items: list, c: int) -> list:
    return [Item(i.name + " (fp32)", i.per_token * 4 / c)
            if i.name.endswith("normalized (kept for the weight gradient)") else i
            for i in items]


def _one_consumer(item):
    """The norm's autocast copies feed one linear (the mixer's in_proj), not q, k and v."""
    match = re.search(r"one per linear \((\d+)\)$", item.name)
    if not match:
        return item
    return Item(item.name[:match.start()] + "for the mixer's in_proj",
                item.per_token / int(match.group(1)))


def layer_items(layer, base: Callable[[bool], list], eager: bool, *, d: int, c: int, tp: int,
                sp: bool, hidden_dropout: bool, fused_kernels: bool = True,
                gemm: int = 0, model_type: str = "", autocast: bool = False) -> list:
    """Items of one layer of the plan. `base(moe_layer)` gives the uniform decoder layer's items
    for this layer's attention and FFN shapes (fused or eager, as the run uses)."""
    moe = layer.ffn.kind == "moe"
    split = split_eager if eager else split_fused
    attention_half, ffn_half = split(base(moe))
    if eager and model_type in FP32_NORM_TYPES and c < 4 and not autocast:
        # (under autocast the norm's tensors are fp32 already)
        attention_half, ffn_half = _fp32_normalized(attention_half, c), _fp32_normalized(
            ffn_half, c)
    items: list = []
    if layer.attention is not None:
        items += attention_half
        if eager:
            items += _eager_attention_extras(
                layer.attention, c, 4 if model_type in FP32_NORM_TYPES else c)
    if layer.ssm is not None:
        if not eager and layer.mixer == "mamba2":
            items += mix.megatron_mamba_items(layer.ssm, d, c, tp, sp, hidden_dropout, gemm)
        else:
            if layer.mixer != "parallel":  # the input norm (the attention half has it otherwise)
                items += [_one_consumer(i) for i in attention_half
                          if i.name.startswith(("input norm", "norm1 input", "qkv input"))]
            items += mix.hf_mixer_items(layer.mixer if layer.mixer != "parallel" else "mamba2",
                                        layer.ssm, d, c, fused_kernels)
    if layer.ffn.kind != "none":
        if eager and layer.ffn.act == "relu2" and not layer.ffn.gated:
            # transformers' ReLUSquaredActivation: relu keeps its output, square its input (the
            # same tensor), down_proj its input (the square): two tensors of the FFN's width
            ffn_half = [i for i in ffn_half if not i.name.startswith("MLP:")] + [
                Item("MLP: relu output, its square (down_proj input)", 2 * c * layer.ffn.ffn)]
        items += ffn_half
    return items


def t5_layer_items(layer, base: Callable[[bool], list], *, c: int, tp: int, sp: bool,
                   d: int, dq: int, dkv: int, hidden_dropout: bool, t_enc: int, t_dec: int,
                   decoder_layers: int, gemm: int = 0, eager: bool = False) -> list:
    """One Megatron T5 layer (TransformerLayer with the T5 encoder or decoder spec:
    megatron/core/models/T5/t5_spec.py), in bytes per encoder token (the stage's tokens are the
    encoder's: B · T_enc).

    Encoder layers are uniform decoder-style layers over T_enc. A decoder layer runs over T_dec
    (its items scaled by T_dec / T_enc, its T×T scores over T_dec positions) and adds
    cross-attention (CrossAttention: pre_cross_attn_layernorm, linear_q over the decoder tokens,
    linear_kv over the encoder output): the norm's input and output, q, the scores over T_enc
    positions (or the fused kernel's output and softmax statistics), the output, a dropout
    mask, and per encoder token the keys and values it computed from the encoder output. The
    encoder output itself (every decoder layer's linear_kv input, one tensor) is shared by the
    decoder layers: 1/decoder_layers of it per layer."""
    attention_half, mlp_half = (split_eager if eager else split_fused)(base(False))
    if layer.stack == "encoder":
        return attention_half + mlp_half
    f = t_dec / t_enc
    g = gemm or c
    rep = tp if sp else 1

    def scaled(items, pairs):
        return [Item(f"decoder {i.name}", (i.per_token + i.per_token_pair * pairs) * f)
                for i in items]

    out = scaled(attention_half, t_dec)
    scores = next((i for i in attention_half if i.per_token_pair), None)
    flash = next((i for i in attention_half if i.name.startswith("attention output (flash)")),
                 None)
    cross = [Item("cross-attention norm input", c * d / rep),
             Item("cross-attention linear_q input (norm output)", g * d / rep),
             Item("cross-attention q", c * dq / tp)]
    if flash is not None:
        cross.append(Item("cross-attention output (fused) + softmax statistics", flash.per_token))
    else:
        if scores is not None:
            cross.append(Item("cross-attention scores, softmax, dropout (T_dec × T_enc)",
                              scores.per_token_pair * t_enc))
        cross.append(Item("cross-attention output (linear_proj input)", g * dq / tp))
    if hidden_dropout:
        cross.append(Item("cross-attention dropout mask", d / rep))
    out += [Item(i.name, i.per_token * f) for i in cross]
    out.append(Item("cross-attention k, v (over the encoder tokens)", c * 2 * dkv / tp))
    out.append(Item(f"encoder output, the decoder layers' linear_kv input (1/{decoder_layers} "
                    "per layer)", c * d / max(1, decoder_layers)))
    out += scaled(mlp_half, t_dec)
    return out
