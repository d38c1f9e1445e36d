"""Megatron-LM's flags: the table memlint maps (`FLAGS`), every flag name of the pinned commit
(`megatron_flags.json`), tokenizer vocabularies and Megatron-DeepSpeed's spellings.

`FLAGS` reflects Megatron-LM at commit d98e8a64dd (`MEGATRON_VERSION`); a flag it does not map is
checked against `KNOWN_FLAGS` (all flag names of that commit), so that a typo is a warning with a
suggestion and a known flag memlint does not need is silent.
"""
from __future__ import annotations

import json
import os
import re
from functools import lru_cache

from memlint import keys as K
from memlint import lazy_re
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

MEGATRON_VERSION = "NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22)"


# ---------------------------------------------------------------------------------------------
# The flag table


def _int(value: Any) -> int:
    if isinstance(value, str):
        value = value.strip().replace("_", "")
    return K.to_int(value)


def _pos(value: Any) -> int:
    return K.positive_int(_int(value))


def _nonneg(value: Any) -> int:
    return K.non_negative_int(_int(value))


def _text(value: Any) -> str:
    return str(value).strip().strip("'\"")


def _choice(*options: str) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        text = _text(value)
        if text not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {value!r}")
        return text
    return convert


@record(frozen=True)
class Flag:
    """One Megatron flag: how many values it takes, where it goes, how its value is read.

    nargs: 0 (a switch), 1, or "+" (one or more). target: a scenario key or `model.<hf_key>` set
    directly from the converted value, or None when the interpreter below combines it with other
    flags (the comment on each row says into what). default: Megatron's default, for messages.
    """

    name: str
    nargs: Any = 1
    target: Optional[str] = None
    convert: Optional[Callable[[Any], Any]] = None
    default: Any = None
    dest: str = ""   # argparse dest, for YAML files that use it (`add_bias_linear: false`)
    negates: bool = False  # a store_false switch: present means dest = False

    @property
    def key(self) -> str:
        return self.dest or self.name[2:].replace("-", "_")


