"""Which model types memlint counts, and how: exactly (their own readers), approximately (an
explicit list, each with what the count leaves out), by the transformers class the config's
`architectures` names, or not at all ("no estimate", a warning: never another family's count).

- exact: KNOWN_MODEL_TYPES (memory/architecture.py), the per-layer plans of
  memory/layout_arch.py (hybrids, linear attention, T5), the framework types (megatron_gpt), and
  a config without a model_type (a model given by its dimensions: `--set model.hidden_size=...`);
- approximate (`APPROXIMATE_MODEL_TYPES`): families whose modules are the llama layout plus a
  few parameters the generic reader leaves out, each measured against its published count
  (memlint/catalog/hub_models.json gives the deviation of each such entry);
- by class (`ARCHITECTURE_CLASSES`): a custom model_type whose config names a transformers class
  memlint counts exactly (Kimi-K2's `kimi_k2` with `DeepseekV3ForCausalLM`: its modeling code is
  DeepSeek-V3's) is read as that class's model type; it stays flagged as not known exactly;
- anything else raises `UnknownModelType` (nemotron-nas, mimo, gemma4, ...: a count through the
  llama keys would be another model's; Llama-3.3-Nemotron-Super-49B would have counted 88B).
"""
from __future__ import annotations


from memlint.memory.architecture import (FRAMEWORK_MODEL_TYPES, KNOWN_MODEL_TYPES,
                                         UnknownModelType)
from memlint.memory.layout_arch import LAYOUT_MODEL_TYPES

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Mapping

#: model_type -> what the generic (llama-style) count leaves out
APPROXIMATE_MODEL_TYPES = {
    "llama4": "the vision tower (the language model is exact)",
    "llama4_text": "nothing measured (107,769,861,120 for Scout, as transformers' Llama4ForCausalLM)",
    "gemma3": "the SigLIP vision tower (about 0.42B), q/k norms and two of four norms per layer",
    "gemma3_text": "q/k norms and two of the four norms per layer",
    "gpt_oss": "the experts' biases and the attention sinks (0.03% of gpt-oss-120b)",
    "olmo2": "its q/k norms over the full width",
    "olmo3": "its q/k norms over the full width (OLMo-2's shapes; the sliding-window layers "
             "have no parameters of their own)",
    "smollm3": "nothing (llama's shapes: 3,075,098,624 for SmolLM3-3B, as transformers; its NoPE "
               "layers have no parameters of their own)",
    "glm4": "its two post-sublayer norms per layer",
    "internlm2": "nothing (wqkv, wo, w1-w3 have llama's shapes)",
    "internlm3": "nothing measured (llama's shapes)",
    "qwen3_vl_text": "nothing measured (read as Qwen3)",
    "qwen3_vl_moe_text": "nothing measured (read as Qwen3-MoE)",
}

#: a transformers class named in `architectures` -> the model type memlint counts it as
ARCHITECTURE_CLASSES = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3", "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3MoeForCausalLM": "qwen3_moe", "MixtralForCausalLM": "mixtral",
    "GemmaForCausalLM": "gemma", "Gemma2ForCausalLM": "gemma2", "Phi3ForCausalLM": "phi3",
    "GPT2LMHeadModel": "gpt2", "GPTNeoXForCausalLM": "gpt_neox",
    "OlmoeForCausalLM": "olmoe", "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3", "QWenLMHeadModel": "qwen",
}


def counted_as(config: Mapping, model_type: str) -> tuple:
    """(model type to read the config as, counted exactly). Raises UnknownModelType."""
    if (not model_type or model_type in KNOWN_MODEL_TYPES or model_type in FRAMEWORK_MODEL_TYPES
            or model_type in LAYOUT_MODEL_TYPES):
        return model_type, True
    if model_type in APPROXIMATE_MODEL_TYPES:
        return model_type, False
    classes = config.get("architectures")
    if isinstance(classes, list):
        for name in classes:
            if isinstance(name, str) and name in ARCHITECTURE_CLASSES:
                return ARCHITECTURE_CLASSES[name], False
    raise UnknownModelType("model_type", f"model_type {model_type!r} is not one memlint counts "
                                         "(no estimate: a count through another family's "
                                         "layout would be another model's)")
