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

import functools
import json
import os

from memlint.adapters import deepspeed
from memlint.adapters.detection import gpt_neox as detect  # noqa: F401 - the adapter's detect()
from memlint.diagnostics import (DUPLICATE_KEY, INVALID_VALUE, UNKNOWN_KEY, UNKNOWN_MODEL_TYPE,
                                 UNRESOLVED, Severity, make)
from memlint.facts import coverage
from memlint.ir import Partial, Provenance
from memlint.keys import dtype_name
from memlint.loaders import Document, load_yaml_mapping, read_text, suppressions
from memlint.records import field, record, replace

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

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
# Reading


@record
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


@record
class _Config:
    """The merged gpt-neox arguments of one run, the Partial they fill, and what every step
    shares: the fields whose type gpt-neox refuses (`bad`) and the defaults taken."""

    cfg: dict
    partial: Partial
    anchor: Provenance
    assumed: list = field(default_factory=list)
    bad: set = field(default_factory=set)

    def err(self, name: str, message: str, sub: tuple = ()) -> None:
        self.partial.diagnostics.append(make(INVALID_VALUE, Severity.ERROR, message,
                                             self.cfg[name].prov(sub), key=name))

    def get(self, name: str, default: Any = None) -> Any:
        item = self.cfg.get(name)
        return default if item is None or item.value is None else item.value

    def num(self, name: str, fallback: Any = None) -> Any:
        """A value whose type passed NeoXArgs.validate_types (else `fallback`)."""
        return fallback if name in self.bad else self.get(name, fallback)

    def where(self, name: str) -> Provenance:
        item = self.cfg.get(name)
        return item.prov() if item is not None else self.anchor

    def default(self, name: str) -> Any:
        value, source = DEFAULTS[name]
        if name not in self.cfg:
            self.assumed.append(f"{name} = {value} ({source})")
        return value

    def model(self, key: str, value: Any, name: Optional[str]) -> None:
        """A `model.<hf_key>` setting, where the gpt-neox field `name` gave it."""
        self.partial.set(f"model.{key}", value, self.where(name) if name and name in self.cfg
                         else Provenance(self.where("num_layers").file, None, None,
                                         f"{key} (gpt-neox default)"))


def _apply(cfg: dict, partial: Partial, anchor: Provenance) -> None:
    c = _Config(cfg, partial, anchor)
    _unknown_keys(c)
    _types(c)
    partial.set("framework", "deepspeed", Provenance(anchor.file, None, None, "<gpt-neox config>"))
    partial.set_extra("gpt_neox.config", anchor.file, anchor)
    _record_not_modeled(c)
    mp = _parallelism(c)
    _batch(c)
    _precision_keys(c)
    _recompute(c, mp)
    _zero(c)
    _optimizer(c)
    _model(c)
    if c.assumed:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, "gpt-neox defaults assumed (no file gives them): "
            + "; ".join(c.assumed), anchor, key="defaults", assumed=list(c.assumed)))


def _unknown_keys(c: _Config) -> None:
    """The dataclass refuses unknown keys; another gpt-neox version may not (a warning)."""
    known = known_keys()
    for name, item in c.cfg.items():
        if name not in known:
            c.partial.diagnostics.append(make(
                UNKNOWN_KEY, Severity.WARNING,
                f"{item.key} is not a NeoXArgs field at {SOURCE} (gpt-neox of that version stops "
                "with `unexpected keyword argument`); ignored", item.prov(), key=name))


def _record_not_modeled(c: _Config) -> None:
    """The set keys memlint/facts/coverage/gpt_neox.json says are not modeled, as
    `gpt_neox.<key>` facts for the not-modeled rule (ML107)."""
    for name in coverage.table("gpt_neox").not_modeled:
        item = c.cfg.get(name)
        if item is not None and item.value is not None:
            c.partial.set_extra(f"gpt_neox.{name}", item.value, item.prov())


def _types(c: _Config) -> None:
    """NeoXArgs.validate_types: exact types for the fields read here; a refused one is `bad`."""
    tuning = c.get("autotuning") is not None
    for name in INT_FIELDS + BOOL_FIELDS:
        item = c.cfg.get(name)
        if item is None or item.value is None or (tuning and item.value == "auto"):
            continue
        ok = _is_int(item.value) if name in INT_FIELDS else isinstance(item.value, bool)
        if not ok:
            c.bad.add(name)
            kind = "int" if name in INT_FIELDS else "bool"
            c.err(name, f"{item.key}: {item.value!r} is not of type {kind}; gpt-neox refuses it "
                        f"(NeoXArgs.validate_types: the value's type must be the field's, {kind})")
    for name, choices in CHOICES.items():
        value = c.get(name)
        if value is not None and not (isinstance(value, str) and value.lower() in choices):
            c.bad.add(name)
            c.err(name, f"{c.cfg[name].key}: {value!r} is not one of {', '.join(choices)} "
                        "(NeoXArgs.validate_types refuses it)")


