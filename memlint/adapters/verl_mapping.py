"""What a composed verl config means for memory: verl keys -> scenario keys.

Read at volcengine/verl@f9c855f7 (v0.7.0); each rule below names the verl code it follows:
- the actor trains under FSDP (`strategy` fsdp / fsdp2: verl/workers/fsdp_workers.py, params built
  in `model_dtype` fp32 and computed in `dtype` bf16 through FSDP mixed precision, sharded over
  `fsdp_size` GPUs, -1 = all) or Megatron (`strategy: megatron`, `actor.megatron.*` sizes);
- `ppo_micro_batch_size_per_gpu` sequences of `max_prompt_length + max_response_length` tokens per
  micro-batch, or with `use_dynamic_bsz` packed micro-batches of `ppo_max_token_len_per_gpu`
  tokens (verl/utils/seqlen_balancing.py); `ppo_mini_batch_size x rollout.n / (GPUs / ulysses)`
  sequences per optimizer step (verl/workers/fsdp_workers.py normalizes the mini-batch);
- `param_offload` / `optimizer_offload` move the actor's parameters / optimizer states to the host
  between its passes and back for each (fsdp_workers.py update_actor, compute_log_prob,
  rollout_mode: load_fsdp_model_to_gpu ... offload_fsdp_model_to_cpu): the optimizer step runs
  on the GPU, so these are `rl.actor_*_offload`, not `offload_optimizer`; FSDP2 `offload_policy`
  is PyTorch's CPUOffloadPolicy (the step on the CPU): `offload_params/optimizer = cpu`;
- the reference policy exists when `algorithm.use_kl_in_reward` or `actor.use_kl_loss`
  (verl/trainer/main_ppo.py add_ref_policy_worker); with LoRA it is the actor with the adapter
  disabled (ray_trainer.py ref_in_actor); under FSDP verl wraps it with CPU offload of its
  parameters whatever `ref.fsdp_config.param_offload` says (fsdp_workers.py `_build_model_optimizer`:
  "We force reference policy to use CPUOffload to save memory");
- the critic exists when `critic.enable`, else when `adv_estimator` is gae (trainer/ppo/utils.py
  need_critic); a reward model when `reward_model.enable`;
- every role shares the same GPUs in one process per GPU (the global resource pool of
  main_ppo.py, fused by create_colocated_worker_cls) unless the reward model has its own pool;
- the rollout engine (`rollout.name`) takes `gpu_memory_utilization` of each GPU with
  `tensor_model_parallel_size` GPUs per engine; with `free_cache_engine` (default true) it sleeps
  between rollouts at level 2 with vLLM >= 0.8.5 (verl/third_party/vllm/__init__.py
  VLLM_SLEEP_LEVEL) and level 1 with `layered_summon` or older vLLM
  (workers/rollout/vllm_rollout/vllm_rollout.py), and not at all without free_cache_engine.
"""
from __future__ import annotations

from memlint import verdicts
from memlint.diagnostics import INVALID_VALUE, UNRESOLVED, Severity, make
from memlint.ir import VERSION_DEPENDENT, Partial, Provenance

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

A = "actor_rollout_ref."
# free_cache_engine=False is honoured since verl PR #1464 (afee3acb5, 2025-06-29, first in v0.5.0);
# before, the FSDP sharding manager put vLLM >= 0.7 to sleep at level 1 after every rollout
# whatever the setting said (verl v0.4.1 verl/workers/sharding_manager/fsdp_vllm.py __exit__)
AWAKE_SINCE = ("free_cache_engine=False keeps the engine awake between phases since verl 0.5.0 "
               "(PR #1464); verl before 0.5 put vLLM 0.7+ to sleep at level 1 after each rollout "
               "whatever it said (sharding_manager/fsdp_vllm.py at v0.4.1)")
SLEEP_SOURCE = ("verl/third_party/vllm/__init__.py VLLM_SLEEP_LEVEL = 2 for vLLM >= 0.8.5 (1 "
                "before, and on NPUs), level 1 with rollout.layered_summon "
                "(workers/rollout/vllm_rollout/vllm_rollout.py)")
