"""What a composed NeMo-RL config means for memory: NeMo-RL keys -> scenario keys.

Read at NVIDIA-NeMo/RL@81aa43dd (v0.7.0); each rule names the code it follows:
- the policy trains under DTensor/FSDP2 (`policy.dtensor_cfg.enabled`) with the Automodel worker
  when `_v2` (models/policy/lm_policy.py:134-139) else the DTensor v1 worker; or under Megatron
  (`megatron_cfg.enabled`), whose worker's phases memlint has not read (a not-modeled warning);
- parameters load in fp32 (automodel/setup.py:330, dtensor_policy_worker.py:276) and compute in
  `precision` (FSDP2 MixedPrecisionPolicy param_dtype, setup.py:484-487); `cpu_offload` is FSDP2's
  CPUOffloadPolicy; `dp_replicate_size` > 1 is HSDP (setup.py:464-470);
- `train_micro_batch_size` sequences of `max_total_sequence_length` tokens per micro-batch, or
  packed / dynamic micro-batches of `train_mb_tokens` tokens (sequence_packing, dynamic_batching);
  log-prob passes at `logprob_batch_size` (or `logprob_mb_tokens`);
- GRPO keeps a reference when `loss_fn.reference_policy_kl_penalty` > 0 (algorithms/grpo.py:840),
  DPO always (algorithms/dpo.py:279): the memory model's NeMo-RL record places it (pinned host);
- colocated generation (`generation.colocated.enabled`): the vLLM worker sleeps at level 1 after
  each generation (generation/vllm/vllm_worker.py:452 enable_sleep_mode, :1009 sleep(level=1));
  the refit offloads the optimizer, sends the weights, then offloads the model
  (offload_before_refit / offload_after_refit), which prepare_for_lp_inference and
  prepare_for_training bring back: the policy's states are on the host between its passes;
  non-colocated: generation on `colocated.resources` GPUs (grpo.py:606-660).
"""
from __future__ import annotations

from memlint import verdicts
from memlint.adapters.verl_mapping import Reader as VerlReader
from memlint.diagnostics import INVALID_VALUE, UNKNOWN_KEY, UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance
from memlint.keys import dtype_name

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

P = "policy."
D = P + "dtensor_cfg."
G = P + "generation."
SRC = "NVIDIA-NeMo/RL@81aa43dd (v0.7.0) "
NAMESPACE = "nemo_rl."
MAX_UNKNOWN = 20   # unknown keys told one by one (with a close match); the rest in one warning
ALGORITHMS = ("grpo", "dpo", "sft", "rm", "ppo", "distillation")
# with a rollout engine: GRPO (grpo.py), PPO (ppo.py: its value model is not counted, ML107) and
# on-policy distillation (distillation.py: its teacher is not counted, ML107)
ONLINE = ("grpo", "ppo", "distillation")
_ESTIMATORS = {"grpo": "grpo", "reinforce_plus_plus": "reinforce++"}
_PRECISIONS = ("bf16", "fp16", "fp32")   # policy.precision, as keys.dtype_name names them
# blocks whose inner keys NeMo-RL passes on (kwargs, datasets, loggers): any key accepted
OPEN = ("data.", "env.", "logger.", "checkpointing.", P + "optimizer.", P + "tokenizer.",
        P + "hf_config_overrides.", D + "automodel_kwargs.", G + "vllm_kwargs.",
        P + "megatron_cfg.", "teacher.", "value.", G + "mcore_generation_config.",
        G + "sglang_cfg.")


class Reader(VerlReader):
    framework = "NeMo-RL"

    def __init__(self, config, partial: Partial, anchor: Provenance):
        self.config, self.partial, self.anchor = config, partial, anchor
        self.version, self.file = "v0.7.0", "its parent configs"

    def entry(self, key: str, no_estimate: Optional[str] = None):
        """The key's entry; one whose interpolation memlint cannot resolve is a warning and
        unknown (None)."""
        entry = self.config.get(key)
        if entry is not None and entry.unresolved:
            data = {"no_estimate": no_estimate} if no_estimate else {}
            self.partial.diagnostics.append(make(
                UNRESOLVED, Severity.WARNING, f"{key}: {entry.unresolved[0]}; its value is not "
                "known statically, so the estimate does without it", entry.prov, key=key,
                **data))
            return None
        return entry


