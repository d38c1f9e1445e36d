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

An unknown `model_type` is read through the generic llama-style keys (plus the aliases `n_embd`,
`n_layer`, `n_head`, MoE and MLA keys when present); the caller should warn that the count is an
estimate. Anything unusable raises `ConfigError(key, message)`, never another exception type.

Where components live: q/k norms and the MLA latent norms are counted in `attention` (they sit in
the attention module); Qwen2-MoE's `shared_expert_gate` is counted in `shared_experts`.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional


class ConfigError(ValueError):
    """A required key is missing or has an unusable value. `key` names it (HF spelling)."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


#: model_type values whose counts are exact (tested against transformers).
KNOWN_MODEL_TYPES = frozenset({
    "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "gpt2", "gpt_neox",
    "mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v2", "deepseek_v3",
    "llava", "qwen2_vl", "qwen2_5_vl",
})

#: Model types a framework adapter writes with every choice explicit (not transformers classes):
#: Megatron-LM's GPTModel from its flags (adapters/megatron/model.py). Counted exactly as Megatron builds
#: it (megatron/core/models/gpt/gpt_layer_specs.py), so no "approximate count" warning.
FRAMEWORK_MODEL_TYPES = frozenset({"megatron_gpt"})

#: More decoder layers than this is taken as a broken config, not a model.
MAX_LAYERS = 100_000


@dataclass(frozen=True)
class MoE:
    num_experts: int
    top_k: int
    expert_ffn: int          # intermediate size of one routed expert
    shared_ffn: int = 0      # total intermediate size of the shared expert(s), 0 if none
    shared_gate: bool = False  # qwen2_moe: sigmoid gate Linear(d, 1) on the shared expert
    router_bias: bool = False  # deepseek_v3: e_score_correction_bias (a buffer in transformers)


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


NOMINAL_QWEN_IMAGE = 448


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
    qkv_bias: bool = False       # q/k/v projections carry a bias (qwen2, gpt2, gpt_neox)
    output_bias: bool = False    # attention output projection bias (gpt2, gpt_neox)
    mlp_bias: bool = False       # MLP linears carry biases (gpt2, gpt_neox)
    qk_norm: str = ""            # "" | "head" (RMSNorm over head_dim: qwen3) | "full" (olmoe:
    #                              RMSNorm over all query / key channels)
    norms_per_layer: int = 2     # gemma2: 4 (pre/post attention and feed-forward)
    fused_qkv: bool = False      # one qkv matrix (phi3, gpt2, gpt_neox): same count, one GEMM
    parallel_attention: bool = False  # gpt_neox use_parallel_residual: attn and MLP side by side
    known: bool = True           # False: unknown model_type read through the generic keys

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


# ----------------------------------------------------------------------------------------------
# Reading the config

_MISSING = object()

# Defaults of transformers' config classes (5.24) for the keys memlint reads. Used for missing
# non-essential keys, and for every key of a nested text_config / vision_config.
_FAMILY_DEFAULTS: dict = {
    "llama": dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                  num_attention_heads=32, tie_word_embeddings=False),
    "mistral": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336,
                    num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                    tie_word_embeddings=False),
    "qwen2": dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016,
                  num_hidden_layers=32, num_attention_heads=32, tie_word_embeddings=False),
    "qwen3": dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016,
                  num_hidden_layers=32, num_attention_heads=32, head_dim=128,
                  tie_word_embeddings=False),
    "gemma": dict(vocab_size=256000, hidden_size=3072, intermediate_size=24576,
                  num_hidden_layers=28, num_attention_heads=16, head_dim=256,
                  tie_word_embeddings=True),
    "gemma2": dict(vocab_size=256000, hidden_size=2304, intermediate_size=9216,
                   num_hidden_layers=26, num_attention_heads=8, num_key_value_heads=4,
                   head_dim=256, tie_word_embeddings=True),
    "phi3": dict(vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                 num_attention_heads=32, tie_word_embeddings=False),
    "gpt2": dict(vocab_size=50257, n_embd=768, n_layer=12, n_head=12, n_positions=1024,
                 tie_word_embeddings=True),
    "gpt_neox": dict(vocab_size=50432, hidden_size=6144, intermediate_size=24576,
                     num_hidden_layers=44, num_attention_heads=64, tie_word_embeddings=False,
                     attention_bias=True),
    "mixtral": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336,
                    num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                    num_local_experts=8, num_experts_per_tok=2, tie_word_embeddings=False),
    "qwen2_moe": dict(vocab_size=151936, hidden_size=2048, intermediate_size=5632,
                      num_hidden_layers=24, num_attention_heads=16, moe_intermediate_size=1408,
                      shared_expert_intermediate_size=5632, num_experts=60, num_experts_per_tok=4,
                      decoder_sparse_step=1, qkv_bias=True, tie_word_embeddings=False),
    "qwen3_moe": dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                      num_hidden_layers=24, num_attention_heads=32, num_key_value_heads=4,
                      moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8,
                      decoder_sparse_step=1, tie_word_embeddings=False),
    "olmoe": dict(vocab_size=50304, hidden_size=2048, intermediate_size=2048, num_hidden_layers=16,
                  num_attention_heads=16, num_experts=64, num_experts_per_tok=8,
                  tie_word_embeddings=False),
    "deepseek_v2": dict(vocab_size=102400, hidden_size=4096, intermediate_size=11008,
                        num_hidden_layers=32, num_attention_heads=32, moe_intermediate_size=1407,
                        n_routed_experts=64, n_shared_experts=2, num_experts_per_tok=6,
                        first_k_dense_replace=0, moe_layer_freq=1, q_lora_rank=1536,
                        kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
                        v_head_dim=128, tie_word_embeddings=False),
    "deepseek_v3": dict(vocab_size=129280, hidden_size=7168, intermediate_size=18432,
                        num_hidden_layers=61, num_attention_heads=128, moe_intermediate_size=2048,
                        n_routed_experts=256, n_shared_experts=1, num_experts_per_tok=8,
                        first_k_dense_replace=3, moe_layer_freq=1, q_lora_rank=1536,
                        kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
                        v_head_dim=128, tie_word_embeddings=False),
    # text parts of the VLMs (flat pre-v5 layout or nested text_config)
    "qwen2_vl_text": dict(vocab_size=152064, hidden_size=8192, intermediate_size=29568,
                          num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8,
                          tie_word_embeddings=False),
    # vision towers
    "clip_vision_model": dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                              num_attention_heads=12, num_channels=3, image_size=224,
                              patch_size=32),
    "qwen2_vl_vision": dict(depth=32, embed_dim=1280, hidden_size=3584, mlp_ratio=4, num_heads=16,
                            in_channels=3, patch_size=14, spatial_merge_size=2,
                            temporal_patch_size=2),
    "qwen2_5_vl_vision": dict(depth=32, hidden_size=3584, intermediate_size=3420, num_heads=16,
                              in_channels=3, patch_size=14, spatial_merge_size=2,
                              temporal_patch_size=2, out_hidden_size=3584),
}
_FAMILY_DEFAULTS["qwen2_5_vl_text"] = _FAMILY_DEFAULTS["qwen2_vl_text"]

_CORE_KEYS = frozenset({"hidden_size", "n_embd", "d_model", "num_hidden_layers", "n_layer",
                        "num_layers", "num_attention_heads", "n_head", "vocab_size"})


class _Reader:
    """Typed access to one (sub-)config with family defaults; every failure is a ConfigError."""

    def __init__(self, data: Any, family: str, path: str = "", nested: bool = False):
        if not isinstance(data, Mapping):
            raise ConfigError(path or "config", f"{path or 'config'} must be a JSON object, got "
                                                f"{type(data).__name__}")
        self.data = data
        self.family = family
        self.path = path
        self.nested = nested
        self.defaults = _FAMILY_DEFAULTS.get(family, {})

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def raw(self, *names: str, default: Any = _MISSING, required: bool = True) -> Any:
        for name in names:
            if name in self.data and self.data[name] is not None:
                return self.data[name]
        # Essential dimensions must be written in a top-level config; anything else (and
        # everything in a nested sub-config) falls back to the family's defaults.
        for name in names:
            if name in self.defaults and (self.nested or name not in _CORE_KEYS):
                return self.defaults[name]
        if default is not _MISSING:
            return default
        if not required:
            return None
        raise ConfigError(self.key(names[0]), f"missing required key {self.key(names[0])!r}")

    def int(self, *names: str, default: Any = _MISSING, required: bool = True,
            minimum: int = 0) -> Optional[int]:
        value = self.raw(*names, default=default, required=required)
        if value is None:
            return None
        key = self.key(_present(self.data, names))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(key, f"{key!r} must be a whole number, got {value!r}")
        if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
            raise ConfigError(key, f"{key!r} must be a whole number, got {value!r}")
        value = int(value)
        if abs(value) > MAX_CONFIG_INT:
            raise ConfigError(key, f"{key!r} is too large to be a model dimension, got "
                                   f"{_short(value)}")
        if value < minimum:
            what = "positive" if minimum == 1 else f"at least {minimum}"
            raise ConfigError(key, f"{key!r} must be {what}, got {value!r}")
        return value

    def number(self, *names: str, default: Any = _MISSING, minimum: float = 0.0) -> float:
        value = self.raw(*names, default=default)
        key = self.key(_present(self.data, names))
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or (isinstance(value, float) and not math.isfinite(value)) or value < minimum:
            raise ConfigError(key, f"{key!r} must be a number >= {minimum:g}, got "
                                   f"{_short(value)}")
        if abs(value) > MAX_CONFIG_NUMBER:
            raise ConfigError(key, f"{key!r} is too large, got {_short(value)}")
        return float(value)

    def probability(self, *names: str) -> float:
        value = self.number(*names, default=0.0)
        if value > 1.0:
            key = self.key(_present(self.data, names))
            raise ConfigError(key, f"{key!r} is a dropout probability, got {value!r}")
        return value

    def bool(self, *names: str, default: Any = _MISSING) -> bool:
        value = self.raw(*names, default=default)
        if not isinstance(value, bool):
            key = self.key(_present(self.data, names))
            raise ConfigError(key, f"{key!r} must be true or false, got {value!r}")
        return value

    def str(self, *names: str, default: Any = _MISSING) -> str:
        value = self.raw(*names, default=default)
        if not isinstance(value, str):
            key = self.key(_present(self.data, names))
            raise ConfigError(key, f"{key!r} must be a string, got {value!r}")
        return value

    def int_list(self, name: str) -> tuple:
        value = self.raw(name, default=[])
        if not isinstance(value, (list, tuple)) or any(
                isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise ConfigError(self.key(name), f"{self.key(name)!r} must be a list of integers, "
                                              f"got {value!r}")
        return tuple(value)

    def sub(self, name: str, family: str) -> "_Reader":
        return _Reader(self.data[name], family, self.key(name), nested=True)


# Model dimensions beyond these are not models (the largest real ones are ~1e6 wide, 1e9
# positions); bounding them keeps every product of dimensions inside float range.
MAX_CONFIG_INT = 2**40
MAX_CONFIG_NUMBER = 1e18


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def _present(data: Mapping, names: tuple) -> str:
    for name in names:
        if name in data and data[name] is not None:
            return name
    return names[0]


def _model_type(config: Any, path: str = "") -> str:
    if not isinstance(config, Mapping):
        raise ConfigError(path or "config", f"{path or 'config'} must be a JSON object")
    value = config.get("model_type", "")
    if value is None:
        return ""
    if not isinstance(value, str):
        key = f"{path}.model_type" if path else "model_type"
        raise ConfigError(key, f"{key!r} must be a string, got {value!r}")
    return value


_MOE_FAMILIES = {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v2", "deepseek_v3"}
_VLM_FAMILIES = {"llava", "qwen2_vl", "qwen2_5_vl"}


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
    model_type = _model_type(config)
    if model_type == "llava":
        return _llava(config)
    if model_type in ("qwen2_vl", "qwen2_5_vl"):
        return _qwen_vl(config, model_type)
    if (not any(key in config for key in ("hidden_size", "n_embd", "d_model"))
            and isinstance(config.get("text_config"), Mapping)):
        # a multimodal family not known here (llama4, qwen3_vl, gemma3/4, ...): its language
        # model is the nested text_config, read through the generic keys; the vision tower is
        # not counted (the caller warns that the model type is not known exactly)
        text = _text_reader(config, model_type)
        text_type = _model_type(config["text_config"], "text_config") or model_type
        arch = _text(text, text_type, tied=_vlm_tied(config, text))
        return _replace(arch, model_type=model_type, known=False)
    return _text(_Reader(config, model_type), model_type)


def _text(r: _Reader, model_type: str, vision: Optional[Vision] = None,
          tied: Optional[bool] = None) -> Architecture:
    """A decoder-only language model (the whole model, or the text part of a VLM)."""
    fam = model_type
    known = fam in KNOWN_MODEL_TYPES or fam in FRAMEWORK_MODEL_TYPES or fam in (
        "qwen2_vl_text", "qwen2_5_vl_text")
    hidden = r.int("hidden_size", "n_embd", "d_model", minimum=1)
    layers = r.int("num_hidden_layers", "n_layer", "num_layers", minimum=1)
    if layers > MAX_LAYERS:
        raise ConfigError(r.key("num_hidden_layers"), f"{layers} decoder layers is not a model")
    heads = r.int("num_attention_heads", "n_head", minimum=1)
    vocab = r.int("vocab_size", minimum=1)
    if fam == "gpt_neox":  # no GQA in GPTNeoX: query_key_value is 3·d wide
        kv_heads = heads
        head_dim = hidden // heads
    else:
        kv_heads = r.int("num_key_value_heads", default=heads, minimum=1)
        if fam in ("qwen2_vl_text", "qwen2_5_vl_text"):
            head_dim = hidden // heads  # the Qwen2-VL text attention ignores head_dim
        else:
            head_dim = r.int("head_dim", default=hidden // heads, minimum=1)
    if fam == "gpt2":
        ffn = r.int("n_inner", default=4 * hidden, minimum=1)
    else:
        ffn = r.int("intermediate_size", "n_inner", "ffn_hidden_size", default=4 * hidden,
                    minimum=1)
    if tied is None:
        tied = r.bool("tie_word_embeddings", default=False)

    arch: dict = dict(model_type=model_type, hidden=hidden,
                      layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim, ffn=ffn,
                      vocab=vocab, tied=tied, known=known)
    arch["attention_dropout"] = r.probability("attention_dropout", "attn_pdrop",
                                              "attention_probs_dropout_prob")
    arch["hidden_dropout"] = r.probability("hidden_dropout", "resid_pdrop",
                                           "hidden_dropout_prob")
    arch["embedding_dropout"] = r.probability("embd_pdrop", "embedding_dropout")

    if fam == "megatron_gpt":
        # Megatron-LM's GPTModel as its arguments describe it (written by the Megatron adapter):
        # every choice explicit, no family defaults (megatron/core/models/gpt/gpt_model.py,
        # gpt_layer_specs.py).
        arch.update(gated_mlp=r.bool("gated_mlp"), norm=r.str("norm"),
                    qkv_bias=r.bool("attention_bias"), output_bias=r.bool("output_bias"),
                    mlp_bias=r.bool("mlp_bias"),
                    learned_positions=r.int("learned_positions", default=0),
                    qk_norm="head" if r.bool("qk_layernorm", default=False) else "")
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
    elif fam == "qwen2_moe":
        arch.update(qkv_bias=r.bool("qkv_bias", default=True))
    elif fam == "phi3":
        arch.update(fused_qkv=True)
    elif fam in ("mistral", "mixtral"):
        pass
    else:  # llama, gemma*, qwen3*, olmoe, deepseek*, and the generic path
        bias = r.bool("attention_bias", default=False)
        arch.update(qkv_bias=bias, output_bias=bias)
        if fam in ("llama", "deepseek_v2") or not known:
            arch.update(mlp_bias=r.bool("mlp_bias", default=False))
    if fam in ("qwen3", "qwen3_moe"):
        arch["qk_norm"] = "head"
    elif fam == "olmoe":
        arch["qk_norm"] = "full"
    elif fam == "gemma2":
        arch["norms_per_layer"] = 4

    # Mixture of experts
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

    mla_family = fam in ("deepseek_v2", "deepseek_v3") or (
        fam == "megatron_gpt" and r.bool("multi_latent_attention", default=False)) or (
        not known and "kv_lora_rank" in r.data)
    if mla_family:
        if "q_lora_rank" in r.data and r.data["q_lora_rank"] is None:
            q_rank = None  # an explicit null: a plain q_proj (DeepSeek-V2-Lite)
        else:
            q_rank = r.int("q_lora_rank", required=False)
        arch["mla"] = MLA(q_lora_rank=q_rank or 0, kv_lora_rank=r.int("kv_lora_rank", minimum=1),
                          qk_nope_head_dim=r.int("qk_nope_head_dim"),
                          qk_rope_head_dim=r.int("qk_rope_head_dim"),
                          v_head_dim=r.int("v_head_dim", minimum=1))
    if vision is None and fam == "megatron_gpt" and r.raw("vision_num_layers", required=False):
        vision = _megatron_vision(r, arch)
    arch["vision"] = vision
    return Architecture(**arch)


def _megatron_vision(r: _Reader, lm: dict) -> Vision:
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
    positions = patches + 1  # CLIP keeps a position for the class token even when it is dropped
    tokens = patches + (1 if class_token else 0)
    ffn = lm["ffn"]
    gated = lm.get("gated_mlp", False)
    bias = lm.get("mlp_bias", False)
    per_norm = 2 * d if lm.get("norm") == "layernorm" else d
    attention = 4 * d * d + (4 * d if bias else 0)
    mlp = _mlp_params(d, ffn, gated, bias)
    tower = 3 * patch * patch * d + d + positions * d + per_norm \
        + layers * (attention + mlp + 2 * per_norm)
    projector = _mlp_params(d, ffn, gated, bias)
    return Vision(hidden=d, layers=layers, heads=lm["heads"], ffn=ffn, patch_size=patch,
                  image_size=height, tokens_per_image=tokens, params=tower,
                  projector_params=projector, model_type="megatron_clip",
                  norm=lm.get("norm", "layernorm"))


def _deepseek_moe(r: _Reader, fam: str, layers: int):
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


def _llama4_moe(r: _Reader, layers: int, ffn: int):
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


def _megatron_moe(r: _Reader, layers: int):
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


def _text_reader(config: Mapping, family: str) -> _Reader:
    """The text part of a VLM: a nested `text_config`, or (pre-v5 Qwen2-VL) the top level."""
    if "text_config" in config and config["text_config"] is not None:
        sub = config["text_config"]
        if not isinstance(sub, Mapping):
            raise ConfigError("text_config", "'text_config' must be a JSON object")
        text_type = _model_type(sub, "text_config") or family
        return _Reader(sub, text_type, "text_config", nested=True)
    return _Reader(config, family, "", nested=False)


def _vlm_tied(config: Mapping, text: _Reader) -> bool:
    """transformers 5: the root `tie_word_embeddings`, or (pre-v5 saves) the text config's."""
    root = _Reader(config, "", "")
    if root.bool("tie_word_embeddings", default=False):
        return True
    if text.data is config:
        return False
    return text.bool("tie_word_embeddings", default=False)


