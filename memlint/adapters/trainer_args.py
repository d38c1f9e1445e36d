"""Hugging Face `TrainingArguments` and TRL config fields onto scenario keys, with the trainers'
own defaults: `apply(items, ...)` for the arguments of one run, whoever wrote them down.

`memlint.adapters.hf_trainer` (launch scripts, YAML recipes, JSON argument files) and
`memlint.adapters.llamafactory` (LLaMA-Factory YAML, whose HF arguments sit beside its own) read
their files into `Item`s and hand them here. What a verdict rests on that no file gave is
reported in one info diagnostic with the trainer's default and its source (see `DEFAULTS`).
A `deepspeed` file the arguments name is read with the run (`Partial.references`), and its
explicit batch and precision values are compared with the Trainer's as transformers does at
start-up (`check_deepspeed`).
"""
from __future__ import annotations

import os

from memlint import lazy_re, verdicts
from memlint.adapters._lora import target_kind
from memlint.adapters._values import to_bool, to_int
from memlint.adapters.registry import _resolve_reference
from memlint.diagnostics import CONFLICT, INVALID_VALUE, UNRESOLVED, Severity, make
from memlint.facts import coverage
from memlint.ir import Partial, Provenance
from memlint.loaders import inside, load_json, read_text, repo_root
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

# Commit of the trainers' sources the defaults below were read at.
TRANSFORMERS_SOURCE = "huggingface/transformers src/transformers/training_args.py"
TRL_SOURCE = "huggingface/trl@f2cd5771 trl/trainer"


@record(frozen=True)
class Item:
    """One argument as written: its name (underscored, no dashes), value, position."""

    name: str
    value: Any
    prov: Provenance
    unresolved: tuple = ()


# -- values ---------------------------------------------------------------------------------

# -- the argument table ----------------------------------------------------------------------

# Integers: argument name -> scenario key. Several spellings of the sequence length are in use:
# TRL's max_length (max_seq_length before TRL 0.20), model_max_length (FastChat / Alpaca-style
# scripts), block_size (transformers' run_clm.py), LLaMA-Factory's cutoff_len.
INTS = {
    "per_device_train_batch_size": "micro_batch", "per_gpu_train_batch_size": "micro_batch",
    "gradient_accumulation_steps": "grad_accum",
}
SEQ_LEN_NAMES = ("cutoff_len", "max_seq_length", "max_length", "model_max_length", "max_seq_len",
                 "seq_length", "block_size", "max_len")
MODEL_NAMES = ("model_name_or_path", "model_name", "model_id", "pretrained_model_name_or_path",
               "model_path", "base_model")
DTYPE_NAMES = ("torch_dtype", "dtype", "model_dtype")
# Not keys.dtype_name: it gives the same on these eight, but also takes memlint's own "fp8",
# which no torch_dtype is (the model loaders getattr(torch, name) or check a choice list)
_DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "half": "fp16",
           "float32": "fp32", "fp32": "fp32", "float": "fp32"}

# optim (transformers OptimizerNames) -> (optimizer, optimizer_impl, 8-bit states)
OPTIMIZERS = {
    "adamw_torch": ("adamw", None, False), "adamw_torch_fused": ("adamw", "fused", False),
    "adamw_hf": ("adamw", "for-loop", False), "adamw_apex_fused": ("adamw", "fused", False),
    "adamw_torch_xla": ("adamw", None, False), "adamw_torch_npu_fused": ("adamw", "fused", False),
    "adamw_anyprecision": ("adamw", None, False), "paged_adamw_32bit": ("adamw", None, False),
    "paged_adamw": ("adamw", None, False), "adamw": ("adamw", None, False),
    "adamw_bnb_8bit": ("adamw", None, True), "adamw_8bit": ("adamw", None, True),
    "paged_adamw_8bit": ("adamw", None, True), "adam8bit": ("adam", None, True),
    "adafactor": ("adafactor", None, False), "sgd": ("sgd", None, False),
    "muon": ("muon", None, False),
}
_ATTENTION = {"flash_attention_2": "flash", "flash_attention_3": "flash", "fa2": "flash",
              "fa3": "flash", "flash_attn": "flash", "sdpa": "sdpa", "eager": "eager",
              "disabled": "eager", "kernels-community/vllm-flash-attn3": "flash"}
_FSDP_WORDS = {"full_shard": ("full", True), "shard_grad_op": ("shard_grad_op", False),
               "hybrid_shard": ("hybrid", True), "hybrid_shard_zero2": ("hybrid", False),
               "no_shard": ("none", True)}

