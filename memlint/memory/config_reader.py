"""Typed access to an HF-style config: `ConfigReader` reads keys with the defaults of the family's
transformers config class (5.24), bounds every number, and raises `ConfigError` for anything
unusable; `model_type_of` reads a (nested) config's `model_type`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from memlint.memory.architecture import ConfigError

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional


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
    # transformers Qwen3VLVisionConfig's defaults
    "qwen3_vl_vision": dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16,
                            in_channels=3, patch_size=16, spatial_merge_size=2,
                            temporal_patch_size=2, out_hidden_size=3584,
                            num_position_embeddings=2304, deepstack_visual_indexes=[8, 16, 24]),
}
_FAMILY_DEFAULTS["qwen2_5_vl_text"] = _FAMILY_DEFAULTS["qwen2_vl_text"]

_CORE_KEYS = frozenset({"hidden_size", "n_embd", "d_model", "num_hidden_layers", "n_layer",
                        "num_layers", "num_attention_heads", "n_head", "vocab_size"})


class ConfigReader:
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

    def sub(self, name: str, family: str) -> "ConfigReader":
        return ConfigReader(self.data[name], family, self.key(name), nested=True)


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


def model_type_of(config: Any, path: str = "") -> str:
    if not isinstance(config, Mapping):
        raise ConfigError(path or "config", f"{path or 'config'} must be a JSON object")
    value = config.get("model_type", "")
    if value is None:
        return ""
    if not isinstance(value, str):
        key = f"{path}.model_type" if path else "model_type"
        raise ConfigError(key, f"{key!r} must be a string, got {value!r}")
    return value
