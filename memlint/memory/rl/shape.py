"""The dimensions the engine and pass models read, from the resolved architecture and counts.

Sliding-window layers and the context length are not part of the training architecture; they
are read from the model's HF config (`sliding_window`, `layer_types`, `max_position_embeddings`,
under `text_config` for multimodal configs).
"""
from __future__ import annotations

from memlint.memory.rl.engine import EngineShape

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "bf16": 2, "fp16": 2, "fp32": 4}


def engine_shape(arch, counts, config) -> EngineShape:
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    mla = arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim if arch.mla is not None else 0
    window, sliding = _sliding(text, arch.layers)
    dtype = str(text.get("torch_dtype") or config.get("torch_dtype") or text.get("dtype")
                or "bfloat16").lower()
    moe = arch.moe if arch.is_moe else None
    method, quant_bytes = _quantization(text if "quantization_config" in text else config)
    return EngineShape(
        layers=arch.layers, hidden=arch.hidden, heads=arch.heads, kv_heads=arch.kv_heads,
        head_dim=arch.head_dim, ffn=arch.ffn, vocab=arch.vocab_unpadded or arch.vocab,
        params=counts.total, expert_params=counts.experts,
        moe_top_k=moe.top_k if moe else 0, expert_ffn=moe.expert_ffn if moe else 0,
        mla_latent=mla, sliding_window=window, sliding_layers=sliding,
        max_position=_int(text.get("max_position_embeddings")),
        # vLLM's dtype "auto" loads an fp32 checkpoint in the platform's 16-bit dtype
        # (vllm/config/model.py:2023 _resolve_auto_dtype)
        dtype_bytes=min(2, _DTYPE_BYTES.get(dtype, 2)),
        quant_bytes=quant_bytes, quant_method=method,
        embedding_params=counts.embedding + counts.lm_head,
        dense_layers=sum(1 for layer in counts.layers if not layer.experts) if moe else 0,
        shared_ffn=moe.shared_ffn if moe else 0)


# quant_method of a checkpoint's quantization_config -> bytes per linear weight (gptq/awq: `bits`)
_QUANT_METHODS = {"fp8": 1, "fbgemm_fp8": 1, "mxfp4": 0.5, "awq": 0.5, "gptq": 0.5,
                  "bitsandbytes": 0.5}


def _quantization(config) -> tuple:
    quant = config.get("quantization_config")
    if not isinstance(quant, dict):
        return "", 0.0
    method = str(quant.get("quant_method") or "").lower()
    if method == "bitsandbytes" and quant.get("load_in_8bit") is True:
        return method, 1.0
    bits = quant.get("bits")
    if method in ("gptq", "awq") and isinstance(bits, int) and bits > 0:
        return method, bits / 8
    return (method, float(_QUANT_METHODS[method])) if method in _QUANT_METHODS else ("", 0.0)


def _sliding(config, layers: int) -> tuple:
    window = _int(config.get("sliding_window"))
    if not window or config.get("use_sliding_window") is False:
        return 0, 0
    kinds = config.get("layer_types")
    if isinstance(kinds, list):
        return window, sum(1 for kind in kinds if kind == "sliding_attention")
    return window, layers


def _int(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
