"""The RL run on one GPU group, resolved once: its roles, engine, and the tokens of each pass.

Tokens per pass, per GPU: a log-prob pass sees `logprob_micro_batch` sequences of prompt +
response tokens (or `logprob_tokens` with dynamic batching); an update micro-batch
`micro_batch` sequences (or `update_tokens`); the logits cover the whole sequence or only the
response (the framework's convention). Sequences are taken at their full length: packing and
padding removal can only make them shorter, so the estimate is the worst micro-batch.
"""
from __future__ import annotations

from memlint.memory.rl.engine import EngineBudget, EngineSettings, budget
from memlint.memory.rl.frameworks import RLConventions
from memlint.memory.rl.roles import Role, derived, frozen_role, trained_role
from memlint.memory.rl.shape import engine_shape
from memlint.memory.terms import Term
from memlint.records import field, record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

# the defaults of an engine a scenario names without its settings (vLLM 0.12.0 engine args on a
# GPU of >= 70 GiB: vllm/engine/arg_utils.py:1827-1835, LLM_CLASS usage: 16384 tokens, 1024 seqs)
ENGINE_TOKENS, ENGINE_SEQS = 16384, 1024


@record(frozen=True)
class Group:
    """GPUs that hold the same roles (and maybe the engine): one stage of the RL estimate."""

    name: str
    roles: tuple
    engine: bool
    gpus: Optional[int]

    @property
    def label(self) -> str:
        held = list(self.roles) + (["engine"] if self.engine else [])
        count = f", {self.gpus} GPUs" if self.gpus else ""
        return f"{' + '.join(held)}{count}"


@record
class Plan:
    conv: RLConventions
    actor: Role
    roles: list
    engine: Optional[EngineBudget]
    sleep_level: int
    tp: int
    cp: int
    world: int
    sync_terms: list = field(default_factory=list)
    logprob_tokens: int = 0
    logprob_entropy: bool = False
    entropy_chunking: bool = False
    reference_tokens: int = 0
    adapter_reference: bool = False
    critic_tokens: int = 0
    reward_tokens: int = 0
    critic_update_tokens: int = 0
    update_logit_tokens: int = 0
    update_entropy: bool = False
    host_terms: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    groups: list = field(default_factory=list)

    def role(self, name: str) -> Optional[Role]:
        return next((r for r in self.roles if r.name == name), None)

    def host_of(self, group: Group) -> list:
        terms = []
        for role in self.roles:
            if role.name in group.roles and role.offloaded:
                terms += list(role.offloaded[0])
        if group.engine:
            terms += [t for t in self.host_terms if t.name == "host.engine_weights"]
        return terms