def _llava(config: Mapping) -> Architecture:
    text = _text_reader(config, "llama")
    if "vision_config" not in config or config["vision_config"] is None:
        raise ConfigError("vision_config", "missing required key 'vision_config'")
    vtype = _model_type(config["vision_config"], "vision_config") or "clip_vision_model"
    v = _Reader(config["vision_config"], "clip_vision_model", "vision_config", nested=True)
    d = v.int("hidden_size", minimum=1)
    layers = v.int("num_hidden_layers", minimum=1)
    heads = v.int("num_attention_heads", minimum=1)
    ffn = v.int("intermediate_size", minimum=1)
    channels = v.int("num_channels", minimum=1)
    image = v.int("image_size", minimum=1)
    patch = v.int("patch_size", minimum=1)
    patches = (image // patch) ** 2
    # CLIPVisionTransformer: class token, conv patch embedding (no bias), learned positions
    # (patches + CLS), pre-LayerNorm, encoder layers (biased q/k/v/out, fc1/fc2, two LayerNorms),
    # post-LayerNorm. Other vision types (SigLIP, ...) are read with the same formula.
    tower = (d + channels * patch * patch * d + (patches + 1) * d + 2 * d
             + layers * (4 * (d * d + d) + 2 * 2 * d + d * ffn + ffn + ffn * d + d) + 2 * d)
    root = _Reader(config, "llava", "")
    text_arch = _text(text, text.family if text.family in KNOWN_MODEL_TYPES else "llama",
                      tied=_vlm_tied(config, text))
    feature_layer = root.raw("vision_feature_layer", default=-2)
    if isinstance(feature_layer, (list, tuple)):
        n_features = len(feature_layer)
        if n_features == 0:
            raise ConfigError("vision_feature_layer", "'vision_feature_layer' must not be empty")
    elif isinstance(feature_layer, int) and not isinstance(feature_layer, bool):
        n_features = 1
    else:
        raise ConfigError("vision_feature_layer",
                          f"'vision_feature_layer' must be an integer or a list, got {feature_layer!r}")
    bias = root.bool("multimodal_projector_bias", default=True)
    t = text_arch.hidden
    projector = d * n_features * t + t * t + (2 * t if bias else 0)
    strategy = root.str("vision_feature_select_strategy", default="default")
    tokens = root.int("image_seq_length", default=patches + (1 if strategy == "full" else 0))
    vision = Vision(hidden=d, layers=layers, heads=heads, ffn=ffn, patch_size=patch,
                    image_size=image, tokens_per_image=tokens, params=tower,
                    projector_params=projector, model_type=vtype)
    return _replace(text_arch, model_type="llava", vision=vision, known=text_arch.known
                    and vtype == "clip_vision_model")


def _qwen_vl(config: Mapping, model_type: str) -> Architecture:
    text = _text_reader(config, f"{model_type}_text")
    family = text.family if text.family in KNOWN_MODEL_TYPES else f"{model_type}_text"
    if text.family in ("qwen2_vl", "qwen2_5_vl"):
        family = f"{model_type}_text"
    text_arch = _text(text, family, tied=_vlm_tied(config, text))
    if "vision_config" not in config or config["vision_config"] is None:
        raise ConfigError("vision_config", "missing required key 'vision_config'")
    v = _Reader(config["vision_config"], f"{model_type}_vision", "vision_config", nested=True)
    layers = v.int("depth", minimum=1)
    heads = v.int("num_heads", minimum=1)
    channels = v.int("in_channels", "in_chans", minimum=1)
    patch = v.int("patch_size", "spatial_patch_size", minimum=1)
    temporal = v.int("temporal_patch_size", minimum=1)
    merge = v.int("spatial_merge_size", minimum=1)
    if model_type == "qwen2_vl":
        # Qwen2VisionTransformer: Conv3d patch embedding (no bias); blocks with LayerNorm
        # norm1/norm2, biased fused qkv + proj, fc1/fc2 (embed_dim · mlp_ratio); the merger
        # (LayerNorm ln_q, then Linear(e·m², e·m²) + GELU + Linear(e·m², LM hidden), biased).
        e = v.int("embed_dim", minimum=1)
        ratio = v.number("mlp_ratio", minimum=0.0)
        ffn = int(e * ratio)
        out = v.int("hidden_size", minimum=1)
        tower = (channels * temporal * patch * patch * e
                 + layers * (2 * 2 * e + 3 * e * e + 3 * e + e * e + e
                             + e * ffn + ffn + ffn * e + e))
        merged = e * merge * merge
        projector = 2 * e + merged * merged + merged + merged * out + out
        norm = "layernorm"
    else:
        # Qwen2.5 vision: RMSNorm norm1/norm2, biased fused qkv + proj, biased SwiGLU MLP;
        # merger: RMSNorm ln_q, Linear(h·m², h·m²) + GELU + Linear(h·m², out_hidden_size).
        e = v.int("hidden_size", minimum=1)
        ffn = v.int("intermediate_size", minimum=1)
        out = v.int("out_hidden_size", minimum=1)
        tower = (channels * temporal * patch * patch * e
                 + layers * (2 * e + 3 * e * e + 3 * e + e * e + e
                             + 2 * (e * ffn + ffn) + ffn * e + e))
        merged = e * merge * merge
        projector = e + merged * merged + merged + merged * out + out
        norm = "rmsnorm"
    image = NOMINAL_QWEN_IMAGE
    tokens = (image // (patch * merge)) ** 2
    vision = Vision(hidden=e, layers=layers, heads=heads, ffn=ffn, patch_size=patch,
                    image_size=image, tokens_per_image=tokens, params=tower,
                    projector_params=projector, model_type=f"{model_type}_vision",
                    spatial_merge_size=merge, temporal_patch_size=temporal, norm=norm)
    return _replace(text_arch, model_type=model_type, vision=vision, known=True)


def _replace(arch: Architecture, **changes) -> Architecture:
    from dataclasses import replace
    return replace(arch, **changes)


# ----------------------------------------------------------------------------------------------
# Counting


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


def _mlp_params(d: int, ffn: int, gated: bool, bias: bool) -> int:
    if gated:
        return 3 * d * ffn + ((2 * ffn + d) if bias else 0)
    return 2 * d * ffn + ((ffn + d) if bias else 0)


def count_params(arch: Architecture) -> ParamCounts:
    """Exact counts by component (see the module docstring for what "exact" means)."""
    d = arch.hidden
    per_norm = 2 * d if arch.norm == "layernorm" else d
    attention = _attention_params(arch)
    norms = arch.norms_per_layer * per_norm
    layers = []
    for is_moe in arch.moe_layers:
        if is_moe and arch.moe is not None:
            moe = arch.moe
            mats = 3 if arch.gated_mlp else 2   # GeLU experts (Megatron) have fc1 and fc2 only
            shared = mats * d * moe.shared_ffn + (d if moe.shared_gate and moe.shared_ffn else 0)
            if moe.shared_gate and not moe.shared_ffn:
                shared = d  # qwen2_moe builds the gate even for a zero-width shared expert
            layers.append(LayerParams(attention=attention,
                                      experts=moe.num_experts * mats * d * moe.expert_ffn,
                                      shared_experts=shared,
                                      router=d * moe.num_experts, norms=norms))
        else:
            layers.append(LayerParams(attention=attention,
                                      mlp=_mlp_params(d, arch.ffn, arch.gated_mlp, arch.mlp_bias),
                                      norms=norms))
    vision = arch.vision
    return ParamCounts(embedding=arch.vocab * d, position_embedding=arch.learned_positions * d,
                       lm_head=0 if arch.tied else arch.vocab * d, final_norm=per_norm,
                       layers=tuple(layers),
                       vision=vision.params if vision else 0,
                       projector=vision.projector_params if vision else 0)


def lora_params_per_layer(arch: Architecture, rank: int, targets: str) -> list:
    """Exact LoRA adapter parameters per layer (A: in×r, B: r×out per target linear; GQA-aware)."""
    d = arch.hidden
    if arch.mla is not None:
        m = arch.mla
        q_out = arch.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        kv_out = arch.heads * (m.qk_nope_head_dim + m.v_head_dim)
        qkvo = [(d, q_out), (d, m.kv_lora_rank + m.qk_rope_head_dim), (arch.heads * m.v_head_dim, d)]
        del kv_out
    else:
        dq = arch.heads * arch.head_dim
        dkv = arch.kv_heads * arch.head_dim
        qkvo = [(d, dq), (d, dkv), (d, dkv), (dq, d)]
    # (shape, how many): counted by multiplication, never by listing every expert's linears
    attention = sum(rank * (a + b) for a, b in qkvo)
    per_layer = []
    for i in range(arch.layers):
        total = attention
        if targets == "all-linear":
            moe_layer = arch.moe is not None and i < len(arch.moe_layers) and arch.moe_layers[i]
            if moe_layer:
                ffn = arch.moe.expert_ffn
                count = arch.moe.num_experts * (3 if arch.gated_mlp else 2)
                ups = count * 2 // 3 if arch.gated_mlp else count // 2
                downs = count // 3 if arch.gated_mlp else count // 2
            else:
                ffn = arch.ffn
                ups, downs = (2 if arch.gated_mlp else 1), 1
            total += (ups + downs) * rank * (d + ffn)
        per_layer.append(total)
    return per_layer
