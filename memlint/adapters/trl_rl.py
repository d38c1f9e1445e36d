"""TRL's RL and preference trainers (GRPO, RLOO, DPO, KTO, ORPO, CPO/SimPO, reward): which models
they hold and how they generate, from the arguments memlint/adapters/trainer_args.py already read.

Read at huggingface/trl@f2cd5771:
- GRPOConfig (trainer/grpo_config.py): `use_vllm` (False), `vllm_mode` ("colocate": the engine in
  the training process on every GPU; "server": `trl vllm-serve` on GPUs of its own),
  `vllm_gpu_memory_utilization` (0.3), `vllm_tensor_parallel_size` (1), `vllm_enable_sleep_mode`
  (False; sleep level 2, generation/vllm_generation.py), `num_generations` (8),
  `max_completion_length` (512), `beta` (0.0: no reference model); the colocated engine starts
  with `max_num_batched_tokens=4096` and `max_num_seqs = per_device_train_batch_size x
  vllm_tensor_parallel_size x steps_per_generation` (grpo_trainer.py); log-probs are computed in
  chunks of `per_device_train_batch_size` over the completion tokens only;
- DPOTrainer (trainer/dpo_trainer.py:893): a reference model unless PEFT (the adapter disabled) or
  `precompute_ref_log_probs`; chosen and rejected concatenated into one forward;
- ORPO and CPO/SimPO keep no reference; KTO does; a reward model trains a value head on pairs.
The trainer is named by the script (`trl grpo`, `scripts/dpo.py`, open-r1 `grpo.py`) or the
recipe's folder (`recipes/<model>/grpo/`), else recognised by keys only its config has.
"""
from __future__ import annotations

import re

from memlint.ir import Partial, Provenance

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

KINDS = ("grpo", "rloo", "online_dpo", "dpo", "kto", "orpo", "cpo", "simpo", "reward", "ppo")
_GRPO_KEYS = ("num_generations", "use_vllm", "vllm_mode", "reward_funcs",
              "max_completion_length", "vllm_gpu_memory_utilization")
_DPO_KEYS = ("precompute_ref_log_probs", "rpo_alpha", "ref_adapter_name", "reference_free")
_KTO_KEYS = ("desirable_weight", "undesirable_weight")
SOURCE = "huggingface/trl@f2cd5771"
# Partial.extra prefix of a framework default an RL verdict rests on (rules/rl.py)
RESTS_ON = "rl.rests_on:"
# TRL's default max_prompt_length before it was removed from GRPOConfig/DPOConfig (TRL <= 0.2x)
PROMPT_DEFAULT = 512
# the arguments memlint/facts/coverage/trl.json classes, recorded as extra trl.<name> when set
COVERED = ("use_vllm", "vllm_mode", "vllm_gpu_memory_utilization", "vllm_tensor_parallel_size",
           "vllm_max_model_length", "vllm_enable_sleep_mode", "num_generations",
           "max_completion_length", "max_prompt_length", "steps_per_generation", "beta",
           "precompute_ref_log_probs", "reference_free", "loss_type", "padding_free",
           "ds3_gather_for_generation", "vllm_model_impl", "vllm_kv_cache_dtype", "use_liger_loss",
           "generation_batch_size", "sync_ref_model")


def trainer_kind(args: dict, path: str, script: str) -> Optional[str]:
    text = f"{script} {path}".lower().replace("\\", "/")
    # start-up: a pattern compiles only for a text holding its word (ten patterns a run otherwise)
    for kind in KINDS:
        if kind in text and re.search(rf"(^|[\s/_\-.]){kind}([\s/_\-.]|$)", text):
            return "reward" if kind == "reward" else kind
    if "reward" in text and re.search(r"(^|[/_\-.])reward_?model", text):
        return "reward"
    if any(name in args for name in _GRPO_KEYS):
        return "grpo"
    if any(name in args for name in _KTO_KEYS):
        return "kto"
    if any(name in args for name in _DPO_KEYS):
        return "dpo"
    return None


