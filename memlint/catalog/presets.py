"""Built-in model presets (facts only): name -> HF-style config dict.

Well-known architectures by their published config.json values, so that `--model llama3-8b` works
without a file. Sources: each model's config.json on its publisher's repository (values copied,
nothing else). Adapters with their own catalogs (torchtitan flavors) register here too.
"""
from __future__ import annotations


TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


PRESETS: dict = {
    "llama3-8b": {  # meta-llama/Meta-Llama-3-8B config.json
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 128256, "tie_word_embeddings": False, "max_position_embeddings": 8192,
    },
    "llama3-70b": {  # meta-llama/Meta-Llama-3-70B config.json
        "model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
        "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
        "vocab_size": 128256, "tie_word_embeddings": False, "max_position_embeddings": 8192,
    },
    "llama3.1-405b": {  # meta-llama/Llama-3.1-405B config.json
        "model_type": "llama", "hidden_size": 16384, "intermediate_size": 53248,
        "num_hidden_layers": 126, "num_attention_heads": 128, "num_key_value_heads": 8,
        "vocab_size": 128256, "tie_word_embeddings": False, "max_position_embeddings": 131072,
    },
    "mixtral-8x7b": {  # mistralai/Mixtral-8x7B-v0.1 config.json
        "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
        "tie_word_embeddings": False, "max_position_embeddings": 32768,
    },
    # The seed article's "M3" MoE (article 000 CH 7.1, docs/seeds.md): d=6144, L=60, H_q=64, H_kv=4,
    # D=128, dense FFN 12288, expert FFN 2048, 128 experts, top-4, V=200064; N = 428B of which
    # ~398B in experts (the article's own totals, which its worked numbers use).
    "seed-m3": {
        "model_type": "mixtral", "hidden_size": 6144, "intermediate_size": 12288,
        "moe_intermediate_size": 2048, "num_hidden_layers": 60, "num_attention_heads": 64,
        "num_key_value_heads": 4, "head_dim": 128, "num_local_experts": 128,
        "num_experts_per_tok": 4, "vocab_size": 200064, "tie_word_embeddings": False,
    },
}

ALIASES = {"llama-3-8b": "llama3-8b", "meta-llama-3-8b": "llama3-8b", "llama-3-70b": "llama3-70b",
           "llama-3.1-405b": "llama3.1-405b", "mixtral-8x7b-v0.1": "mixtral-8x7b", "m3": "seed-m3"}


def get(name: str) -> Optional[dict]:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return PRESETS.get(key)


def names() -> list:
    return list(PRESETS)


def register(name: str, config: dict) -> None:
    """Adapters with their own catalogs (e.g. torchtitan flavors) add presets here."""
    PRESETS[name.lower()] = dict(config)