_ALGORITHMS = {"gae": "ppo", "grpo": "grpo", "rloo": "rloo", "reinforce_plus_plus": "reinforce++",
               "reinforce_plus_plus_baseline": "reinforce++", "remax": "remax", "opo": "opo",
               "grpo_passk": "grpo", "gpg": "gpg", "optimal_token_baseline": "otb"}


class Reader:
    """Reads resolved verl keys and sets scenario keys with their positions."""

    framework = "verl"

    def __init__(self, config, partial: Partial, anchor: Provenance, version: str, file: str):
        self.config, self.partial, self.anchor = config, partial, anchor
        self.version = version   # verl's, and the source file of its defaults (adapters/verl.py)
        self.file = file

    def entry(self, key: str, no_estimate: Optional[str] = None):
        """The key's entry, or None (said, as info) where the script computes its value when it
        runs; a value the estimate cannot go without names `no_estimate` (the summary's reason)."""
        entry = self.config.get(key)
        if entry is not None and entry.unresolved:
            data = {"no_estimate": no_estimate} if no_estimate else {}
            self.partial.diagnostics.append(make(
                UNRESOLVED, Severity.INFO, f"{key}: {'; '.join(entry.unresolved)}; its value is "
                "not known statically", entry.prov, key=key, **data))
            return None
        return entry

    def value(self, key: str, default: Any = None) -> Any:
        entry = self.entry(key)
        return default if entry is None else entry.value

    def prov(self, key: str) -> Provenance:
        entry = self.config.get(key)
        if entry is None or entry.default:
            line = f":{entry.line}" if entry is not None and entry.line else ""
            return Provenance(self.anchor.file, self.anchor.line, self.anchor.column,
                              f"{self.framework} {self.version} default {key} ({self.file}{line})")
        return entry.prov

    def put(self, scenario_key: str, value: Any, key: str) -> None:
        self.partial.set(scenario_key, value, self.prov(key))

    def number(self, key: str, minimum: int = 1) -> Optional[int]:
        value = self.value(key)
        if value is None or isinstance(value, bool):
            return None
        try:
            number = int(value) if not isinstance(value, float) or value.is_integer() else None
        except (TypeError, ValueError):
            number = None
        if number is None or number < minimum:
            if not (isinstance(value, int) and value == -1):
                self.bad(key, value, "a whole number")
            return None
        return number

    def truth(self, key: str) -> Optional[bool]:
        value = self.value(key)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        self.bad(key, value, "true or false")
        return None

    def refuse(self, key: str, message: str) -> None:
        """An error: verl itself refuses these settings at start-up."""
        self.partial.diagnostics.append(make(INVALID_VALUE, Severity.ERROR, message,
                                             self.prov(key), key=key))

    def bad(self, key: str, value: Any, what: str) -> None:
        self.partial.diagnostics.append(make(
            INVALID_VALUE, Severity.WARNING, f"{key}: expected {what}, got {value!r} (not read)",
            self.prov(key), key=key))

    def set_bool(self, scenario_key: str, key: str) -> Optional[bool]:
        truth = self.truth(key)
        if truth is not None:
            self.put(scenario_key, truth, key)
        return truth

    def set_share(self, scenario_key: str, key: str) -> None:
        """A share in (0, 1]; anything else (a 400-digit integer too) is a warning, not read."""
        value = self.value(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1:
            self.put(scenario_key, float(value), key)
        elif value is not None:
            self.bad(key, value, "a share in (0, 1]")

    def set_int(self, scenario_key: str, key: str) -> Optional[int]:
        number = self.number(key)
        if number is not None:
            self.put(scenario_key, number, key)
        return number

    def set_ints(self, prefix: str, pairs) -> None:
        """set_int for each (scenario key, key under `prefix`) the config gives."""
        for scenario_key, key in pairs:
            if self.value(prefix + key) is not None:
                self.set_int(scenario_key, prefix + key)

    def report_defaults(self) -> None:
        used = self.config.used_defaults
        if not used:
            return
        names = sorted(used)
        shown = ", ".join(f"{k} = {used[k][0]!r}" for k in names)
        self.partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, f"{self.framework} {self.version} defaults assumed (no "
            f"override gives them; {self.file}): {shown}", self.anchor, key="defaults",
            assumed=[{"key": k, "value": used[k][0], "line": used[k][1]} for k in names]))