def apply(args: dict, partial: Partial, anchor: Provenance, path: str, script: str,
          assumed: list) -> None:
    """Set the rl.* / engine.* keys of a TRL RL or preference run (nothing for SFT)."""
    kind = trainer_kind(args, path, script)
    if kind is None:
        return
    from memlint.adapters._values import to_bool, to_int  # start-up: already loaded

    def value(name, default=None):
        item = args.get(name)
        return default if item is None or item.unresolved else item.value

    def where(name):
        item = args.get(name)
        return item.prov if item is not None else anchor

    peft = "lora_rank" in partial.settings
    partial.set("rl.framework", "trl", anchor)
    for name in COVERED:
        item = args.get(name)
        if item is not None and not item.unresolved:
            partial.set_extra(f"trl.{name}", item.value, item.prov)   # coverage/trl.json
    partial.set("rl.algorithm", "simpo" if kind == "cpo" and str(value("loss_type", "")) ==
                "simpo" else kind, anchor)
    if kind in ("grpo", "rloo", "online_dpo"):
        _grpo(args, partial, anchor, value, where, peft, to_bool, to_int, assumed)
    elif kind in ("dpo", "kto"):
        precompute = to_bool(value("precompute_ref_log_probs", False))
        free = to_bool(value("reference_free", False))
        ref = ("none" if free else "precomputed" if precompute else "adapter" if peft
               else "model")
        partial.set("rl.reference", ref, where("precompute_ref_log_probs"
                                               if "precompute_ref_log_probs" in args else "beta"))
        partial.set("rl.paired", kind == "dpo", anchor)
    elif kind in ("orpo", "cpo", "simpo", "reward"):
        partial.set("rl.paired", True, anchor)


def _float(value, default: float) -> float:
    """float(value); `default` for what is no number, inf for an integer past float's range."""
    try:
        return float(value)
    except OverflowError:
        return float("inf")
    except (TypeError, ValueError):
        return default


def _grpo(args, partial, anchor, value, where, peft, to_bool, to_int, assumed) -> None:
    beta = _float(value("beta", 0.0), 0.0)
    if beta:
        partial.set("rl.reference", "adapter" if peft else "model", where("beta"))
    else:
        assumed.append(f"no reference model (beta = {beta:g}; {SOURCE} grpo_config.py: beta "
                       "defaults to 0.0)")
    generations = to_int(value("num_generations", 8)) or 8
    partial.set("rl.samples_per_prompt", generations, where("num_generations"))
    completion = to_int(value("max_completion_length", 512)) or 512
    partial.set("rl.response_len", completion, where("max_completion_length"))
    prompt = to_int(value("max_prompt_length")) if "max_prompt_length" in args else None
    if prompt is None:
        prompt = PROMPT_DEFAULT
        assumed.append(f"prompts of up to {PROMPT_DEFAULT} tokens (TRL's max_prompt_length "
                       "default before it was removed; give max_prompt_length)")
    partial.set("rl.prompt_len", prompt, where("max_prompt_length"))
    partial.set("seq_len", prompt + completion, where("max_completion_length"))
    micro = partial.settings.get("micro_batch")
    if micro is not None:
        partial.set("rl.logprob_micro_batch", micro.value, micro.prov)
    if to_bool(value("padding_free", False)):
        partial.set("rl.padding_free", True, where("padding_free"))
    if not to_bool(value("use_vllm", False)):
        assumed.append(f"completions generated by transformers' generate (use_vllm false; {SOURCE})")
        return
    mode = str(value("vllm_mode", "colocate"))
    partial.set("engine.name", "vllm", where("use_vllm"))
    if "vllm_mode" not in args:
        # TRL before 0.18 had no colocate mode: use_vllm meant an engine on a GPU of its own
        # (vllm_device); open-r1's recipes of that time set a share like 0.7 for that GPU
        partial.set_extra(RESTS_ON + "vllm_mode", "colocate (TRL's default at "
                          f"{SOURCE}; TRL before 0.18 ran vLLM on a GPU of its own)", anchor)
    if mode == "server":
        # `trl vllm-serve` on GPUs of its own: not on the training GPUs
        partial.set("rl.placement", "separate", where("vllm_mode"))
        partial.set("engine.gpus", to_int(value("vllm_tensor_parallel_size", 1)) or 1,
                    where("vllm_mode"))
    else:
        partial.set("rl.placement", "hybrid", where("vllm_mode"))
    util = _float(value("vllm_gpu_memory_utilization", 0.3), 0.3)
    if 0 < util <= 1:
        partial.set("engine.gpu_memory_utilization", util, where("vllm_gpu_memory_utilization"))
    tp = to_int(value("vllm_tensor_parallel_size", 1)) or 1
    partial.set("engine.tp", tp, where("vllm_tensor_parallel_size"))
    partial.set("engine.sleep_level", 2 if to_bool(value("vllm_enable_sleep_mode", False))
                else 0, where("vllm_enable_sleep_mode"))
    if mode != "server":
        partial.set("engine.max_num_batched_tokens", 4096, anchor)
        steps = to_int(value("steps_per_generation")) or to_int(
            value("gradient_accumulation_steps", 1)) or 1
        if micro is not None:
            partial.set("engine.max_num_seqs", int(micro.value) * tp * steps, micro.prov)
    length = to_int(value("vllm_max_model_length"))
    if length:
        partial.set("engine.max_model_len", length, where("vllm_max_model_length"))
