"""Parameter counts by component, from an HF-style config (exact: equal to what PyTorch reports
for the model `transformers` builds from the same config).

`architecture(config)` reads the config (HF key names, any `model_type`) into an `Architecture`;
`count_params(arch)` returns a `ParamCounts` with one `LayerParams` per decoder layer, so that
pipeline stages can be given exactly the parameters they hold.

Reference for the dense Llama count: seed article 003, section 1.5
(V·d + L·[d + (2 + 2·n_kv/n_h)·d² + d + 3·d·d_ffn] + d + d·V).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional


class ConfigError(ValueError):
    """A required key is missing or has an unusable value. `key` names it (HF spelling)."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class MoE:
    num_experts: int
    top_k: int
    expert_ffn: int          # intermediate size of one routed expert
    shared_ffn: int = 0      # total intermediate size of the shared expert(s), 0 if none
    shared_gate: bool = False  # qwen2_moe: sigmoid gate Linear(d, 1) on the shared expert
    router_bias: bool = False  # deepseek_v3: e_score_correction_bias (a parameter)


@dataclass(frozen=True)
class MLA:
    """DeepSeek multi-head latent attention dimensions."""

    q_lora_rank: int  # 0: plain q projection
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class Vision:
    """A ViT-style vision tower plus the projector into the language model."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    patch_size: int
    image_size: int
    tokens_per_image: int
    params: int            # exact vision-tower parameter count
    projector_params: int  # exact projector parameter count


@dataclass(frozen=True)
class Architecture:
    model_type: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int                 # dense MLP intermediate size
    vocab: int
    tied: bool
    gated_mlp: bool = True   # SwiGLU/GeGLU (3 matrices) vs plain GeLU MLP (2 matrices)
    norm: str = "rmsnorm"    # rmsnorm | layernorm
    learned_positions: int = 0  # rows of a learned position table (gpt2), 0 for RoPE
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0
    embedding_dropout: float = 0.0
    moe: Optional[MoE] = None
    mla: Optional[MLA] = None
    vision: Optional[Vision] = None
    # Per decoder layer: True where the MLP is a routed MoE block.
    moe_layers: tuple = ()

    @property
    def is_moe(self) -> bool:
        return self.moe is not None and any(self.moe_layers)


@dataclass(frozen=True)
class LayerParams:
    attention: int
    mlp: int = 0             # dense MLP
    experts: int = 0         # routed experts (all of them)
    shared_experts: int = 0
    router: int = 0
    norms: int = 0

    @property
    def total(self) -> int:
        return (self.attention + self.mlp + self.experts + self.shared_experts + self.router
                + self.norms)


@dataclass(frozen=True)
class ParamCounts:
    embedding: int
    position_embedding: int
    lm_head: int           # 0 when tied to the embedding
    final_norm: int
    layers: tuple          # LayerParams per decoder layer
    vision: int = 0
    projector: int = 0

    @property
    def experts(self) -> int:
        return sum(layer.experts for layer in self.layers)

    @property
    def decoder(self) -> int:
        return sum(layer.total for layer in self.layers)

    @property
    def total(self) -> int:
        return (self.embedding + self.position_embedding + self.lm_head + self.final_norm
                + self.decoder + self.vision + self.projector)

    def component_totals(self) -> dict:
        """Totals by component, the vocabulary of `--explain` and the JSON `params` block."""
        out = {"embedding": self.embedding + self.position_embedding, "lm_head": self.lm_head,
               "attention": 0, "mlp": 0, "experts": 0, "shared_experts": 0, "router": 0,
               "norms": self.final_norm, "vision": self.vision, "projector": self.projector}
        for layer in self.layers:
            out["attention"] += layer.attention
            out["mlp"] += layer.mlp
            out["experts"] += layer.experts
            out["shared_experts"] += layer.shared_experts
            out["router"] += layer.router
            out["norms"] += layer.norms
        return out


def _get(config: Mapping, *names: str, default: Any = None, required: bool = True) -> Any:
    for name in names:
        if name in config and config[name] is not None:
            return config[name]
    if default is not None or not required:
        return default
    raise ConfigError(names[0], f"missing required key {names[0]!r}")


def _int(config: Mapping, *names: str, default: Any = None, required: bool = True) -> Optional[int]:
    value = _get(config, *names, default=default, required=required)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ConfigError(names[0], f"{names[0]!r} must be a whole number, got {value!r}")
    if int(value) < 0:
        raise ConfigError(names[0], f"{names[0]!r} must not be negative, got {value!r}")
    return int(value)


def architecture(config: Mapping) -> Architecture:
    """Read an HF config (llama-style keys) into an Architecture. Raises ConfigError."""
    hidden = _int(config, "hidden_size", "n_embd", "d_model")
    layers = _int(config, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(config, "num_attention_heads", "n_head")
    if heads == 0 or hidden == 0 or layers == 0:
        raise ConfigError("hidden_size", "hidden size, layers and heads must be positive")
    kv_heads = _int(config, "num_key_value_heads", default=heads)
    head_dim = _int(config, "head_dim", default=hidden // heads)
    ffn = _int(config, "intermediate_size", "n_inner", "ffn_hidden_size", default=4 * hidden)
    vocab = _int(config, "vocab_size")
    tied = bool(_get(config, "tie_word_embeddings", default=False, required=False))
    moe = None
    moe_layers: tuple = (False,) * layers
    n_experts = _int(config, "num_local_experts", "n_routed_experts", "num_experts", required=False)
    if n_experts:
        moe = MoE(num_experts=n_experts,
                  top_k=_int(config, "num_experts_per_tok", default=2),
                  expert_ffn=_int(config, "moe_intermediate_size", default=ffn))
        moe_layers = (True,) * layers
    return Architecture(model_type=str(config.get("model_type", "llama")), hidden=hidden,
                        layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim, ffn=ffn,
                        vocab=vocab, tied=tied, moe=moe, moe_layers=moe_layers)


def count_params(arch: Architecture) -> ParamCounts:
    """Exact counts for the llama family (GQA attention, SwiGLU MLP, RMSNorm, no biases)."""
    d = arch.hidden
    attention = d * arch.heads * arch.head_dim * 2 + d * arch.kv_heads * arch.head_dim * 2
    layers = []
    for is_moe in arch.moe_layers:
        if is_moe and arch.moe is not None:
            layers.append(LayerParams(attention=attention,
                                      experts=arch.moe.num_experts * 3 * d * arch.moe.expert_ffn,
                                      router=d * arch.moe.num_experts, norms=2 * d))
        else:
            layers.append(LayerParams(attention=attention, mlp=3 * d * arch.ffn, norms=2 * d))
    return ParamCounts(embedding=arch.vocab * d, position_embedding=0,
                       lm_head=0 if arch.tied else arch.vocab * d, final_norm=d,
                       layers=tuple(layers))