def _parallelism(c: _Config) -> int:
    """tp (model_parallel_size), pp, sp and the world size; returns model_parallel_size."""
    mp = c.num("model_parallel_size") or c.default("model_parallel_size")
    mp = mp if mp >= 1 else 1
    pipe = c.num("pipe_parallel_size")
    pipe = c.default("pipe_parallel_size") if pipe is None else pipe
    if "model_parallel_size" in c.cfg and "model_parallel_size" not in c.bad:
        c.partial.set("tp", mp, c.where("model_parallel_size"))
    c.partial.set("pp", max(pipe, 1), c.where("pipe_parallel_size"))
    if c.get("sequence_parallel") is True and "sequence_parallel" not in c.bad:
        c.partial.set("sp", mp > 1, c.where("sequence_parallel"))
    gpus, nodes = c.num("num_gpus"), c.num("num_nodes")
    if c.num("global_num_gpus"):
        c.partial.set("world_size", c.num("global_num_gpus"), c.where("global_num_gpus"))
    elif gpus and nodes and gpus > 0 and nodes > 0:
        c.partial.set("world_size", gpus * nodes, c.where("num_gpus"))
        c.partial.set("gpus_per_node", gpus, c.where("num_gpus"))
    return mp


def _batch(c: _Config) -> None:
    for name, key in (("train_micro_batch_size_per_gpu", "micro_batch"),
                      ("gradient_accumulation_steps", "grad_accum"),
                      ("train_batch_size", "global_batch")):
        value = c.num(name)
        if _is_int(value) and value > 0:
            c.partial.set(key, value, c.where(name))
    if c.num("seq_length") is not None:
        c.partial.set("seq_len", c.num("seq_length"), c.where("seq_length"))
    keep = c.get("keep_last_n_checkpoints")
    if _is_int(keep) and keep > 0:   # megatron/checkpointing.py deletes older checkpoints
        c.partial.set("checkpoint_keep", keep, c.where("keep_last_n_checkpoints"))


def _precision_keys(c: _Config) -> None:
    """precision and the flags of the enabled block (arguments.py calculate_derived)."""
    cfg = c.cfg
    precision = _precision(c)
    if precision is None:
        precision = c.default("precision")
    c.partial.set("precision", dtype_name(precision),   # one of CHOICES["precision"]
                  c.where("precision") if "precision" in cfg else (
                      cfg["fp16"].prov(("enabled",)) if precision == "fp16" and "fp16" in cfg
                      else cfg["bf16"].prov(("enabled",)) if precision == "bfloat16"
                      and "bf16" in cfg else c.anchor))
    if precision == "fp16":
        c.partial.set_extra("flags.fp16", True, c.where("fp16"))
    elif precision == "bfloat16":
        c.partial.set_extra("flags.bf16", True, c.where("bf16") if "bf16" in cfg else c.where(
            "precision"))


def _recompute(c: _Config, mp: int) -> None:
    if c.get("checkpoint_activations") is True:
        c.partial.set("recompute", "full", c.where("checkpoint_activations"))
        every = c.num("checkpoint_num_layers")
        if _is_int(every) and every > 1:
            c.partial.set_extra("gpt_neox.checkpoint_num_layers", every,
                                c.where("checkpoint_num_layers"))
    elif "checkpoint_activations" in c.cfg:
        c.partial.set("recompute", "none", c.where("checkpoint_activations"))
    if c.get("partition_activations") is True and mp > 1:
        c.partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            "partition_activations splits each checkpointed layer input across the "
            f"{mp} model-parallel ranks; memlint counts it unsplit (an over-estimate)",
            c.where("partition_activations"), key="partition_activations"))


