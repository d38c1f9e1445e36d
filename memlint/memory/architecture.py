"""The architecture of a model as memlint counts it: `Architecture` (with `MoE`, `MLA`,
`Vision`), the per-layer and total parameter counts (`LayerParams`, `ParamCounts`), the model types
whose counts are exact, and `ConfigError`.
"""
from __future__ import annotations

import functools

from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


class ConfigError(ValueError):
    """A required key is missing or has an unusable value. `key` names it (HF spelling)."""

    severity = "error"

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


class UnknownModelType(ConfigError):
    """A model_type memlint does not count: no estimate (a warning), never another family's
    count."""

    severity = "warning"


#: model_type values whose counts are exact (tested against transformers).
KNOWN_MODEL_TYPES = frozenset({
    "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "gpt2", "gpt_neox",
    "mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v2", "deepseek_v3",
    "llava", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "starcoder2", "qwen",
})


#: Model types a framework adapter writes with every choice explicit (not transformers classes):
#: Megatron-LM's GPTModel from its flags (adapters/megatron/model.py). Counted exactly as Megatron builds
#: it (megatron/core/models/gpt/gpt_layer_specs.py), so no "approximate count" warning.
FRAMEWORK_MODEL_TYPES = frozenset({"megatron_gpt"})
#: model types read by memory/hybrid_model.py (transformers 5.24 classes of the same names) and
#: by memory/t5_model.py, each through a per-layer plan (memory/layout_arch.py); named here so
#: that telling them apart loads neither module
HYBRID_MODEL_TYPES = frozenset({
    "nemotron_h", "jamba", "zamba2", "falcon_h1", "bamba", "granitemoehybrid", "lfm2", "mamba2",
    "qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text",
})
T5_MODEL_TYPES = frozenset({"t5", "megatron_t5"})

#: More decoder layers than this is taken as a broken config, not a model.
MAX_LAYERS = 100_000


@record(frozen=True)
class MoE:
    num_experts: int
    top_k: int
    expert_ffn: int          # intermediate size of one routed expert
    shared_ffn: int = 0      # total intermediate size of the shared expert(s), 0 if none
    shared_gate: bool = False  # qwen2_moe: sigmoid gate Linear(d, 1) on the shared expert
    router_bias: bool = False  # deepseek_v3: e_score_correction_bias (a buffer in transformers)


@record(frozen=True)
class MLA:
    """DeepSeek multi-head latent attention dimensions."""

    q_lora_rank: int  # 0: plain q projection
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@record(frozen=True)
class Vision:
    """A ViT-style vision tower plus the projector into the language model.

    `tokens_per_image`: LLaVA: `image_seq_length` when the config gives it, else
    (image_size / patch_size)², plus one for the CLS token when `vision_feature_select_strategy`
    is "full". Qwen2-VL / Qwen2.5-VL read images at their native resolution, so the count depends
    on the image; memlint's convention is a nominal `image_size` of 448 px (`NOMINAL_QWEN_IMAGE`),
    i.e. (448 / (patch_size · spatial_merge_size))² = 256 tokens for patch 14 and merge 2.
    Override with the `tokens_per_image` scenario key.
    """

    hidden: int
    layers: int
    heads: int
    ffn: int
    patch_size: int
    image_size: int
    tokens_per_image: int
    params: int            # exact vision-tower parameter count
    projector_params: int  # exact projector parameter count
    model_type: str = ""
    spatial_merge_size: int = 1   # qwen2_vl: 2x2 patches merged into one LM token
    temporal_patch_size: int = 1  # qwen2_vl: frames per 3-D patch
    norm: str = "layernorm"       # layernorm | rmsnorm
    # of params + projector_params, those every tensor-parallel rank holds whole (patch
    # embedding, positions, class token, norms, row-parallel biases); 0 where not known
    tp_replicated: int = 0
    # tokens each image's encoder layers run on, when not tokens_per_image: Megatron's CLIP ViT
    # adds its class token even when --disable-vision-class-token drops it after the encoder
    encoder_tokens: int = 0


