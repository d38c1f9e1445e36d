"""RL post-training on GPUs shared by its roles: the peak is a maximum over the phases of a step.

`is_rl(scenario)` says whether the scenario describes an RL run (an inference engine in the loop,
a critic, a reference or reward model); `rl_estimate(scenario)` builds the run (memory/rl/plan.py:
roles, engine, tokens per pass) and returns an Estimate whose stages are the actor's pipeline
stages, each with every phase of the step (memory/rl/phases.py) and the host RAM the offloaded
roles take per rank. The terms come from memory/rl/engine.py (the rollout engine),
memory/rl/passes.py (no-grad passes, RL logits) and memlint's training model (the updates).
"""
from __future__ import annotations

from memlint.memory.rl.phases import step_phases, with_runtime
from memlint.memory.terms import StageEstimate

__all__ = ["is_rl", "rl_estimate"]


def is_rl(scenario) -> bool:
    rl = scenario.rl
    return (scenario.engine.name != "none" or rl.critic or rl.reference != "none"
            or bool(rl.reward_model))


def rl_estimate(scenario, context=None):
    # start-up: the training model, its context and runtime load only for an estimate
    from memlint.memory import inputs
    from memlint.memory.context import resolve_context
    from memlint.memory.estimate import EstimateError
    from memlint.memory.model import Model
    from memlint.memory.result import Estimate
    from memlint.memory.rl.plan import build
    from memlint.memory.runtime import allocator_terms, runtime_terms

    if scenario.model is None:
        raise EstimateError("model", "no model: give --model PATH|PRESET or model.* keys")
    context = context if context is not None else resolve_context(scenario)
    plan = build(scenario, context)
    model = Model(scenario, context)
    runtime = [t for t in runtime_terms(model) if t.bytes]
    runtime = _processes(runtime, plan)

    def allocator(terms):
        return [t for t in allocator_terms(model, terms) if t.bytes]

    stages = []
    for index, actor_stage in enumerate(plan.actor.update_stages):
        phases = tuple(with_runtime(name, terms, runtime, allocator)
                       for name, terms in step_phases(plan, index))
        peak = max(phases, key=lambda p: p.total)
        stages.append(StageEstimate(stage=actor_stage.stage, layers=actor_stage.layers,
                                    phase=peak.name, terms=peak.terms, phases=phases,
                                    host_terms=tuple(plan.host_terms)))
    notes = [f"RL step ({plan.conv.name} conventions): phases "
             + ", ".join(p.name for p in stages[0].phases) + "; the peak is the largest phase"]
    notes += plan.notes
    params = dict(model.params_block())
    return Estimate(profile=model.profile, sources=tuple(scenario.sources), params=params,
                    gpu_name=scenario.hardware.gpu, capacity_bytes=scenario.hardware.gpu_memory,
                    stages=tuple(stages), notes=tuple(notes),
                    assumed=inputs.assumed(scenario, model.topo), scenario=scenario,
                    context=context)


def _processes(runtime: list, plan) -> list:
    """One CUDA context per process on the GPU: the fused worker, or one per role (and one per
    engine) where the framework runs each in its own process."""
    if plan.conv.one_process_per_gpu:
        return runtime
    count = len(plan.roles) + (1 if plan.engine is not None else 0)
    out = []
    for term in runtime:
        if term.name == "runtime.cuda_context" and count > 1:
            from memlint.memory.terms import Term

            term = Term(term.name, term.component, term.bytes * count,
                        f"{count} processes on the GPU × ({term.formula})",
                        dict(term.inputs, processes=count), plan.conv.placement_source)
        out.append(term)
    return out
