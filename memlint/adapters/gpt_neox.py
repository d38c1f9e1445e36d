"""gpt-neox YAML (`python deepy.py train.py a.yml b.yml ...`): model, parallelism and DeepSpeed
settings in one flat mapping, often written JSON-style (braces, quoted keys) with `#` comments.

Behaviour mirrored from EleutherAI/gpt-neox at `SOURCE` (megatron/neox_arguments/arguments.py,
neox_args.py, deepspeed_args.py; megatron/model/transformer.py, word_embeddings.py, norms.py;
megatron/tokenizer/tokenizer.py):
- `NeoXArgs.from_ymls` reads every file with PyYAML, turns `-` into `_` in top-level keys, and
  refuses a key that two files both give (ValueError): the files of a run never override one
  another, so a run is the union of its files (`combine` below).
- The dataclass is built with `cls(**config)`: a key that is not a field fails with a TypeError.
  memlint reports unknown keys as warnings only (a key of another gpt-neox version is not wrong
  for that version).
- Every default is gpt-neox's own (`DEFAULTS`), e.g. `pipe_parallel_size` 0 (no pipeline engine,
  one stage), `make_vocab_size_divisible_by` 128 (times `model_parallel_size`), `pos_emb`
  learned, `norm` layernorm, `activation` gelu, weight tying on (`no_weight_tying` false),
  biases on, ZeRO stage 0 (`ZERO_DEFAULTS`), optimizer Adam, precision fp32 unless the fp16 /
  bf16 block is enabled or `precision` says otherwise.
- The embedded DeepSpeed `zero_optimization` block is read by the DeepSpeed adapter's own
  `map_zero_block`.

Errors are raised only where gpt-neox's source refuses the value (each check cites the line of
logic it mirrors); everything memlint cannot model is an info or a warning.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional

from memlint.adapters import deepspeed
from memlint.adapters._toplevel import top_level_keys
from memlint.diagnostics import (DUPLICATE_KEY, INVALID_VALUE, UNKNOWN_KEY, UNKNOWN_MODEL_TYPE,
                                 UNRESOLVED, Severity, make)
from memlint.ir import Partial, Provenance
from memlint.loaders import Document, load_yaml_mapping, read_text, suppressions

FORMAT = "gpt-neox"
# A file that gives the model but nothing of how it is trained (configs/llama2/7B.yml is launched
# with llama/train_config.yml): memlint makes no memory verdict on it alone (api.py
# MODEL_ONLY_FORMATS), as for an HF config.json.
MODEL_FORMAT = "gpt-neox-model"
FORMATS = (FORMAT, MODEL_FORMAT)
TRAINING_KEYS = ("train_micro_batch_size_per_gpu", "train_batch_size",
                 "gradient_accumulation_steps", "zero_optimization", "fp16", "bf16", "precision",
                 "optimizer", "checkpoint_activations", "num_gpus", "global_num_gpus")
SOURCE = "EleutherAI/gpt-neox@ea7aefd8"
_ARGS = f"{SOURCE} megatron/neox_arguments"
KEYS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpt_neox_keys.json")

# gpt-neox's defaults for the keys that change memory (neox_args.py / deepspeed_args.py fields,
# ZERO_DEFAULTS and OPT_DEFAULT in arguments.py).
DEFAULTS = {
    "model_parallel_size": (1, f"{_ARGS}/neox_args.py NeoXArgsParallelism"),
    "pipe_parallel_size": (0, f"{_ARGS}/neox_args.py NeoXArgsParallelism (0: no pipeline)"),
    "sequence_parallel": (False, f"{_ARGS}/neox_args.py NeoXArgsParallelism"),
    "make_vocab_size_divisible_by": (128, f"{_ARGS}/neox_args.py NeoXArgsModel"),
    "pos_emb": ("learned", f"{_ARGS}/neox_args.py NeoXArgsModel"),
    "norm": ("layernorm", f"{_ARGS}/neox_args.py NeoXArgsModel"),
    "activation": ("gelu", f"{_ARGS}/neox_args.py NeoXArgsModel"),
    "mlp_multiple_of": (1, f"{_ARGS}/neox_args.py NeoXArgsModel"),
    "no_weight_tying": (False, f"{_ARGS}/neox_args.py NeoXArgsModel (embeddings tied)"),
    "use_bias_in_attn_linear": (True, f"{_ARGS}/neox_args.py NeoXArgsModel"),
    "use_bias_in_mlp": (True, f"{_ARGS}/neox_args.py NeoXArgsModel"),
    "tokenizer_type": ("GPT2BPETokenizer", f"{_ARGS}/neox_args.py NeoXArgsTokenizer"),
    "moe_top_k": (1, f"{_ARGS}/neox_args.py NeoXArgsMoE"),
    "gradient_accumulation_steps": (1, f"{_ARGS}/deepspeed_args.py NeoXArgsDeepspeedConfig"),
    "checkpoint_activations": (False, f"{_ARGS}/neox_args.py NeoXArgsModel"),
    "zero_stage": (0, f"{_ARGS}/arguments.py ZERO_DEFAULTS"),
    "optimizer": ("Adam", f"{_ARGS}/arguments.py OPT_DEFAULT"),
    "precision": ("fp32", f"{_ARGS}/arguments.py calculate_derived (no fp16/bf16 block enabled)"),
}

# Tokenizer sizes before padding (megatron/tokenizer/tokenizer.py build_tokenizer): GPT-2 BPE
# has 50257 tokens, the character-level tokenizer 512. The other tokenizers read a vocab file;
# the size of the files the gpt-neox configs name is known by the file's name.
GPT2_VOCAB = 50257
NEOX_20B_VOCAB = 50277     # 20B_tokenizer.json (GPT-NeoX-20B, Pythia): HF vocab 50277
LLAMA_SPM_VOCAB = 32000    # LLaMA / Llama 2 / Mistral tokenizer.model
VOCAB_BY_TYPE = {"gpt2bpetokenizer": (GPT2_VOCAB, "the GPT-2 BPE vocabulary"),
                 "hfgpt2tokenizer": (GPT2_VOCAB, "the GPT-2 BPE vocabulary"),
                 "chareveltokenizer": (512, "CharLevelTokenizer(vocab_size=512)"),
                 "charleveltokenizer": (512, "CharLevelTokenizer(vocab_size=512)")}

# Literal choices at SOURCE (validate_types refuses a value outside them, case-insensitively).
CHOICES = {
    "pos_emb": ("learned", "rotary", "sinusoidal", "rpe", "alibi", "none"),
    "norm": ("layernorm", "rmsnorm", "non_parametric_layernorm", "scalenorm", "te_rmsnorm",
             "te_layernorm"),
    "activation": ("gelu", "geglu", "relu", "softsign", "swish", "mish", "silu", "reglu",
                   "swiglu", "bilinear", "glu"),
    "precision": ("fp16", "fp32", "bfloat16"),
}
GATED = ("geglu", "reglu", "swiglu", "bilinear", "glu")  # megatron/model/activations.py is_gated
ATTENTION_TYPES = ("global", "local", "sparse_fixed", "sparse_variable", "bigbird",
                   "bslongformer", "gmlp", "amlp", "flash", "rwkv", "mamba")

# Field types validate_types checks exactly (type(value) != field type fails; an int is accepted
# for a float field). Only the fields this adapter reads are checked.
INT_FIELDS = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "seq_length",
              "max_position_embeddings", "make_vocab_size_divisible_by", "model_parallel_size",
              "pipe_parallel_size", "intermediate_size", "mlp_multiple_of",
              "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
              "train_batch_size", "checkpoint_num_layers", "moe_num_experts", "moe_top_k",
              "moe_expert_interval", "num_gpus",
              "num_nodes", "global_num_gpus")
BOOL_FIELDS = ("sequence_parallel", "checkpoint_activations", "partition_activations",
               "no_weight_tying", "gpt_j_residual", "use_bias_in_attn_linear",
               "use_bias_in_mlp", "use_bnb_optimizer")

# gpt-neox optimizers (megatron/training.py get_optimizer) -> memlint optimizer by state count.
OPTIMIZERS = {"adam": "adamw", "adamw": "adamw", "onebitadam": "adamw", "cpu_adam": "adamw",
              "cpu_torch_adam": "adamw", "lamb": "adamw", "onebitlamb": "adamw", "sm3": "adamw",
              "madgrad_wd": "adamw", "lion": "sgd", "sgd": "sgd", "adafactor": "adafactor",
              "muon": "muon"}


@functools.lru_cache(maxsize=1)
def known_keys() -> frozenset:
    with open(KEYS_PATH, encoding="utf-8") as handle:
        return frozenset(json.load(handle)["keys"])


# ---------------------------------------------------------------------------------------------
# Detection: a YAML whose top-level keys (quoted or not, `_` or `-`) include gpt-neox's own. Only
# the top level counts (NeoXArgs is one flat namespace): nanotron nests `lr_decay_style` and
# `hidden_size` inside its sections, and was read as gpt-neox before (adapters/_toplevel.py).

_STRONG = frozenset((
    "pipe_parallel_size", "gpt_j_residual", "no_weight_tying", "attention_config",
    "make_vocab_size_divisible_by", "pos_emb", "output_layer_parallelism",
    "checkpoint_validation_with_forward_pass", "train_data_paths", "data_impl",
    "scaled_upper_triang_masked_softmax_fusion", "bias_gelu_fusion", "rotary_pct",
    "output_layer_init_method", "lr_decay_style", "checkpoint_factor", "synchronize_each_layer",
    "sparsity_config"))
_WEAK = frozenset((
    "model_parallel_size", "num_layers", "hidden_size", "num_attention_heads", "seq_length",
    "max_position_embeddings", "train_micro_batch_size_per_gpu", "zero_optimization",
    "tokenizer_type", "vocab_file", "merge_file", "data_path", "train_iters",
    "checkpoint_activations", "partition_activations", "tensorboard_dir", "log_dir"))
# other formats' top-level keys: axolotl, LLaMA-Factory / HF Trainer, accelerate, Megatron-LM
# YAML, NeMo (trainer / exp_manager beside a nested model:)
_FOREIGN = frozenset(("base_model", "model_name_or_path", "distributed_type", "MODEL_ARGS",
                      "language_model", "finetuning_type", "compute_environment", "trainer",
                      "exp_manager"))


def detect(path: str, text: str) -> bool:
    if not os.path.basename(path).lower().endswith((".yaml", ".yml")):
        return False
    keys = {k.replace("-", "_") for k in top_level_keys(text)}
    if keys & _FOREIGN:
        return False
    strong, weak = keys & _STRONG, keys & _WEAK
    if strong and len(strong) + len(weak) >= 2:
        return True
    # DeepSpeed's batch or ZeRO keys beside the model's in one YAML: only gpt-neox writes that
    if "num_layers" in weak and ("train_micro_batch_size_per_gpu" in weak
                                 or "zero_optimization" in weak):
        return True
    return "vocab_file" in weak and "data_path" in weak and len(weak) >= 3


# ---------------------------------------------------------------------------------------------
# Reading


@dataclass
class _Value:
    value: Any
    doc: Document
    key: Any            # as the file spells it (YAML may make it a number)

    def prov(self, sub: tuple = ()) -> Provenance:
        return self.doc.prov((self.key,) + sub, ".".join(map(str, (self.key, *sub))))


class _View:
    """One Document's view of the merged config: DeepSpeed's block readers take a Document
    (data + prov); this one answers with the file and line of each key's own file."""

    def __init__(self, values: dict):
        self.values = values
        self.data = {name: v.value for name, v in values.items()}
        first = next(iter(values.values()), None)
        self.path = first.doc.path if first else ""

    def prov(self, path: tuple, key: Optional[str] = None) -> Provenance:
        item = self.values.get(path[0]) if path else None
        if item is None:
            return Provenance(self.path, None, None, key)
        where = item.doc.prov((item.key,) + tuple(path[1:]), key)
        return where


