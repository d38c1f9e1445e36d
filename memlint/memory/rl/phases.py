"""The phases of one RL step on a GPU, each with its own resident set (DESIGN.md, "Phases").

A colocated GRPO/PPO step (verl's RayPPOTrainer.fit, OpenRLHF's PPO trainer, TRL's GRPOTrainer)
runs, on the GPUs the roles share:
1. weight_sync: the engine's weights woken beside the actor's parameters, one tensor gathered in
   full and the sync bucket in flight;
2. rollout: the engine's budget (memory/rl/engine.py) and the CUDA-graph pool beside whatever
   the trainer leaves on the GPU;
3. log-prob passes: the actor's old log-probs, the reference's, the critic's values, the reward
   model's scores (memory/rl/passes.py), each with the engine asleep;
4. updates: the critic's and the actor's training step (memlint's training model at the update
   micro-batch, with the RL framework's logits terms), the engine asleep.
The engine asleep keeps its CUDA-graph pool (sleep mode frees only its weight and KV pools);
level 0 (no sleep) keeps its whole budget. A role offloaded between phases is on the GPU only for
its own passes. The peak of the GPU is the largest phase; each phase is a list of Terms like a
training step's, so --explain and the reports show them the same way.
"""
from __future__ import annotations

from memlint.memory.rl.engine import EngineBudget
from memlint.memory.rl.passes import (forward_terms, gathered_terms, logits_terms,
                                      unsharded_terms, value_terms)
from memlint.memory.rl.roles import at
from memlint.memory.terms import Phase, Term


UNSHARD_SOURCE = ("NeMo-RL v0.7.0 dtensor_policy_worker.py:1028: get_logprobs runs under "
                  "unshard_fsdp2_model (every FSDP2 unit gathered for the whole pass)")


def _engine_asleep(engine: EngineBudget, sleep_level: int) -> list:
    if sleep_level == 0:
        kept = [Term(f"{t.name}.awake", t.component, t.bytes, f"not asleep (sleep level 0): "
                     f"{t.formula}", dict(t.inputs), t.source) for t in engine.inside]
        return kept + list(engine.outside)
    return list(engine.outside)


def _pass(role, stage: int, tokens: int, tp: int, cp: int, conv, entropy: bool,
          chunking: bool, whole_weights: bool) -> list:
    """A no-grad pass of `role` over `tokens` tokens on one GPU."""
    terms = []
    if whole_weights:
        terms += list(at(role.resident, stage)) + [
            t for t in at(role.offloaded, stage) if t.component == "weights"]
    else:
        terms += list(at(role.resident, stage))
    if conv.logprob_unsharded and role.name == "actor":
        terms += unsharded_terms(role.name, role.shape, role.compute_bytes, role.shard,
                                 UNSHARD_SOURCE)
    else:
        terms += gathered_terms(role.name, role.shape, role.compute_bytes, role.shard)
    terms += forward_terms(role.name, role.shape, tokens, tp, cp)
    if role.value_head:
        terms += value_terms(role.name, tokens)
    else:
        terms += logits_terms(role.name, conv, role.shape.vocab, tokens, entropy, chunking,
                              update=False, tp=tp)
    return terms


def step_phases(plan, stage: int, group=None) -> list:
    """[(phase name, terms without runtime)] of one GPU of `group` (the roles sharing it and
    whether the engine does; every role and the engine when None) at actor pipeline stage
    `stage`. A phase is on a GPU when its active role is."""
    names = set(group.roles) if group is not None else {r.name for r in plan.roles}
    has_engine = plan.engine is not None and (group is None or group.engine)
    actor = plan.actor if "actor" in names else None
    members = [r for r in plan.roles if r.name in names]

    def resident(*skip) -> list:
        out = []
        for role in members:
            if role.name not in skip:
                out += list(at(role.resident, stage))
        return out

    engine = plan.engine
    asleep = _engine_asleep(engine, plan.sleep_level) if has_engine else []
    phases = []
    if has_engine:
        if actor is not None:
            sync = [t for t in at(actor.offloaded, stage) if t.component == "weights"
                    and plan.conv.sync_loads_offloaded]
            sync += [engine.inside[0]] + list(engine.outside) + plan.sync_terms
            phases.append(("weight_sync", sync + resident()))
        else:
            phases.append(("weight_sync", [engine.inside[0]] + list(engine.outside)
                           + plan.sync_terms[-1:]))
        phases.append(("rollout", list(engine.inside) + list(engine.outside) + resident()))
    elif actor is not None and plan.engine is not None:
        # the actor broadcasts its weights to engines on other GPUs, one tensor at a time
        sync = [t for t in at(actor.offloaded, stage) if t.component == "weights"]
        phases.append(("weight_sync", sync + plan.sync_terms[:1] + resident()))
    tp, cp = plan.tp, plan.cp
    if actor is not None and plan.logprob_tokens:
        terms = _pass(actor, stage, plan.logprob_tokens, tp, cp, plan.conv,
                      plan.logprob_entropy, plan.entropy_chunking, whole_weights=True)
        phases.append(("logprob_actor", terms + resident("actor") + asleep))
    ref = plan.role("reference")
    if ref is not None and "reference" in names:
        terms = _pass(ref, stage, plan.reference_tokens, tp, cp, plan.conv, False, False,
                      whole_weights=False)
        phases.append(("logprob_reference", terms + resident("reference") + asleep))
    elif plan.adapter_reference and plan.reference_tokens and actor is not None:
        terms = _pass(actor, stage, plan.reference_tokens, tp, cp, plan.conv, False, False,
                      whole_weights=True)
        phases.append(("logprob_reference", terms + resident("actor") + asleep))
    for name, phase, tokens in (("critic", "values_critic", plan.critic_tokens),
                                ("reward", "reward_score", plan.reward_tokens)):
        role = plan.role(name)
        if role is None or name not in names:
            continue
        terms = _pass(role, stage, tokens, tp, cp, plan.conv, False, False,
                      whole_weights=True)
        phases.append((phase, terms + resident(name) + asleep))
    critic = plan.role("critic")
    if critic is not None and critic.update and "critic" in names:
        terms = list(at(critic.update, stage)) + [
            Term("critic.values", "logits", plan.critic_update_tokens * 4,
                 f"{plan.critic_update_tokens:,} tokens × 4 B", {}, "value head output")]
        phases.append(("update_critic", terms + resident("critic") + asleep))
    if actor is not None:
        update = list(at(actor.update, stage))
        if stage == len(actor.update) - 1:
            if actor.value_head:
                update += value_terms("actor", plan.update_logit_tokens)
            else:
                update += logits_terms("actor", plan.conv, actor.shape.vocab,
                                       plan.update_logit_tokens, plan.update_entropy,
                                       plan.entropy_chunking, update=True, tp=tp)
        phases.append(("update_actor", update + resident("actor") + asleep))
    return phases


def with_runtime(name: str, terms: list, runtime: list, allocator) -> Phase:
    tensors = [t for t in terms if t.component != "runtime"]
    trainer = [t for t in tensors if not t.name.startswith("engine.")]
    return Phase(name, tuple(terms) + tuple(allocator(trainer)) + tuple(runtime))