# Scripts known to be TRL's own (`trl/scripts/*.py`, alignment-handbook's `scripts/*.py`, which
# parse TRL's configs): TRL's defaults apply to them.
_TRL_SCRIPTS = lazy_re.compile(
    r"(^|/)(trl/|alignment-handbook|scripts/(run_)?(sft|dpo|orpo|kto|grpo|"
    r"reward_modeling|cpt|gkd|ppo|rloo)\.py$|(sft|dpo|grpo|orpo|kto)_?"
    r"(trainer|train)?\.py$)")
# Arguments only TRL's configs have: their presence means TRL parses the command line.
_TRL_ONLY = ("use_peft", "packing", "dataset_text_field", "completion_only_loss", "beta",
             "loss_type", "max_prompt_length", "num_generations", "lora_target_modules",
             "assistant_only_loss", "padding_free", "dataset_name", "dataset_num_proc")


def trainer_of(items: list, script: str = "") -> str:
    """'trl' when the arguments are parsed by TRL's configs, else 'hf' (plain TrainingArguments)."""
    if script and _TRL_SCRIPTS.search(script.replace(os.sep, "/")):
        return "trl"
    names = {item.name for item in items}
    return "trl" if names & set(_TRL_ONLY) else "hf"


# The trainers' defaults for what decides memory (read at the commits named in the sources).
DEFAULTS = {
    "hf": {
        "precision": ("fp32", f"{TRANSFORMERS_SOURCE}: bf16 and fp16 default to False (fp32 "
                              "training)"),
        "recompute": ("none", f"{TRANSFORMERS_SOURCE}: gradient_checkpointing defaults to False"),
        "optim": ("adamw_torch_fused", f"{TRANSFORMERS_SOURCE}: default_optim is "
                  "adamw_torch_fused with torch >= 2.8, adamw_torch (foreach) before"),
        "dtype": ("fp32", "from_pretrained without torch_dtype loads fp32 weights "
                  "(transformers < 5; transformers 5 loads the checkpoint's dtype)"),
        "micro_batch": (8, f"{TRANSFORMERS_SOURCE}: per_device_train_batch_size defaults to 8"),
    },
    "trl": {
        "precision": ("bf16", f"{TRL_SOURCE}/base_config.py: bf16 defaults to True unless fp16"),
        "recompute": ("full", f"{TRL_SOURCE}/base_config.py: gradient_checkpointing defaults to "
                              "True"),
        "optim": ("adamw_torch_fused", f"{TRANSFORMERS_SOURCE}: default_optim is "
                  "adamw_torch_fused with torch >= 2.8, adamw_torch (foreach) before"),
        "dtype": ("fp32", f"{TRL_SOURCE}/model_config.py: ModelConfig.dtype defaults to "
                  "'float32'"),
        "micro_batch": (8, f"{TRANSFORMERS_SOURCE}: per_device_train_batch_size defaults to 8"),
        "seq_len": (1024, f"{TRL_SOURCE}/sft_config.py: max_length defaults to 1024"),
        "lora_rank": (16, f"{TRL_SOURCE}/model_config.py: lora_r defaults to 16"),
    },
}


@record
class _Run:
    """What each step of `apply` reads and writes: the arguments by name, the Partial, the
    trainer's defaults, where a default is reported, and the defaults taken so far."""

    args: dict
    partial: Partial
    table: dict
    anchor: Provenance
    assumed: list
    trainer: str

    def resolved(self, item: Item, no_estimate: Optional[str] = None) -> bool:
        """False (and said, as info) for a value the script computes when it runs; a value the
        estimate cannot go without names `no_estimate`, the summary line's reason."""
        if item.unresolved:
            data = {"no_estimate": no_estimate} if no_estimate else {}
            self.partial.diagnostics.append(make(
                UNRESOLVED, Severity.INFO,
                f"--{item.name}: {', '.join(item.unresolved)}; its value is not known statically",
                item.prov, key=item.name, **data))
            return False
        return True

    def bad(self, item: Item, what: str) -> None:
        self.partial.diagnostics.append(make(INVALID_VALUE, Severity.WARNING,
                                             f"{item.name}: expected {what}, got {item.value!r}",
                                             item.prov, key=item.name))

    def take_default(self, key: str) -> None:
        """The trainer's default for a scenario key, set at the anchor and reported."""
        value, source = self.table[key]
        self.partial.set(key, value, self.anchor)
        self.assumed.append(f"{key} = {value} ({source})")

    def first(self, names) -> Optional[Item]:
        return next((self.args[n] for n in names if n in self.args), None)