def _read(doc: Document, merged: dict, partial: Partial) -> None:
    """Add one file's top-level keys to `merged` (name with '_' -> _Value), refusing a key an
    earlier file gave, as NeoXArgs.from_ymls does."""
    for key, value in doc.data.items():
        name = str(key).replace("-", "_")
        earlier = merged.get(name)
        if earlier is not None:
            first = earlier.prov()
            same_file = earlier.doc.path == doc.path
            partial.diagnostics.append(make(
                DUPLICATE_KEY, Severity.WARNING if same_file else Severity.ERROR,
                f"{key} is also given as {earlier.key} at line {first.line}"
                + ("; the later value wins" if same_file else
                   f" of {os.path.basename(earlier.doc.path)}: gpt-neox refuses a key two "
                   "config files both give (NeoXArgs.from_ymls, ValueError)"),
                doc.prov((key,), str(key)), key=name))
            if not same_file:
                continue
        merged[name] = _Value(value, doc, key)


def _parse(path: str, text: str, partial: Partial) -> Optional[Document]:
    return load_yaml_mapping(path, text, "a gpt-neox config (NeoXArgs.from_ymls iterates its "
                             "items)", partial.diagnostics)


def load(path: str, text: str) -> Partial:
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    doc = _parse(path, text, partial)
    if doc is None:
        return partial
    merged: dict = {}
    _read(doc, merged, partial)
    _apply(merged, partial, Provenance(path, 1, 1, None))
    partial.fmt = _format(merged)
    return partial


