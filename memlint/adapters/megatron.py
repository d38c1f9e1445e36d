"""Megatron-LM adapter: launch scripts, argument files and YAML configs -> one `Partial`.

Formats read (none is ever executed or sourced):
- bash launch scripts (`.sh`, `.bash`, `.slurm`, `.sbatch`): variables, `export`, `${VAR:-default}`,
  arrays and `ARGS+=( ... )`, `"${ARGS[@]}"`, string variables expanded unquoted, comments and
  backslash continuations, `if [ "$X" == y ]` branches when decidable (memlint.adapters._shell).
  The launch command (torchrun, `python -m torch.distributed.run|launch`, deepspeed, srun, plain
  python) gives the world size from --nproc_per_node/--nproc-per-node x --nnodes (deepspeed:
  --num_gpus x --num_nodes; srun: --ntasks, or -N x --ntasks-per-node; `#SBATCH` lines fill
  SLURM_NNODES and friends). Everything after the entry script (`*.py`) is Megatron's argv.
- argument files: Megatron flags, one or more per line, `#` comments; `# launcher:` header lines
  give nproc_per_node / nnodes as above.
- YAML: Megatron test-case files (`MODEL_ARGS:` maps of flags), the experimental `--yaml-cfg`
  layout (argument names with underscores, `language_model:` / `model_parallel:` sections) and
  verl's Megatron engine config.

Every flag keeps the line and column where the file wrote it, also when it reached the command
line through an array or a variable. A value that cannot be known without running the script (a
`$(...)`, a variable never set, `$1`, arithmetic) becomes an `unresolved-value` info diagnostic
naming it and the default memlint assumes instead.

The flag table (`FLAGS`) reflects Megatron-LM at commit d98e8a64dd (`MEGATRON_VERSION`); flags it
does not map are checked against the full list of that commit's flag names
(`megatron_flags.json`), so that a typo is a warning with a suggestion and a known flag memlint does
not need is silent. Megatron-specific facts are kept in `Partial.extra` as `megatron.<flag>`
(e.g. `megatron.num-query-groups`, `megatron.recompute-method`), launcher facts as
`megatron.launcher.<option>`.

Megatron dtype conventions (megatron/training/arguments.py `validate_args`, DDP and optimizer):
- `--bf16`: bf16 parameters; gradients accumulate in an fp32 `main_grad` buffer (Megatron turns on
  accumulate_allreduce_grads_in_fp32 for bf16) unless `--grad-reduce-in-bf16` (or, with
  `--use-precision-aware-optimizer`, `--main-grads-dtype bf16`); the optimizer keeps fp32 master
  weights and fp32 Adam moments. `--no-gradient-accumulation-fusion` only disables the fused wgrad
  kernel; the main grads stay fp32.
- `--fp16`: fp16 parameters; main grads are fp16 unless `--accumulate-allreduce-grads-in-fp32`;
  fp32 master weights and moments.
- neither flag: fp32 everything.
- bytes per parameter with Adam: 2 + 4 + 12 = 18 (bf16 params, fp32 grads, fp32 master + two
  moments); with `--use-distributed-optimizer` (ZeRO-1 over the data-parallel group) the 12 bytes of
  optimizer state are sharded: 6 + 12/dp. `--use-megatron-fsdp` shards more according to
  `--data-parallel-sharding-strategy` (optim / optim_grads / optim_grads_params = ZeRO 1/2/3).
So `grad_dtype` is set to fp32 whenever Megatron keeps fp32 main grads.
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from memlint import keys as K
from memlint.adapters import _shell
from memlint.diagnostics import (INVALID_VALUE, PARSE_ERROR, UNKNOWN_KEY, UNRESOLVED, Severity,
                                 make)
from memlint.diagnostics import UNKNOWN_MODEL_TYPE as UNSUPPORTED_MODEL
from memlint.ir import Partial, Provenance
from memlint.loaders import load_yaml, suppressions

FORMAT = "megatron"
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


@dataclass(frozen=True)
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
    Flag("--num-experts", 1, "model.num_local_experts", _nonneg),
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

# Environment variables that change what stays allocated (PyTorch's cuBLAS / cuBLASLt workspaces).
MEMORY_ENV = ("CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE")

# Tokenizers whose vocabulary size is public knowledge (before Megatron's padding).
TOKENIZER_VOCAB = [
    (re.compile(r"llama[-_ ]?3|meta-llama-3", re.I), 128256,
     "Llama-3 tokenizer: 128,000 BPE tokens + 256 special"),
    (re.compile(r"deepseek[-_]?(v3|r1)", re.I), 129280, "DeepSeek-V3 config.json vocab_size"),
    (re.compile(r"qwen2", re.I), 151646, "Qwen2 tokenizer: 151,643 BPE tokens + 3 special"),
    (re.compile(r"nemotron_2_256k", re.I), 256000, "Nemotron-2 256k SentencePiece model"),
    (re.compile(r"mistral|mixtral|llama[-_ ]?2|Llama2Tokenizer", re.I), 32000,
     "Llama-2 / Mistral SentencePiece tokenizer"),
    (re.compile(r"GPT2BPETokenizer", re.I), 50257, "GPT-2 BPE tokenizer"),
    (re.compile(r"BertWordPieceLowerCase", re.I), 30522,
     "BERT uncased WordPiece vocab.txt: 30,522 tokens"),
    (re.compile(r"BertWordPieceCase", re.I), 28996, "BERT cased WordPiece vocab.txt: 28,996 tokens"),
]

# Training scripts that set their own tokenizer default (parse_and_validate_args(args_defaults=...)).
SCRIPT_TOKENIZER = [(re.compile(r"pretrain_bert\.py$"), "BertWordPieceLowerCase")]
DEFAULT_VOCAB = 50257


def _load_known_flags() -> frozenset:
    path = os.path.join(os.path.dirname(__file__), "megatron_flags.json")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return frozenset()
    names = set()
    for section in data.values():
        if isinstance(section, dict):
            names.update(section.get("flags", ()))
    return frozenset(names)


KNOWN_FLAGS = _load_known_flags() | frozenset(FLAG_BY_NAME)


def _load_fork_choices() -> dict:
    """Megatron-DeepSpeed's spellings of choice values (`--normalization rmsnorm`) -> Megatron-LM's."""
    path = os.path.join(os.path.dirname(__file__), "megatron_flags.json")
    try:
        with open(path, encoding="utf-8") as handle:
            return dict(json.load(handle).get("megatron_deepspeed", {}).get("choices", {}))
    except (OSError, ValueError, AttributeError):
        return {}


FORK_CHOICES = _load_fork_choices()
FORK_MARKERS = ("--deepspeed", "--deepspeed_config", "--deepspeed-config")


def _dest_of(flag: str) -> set:
    base = flag[2:].replace("-", "_")
    out = {base}
    for prefix in ("no_", "disable_"):
        if base.startswith(prefix):
            out.add(base[len(prefix):])
    return out


_ALL_FLAGS = tuple(FLAG_BY_NAME) + tuple(sorted(KNOWN_FLAGS))
MAX_HINTS = 20
MAX_UNKNOWN_LISTED = 100
KNOWN_DESTS = frozenset(d for f in KNOWN_FLAGS for d in _dest_of(f)) | frozenset(FLAG_BY_DEST)


# ---------------------------------------------------------------------------------------------
# Detection


_SCRIPT_EXT = (".sh", ".bash", ".slurm", ".sbatch")
_SENTINELS = ("--tensor-model-parallel-size", "--num-layers", "--pipeline-model-parallel-size",
              "--micro-batch-size", "--hidden-size", "pretrain_gpt.py", "pretrain_mamba.py")


def detect(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    head = text[:65536]
    if name.endswith(_SCRIPT_EXT):
        return any(s in head for s in _SENTINELS) or "megatron" in head.lower()
    if name.endswith((".txt", ".args")) or "." not in name:
        return bool(re.search(r"^[ \t]*--(tensor-model-parallel-size|num-layers|hidden-size|"
                              r"micro-batch-size|num-attention-heads)\b", head, re.M))
    if name.endswith((".yaml", ".yml")):
        if re.search(r"^MODEL_ARGS:", head, re.M):
            return True
        if "McoreEngineConfig" in head:
            return True
        return bool(re.search(r"^language_model:", head, re.M)
                    and re.search(r"^model_parallel:", head, re.M))
    return False


# ---------------------------------------------------------------------------------------------
# Reading: every format becomes a list of Arg (flag + values + positions)


@dataclass
class Arg:
    flag: str
    values: list
    prov: Provenance                 # the flag's own position
    value_provs: list = field(default_factory=list)
    unresolved: tuple = ()           # what could not be known in the values


@dataclass
class _Read:
    args: list = field(default_factory=list)
    launcher: dict = field(default_factory=dict)   # option -> (value text, prov, unresolved)
    diagnostics: list = field(default_factory=list)
    references: list = field(default_factory=list)
    yaml_style: bool = False
    kind: str = "args"
    env: dict = field(default_factory=dict)        # memory-relevant environment: name -> (text, prov)
    entry: Optional[tuple] = None                  # the training script launched: (path, prov)
    anchor: Optional[Provenance] = None   # the launch command (where the run is defined)


_NUMBER = re.compile(r"^-?[0-9][0-9_]*(\.[0-9]*)?([eE][+-]?[0-9]+)?$")


def _is_flag(text: str) -> bool:
    return text.startswith("-") and len(text) > 1 and not _NUMBER.match(text)


def split_argv(words: list, read: _Read) -> None:
    """Group argv words (text, prov, unresolved) into Args; `--flag=value` is split."""
    i = 0
    n = len(words)
    while i < n:
        text, prov, unresolved = words[i]
        if not _is_flag(text):
            if unresolved:
                read.diagnostics.append(make(
                    UNRESOLVED, Severity.INFO,
                    f"{_describe(unresolved)}: the words it expands to are unknown; flags it may "
                    "hold are not read", prov))
            else:
                read.diagnostics.append(make(
                    INVALID_VALUE, Severity.WARNING,
                    f"stray argument {text!r} follows no flag that takes a value; Megatron's "
                    "parser would reject it ('unrecognized arguments')", prov))
            i += 1
            continue
        flag, values, provs, unres = text, [], [], list(unresolved)
        if "=" in text and text.startswith("--"):
            flag, inline = text.split("=", 1)
            values.append(inline)
            provs.append(prov)
        spec = FLAG_BY_NAME.get(flag)
        j = i + 1
        want = spec.nargs if spec is not None else "*"
        while j < n:
            if want == 0 or (want == 1 and values):
                break
            nxt, nprov, nunres = words[j]
            if _is_flag(nxt):
                break
            values.append(nxt)
            provs.append(nprov)
            unres.extend(nunres)
            j += 1
        read.args.append(Arg(flag, values, prov, provs, tuple(unres)))
        i = j


def _describe(unresolved: tuple) -> str:
    return ", ".join(dict.fromkeys(unresolved))


# -- argument files --------------------------------------------------------------------------

_LAUNCHER_LINE = re.compile(r"^\s*#\s*launcher:\s*(.*)$", re.I)


def read_args_file(path: str, text: str) -> _Read:
    read = _Read()
    words: list = []
    for number, line in enumerate(text.splitlines(), start=1):
        header = _LAUNCHER_LINE.match(line)
        if header:
            body = header.group(1)
            cut = body.find("(")
            body = body if cut < 0 else body[:cut]
            _launcher_words(_line_words(path, body, number, header.start(1)), read, whole=True)
            continue
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        words.extend(_line_words(path, line, number, 0, read))
    split_argv(words, read)
    return read


def _line_words(path: str, line: str, number: int, col0: int, read: Optional[_Read] = None,
                ) -> list:
    """Words of one line (POSIX quoting, `#` comments), without variable expansion."""
    try:
        script = _shell.parse(line, shell=False)
    except _shell.ShellError as exc:
        if read is not None:
            read.diagnostics.append(make(PARSE_ERROR, Severity.ERROR, f"{exc}",
                                         Provenance(path, number, col0 + exc.offset + 1, None)))
        return []
    expander = _shell.Expander()
    out = []
    for command in script.commands:
        for word in command.words:
            for f in expander.fields(word):
                unresolved = _dollar_refs(f.text) if any(s.kind != "lit" for s in word.segs) \
                    else ()
                out.append((f.text, Provenance(path, number, col0 + f.origin + 1, None),
                            unresolved))
    return out


def _dollar_refs(text: str) -> tuple:
    return tuple(f"{m.group(0)} (not set in this file)"
                 for m in re.finditer(r"\$\{[^}]*\}|\$[A-Za-z_0-9]+|\$\([^)]*\)", text))


# -- scripts ---------------------------------------------------------------------------------

_SBATCH = re.compile(r"^[ \t]*#SBATCH[ \t]+(.*)$", re.M)
_LAUNCHERS = {"torchrun", "deepspeed", "srun", "mpirun", "python", "python3", "uv", "exec",
              "time", "nohup", "env", "numactl", "accelerate"}


def read_script(path: str, text: str) -> _Read:
    read = _Read()
    try:
        script = _shell.parse(text)
    except _shell.ShellError as exc:
        line, col = _shell.Script(text, [], [0] + [m.end() for m in re.finditer("\n", text)]
                                  ).where(exc.offset)
        read.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                     f"cannot read the script: {exc}",
                                     Provenance(path, line, col, None)))
        return read

    def prov(offset: int, key: Optional[str] = None) -> Provenance:
        line, col = script.where(offset)
        return Provenance(path, line, col, key)

    env = _sbatch_env(text, script)
    interpreter = _shell.Interpreter(env)
    best, score = None, 0
    for command in interpreter.run(script):
        fields = [(f.text, prov(f.origin), f.unresolved) for f in command.fields]
        entry = _entry_index(fields)
        if entry is None:
            continue
        after = fields[entry + 1:]
        # The launch is the command with the most Megatron flags: a data-preparation
        # `python tools/x.py --input ...` before it is a helper, not the training run.
        known = sum(1 for t, _, _ in after if t.split("=", 1)[0] in KNOWN_FLAGS)
        flags = sum(1 for t, _, _ in after if t.startswith("--"))
        if flags and (best is None or known > score):
            best, score = (fields, entry, command.offset), known
    for offset, message in interpreter.notes:
        read.diagnostics.append(make(UNRESOLVED, Severity.INFO, message, prov(offset)))
    for name in MEMORY_ENV:
        value = interpreter.env.get(name)
        if value is not None and getattr(value, "text", None) and not value.unresolved:
            read.env[name] = (value.text, prov(value.origins[0] if value.origins else 0, name))
    if best is None:
        read.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            "no Megatron launch command found (a command running a .py entry point with --flags); "
            "nothing was read from this script", Provenance(path, 1, 1, None)))
        return read
    fields, entry, offset = best
    read.entry = (fields[entry][0], fields[entry][1])
    read.anchor = prov(offset, "launch command")
    _launcher_words(fields[:entry], read, whole=False)
    if any(t == "srun" for t, _, _ in fields[:entry]) and not (
            {"nproc_per_node", "ntasks"} & set(read.launcher)):
        # one process per srun task: the allocation's #SBATCH counts give the world size
        for option, var in (("nodes", "SLURM_NNODES"),
                            ("ntasks_per_node", "SLURM_NTASKS_PER_NODE"),
                            ("ntasks", "SLURM_NTASKS")):
            value = env.get(var)
            if value is not None and option not in read.launcher:
                read.launcher[option] = (value.text, prov(value.origins[0], f"#SBATCH ({var})"),
                                         ())
    split_argv(fields[entry + 1:], read)
    return read


def _sbatch_env(text: str, script) -> dict:
    """`#SBATCH --nodes=N` etc. become the SLURM_* variables srun would see."""
    env: dict = {}
    for match in _SBATCH.finditer(text):
        body = match.group(1).split("#")[0]
        start = match.start(1)
        for opt in re.finditer(r"(--[a-z-]+|-[A-Za-z])(?:[= ]([^\s]+))?", body):
            name, value = opt.group(1), opt.group(2)
            if value is None:
                continue
            offset = start + opt.start(2)
            names = {"--nodes": ("SLURM_NNODES", "SLURM_JOB_NUM_NODES"), "-N": ("SLURM_NNODES",
                     "SLURM_JOB_NUM_NODES"), "--ntasks-per-node": ("SLURM_NTASKS_PER_NODE",),
                     "--ntasks": ("SLURM_NTASKS",), "-n": ("SLURM_NTASKS",),
                     "--gpus-per-node": ("SLURM_GPUS_PER_NODE", "SLURM_GPUS_ON_NODE")
                     }.get(name, ())
            typed = re.fullmatch(r"(?:[A-Za-z0-9_-]+:)?(\d{1,9})", value)  # `--gpus-per-node=h100:8`
            if typed and (typed.start(1) == 0 or name == "--gpus-per-node"):
                value, offset = typed.group(1), offset + typed.start(1)
                for var in names:
                    env[var] = _shell.Value(value, [offset + k for k in range(len(value))])
    return env


def _entry_index(fields: list) -> Optional[int]:
    for index, (text, _, _) in enumerate(fields):
        if text.endswith(".py") and not text.startswith("-"):
            return index
    return None


_LAUNCH_OPTIONS = {
    "--nproc_per_node": "nproc_per_node", "--nproc-per-node": "nproc_per_node",
    "--num_gpus": "nproc_per_node", "--num-gpus": "nproc_per_node",
    "--nnodes": "nnodes", "--num_nodes": "nnodes", "--num-nodes": "nnodes",
    "-N": "nodes", "--nodes": "nodes", "-n": "ntasks", "--ntasks": "ntasks",
    "--ntasks-per-node": "ntasks_per_node", "--gpus-per-node": "gpus_per_node",
}


def _launcher_words(words: list, read: _Read, whole: bool) -> None:
    i = 0
    while i < len(words):
        text, prov, unresolved = words[i]
        name, value, vunres = text, None, unresolved
        if "=" in text and text.startswith("-"):
            name, value = text.split("=", 1)
        elif i + 1 < len(words) and text in _LAUNCH_OPTIONS:
            value, vunres = words[i + 1][0], words[i + 1][2]
            i += 1
        option = _LAUNCH_OPTIONS.get(name)
        if option is not None and value is not None:
            read.launcher[option] = (value, Provenance(prov.file, prov.line, prov.column, name),
                                     tuple(vunres))
        i += 1


# -- YAML ------------------------------------------------------------------------------------

_YAML_SECTIONS = ("language_model", "model_parallel", "override_transformer_config",
                  "override_ddp_config", "override_mcore_model_config")


def read_yaml(path: str, text: str) -> _Read:
    read = _Read()
    doc = load_yaml(path, text)
    read.diagnostics.extend(doc.diagnostics)
    if doc.data is None:
        return read
    if not isinstance(doc.data, dict):
        read.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                     "a Megatron YAML config must be a mapping",
                                     Provenance(path, 1, 1, None)))
        return read
    if isinstance(doc.data.get("MODEL_ARGS"), dict):
        env = doc.data.get("ENV_VARS")
        if isinstance(env, dict):
            for key, value in env.items():
                if str(key) in MEMORY_ENV and value is not None:
                    read.env[str(key)] = (str(value), doc.prov(("ENV_VARS", key), str(key)))
        for key, value in doc.data["MODEL_ARGS"].items():
            prov = doc.prov(("MODEL_ARGS", key), str(key))
            _yaml_flag(str(key), value, prov, read)
        return read
    if doc.data.get("MODEL_ARGS") is not None:
        read.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                     "MODEL_ARGS must be a mapping of flags to values",
                                     doc.prov(("MODEL_ARGS",), "MODEL_ARGS")))
        return read
    read.yaml_style = True
    _yaml_dests(doc, doc.data, (), read)
    return read


def _yaml_flag(key: str, value: Any, prov: Provenance, read: _Read) -> None:
    if not key.startswith("-"):
        key = "--" + key
    if value is None or value is False:
        return
    if value is True:
        values: list = []
    elif isinstance(value, list):
        values = [str(v) for v in value]
    else:
        values = [str(value)]
    unresolved = tuple(u for v in values for u in _dollar_refs(v))
    read.args.append(Arg(key, values, prov, [prov] * len(values), unresolved))


# verl's Megatron engine config (verl/workers/config: McoreEngineConfig) besides Megatron names.
_VERL = {"param_offload": ("offload_params", "cpu"), "optimizer_offload": ("offload_optimizer", "cpu")}
_VERL_KEYS = {"grad_offload", "use_dist_checkpointing", "dist_checkpointing_path",
              "dist_checkpointing_prefix", "use_mbridge", "vanilla_mbridge", "use_remove_padding",
              "forward_only", "dtype"}


def _yaml_dests(doc, data: dict, path: tuple, read: _Read) -> None:
    for key, value in data.items():
        key_text = str(key)
        here = path + (key,)
        prov = doc.prov(here, ".".join(str(p) for p in here))
        if isinstance(value, dict):
            if key_text in _YAML_SECTIONS:
                _yaml_dests(doc, value, here, read)
            continue
        if value is None:
            continue
        dest = _YAML_ALIASES.get(key_text, key_text)
        if dest == "activation_func":
            if str(value).lower() == "swiglu":
                read.args.append(Arg("--swiglu", [], prov))
            continue
        if dest in ("dtype", "params_dtype") and isinstance(value, str):
            flag = {"bfloat16": "--bf16", "bf16": "--bf16", "float16": "--fp16",
                    "fp16": "--fp16"}.get(value.lower())
            if flag:
                read.args.append(Arg(flag, [], prov))
            continue
        if dest in _VERL:
            if value is True:
                read.args.append(Arg(f"--verl-{dest.replace('_', '-')}", [], prov))
            continue
        if dest in _VERL_KEYS:
            continue
        spec = FLAG_BY_DEST.get(dest)
        if spec is not None:
            if spec.nargs == 0:
                present = (value is False) if spec.negates else (value is True or
                                                                  str(value).lower() == "true")
                if present:
                    read.args.append(Arg(spec.name, [], prov))
                continue
            values = [str(v) for v in value] if isinstance(value, list) else [str(value)]
            read.args.append(Arg(spec.name, values, prov, [prov] * len(values),
                                 tuple(u for v in values for u in _dollar_refs(v))))
            continue
        if dest not in KNOWN_DESTS and not dest.startswith("_") and path[:1] != ("ENV_VARS",):
            read.diagnostics.append(make(
                UNKNOWN_KEY, Severity.INFO,
                f"{key_text!r} is not a Megatron-LM argument name ({MEGATRON_VERSION}); ignored",
                prov))


# ---------------------------------------------------------------------------------------------
# Interpreting the flags


class _Interp:
    def __init__(self, path: str, read: _Read, partial: Partial, strict: bool):
        self.path = path
        self.read = read
        self.partial = partial
        self.strict = strict
        self.args: dict = {}
        self.values: dict = {}

    # helpers
    def diag(self, kind, severity, message, prov, **data) -> None:
        self.partial.diagnostics.append(make(kind, severity, message, prov, **data))

    def arg(self, flag: str) -> Optional[Arg]:
        return self.args.get(flag)

    def on(self, flag: str) -> bool:
        return flag in self.args

    def value(self, flag: str, default: Any = None) -> Any:
        """The converted value of a flag, or `default` (absent, unresolved or invalid)."""
        return self.values.get(flag, default)

    def prov(self, flag: str, key: Optional[str] = None) -> Optional[Provenance]:
        arg = self.args.get(flag)
        if arg is None:
            return None
        p = arg.prov
        return Provenance(p.file, p.line, p.column, key or flag)

    def set(self, key: str, value: Any, flag: str, label: Optional[str] = None) -> None:
        self.partial.set(key, value, self.prov(flag, label))

    def collect(self) -> None:
        seen: dict = {}
        hints = MAX_HINTS  # did-you-mean costs milliseconds each: a few per file
        unknown, first_unlisted = 0, None
        severity = Severity.ERROR if self.strict else Severity.WARNING
        for arg in self.read.args:
            spec = FLAG_BY_NAME.get(arg.flag)
            if spec is None and arg.flag not in KNOWN_FLAGS and not arg.flag.startswith("--verl-"):
                unknown += 1
                if unknown > MAX_UNKNOWN_LISTED:  # one line for the rest: bounded output
                    first_unlisted = first_unlisted or arg
                else:
                    hints -= 1
                    hint = K.suggest(arg.flag, _ALL_FLAGS) if hints >= 0 else None
                    tail = f"; did you mean {hint}?" if hint else ""
                    self.diag(UNKNOWN_KEY, severity,
                              f"unknown Megatron flag {arg.flag} (not an argument of "
                              f"{MEGATRON_VERSION}){tail}", arg.prov, key=arg.flag)
            previous = seen.get(arg.flag)
            if previous is not None and previous.values != arg.values:
                self.diag(INVALID_VALUE, Severity.INFO,
                          f"{arg.flag} is given twice (also at line {previous.prov.line}); "
                          f"argparse keeps the last: {' '.join(arg.values) or '(switch)'}",
                          arg.prov)
            seen[arg.flag] = arg
            self.args[arg.flag] = arg
        if first_unlisted is not None:
            self.diag(UNKNOWN_KEY, severity,
                      f"{unknown - MAX_UNKNOWN_LISTED} more unknown Megatron flags from "
                      f"{first_unlisted.flag} on (only the first {MAX_UNKNOWN_LISTED} are listed)",
                      first_unlisted.prov, key=first_unlisted.flag)
        fork = any(marker in self.args for marker in FORK_MARKERS)
        for flag, arg in self.args.items():
            spec = FLAG_BY_NAME.get(flag)
            if spec is None:
                continue
            if spec.nargs == 0:
                if arg.values:
                    self.diag(INVALID_VALUE, Severity.ERROR,
                              f"{flag} is a switch and takes no value; "
                              f"{' '.join(arg.values)!r} would be rejected by Megatron's parser",
                              arg.value_provs[0] if arg.value_provs else arg.prov)
                self.values[flag] = True
                continue
            if not arg.values:
                self.diag(INVALID_VALUE, Severity.ERROR, f"{flag} expects a value", arg.prov)
                continue
            if arg.unresolved:
                default = f"Megatron's default {spec.default}" if spec.default is not None \
                    else "no value (memlint's default applies)"
                if spec.target:
                    # a value only the running script knows: "no estimate", never "missing"
                    self.partial.set_extra(f"unresolved.{spec.target}", " ".join(arg.values),
                                           arg.prov)
                self.diag(UNRESOLVED, Severity.INFO,
                          f"{flag} {' '.join(arg.values)}: {_describe(arg.unresolved)}; "
                          f"assumed {default}", arg.prov, key=flag)
                continue
            if spec.nargs == "+" or spec.convert is None:
                self.values[flag] = list(arg.values) if spec.nargs == "+" else arg.values[0]
                continue
            value = arg.values[0]
            if fork and _text(value) in FORK_CHOICES.get(flag, {}):
                value = FORK_CHOICES[flag][_text(value)]  # Megatron-DeepSpeed's spelling
            try:
                self.values[flag] = spec.convert(value)
            except ValueError as exc:
                self.diag(INVALID_VALUE, Severity.ERROR, f"{flag}: {exc}", arg.prov, key=flag)

    def extras(self) -> None:
        for flag, arg in self.args.items():
            if flag.startswith("--verl-"):
                continue
            value = self.values.get(flag)
            if value is None:
                value = True if not arg.values else (
                    arg.values[0] if len(arg.values) == 1 else list(arg.values))
            self.partial.set_extra(f"megatron.{flag.lstrip('-')}", value, self.prov(flag))
        for option, (text, prov, unresolved) in self.read.launcher.items():
            self.partial.set_extra(f"megatron.launcher.{option}", text, prov)
        for name, (text, prov) in self.read.env.items():
            self.partial.set_extra(f"env.{name}", text, prov)
        if self.read.entry is not None:
            self.partial.set_extra("megatron.entry-script", *self.read.entry)
        for name in ("bf16", "fp16"):
            if self.on(f"--{name}"):
                self.partial.set_extra(f"flags.{name}", True, self.prov(f"--{name}"))

    # the interpretation proper
    def run(self) -> None:
        self.collect()
        self.extras()
        self.unsupported_architecture()
        p = self.partial
        first = next(iter(self.args.values()), None)
        p.set("framework", "megatron",
              Provenance(self.path, first.prov.line if first else None,
                         first.prov.column if first else None, "megatron"))
        for flag, spec in FLAG_BY_NAME.items():
            if spec.target and flag in self.values and not spec.target.startswith("model."):
                self.set(spec.target, self.values[flag], flag)
        self.launcher()
        self.model()
        self.pipeline()
        self.batch()
        self.precision()
        self.memory_flags()
        self.checkpoints()

    def checkpoints(self) -> None:
        """Checkpoint saving and CPU initialisation: Megatron writes a checkpoint every
        --save-interval iterations when --save is given (training.py), with the optimizer state
        unless --no-save-optim; --use-cpu-initialization builds each rank's shard on the CPU."""
        if self.on("--save") and "--save-interval" in self.values:
            self.set("checkpoint_interval", self.values["--save-interval"], "--save-interval")
        if self.on("--no-save-optim"):
            self.set("save_optimizer", False, "--no-save-optim")
        if self.on("--use-cpu-initialization"):
            self.set("model_init", "shard-cpu", "--use-cpu-initialization")

    def unsupported_architecture(self) -> None:
        """Models whose memory memlint does not count yet: a warning and no estimate, never an
        invalid-config error and never a silent dense GPT (T5: pretrain_t5.py with
        --encoder-num-layers/--decoder-num-layers; Mamba hybrids: --hybrid-layer-pattern,
        --hybrid-override-pattern, pretrain_hybrid.py / pretrain_mamba.py)."""
        entry = self.partial.extra.get("megatron.entry-script")
        script = str(entry.value) if entry is not None else ""
        reason, flag = None, None
        for name in ("--hybrid-layer-pattern", "--hybrid-override-pattern", "--is-hybrid-model"):
            if self.on(name):
                reason, flag = "a Mamba hybrid (" + name + ")", name
                break
        if reason is None and re.search(r"pretrain_(hybrid|mamba)\.py$", script):
            reason = f"a Mamba hybrid ({os.path.basename(script)})"
        if reason is None and (re.search(r"pretrain_t5\.py$", script) or (
                self.on("--encoder-num-layers") and self.on("--decoder-num-layers")
                and not re.search(r"pretrain_vlm\.py$", script))):
            flag = "--encoder-num-layers" if self.on("--encoder-num-layers") else None
            reason = "a T5 encoder-decoder (--encoder-num-layers / --decoder-num-layers)"
        if reason is None:
            return
        prov = self.prov(flag) if flag else (entry.prov if entry is not None else
                                             Provenance(self.path, 1, 1, None))
        self.partial.set_extra("megatron.unsupported-architecture", reason, prov)
        self.diag(UNSUPPORTED_MODEL, Severity.WARNING,
                  f"no estimate for this architecture: {reason} is not counted by memlint's "
                  "memory model yet; memory checks are skipped (the other checks still run)",
                  prov)

    def launcher(self) -> None:
        facts: dict = {}
        for option, (text, prov, unresolved) in self.read.launcher.items():
            if unresolved or not re.fullmatch(r"\s*\d{1,18}\s*", text):
                default = {"nnodes": "1 node", "nodes": "1 node"}.get(option)
                self.diag(UNRESOLVED, Severity.INFO,
                          f"launcher {prov.key} {text}: "
                          f"{_describe(unresolved) if unresolved else 'not a plain number'}; "
                          + (f"assumed {default}" if default else "world size left unknown"),
                          prov)
                continue
            facts[option] = (int(text), prov)
        nproc = facts.get("nproc_per_node")
        nodes = facts.get("nnodes") or facts.get("nodes")
        unresolved_nodes = ("nnodes" in self.read.launcher or "nodes" in self.read.launcher) \
            and nodes is None
        world = None
        if nproc is not None:
            world = nproc[0] * (nodes[0] if nodes else 1)
            prov = nproc[1]
            self.partial.set("gpus_per_node", nproc[0], prov)
        elif "ntasks" in facts:
            world, prov = facts["ntasks"]
        elif "ntasks_per_node" in facts and nodes:
            world, prov = facts["ntasks_per_node"][0] * nodes[0], facts["ntasks_per_node"][1]
        if world is None and self.read.kind != "yaml":
            self.diag(UNRESOLVED, Severity.INFO,
                      "world size unknown: no launcher option gives the number of GPUs "
                      "(--nproc_per_node x --nnodes, srun --ntasks); checks that need it are "
                      "skipped (give `--set world_size=N`)", Provenance(self.path, 1, 1, None))
        if world is not None:
            label = "world size: launcher " + (prov.key or "")
            if unresolved_nodes:
                label += " (1 node assumed)"
            self.partial.set("world_size", world,
                             Provenance(prov.file, prov.line, prov.column, label))

    def model(self) -> None:
        v = self.value
        for flag in ("--num-layers", "--hidden-size", "--num-attention-heads",
                     "--max-position-embeddings", "--kv-channels", "--mtp-num-layers"):
            spec = FLAG_BY_NAME[flag]
            if flag in self.values:
                self.set(spec.target, self.values[flag], flag)
        hidden = v("--hidden-size")
        heads = v("--num-attention-heads")
        swiglu = self.on("--swiglu")
        rms = v("--normalization") == "RMSNorm"
        mla = self.on("--multi-latent-attention")
        moe_experts = v("--num-experts") or None
        # MLP width (Megatron's default when --ffn-hidden-size is absent)
        ffn = v("--ffn-hidden-size")
        if ffn is not None:
            self.set("model.intermediate_size", ffn, "--ffn-hidden-size")
        elif hidden is not None:
            ffn = int((4 * hidden * 2 / 3) / 64) * 64 if swiglu else 4 * hidden
            self.set("model.intermediate_size", ffn, "--hidden-size",
                     "ffn-hidden-size (Megatron default from --hidden-size)")
        # attention heads and KV groups
        if heads is not None and not mla:
            if self.on("--group-query-attention"):
                groups = v("--num-query-groups", 1)
                flag = "--num-query-groups" if self.on("--num-query-groups") else \
                    "--group-query-attention"
                self.set("model.num_key_value_heads", groups, flag)
            else:
                # Megatron ignores --num-query-groups without --group-query-attention.
                self.set("model.num_key_value_heads", heads, "--num-attention-heads",
                         "num_key_value_heads (= heads: no --group-query-attention)")
        elif heads is not None:
            self.set("model.num_key_value_heads", heads, "--num-attention-heads")
        # family: Megatron's GPTModel with every choice written out (memory/params.py
        # "megatron_gpt"); --num-experts gives experts whatever the activation and norm.
        anchor = next((f for f in ("--swiglu", "--normalization", "--num-layers", "--hidden-size")
                       if self.on(f)), None)
        if anchor:
            self.set("model.model_type", "megatron_gpt", anchor,
                     "model_type megatron_gpt (Megatron GPTModel from its flags)")
            act = "silu" if swiglu else "relu2" if self.on("--squared-relu") else \
                "gelu_new" if self.on("--openai-gelu") else "gelu"
            self.set("model.hidden_act", act, "--swiglu" if swiglu else anchor, "hidden_act")
            self.set("model.gated_mlp", swiglu, "--swiglu" if swiglu else anchor,
                     "gated_mlp (--swiglu)" if swiglu else "gated_mlp false (no --swiglu)")
            self.set("model.norm", "rmsnorm" if rms else "layernorm",
                     "--normalization" if self.on("--normalization") else anchor,
                     "norm" + ("" if self.on("--normalization") else
                               " (Megatron default LayerNorm)"))
            bias = not self.on("--disable-bias-linear")
            bias_flag = "--disable-bias-linear" if not bias else anchor
            self.set("model.mlp_bias", bias, bias_flag, "mlp_bias (add_bias_linear)")
            self.set("model.output_bias", bias, bias_flag, "output_bias (add_bias_linear)")
            self.set("model.attention_bias", bias or self.on("--add-qkv-bias"),
                     "--add-qkv-bias" if self.on("--add-qkv-bias") else bias_flag,
                     "attention_bias")
            tied = not self.on("--untie-embeddings-and-output-weights")
            self.set("model.tie_word_embeddings", tied,
                     "--untie-embeddings-and-output-weights" if not tied else anchor,
                     "tie_word_embeddings")
            self.set("model.qk_layernorm", self.on("--qk-layernorm"),
                     "--qk-layernorm" if self.on("--qk-layernorm") else anchor, "qk_layernorm")
            self.set("model.multi_latent_attention", mla,
                     "--multi-latent-attention" if mla else anchor, "multi_latent_attention")
            position = v("--position-embedding-type", "learned_absolute")
            learned = 0
            if position == "learned_absolute":
                learned = v("--max-position-embeddings") or v("--seq-length") or 0
            flag = "--position-embedding-type" if self.on("--position-embedding-type") else \
                ("--max-position-embeddings" if self.on("--max-position-embeddings") else anchor)
            self.set("model.learned_positions", learned, flag,
                     f"learned_positions ({position}"
                     + ("" if self.on("--position-embedding-type") else ", Megatron's default")
                     + ")")
            self.dropouts(anchor)
            self.llava(anchor)
        self.vocab()
        self.moe(moe_experts, ffn)
        if mla:
            p_mla = {"--q-lora-rank": None, "--kv-lora-rank": 32, "--qk-head-dim": 128,
                     "--qk-pos-emb-head-dim": 64, "--v-head-dim": 128}
            for flag, default in p_mla.items():
                target = FLAG_BY_NAME[flag].target
                if flag in self.values:
                    self.set(target, self.values[flag], flag)
                else:
                    self.set(target, default, "--multi-latent-attention",
                             f"{target[6:]} (Megatron default {default})")

    def llava(self, anchor: str) -> None:
        """Megatron's LLaVA (pretrain_vlm.py): a CLIP ViT of --encoder-num-layers (default
        --num-layers) layers over --img-h x --img-w images cut in --patch-dim patches; its image
        tokens (plus the class token unless --disable-vision-class-token) precede the
        --dataloader-seq-length (default --seq-length) text tokens in the language model."""
        entry = self.partial.extra.get("megatron.entry-script")
        script = str(entry.value) if entry is not None else ""
        if not re.search(r"pretrain_vlm\.py$", script):
            return  # other multimodal scripts (examples/multimodal) build other vision models
        v = self.value
        try:
            layers = int(self.arg("--encoder-num-layers").values[0]) if self.on(
                "--encoder-num-layers") else v("--num-layers")
            height = int(self.arg("--img-h").values[0]) if self.on("--img-h") else 336
            width = int(self.arg("--img-w").values[0]) if self.on("--img-w") else 336
            patch = int(self.arg("--patch-dim").values[0]) if self.on("--patch-dim") else 14
        except (ValueError, IndexError, AttributeError):
            return
        if not layers or patch <= 0:
            return
        flag = "--img-h" if self.on("--img-h") else anchor
        self.set("model.vision_num_layers", layers,
                 "--encoder-num-layers" if self.on("--encoder-num-layers") else flag,
                 "vision_num_layers (LLaVA ViT: --encoder-num-layers, default --num-layers)")
        self.set("model.vision_img_h", height, flag, "vision_img_h (--img-h)")
        self.set("model.vision_img_w", width, flag, "vision_img_w (--img-w)")
        self.set("model.vision_patch_dim", patch, flag, "vision_patch_dim (--patch-dim)")
        class_token = not self.on("--disable-vision-class-token")
        self.set("model.vision_class_token", class_token, flag, "vision_class_token")
        tokens = (height // patch) * (width // patch) + (1 if class_token else 0)
        self.set("images_per_sample", 1, flag, "images_per_sample 1 (pretrain_vlm.py)")
        self.set("tokens_per_image", tokens, flag,
                 f"tokens_per_image {tokens} ((img-h/patch)·(img-w/patch)"
                 + (" + class token)" if class_token else ")"))
        text = self.arg("--dataloader-seq-length")
        if text is not None and text.values:
            try:
                self.set("seq_len", int(text.values[0]), "--dataloader-seq-length",
                         "seq_len (text tokens: --dataloader-seq-length)")
            except ValueError:
                pass

    def dropouts(self, anchor: str) -> None:
        """Megatron's dropout probabilities, its own defaults when absent (TransformerConfig
        hidden_dropout = attention_dropout = 0.1, megatron/core/transformer/transformer_config.py);
        the embedding dropout uses hidden_dropout (LanguageModelEmbedding)."""
        for flag, key in (("--hidden-dropout", "hidden_dropout"),
                          ("--attention-dropout", "attention_dropout")):
            given = flag in self.values
            value = self.values[flag] if given else FLAG_BY_NAME[flag].default
            self.set(f"model.{key}", value, flag if given else anchor,
                     key + ("" if given else f" (Megatron default {value})"))
            if key == "hidden_dropout":
                self.set("model.embedding_dropout", value, flag if given else anchor,
                         "embedding_dropout (= hidden_dropout, LanguageModelEmbedding)")

    def vocab(self) -> None:
        v = self.value
        tp = v("--tensor-model-parallel-size", 1)
        multiple = v("--make-vocab-size-divisible-by", 128)
        if self.on("--pad-vocab-size-to") and "--pad-vocab-size-to" in self.values:
            padded = v("--pad-vocab-size-to")
            self.set("model.vocab_size", padded, "--pad-vocab-size-to")
            self.partial.set_extra("megatron.padded-vocab-size", padded,
                                   self.prov("--pad-vocab-size-to"))
            return
        raw, flag, note = None, None, None
        if "--vocab-size" in self.values:
            raw, flag = v("--vocab-size"), "--vocab-size"
        else:
            for candidate in ("--tokenizer-model", "--tokenizer-name-or-path", "--tokenizer-type"):
                arg = self.arg(candidate)
                text = arg.values[0] if arg is not None and arg.values else None
                if not isinstance(text, str):  # the literal part helps: ${DATA}/nemotron_2_256k
                    continue
                for pattern, size, why in TOKENIZER_VOCAB:
                    if pattern.search(text):
                        raw, flag, note = size, candidate, why
                        break
                if raw is not None:
                    break
        anchor = flag or next((f for f in ("--tokenizer-type", "--tokenizer-model",
                                           "--num-layers", "--hidden-size") if self.on(f)), None)
        if anchor is None:
            return
        entry = self.partial.extra.get("megatron.entry-script")
        if raw is None and not self.on("--tokenizer-type") and entry is not None:
            for script, tokenizer in SCRIPT_TOKENIZER:
                if script.search(str(entry.value)):
                    for pattern, size, why in TOKENIZER_VOCAB:
                        if pattern.search(tokenizer):
                            raw = size
                            self.diag(UNRESOLVED, Severity.INFO,
                                      f"vocabulary size taken as {size}: {entry.value} defaults "
                                      f"to --tokenizer-type {tokenizer} ({why})",
                                      self.prov(anchor))
                            break
                    break
        if raw is None:
            raw = DEFAULT_VOCAB
            self.diag(UNRESOLVED, Severity.INFO,
                      "vocabulary size unknown (no --vocab-size and no tokenizer memlint "
                      f"recognises); assumed {DEFAULT_VOCAB} (GPT-2 BPE) before padding; give "
                      "--vocab-size or `--set model.vocab_size=N`", self.prov(anchor))
        elif note:
            self.diag(UNRESOLVED, Severity.INFO,
                      f"vocabulary size taken as {raw} from {flag} {self.arg(flag).values[0]} "
                      f"({note})",
                      self.prov(flag))
        unit = multiple * tp
        padded = int(math.ceil(raw / unit) * unit)
        self.partial.set("model.vocab_size", padded,
                         self.prov(anchor, f"vocab_size (padded: ceil({raw} / ({multiple}·{tp}))"
                                           f"·{unit} = {padded})"))
        self.partial.set_extra("megatron.padded-vocab-size", padded, self.prov(anchor))
        self.partial.set_extra("megatron.unpadded-vocab-size", raw, self.prov(anchor))

    def moe(self, experts: Optional[int], ffn: Optional[int]) -> None:
        if not experts:
            return
        v = self.value
        self.set("model.num_local_experts", experts, "--num-experts")
        topk = v("--moe-router-topk", 2)
        self.set("model.num_experts_per_tok", topk,
                 "--moe-router-topk" if self.on("--moe-router-topk") else "--num-experts",
                 "num_experts_per_tok" + ("" if self.on("--moe-router-topk") else
                                          " (Megatron default 2)"))
        expert_ffn = v("--moe-ffn-hidden-size", ffn)
        if expert_ffn is not None:
            self.set("model.moe_intermediate_size", expert_ffn,
                     "--moe-ffn-hidden-size" if self.on("--moe-ffn-hidden-size") else
                     "--num-experts", "moe_intermediate_size")
        shared = v("--moe-shared-expert-intermediate-size")
        if shared:
            self.set("model.shared_expert_intermediate_size", shared,
                     "--moe-shared-expert-intermediate-size")
            if self.on("--moe-shared-expert-gate"):
                self.set("model.shared_expert_gate", True, "--moe-shared-expert-gate")
        freq = v("--moe-layer-freq")
        layers = v("--num-layers")
        if freq is not None:
            pattern = parse_layer_freq(freq, layers)
            flag = "--moe-layer-freq"
            if pattern is None:
                self.diag(INVALID_VALUE, Severity.WARNING,
                          f"--moe-layer-freq {freq!r} is neither a whole number nor a list "
                          "expression like [0]*3+[1]*58; every layer assumed MoE",
                          self.prov(flag))
                return
            if isinstance(pattern, int):
                self.set("model.moe_layer_freq", pattern, flag)
                self.set("model.first_k_dense_replace", 0, flag)
                return
            self.partial.set_extra("megatron.moe-layer-pattern", pattern, self.prov(flag))
            if layers is not None and len(pattern) != layers:
                self.diag(INVALID_VALUE, Severity.ERROR,
                          f"--moe-layer-freq lists {len(pattern)} layers but --num-layers is "
                          f"{layers}; Megatron asserts they match", self.prov(flag))
                return
            k = next((i for i, x in enumerate(pattern) if x), len(pattern))
            if all(pattern[k:]):
                self.set("model.first_k_dense_replace", k, flag)
                self.set("model.moe_layer_freq", 1, flag)
            else:
                self.set("model.mlp_only_layers", [i for i, x in enumerate(pattern) if not x],
                         flag)

    def pipeline(self) -> None:
        v = self.value
        pp = v("--pipeline-model-parallel-size", 1)
        layers = v("--num-layers")
        per_stage = v("--num-layers-per-virtual-pipeline-stage")
        if per_stage is not None and layers is not None:
            total = layers + self.on("--account-for-embedding-in-pipeline-split") \
                + self.on("--account-for-loss-in-pipeline-split")
            if total % pp == 0 and (total // pp) % per_stage == 0:
                self.set("vpp", (total // pp) // per_stage, "--num-layers-per-virtual-pipeline-stage",
                         f"vpp = num-layers/pp/{per_stage}")
        layout = v("--pipeline-model-parallel-layout")
        if isinstance(layout, str):
            stages = parse_layout(layout)
            if stages is None:
                self.diag(INVALID_VALUE, Severity.WARNING,
                          f"--pipeline-model-parallel-layout {layout!r} could not be read",
                          self.prov("--pipeline-model-parallel-layout"))
            else:
                self.partial.set_extra("megatron.pipeline-layout-stages", stages,
                                       self.prov("--pipeline-model-parallel-layout"))
                if len(stages) % pp == 0 and len(stages) // pp > 1:
                    self.set("vpp", len(stages) // pp, "--pipeline-model-parallel-layout",
                             "vpp from --pipeline-model-parallel-layout")

    def batch(self) -> None:
        v = self.value
        if self.on("--decoder-seq-length") and "--decoder-seq-length" in self.values:
            self.set("seq_len", v("--decoder-seq-length"), "--decoder-seq-length",
                     "seq_len (language model: --decoder-seq-length)")
        schedule = v("--step-batch-size-schedule")
        if isinstance(schedule, str) and not self.on("--global-batch-size"):
            sizes = [int(m) for m in re.findall(r":\s*(\d+)", schedule)]
            if sizes:
                self.set("global_batch", max(sizes), "--step-batch-size-schedule",
                         "global_batch (largest of --step-batch-size-schedule)")

    def precision(self) -> None:
        v = self.value
        bf16, fp16 = self.on("--bf16"), self.on("--fp16")
        if bf16:
            self.set("precision", "bf16", "--bf16")
            if self.on("--grad-reduce-in-bf16"):
                self.set("grad_dtype", "bf16", "--grad-reduce-in-bf16")
            elif self.on("--use-precision-aware-optimizer") and v("--main-grads-dtype") == "bf16":
                self.set("grad_dtype", "bf16", "--main-grads-dtype")
            else:
                self.set("grad_dtype", "fp32", "--bf16",
                         "grad_dtype fp32 (Megatron's main grads for --bf16)")
        elif fp16:
            self.set("precision", "fp16", "--fp16")
            if self.on("--accumulate-allreduce-grads-in-fp32"):
                self.set("grad_dtype", "fp32", "--accumulate-allreduce-grads-in-fp32")
            else:
                self.set("grad_dtype", "fp16", "--fp16",
                         "grad_dtype fp16 (no --accumulate-allreduce-grads-in-fp32)")
        elif self.args and not self.read.yaml_style:
            first = next(iter(self.args.values()))
            self.partial.set("precision", "fp32",
                             Provenance(self.path, first.prov.line, first.prov.column,
                                        "precision fp32 (no --bf16 / --fp16)"))
        fsdp_grads = v("--megatron-fsdp-main-grads-dtype")
        if self.on("--use-megatron-fsdp") and fsdp_grads in ("fp32", "bf16", "fp16"):
            self.set("grad_dtype", fsdp_grads, "--megatron-fsdp-main-grads-dtype")
        if self.on("--freeze-LM"):
            self.set("train_base", False, "--freeze-LM",
                     "train_base false (--freeze-LM: the language model has no gradients or "
                     "optimizer states)")
        if self.on("--fp8-format") and (bf16 or fp16):
            # FP8 GEMMs (Transformer Engine) over bf16/fp16 mixed precision
            self.set("precision", "fp8", "--fp8-format")
        if self.on("--fp8-param-gather") and self.on("--fp8-format"):
            self.set("param_dtype", "fp8", "--fp8-param-gather")
        if self.on("--use-precision-aware-optimizer") and "--exp-avg-dtype" in self.values:
            self.set("optimizer_state_dtype", v("--exp-avg-dtype"), "--exp-avg-dtype")
        optimizer = v("--optimizer")
        if isinstance(optimizer, str):
            mapped = {"adam": "adamw", "sgd": "sgd", "muon": "muon", "dist_muon": "muon"}.get(
                optimizer.lower())
            if mapped:
                self.set("optimizer", mapped, "--optimizer")

    def memory_flags(self) -> None:
        v = self.value
        # recompute
        if "--recompute-granularity" not in self.values:
            if self.on("--recompute-activations"):
                self.set("recompute", "selective", "--recompute-activations")
            elif self.on("--checkpoint-activations"):
                self.set("recompute", "full", "--checkpoint-activations",
                         "recompute full (legacy --checkpoint-activations)")
        # attention kernel
        backend = v("--attention-backend")
        if backend in ("unfused", "local"):
            self.set("attention", "eager", "--attention-backend")
        elif backend in ("flash", "fused", "auto"):
            self.set("attention", "flash", "--attention-backend")
        elif self.on("--use-flash-attn"):
            self.set("attention", "flash", "--use-flash-attn")
        elif v("--transformer-impl") == "local":
            self.set("attention", "eager", "--transformer-impl",
                     "attention eager (local implementation, no --use-flash-attn)")
        # optimizer sharding
        if self.on("--use-megatron-fsdp"):
            stage = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}[
                v("--data-parallel-sharding-strategy", "optim_grads_params")]
            flag = "--data-parallel-sharding-strategy" if self.on(
                "--data-parallel-sharding-strategy") else "--use-megatron-fsdp"
            self.set("zero", stage, flag, f"zero {stage} (Megatron-FSDP sharding strategy)")
        elif self.on("--use-distributed-optimizer"):
            self.set("zero", 1, "--use-distributed-optimizer")
        elif self.on("--deepspeed") and self.on("--bf16") and not v("--zero-stage"):
            # Megatron-DeepSpeed with bf16 and ZeRO stage 0 runs DeepSpeed's BF16_Optimizer,
            # which partitions the fp32 master weights and Adam moments over data parallelism
            # (a ZeRO-1 equivalent: deepspeed/runtime/bf16_optimizer.py, engine.py
            # _configure_bf16_optimizer) and keeps full fp32 gradients.
            flag = "--zero-stage" if "--zero-stage" in self.values else "--bf16"
            self.set("zero", 1, flag,
                     "zero 1 (DeepSpeed BF16_Optimizer: bf16 with ZeRO stage 0 partitions the "
                     "optimizer states)")
        elif "--zero-stage" in self.values:
            self.set("zero", v("--zero-stage"), "--zero-stage")
        if self.on("--use-torch-fsdp2"):
            self.set("fsdp", "full", "--use-torch-fsdp2")
        # offloading
        if self.on("--optimizer-cpu-offload"):
            self.set("offload_optimizer", "cpu", "--optimizer-cpu-offload")
        if self.on("--cpu-offloading") or (v("--cpu-offloading-num-layers") or 0) > 0:
            flag = "--cpu-offloading" if self.on("--cpu-offloading") else \
                "--cpu-offloading-num-layers"
            if not self.on("--no-cpu-offloading-activations"):
                self.set("offload_activations", True, flag)
            if self.on("--cpu-offloading-weights"):
                self.set("offload_params", "cpu", "--cpu-offloading-weights")
        if self.on("--verl-param-offload"):
            self.set("offload_params", "cpu", "--verl-param-offload", "param_offload")
        if self.on("--verl-optimizer-offload"):
            self.set("offload_optimizer", "cpu", "--verl-optimizer-offload", "optimizer_offload")
        config = v("--deepspeed_config") or v("--deepspeed-config")
        if isinstance(config, str) and "$" not in config:
            self.partial.references.append(config)


MAX_PATTERN = 100_000  # layers in a --moe-layer-freq list; no model has more


def parse_layer_freq(text: str, layers: Optional[int]) -> Any:
    """`--moe-layer-freq`: an int k (every k-th layer is MoE) or a list expression such as
    `[0]*3+[1]*58` / `([1]*2+[0])*4`, read by a small parser (Megatron eval()s it; we never do).
    Returns an int, a list of 0/1, or None when unreadable."""
    text = text.strip().strip("'\"")
    if re.fullmatch(r"\d+", text):
        k = int(text)
        if k <= 0:
            return None
        return k
    tokens = re.findall(r"\d+|[\[\]()*+,]|\S", text)
    pos = [0]

    def peek() -> str:
        return tokens[pos[0]] if pos[0] < len(tokens) else ""

    def take(expected: Optional[str] = None) -> str:
        token = peek()
        if expected is not None and token != expected:
            raise ValueError(token)
        pos[0] += 1
        return token

    def atom() -> list:
        token = peek()
        if token == "[":
            take("[")
            items = []
            while peek() != "]":
                number = take()
                if not number.isdigit():
                    raise ValueError(number)
                items.append(int(number))
                if peek() == ",":
                    take(",")
            take("]")
            result = items
        elif token == "(":
            take("(")
            result = expr()
            take(")")
        else:
            raise ValueError(token)
        while peek() == "*":
            take("*")
            count = take()
            # the size is checked before the list is built: `[0]*100000*3000` is refused, not
            # built (2.3 GB)
            if not count.isdigit() or len(count) > 6 or len(result) * int(count) > MAX_PATTERN:
                raise ValueError(count)
            result = result * int(count)
        return result

    def expr() -> list:
        result = atom()
        while peek() == "+":
            take("+")
            result.extend(atom())  # in place: `a+b+c+...` stays linear
            if len(result) > MAX_PATTERN:
                raise ValueError("too long")
        return result

    try:
        pattern = expr()
        if pos[0] != len(tokens):
            return None
    except (ValueError, IndexError, RecursionError):
        return None
    return [1 if x else 0 for x in pattern]


def parse_layout(text: str) -> Optional[list]:
    """`--pipeline-model-parallel-layout` (e.g. `Et*2|(tt|)*5t|tmL`) -> stages, each a string of
    layer letters (E embedding, t transformer layer, m MTP, L loss), as Megatron unrolls it."""
    layout = text.strip().strip("'\"").replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        grown = [len(layout)]

        def unroll(match) -> str:
            count = int(match.group(2)) if len(match.group(2)) <= 6 else 10**6
            grown[0] += len(match.group(1)) * count
            if count > 10_000 or grown[0] > 1_000_000:  # checked before the text is built
                raise ValueError("repeat count too large")
            return match.group(1) * count
        try:
            layout = re.sub(pattern, unroll, layout)
        except ValueError:
            return None
        if len(layout) > 1_000_000:
            return None
    stages = layout.split("|")
    if any(set(stage) - set("EtmL") for stage in stages):
        return None
    return stages


# ---------------------------------------------------------------------------------------------
# Entry points


def _kind(path: str, text: str) -> str:
    name = os.path.basename(path).lower()
    if name.endswith((".yaml", ".yml")):
        return "yaml"
    if name.endswith(_SCRIPT_EXT) or text.startswith("#!"):
        return "script"
    return "args"


def load(path: str, text: str, strict: bool = False, entry: Optional[str] = None) -> Partial:
    """Read a Megatron launch script, argument file or YAML config. Never raises on bad input.

    `entry`: the training script the arguments are given to, when the caller knows it and the
    file does not say (a YAML test case run by a CI recipe); it decides the model family."""
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    kind = _kind(path, text)
    try:
        if kind == "yaml":
            read = read_yaml(path, text)
        elif kind == "script":
            read = read_script(path, text)
        else:
            read = read_args_file(path, text)
    except (RecursionError, _shell.ShellError) as exc:
        partial.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                        f"cannot read the file: {exc}",
                                        Provenance(path, 1, 1, None)))
        return partial
    read.kind = kind
    if entry and read.entry is None:
        read.entry = (entry, Provenance(path, None, None, "training script (given by the caller)"))
    partial.anchor = read.anchor
    partial.diagnostics.extend(read.diagnostics)
    partial.references.extend(read.references)
    if read.args or read.launcher:
        _Interp(path, read, partial, strict).run()
        _mark_default_world_size(partial, text)
    return partial