def apply(config, partial: Partial, anchor: Provenance) -> None:
    read = Reader(config, partial, anchor)
    _record(read)
    algorithm = next((a for a in ALGORITHMS if any(k.startswith(a + ".")
                                                  for k in config.entries)), None)
    world, engine_gpus = _topology(read)
    backend = _backend(read, world)
    _model(read)
    _batches(read, world, algorithm)
    if backend != "megatron":
        _dtensor(read, world)
    if algorithm in ONLINE:
        _online(read, algorithm, backend)
        _generation(read, engine_gpus)
    elif algorithm == "dpo":
        read.put("rl.algorithm", "dpo", "dpo.reference_policy_kl_penalty")
        read.put("rl.framework", _framework(read, backend), "dpo.reference_policy_kl_penalty")
        read.put("rl.paired", True, "dpo.reference_policy_kl_penalty")
        # dpo.py:279 Policy(..., init_reference_model=True)
        read.put("rl.reference", "model", "dpo.reference_policy_kl_penalty")


def _record(read: Reader) -> None:
    """Every composed key as extra nemo_rl.<key> (memlint/facts/coverage/nemo_rl.json classes
    them); a key the table lacks, outside the blocks NeMo-RL passes on, is a warning."""
    # start-up: the coverage table loads with the reader
    from memlint.facts.coverage import table

    spec = table("nemo_rl")
    known, unknown = None, []
    for key, entry in read.config.entries.items():
        read.partial.set_extra(NAMESPACE + key, entry.value, entry.prov)
        if spec.memory_class(key) is None and not key.startswith(OPEN) \
                and not key.endswith("._override_"):
            unknown.append((key, entry.prov))
    for key, prov in unknown[:MAX_UNKNOWN]:
        if known is None:
            known = sorted(set(spec.modeled) | set(spec.not_modeled) | spec.neutral)
        _unknown(key, prov, known, read.partial)
    if len(unknown) > MAX_UNKNOWN:
        rest = [k for k, _ in unknown[MAX_UNKNOWN:]]
        read.partial.diagnostics.append(make(
            UNKNOWN_KEY, Severity.WARNING, f"{len(rest)} more keys memlint does not know of "
            f"NeMo-RL v0.7.0's configs: {', '.join(rest[:5])}, ...", unknown[MAX_UNKNOWN][1],
            key=rest[0]))


def _unknown(key: str, prov: Provenance, known: list, partial: Partial) -> None:
    # start-up: the close-match helper loads only for an unknown key
    from memlint.keys import suggest

    hint = suggest(key, known)
    partial.diagnostics.append(make(
        UNKNOWN_KEY, Severity.WARNING, f"{key} is not a key memlint knows of NeMo-RL v0.7.0's "
        "configs (memlint/facts/coverage/nemo_rl.json): its memory effect, if any, is not counted"
        + (f"; did you mean {hint!r}?" if hint else ""), prov, key=key))


def _framework(read: Reader, backend: str) -> str:
    if backend == "megatron":
        return "nemo-rl-megatron"
    return "nemo-rl" if read.truth(D + "_v2") else "nemo-rl-v1"