def _format(merged: dict) -> str:
    if "num_layers" in merged and not any(key in merged for key in TRAINING_KEYS):
        return MODEL_FORMAT
    return FORMAT


def combine(partials: list) -> list:
    """A run of several gpt-neox files (deepy.py merges them into one NeoXArgs): the first
    one's Partial carries the whole run's settings, derived from every file together; the others
    stay in the run (their sources count as its members) without settings of their own."""
    neox = [p for p in partials if p.fmt in FORMATS]
    if len(neox) < 2:
        return partials
    run = Partial(source=neox[0].source, fmt=FORMAT, suppressions=neox[0].suppressions)
    merged: dict = {}
    for part in neox:
        text, problems = read_text(part.source)
        run.diagnostics.extend(problems)
        doc = _parse(part.source, text, run) if text is not None else None
        if doc is not None:
            _read(doc, merged, run)
    _apply(merged, run, Provenance(neox[0].source, 1, 1, None))
    run.fmt = _format(merged)
    out = []
    for part in partials:
        if part is neox[0]:
            out.append(run)
        elif part.fmt in FORMATS:
            out.append(Partial(source=part.source, fmt=run.fmt, suppressions=part.suppressions))
        else:
            out.append(part)
    return out


# ---------------------------------------------------------------------------------------------
# Mapping


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _apply(cfg: dict, partial: Partial, anchor: Provenance) -> None:
    diags = partial.diagnostics
    assumed: list = []

    def err(name: str, message: str, sub: tuple = ()) -> None:
        diags.append(make(INVALID_VALUE, Severity.ERROR, message, cfg[name].prov(sub), key=name))

    def get(name: str, default: Any = None) -> Any:
        item = cfg.get(name)
        return default if item is None or item.value is None else item.value

    def where(name: str) -> Provenance:
        item = cfg.get(name)
        return item.prov() if item is not None else anchor

    def default(name: str) -> Any:
        value, source = DEFAULTS[name]
        if name not in cfg:
            assumed.append(f"{name} = {value} ({source})")
        return value

    # Unknown keys: the dataclass refuses them; another gpt-neox version may not (a warning).
    known = known_keys()
    for name, item in cfg.items():
        if name not in known:
            diags.append(make(UNKNOWN_KEY, Severity.WARNING,
                              f"{item.key} is not a NeoXArgs field at {SOURCE} (gpt-neox of that "
                              "version stops with `unexpected keyword argument`); ignored",
                              item.prov(), key=name))

    # Types (NeoXArgs.validate_types): exact types for the fields read here.
    bad = set()
    tuning = get("autotuning") is not None
    for name in INT_FIELDS + BOOL_FIELDS:
        item = cfg.get(name)
        if item is None or item.value is None or (tuning and item.value == "auto"):
            continue
        ok = _is_int(item.value) if name in INT_FIELDS else isinstance(item.value, bool)
        if not ok:
            bad.add(name)
            kind = "int" if name in INT_FIELDS else "bool"
            err(name, f"{item.key}: {item.value!r} is not of type {kind}; gpt-neox refuses it "
                      f"(NeoXArgs.validate_types: the value's type must be the field's, {kind})")
    for name, choices in CHOICES.items():
        value = get(name)
        if value is not None and not (isinstance(value, str)
                                      and value.lower() in choices):
            bad.add(name)
            err(name, f"{cfg[name].key}: {value!r} is not one of {', '.join(choices)} "
                      "(NeoXArgs.validate_types refuses it)")

    def num(name: str, fallback: Any = None) -> Any:
        return fallback if name in bad else get(name, fallback)

    partial.set("framework", "deepspeed", Provenance(anchor.file, None, None, "<gpt-neox config>"))
    partial.set_extra("gpt_neox.config", anchor.file, anchor)

    # -- parallelism ------------------------------------------------------------------------
    mp = num("model_parallel_size") or default("model_parallel_size")
    mp = mp if mp >= 1 else 1
    pipe = num("pipe_parallel_size")
    pipe = default("pipe_parallel_size") if pipe is None else pipe
    if "model_parallel_size" in cfg and "model_parallel_size" not in bad:
        partial.set("tp", mp, where("model_parallel_size"))
    partial.set("pp", max(pipe, 1), where("pipe_parallel_size"))
    if get("sequence_parallel") is True and "sequence_parallel" not in bad:
        partial.set("sp", mp > 1, where("sequence_parallel"))
    gpus, nodes = num("num_gpus"), num("num_nodes")
    if num("global_num_gpus"):
        partial.set("world_size", num("global_num_gpus"), where("global_num_gpus"))
    elif gpus and nodes and gpus > 0 and nodes > 0:
        partial.set("world_size", gpus * nodes, where("num_gpus"))
        partial.set("gpus_per_node", gpus, where("num_gpus"))

    # -- batch ------------------------------------------------------------------------------
    for name, key in (("train_micro_batch_size_per_gpu", "micro_batch"),
                      ("gradient_accumulation_steps", "grad_accum"),
                      ("train_batch_size", "global_batch")):
        value = num(name)
        if _is_int(value) and value > 0:
            partial.set(key, value, where(name))
    if num("seq_length") is not None:
        partial.set("seq_len", num("seq_length"), where("seq_length"))

    # -- precision (arguments.py calculate_derived) ------------------------------------------
    precision = _precision(cfg, get, err, bad)
    if precision is None:
        precision = default("precision")
    partial.set("precision", {"fp16": "fp16", "bfloat16": "bf16", "fp32": "fp32"}[precision],
                where("precision") if "precision" in cfg else (
                    cfg["fp16"].prov(("enabled",)) if precision == "fp16" and "fp16" in cfg
                    else cfg["bf16"].prov(("enabled",)) if precision == "bfloat16"
                    and "bf16" in cfg else anchor))
    if precision == "fp16":
        partial.set_extra("flags.fp16", True, where("fp16"))
    elif precision == "bfloat16":
        partial.set_extra("flags.bf16", True, where("bf16") if "bf16" in cfg else where(
            "precision"))

    # -- recompute -------------------------------------------------------------------------
    if get("checkpoint_activations") is True:
        partial.set("recompute", "full", where("checkpoint_activations"))
        every = num("checkpoint_num_layers")
        if _is_int(every) and every > 1:
            partial.set_extra("gpt_neox.checkpoint_num_layers", every,
                              where("checkpoint_num_layers"))
    elif "checkpoint_activations" in cfg:
        partial.set("recompute", "none", where("checkpoint_activations"))
    if get("partition_activations") is True and mp > 1:
        diags.append(make(UNRESOLVED, Severity.INFO,
                          "partition_activations splits each checkpointed layer input across the "
                          f"{mp} model-parallel ranks; memlint counts it unsplit (an "
                          "over-estimate)",
                          where("partition_activations"), key="partition_activations"))

    # -- ZeRO (the DeepSpeed block, read by the DeepSpeed adapter) --------------------------
    zero = get("zero_optimization")
    if isinstance(zero, dict):
        if "stage" not in zero:
            err("zero_optimization", "zero_optimization has no `stage`: gpt-neox reads "
                "zero_optimization[\"stage\"] and stops with a KeyError (arguments.py "
                "calculate_derived)")
        else:
            view = _View({"zero_optimization": cfg["zero_optimization"]})
            deepspeed.map_zero_block(view, partial)
            # DeepSpeed validates the block with pydantic (extra keys forbidden) since v0.7;
            # the DeeperSpeed of an older gpt-neox ignored what it did not know: a warning
            for found in deepspeed.schema_diagnostics(view):
                message = found.message
                if "drop the quotes" in message:   # YAML, not JSON: PyYAML reads 1e6 as text
                    message = message[:message.index(" (DeepSpeed's pydantic model reads")] + (
                        " (PyYAML, which gpt-neox reads its configs with, takes an exponent "
                        "without a dot as text: write the digits)")
                diags.append(dataclasses.replace(
                    found, severity=min(found.severity, Severity.WARNING),
                    message=message + "; a warning only: the dict-based DeepSpeed of older "
                    "gpt-neox versions ignored it"))
        stage = zero.get("stage")
        if _is_int(get("moe_num_experts")) and get("moe_num_experts") > 1 and _is_int(stage) \
                and stage >= 2:
            err("zero_optimization", "MoE (moe_num_experts > 1) with ZeRO stage "
                f"{stage}: gpt-neox refuses it ('MoE is not compatible with zero stages 2 and "
                "3', arguments.py calculate_derived)", ("stage",))
    elif "zero_optimization" not in cfg:
        partial.set("zero", default("zero_stage"), anchor)

    # -- optimizer ---------------------------------------------------------------------------
    _optimizer(cfg, partial, err, default, anchor)

    # -- model -------------------------------------------------------------------------------
    _model(cfg, partial, num, get, where, default, err, bad, mp, assumed)

    if assumed:
        diags.append(make(UNRESOLVED, Severity.INFO,
                          "gpt-neox defaults assumed (no file gives them): " + "; ".join(assumed),
                          anchor, key="defaults", assumed=list(assumed)))


