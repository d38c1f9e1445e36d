"""The RL estimate: every phase of one step per GPU group, the summary the RL rules read.

Built by `rl_estimate` (memory/rl/__init__.py): the plan (memory/rl/plan.py) gives the roles,
engine and tokens; each group of GPUs (all of them when the roles share every GPU, else each
role's own) becomes a stage whose phases are memory/rl/phases.py's; for padding-free runs the
length-dependent phases are also estimated at the shortest sequences and the longest average
sequence each fits at is found by bisection (memory/rl/result.py), both when a rule first asks.
"""
from __future__ import annotations

from memlint.memory import inputs
from memlint.memory.context import resolve_context
from memlint.memory.model import EstimateError, Model
from memlint.memory.rl.phases import step_phases, with_runtime
from memlint.memory.rl.plan import build, engine_budget
from memlint.memory.rl.shape import engine_shape
from memlint.memory.rl.result import RLEstimate, RLSummary
from memlint.memory.runtime import allocator_terms, runtime_terms
from memlint.memory.terms import Phase, StageEstimate, Term
from memlint.records import replace


def rl_estimate(scenario, context=None):
    if scenario.model is None:
        raise EstimateError("model", "no model: give --model PATH|PRESET or model.* keys")
    context = context if context is not None else resolve_context(scenario)
    if scenario.rl.algorithm == "serve":
        return serve_estimate(scenario, context)
    model = Model(scenario, context)
    plan, stages = _stages(scenario, context, model)
    summary = _summary(scenario, context, model, plan, stages)
    notes = [f"RL step ({plan.conv.name} conventions): phases "
             + ", ".join(p.name for p in stages[0].phases) + "; the peak is the largest phase"]
    notes += plan.notes
    return RLEstimate(profile=model.profile, sources=tuple(scenario.sources),
                      params=dict(model.params_block()), gpu_name=scenario.hardware.gpu,
                      capacity_bytes=scenario.hardware.gpu_memory, stages=tuple(stages),
                      notes=tuple(notes), assumed=inputs.assumed(scenario, model.topo, model.conv),
                      scenario=scenario, context=context, rl=summary)


def _stages(scenario, context, model) -> tuple:
    """(plan, StageEstimate per actor pipeline stage, each with every phase of the step)."""
    plan = build(scenario, context)
    runtime = _processes([t for t in runtime_terms(model) if t.bytes], plan)

    def allocator(terms):
        return [t for t in allocator_terms(model, terms) if t.bytes]

    stages = []
    if len(plan.groups) == 1:
        # every role on every GPU: one stage per actor pipeline stage
        for index, actor_stage in enumerate(plan.actor.update_stages):
            phases = tuple(with_runtime(name, terms, runtime, allocator)
                           for name, terms in step_phases(plan, index))
            stages.append(_stage(actor_stage.stage, actor_stage.layers, phases,
                                 plan.host_terms))
        return plan, stages
    # roles on GPUs of their own: one stage per group of GPUs
    for index, group in enumerate(plan.groups):
        phases = tuple(with_runtime(name, terms, _group_runtime(runtime, plan, group),
                                    allocator)
                       for name, terms in step_phases(plan, 0, group))
        layers = plan.actor.update_stages[0].layers if group.roles else 0
        stages.append(_stage(index, layers, phases, plan.host_of(group)))
    return plan, stages


def _stage(number: int, layers: int, phases: tuple, host: list) -> StageEstimate:
    peak = max(phases, key=lambda p: p.total)
    return StageEstimate(stage=number, layers=layers, phase=peak.name, terms=peak.terms,
                         phases=phases, host_terms=tuple(host))


def _group_runtime(runtime: list, plan, group) -> list:
    """The CUDA contexts of a group's processes (one per role and engine on the GPU)."""
    count = len(group.roles) + (1 if group.engine else 0)
    if plan.conv.one_process_per_gpu or count <= 1:
        return [t for t in runtime if t.name != "runtime.cuda_context"] + [
            t for t in runtime if t.name == "runtime.cuda_context"][:1]
    out = []
    for term in runtime:
        if term.name == "runtime.cuda_context":
            base = term.bytes // max(1, term.inputs.get("processes", 1))
            term = Term(term.name, term.component, base * count,
                        f"{count} processes on the GPU × {base:,} B", {"processes": count},
                        plan.conv.placement_source)
        out.append(term)
    return out


