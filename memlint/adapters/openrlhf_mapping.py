"""What OpenRLHF's arguments mean for memory: argparse names -> scenario keys.

Read at OpenRLHF v0.9.9 (3e438ab5) for the underscore spellings and v0.11.0 (3c3be623) for the
dotted ones (`--actor.num_nodes`), which name the same settings (`RENAMES`); older scripts' names
(`--prompt_max_len`, `--generate_max_len`, `--bf16`, `--flash_attn`) are read too. What the code
does with them (openrlhf/cli/train_ppo_ray.py, openrlhf/utils/deepspeed/deepspeed.py):
- the actor trains with DeepSpeed (`--zero_stage`, default 2) on `actor_num_nodes x
  actor_num_gpus_per_node` GPUs; `--adam_offload` is ZeRO-Offload (the Adam step on the CPU);
  `--deepspeed_enable_sleep` moves the actor's and critic's DeepSpeed states to the host between
  phases (ppo_actor.py offload_states / reload_states);
- the reference model exists when `--init_kl_coef` > 0, a DeepSpeed inference engine in the
  param dtype with ZeRO-3 only when the actor uses ZeRO-3 (get_ds_eval_config: stage 3 if
  zero_stage == 3 else 0), its parameters on the host with `--ref_reward_offload` (offload_param,
  which DeepSpeed applies only under ZeRO-3); the critic exists when `--critic_pretrain` is
  given, the reward model when `--reward_pretrain` is and no `--remote_rm_url`;
- every role is a Ray actor on its own GPUs (`*_num_nodes x *_num_gpus_per_node`) unless
  `--colocate_actor_ref`, `--colocate_critic_reward` or `--colocate_all_models` share them,
  each still its own process; vLLM runs `--vllm_num_engines` engines of
  `--vllm_tensor_parallel_size` GPUs at `--vllm_gpu_memory_utilization` (default 0.95), asleep
  at level 1 between rollouts with `--vllm_enable_sleep` (trainer/ray/vllm_engine.py sleep).
"""
from __future__ import annotations

import json
import os
from functools import lru_cache

from memlint.diagnostics import INVALID_VALUE, UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance
from memlint.keys import parse_bool

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

# The entry points' argparse definitions at the two pinned tags (tools/openrlhf_args.py).
_FACTS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "facts", "openrlhf_args.json")
OLD, NEW = "0.9.9", "0.11.0"


@lru_cache(maxsize=1)
def facts() -> dict:
    with open(_FACTS, encoding="utf-8") as handle:
        return json.load(handle)


def arguments(entry: str, version: str) -> dict:
    points = facts()["versions"][version]["entry_points"]
    return points.get(f"openrlhf/cli/{entry}.py", {})


def source(entry: str, version: str) -> str:
    commit = facts()["versions"][version]["commit"]
    return f"OpenRLHF/OpenRLHF@{commit[:9]} (v{version}) openrlhf/cli/{entry}.py"


