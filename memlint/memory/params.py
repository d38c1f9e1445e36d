"""Parameter counts by component, from an HF-style config (exact: equal to what PyTorch reports
for the model `transformers` builds from the same config).

`architecture(config)` reads the config (HF key names, any `model_type`) into an `Architecture`;
`count_params(arch)` returns a `ParamCounts` with one `LayerParams` per decoder layer, so that
pipeline stages can be given exactly the parameters they hold.

Reference for the dense Llama count: seed article 003, section 1.5
(V·d + L·[d + (2 + 2·n_kv/n_h)·d² + d + 3·d·d_ffn] + d + d·V).

Exactness. For the model types in `KNOWN_MODEL_TYPES`, `count_params(architecture(cfg)).total`
equals `sum(p.numel() for p in model.parameters())` of the model transformers 5.24 builds from the
same config (`AutoModelForCausalLM`, or `AutoModelForImageTextToText` for the VLMs); the literal
numbers in tests/memory/test_params.py were recorded by bench/param_truth.py. Conventions that
follow from that definition:

- tied weights are counted once (`lm_head` is 0 when tied);
- buffers are not parameters: rotary `inv_freq`, Gemma's `embed_scale`, and DeepSeek-V3's
  `e_score_correction_bias` (a registered buffer in transformers; `MoE.router_bias` still records
  that it exists, E fp32 values per MoE layer);
- a missing non-essential key takes the default of the family's transformers config class (e.g.
  Gemma's `head_dim` 256); a nested `text_config` / `vision_config` takes all its defaults from its
  own family, as transformers does (llava-hf configs leave most `text_config` keys out);
- DeepSeek `moe_layer_freq`: DeepSeek's own modelling code puts an MoE block on layer i when
  i >= first_k_dense_replace and i % moe_layer_freq == 0; transformers' native classes ignore
  `moe_layer_freq`. Every published config has 1, where both agree; memlint follows DeepSeek.

A `model_type` memlint does not know raises `UnknownModelType` (a ConfigError whose severity is
"warning": no estimate), unless memory/model_types.py lists it as approximated through the generic
llama-style keys (the caller warns that the count is approximate) or its `architectures` names a
transformers class memlint counts. A config without a model_type is read through the generic
keys (plus the aliases `n_embd`, `n_layer`, `n_head`, MoE and MLA keys when present). Anything
unusable raises `ConfigError(key, message)`, never another exception type.

Where components live: q/k norms and the MLA latent norms are counted in `attention` (they sit in
the attention module); Qwen2-MoE's `shared_expert_gate` is counted in `shared_experts`.
"""
from __future__ import annotations

from collections.abc import Mapping

from memlint import lazy_import
from memlint.facts import vocab as vocab_facts
# FRAMEWORK_MODEL_TYPES ... Vision, MAX_CONFIG_*: re-exported (callers import them from here)
from memlint.memory.architecture import (FRAMEWORK_MODEL_TYPES, KNOWN_MODEL_TYPES, MAX_LAYERS, MLA,
                                         Architecture, ConfigError, LayerParams, MoE, ParamCounts,
                                         Vision, mlp_params)
from memlint.memory.config_reader import (MAX_CONFIG_INT, MAX_CONFIG_NUMBER, ConfigReader,
                                          model_type_of)
from memlint.memory.layout_arch import (LAYOUT_MODEL_TYPES, layout_architecture, layout_counts,
                                        layout_lora_per_layer)
from memlint.memory.model_types import counted_as
from memlint.memory.text_model import text_architecture
from memlint.records import replace

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

# start-up: the multimodal readers (LLaVA, Qwen-VL) load when such a config is counted
vlm = lazy_import.module("memlint.memory.vlm_model")

__all__ = ["FRAMEWORK_MODEL_TYPES", "KNOWN_MODEL_TYPES", "MAX_CONFIG_INT", "MAX_CONFIG_NUMBER",
           "MAX_LAYERS", "MLA", "Architecture", "ConfigError", "LayerParams", "MoE", "ParamCounts",
           "Vision", "architecture", "count_params", "lora_params_per_layer", "pad_vocabulary",
           "vocab_formula"]


def pad_vocabulary(arch: Architecture, multiple: Optional[int], tp: int) -> Architecture:
    """The architecture with the vocabulary the framework builds: padded to a multiple of
    `multiple`·tp (Megatron, gpt-neox; memlint/facts/vocab.py), or as it is without a multiple."""
    if not multiple:
        return arch
    return replace(arch, vocab=vocab_facts.padded_vocab(arch.vocab, multiple, tp),
                   vocab_unpadded=arch.vocab, vocab_multiple=int(multiple))