def build(scenario, context) -> Plan:
    rl, eng, tr = scenario.rl, scenario.engine, scenario.training
    conv = context.require("conventions").rl
    arch, counts = context.require("architecture"), context.require("counts")
    dt, topo = context.require("dtypes"), context.topology
    shape = engine_shape(arch, counts, scenario.model.config)
    prompt = rl.prompt_len or 0
    response = rl.response_len or 0
    seq = prompt + response if prompt and response else tr.seq_len
    online = eng.name != "none"   # offline preference training has no rollout nor old log-probs
    # GRPO in TRL keeps the completion's logits only; preference losses read every token's
    logit_seq = seq if conv.logits_over_prompt or not response or not online else response
    world = topo.world or 1
    step_sequences = (-(-rl.prompts_per_step * rl.samples_per_prompt // world)
                      if rl.prompts_per_step else None)
    # a dynamic token budget holds at most the tokens its sequences have
    update_tokens = _capped(rl.update_tokens, rl.update_sequences, seq)
    # chosen and rejected in one forward: twice the sequences of a micro-batch (DPO family)
    pair = 2 if rl.paired else 1
    micro = 1 if update_tokens else tr.micro_batch * pair
    reward_training = rl.algorithm == "reward"   # a reward model: a value head, no logits
    actor = trained_role("actor", derived(scenario, micro_batch=micro,
                                          seq_len=update_tokens or seq,
                                          config={"tie_word_embeddings": True}
                                          if reward_training else None),
                         shape, rl.actor_param_offload, rl.actor_optimizer_offload,
                         value_head=reward_training, context=context)
    roles = [actor]
    plan = Plan(conv, actor, roles, None, eng.sleep_level, topo.tp, topo.cp,
                topo.world or 1)
    plan.update_logit_tokens = update_tokens or micro * logit_seq
    plan.update_entropy = rl.entropy
    plan.entropy_chunking = rl.entropy_chunking
    lora = tr.lora_rank > 0
    # old log-probs: verl computes them with the entropy unless LoRA (fsdp_workers.py
    # compute_log_prob: calculate_entropy=not is_lora)
    logprob_budget = _capped(rl.logprob_tokens, step_sequences, seq)
    plan.logprob_tokens = _tokens(logprob_budget, rl.logprob_micro_batch, logit_seq,
                                  micro) if online else 0
    plan.logprob_entropy = conv.old_logprob_entropy and not lora
    frozen_bytes = dt.param
    ref_bytes = {"fp32": 4, "bf16": 2, "fp16": 2}.get(rl.reference_dtype or "", frozen_bytes)
    # a frozen model's parameters are sharded only where the trainer shards parameters (ZeRO-3,
    # FSDP); under ZeRO-1/2 each GPU holds it whole (OpenRLHF get_ds_eval_config: stage 0)
    par = scenario.parallelism
    params_sharded = par.zero >= 3 or par.fsdp in ("full", "hybrid")
    shard = topo.shard if params_sharded and topo.shard > 1 else 1
    swapped = rl.reference == "model" and conv.reference_swapped_in and not rl.reference_model
    if swapped:
        plan.host_terms.append(_swapped_reference(shape, dt.param, shard, conv))
    elif rl.reference == "model":
        on_host = rl.reference_offload or (conv.reference_on_host and shard > 1)
        ref_shard = _frozen_shard(scenario, rl.reference_gpus, shard)
        roles.append(frozen_role("reference", shape, ref_bytes, ref_shard, on_host,
                                 dt.compute, False, conv.reference_source
                                 or "a frozen copy of the policy"))
    plan.adapter_reference = rl.reference == "adapter" or swapped
    if rl.reference in ("model", "adapter"):
        sequences = rl.reference_micro_batch or rl.logprob_micro_batch
        plan.reference_tokens = _tokens(logprob_budget, sequences * pair if sequences
                                        else None, logit_seq, micro)
    if rl.critic:
        critic_micro = rl.critic_micro_batch or micro
        critic_scn = derived(scenario, micro_batch=1 if update_tokens else critic_micro,
                             world=rl.critic_gpus,
                             seq_len=update_tokens or seq,
                             recompute=None if rl.critic_recompute is None else (
                                 "full" if rl.critic_recompute else "none"),
                             config={"tie_word_embeddings": True}, lora=0)
        roles.append(trained_role("critic", critic_scn, shape, rl.critic_param_offload,
                                  rl.critic_optimizer_offload, value_head=True, context=context))
        plan.critic_tokens = _tokens(logprob_budget, rl.critic_forward_micro_batch
                                     or critic_micro, seq, micro)
        plan.critic_update_tokens = update_tokens or critic_micro * seq
    if rl.reward_model:
        reward_shard = _frozen_shard(scenario, rl.reward_gpus or rl.critic_gpus, shard)
        roles.append(frozen_role("reward", shape, frozen_bytes, reward_shard, rl.reward_offload,
                                 dt.compute, True, "a frozen reward model with a value head"))
        plan.reward_tokens = _tokens(logprob_budget, rl.reward_micro_batch, seq, micro)
    if eng.name != "none":
        # what the trainer leaves on the GPU when the engine starts: SGLang's fraction (and
        # vLLM's start-up check) apply to the memory then free
        residue = sum(t.bytes for role in roles for t in (role.resident[0] if role.resident
                                                         else ()))
        plan.engine = _engine(scenario, shape, scenario.hardware.gpu_memory - residue)
        plan.sync_terms = _sync(shape, dt.param, rl.sync_bucket)
        if eng.sleep_level == 1:
            plan.host_terms.append(Term(
                "host.engine_weights", "weights", plan.engine.weights,
                "sleep level 1: the engine's weights kept in host RAM between rollouts", {},
                "vLLM sleep mode level 1 (vllm/v1/worker/gpu_worker.py sleep: CuMemAllocator "
                "offloads the 'weights' pool to the CPU)"))
    for role in roles:
        plan.host_terms += list(role.offloaded[0]) if role.offloaded else []
    plan.groups = _groups(scenario, roles)
    return plan


def _swapped_reference(shape, param_bytes: int, shard: int, conv: RLConventions) -> Term:
    """A host copy of the policy's parameter shards, copied into the policy's own model for the
    reference pass (NeMo-RL): host RAM per rank, no GPU role of its own."""
    params = shape.params
    return Term("host.reference_weights", "weights", -(-params * param_bytes // max(1, shard)),
                f"{params:,} params × {param_bytes} B / shard {shard} (pinned host copy per rank)",
                {"params": params, "shard": shard}, conv.reference_source)


def _frozen_shard(scenario, gpus: Optional[int], actor_shard: int) -> int:
    """A frozen model on GPUs of its own is sharded over them when the trainer shards (ZeRO-3,
    FSDP); beside the actor it shares the actor's shard group."""
    if gpus is None:
        return actor_shard
    sharded = scenario.parallelism.zero >= 3 or scenario.parallelism.fsdp in ("full", "hybrid")
    return gpus if sharded else 1


def _groups(scenario, roles) -> list:
    """Which roles share GPUs: all of them (hybrid, colocated), or each role with its own GPUs
    (rl.*_gpus) apart; a reward model without GPUs of its own sits with a separate critic
    (OpenRLHF --colocate_critic_reward), the engine with the actor unless engine.gpus."""
    rl, eng = scenario.rl, scenario.engine
    names = [r.name for r in roles]
    has_engine = eng.name != "none"
    if rl.placement != "separate":
        return [Group("all", tuple(names), has_engine, scenario.parallelism.world_size)]
    apart = {"reference": rl.reference_gpus, "critic": rl.critic_gpus, "reward": rl.reward_gpus}
    groups, placed = [], set()
    critic_apart = "critic" in names and rl.critic_gpus
    for name in ("reference", "critic", "reward"):
        if name in names and apart[name]:
            members = [name]
            if name == "critic" and "reward" in names and not rl.reward_gpus:
                members.append("reward")
            groups.append(Group(name, tuple(members), False, apart[name]))
            placed.update(members)
    if critic_apart:
        placed.add("critic")
    actor = tuple(n for n in names if n not in placed)
    engine_apart = has_engine and eng.gpus is not None
    groups.insert(0, Group("actor", actor, has_engine and not engine_apart,
                           scenario.parallelism.world_size))
    if engine_apart:
        groups.append(Group("engine", (), True, eng.gpus))
    return groups


def _capped(budget: Optional[int], sequences: Optional[int], seq: int) -> Optional[int]:
    """A dynamic batch's tokens: its budget, or all its sequences' tokens when fewer."""
    if not budget:
        return None
    return min(budget, sequences * seq) if sequences else budget


def _tokens(dynamic: Optional[int], sequences: Optional[int], seq: int, fallback: int) -> int:
    if dynamic:
        return dynamic
    return (sequences or fallback) * seq


def _engine(scenario, shape, free: int) -> EngineBudget:
    return engine_budget(scenario, shape, free, ENGINE_TOKENS, ENGINE_SEQS)


def engine_budget(scenario, shape, free, tokens: int, seqs: int) -> EngineBudget:
    """The engine's budget on one GPU with the scenario's engine settings (`tokens`, `seqs`: the
    defaults of max_num_batched_tokens and max_num_seqs where the scenario gives none)."""
    eng = scenario.engine
    settings = EngineSettings(
        name=eng.name, tp=eng.tp, pp=eng.pp, dp=eng.dp, ep=eng.ep,
        utilization=eng.gpu_memory_utilization,
        max_num_batched_tokens=eng.max_num_batched_tokens or tokens,
        max_num_seqs=eng.max_num_seqs or seqs,
        max_model_len=eng.max_model_len, enforce_eager=eng.enforce_eager,
        kv_dtype=None if eng.kv_cache_dtype in (None, "auto") else eng.kv_cache_dtype,
        quantization=eng.quantization, dtype=eng.dtype)
    return budget(shape, settings, scenario.hardware.gpu_memory, scenario.assumptions,
                  free_memory=free if eng.name == "sglang" and free is not None else None)


def _sync(shape, param_bytes: int, bucket: Optional[int]) -> list:
    largest = shape.vocab * shape.hidden
    terms = [Term("sync.gathered_tensor", "buffers", largest * param_bytes,
                  f"the largest parameter (vocab {shape.vocab:,} × d {shape.hidden:,}) gathered "
                  f"in full × {param_bytes} B", {"params": largest},
                  "verl fsdp_workers.py rollout_mode: each parameter .full_tensor() before "
                  "update_weights; OpenRLHF/TRL gather one parameter at a time")]
    if bucket:
        terms.append(Term("sync.bucket", "buffers", bucket, f"one bucket of {bucket:,} B", {},
                          "verl rollout.checkpoint_engine.update_weights_bucket_megabytes"))
    return terms