RENAMES = {
    "vllm.num_engines": "vllm_num_engines", "vllm.tensor_parallel_size": "vllm_tensor_parallel_size",
    "vllm.gpu_memory_utilization": "vllm_gpu_memory_utilization",
    "vllm.enable_sleep": "vllm_enable_sleep", "vllm.enforce_eager": "enforce_eager",
    "train.colocate_all": "colocate_all_models", "train.colocate_actor_ref": "colocate_actor_ref",
    "train.colocate_critic_reward": "colocate_critic_reward", "ds.zero_stage": "zero_stage",
    "ds.adam_offload": "adam_offload", "ds.enable_sleep": "deepspeed_enable_sleep",
    "ds.packing_samples": "packing_samples", "ds.param_dtype": "param_dtype",
    "ds.ring_attn_size": "ring_attn_size", "ds.tensor_parallel_size": "ds_tensor_parallel_size",
    "ds.lora.rank": "lora_rank", "ds.lora.target_modules": "target_modules",
    "actor.gradient_checkpointing_enable": "gradient_checkpointing",
    "actor.model_name_or_path": "pretrain", "critic.model_name_or_path": "critic_pretrain",
    "reward.model_name_or_path": "reward_pretrain", "train.micro_batch_size": "micro_train_batch_size",
    "train.batch_size": "train_batch_size", "rollout.micro_batch_size": "micro_rollout_batch_size",
    "rollout.batch_size": "rollout_batch_size", "rollout.n_samples_per_prompt": "n_samples_per_prompt",
    "data.max_len": "max_len", "train.dynamic_batch_enable": "use_dynamic_batch",
    "train.max_tokens_per_gpu": "train_max_tokens_per_gpu",
    "rollout.max_tokens_per_gpu": "rollout_max_tokens_per_gpu", "algo.kl.init_coef": "init_kl_coef",
    "algo.kl.use_loss": "use_kl_loss", "algo.advantage.estimator": "advantage_estimator",
    "actor.entropy_coef": "entropy_loss_coef", "ref.offload": "ref_reward_offload",
    "reward.offload": "ref_reward_offload", "reward.remote_url": "remote_rm_url",
    "model.model_name_or_path": "pretrain",
    # v0.11.0's names of v0.9.9 arguments (cli/train_*.py of each version)
    "rollout.max_new_tokens": "max_new_tokens",
    "model.gradient_checkpointing_enable": "gradient_checkpointing", "model.beta": "beta",
    "ds.attn_implementation": "attn_implementation", "ds.load_in_4bit": "load_in_4bit",
    "ds.lora.alpha": "lora_alpha", "ds.lora.dropout": "lora_dropout",
    "ds.grad_accum_dtype": "grad_accum_dtype", "ds.overlap_comm": "overlap_comm", "ds.zpg": "zpg",
    "ds.use_liger_kernel": "use_liger_kernel", "ds.deepcompile": "deepcompile",
    "vllm.enable_prefix_caching": "enable_prefix_caching",
    "model.compute_fp32_loss_enable": "compute_fp32_loss", "train.enable_ema": "enable_ema",
    "train.async_enable": "async_train", "train.async_queue_size": "async_queue_size",
    "train.partial_rollout_enable": "partial_rollout", "vllm.sync_backend": "vllm_sync_backend",
    "rollout.vllm_generate_batch_size": "vllm_generate_batch_size",
    "ds.ring_attn_head_stride": "ring_head_stride", "ckpt.max_mem": "max_ckpt_mem",
    "ds.use_universal_ckpt": "use_ds_universal_ckpt",
    "critic.save_value_network": "save_value_network",
    "model.gradient_checkpointing_reentrant": "gradient_checkpointing_use_reentrant",
    "actor.gradient_checkpointing_reentrant": "gradient_checkpointing_use_reentrant",
    "ds.value_head_prefix": "value_head_prefix",
}
for _role in ("actor", "critic", "ref", "reward"):
    RENAMES[f"{_role}.num_nodes"] = f"{_role}_num_nodes"
    RENAMES[f"{_role}.num_gpus_per_node"] = f"{_role}_num_gpus_per_node"
_ALGORITHMS = {"gae": "ppo", "group_norm": "grpo", "reinforce": "reinforce++",
               "reinforce_baseline": "reinforce++", "rloo": "rloo", "dr_grpo": "grpo"}


class Args:
    """The entry point's arguments as the script sets them over the pinned defaults."""

    def __init__(self, entry: str, items: dict, anchor: Provenance, partial: Partial):
        dotted = any("." in name for name in items)
        self.version = NEW if dotted else OLD
        table = arguments(entry, self.version) or arguments(entry, OLD)
        reverse = {new: old for new, old in RENAMES.items()}
        self.defaults = {}
        for name, (value, _kind, line) in table.items():
            self.defaults[reverse.get(name, name)] = (value, line)
        self.items = {RENAMES.get(name, name): item for name, item in items.items()}
        self.known = set(table) | set(self.defaults)
        self.entry, self.anchor, self.partial = entry, anchor, partial
        self.source = source(entry, self.version)
        self.used: dict = {}

    def given(self, name: str) -> bool:
        return name in self.items

    def raw(self, name: str, default: Any = None) -> Any:
        item = self.items.get(name)
        if item is None:
            if name in self.defaults:
                self.used[name] = self.defaults[name][0]
                return self.defaults[name][0]
            return default
        value, prov, unresolved = item
        if unresolved:
            self.partial.diagnostics.append(make(
                UNRESOLVED, Severity.INFO, f"--{name}: {', '.join(unresolved)}; its value is not "
                "known statically", prov, key=name))
            return None
        return value

    def prov(self, name: str) -> Provenance:
        item = self.items.get(name)
        if item is not None:
            return item[1]
        line = self.defaults.get(name, (None, None))[1]
        return Provenance(self.anchor.file, self.anchor.line, self.anchor.column,
                          f"OpenRLHF {self.version} default --{name} ({self.source}"
                          + (f":{line})" if line else ")"))

    def flag(self, name: str) -> bool:
        item = self.items.get(name)
        if item is not None:
            value = item[0]
            return value is None or parse_bool(value) is True
        return bool(self.raw(name, False))

    def number(self, name: str, default: Optional[int] = None) -> Optional[int]:
        value = self.raw(name, default)
        if value is None:
            return None
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.partial.diagnostics.append(make(
                INVALID_VALUE, Severity.WARNING, f"--{name}: expected a number, got {value!r}",
                self.prov(name), key=name))
            return None
        return int(number) if number.is_integer() else None

    def real(self, name: str) -> Optional[float]:
        value = self.raw(name)
        try:
            return None if value is None else float(value)
        except (TypeError, ValueError):
            return None

    def put(self, key: str, value: Any, name: str) -> None:
        self.partial.set(key, value, self.prov(name))