def _zero(c: _Config) -> None:
    """The DeepSpeed block, read by the DeepSpeed adapter; gpt-neox's own refusals."""
    zero = c.get("zero_optimization")
    if not isinstance(zero, dict):
        if "zero_optimization" not in c.cfg:
            c.partial.set("zero", c.default("zero_stage"), c.anchor)
        return
    if "stage" not in zero:
        c.err("zero_optimization", "zero_optimization has no `stage`: gpt-neox reads "
              "zero_optimization[\"stage\"] and stops with a KeyError (arguments.py "
              "calculate_derived)")
    else:
        view = _View({"zero_optimization": c.cfg["zero_optimization"]})
        deepspeed.map_zero_block(view, c.partial)
        c.partial.diagnostics.extend(_zero_schema(view))
    stage = zero.get("stage")
    experts = c.get("moe_num_experts")
    if _is_int(experts) and experts > 1 and _is_int(stage) and stage >= 2:
        c.err("zero_optimization", "MoE (moe_num_experts > 1) with ZeRO stage "
              f"{stage}: gpt-neox refuses it ('MoE is not compatible with zero stages 2 and "
              "3', arguments.py calculate_derived)", ("stage",))


def _zero_schema(view) -> list:
    """DeepSpeed validates the block with pydantic (extra keys forbidden) since v0.7; the
    DeeperSpeed of an older gpt-neox ignored what it did not know: warnings."""
    out = []
    for found in deepspeed.schema_diagnostics(view):
        message = found.message
        if "drop the quotes" in message:   # YAML, not JSON: PyYAML reads 1e6 as text
            message = message[:message.index(" (DeepSpeed's pydantic model reads")] + (
                " (PyYAML, which gpt-neox reads its configs with, takes an exponent "
                "without a dot as text: write the digits)")
        out.append(replace(
            found, severity=min(found.severity, Severity.WARNING),
            message=message + "; a warning only: the dict-based DeepSpeed of older "
            "gpt-neox versions ignored it"))
    return out


def _precision(c: _Config) -> Optional[str]:
    """gpt-neox's precision, or None when nothing sets it (arguments.py calculate_derived)."""
    precision = None if "precision" in c.bad else c.get("precision")
    precision = precision.lower() if isinstance(precision, str) else None
    for block, name in (("fp16", "fp16"), ("bf16", "bfloat16")):
        node = c.get(block)
        if isinstance(node, dict) and node.get("enabled", False):
            if precision is None:
                precision = name
            elif precision != name:
                c.err(block, f"{block}.enabled is true but precision is "
                             f"{c.get('precision')!r}: gpt-neox stops ('DeepSpeed {block} field "
                             "was set but precision conflicts', arguments.py calculate_derived)",
                      ("enabled",))
    for block in ("fp16", "amp", "flops_profiler"):
        node = c.get(block)
        if isinstance(node, dict) and "enabled" not in node and not (
                block == "fp16" and precision == "fp16"):
            c.err(block, f"{block} has no `enabled` key: gpt-neox refuses the config "
                         f"(NeoXArgs.validate_types: '{block}: must contain key enabled')")
    return precision