def _topology(read: Reader) -> tuple:
    """(training GPUs, generation GPUs or None): grpo.py:567-660 takes non-colocated generation's
    GPUs out of the cluster (within the node on one node, whole nodes on several)."""
    per_node, nodes = read.number("cluster.gpus_per_node"), read.number("cluster.num_nodes")
    if per_node is None or nodes is None:
        return None, None
    read.put("gpus_per_node", per_node, "cluster.gpus_per_node")
    world, engine = per_node * nodes, None
    res = G + "colocated.resources."
    if "grpo.num_prompts_per_step" in read.config.entries and \
            read.truth(G + "colocated.enabled") is False:
        gen_per_node = read.number(res + "gpus_per_node")
        gen_nodes = read.number(res + "num_nodes")
        if nodes == 1 and gen_per_node and gen_per_node < per_node:
            engine = gen_per_node
        elif nodes > 1 and gen_nodes and gen_nodes < nodes and gen_per_node == per_node:
            engine = gen_nodes * per_node
        if engine is None:
            read.partial.diagnostics.append(make(
                INVALID_VALUE, Severity.WARNING, "non-colocated generation: colocated.resources "
                f"({gen_nodes} nodes x {gen_per_node} GPUs) does not split cluster ({nodes} x "
                f"{per_node}) as grpo.py:606-660 asserts; the generation GPUs are not known",
                read.prov(res + "gpus_per_node"), key=res + "gpus_per_node"))
        else:
            world -= engine
    read.put("world_size", world, "cluster.num_nodes")
    return world, engine


def _backend(read: Reader, world: Optional[int]) -> str:
    megatron = bool(read.truth(P + "megatron_cfg.enabled"))
    dtensor = bool(read.truth(D + "enabled"))
    if megatron and dtensor:
        read.refuse(D + "enabled", "policy.megatron_cfg.enabled and policy.dtensor_cfg.enabled are "
                    "both true: NeMo-RL raises \"Configure either Megatron ... or DTensor ..., not "
                    f"both\" ({SRC}nemo_rl/models/policy/lm_policy.py:93-97)")
    elif not megatron and not dtensor:
        message = ("neither policy.megatron_cfg.enabled nor policy.dtensor_cfg.enabled is true: "
                   "NeMo-RL raises \"Please either set policy.megatron_cfg.enabled=true ... or ... "
                   f"dtensor_cfg.enabled=true\" ({SRC}nemo_rl/models/policy/lm_policy.py:128-132)")
        if read.truth(D + "enabled") is False and not _unread_parents(read.partial):
            read.refuse(D + "enabled", message)
        else:   # not set here: a parent memlint did not read, or the command line, may set it
            read.partial.diagnostics.append(make(
                UNRESOLVED, Severity.WARNING, message + "; this config does not set "
                "policy.dtensor_cfg.enabled", read.prov(D + "enabled"), key=D + "enabled"))
    backend = "megatron" if megatron else "dtensor"
    if backend == "megatron":
        mg = P + "megatron_cfg."
        read.put("framework", "megatron", mg + "enabled")
        sizes = {"tp": "tensor_model_parallel_size", "pp": "pipeline_model_parallel_size",
                 "cp": "context_parallel_size", "ep": "expert_model_parallel_size"}
    else:
        sizes = {"tp": "tensor_parallel_size", "cp": "context_parallel_size"}
        mg = D
    product, key = 1, None
    for scenario_key, name in sizes.items():
        size = read.number(mg + name)
        if size is not None:
            read.put(scenario_key, size, mg + name)
            if scenario_key != "ep":
                product, key = product * size, key or mg + name
    if world and key and (world < product or world % product):
        read.refuse(key, f"{world} training GPUs are not divisible by PP x CP x TP ({product}): "
                    "NeMo-RL raises \"World size ... must be divisible by PP * CP * TP\" "
                    f"({SRC}nemo_rl/models/policy/lm_policy.py:197-208)")
    return backend


def _unread_parents(partial: Partial) -> bool:
    return any(d.data.get("parent") for d in partial.diagnostics)


def _model(read: Reader) -> None:
    entry = read.entry(P + "model_name", verdicts.RUNTIME_VALUE)
    if entry is not None and isinstance(entry.value, str) and entry.value.strip():
        # start-up: the shared Hub-id / local-folder rule of the HF trainer reader
        from memlint.adapters.trainer_args import local_or_hub_model

        local_or_hub_model(entry.value.strip(), entry.prov, read.partial)
    precision = read.value(P + "precision")
    if isinstance(precision, str) and dtype_name(precision) in _PRECISIONS:
        # fp32 parameters (the sharded master copy), computed in `precision`
        read.put("precision", dtype_name(precision), P + "precision")
    elif precision is not None:
        read.bad(P + "precision", precision, "bfloat16, float16 or float32")