def apply(entry: str, items: dict, launcher: list, partial: Partial, anchor: Provenance) -> None:
    args = Args(entry, items, anchor, partial)
    partial.set("rl.framework", "openrlhf", anchor)
    partial.set_extra("openrlhf.version", args.version, anchor)
    for name, item in args.items.items():
        partial.set_extra(f"openrlhf.{name}", item[0], item[1])
    _training(args)
    if entry == "train_ppo_ray":
        _rl(args)
    else:
        _launcher(launcher, partial)
        _offline(entry, args)
    if args.used:
        shown = ", ".join(f"--{k} = {v!r}" for k, v in sorted(args.used.items()))
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, f"OpenRLHF {args.version} defaults assumed (no argument "
            f"gives them; {args.source}): {shown}", anchor, key="defaults"))


def _training(args: Args) -> None:
    model = args.raw("pretrain")
    if isinstance(model, str) and model.strip():
        # start-up: the shared Hub-id / local-folder rule of the HF trainer reader
        from memlint.adapters.trainer_args import local_or_hub_model

        local_or_hub_model(model.strip(), args.prov("pretrain"), args.partial)
    args.put("framework", "deepspeed", "zero_stage")
    zero = args.number("zero_stage", 2)
    if zero in (0, 1, 2, 3):
        args.put("zero", zero, "zero_stage")
    dtype = str(args.raw("param_dtype", "bf16") or "bf16")
    if args.given("bf16") or dtype == "bf16":
        args.put("precision", "bf16", "bf16" if args.given("bf16") else "param_dtype")
    elif dtype == "fp16":
        args.put("precision", "fp16", "param_dtype")
    args.put("recompute", "full" if args.flag("gradient_checkpointing") else "none",
             "gradient_checkpointing")
    if args.flag("adam_offload"):
        args.put("offload_optimizer", "cpu", "adam_offload")
    attn = str(args.raw("attn_implementation", "") or "")
    if args.flag("flash_attn") or "flash" in attn:
        args.put("attention", "flash", "flash_attn" if args.given("flash_attn")
                 else "attn_implementation")
    micro = args.number("micro_train_batch_size")
    if micro:
        args.put("micro_batch", micro, "micro_train_batch_size")
    prompt, generate = args.number("prompt_max_len"), args.number("generate_max_len")
    total = args.number("max_len")
    if prompt and generate:
        args.put("rl.prompt_len", prompt, "prompt_max_len")
        args.put("rl.response_len", generate, "generate_max_len")
        args.put("seq_len", prompt + generate, "generate_max_len")
    elif total:
        args.put("seq_len", total, "max_len")
        # v0.9.9+: max_len is prompt + response, max_new_tokens the response (default: what
        # the prompt leaves of max_len, per sample: cli/train_ppo_ray.py --max_new_tokens)
        new = args.number("max_new_tokens") if args.given("max_new_tokens") else None
        if new and 0 < new < total:
            args.put("rl.prompt_len", total - new, "max_len")
            args.put("rl.response_len", new, "max_new_tokens")
    lora = args.number("lora_rank", 0)
    if lora:
        args.put("lora_rank", lora, "lora_rank")
        args.put("lora_targets", "all-linear", "target_modules")
    ring = args.number("ring_attn_size", 1)
    if ring and ring > 1:
        args.put("cp", ring, "ring_attn_size")
    tp = args.number("ds_tensor_parallel_size", 1)
    if tp and tp > 1:
        args.put("tp", tp, "ds_tensor_parallel_size")
    if args.flag("packing_samples"):
        args.put("rl.padding_free", True, "packing_samples")