def vocab_formula(arch: Architecture, tp: int) -> str:
    """`V 50,304 / tp 8` in a formula, with the padding where the framework padded."""
    if not arch.vocab_unpadded:
        return f"V {arch.vocab:,} / tp {tp}" if tp > 1 else f"V {arch.vocab:,}"
    padding = vocab_facts.padding_formula(arch.vocab_unpadded, arch.vocab_multiple, tp)
    return f"V ({padding} = {arch.vocab:,})" + (f" / tp {tp}" if tp > 1 else "")


def architecture(config: Mapping) -> Architecture:
    """Read an HF config into an Architecture. Raises ConfigError (and nothing else)."""
    try:
        return _architecture(config)
    except ConfigError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError,
            ZeroDivisionError, RecursionError) as exc:  # pragma: no cover - a bug, reported cleanly
        raise ConfigError("config", f"unusable config: {exc}") from exc


def _architecture(config: Mapping) -> Architecture:
    model_type = model_type_of(config)
    if model_type in LAYOUT_MODEL_TYPES:
        return layout_architecture(config, model_type)
    # raises UnknownModelType for a model type memlint does not count (memory/model_types.py)
    family, exact = counted_as(config, model_type)
    if model_type == "llava":
        return vlm.llava_architecture(config)
    if model_type in ("qwen2_vl", "qwen2_5_vl"):
        return vlm.qwen_vl_architecture(config, model_type)
    if model_type in ("qwen3_vl", "qwen3_vl_moe"):
        return vlm.qwen3_vl_architecture(config, model_type)
    if (not any(key in config for key in ("hidden_size", "n_embd", "d_model"))
            and isinstance(config.get("text_config"), Mapping)):
        # a multimodal family not known here (llama4, qwen3_vl, gemma3/4, ...): its language
        # model is the nested text_config, read through the generic keys; the vision tower is
        # not counted (the caller warns that the model type is not known exactly)
        text = vlm.text_reader(config, model_type)
        text_type = model_type_of(config["text_config"], "text_config") or model_type
        arch = text_architecture(text, text_type, tied=vlm.vlm_tied(config, text))
        return replace(arch, model_type=model_type, known=False)
    arch = text_architecture(ConfigReader(config, family), family)
    return arch if exact else replace(arch, model_type=model_type, known=False)