FLAGS = [
    # parallel layout
    Flag("--tensor-model-parallel-size", 1, "tp", _pos, 1),
    Flag("--pipeline-model-parallel-size", 1, "pp", _pos, 1),
    Flag("--context-parallel-size", 1, "cp", _pos, 1),
    Flag("--expert-model-parallel-size", 1, "ep", _pos, 1),
    Flag("--expert-tensor-parallel-size", 1, "etp", _pos, "tp"),
    Flag("--sequence-parallel", 0, "sp"),
    Flag("--num-layers-per-virtual-pipeline-stage", 1, None, _pos),  # -> vpp
    Flag("--num-virtual-stages-per-pipeline-rank", 1, "vpp", _pos),
    Flag("--virtual-pipeline-model-parallel-size", 1, "vpp", _pos),  # legacy / YAML spelling
    Flag("--pipeline-model-parallel-layout", 1, None, _text),        # -> vpp
    Flag("--decoder-first-pipeline-num-layers", 1, "first_stage_layers", _pos),
    Flag("--decoder-last-pipeline-num-layers", 1, "last_stage_layers", _pos),
    Flag("--account-for-embedding-in-pipeline-split", 0),
    Flag("--account-for-loss-in-pipeline-split", 0),
    Flag("--no-overlap-p2p-communication", 0),  # store_false: p2p overlap is on by default
    Flag("--microbatch-group-size-per-virtual-pipeline-stage", 1, None, _pos),  # default pp
    Flag("--use-distributed-optimizer", 0),                       # -> zero=1
    Flag("--use-megatron-fsdp", 0),                               # -> zero by strategy
    Flag("--data-parallel-sharding-strategy", 1, None,
         _choice("no_shard", "optim", "optim_grads", "optim_grads_params"), "optim_grads_params"),
    Flag("--use-torch-fsdp2", 0),                                 # -> fsdp=full
    Flag("--zero-stage", 1, None, K.zero_stage, 0),               # Megatron-DeepSpeed
    Flag("--overlap-grad-reduce", 0),
    Flag("--overlap-param-gather", 0),
    # model shape
    Flag("--num-layers", 1, "model.num_hidden_layers", _pos),
    Flag("--hidden-size", 1, "model.hidden_size", _pos),
    Flag("--ffn-hidden-size", 1, "model.intermediate_size", _pos, "4·hidden (SwiGLU: 8/3·hidden)"),
    Flag("--num-attention-heads", 1, "model.num_attention_heads", _pos),
    Flag("--group-query-attention", 0),                           # -> num_key_value_heads
    Flag("--num-query-groups", 1, None, _pos, 1),                 # -> num_key_value_heads
    Flag("--kv-channels", 1, "model.head_dim", _pos, "hidden/heads"),
    Flag("--max-position-embeddings", 1, "model.max_position_embeddings", _pos),
    Flag("--swiglu", 0),                                          # -> model_type, hidden_act
    Flag("--squared-relu", 0),
    Flag("--openai-gelu", 0),
    Flag("--normalization", 1, None, _choice("LayerNorm", "RMSNorm"), "LayerNorm"),
    Flag("--disable-bias-linear", 0, dest="add_bias_linear", negates=True),
    Flag("--add-qkv-bias", 0),
    Flag("--qk-layernorm", 0),
    Flag("--hidden-dropout", 1, None, K.non_negative_float, 0.1),     # -> model.hidden_dropout
    Flag("--attention-dropout", 1, None, K.non_negative_float, 0.1),  # -> model.attention_dropout
    Flag("--position-embedding-type", 1, None, _text, "learned_absolute"),  # forks add alibi
    Flag("--untie-embeddings-and-output-weights", 0),             # -> tie_word_embeddings
    Flag("--make-vocab-size-divisible-by", 1, None, _pos, 128),   # -> padded vocab_size
    Flag("--vocab-size", 1, None, _pos),
    Flag("--pad-vocab-size-to", 1, None, _pos),                   # Megatron-DeepSpeed
    Flag("--tokenizer-type", 1, None, _text),
    Flag("--tokenizer-model", 1, None, _text),
    Flag("--tokenizer-name-or-path", 1, None, _text),             # Megatron-DeepSpeed
    Flag("--num-experts", "+", "model.num_local_experts", _nonneg),  # a list in Megatron-DeepSpeed (fork.py)
    Flag("--moe-router-topk", 1, "model.num_experts_per_tok", _pos, 2),
    Flag("--moe-ffn-hidden-size", 1, "model.moe_intermediate_size", _pos, "ffn-hidden-size"),
    Flag("--moe-shared-expert-intermediate-size", 1, None, _pos),
    Flag("--moe-shared-expert-gate", 0),
    Flag("--moe-layer-freq", 1, None, _text, 1),
    Flag("--multi-latent-attention", 0),
    Flag("--q-lora-rank", 1, "model.q_lora_rank", _pos),
    Flag("--kv-lora-rank", 1, "model.kv_lora_rank", _pos, 32),
    Flag("--qk-head-dim", 1, "model.qk_nope_head_dim", _pos, 128),
    Flag("--qk-pos-emb-head-dim", 1, "model.qk_rope_head_dim", _pos, 64),
    Flag("--v-head-dim", 1, "model.v_head_dim", _pos, 128),
    Flag("--mtp-num-layers", 1, "model.num_nextn_predict_layers", _nonneg),
    # batch and sequence
    Flag("--micro-batch-size", 1, "micro_batch", _pos),
    Flag("--global-batch-size", 1, "global_batch", _pos, "micro-batch-size × dp"),
    Flag("--rampup-batch-size", "+", None, None),
    Flag("--step-batch-size-schedule", 1, None, _text),
    Flag("--seq-length", 1, "seq_len", _pos),
    Flag("--decoder-seq-length", 1, None, _pos),                  # multimodal LM length
    # recompute, attention, offload
    Flag("--recompute-granularity", 1, "recompute", _choice("full", "selective")),
    Flag("--recompute-method", 1, None, _choice("uniform", "block")),
    Flag("--recompute-num-layers", 1, None, _pos),
    Flag("--recompute-modules", "+", None, None),
    Flag("--recompute-activations", 0),                           # -> recompute=selective
    Flag("--checkpoint-activations", 0),                          # legacy -> recompute=full
    Flag("--distribute-saved-activations", 0),
    Flag("--use-flash-attn", 0),                                  # -> attention
    Flag("--transformer-impl", 1, None,
         _choice("local", "transformer_engine", "inference_optimized"), "transformer_engine"),
    Flag("--attention-backend", 1, None,
         _choice("flash", "fused", "unfused", "local", "auto"), "auto"),
    Flag("--cpu-offloading", 0),
    Flag("--cpu-offloading-num-layers", 1, None, _nonneg, 0),
    Flag("--cpu-offloading-weights", 0),
    Flag("--no-cpu-offloading-activations", 0, dest="cpu_offloading_activations", negates=True),
    Flag("--optimizer-cpu-offload", 0),
    Flag("--optimizer-offload-fraction", 1, None, K.non_negative_float, 1.0),
    # precision
    Flag("--bf16", 0),
    Flag("--fp16", 0),
    Flag("--fp8-format", 1, None, _choice("e4m3", "hybrid"), dest="fp8"),
    Flag("--fp8-recipe", 1, None, _text),
    Flag("--fp8-param-gather", 0),
    Flag("--fp4-format", 1, None, _text, dest="fp4"),
    Flag("--grad-reduce-in-bf16", 0),
    Flag("--accumulate-allreduce-grads-in-fp32", 0),
    Flag("--no-gradient-accumulation-fusion", 0, dest="gradient_accumulation_fusion", negates=True),
    Flag("--use-precision-aware-optimizer", 0),
    Flag("--main-grads-dtype", 1, None, _choice("fp32", "bf16"), "fp32"),
    Flag("--main-params-dtype", 1, None, _choice("fp32", "fp16"), "fp32"),
    Flag("--exp-avg-dtype", 1, None, _choice("fp32", "fp16", "bf16", "fp8"), "fp32"),
    Flag("--megatron-fsdp-main-grads-dtype", 1, None, _choice("fp32", "bf16", "fp16", "auto")),
    Flag("--optimizer", 1, None, _text, "adam"),
    # training length, checkpoints, initialisation (memory/host.py, memory/checkpoint.py)
    Flag("--train-iters", 1, "train_steps", _pos),
    Flag("--save", 1, None, _text),                               # -> checkpoint_interval
    Flag("--save-interval", 1, None, _pos),                       # only with --save
    Flag("--no-save-optim", 0),                                   # -> save_optimizer
    Flag("--use-cpu-initialization", 0),                          # -> model_init shard-cpu
    # Megatron-DeepSpeed
    Flag("--deepspeed", 0),
    Flag("--deepspeed_config", 1, None, _text),
    Flag("--deepspeed-config", 1, None, _text),
]
FLAG_BY_NAME = {flag.name: flag for flag in FLAGS}
FLAG_BY_DEST = {flag.key: flag for flag in FLAGS}