def _gpus(args: Args, role: str) -> Optional[int]:
    nodes, per = args.number(f"{role}_num_nodes", 1), args.number(f"{role}_num_gpus_per_node", 8)
    return nodes * per if nodes and per else None


def _rl(args: Args) -> None:
    actor = _gpus(args, "actor")
    if actor:
        args.put("world_size", actor, "actor_num_gpus_per_node")
        args.put("gpus_per_node", args.number("actor_num_gpus_per_node", 8),
                 "actor_num_gpus_per_node")
    micro, train = args.number("micro_train_batch_size"), args.number("train_batch_size")
    if micro and train and actor and train % (micro * actor) == 0 and train > micro * actor:
        args.put("grad_accum", train // (micro * actor), "train_batch_size")
    if train and actor:
        args.put("rl.update_sequences", max(1, train // actor), "train_batch_size")
    estimator = args.raw("advantage_estimator", "gae")
    if isinstance(estimator, str):
        args.put("rl.algorithm", _ALGORITHMS.get(estimator, estimator), "advantage_estimator")
    n = args.number("n_samples_per_prompt", 1)
    if n:
        args.put("rl.samples_per_prompt", n, "n_samples_per_prompt")
    batch = args.number("rollout_batch_size")
    if batch:
        args.put("rl.prompts_per_step", batch, "rollout_batch_size")
    lp = args.number("micro_rollout_batch_size")
    if lp:
        args.put("rl.logprob_micro_batch", lp, "micro_rollout_batch_size")
    if args.flag("use_dynamic_batch"):
        for name, key in (("train_max_tokens_per_gpu", "rl.update_tokens"),
                          ("rollout_max_tokens_per_gpu", "rl.logprob_tokens")):
            tokens = args.number(name)
            if tokens:
                args.put(key, tokens, name)
    coef = args.real("entropy_loss_coef")
    args.put("rl.entropy", bool(coef), "entropy_loss_coef")
    zero3 = args.number("zero_stage", 2) == 3
    offload = args.flag("ref_reward_offload") and zero3
    kl = args.real("init_kl_coef")
    reference = (kl or 0) > 0
    args.put("rl.reference", "model" if reference else "none", "init_kl_coef")
    if reference:
        args.put("rl.reference_offload", offload, "ref_reward_offload")
    critic = args.raw("critic_pretrain")
    args.put("rl.critic", bool(critic), "critic_pretrain")
    reward = args.raw("reward_pretrain")
    if reward and not args.raw("remote_rm_url"):
        args.put("rl.reward_model", str(reward), "reward_pretrain")
        args.put("rl.reward_offload", offload, "ref_reward_offload")
    if args.flag("deepspeed_enable_sleep"):
        args.put("rl.actor_param_offload", True, "deepspeed_enable_sleep")
        args.put("rl.actor_optimizer_offload", True, "deepspeed_enable_sleep")
        args.put("rl.critic_param_offload", True, "deepspeed_enable_sleep")
        args.put("rl.critic_optimizer_offload", True, "deepspeed_enable_sleep")
    _placement(args, reference, bool(critic), bool(reward))
    _engine(args)


def _placement(args: Args, reference: bool, critic: bool, reward: bool) -> None:
    if args.flag("colocate_all_models"):
        args.put("rl.placement", "colocated", "colocate_all_models")
        return
    args.put("rl.placement", "separate", "colocate_all_models")
    if reference and not args.flag("colocate_actor_ref"):
        args.put("rl.reference_gpus", _gpus(args, "ref") or 8, "ref_num_gpus_per_node")
    if critic:
        args.put("rl.critic_gpus", _gpus(args, "critic") or 8, "critic_num_gpus_per_node")
    if reward and not (critic and args.flag("colocate_critic_reward")):
        args.put("rl.reward_gpus", _gpus(args, "reward") or 8, "reward_num_gpus_per_node")


# OpenRLHF's start-up assertion on colocated engines: cli/train_ppo_ray.py (v0.9.9 :53-61,
# v0.11.0 :56-64) "actor_num_nodes * actor_num_gpus_per_node must be equal to vllm_num_engines *
# vllm_tensor_parallel_size" when every model is colocated and training is synchronous
COLOCATE_ASSERT = {OLD: "cli/train_ppo_ray.py:53-61", NEW: "cli/train_ppo_ray.py:56-64"}


def _engine(args: Args) -> None:
    engines = args.number("vllm_num_engines")
    if not engines:
        return  # no vLLM: the actor generates with transformers (not modeled as an engine)
    actor, tp = _gpus(args, "actor"), args.number("vllm_tensor_parallel_size", 1) or 1
    if (args.flag("colocate_all_models") and not args.flag("async_train") and actor
            and engines * tp != actor):
        args.partial.diagnostics.append(make(
            INVALID_VALUE, Severity.ERROR, f"every model is colocated but the actor's {actor} "
            f"GPUs are not the engines' {engines} x tp {tp} = {engines * tp}: OpenRLHF asserts "
            "\"actor_num_nodes * actor_num_gpus_per_node must be equal to vllm_num_engines * "
            f"vllm_tensor_parallel_size\" (OpenRLHF {args.version} "
            f"{COLOCATE_ASSERT.get(args.version, COLOCATE_ASSERT[OLD])})",
            args.prov("vllm_num_engines"), key="vllm_num_engines"))
    args.put("engine.name", "vllm", "vllm_num_engines")
    args.put("engine.instances", engines, "vllm_num_engines")
    tp = args.number("vllm_tensor_parallel_size", 1) or 1
    args.put("engine.tp", tp, "vllm_tensor_parallel_size")
    if not args.flag("colocate_all_models"):
        args.put("engine.gpus", engines * tp, "vllm_num_engines")
    util = args.real("vllm_gpu_memory_utilization")
    if util is not None and 0 < util <= 1:
        args.put("engine.gpu_memory_utilization", util, "vllm_gpu_memory_utilization")
    args.put("engine.sleep_level", 1 if args.flag("vllm_enable_sleep") else 0, "vllm_enable_sleep")
    if args.flag("enforce_eager"):
        args.put("engine.enforce_eager", True, "enforce_eager")
    args.put("engine.dtype", "bf16", "param_dtype")


def _launcher(launcher: list, partial: Partial) -> None:
    """deepspeed --num_gpus N --num_nodes M / torchrun --nproc-per-node N -> world size."""
    counts: dict = {}
    for i, (text, prov, unresolved) in enumerate(launcher):
        name, value = text, None
        if "=" in text and text.startswith("-"):
            name, value = text.split("=", 1)
        elif i + 1 < len(launcher):
            value = launcher[i + 1][0]
        name = name.lstrip("-").replace("-", "_")
        if name in ("num_gpus", "nproc_per_node", "num_nodes", "nnodes") and value is not None:
            if value.isdigit():
                counts[name] = (int(value), prov)
    per = counts.get("num_gpus") or counts.get("nproc_per_node")
    nodes = counts.get("num_nodes") or counts.get("nnodes")
    if per:
        partial.set("world_size", per[0] * (nodes[0] if nodes else 1), per[1])
        partial.set("gpus_per_node", per[0], per[1])


def _offline(entry: str, args: Args) -> None:
    """SFT, DPO, KTO and reward-model training: DeepSpeed training of one model, with a frozen
    reference beside the policy for DPO and KTO (openrlhf/cli/train_dpo.py: ref_model built
    with get_ds_eval_config, `--ref_offload` its parameters on the host under ZeRO-3)."""
    if entry in ("train_dpo", "train_kto"):
        args.put("rl.algorithm", "dpo" if entry == "train_dpo" else "kto", "beta")
        zero3 = args.number("zero_stage", 2) == 3
        args.put("rl.reference", "model", "beta")
        args.put("rl.reference_offload", args.flag("ref_offload") and zero3, "ref_offload")
        # chosen and rejected concatenated into one forward (DPOTrainer concatenated_forward)
        args.put("rl.paired", entry == "train_dpo", "beta")
    elif entry == "train_rm":
        args.put("rl.algorithm", "reward", "pretrain")
        args.put("rl.paired", True, "pretrain")
