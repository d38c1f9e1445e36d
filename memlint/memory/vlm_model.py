"""A vision-language model's config -> `Architecture`: LLaVA (CLIP/SigLIP tower, projector),
Qwen2-VL / Qwen2.5-VL (their ViT with patch merging) and Qwen3-VL (learned positions and the
DeepStack mergers), the language model read by memory/text_model.py.
"""
from __future__ import annotations

from collections.abc import Mapping

from memlint.memory.architecture import (KNOWN_MODEL_TYPES, NOMINAL_QWEN_IMAGE, Architecture,
                                         ConfigError, Vision)
from memlint.memory.config_reader import ConfigReader, model_type_of
from memlint.memory.text_model import text_architecture
from memlint.records import replace


def text_reader(config: Mapping, family: str) -> ConfigReader:
    """The text part of a VLM: a nested `text_config`, or (pre-v5 Qwen2-VL) the top level."""
    if "text_config" in config and config["text_config"] is not None:
        sub = config["text_config"]
        if not isinstance(sub, Mapping):
            raise ConfigError("text_config", "'text_config' must be a JSON object")
        text_type = model_type_of(sub, "text_config") or family
        return ConfigReader(sub, text_type, "text_config", nested=True)
    return ConfigReader(config, family, "", nested=False)


def vlm_tied(config: Mapping, text: ConfigReader) -> bool:
    """transformers 5: the root `tie_word_embeddings`, or (pre-v5 saves) the text config's."""
    root = ConfigReader(config, "", "")
    if root.bool("tie_word_embeddings", default=False):
        return True
    if text.data is config:
        return False
    return text.bool("tie_word_embeddings", default=False)


def llava_architecture(config: Mapping) -> Architecture:
    text = text_reader(config, "llama")
    if "vision_config" not in config or config["vision_config"] is None:
        raise ConfigError("vision_config", "missing required key 'vision_config'")
    vtype = model_type_of(config["vision_config"], "vision_config") or "clip_vision_model"
    v = ConfigReader(config["vision_config"], "clip_vision_model", "vision_config", nested=True)
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
    root = ConfigReader(config, "llava", "")
    text_arch = text_architecture(text, text.family if text.family in KNOWN_MODEL_TYPES else "llama",
                      tied=vlm_tied(config, text))
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
    return replace(text_arch, model_type="llava", vision=vision, known=text_arch.known
                    and vtype == "clip_vision_model")


def qwen_vl_architecture(config: Mapping, model_type: str) -> Architecture:
    text = text_reader(config, f"{model_type}_text")
    family = text.family if text.family in KNOWN_MODEL_TYPES else f"{model_type}_text"
    if text.family in ("qwen2_vl", "qwen2_5_vl"):
        family = f"{model_type}_text"
    text_arch = text_architecture(text, family, tied=vlm_tied(config, text))
    if "vision_config" not in config or config["vision_config"] is None:
        raise ConfigError("vision_config", "missing required key 'vision_config'")
    v = ConfigReader(config["vision_config"], f"{model_type}_vision", "vision_config", nested=True)
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
    return replace(text_arch, model_type=model_type, vision=vision, known=True)


def qwen3_vl_architecture(config: Mapping, model_type: str) -> Architecture:
    """Qwen3-VL / Qwen3-VL-MoE (transformers models/qwen3_vl*/modeling_qwen3_vl*.py): the language
    model is Qwen3 (or Qwen3-MoE) in `text_config`; the vision tower (Qwen3VLVisionModel) is a
    Conv3d patch embedding with bias, a learned position table of `num_position_embeddings`
    rows, blocks of LayerNorm norm1/norm2, biased fused qkv + proj and a plain GELU MLP
    (linear_fc1/linear_fc2, biased), then the merger (LayerNorm over the hidden width,
    Linear(h·m², h·m²) + GELU + Linear(h·m², out_hidden_size), biased) and one DeepStack merger
    per `deepstack_visual_indexes` entry (the same, its LayerNorm over h·m²)."""
    moe = model_type == "qwen3_vl_moe"
    sub = config.get("text_config")
    if not isinstance(sub, Mapping):
        raise ConfigError("text_config", "missing required key 'text_config'")
    family = "qwen3_moe" if moe else "qwen3"
    text = ConfigReader(sub, family, "text_config", nested=True)
    text_arch = text_architecture(text, family, tied=vlm_tied(config, text))
    if not isinstance(config.get("vision_config"), Mapping):
        raise ConfigError("vision_config", "missing required key 'vision_config'")
    v = ConfigReader(config["vision_config"], "qwen3_vl_vision", "vision_config", nested=True)
    layers = v.int("depth", minimum=1)
    heads = v.int("num_heads", minimum=1)
    e = v.int("hidden_size", minimum=1)
    ffn = v.int("intermediate_size", minimum=1)
    out = v.int("out_hidden_size", minimum=1)
    channels = v.int("in_channels", minimum=1)
    patch = v.int("patch_size", minimum=1)
    temporal = v.int("temporal_patch_size", minimum=1)
    merge = v.int("spatial_merge_size", minimum=1)
    positions = v.int("num_position_embeddings", minimum=0)
    deepstack = len(v.int_list("deepstack_visual_indexes"))
    tower = (channels * temporal * patch * patch * e + e + positions * e
             + layers * (2 * 2 * e + 3 * e * e + 3 * e + e * e + e
                         + e * ffn + ffn + ffn * e + e))
    merged = e * merge * merge
    linears = merged * merged + merged + merged * out + out
    projector = (2 * e + linears) + deepstack * (2 * merged + linears)
    image = NOMINAL_QWEN_IMAGE
    vision = Vision(hidden=e, layers=layers, heads=heads, ffn=ffn, patch_size=patch,
                    image_size=image, tokens_per_image=(image // (patch * merge)) ** 2,
                    params=tower, projector_params=projector,
                    model_type=f"{model_type}_vision", spatial_merge_size=merge,
                    temporal_patch_size=temporal, norm="layernorm")
    return replace(text_arch, model_type=model_type, vision=vision, known=True)