def _precision(cfg: dict, get, err, bad: set) -> Optional[str]:
    """gpt-neox's precision, or None when nothing sets it (arguments.py calculate_derived)."""
    precision = None if "precision" in bad else get("precision")
    precision = precision.lower() if isinstance(precision, str) else None
    for block, name in (("fp16", "fp16"), ("bf16", "bfloat16")):
        node = get(block)
        if isinstance(node, dict) and node.get("enabled", False):
            if precision is None:
                precision = name
            elif precision != name:
                err(block, f"{block}.enabled is true but precision is {get('precision')!r}: "
                           f"gpt-neox stops ('DeepSpeed {block} field was set but precision "
                           "conflicts', arguments.py calculate_derived)", ("enabled",))
    for block in ("fp16", "amp", "flops_profiler"):
        node = get(block)
        if isinstance(node, dict) and "enabled" not in node and not (
                block == "fp16" and precision == "fp16"):
            err(block, f"{block} has no `enabled` key: gpt-neox refuses the config "
                       f"(NeoXArgs.validate_types: '{block}: must contain key enabled')")
    return precision


def _optimizer(cfg: dict, partial: Partial, err, default, anchor: Provenance) -> None:
    node = cfg["optimizer"].value if "optimizer" in cfg else None
    if node is None:
        kind = default("optimizer")
        where = anchor
    elif not isinstance(node, dict) or not isinstance(node.get("type"), str) \
            or not isinstance(node.get("params"), dict):
        err("optimizer", "optimizer must be a mapping with a string `type` and a `params` "
            "mapping: gpt-neox refuses it otherwise (NeoXArgs.validate_types)")
        return
    else:
        kind = node["type"]
        where = cfg["optimizer"].prov(("type",))
    mapped = OPTIMIZERS.get(kind.strip().lower())
    if mapped is None:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, f"optimizer {kind!r} has no memlint equivalent; two fp32 "
            "moments per parameter (adamw) are assumed", where, key="optimizer.type"))
        mapped = "adamw"
    partial.set("optimizer", mapped, where)
    if cfg.get("use_bnb_optimizer") is not None and cfg["use_bnb_optimizer"].value is True:
        partial.set("optimizer_state_dtype", "int8", cfg["use_bnb_optimizer"].prov())