# Argument names of the experimental YAML layout / TransformerConfig that differ from the CLI dest.
_YAML_ALIASES = {
    "num_moe_experts": "num_experts",
    "layernorm_epsilon": "norm_epsilon",
    "sequence_parallel": "sequence_parallel",
    "fp8": "fp8",
}

# Environment variables that change what is allocated (PyTorch's cuBLAS / cuBLASLt workspaces,
# Transformer Engine's deterministic attention: memory/attention_workspace.py).
MEMORY_ENV = ("CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE",
              "NVTE_ALLOW_NONDETERMINISTIC_ALGO")

# Tokenizers whose vocabulary size is public knowledge (before Megatron's padding).
TOKENIZER_VOCAB = [
    (lazy_re.compile(r"llama[-_ ]?3|meta-llama-3", re.I), 128256,
     "Llama-3 tokenizer: 128,000 BPE tokens + 256 special"),
    (lazy_re.compile(r"deepseek[-_]?(v3|r1)", re.I), 129280, "DeepSeek-V3 config.json vocab_size"),
    (lazy_re.compile(r"qwen2", re.I), 151646, "Qwen2 tokenizer: 151,643 BPE tokens + 3 special"),
    (lazy_re.compile(r"nemotron_2_256k", re.I), 256000, "Nemotron-2 256k SentencePiece model"),
    (lazy_re.compile(r"mistral|mixtral|llama[-_ ]?2|Llama2Tokenizer", re.I), 32000,
     "Llama-2 / Mistral SentencePiece tokenizer"),
    (lazy_re.compile(r"GPT2BPETokenizer", re.I), 50257, "GPT-2 BPE tokenizer"),
    (lazy_re.compile(r"BertWordPieceLowerCase", re.I), 30522,
     "BERT uncased WordPiece vocab.txt: 30,522 tokens"),
    (lazy_re.compile(r"BertWordPieceCase", re.I), 28996, "BERT cased WordPiece vocab.txt: 28,996 tokens"),
]