def _batches(read: Reader, world: Optional[int], algorithm: Optional[str]) -> None:
    read.set_int("seq_len", P + "max_total_sequence_length")
    micro = read.number(P + "train_micro_batch_size")
    packed = next((b for b in ("sequence_packing", "dynamic_batching")
                   if read.truth(f"{P}{b}.enabled")), None)
    rl = algorithm in ONLINE + ("dpo",)
    if packed is not None:
        tokens = read.number(f"{P}{packed}.train_mb_tokens")
        read.put("micro_batch", 1, f"{P}{packed}.enabled")
        if rl:
            read.put("rl.padding_free", packed == "sequence_packing", f"{P}{packed}.enabled")
            if tokens:
                read.put("rl.update_tokens", tokens, f"{P}{packed}.train_mb_tokens")
            read.set_int("rl.logprob_tokens", f"{P}{packed}.logprob_mb_tokens")
        elif tokens:
            # a packed micro-batch: one row of up to train_mb_tokens tokens
            read.put("seq_len", tokens, f"{P}{packed}.train_mb_tokens")
    elif micro is not None:
        read.put("micro_batch", micro, P + "train_micro_batch_size")
    if rl:
        read.set_int("rl.logprob_micro_batch", P + "logprob_batch_size")
    batch = read.number(P + "train_global_batch_size")
    dp = max(1, (world or 1) // _model_parallel(read))
    if batch and world and micro and packed is None and batch % (micro * dp) == 0:
        read.put("grad_accum", batch // (micro * dp), P + "train_global_batch_size")
    if batch and world and rl:
        read.put("rl.update_sequences", max(1, batch // dp), P + "train_global_batch_size")


def _model_parallel(read: Reader) -> int:
    """tp x cp x pp as the backend's sizes set them (_backend): the data-parallel divisor."""
    product = 1
    for key in ("tp", "cp", "pp"):
        setting = read.partial.settings.get(key)
        product *= setting.value if setting is not None else 1
    return max(1, product)


def _dtensor(read: Reader, world: Optional[int]) -> None:
    read.put("framework", "fsdp2", D + "enabled")
    replicate = read.number(D + "dp_replicate_size") or 1
    dp = (world or 0) // _model_parallel(read)
    if replicate > 1 and dp and dp % replicate == 0:
        # HSDP: shard within dp / dp_replicate_size GPUs (automodel/setup.py:464-470)
        read.put("fsdp", "hybrid", D + "dp_replicate_size")
        read.put("dp_replicate", replicate, D + "dp_replicate_size")
        read.put("dp_shard", dp // replicate, D + "dp_replicate_size")
    else:
        read.put("fsdp", "full", D + "enabled")
    read.set_bool("sp", D + "sequence_parallel")
    checkpointing = read.truth(D + "activation_checkpointing")
    if checkpointing is not None:
        read.put("recompute", "full" if checkpointing else "none", D + "activation_checkpointing")
    read.put("attention", "flash", D + "enabled")
    if read.truth(D + "cpu_offload"):
        # FSDP2 CPUOffloadPolicy: sharded parameters, gradients and the step on the CPU
        read.put("offload_params", "cpu", D + "cpu_offload")
        read.put("offload_optimizer", "cpu", D + "cpu_offload")
    lora = D + "lora_cfg."
    if read.truth(lora + "enabled"):
        rank = read.number(lora + "dim")
        if rank:
            read.put("lora_rank", rank, lora + "dim")
        if read.truth(lora + "match_all_linear") is not False:
            read.put("lora_targets", "all-linear", lora + "match_all_linear")
        else:
            # start-up: the shared LoRA target reader loads only with LoRA
            from memlint.adapters._lora import target_kind

            read.put("lora_targets", target_kind(read.value(lora + "target_modules")),
                     lora + "target_modules")


def _online(read: Reader, algorithm: str, backend: str) -> None:
    a = algorithm + "."
    estimator = read.value(a + "adv_estimator.name", "grpo") if algorithm == "grpo" else algorithm
    read.put("rl.algorithm", _ESTIMATORS.get(str(estimator), str(estimator)),
             a + ("adv_estimator.name" if algorithm == "grpo" else "num_prompts_per_step"))
    read.put("rl.framework", _framework(read, backend), D + "_v2")
    read.set_int("rl.samples_per_prompt", a + "num_generations_per_prompt")
    read.set_int("rl.prompts_per_step", a + "num_prompts_per_step")
    total = read.number(P + "max_total_sequence_length")
    new = read.number(G + "max_new_tokens")
    if total:
        # a sequence is prompt + response within max_total_sequence_length; the response up to
        # max_new_tokens (vLLM cuts it at max_model_len): its lengths bound the packed batches
        response = min(new or total, total)
        read.put("rl.response_len", response, G + "max_new_tokens" if new else
                 P + "max_total_sequence_length")
        if total > response:
            read.put("rl.prompt_len", total - response, P + "max_total_sequence_length")
    penalty = read.value("loss_fn.reference_policy_kl_penalty", 0)
    kl = isinstance(penalty, (int, float)) and not isinstance(penalty, bool) and penalty > 0
    # grpo.py:840 init_reference_model = loss_config.reference_policy_kl_penalty > 0; ppo.py:473
    # leaves Policy's init_reference_model=True (lm_policy.py:77); distillation.py:586 False
    reference = {"grpo": kl, "ppo": True, "distillation": False}[algorithm]
    read.put("rl.reference", "model" if reference else "none",
             "loss_fn.reference_policy_kl_penalty")


def _generation(read: Reader, engine_gpus: Optional[int]) -> None:
    backend = read.value(G + "backend")
    if backend not in ("vllm", "sglang"):
        if backend is not None:
            read.partial.diagnostics.append(make(
                UNRESOLVED, Severity.WARNING, f"policy.generation.backend {backend!r}: memlint "
                "models vLLM and SGLang rollout engines only; the rollout phase is not estimated",
                read.prov(G + "backend"), key=G + "backend"))
        return
    read.put("engine.name", backend, G + "backend")
    colocated = read.truth(G + "colocated.enabled") is not False
    if colocated:
        # one vLLM worker process beside each policy worker on every GPU (Ray actors)
        read.put("rl.placement", "colocated", G + "colocated.enabled")
        # the refit offloads the optimizer and then the model (grpo.py refit, dtensor workers
        # offload_before_refit / offload_after_refit): on the host between the policy's passes
        read.put("rl.actor_param_offload", True, G + "colocated.enabled")
        read.put("rl.actor_optimizer_offload", True, G + "colocated.enabled")
        read.put("engine.sleep_level", 1, G + "colocated.enabled")
    else:
        read.put("rl.placement", "separate", G + "colocated.enabled")
        if engine_gpus:
            read.put("engine.gpus", engine_gpus, G + "colocated.resources.gpus_per_node")
        # prepare_for_lp_inference moves the optimizer off only with offload_optimizer_for_logprob
        if read.truth(P + "offload_optimizer_for_logprob"):
            read.put("rl.actor_optimizer_offload", True, P + "offload_optimizer_for_logprob")
    if backend != "vllm":
        return
    v = G + "vllm_cfg."
    read.set_ints(v, (("engine.tp", "tensor_parallel_size"),
                      ("engine.pp", "pipeline_parallel_size"),
                      ("engine.ep", "expert_parallel_size"),
                      ("engine.max_model_len", "max_model_len")))
    read.set_share("engine.gpu_memory_utilization", v + "gpu_memory_utilization")
    read.set_bool("engine.enforce_eager", v + "enforce_eager")
    precision = read.value(v + "precision")
    if isinstance(precision, str) and dtype_name(precision) in ("bf16", "fp16"):
        read.put("engine.dtype", dtype_name(precision), v + "precision")
    kv = read.value(v + "kv_cache_dtype")
    if isinstance(kv, str) and kv and kv != "auto":
        read.put("engine.kv_cache_dtype", kv, v + "kv_cache_dtype")