NOMINAL_QWEN_IMAGE = 448


@record(frozen=True)
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
    bert_heads: str = ""        # Megatron BERT: "lm" (masked-LM head), "lm+binary" (+ pooler,
    #                             binary head and token-type embeddings), "" otherwise
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0
    embedding_dropout: float = 0.0
    moe: Optional[MoE] = None
    mla: Optional[MLA] = None
    vision: Optional[Vision] = None
    # Per decoder layer: True where the MLP is a routed MoE block.
    moe_layers: tuple = ()
    qkv_bias: bool = False       # q/k/v projections carry a bias (qwen2, gpt2, gpt_neox)
    output_bias: bool = False    # attention output projection bias (gpt2, gpt_neox)
    mlp_bias: bool = False       # MLP linears carry biases (gpt2, gpt_neox)
    qk_norm: str = ""            # "" | "head" (RMSNorm over head_dim: qwen3) | "full" (olmoe:
    #                              RMSNorm over all query / key channels)
    norms_per_layer: int = 2     # gemma2: 4 (pre/post attention and feed-forward)
    fused_qkv: bool = False      # one qkv matrix (phi3, gpt2, gpt_neox): same count, one GEMM
    fused_gate_up: bool = False  # one gate+up matrix (phi3 gate_up_proj): same count, one GEMM
    parallel_attention: bool = False  # gpt_neox use_parallel_residual: attn and MLP side by side
    known: bool = True           # False: unknown model_type read through the generic keys
    # the vocabulary before the framework padded it (memlint/facts/vocab.py) and the multiple it
    # was padded to a multiple of, times tp; 0: `vocab` as the config gives it
    vocab_unpadded: int = 0
    vocab_multiple: int = 0
    # a per-layer plan (memory/hybrid_model.py Layout: hybrids, linear attention, T5), None for
    # the uniform decoder-only families above
    layout: Optional[object] = None

    @property
    def is_moe(self) -> bool:
        return self.moe is not None and any(self.moe_layers)


@record(frozen=True)
class LayerParams:
    attention: int
    mlp: int = 0             # dense MLP
    experts: int = 0         # routed experts (all of them)
    shared_experts: int = 0
    router: int = 0
    norms: int = 0

    @functools.cached_property   # asked per layer, per phase, per stage of every estimate
    def total(self) -> int:
        return (self.attention + self.mlp + self.experts + self.shared_experts + self.router
                + self.norms)


@record(frozen=True)
class ParamCounts:
    embedding: int
    position_embedding: int
    lm_head: int           # 0 when tied to the embedding
    final_norm: int
    layers: tuple          # LayerParams per decoder layer
    vision: int = 0
    projector: int = 0
    # Megatron BERT's heads (memory/params.py bert_head_params): on the last stage, held whole
    # by every tensor-parallel rank (head_whole) or split (head_split); on the first stage the
    # token-type embeddings (whole)
    head_whole: int = 0
    head_split: int = 0
    tokentype: int = 0

    # cached: each is a sum over the layers, asked once per pipeline stage (O(pp x layers))
    @functools.cached_property
    def experts(self) -> int:
        return sum(layer.experts for layer in self.layers)

    @functools.cached_property
    def decoder(self) -> int:
        return sum(layer.total for layer in self.layers)

    @functools.cached_property
    def total(self) -> int:
        return (self.embedding + self.position_embedding + self.lm_head + self.final_norm
                + self.decoder + self.vision + self.projector + self.head_whole
                + self.head_split + self.tokentype)


def mlp_params(d: int, ffn: int, gated: bool, bias: bool) -> int:
    """Parameters of one MLP of width `ffn` (gated: gate, up and down projections)."""
    if gated:
        return 3 * d * ffn + ((2 * ffn + d) if bias else 0)
    return 2 * d * ffn + ((ffn + d) if bias else 0)