def apply(config, partial: Partial, anchor: Provenance, version: str, file: str) -> None:
    """Set the scenario keys the resolved verl config gives; `version` and `file`: the verl
    version its defaults were read at and their source (adapters/verl.py version, source)."""
    read = Reader(config, partial, anchor, version, file)
    partial.set_extra("verl.version", read.version, anchor)
    partial.set("rl.framework", "verl", anchor)
    for key, entry in config.entries.items():
        if not entry.default:   # what the file set: memlint/facts/coverage/verl.json classes it
            partial.set_extra(f"verl.{key}", entry.value, entry.prov)
    world = _topology(read)
    strategy = str(read.value(A + "actor.strategy", "fsdp"))
    _model(read)
    _tokens(read, world, strategy)
    if strategy == "megatron":
        _megatron(read)
    else:
        _fsdp(read, strategy)
    _roles(read)
    _engine(read)
    _refusals(read, world, strategy)
    read.report_defaults()


VALIDATE = "volcengine/verl@f9c855f7 (v0.7.0) "


def _refusals(read: Reader, world: Optional[int], strategy: str) -> None:
    """verl's own start-up checks that these settings fail (main_ppo.py:292 validate_config ->
    utils/config.py validate_config and workers/config/actor.py), each an error where verl raises.
    Only settings whose values are known statically; with use_dynamic_bsz verl checks none."""
    if read.truth(A + "actor.use_dynamic_bsz"):
        return
    micro_key, per_gpu_key = A + "actor.ppo_micro_batch_size", A + "actor.ppo_micro_batch_size_per_gpu"
    micro, per_gpu = read.value(micro_key), read.value(per_gpu_key)
    if micro is not None and per_gpu is not None:
        read.refuse(micro_key, "both actor.ppo_micro_batch_size and actor."
                    "ppo_micro_batch_size_per_gpu are set: verl raises \"You have set both ...\" "
                    f"({VALIDATE}verl/workers/config/actor.py:177-182)")
    batch, mini = read.value("data.train_batch_size"), read.value(A + "actor.ppo_mini_batch_size")
    if _ints(batch, mini) and batch < mini:
        read.refuse(A + "actor.ppo_mini_batch_size", f"data.train_batch_size ({batch}) is "
                    f"smaller than actor.ppo_mini_batch_size ({mini}): verl raises \"train_batch_size"
                    f" must be >= actor.ppo_mini_batch_size\" ({VALIDATE}"
                    "verl/workers/config/actor.py:201-205)")
    n = read.value(A + "rollout.n")
    if not world or not _ints(batch, n):
        return
    if strategy == "megatron":
        parallel = 1
        for name in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                     "context_parallel_size"):
            size = read.value(A + "actor.megatron." + name)
            parallel *= size if _ints(size) else 1
        if world % parallel:
            read.refuse(A + "actor.megatron.tensor_model_parallel_size",
                        f"{world} GPUs are not divisible by the actor's tp x pp x cp ({parallel}):"
                        f" verl asserts \"n_gpus ... must be divisible by model_parallel_size\" "
                        f"({VALIDATE}verl/utils/config.py:95-100)")
            return
        minimal = world // parallel * (per_gpu if _ints(per_gpu) else 1)
    else:
        minimal = world
    if (batch * n) % minimal:
        read.refuse("data.train_batch_size", f"data.train_batch_size x rollout.n ({batch} x {n}"
                    f" = {batch * n}) is not divisible by {minimal} (the GPUs"
                    + (" of a data-parallel micro-batch" if strategy == "megatron" else "")
                    + f"): verl asserts \"real_train_batch_size ... must be divisible by minimal "
                    f"possible batch size\" ({VALIDATE}verl/utils/config.py:109-113)")


def _ints(*values) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)


def _topology(read: Reader) -> Optional[int]:
    nodes, per_node = read.number("trainer.nnodes"), read.number("trainer.n_gpus_per_node")
    if per_node is not None:
        read.put("gpus_per_node", per_node, "trainer.n_gpus_per_node")
    if nodes is not None and per_node is not None:
        read.put("world_size", nodes * per_node, "trainer.n_gpus_per_node")
        return nodes * per_node
    return None