def _vocab(cfg: dict, get, assumed: list) -> tuple:
    """(tokenizer size before padding, how it is known)."""
    kind = str(get("tokenizer_type", DEFAULTS["tokenizer_type"][0]))
    vocab_file = os.path.basename(str(get("vocab_file") or "")).lower()
    known = VOCAB_BY_TYPE.get(kind.lower())
    if known:
        size, why = known
        if "tokenizer_type" not in cfg:
            assumed.append(f"tokenizer_type = GPT2BPETokenizer ({DEFAULTS['tokenizer_type'][1]})")
        return size, why
    if "20b_tokenizer" in vocab_file:
        return NEOX_20B_VOCAB, "the GPT-NeoX-20B tokenizer (20B_tokenizer.json)"
    if kind.lower() == "hftokenizer":
        assumed.append(f"tokenizer vocabulary = {NEOX_20B_VOCAB} tokens (HFTokenizer without a "
                       "vocab_file naming another: the GPT-NeoX-20B tokenizer its configs use)")
        return NEOX_20B_VOCAB, "assumed GPT-NeoX-20B tokenizer"
    if kind.lower() == "spmtokenizer":
        assumed.append(f"tokenizer vocabulary = {LLAMA_SPM_VOCAB} tokens (SPMTokenizer: the "
                       "LLaMA / Llama 2 tokenizer.model its configs use)")
        return LLAMA_SPM_VOCAB, "assumed LLaMA SentencePiece tokenizer"
    assumed.append(f"tokenizer vocabulary = {GPT2_VOCAB} tokens ({kind}: size not known "
                   "without its vocab file; the GPT-2 BPE size assumed)")
    return GPT2_VOCAB, "assumed GPT-2 BPE size"