def _optimizer(c: _Config) -> None:
    cfg, partial = c.cfg, c.partial
    node = cfg["optimizer"].value if "optimizer" in cfg else None
    if node is None:
        kind = c.default("optimizer")
        where = c.anchor
    elif not isinstance(node, dict) or not isinstance(node.get("type"), str) \
            or not isinstance(node.get("params"), dict):
        c.err("optimizer", "optimizer must be a mapping with a string `type` and a `params` "
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


def _vocab(c: _Config) -> tuple:
    """(tokenizer size before padding, how it is known)."""
    kind = str(c.get("tokenizer_type", DEFAULTS["tokenizer_type"][0]))
    vocab_file = os.path.basename(str(c.get("vocab_file") or "")).lower()
    known = VOCAB_BY_TYPE.get(kind.lower())
    if known:
        size, why = known
        if "tokenizer_type" not in c.cfg:
            c.assumed.append(f"tokenizer_type = GPT2BPETokenizer "
                             f"({DEFAULTS['tokenizer_type'][1]})")
        return size, why
    if "20b_tokenizer" in vocab_file:
        return NEOX_20B_VOCAB, "the GPT-NeoX-20B tokenizer (20B_tokenizer.json)"
    if kind.lower() == "hftokenizer":
        c.assumed.append(f"tokenizer vocabulary = {NEOX_20B_VOCAB} tokens (HFTokenizer without a "
                         "vocab_file naming another: the GPT-NeoX-20B tokenizer its configs use)")
        return NEOX_20B_VOCAB, "assumed GPT-NeoX-20B tokenizer"
    if kind.lower() == "spmtokenizer":
        c.assumed.append(f"tokenizer vocabulary = {LLAMA_SPM_VOCAB} tokens (SPMTokenizer: the "
                         "LLaMA / Llama 2 tokenizer.model its configs use)")
        return LLAMA_SPM_VOCAB, "assumed LLaMA SentencePiece tokenizer"
    c.assumed.append(f"tokenizer vocabulary = {GPT2_VOCAB} tokens ({kind}: size not known "
                     "without its vocab file; the GPT-2 BPE size assumed)")
    return GPT2_VOCAB, "assumed GPT-2 BPE size"


def _model(c: _Config) -> None:
    """The architecture as `model.<hf_key>` settings, after gpt-neox's own checks of it."""
    layers, hidden, heads = c.num("num_layers"), c.num("hidden_size"), c.num("num_attention_heads")
    types = _attention_types(c.get("attention_config"))
    _model_checks(c, types)
    _attention_kind(c, types, layers)
    if not (_is_int(layers) and _is_int(hidden) and _is_int(heads) and layers > 0
            and hidden > 0 and heads > 0):
        return   # a file without the model (data paths, cluster setup): nothing to count
    kv, positions = c.num("num_kv_heads"), c.num("max_position_embeddings")
    c.model("model_type", "megatron_gpt", "num_layers")
    c.model("num_hidden_layers", layers, "num_layers")
    c.model("hidden_size", hidden, "hidden_size")
    c.model("num_attention_heads", heads, "num_attention_heads")
    c.model("num_key_value_heads", kv if _is_int(kv) and kv > 0 else heads,
            "num_kv_heads" if _is_int(kv) else "num_attention_heads")
    if _is_int(positions):
        c.model("max_position_embeddings", positions, "max_position_embeddings")
    pos = str(c.get("pos_emb") or c.default("pos_emb")).lower()
    learned = pos == "learned" and _is_int(positions)
    c.model("learned_positions", positions if learned else 0, "pos_emb")
    gated = _mlp(c, hidden)
    _norms_and_biases(c)
    _vocab_keys(c)
    _experts(c, hidden, gated)


def _model_checks(c: _Config, types: set) -> None:
    """What validate_values and calculate_derived refuse in the model's shape."""
    hidden, heads = c.num("hidden_size"), c.num("num_attention_heads")
    if _is_int(hidden) and _is_int(heads) and heads > 0 and hidden % heads \
            and "mamba" not in types:
        c.err("hidden_size", f"hidden_size {hidden} is not divisible by num_attention_heads "
              f"{heads}: gpt-neox refuses it (validate_values)")
    seq, positions = c.num("seq_length"), c.num("max_position_embeddings")
    if _is_int(seq) and _is_int(positions) and positions < seq:
        c.err("max_position_embeddings", f"max_position_embeddings {positions} < seq_length "
              f"{seq}: gpt-neox refuses it (validate_values: 'max_position_embeddings must be "
              "bigger or equal seq_length')")
    kv = c.num("num_kv_heads")
    if _is_int(kv) and kv > 0 and _is_int(heads) and heads % kv:
        c.err("num_kv_heads", f"num_kv_heads {kv} does not divide num_attention_heads {heads}: "
              "gpt-neox refuses it (calculate_derived)")


def _attention_kind(c: _Config, types: set, layers) -> None:
    """attention (flash or eager) from attention_config; the layer types memlint does not
    count apart."""
    unknown_types = sorted(t for t in types if t not in ATTENTION_TYPES)
    if unknown_types:
        # refused at SOURCE (calculate_derived asserts each is in ATTENTION_TYPE_CHOICES), but
        # branches and later versions add types (e.g. ring attention): a warning
        c.partial.diagnostics.append(make(
            UNKNOWN_KEY, Severity.WARNING, f"attention type(s) {', '.join(unknown_types)} are "
            f"not among gpt-neox's choices at {SOURCE}; counted as standard attention",
            c.where("attention_config"), key="attention_config"))
    if types:
        flash = types <= {"flash"}
        c.partial.set("attention", "flash" if flash else "eager", c.where("attention_config"))
        other = sorted(types & {"gmlp", "amlp", "rwkv", "mamba"})
        if other:
            # never counted as transformer layers: no estimate (issue 26)
            why = f"a gpt-neox model with {', '.join(other)} layers (attention_config)"
            c.partial.set_extra("gpt_neox.unsupported-architecture", why,
                                c.where("attention_config"))
            c.partial.diagnostics.append(make(
                UNKNOWN_MODEL_TYPE, Severity.WARNING, f"no estimate for this architecture: {why} "
                "is not counted by memlint's memory model; memory checks are skipped (the "
                "other checks still run)", c.where("attention_config"), key="attention_config"))
    elif layers is not None:
        c.partial.set("attention", "eager", c.where("attention_config") if "attention_config"
                      in c.cfg else Provenance(c.where("num_layers").file, None, None,
                                               "attention_config (default global)"))


def _mlp(c: _Config, hidden: int) -> bool:
    """The MLP's activation and width; returns whether it is gated."""
    activation = str(c.get("activation") or c.default("activation")).lower()
    llama_mlp = str(c.get("mlp_type") or "").lower() == "llama"
    gated = activation in GATED or llama_mlp
    c.model("hidden_act", activation, "activation")
    c.model("gated_mlp", gated, "mlp_type" if llama_mlp else "activation")
    if llama_mlp:
        # `mlp_type: llama` (gpt-neox before 0d4bdb96, which removed the key): LLaMAParallelMLP,
        # w1/w3/w2 without biases, width intermediate_size or 8h/3 rounded up to 256
        size = c.num("intermediate_size")
        ffn = size if _is_int(size) and size > 0 else 256 * -(-(8 * hidden // 3) // 256)
    else:
        ffn = _ffn(c.cfg, c.num, hidden, gated)
    c.model("intermediate_size", ffn, "intermediate_size" if "intermediate_size" in c.cfg
            else "expansion_factor" if "expansion_factor" in c.cfg else None)
    return gated


def _norms_and_biases(c: _Config) -> None:
    llama_mlp = str(c.get("mlp_type") or "").lower() == "llama"
    norm = str(c.get("norm") or c.default("norm")).lower()
    c.model("norm", "layernorm" if norm in ("layernorm", "te_layernorm") else "rmsnorm", "norm")
    if norm in ("scalenorm", "non_parametric_layernorm"):
        c.partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, f"norm {norm} has (almost) no parameters; counted as "
            "RMSNorm (hidden_size weights per norm)", c.where("norm"), key="norm"))
    attn_bias = c.get("use_bias_in_attn_linear",
                      c.default("use_bias_in_attn_linear")) is not False
    mlp_bias = c.get("use_bias_in_mlp", c.default("use_bias_in_mlp")) is not False \
        and not llama_mlp
    c.model("attention_bias", attn_bias, "use_bias_in_attn_linear")
    c.model("output_bias", attn_bias, "use_bias_in_attn_linear")
    c.model("mlp_bias", mlp_bias, "use_bias_in_mlp")
    tied = c.get("no_weight_tying", c.default("no_weight_tying")) is not True
    c.model("tie_word_embeddings", tied, "no_weight_tying")


def _vocab_keys(c: _Config) -> None:
    """The raw vocabulary and gpt-neox's multiple; the memory model pads it with the run's tp
    (memlint/facts/vocab.py: multiple × model_parallel_size)."""
    size, why = _vocab(c)
    divisor = c.num("make_vocab_size_divisible_by") or c.default("make_vocab_size_divisible_by")
    tokenizer = c.where("tokenizer_type")
    c.partial.set("model.vocab_size", size, Provenance(
        tokenizer.file, tokenizer.line, tokenizer.column,
        f"vocab_size {size} ({why}), before padding"))
    pad = c.where("make_vocab_size_divisible_by")
    c.partial.set("model.vocab_pad_multiple", max(divisor, 1), Provenance(
        pad.file, pad.line, pad.column,
        f"make_vocab_size_divisible_by {divisor} (padded to a multiple of {divisor} × "
        "model_parallel_size, tokenizer.py _vocab_size_with_padding)"))


def _experts(c: _Config, hidden: int, gated: bool) -> None:
    """megatron/model/moe.py, moe_mlp.py: on every moe_expert_interval-th layer, experts of
    w1/w2 (w3 too when gated) without biases, each intermediate_size wide, else 4h (8h/3 when
    gated) rounded up to 256; split over the model-parallel ranks (counted like experts sharded
    over tp)."""
    experts = c.num("moe_num_experts")
    if not (_is_int(experts) and experts > 1):
        return
    size = c.num("intermediate_size")
    width = size if _is_int(size) and size > 0 else (8 * hidden // 3 if gated else 4 * hidden)
    if not (_is_int(size) and size > 0):
        width = 256 * -(-width // 256)
    interval = c.num("moe_expert_interval")
    c.model("num_local_experts", experts, "moe_num_experts")
    top_k = c.num("moe_top_k")
    c.model("num_experts_per_tok", top_k if _is_int(top_k) and top_k > 0 else 1, "moe_top_k")
    c.model("moe_intermediate_size", width, "intermediate_size")
    c.model("moe_layer_freq", interval if _is_int(interval) and interval > 0 else 1,
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
        # start-up: fractions (and decimal) load only for a config with an expansion_factor
        from fractions import Fraction

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