def apply(items: list, partial: Partial, trainer: str, anchor: Provenance,
          defaults: Optional[dict] = None, loaded_dtype: Optional[str] = None,
          lora: Optional[bool] = None, assumed: Optional[list] = None,
          script: str = "") -> dict:
    """Map Trainer/TRL arguments onto scenario keys. Returns the arguments by name (the last of
    a repeated one wins, as argparse does). `defaults` replaces the trainer's DEFAULTS entries
    (LLaMA-Factory's own); `loaded_dtype`/`lora` are what the caller already decided, and
    `assumed` the defaults it already took (reported together with these); `script` the
    training script that parses them."""
    table = dict(DEFAULTS.get(trainer, DEFAULTS["hf"]))
    table.update(defaults or {})
    run = _Run({item.name: item for item in items}, partial, table, anchor, list(assumed or []),
               trainer)
    _batch(run)
    _checkpoints(run.args, partial, run.resolved)
    _seq_len(run)
    model = run.first(MODEL_NAMES)
    if model is not None and run.resolved(model, verdicts.RUNTIME_VALUE) \
            and str(model.value or "").strip():
        _model(str(model.value).strip(), model.prov, partial)
    flags = _precision_flags(run)
    default_load = loaded_dtype is None and run.first(DTYPE_NAMES) is None
    if loaded_dtype is None:
        loaded_dtype = _loaded_dtype(run)
    if lora is None:
        lora = _lora(run.args, partial, table, run.assumed, run.resolved, trainer)
    if not _deepspeed_precision(run, flags):
        _precision(flags, loaded_dtype, lora, partial, table, anchor, run.assumed)
        if default_load and trainer == "hf" and "precision" in partial.settings:
            _record_default_load(partial, flags, loaded_dtype, anchor)
    _recompute(run)
    _optimizer(run.args, partial, table, anchor, run.assumed, run.resolved)
    _attention(run)
    _fsdp(run.args, partial)
    _deepspeed_reference(run)
    if "framework" not in partial.settings and "hf_trainer.launcher_config" not in partial.extra:
        # (an accelerate config file given to the launcher decides DeepSpeed / FSDP itself)
        partial.set("framework", "hf", anchor)
    for name in ("packing", "use_liger_kernel", "enable_liger_kernel", "neat_packing"):
        item = run.args.get(name)
        if item is not None and not item.unresolved and to_bool(item.value) is not None:
            partial.set_extra(f"hf_trainer.{name}", to_bool(item.value), item.prov)
    _liger_loss(run.args, partial, trainer)
    _record_not_modeled(run)
    if trainer == "trl":
        # start-up: the RL / preference reader loads only for TRL arguments
        from memlint.adapters import trl_rl

        trl_rl.apply(run.args, partial, anchor, partial.source, script, run.assumed)
    _report_defaults(run)
    return run.args


def _record_not_modeled(run: _Run) -> None:
    """The set arguments memlint/facts/coverage/hf_trainer.json says are not modeled, as
    `hf_trainer.<name>` facts for the not-modeled rule (ML107)."""
    for name in coverage.table("hf_trainer").not_modeled:
        item = run.args.get(name)
        if item is not None and not item.unresolved:
            run.partial.set_extra(f"hf_trainer.{name}", item.value, item.prov)


def _batch(run: _Run) -> None:
    for name, key in INTS.items():
        item = run.args.get(name)
        if item is not None and run.resolved(item):
            number = to_int(item.value)
            if number is None or number < 1:
                run.bad(item, "a positive whole number")
            else:
                run.partial.set(key, number, item.prov)
    if "micro_batch" not in run.partial.settings and "micro_batch" in run.table:
        run.take_default("micro_batch")


def _seq_len(run: _Run) -> None:
    seq = run.first(SEQ_LEN_NAMES)
    if seq is not None and run.resolved(seq):
        number = to_int(seq.value)
        if number is None or number < 1:
            if str(seq.value).strip().lower() not in ("none", "null"):
                run.bad(seq, "a positive whole number")
        else:
            run.partial.set("seq_len", number, seq.prov)
    elif seq is None and "seq_len" in run.table:
        run.take_default("seq_len")


