"""torchtitan model flavors (facts only), in Hugging Face `config.json` vocabulary.

torchtitan names a model by `[model] name` + `flavor` (e.g. llama3 / 8B) and keeps the architecture
in its own Python tables (`torchtitan/models/<name>/__init__.py`, read at pytorch/torchtitan, 2026).
This module restates those numbers with HF key names so that `memlint.memory.params` reads them
like any config.json. Nothing is imported from torchtitan.

The SwiGLU hidden sizes are not written in torchtitan's tables: they are computed from `dim`,
`multiple_of` and `ffn_dim_multiplier`. `ffn_hidden_dim` and `moe_hidden_dim` reproduce that
arithmetic (torchtitan `models/common/feed_forward.py: compute_ffn_hidden_dim` and
`models/llama4/model.py: compute_moe_hidden_dim`); the tests check them against the published
HF configs (Llama-3.1 8B/70B/405B: 14336/28672/53248; Llama-4 Scout: 8192 experts, 16384 dense).
"""
from __future__ import annotations

from memlint.catalog import presets

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


def ffn_hidden_dim(dim: int, multiple_of: int = 1, ffn_dim_multiplier: Optional[float] = None) -> int:
    """torchtitan's SwiGLU width: int(8·dim/3), times the multiplier, rounded up to multiple_of."""
    hidden = int(2 * 4 * dim / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def moe_hidden_dim(dim: int, multiple_of: int = 256, ffn_dim_multiplier: Optional[float] = None,
                   top_k: int = 1, num_shared_experts: int = 1) -> int:
    """Llama-4 expert width: as above, then divided by (top_k + shared) before rounding up."""
    hidden = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    hidden = int(hidden / (top_k + num_shared_experts))
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def _llama3(dim: int, layers: int, heads: int, kv_heads: Optional[int], multiple_of: int,
            multiplier: Optional[float], vocab: int = 128256) -> dict:
    return {
        "model_type": "llama", "hidden_size": dim, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads or heads,
        "head_dim": dim // heads, "intermediate_size": ffn_hidden_dim(dim, multiple_of, multiplier),
        "vocab_size": vocab, "tie_word_embeddings": False, "rms_norm_eps": 1e-5,
    }


def _llama4(experts: int, interleave: int, vocab: int = 202048) -> dict:
    # 17bx16e sets interleave_moe_layer_step=1 (every layer MoE); 17bx128e keeps the default 2.
    return {
        "model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48,
        "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": moe_hidden_dim(5120, 2048, 1.2, top_k=1, num_shared_experts=1),
        "intermediate_size_mlp": ffn_hidden_dim(5120, 2048, 1.2),
        "num_local_experts": experts, "num_experts_per_tok": 1,
        "interleave_moe_layer_step": interleave, "vocab_size": vocab,
        "tie_word_embeddings": False,
    }


def _deepseek_v3(dim, layers, vocab, heads, q_lora_rank, moe_ffn, shared, dense_ffn, experts,
                 dense_layers, top_k) -> dict:
    # MLA: kv_lora_rank 512, qk_nope 128, qk_rope 64, v 128 in every torchtitan flavor.
    return {
        "model_type": "deepseek_v3", "hidden_size": dim, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": heads,
        "q_lora_rank": q_lora_rank or None, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64, "v_head_dim": 128, "intermediate_size": dense_ffn,
        "moe_intermediate_size": moe_ffn, "n_routed_experts": experts,
        "n_shared_experts": shared, "num_experts_per_tok": top_k,
        "first_k_dense_replace": dense_layers, "moe_layer_freq": 1, "vocab_size": vocab,
        "tie_word_embeddings": False,
    }


def _qwen3(dim, layers, heads, kv_heads, ffn, vocab=151936, tied=False, head_dim=128) -> dict:
    return {
        "model_type": "qwen3", "hidden_size": dim, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
        "intermediate_size": ffn, "vocab_size": vocab, "tie_word_embeddings": tied,
    }


def _qwen3_moe(dim, layers, heads, kv_heads, moe_ffn, experts, top_k, vocab=151936) -> dict:
    return {
        "model_type": "qwen3_moe", "hidden_size": dim, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": 128,
        "intermediate_size": moe_ffn, "moe_intermediate_size": moe_ffn,
        "num_experts": experts, "num_experts_per_tok": top_k, "vocab_size": vocab,
        "tie_word_embeddings": False,
    }


# (model name, flavor) -> HF-style config. Sources: torchtitan/models/{llama3,llama4,deepseek_v3,
# qwen3}/__init__.py (flavor tables), pytorch/torchtitan 2026.
FLAVORS: dict = {
    ("llama3", "debugmodel"): _llama3(256, 6, 16, None, 256, None, vocab=2048),
    ("llama3", "8B"): _llama3(4096, 32, 32, 8, 1024, 1.3),
    ("llama3", "70B"): _llama3(8192, 80, 64, 8, 4096, 1.3),
    ("llama3", "405B"): _llama3(16384, 126, 128, 8, 4096, 1.2),
    ("llama4", "17bx16e"): _llama4(16, 1),
    ("llama4", "17bx128e"): _llama4(128, 2),
    ("deepseek_v3", "16B"): _deepseek_v3(2048, 27, 102400, 16, 0, 1408, 2, 10944, 64, 1, 6),
    ("deepseek_v3", "671B"): _deepseek_v3(7168, 61, 129280, 128, 1536, 2048, 1, 18432, 256, 3, 8),
    ("qwen3", "debugmodel"): _qwen3(256, 8, 16, 8, 3072, vocab=2048, tied=True),
    ("qwen3", "0.6B"): _qwen3(1024, 28, 16, 8, 3072, tied=True),
    ("qwen3", "1.7B"): _qwen3(2048, 28, 16, 8, 6144, tied=True),
    ("qwen3", "4B"): _qwen3(2560, 36, 32, 8, 9728, tied=True),
    ("qwen3", "8B"): _qwen3(4096, 36, 32, 8, 12288),
    ("qwen3", "14B"): _qwen3(5120, 40, 40, 8, 17408),
    ("qwen3", "32B"): _qwen3(5120, 64, 64, 8, 25600),
    ("qwen3", "debugmodel_moe"): _qwen3_moe(256, 8, 16, 8, 768, 64, 8, vocab=2048),
    ("qwen3", "30B-A3B"): _qwen3_moe(2048, 48, 32, 4, 768, 128, 8),
}

# torchtitan spells a few flavors differently across versions (e.g. qwen3 "30b_a3b").
_ALIASES = {("qwen3", "30b_a3b"): ("qwen3", "30B-A3B"), ("qwen3", "30b-a3b"): ("qwen3", "30B-A3B")}


def preset_name(model: str, flavor: str) -> str:
    return f"torchtitan:{model}/{flavor}".lower()


def lookup(model: str, flavor: str) -> Optional[dict]:
    """The HF-style config of a torchtitan (name, flavor), or None when it is not catalogued."""
    key = (str(model), str(flavor))
    key = _ALIASES.get((key[0], key[1].lower()), key)
    if key in FLAVORS:
        return dict(FLAVORS[key])
    for (name, fl), config in FLAVORS.items():  # flavors are case-insensitive in practice
        if name == key[0] and fl.lower() == key[1].lower():
            return dict(config)
    return None


def flavors_of(model: str) -> list:
    return sorted(fl for (name, fl) in FLAVORS if name == model)


def register_all() -> None:
    """Make every flavor a memlint preset (`--model torchtitan:llama3/8b`)."""
    for (name, flavor), config in FLAVORS.items():
        presets.register(preset_name(name, flavor), config)


register_all()