def _model(read: Reader) -> None:
    entry = read.entry(A + "model.path", verdicts.RUNTIME_VALUE)
    if entry is not None and isinstance(entry.value, str) and entry.value.strip() \
            and not entry.default:
        # start-up: the HF trainer reader is needed only here (one shared Hub/folder rule)
        from memlint.adapters.trainer_args import local_or_hub_model

        local_or_hub_model(entry.value.strip(), entry.prov, read.partial)
    elif entry is not None and entry.default:
        read.partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, "actor_rollout_ref.model.path is not given: verl's "
            f"default ({entry.value}) is a placeholder; no memory estimate without a model",
            read.anchor, key="model", no_estimate=verdicts.MODEL_NOT_RESOLVED))
    lora = read.number(A + "model.lora_rank", minimum=0)
    if lora:
        read.put("lora_rank", lora, A + "model.lora_rank")
        targets = read.value(A + "model.target_modules")
        # start-up: the shared LoRA target reader loads only with LoRA
        from memlint.adapters._lora import target_kind

        kind = target_kind(targets)
        if kind is not None:
            read.put("lora_targets", kind, A + "model.target_modules")
    if read.truth(A + "model.use_fused_kernels"):
        # verl's fused kernels compute log-probs and entropy from the hidden states chunk by
        # chunk (verl/utils/kernel/linear_cross_entropy.py): no [tokens, vocab] logits
        read.put("logits.enabled", False, A + "model.use_fused_kernels")