def _precision_flags(run: _Run) -> dict:
    """bf16 / fp16 / pure_bf16 as given: name -> (truth, prov). Both bf16 and fp16: the Trainer
    refuses it (ML303 reports it)."""
    flags = {}
    for name in ("bf16", "fp16", "pure_bf16"):
        item = run.args.get(name)
        if item is not None and run.resolved(item):
            truth = to_bool(item.value)
            if truth is None:
                run.bad(item, "true or false")
            else:
                flags[name] = (truth, item.prov)
    for name in ("bf16", "fp16"):
        if flags.get(name, (False,))[0]:
            run.partial.set_extra(f"flags.{name}", True, flags[name][1])
    return flags


def _loaded_dtype(run: _Run) -> str:
    """The dtype the weights are loaded in (torch_dtype), else the trainer's default."""
    dtype_item = next((run.args[n] for n in DTYPE_NAMES
                       if n in run.args and run.args[n].value not in (None, "None", "null")),
                      None)
    if dtype_item is not None and run.resolved(dtype_item):
        loaded = _DTYPES.get(str(dtype_item.value).strip().lower())
        if loaded is None and str(dtype_item.value).strip().lower() != "auto":
            run.bad(dtype_item, "bfloat16, float16, float32 or auto")
        elif loaded is None:
            run.assumed.append("torch_dtype auto: the checkpoint's dtype, taken as bf16")
            loaded = "bf16"
        return loaded
    loaded, source = run.table["dtype"]
    if "deepspeed" not in run.args:  # DeepSpeed casts the weights itself
        run.assumed.append(f"weights loaded as {loaded} ({source})")
    return loaded


# Partial.extra key: the weights' dtype was from_pretrained's default (no torch_dtype argument),
# with the precision the reader derived from it. A model whose remote code casts itself (Qwen v1)
# loads in its own dtype instead; scenario.py reads that from the model's config.json.
DEFAULT_LOAD_DTYPE = "hf_trainer.default_load_dtype"


def _record_default_load(partial: Partial, flags: dict, loaded: str, anchor: Provenance) -> None:
    on = next((name for name, (truth, _prov) in flags.items()
               if truth and name in ("bf16", "fp16")), None)
    precision = partial.settings["precision"]
    partial.set_extra(DEFAULT_LOAD_DTYPE, {"dtype": loaded, "flag": on,
                                           "precision": precision.value,
                                           "precision_prov": precision.prov}, anchor)


def _deepspeed_precision(run: _Run, flags: dict) -> bool:
    """Under --deepspeed, DeepSpeed casts the module to its bf16/fp16 and keeps fp32 master
    weights itself, whatever dtype the weights were loaded in. False without --deepspeed."""
    deepspeed = run.args.get("deepspeed")
    if deepspeed is not None and deepspeed.unresolved:
        # DeepSpeed runs even when memlint cannot see which file: its dtype rules apply
        run.partial.set("framework", "deepspeed", deepspeed.prov)
    if deepspeed is None or not str(deepspeed.value or "").strip():
        return False
    on = next(((n, p) for n, (t, p) in flags.items() if t and n in ("bf16", "fp16")), None)
    if on is None and not any(n in flags for n in ("bf16", "fp16")):
        value, source = run.table["precision"]
        if value in ("bf16", "fp16"):
            on = (value, run.anchor)
            run.assumed.append(f"precision {value} ({source})")
    if on is not None:
        run.partial.set("precision", on[0], on[1])
    return True


def _recompute(run: _Run) -> None:
    """gradient_checkpointing, else the trainer's default."""
    item = run.args.get("gradient_checkpointing")
    truth = to_bool(item.value) if item is not None and run.resolved(item) else None
    if item is not None and truth is None and not item.unresolved:
        run.bad(item, "true or false")
    if truth is None and item is None:
        value, source = run.table["recompute"]
        truth = value == "full"
        run.assumed.append(f"gradient checkpointing {'on' if truth else 'off'} ({source})")
        item = Item("gradient_checkpointing", truth, run.anchor)
    if truth:
        run.partial.set("recompute", "full", item.prov)
        # transformers' checkpoint wraps each decoder layer's call (FSDP hooks included)
        run.partial.set_extra("recompute.scope", "outside-unit", item.prov)
    elif truth is False:
        run.partial.set("recompute", "none", item.prov)


def _attention(run: _Run) -> None:
    attn = run.first(("attn_implementation", "flash_attn", "attention"))
    if attn is not None and run.resolved(attn):
        kind = _ATTENTION.get(str(attn.value).strip().lower())
        if kind is not None:
            run.partial.set("attention", kind, attn.prov)
    for name in ("use_flash_attn", "use_flash_attention_2", "flash_attention"):
        item = run.args.get(name)
        if item is not None and not item.unresolved and to_bool(item.value):
            run.partial.set("attention", "flash", item.prov)