def _summary(scenario, context, model, plan, stages):
    rl, eng = scenario.rl, scenario.engine
    length = (rl.prompt_len or 0) + (rl.response_len or 0)
    lengths = (_Lengths(scenario, context, model, stages, length)
               if rl.padding_free and length > 2 else None)
    engine_gpus = eng.tp * eng.pp * eng.dp
    engines = eng.instances or max(1, (plan.world or 1) // max(1, engine_gpus))
    sequences = rl.prompts_per_step * rl.samples_per_prompt if rl.prompts_per_step else 0
    per_engine = -(-sequences // engines) if sequences else 0
    if plan.engine is not None and eng.max_num_seqs:
        per_engine = min(per_engine, eng.max_num_seqs) if per_engine else eng.max_num_seqs
    tokens = (rl.prompt_len or 0) + (rl.response_len or 0)
    labels = {i: g.label for i, g in enumerate(plan.groups)} if len(plan.groups) > 1 else {}
    return RLSummary(
        groups=labels, framework=plan.conv.name, placement=rl.placement, engine=plan.engine,
        sleep_level=eng.sleep_level, engine_gpus=engine_gpus, engines=engines,
        kv_demand_tokens=per_engine * tokens, sequences_per_engine=per_engine,
        padding_free=rl.padding_free, prompt_len=rl.prompt_len or 0,
        response_len=rl.response_len or 0, lengths=lengths)


class _Lengths:
    """A padding-free run's length-dependent phases at shorter sequences (RLSummary's floors and
    fits_up_to), estimated on first use: only the RL rules read them, and only for a phase over
    the GPU, so a run that fits, and a rule's re-estimate of a variant, estimate no other
    length. The values are those an eager computation gives: the memory model is a pure
    function of the scenario, and the model's errors do not depend on the lengths."""

    def __init__(self, scenario, context, model, stages, length: int):
        self.scenario, self.context, self.model = scenario, context, model
        self.stages, self.length = stages, length
        # the totals at each length tried, for every phase at once: the bisections of the
        # phases probe the same lengths (16 phases of a 671B run cost 130 estimates, 0.9 s)
        self.at: dict = {}
        self._fits = None

    def totals(self, tokens: int) -> dict:
        if tokens not in self.at:
            self.at[tokens] = _totals_at(self.scenario, self.context, self.model, tokens)
        return self.at[tokens]

    def floors(self) -> dict:
        """(stage, phase) -> total with one-token prompts and responses."""
        return self.totals(2)

    def fits_up_to(self) -> dict:
        """(stage, phase) -> the longest average sequence at which a phase over the GPU fits."""
        if self._fits is None:
            floors, capacity = self.floors(), self.scenario.hardware.gpu_memory
            fits = {}
            for stage in self.stages:
                for phase in stage.phases:
                    key = (stage.stage, phase.name)
                    if phase.total > capacity and floors.get(key, capacity + 1) <= capacity:
                        fits[key] = _longest_fitting(self.totals, key, capacity, self.length)
            self._fits = fits
        return self._fits


def _totals_at(scenario, context, model, length: int) -> dict:
    """(stage, phase) -> total with every sequence `length` tokens long (prompt and response
    shortened in proportion)."""
    rl = scenario.rl
    prompt = max(1, length * (rl.prompt_len or 1) // ((rl.prompt_len or 1)
                                                      + (rl.response_len or 1)))
    short = replace(scenario, rl=replace(rl, prompt_len=prompt,
                                         response_len=max(1, length - prompt)))
    _plan, stages = _stages(short, context, model)
    return {(s.stage, p.name): p.total for s in stages for p in s.phases}


def _longest_fitting(totals, key, capacity: int, length: int) -> int:
    """The longest average sequence (tokens) at which phase `key` fits: bisection on the
    estimate itself (a dynamic batch's token cap makes the phase piecewise linear); `totals`
    gives every phase's total at a length."""
    low, high = 2, length
    while high - low > max(1, length // 256):
        middle = (low + high) // 2
        if totals(middle).get(key, capacity + 1) <= capacity:
            low = middle
        else:
            high = middle
    return low


def _processes(runtime: list, plan) -> list:
    """One CUDA context per process on the GPU: the fused worker, or one per role (and one per
    engine) where the framework runs each in its own process."""
    if plan.conv.one_process_per_gpu:
        return runtime
    count = len(plan.roles) + (1 if plan.engine is not None else 0)
    out = []
    for term in runtime:
        if term.name == "runtime.cuda_context" and count > 1:
            term = Term(term.name, term.component, term.bytes * count,
                        f"{count} processes on the GPU × ({term.formula})",
                        dict(term.inputs, processes=count), plan.conv.placement_source)
        out.append(term)
    return out


# `vllm serve` defaults by GPU (vllm/engine/arg_utils.py:1827-1845 at v0.12.0): the API server
# schedules 8192 tokens and 1024 sequences on a GPU of 70 GiB or more that is not an A100
SERVE_LARGE, SERVE_SMALL = (8192, 1024), (2048, 256)


def serve_estimate(scenario, context) -> RLEstimate:
    """One GPU of an inference server: the engine's budget and what lies outside it."""
    hw, eng = scenario.hardware, scenario.engine
    large = hw.gpu_memory >= 70 * 1024**3 and "A100" not in hw.gpu
    tokens, seqs = SERVE_LARGE if large else SERVE_SMALL
    shape = engine_shape(context.require("architecture"), context.require("counts"),
                         scenario.model.config)
    budget = engine_budget(scenario, shape, None, tokens, seqs)
    model = Model(scenario, context)
    runtime = [t for t in runtime_terms(model) if t.name == "runtime.cuda_context" and t.bytes]
    terms = tuple(budget.inside) + tuple(budget.outside) + tuple(runtime)
    phase = Phase("serve", terms)
    stage = StageEstimate(stage=0, layers=shape.layers, phase="serve", terms=terms,
                          phases=(phase,))
    gib = 1024**3
    notes = [f"vLLM serving: KV cache {budget.kv_pool / gib:.2f} GiB = {budget.pool_tokens:,} "
             f"tokens ({budget.kv_bytes_per_token:,} B per token); maximum concurrency at "
             f"max_model_len {budget.max_model_len:,}: {budget.concurrency:.2f}x"]
    summary = RLSummary(framework="vllm", placement="serve", engine=budget,
                        engine_gpus=eng.tp * eng.pp * eng.dp, engines=1)
    return RLEstimate(profile=model.profile, sources=tuple(scenario.sources),
                      params=dict(model.params_block()), gpu_name=hw.gpu,
                      capacity_bytes=hw.gpu_memory, stages=(stage,), notes=tuple(notes),
                      assumed=tuple(a for a in inputs.assumed(scenario, model.topo, model.conv)
                                    if a["key"] not in _TRAINING_INPUTS),
                      scenario=scenario, context=context, rl=summary)


# a training step's inputs a server does not have (the engine reads its lengths, batch and dtype)
_TRAINING_INPUTS = ("seq_len", "micro_batch", "recompute", "precision")