# Training scripts that set their own tokenizer default (parse_and_validate_args(args_defaults=...)).
SCRIPT_TOKENIZER = [(lazy_re.compile(r"pretrain_bert\.py$"), "BertWordPieceLowerCase")]
DEFAULT_VOCAB = 50257


def _flag_file() -> dict:
    """megatron_flags.json, read once (an unreadable file: none)."""
    path = os.path.join(os.path.dirname(__file__), "megatron_flags.json")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


_FLAG_FILE = _flag_file()


def _load_known_flags() -> frozenset:
    names = set()
    for section in _FLAG_FILE.values():
        if isinstance(section, dict):
            names.update(section.get("flags", ()))
    return frozenset(names)


KNOWN_FLAGS = _load_known_flags() | frozenset(FLAG_BY_NAME)


@lru_cache(maxsize=1)
def fork_choices() -> dict:
    """Megatron-DeepSpeed's spellings of choice values (`--normalization rmsnorm`) -> Megatron-LM's."""
    try:
        return dict(_FLAG_FILE.get("megatron_deepspeed", {}).get("choices", {}))
    except (ValueError, TypeError, AttributeError):
        return {}


FORK_MARKERS = ("--deepspeed", "--deepspeed_config", "--deepspeed-config")


def _dest_of(flag: str) -> set:
    base = flag[2:].replace("-", "_")
    out = {base}
    for prefix in ("no_", "disable_"):
        if base.startswith(prefix):
            out.add(base[len(prefix):])
    return out


@lru_cache(maxsize=1)
def all_flags() -> tuple:
    """Every flag name a did-you-mean may suggest: the table's first, then the commit's."""
    return tuple(FLAG_BY_NAME) + tuple(sorted(KNOWN_FLAGS))


# Did-you-mean costs a few milliseconds per unknown flag (difflib over the flag table): the first
# MAX_HINTS unknown flags of a file get one (a file with more is a fork's script or not a typo),
# and the first MAX_UNKNOWN_LISTED get a diagnostic of their own, the rest one summary line.
MAX_HINTS = 8
MAX_UNKNOWN_LISTED = 100


@lru_cache(maxsize=1)
def known_dests() -> frozenset:
    """Every argument name (argparse dest) of the commit's flags, as a `--yaml-cfg` file spells
    them: built when a Megatron YAML is read (about 3,000 names; a script needs none)."""
    return frozenset(d for f in KNOWN_FLAGS for d in _dest_of(f)) | frozenset(FLAG_BY_DEST)


# start-up: the names of the lazily built tables, as they were spelled before
_LAZY = {"KNOWN_DESTS": known_dests, "_ALL_FLAGS": all_flags, "FORK_CHOICES": fork_choices}


def __getattr__(name: str):
    if name in _LAZY:
        return _LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