def _deepspeed_reference(run: _Run) -> None:
    """--deepspeed FILE: the run's DeepSpeed config, read as a file of the same run."""
    deepspeed = run.args.get("deepspeed")
    if deepspeed is None or not run.resolved(deepspeed) or not str(deepspeed.value or "").strip():
        return
    text = str(deepspeed.value).strip()
    if text.startswith("{"):
        run.partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, "--deepspeed is an inline JSON string; its ZeRO "
            "settings are not read (give the config as a file)", deepspeed.prov,
            key="deepspeed"))
        return
    run.partial.references.append((text, deepspeed.prov))
    run.partial.set("framework", "deepspeed", deepspeed.prov)
    run.partial.set_extra("hf_trainer.deepspeed", text, deepspeed.prov)


_TRAINER_NAMES = {"trl": "TRL", "llamafactory": "LLaMA-Factory"}


def _report_defaults(run: _Run) -> None:
    if run.assumed:
        run.partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            f"{_TRAINER_NAMES.get(run.trainer, 'HF Trainer')} defaults assumed (no file gives "
            "them): " + "; ".join(run.assumed), run.anchor, key="defaults",
            assumed=list(run.assumed)))


# Arguments of preference / RL trainers (TRL DPOConfig, ORPOConfig, KTOConfig, GRPOConfig;
# open-instruct's dpo_tune): these trainers compute the log-probabilities from the logits
# themselves (model called without labels), so a fused loss kernel does not spare the logits.
_PREFERENCE_ARGS = ("beta", "max_prompt_length", "num_generations", "max_completion_length",
                    "dpo_beta", "pref_beta", "reward_funcs")


def _liger_loss(args: dict, partial: Partial, trainer: str) -> None:
    """Liger's fused linear cross entropy computes the loss chunk by chunk from the hidden states
    and never materializes the logits (liger_kernel/ops/fused_linear_cross_entropy.py: chunks of
    next_power_of_2(BT / ceil(V / H)) tokens, the gradients of the input and the LM head
    accumulated in place): the logits term is dropped (`logits.enabled`, as axolotl's Liger /
    Cut-Cross-Entropy plugins do). Who turns it on: transformers Trainer `use_liger_kernel`
    (`_apply_liger_kernel_to_instance`, fused_linear_cross_entropy on by default), TRL's
    `use_liger` (SFTConfig before TRL 0.16, AutoLigerKernelForCausalLM), LLaMA-Factory's
    `enable_liger_kernel` for the pt and sft stages only (model_utils/liger_kernel.py:
    `require_logits` turns it off for the others). The loss only runs fused when the model is
    called with labels: a preference or RL trainer (`_PREFERENCE_ARGS`) keeps its logits."""
    item = next((args[n] for n in ("use_liger_kernel", "use_liger", "enable_liger_kernel")
                 if n in args and not args[n].unresolved and to_bool(args[n].value)), None)
    if item is None or any(name in args for name in _PREFERENCE_ARGS):
        return
    if trainer == "llamafactory":
        stage = args.get("stage")
        if str(stage.value if stage is not None else "sft").strip().lower() not in ("pt", "sft"):
            return
    partial.set("logits.enabled", False, item.prov)
    partial.set_extra("loss.fused", "liger-flce", item.prov)


def _checkpoints(args: dict, partial: Partial, resolved) -> None:
    """Checkpoint saving (memory/checkpoint.py): every save_steps steps when save_strategy is
    "steps" (the default), the latest save_total_limit kept, max_steps steps (transformers
    TrainingArguments). Ratios (save_steps < 1), epochs and -1 say nothing countable: no key."""
    strategy = args.get("save_strategy")
    if strategy is not None and str(strategy.value).strip().lower() != "steps":
        return
    for name, key in (("save_steps", "checkpoint_interval"), ("max_steps", "train_steps"),
                      ("save_total_limit", "checkpoint_keep")):
        item = args.get(name)
        if item is None or not resolved(item):
            continue
        number = to_int(item.value)
        if number is not None and number >= 1:
            partial.set(key, number, item.prov)