def _model(cfg, partial, num, get, where, default, err, bad, mp, assumed) -> None:
    layers, hidden, heads = num("num_layers"), num("hidden_size"), num("num_attention_heads")
    types = _attention_types(get("attention_config"))
    mamba = "mamba" in types
    if _is_int(hidden) and _is_int(heads) and heads > 0 and hidden % heads and not mamba:
        err("hidden_size", f"hidden_size {hidden} is not divisible by num_attention_heads "
            f"{heads}: gpt-neox refuses it (validate_values)")
    seq, positions = num("seq_length"), num("max_position_embeddings")
    if _is_int(seq) and _is_int(positions) and positions < seq:
        err("max_position_embeddings", f"max_position_embeddings {positions} < seq_length "
            f"{seq}: gpt-neox refuses it (validate_values: 'max_position_embeddings must be "
            "bigger or equal seq_length')")
    kv = num("num_kv_heads")
    if _is_int(kv) and kv > 0 and _is_int(heads) and heads % kv:
        err("num_kv_heads", f"num_kv_heads {kv} does not divide num_attention_heads {heads}: "
            "gpt-neox refuses it (calculate_derived)")
    unknown_types = sorted(t for t in types if t not in ATTENTION_TYPES)
    if unknown_types:
        # refused at SOURCE (calculate_derived asserts each is in ATTENTION_TYPE_CHOICES), but
        # branches and later versions add types (e.g. ring attention): a warning
        partial.diagnostics.append(make(
            UNKNOWN_KEY, Severity.WARNING, f"attention type(s) {', '.join(unknown_types)} are "
            f"not among gpt-neox's choices at {SOURCE}; counted as standard attention",
            where("attention_config"), key="attention_config"))
    if types:
        flash = types <= {"flash"}
        partial.set("attention", "flash" if flash else "eager", where("attention_config"))
        other = sorted(types & {"gmlp", "amlp", "rwkv", "mamba"})
        if other:
            # never counted as transformer layers: no estimate (issue 26)
            why = f"a gpt-neox model with {', '.join(other)} layers (attention_config)"
            partial.set_extra("gpt_neox.unsupported-architecture", why,
                              where("attention_config"))
            partial.diagnostics.append(make(
                UNKNOWN_MODEL_TYPE, Severity.WARNING, f"no estimate for this architecture: {why} "
                "is not counted by memlint's memory model; memory checks are skipped (the "
                "other checks still run)", where("attention_config"), key="attention_config"))
    elif layers is not None:
        partial.set("attention", "eager", where("attention_config") if "attention_config"
                    in cfg else Provenance(where("num_layers").file, None, None,
                                           "attention_config (default global)"))

    if not (_is_int(layers) and _is_int(hidden) and _is_int(heads) and layers > 0
            and hidden > 0 and heads > 0):
        return   # a file without the model (data paths, cluster setup): nothing to count

    def model(key: str, value: Any, name: Optional[str]) -> None:
        partial.set(f"model.{key}", value, where(name) if name and name in cfg else Provenance(
            where("num_layers").file, None, None, f"{key} (gpt-neox default)"))

    model("model_type", "megatron_gpt", "num_layers")
    model("num_hidden_layers", layers, "num_layers")
    model("hidden_size", hidden, "hidden_size")
    model("num_attention_heads", heads, "num_attention_heads")
    model("num_key_value_heads", kv if _is_int(kv) and kv > 0 else heads,
          "num_kv_heads" if _is_int(kv) else "num_attention_heads")
    if _is_int(positions):
        model("max_position_embeddings", positions, "max_position_embeddings")
    pos = str(get("pos_emb") or default("pos_emb")).lower()
    learned = pos == "learned" and _is_int(positions)
    model("learned_positions", positions if learned else 0, "pos_emb")

    activation = str(get("activation") or default("activation")).lower()
    llama_mlp = str(get("mlp_type") or "").lower() == "llama"
    gated = activation in GATED or llama_mlp
    model("hidden_act", activation, "activation")
    model("gated_mlp", gated, "mlp_type" if llama_mlp else "activation")
    if llama_mlp:
        # `mlp_type: llama` (gpt-neox before 0d4bdb96, which removed the key): LLaMAParallelMLP,
        # w1/w3/w2 without biases, width intermediate_size or 8h/3 rounded up to 256
        size = num("intermediate_size")
        ffn = size if _is_int(size) and size > 0 else 256 * -(-(8 * hidden // 3) // 256)
    else:
        ffn = _ffn(cfg, num, hidden, gated)
    model("intermediate_size", ffn, "intermediate_size" if "intermediate_size" in cfg
          else "expansion_factor" if "expansion_factor" in cfg else None)

    norm = str(get("norm") or default("norm")).lower()
    model("norm", "layernorm" if norm in ("layernorm", "te_layernorm") else "rmsnorm", "norm")
    if norm in ("scalenorm", "non_parametric_layernorm"):
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, f"norm {norm} has (almost) no parameters; counted as "
            "RMSNorm (hidden_size weights per norm)", where("norm"), key="norm"))
    attn_bias = get("use_bias_in_attn_linear", default("use_bias_in_attn_linear")) is not False
    mlp_bias = get("use_bias_in_mlp", default("use_bias_in_mlp")) is not False and not llama_mlp
    model("attention_bias", attn_bias, "use_bias_in_attn_linear")
    model("output_bias", attn_bias, "use_bias_in_attn_linear")
    model("mlp_bias", mlp_bias, "use_bias_in_mlp")
    tied = get("no_weight_tying", default("no_weight_tying")) is not True
    model("tie_word_embeddings", tied, "no_weight_tying")

    size, why = _vocab(cfg, get, assumed)
    divisor = num("make_vocab_size_divisible_by") or default("make_vocab_size_divisible_by")
    # the raw vocabulary and gpt-neox's multiple; the memory model pads it with the run's tp
    # (memlint/facts/vocab.py: multiple × model_parallel_size)
    tokenizer = where("tokenizer_type")
    partial.set("model.vocab_size", size, Provenance(
        tokenizer.file, tokenizer.line, tokenizer.column,
        f"vocab_size {size} ({why}), before padding"))
    pad = where("make_vocab_size_divisible_by")
    partial.set("model.vocab_pad_multiple", max(divisor, 1), Provenance(
        pad.file, pad.line, pad.column,
        f"make_vocab_size_divisible_by {divisor} (padded to a multiple of {divisor} × "
        "model_parallel_size, tokenizer.py _vocab_size_with_padding)"))

    experts = num("moe_num_experts")
    if _is_int(experts) and experts > 1:
        # megatron/model/moe.py, moe_mlp.py: on every moe_expert_interval-th layer, experts of
        # w1/w2 (w3 too when gated) without biases, each intermediate_size wide, else 4h
        # (8h/3 when gated) rounded up to 256; split over the model-parallel ranks (counted
        # like experts sharded over tp)
        size = num("intermediate_size")
        width = size if _is_int(size) and size > 0 else (
            8 * hidden // 3 if gated else 4 * hidden)
        if not (_is_int(size) and size > 0):
            width = 256 * -(-width // 256)
        interval = num("moe_expert_interval")
        model("num_local_experts", experts, "moe_num_experts")
        top_k = num("moe_top_k")
        model("num_experts_per_tok", top_k if _is_int(top_k) and top_k > 0 else 1, "moe_top_k")
        model("moe_intermediate_size", width, "intermediate_size")
        model("moe_layer_freq", interval if _is_int(interval) and interval > 0 else 1,
              "moe_expert_interval")


def _ffn(cfg: dict, num, hidden: int, gated: bool) -> int:
    """The MLP width as gpt-neox builds it (transformer.py ParallelMLP): intermediate_size, or
    expansion_factor x hidden, or 4 x hidden; a gated activation takes 2/3 of it, split into
    halves; then rounded up to mlp_multiple_of. Returns the width of the second linear (the HF
    `intermediate_size`)."""
    size = num("intermediate_size")
    factor = num("expansion_factor")
    if _is_int(size) and size > 0:
        ffn = size
    elif isinstance(factor, (int, float)) and not isinstance(factor, bool) and factor > 0:
        ffn = int(Fraction(factor) * hidden)  # exact: no float overflow on huge sizes
    else:
        ffn = 4 * hidden
    multiple = num("mlp_multiple_of") or DEFAULTS["mlp_multiple_of"][0]
    multiple = max(multiple, 1)
    ffn_in = ffn
    if gated:
        ffn = ffn * 2 // 3  # gpt-neox's int(ffn * 2/3), in integers
        ffn_in = ffn // 2
    return multiple * ((ffn_in + multiple - 1) // multiple)


def _attention_types(config: Any) -> set:
    """The attention types an attention_config names ([[["flash"], 24]] or a flat list)."""
    found: set = set()
    if not isinstance(config, list):
        return found
    for item in config[:10_000]:
        if isinstance(item, str):
            found.add(item.lower())
        elif isinstance(item, list) and item and isinstance(item[0], list):
            found.update(str(t).lower() for t in item[0][:10_000])
    return found
