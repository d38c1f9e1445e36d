"""What a composed EasyR1 config means for memory: EasyR1 keys -> scenario keys (the rules and
their sources are in memlint/adapters/easyr1.py's docstring)."""
from __future__ import annotations

TYPE_CHECKING = False   # start-up: typing is for the type checker only

if TYPE_CHECKING:
    from typing import Optional

from memlint.adapters.verl_mapping import Reader as VerlReader
from memlint.ir import Partial, Provenance

W = "worker."
SRC = "hiyouga/EasyR1@b44b311b "
_ALGORITHMS = {"gae": "ppo", "grpo": "grpo", "rloo": "rloo", "reinforce_plus_plus": "reinforce++",
               "remax": "remax", "dapo": "grpo"}


class Reader(VerlReader):
    framework = "EasyR1"

    def __init__(self, config, partial: Partial, anchor: Provenance, version: str):
        self.config, self.partial, self.anchor = config, partial, anchor
        self.version = version   # the commit of EasyR1's defaults (adapters/easyr1.py)
        self.file = "its dataclasses"

    def prov(self, key: str) -> Provenance:
        entry = self.config.entries.get(key)
        if entry is None or entry.default:
            where = f" ({entry.line})" if entry is not None and entry.line else ""
            return Provenance(self.anchor.file, self.anchor.line, self.anchor.column,
                              f"EasyR1@{self.version} default {key}{where}")
        return entry.prov


def apply(config, partial: Partial, anchor: Provenance, version: str) -> None:
    read = Reader(config, partial, anchor, version)
    partial.set("rl.framework", "easyr1", anchor)
    for key, entry in config.entries.items():
        if not entry.default:
            partial.set_extra(f"easyr1.{key}", entry.value, entry.prov)
    nodes, per_node = read.number("trainer.nnodes"), read.number("trainer.n_gpus_per_node")
    world = nodes * per_node if nodes and per_node else None
    if per_node:
        read.put("gpus_per_node", per_node, "trainer.n_gpus_per_node")
    if world:
        read.put("world_size", world, "trainer.n_gpus_per_node")
    _model(read)
    seq = _tokens(read, world)
    _actor(read, seq)
    _roles(read)
    _engine(read, seq)
    read.report_defaults()


def _model(read: Reader) -> None:
    entry = read.entry(W + "actor.model.model_path")
    if entry is not None and isinstance(entry.value, str) and entry.value.strip():
        # start-up: the shared Hub-id / local-folder rule of the HF trainer reader
        from memlint.adapters.hf_trainer import local_or_hub_model

        local_or_hub_model(entry.value.strip(), read.prov(W + "actor.model.model_path"),
                           read.partial)
    lora = read.number(W + "actor.model.lora.rank", minimum=0) or 0
    if lora:
        read.put("lora_rank", lora, W + "actor.model.lora.rank")
        read.put("lora_targets", "all-linear", W + "actor.model.lora.target_modules")