def _model(name: str, prov: Provenance, partial: Partial) -> None:
    """A Hub id, or a local checkpoint folder: a folder that is not on this machine (a path on
    the cluster the script was written for, or a placeholder such as Chinese-LLaMA-Alpaca-2's
    `path/to/hf/llama-2/...`) is not an error, only a model memlint cannot see.
    `from_pretrained` takes any name that is not a Hub id (`org/name`) as a folder."""
    # start-up: the Hub catalog (a JSON table) loads only when a script names a model
    from memlint.catalog.hub import looks_like_hub_id

    folder_like = name.startswith(("/", "~", "./", "../", "$")) or not looks_like_hub_id(name)
    if folder_like:
        here = os.path.dirname(os.path.abspath(prov.file)) if prov.file else os.getcwd()
        folder = os.path.join(here, os.path.expanduser(name))
        if not (os.path.isfile(folder) or os.path.isfile(os.path.join(folder, "config.json"))):
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.INFO,
                f"model {name!r} is a local checkpoint folder that is not here; no memory "
                "estimate without it (give its config.json with --model PATH, or a Hub id)",
                prov, key=prov.key, no_estimate=verdicts.MODEL_NOT_RESOLVED))
            return
    partial.set("model", name, prov)


# the one Hub-id-or-local-folder rule, for other trainers' readers (verl, OpenRLHF)
local_or_hub_model = _model


def _lora(args: dict, partial: Partial, table: dict, assumed: list, resolved,
          trainer: str = "hf") -> bool:
    """TRL's --use_peft / --lora_r, open-instruct's --use_lora / --lora_rank, 4/8-bit loading.
    TRL ignores lora_r without use_peft; a script of its own that takes --lora_r (FastChat's
    train_lora.py) trains LoRA adapters, so there the rank alone means LoRA."""
    use = next((args[n] for n in ("use_peft", "use_lora", "lora") if n in args), None)
    rank_item = next((args[n] for n in ("lora_r", "lora_rank") if n in args), None)
    mode, mode_prov = _train_mode(args, rank_item, assumed, resolved, trainer)
    if mode == "full":
        return False
    if mode is not None and use is None:
        use = args.get("train_mode") or rank_item
    enabled = use is not None and not use.unresolved and (
        mode is not None or to_bool(use.value) is True)
    if use is None and rank_item is not None and trainer != "trl":
        enabled = True
        use = rank_item
        assumed.append(f"LoRA training, from --{rank_item.name} (the script's own argument)")
    if not enabled:
        return False
    rank = None
    if rank_item is not None and resolved(rank_item):
        rank = to_int(rank_item.value)
    if rank is None or rank < 1:
        value, source = table.get("lora_rank", (16, "TRL ModelConfig lora_r default"))
        rank = value
        assumed.append(f"lora_r = {value} ({source})")
        partial.set("lora_rank", rank, use.prov)
    else:
        partial.set("lora_rank", rank, rank_item.prov)
    targets = args.get("lora_target_modules")
    if targets is not None and not targets.unresolved:
        partial.set("lora_targets", target_kind(targets.value), targets.prov)
    dropout = args.get("lora_dropout")
    if dropout is not None and not dropout.unresolved:
        try:
            partial.set("lora_dropout", float(dropout.value), dropout.prov)
        except (TypeError, ValueError, OverflowError):
            pass
    # TRL ModelConfig.lora_modules_to_save; scripts of their own (Chinese-LLaMA-Alpaca-2
    # run_clm_sft_with_peft.py) name it modules_to_save, as PEFT does
    saved = next((args[n] for n in ("lora_modules_to_save", "modules_to_save") if n in args), None)
    if saved is not None and not saved.unresolved and saved.value not in (None, True):
        partial.set("lora_modules_to_save", saved.value, saved.prov)
    for name, quant in (("load_in_4bit", "nf4"), ("load_in_8bit", "int8")):
        item = args.get(name)
        if item is not None and not item.unresolved and to_bool(item.value):
            partial.set("base_quant", quant, item.prov)
    if mode is not None:
        # Firefly-style train.py: QLoRA loads the base in NF4 (BitsAndBytesConfig
        # load_in_4bit, nf4) and adapts every linear layer (find_all_linear_names)
        if mode == "qlora" and "base_quant" not in partial.settings:
            partial.set("base_quant", "nf4", mode_prov)
        if targets is None:
            partial.set("lora_targets", "all-linear", mode_prov)
    return True