# A node count taken from a scheduler variable's default (`NNODES=${SLURM_NNODES:-1}`) is what the
# script does when run by hand, not what it does under the scheduler it was written for.
_NODE_DEFAULT = re.compile(
    r"\$\{(?:SLURM_NNODES|SLURM_JOB_NUM_NODES|NNODES|NUM_NODES|NODES|PET_NNODES|WORLD_SIZE|"
    r"NODE_COUNT)\s*:?-", re.I)


def _mark_default_world_size(partial: Partial, text: str) -> None:
    world = partial.settings.get("world_size")
    if world is None or not _NODE_DEFAULT.search(text):
        return
    partial.set_extra("world_size.assumed", True, world.prov)
    partial.diagnostics.append(make(
        UNRESOLVED, Severity.INFO,
        f"world size {world.value} uses the default node count of a scheduler variable; the "
        "checks that need it assume that default (give `--set world_size=N` for the real run)",
        world.prov))


def load_path(path: str, strict: bool = False, entry: Optional[str] = None) -> Partial:
    from memlint.loaders import read_text

    text, diagnostics = read_text(path)
    if text is None:
        partial = Partial(source=path, fmt=FORMAT)
        partial.diagnostics.extend(diagnostics)
        return partial
    return load(path, text, strict=strict, entry=entry)