def _tokens(read: Reader, world: Optional[int]) -> int:
    prompt = read.number("data.max_prompt_length") or 0
    response = read.number("data.max_response_length") or 0
    if prompt:
        read.put("rl.prompt_len", prompt, "data.max_prompt_length")
    if response:
        read.put("rl.response_len", response, "data.max_response_length")
    if prompt and response:
        read.put("seq_len", prompt + response, "data.max_response_length")
    n = read.set_int("rl.samples_per_prompt", W + "rollout.n") or 1
    read.set_int("rl.prompts_per_step", "data.rollout_batch_size")
    actor = W + "actor."
    ulysses = read.number(actor + "ulysses_size") or 1
    if ulysses > 1:
        read.put("cp", ulysses, actor + "ulysses_size")
    read.set_bool("rl.padding_free", actor + "padding_free")
    update = read.number(actor + "micro_batch_size_per_device_for_update")
    experience = read.number(actor + "micro_batch_size_per_device_for_experience")
    seq = prompt + response
    if read.truth(actor + "dynamic_batching"):
        # packed micro-batches of micro x the longest sequence (dp_actor.py:198, :242)
        if update and seq:
            read.put("rl.update_tokens", update * seq, actor + "micro_batch_size_per_device_for_update")
            read.put("micro_batch", 1, actor + "dynamic_batching")
        if experience and seq:
            read.put("rl.logprob_tokens", experience * seq,
                     actor + "micro_batch_size_per_device_for_experience")
    else:
        if update:
            read.put("micro_batch", update, actor + "micro_batch_size_per_device_for_update")
        if experience:
            read.put("rl.logprob_micro_batch", experience,
                     actor + "micro_batch_size_per_device_for_experience")
    batch = read.number(actor + "global_batch_size")
    if batch and world:
        # fsdp_workers.py:141-146: x rollout.n, over the data-parallel GPUs
        per_device = max(1, batch * n // max(1, world // ulysses))
        read.put("rl.update_sequences", per_device, actor + "global_batch_size")
        if update and not read.truth(actor + "dynamic_batching"):
            read.put("grad_accum", max(1, per_device // update), actor + "global_batch_size")
    return seq


def _actor(read: Reader, seq: int) -> None:
    actor = W + "actor."
    read.put("framework", "fsdp2", actor + "strategy")   # memlint's FSDP model, as verl's reader
    read.put("fsdp", "full" if read.truth(actor + "fsdp.enable_full_shard") is not False
             else "shard_grad_op", actor + "fsdp.enable_full_shard")
    size = read.number(actor + "fsdp.fsdp_size")
    if size and size > 1:
        read.put("dp_shard", size, actor + "fsdp.fsdp_size")
    dtype = str(read.value(actor + "fsdp.torch_dtype") or "fp32").lower()
    # parameters in torch_dtype (fp32 by default: fsdp_workers.py:198-199), computed in bf16
    read.put("precision", "bf16" if dtype in ("fp32", "float32") else "pure-bf16",
             actor + "fsdp.torch_dtype")
    read.put("recompute", "full" if read.truth(actor + "model.enable_gradient_checkpointing")
             is not False else "none", actor + "model.enable_gradient_checkpointing")
    read.put("attention", "flash", actor + "padding_free")
    if read.truth(actor + "fsdp.enable_cpu_offload"):
        # FSDP CPUOffload(offload_params=True): parameters and gradients on the host, the step there
        read.put("offload_params", "cpu", actor + "fsdp.enable_cpu_offload")
        read.put("offload_optimizer", "cpu", actor + "fsdp.enable_cpu_offload")
    else:
        read.set_bool("rl.actor_param_offload", actor + "offload.offload_params")
        read.set_bool("rl.actor_optimizer_offload", actor + "offload.offload_optimizer")


def _roles(read: Reader) -> None:
    algorithm = read.value("algorithm.adv_estimator")
    if isinstance(algorithm, str):
        read.put("rl.algorithm", _ALGORITHMS.get(algorithm, algorithm), "algorithm.adv_estimator")
    read.put("rl.placement", "hybrid" if read.truth(W + "hybrid_engine") is not False
             else "separate", W + "hybrid_engine")
    if read.truth("algorithm.disable_kl"):
        read.put("rl.reference", "none", "algorithm.disable_kl")
    else:
        lora = read.number(W + "actor.model.lora.rank", minimum=0) or 0
        read.put("rl.reference", "adapter" if lora else "model", "algorithm.disable_kl")
        ref = W + "ref."
        offload = bool(read.truth(ref + "fsdp.enable_cpu_offload")) or bool(
            read.truth(ref + "offload.offload_params"))
        read.put("rl.reference_offload", offload, ref + "fsdp.enable_cpu_offload")
        dtype = str(read.value(ref + "fsdp.torch_dtype") or "bf16").lower()
        read.put("rl.reference_dtype", dtype, ref + "fsdp.torch_dtype")
    critic = read.value("algorithm.adv_estimator") == "gae"
    read.put("rl.critic", critic, "algorithm.adv_estimator")
    if critic:
        c = W + "critic."
        path = read.entry(c + "model.model_path")
        if path is not None and isinstance(path.value, str) and path.value.strip():
            read.put("rl.critic_model", path.value.strip(), c + "model.model_path")
        read.set_int("rl.critic_micro_batch", c + "micro_batch_size_per_device_for_update")
        read.set_int("rl.critic_forward_micro_batch",
                     c + "micro_batch_size_per_device_for_experience")
        read.set_bool("rl.critic_recompute", c + "model.enable_gradient_checkpointing")
        read.set_bool("rl.critic_param_offload", c + "offload.offload_params")
        read.set_bool("rl.critic_optimizer_offload", c + "offload.offload_optimizer")


def _engine(read: Reader, seq: int) -> None:
    r = W + "rollout."
    name = read.value(r + "name")
    if not isinstance(name, str):
        return
    read.put("engine.name", name, r + "name")
    read.set_int("engine.tp", r + "tensor_parallel_size")
    read.set_share("engine.gpu_memory_utilization", r + "gpu_memory_utilization")
    read.set_int("engine.max_num_batched_tokens", r + "max_num_batched_tokens")
    length = read.number(r + "max_model_len")
    if length or seq:
        # vllm_rollout_spmd.py: max_model_len or prompt_length + response_length
        read.put("engine.max_model_len", length or seq, r + "max_model_len")
    read.set_bool("engine.enforce_eager", r + "enforce_eager")
    dtype = read.value(r + "dtype")
    if isinstance(dtype, str):
        read.put("engine.dtype", dtype, r + "dtype")
    # vllm_rollout_spmd.py:143-149: enable_sleep_mode, sleep(level=1) between rollouts
    read.put("engine.sleep_level", 1, r + "name")