def _train_mode(args: dict, rank_item, assumed: list, resolved, trainer: str) -> tuple:
    """(mode, provenance) of a `train_mode` argument (full, lora, qlora, dora) as Firefly's
    train.py and the scripts derived from it take it; (None, None) without one. Firefly's
    CustomizedArguments default it to qlora (yangjianxin1/Firefly component/argument.py), so a
    Firefly argument file (its `template_name`) that gives a LoRA rank but no mode is QLoRA."""
    item = args.get("train_mode")
    if item is not None and resolved(item):
        mode = str(item.value).strip().lower()
        return (mode, item.prov) if mode in ("full", "lora", "qlora", "dora") else (None, None)
    if item is None and "template_name" in args and rank_item is not None and trainer != "trl":
        assumed.append("train_mode qlora (yangjianxin1/Firefly component/argument.py: "
                       "CustomizedArguments.train_mode defaults to qlora)")
        return "qlora", rank_item.prov
    return None, None


def _precision(flags: dict, loaded: str, lora: bool, partial: Partial, table: dict,
               anchor: Provenance, assumed: list) -> None:
    """The Trainer's bf16/fp16 is autocast over the weights as loaded: over fp32 weights that
    is mixed precision (fp32 params, grads and states); over bf16 weights nothing is fp32, the
    optimizer steps the bf16 params (pure bf16). LoRA: the frozen base stays in its loaded
    dtype, so the same rule gives its bytes."""
    pure = flags.get("pure_bf16", (False, None))
    if pure[0]:
        partial.set("precision", "pure-bf16", pure[1])
        return
    on = next(((name, prov) for name, (truth, prov) in flags.items()
               if truth and name in ("bf16", "fp16")), None)
    off = all(not flags[n][0] for n in ("bf16", "fp16") if n in flags) and any(
        n in flags for n in ("bf16", "fp16"))
    if on is None and not off:
        value, source = table["precision"]
        assumed.append(f"precision {value} ({source})")
        on = (value, anchor) if value in ("bf16", "fp16") else None
    if on is None:
        where = flags[next(iter(flags))][1] if flags else anchor
        partial.set("precision", {"fp32": "fp32", "bf16": "pure-bf16"}.get(loaded, "fp16"),
                    where)
        return
    name, prov = on
    if loaded == "fp32":
        partial.set("precision", name, prov)      # framework hf: autocast over fp32 params
    elif loaded == "bf16":
        # autocast over bf16 weights casts nothing: everything runs and is stored in bf16 (a
        # LoRA adapter's own fp32 weights and moments are a few MB, counted in bf16 here)
        partial.set("precision", "pure-bf16", prov)
    else:
        partial.set("precision", name, prov)
        partial.set("param_dtype", loaded, prov)


def _optimizer(args: dict, partial: Partial, table: dict, anchor: Provenance, assumed: list,
               resolved) -> None:
    item = args.get("optim")
    if item is None:
        name, source = table["optim"]
        assumed.append(f"optim {name} ({source})")
        prov = anchor
    elif not resolved(item):
        return
    else:
        name, prov = str(item.value).strip().lower(), item.prov
    found = OPTIMIZERS.get(name)
    if found is None:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            f"optim {name!r} is not one memlint models; its states are counted as AdamW's",
            prov, key="optim"))
        return
    optimizer, impl, eight_bit = found
    partial.set("optimizer", optimizer, prov)
    if impl:
        partial.set("optimizer_impl", impl, prov)
    if eight_bit:
        # bitsandbytes 8-bit optimizers: uint8 moments plus one fp32 absmax per 256-element
        # block, updated by a fused kernel (memory/optimizer_quant.py)
        partial.set("optimizer_state_dtype", "int8", prov)
    if name.startswith("paged_"):
        # bitsandbytes Paged*: states in CUDA unified memory (optimizer.py get_state_buffer)
        partial.set("optimizer_paged", True, prov)


def _fsdp(args: dict, partial: Partial) -> None:
    item = args.get("fsdp")
    if item is None or item.unresolved:
        return
    value = item.value
    words = [str(w).lower() for w in value] if isinstance(value, list) else \
        str(value or "").lower().replace(",", " ").split()
    if not words or words in (["false"], ["none"], [""]):
        return
    mode = "full"
    for word in words:
        if word in _FSDP_WORDS:
            mode = _FSDP_WORDS[word][0]
    partial.set("framework", "fsdp2", item.prov)
    partial.set("fsdp", mode, item.prov)
    if "offload" in words:
        partial.set("offload_params", "cpu", item.prov)
        partial.set("offload_optimizer", "cpu", item.prov)
    _fsdp_config(args, partial)