def _attention_params(arch: Architecture) -> int:
    d = arch.hidden
    if arch.mla is not None:
        m = arch.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        bias = arch.qkv_bias
        if m.q_lora_rank:
            q = d * m.q_lora_rank + (m.q_lora_rank if bias else 0) + m.q_lora_rank \
                + m.q_lora_rank * arch.heads * qk
        else:
            q = d * arch.heads * qk
        kv_a = m.kv_lora_rank + m.qk_rope_head_dim
        kv = d * kv_a + (kv_a if bias else 0) + m.kv_lora_rank \
            + m.kv_lora_rank * arch.heads * (m.qk_nope_head_dim + m.v_head_dim)
        o = arch.heads * m.v_head_dim * d + (d if arch.output_bias else 0)
        return q + kv + o
    q_out = arch.heads * arch.head_dim
    kv_out = arch.kv_heads * arch.head_dim
    params = d * (q_out + 2 * kv_out) + q_out * d
    if arch.qkv_bias:
        params += q_out + 2 * kv_out
    if arch.output_bias:
        params += d
    if arch.qk_norm == "head":
        params += 2 * arch.head_dim
    elif arch.qk_norm == "full":  # olmoe: over d and over (d / n_h)·n_kv, whatever head_dim is
        params += d + (d // arch.heads) * arch.kv_heads
    return params


def count_params(arch: Architecture) -> ParamCounts:
    """Exact counts by component (see the module docstring for what "exact" means)."""
    if arch.layout is not None:
        return layout_counts(arch)
    d = arch.hidden
    per_norm = 2 * d if arch.norm == "layernorm" else d
    attention = _attention_params(arch)
    norms = arch.norms_per_layer * per_norm
    # every dense layer counts the same, and every MoE layer: one (immutable) count each
    dense = moe_layer = None
    layers = []
    for is_moe in arch.moe_layers:
        if is_moe and arch.moe is not None:
            if moe_layer is None:
                moe_layer = _moe_layer_params(arch, attention, norms)
            layers.append(moe_layer)
        else:
            if dense is None:
                dense = LayerParams(attention=attention,
                                    mlp=mlp_params(d, arch.ffn, arch.gated_mlp, arch.mlp_bias),
                                    norms=norms)
            layers.append(dense)
    vision = arch.vision
    whole, split, tokentype = bert_head_params(arch, per_norm)
    return ParamCounts(embedding=arch.vocab * d, position_embedding=arch.learned_positions * d,
                       lm_head=0 if arch.tied else arch.vocab * d, final_norm=per_norm,
                       layers=tuple(layers),
                       vision=vision.params if vision else 0,
                       projector=vision.projector_params if vision else 0,
                       head_whole=whole, head_split=split, tokentype=tokentype)


def bert_head_params(arch: Architecture, per_norm: int) -> tuple:
    """(whole, split, token-type) parameters of Megatron BERT's heads
    (megatron/core/models/bert/bert_model.py, bert_lm_head.py, pooler.py at
    NVIDIA/Megatron-LM@d98e8a64): the masked-LM head's dense d×d + d (get_linear_layer, not
    tensor-parallel) and its norm, the output layer's bias (V, split like the vocabulary); with
    the binary head (`--bert-binary-head`, the default) the pooler's dense d×d + d, the binary
    head d×2 + 2 and 2 token-type embeddings of d (torch.nn.Embedding, not split)."""
    if not arch.bert_heads:
        return 0, 0, 0
    d = arch.hidden
    whole = d * d + d + per_norm
    tokentype = 0
    if arch.bert_heads == "lm+binary":
        whole += (d * d + d) + (2 * d + 2)
        tokentype = 2 * d
    return whole, arch.vocab, tokentype


def _moe_layer_params(arch: Architecture, attention: int, norms: int) -> LayerParams:
    d, moe = arch.hidden, arch.moe
    mats = 3 if arch.gated_mlp else 2   # GeLU experts (Megatron) have fc1 and fc2 only
    shared = mats * d * moe.shared_ffn + (d if moe.shared_gate and moe.shared_ffn else 0)
    if moe.shared_gate and not moe.shared_ffn:
        shared = d  # qwen2_moe builds the gate even for a zero-width shared expert
    return LayerParams(attention=attention, experts=moe.num_experts * mats * d * moe.expert_ffn,
                       shared_experts=shared, router=d * moe.num_experts, norms=norms)


def lora_params_per_layer(arch: Architecture, rank: int, targets: str) -> list:
    """Exact LoRA adapter parameters per layer (A: in×r, B: r×out per target linear; GQA-aware).

    `qkvo`: the attention projections. `all-linear` is PEFT's: every nn.Linear but the output
    layer, so in MoE layers the router and the shared expert, not the routed experts:
    transformers 5 holds those as fused 3-D parameters (`gate_up_proj`, `down_proj`,
    integrations/moe.py), which PEFT's module targeting does not wrap. `all-linear+experts`
    adds one adapter per routed expert linear (a model whose experts are nn.Linear modules,
    named in the targets, e.g. axolotl's linearized Llama 4). A per-layer plan (hybrids,
    T5) adapts each layer's own linears (memory/layout_arch.py `layout_lora_per_layer`)."""
    if arch.layout is not None:
        return layout_lora_per_layer(arch, rank, targets)
    d = arch.hidden
    if arch.mla is not None:
        m = arch.mla
        q_out = arch.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        qkvo = [(d, q_out), (d, m.kv_lora_rank + m.qk_rope_head_dim), (arch.heads * m.v_head_dim, d)]
    else:
        dq = arch.heads * arch.head_dim
        dkv = arch.kv_heads * arch.head_dim
        # PEFT adapts each targeted nn.Linear as a whole (one A: in×r, one B: r×out), so a
        # fused qkv linear (gpt2 c_attn, gpt_neox query_key_value, phi3 qkv_proj) gets one
        # adapter r·(d + dq + 2·dkv), not three
        qkvo = ([(d, dq + 2 * dkv), (dq, d)] if arch.fused_qkv
                else [(d, dq), (d, dkv), (d, dkv), (dq, d)])
    # (shape, how many): counted by multiplication, never by listing every expert's linears
    attention = sum(rank * (a + b) for a, b in qkvo)
    mlp_linears = 3 if arch.gated_mlp else 2
    # phi3's gate_up_proj: one adapter r·(d + 2·ffn) beside down_proj's r·(ffn + d)
    dense_mlp = (rank * (d + 2 * arch.ffn) + rank * (arch.ffn + d) if arch.fused_gate_up
                 else mlp_linears * rank * (d + arch.ffn))
    per_layer = []
    for i in range(arch.layers):
        total = attention
        if targets.startswith("all-linear"):
            moe_layer = arch.moe is not None and i < len(arch.moe_layers) and arch.moe_layers[i]
            if moe_layer:
                moe = arch.moe
                total += rank * (d + moe.num_experts)                     # the router
                if moe.shared_ffn:
                    total += mlp_linears * rank * (d + moe.shared_ffn)
                if moe.shared_gate:
                    total += rank * (d + 1)
                if targets == "all-linear+experts":
                    total += moe.num_experts * mlp_linears * rank * (d + moe.expert_ffn)
            else:
                total += dense_mlp
        per_layer.append(total)
    return per_layer