def _tokens(read: Reader, world: Optional[int], strategy: str) -> None:
    prompt = read.number("data.max_prompt_length")
    response = read.number("data.max_response_length")
    if prompt is not None:
        read.put("rl.prompt_len", prompt, "data.max_prompt_length")
    if response is not None:
        read.put("rl.response_len", response, "data.max_response_length")
    if prompt is not None and response is not None:
        read.put("seq_len", prompt + response, "data.max_response_length")
    n = read.set_int("rl.samples_per_prompt", A + "rollout.n") or 1
    batch = read.set_int("rl.prompts_per_step", "data.train_batch_size")
    dynamic = read.truth(A + "actor.use_dynamic_bsz")
    micro = read.number(A + "actor.ppo_micro_batch_size_per_gpu")
    key = A + "actor.ppo_micro_batch_size_per_gpu"
    if micro is None and world:
        total = read.number(A + "actor.ppo_micro_batch_size")
        if total is not None:
            micro, key = max(1, total // world), A + "actor.ppo_micro_batch_size"
    if dynamic:
        read.set_int("rl.update_tokens", A + "actor.ppo_max_token_len_per_gpu")
        read.put("micro_batch", 1, A + "actor.use_dynamic_bsz")
    elif micro is not None:
        read.put("micro_batch", micro, key)
    mini = read.number(A + "actor.ppo_mini_batch_size")
    ulysses = read.number(A + "actor.ulysses_sequence_parallel_size") or 1
    per_gpu = mini * n // max(1, (world or 1) // ulysses) if mini and world else None
    if per_gpu:
        # verl normalizes ppo_mini_batch_size by rollout.n and the data-parallel size
        # (workers/fsdp_workers.py __init__)
        read.put("rl.update_sequences", max(1, per_gpu), A + "actor.ppo_mini_batch_size")
    if per_gpu and micro and not dynamic and strategy != "megatron":
        if per_gpu >= micro and per_gpu % micro == 0:
            read.put("grad_accum", per_gpu // micro, A + "actor.ppo_mini_batch_size")
    if ulysses > 1:
        # DeepSpeed-Ulysses splits each sequence over `ulysses` GPUs (verl/models/transformers/
        # monkey_patch.py): activations and logits per GPU are 1/ulysses of the sequence's
        read.put("cp", ulysses, A + "actor.ulysses_sequence_parallel_size")
    lp_micro = read.number(A + "rollout.log_prob_micro_batch_size_per_gpu")
    if lp_micro is not None:
        read.put("rl.logprob_micro_batch", lp_micro, A + "rollout.log_prob_micro_batch_size_per_gpu")
    if read.truth(A + "rollout.log_prob_use_dynamic_bsz"):
        read.set_int("rl.logprob_tokens", A + "rollout.log_prob_max_token_len_per_gpu")
    ref_micro = read.number(A + "ref.log_prob_micro_batch_size_per_gpu")
    if ref_micro is not None:
        read.put("rl.reference_micro_batch", ref_micro, A + "ref.log_prob_micro_batch_size_per_gpu")
    # use_remove_padding packs each micro-batch's real tokens (flash-attn varlen): its size is
    # the generated lengths' (with dynamic batching: up to the token budget)
    remove = A + ("actor.megatron.use_remove_padding" if strategy == "megatron"
                  else "model.use_remove_padding")   # megatron_actor.py: "thd" packing
    if read.truth(remove):
        read.put("rl.padding_free", True, remove)
    entropy_coeff = read.value(A + "actor.entropy_coeff", 0)
    entropy = bool(read.truth(A + "actor.calculate_entropy")) or (
        isinstance(entropy_coeff, (int, float)) and entropy_coeff != 0)
    read.put("rl.entropy", entropy, A + "actor.entropy_coeff")
    read.set_bool("rl.entropy_chunking", A + "actor.entropy_from_logits_with_chunking")


def _fsdp(read: Reader, strategy: str) -> None:
    fsdp = A + "actor.fsdp_config."
    read.put("framework", "fsdp2", A + "actor.strategy")
    size = read.number(fsdp + "fsdp_size", minimum=-1)
    world = read.partial.settings.get("world_size")
    ulysses = read.number(A + "actor.ulysses_sequence_parallel_size") or 1
    if size is not None and size > 0 and world is not None and world.value > size:
        # HSDP: the states shard within groups of fsdp_size GPUs and replicate across them
        # (fsdp_workers.py:167 create_device_mesh: mesh (world // fsdp_size, fsdp_size)); the
        # Ulysses mesh (world // sp, sp) is built apart from it (fsdp_workers.py:170-176), so the
        # shard group is fsdp_size GPUs whatever the Ulysses size
        read.put("fsdp", "hybrid", fsdp + "fsdp_size")
        read.put("dp_shard", size, fsdp + "fsdp_size")
        read.put("dp_replicate", max(1, world.value // size), fsdp + "fsdp_size")
    else:
        read.put("fsdp", "full", fsdp + "fsdp_size")
    read.set_bool("reshard_after_forward", fsdp + "reshard_after_forward")
    model_dtype = str(read.value(fsdp + "model_dtype", "fp32")).lower()
    # parameters in model_dtype (fp32: the sharded master copy), computed in `dtype`
    precision = "bf16" if model_dtype in ("fp32", "float32") else "pure-bf16"
    read.put("precision", precision, fsdp + "model_dtype")
    recompute = read.truth(A + "model.enable_gradient_checkpointing")
    if recompute is not None:
        read.put("recompute", "full" if recompute else "none",
                 A + "model.enable_gradient_checkpointing")
    if read.truth(A + "model.enable_activation_offload"):
        read.put("offload_activations", True, A + "model.enable_activation_offload")
    read.set_bool("rl.actor_param_offload", fsdp + "param_offload")
    read.set_bool("rl.actor_optimizer_offload", fsdp + "optimizer_offload")
    if strategy == "fsdp2" and read.truth(fsdp + "offload_policy"):
        # FSDP2 CPUOffloadPolicy: sharded parameters, gradients and the step on the CPU
        # (fsdp_workers.py: it replaces param_offload / optimizer_offload)
        read.put("offload_params", "cpu", fsdp + "offload_policy")
        read.put("offload_optimizer", "cpu", fsdp + "offload_policy")
        read.put("rl.actor_param_offload", False, fsdp + "offload_policy")
        read.put("rl.actor_optimizer_offload", False, fsdp + "offload_policy")
    read.put("attention", "flash", A + "model.override_config")


def _megatron(read: Reader) -> None:
    mg = A + "actor.megatron."
    read.put("framework", "megatron", A + "actor.strategy")
    read.put("precision", "bf16", mg + "dtype")
    for scenario_key, key in (("tp", "tensor_model_parallel_size"),
                              ("pp", "pipeline_model_parallel_size"),
                              ("cp", "context_parallel_size"), ("ep", "expert_model_parallel_size"),
                              ("etp", "expert_tensor_parallel_size"),
                              ("vpp", "virtual_pipeline_model_parallel_size")):
        if read.value(mg + key) is not None:
            read.set_int(scenario_key, mg + key)
    read.set_bool("sp", mg + "sequence_parallel")
    if read.truth(mg + "use_distributed_optimizer"):
        read.put("zero", 1, mg + "use_distributed_optimizer")
    granularity = read.value(mg + "override_transformer_config.recompute_granularity")
    if granularity in ("full", "selective"):
        read.put("recompute", granularity, mg + "override_transformer_config.recompute_granularity")
    elif granularity is None:
        read.put("recompute", "none", mg + "override_transformer_config.recompute_granularity")
    read.set_bool("rl.actor_param_offload", mg + "param_offload")
    read.set_bool("rl.actor_optimizer_offload", mg + "optimizer_offload")
    cpu_opt = A + "actor.optim.override_optimizer_config.optimizer_cpu_offload"
    if read.truth(cpu_opt):
        # Megatron's HybridDeviceOptimizer: the step runs on the CPU (ZeRO-Offload-like)
        read.put("offload_optimizer", "cpu", cpu_opt)


def _roles(read: Reader) -> None:
    algorithm = read.value("algorithm.adv_estimator")
    if isinstance(algorithm, str):
        read.put("rl.algorithm", _ALGORITHMS.get(algorithm, algorithm), "algorithm.adv_estimator")
    read.put("rl.placement", "hybrid" if read.truth(A + "hybrid_engine") is not False
             else "separate", A + "hybrid_engine")
    kl = bool(read.truth("algorithm.use_kl_in_reward")) or bool(read.truth(A + "actor.use_kl_loss"))
    lora = read.number(A + "model.lora_rank", minimum=0) or 0
    strategy = str(read.value(A + "actor.strategy", "fsdp"))
    if kl:
        read.put("rl.reference", "adapter" if lora > 0 else "model",
                 A + "actor.use_kl_loss" if read.truth(A + "actor.use_kl_loss")
                 else "algorithm.use_kl_in_reward")
        if strategy != "megatron":
            read.put("rl.reference_offload", True, A + "ref.fsdp_config.param_offload")
            # the reference's parameters in its own model_dtype (fsdp_workers.py
            # _build_model_optimizer: fsdp_config.model_dtype of the role)
            ref_dtype = read.value(A + "ref.fsdp_config.model_dtype")
            if isinstance(ref_dtype, str) and ref_dtype.lower() != str(
                    read.value(A + "actor.fsdp_config.model_dtype", "fp32")).lower():
                read.put("rl.reference_dtype", ref_dtype.lower(),
                         A + "ref.fsdp_config.model_dtype")
        else:
            read.set_bool("rl.reference_offload", A + "ref.megatron.param_offload")
    else:
        read.put("rl.reference", "none", A + "actor.use_kl_loss")
    enable = read.truth("critic.enable")
    critic = enable if enable is not None else read.value("algorithm.adv_estimator") == "gae"
    read.put("rl.critic", bool(critic), "critic.enable" if enable is not None
             else "algorithm.adv_estimator")
    if critic:
        _critic(read)
    if read.truth("reward_model.enable"):
        _reward(read)


def _critic(read: Reader) -> None:
    path = read.entry("critic.model.path")
    actor = read.entry(A + "model.path")
    if path is not None and actor is not None and path.value != actor.value and not path.default:
        read.put("rl.critic_model", str(path.value), "critic.model.path")
    micro = read.number("critic.ppo_micro_batch_size_per_gpu")
    if micro is not None:
        read.put("rl.critic_micro_batch", micro, "critic.ppo_micro_batch_size_per_gpu")
    forward = read.number("critic.forward_micro_batch_size_per_gpu")
    if forward is not None:
        read.put("rl.critic_forward_micro_batch", forward, "critic.forward_micro_batch_size_per_gpu")
    read.set_bool("rl.critic_recompute", "critic.model.enable_gradient_checkpointing")
    read.set_bool("rl.critic_param_offload", "critic.model.fsdp_config.param_offload")
    read.set_bool("rl.critic_optimizer_offload", "critic.model.fsdp_config.optimizer_offload")


def _reward(read: Reader) -> None:
    path = read.entry("reward_model.model.path")
    if path is not None and isinstance(path.value, str):
        read.put("rl.reward_model", path.value, "reward_model.model.path")
    micro = read.number("reward_model.micro_batch_size_per_gpu")
    if micro is not None:
        read.put("rl.reward_micro_batch", micro, "reward_model.micro_batch_size_per_gpu")
    read.set_bool("rl.reward_offload", "reward_model.model.fsdp_config.param_offload")
    if read.truth("reward_model.enable_resource_pool"):
        nodes = read.number("reward_model.nnodes") or 0
        per_node = read.number("reward_model.n_gpus_per_node") or 0
        if nodes * per_node:
            read.put("rl.reward_gpus", nodes * per_node, "reward_model.n_gpus_per_node")


def _engine(read: Reader) -> None:
    r = A + "rollout."
    name = read.value(r + "name")
    if name == "???" or name is None:
        read.partial.diagnostics.append(make(
            UNRESOLVED, Severity.WARNING, "actor_rollout_ref.rollout.name is not set: verl "
            f"{read.version} requires it (`???` in {read.file}); the rollout phase is estimated "
            "as vLLM's", read.anchor, key=r + "name"))
        read.put("engine.name", "vllm", r + "name")
    elif str(name) in ("vllm", "sglang", "hf", "trtllm"):
        read.put("engine.name", str(name), r + "name")
    else:
        read.bad(r + "name", name, "vllm, sglang, hf or trtllm")
    read.set_ints(r, (("engine.tp", "tensor_model_parallel_size"),
                      ("engine.dp", "data_parallel_size"), ("engine.ep", "expert_parallel_size"),
                      ("engine.max_num_batched_tokens", "max_num_batched_tokens"),
                      ("engine.max_num_seqs", "max_num_seqs"),
                      ("engine.max_model_len", "max_model_len")))
    read.set_share("engine.gpu_memory_utilization", r + "gpu_memory_utilization")
    read.set_bool("engine.enforce_eager", r + "enforce_eager")
    dtype = str(read.value(r + "dtype", "bfloat16")).lower()
    if dtype in ("bfloat16", "bf16", "float16", "fp16", "half"):
        read.put("engine.dtype", "fp16" if dtype in ("float16", "fp16", "half") else "bf16",
                 r + "dtype")
    quant = read.value(r + "quantization")
    if isinstance(quant, str) and quant:
        read.put("engine.quantization", quant, r + "quantization")
    for engine in ("vllm", "sglang"):
        kv = read.value(f"{r}engine_kwargs.{engine}.kv_cache_dtype")
        if isinstance(kv, str) and kv:
            read.put("engine.kv_cache_dtype", kv, f"{r}engine_kwargs.{engine}.kv_cache_dtype")
    free = read.truth(r + "free_cache_engine")
    if free is False:
        read.put("engine.sleep_level", 0, r + "free_cache_engine")
        read.partial.set_extra(VERSION_DEPENDENT + "engine_awake", AWAKE_SINCE,
                               read.prov(r + "free_cache_engine"))
    elif read.truth(r + "layered_summon"):
        read.put("engine.sleep_level", 1, r + "layered_summon")
    else:
        read.put("engine.sleep_level", 2, r + "free_cache_engine")
        read.partial.set_extra("engine.sleep_level.source", SLEEP_SOURCE, read.prov(
            r + "free_cache_engine"))
    bucket = read.value(r + "update_weights_bucket_megabytes")
    bucket = read.value(r + "checkpoint_engine.update_weights_bucket_megabytes", bucket)
    if isinstance(bucket, int) and not isinstance(bucket, bool) and bucket > 0:
        key = r + ("checkpoint_engine.update_weights_bucket_megabytes"
                   if read.config.entries.get(r + "checkpoint_engine.update_weights_bucket_megabytes")
                   else "update_weights_bucket_megabytes")
        read.put("rl.sync_bucket", bucket << 20, key)