def _fsdp_config(args: dict, partial: Partial) -> None:
    """`--fsdp_config`: a dict (YAML recipes) or a JSON file's path (launch scripts), which
    TrainingArguments.__post_init__ json-loads, dropping each key's `fsdp_` prefix
    (transformers training_args.py). `activation_checkpointing: true` is FSDP's own per-unit
    recompute (accelerate FullyShardedDataParallelPlugin): what e.g. Liger-Kernel's
    examples/huggingface/config/fsdp_config.json turns on for its FSDP runs. A file memlint cannot
    open is not a verdict on anything: its settings are simply not read."""
    item = args.get("fsdp_config")
    if item is None or item.unresolved or "fsdp" not in partial.settings:
        return
    config, where = item.value, item.prov
    if isinstance(config, str) and config.strip().lower().endswith(".json"):
        base = item.prov.file or os.path.join(os.getcwd(), "-")
        root = repo_root(base)
        path = _resolve_reference(config.strip(), base, root)
        if not os.path.isfile(path) or not inside(path, root):
            return
        text, _ = read_text(path)
        doc = load_json(path, text, allow_comments=True) if text is not None else None
        config = doc.data if doc is not None else None
        if isinstance(config, dict):
            key = next((k for k in ("activation_checkpointing", "fsdp_activation_checkpointing")
                        if k in config), None)
            where = doc.prov((key,), key) if key else where
    if not isinstance(config, dict):
        return
    value = config.get("activation_checkpointing", config.get("fsdp_activation_checkpointing"))
    if value is True or (isinstance(value, str) and to_bool(value) is True):
        partial.set("recompute", "full", where)
        partial.set_extra("recompute.scope", "inside-unit", where)


# -- DeepSpeed values the Trainer checks against its own --------------------------------------


def check_deepspeed(partial: Partial, args: dict, base: str) -> None:
    """transformers' HfTrainerDeepSpeedConfig.trainer_config_process fill_match()es
    train_micro_batch_size_per_gpu, gradient_accumulation_steps and fp16/bf16.enabled against
    the TrainingArguments and raises 'Please correct the following DeepSpeed config values that
    mismatch TrainingArguments values' (transformers/integrations/deepspeed.py) for any explicit
    (not "auto") value that differs. Only values both sides write are compared."""
    ds = partial.extra.get("hf_trainer.deepspeed")
    if ds is None:
        return
    root = repo_root(base)
    path = _resolve_reference(str(ds.value), base, root)
    if not os.path.isfile(path) or not inside(path, root):
        return
    text, _ = read_text(path)
    if text is None:
        return
    doc = load_json(path, text, allow_comments=True)
    data = doc.data if isinstance(doc.data, dict) else None
    if data is None:
        return
    pairs = [("train_micro_batch_size_per_gpu", "per_device_train_batch_size"),
             ("gradient_accumulation_steps", "gradient_accumulation_steps")]
    for ds_key, arg_name in pairs:
        item = args.get(arg_name)
        if item is None or item.unresolved or ds_key not in data:
            continue
        ds_value, mine = data[ds_key], to_int(item.value)
        if isinstance(ds_value, str) or mine is None or to_int(ds_value) == mine:
            continue
        _mismatch(partial, doc, (ds_key,), ds_key, ds_value, arg_name, mine, item.prov)
    for block in ("bf16", "fp16"):
        section = data.get(block)
        item = args.get(block)
        if not isinstance(section, dict) or item is None or item.unresolved:
            continue
        enabled, mine = section.get("enabled"), to_bool(item.value)
        if isinstance(enabled, bool) and mine is not None and enabled != mine:
            _mismatch(partial, doc, (block, "enabled"), f"{block}.enabled", enabled, block, mine,
                      item.prov)


def _mismatch(partial, doc, path, ds_key, ds_value, arg_name, mine, arg_prov) -> None:
    partial.diagnostics.append(make(
        CONFLICT, Severity.ERROR,
        f"DeepSpeed {ds_key} = {ds_value!r} but the Trainer gets --{arg_name} {mine!r} "
        f"({arg_prov.describe()}): transformers refuses DeepSpeed values that mismatch "
        "TrainingArguments at start-up (integrations/deepspeed.py); set it to \"auto\" or make "
        "them equal", doc.prov(path, ds_key), key=ds_key))


def mapping_items(doc, data: dict) -> list:
    """Top-level keys of a YAML/JSON argument mapping as Items (nested values kept whole)."""
    return [Item(str(key).replace("-", "_"), value, doc.prov((key,), str(key)))
            for key, value in data.items()]
