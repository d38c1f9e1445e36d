"""The models an RL or preference run holds, each as a `Role`: what it keeps on a GPU between its
passes (its resident states), what moves to the host when it is offloaded between phases, and
for a trained role its update: memlint's training model run on a scenario derived for it.

- actor: the policy, trained (the scenario's own training settings, at the update micro-batch);
- critic: a value model trained beside it (PPO with GAE): the same backbone with a one-output
  value head instead of the LM head (transformers AutoModelForTokenClassification, num_labels 1);
- reference: the frozen policy the KL term compares with; none when its log-probs are
  precomputed or the algorithm needs none (ORPO, SimPO), and no second copy under LoRA, where it
  is the base with the adapter disabled;
- reward: a frozen learned reward model with a value head.
Frozen roles hold their parameters in the training parameter dtype, sharded like the actor's
when the actor is sharded (FSDP, ZeRO-3), else whole on every GPU.
"""
from __future__ import annotations

from types import MappingProxyType

from memlint.ir import Assumptions, Engine
from memlint.memory.conventions import training_rl
from memlint.memory.rl.engine import EngineShape
from memlint.memory.terms import Term
from memlint.records import record, replace

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

MODEL_STATE = ("weights", "optimizer")


@record(frozen=True)
class Role:
    name: str                 # actor | critic | reference | reward
    shape: EngineShape
    resident: tuple           # per pipeline stage: Terms kept on the GPU between its passes
    offloaded: tuple          # per pipeline stage: Terms moved to the host between phases
    shard: int                # GPUs its parameters are sharded over (1: whole on each)
    compute_bytes: int        # bytes of a parameter in the forward (the compute dtype)
    value_head: bool = False  # ends in a value head (critic, reward): no logits
    update: tuple = ()        # per pipeline stage: the peak Phase of its training step
    update_stages: tuple = ()  # the StageEstimates of its training estimate
    frozen_offload: bool = False  # frozen role kept on the host, gathered unit by unit


def _without_runtime(terms) -> tuple:
    return tuple(t for t in terms if t.component != "runtime")


def _prefixed(role: str, terms) -> tuple:
    return tuple(Term(f"{role}.{t.name}", t.component, t.bytes, t.formula, dict(t.inputs),
                      t.source) for t in terms)


def derived(scenario, *, micro_batch: int, seq_len: int, recompute: Optional[str] = None,
            config: Optional[dict] = None, lora: Optional[int] = None,
            world: Optional[int] = None):
    """The scenario of one role's update: its micro-batch and tokens, the logits left to the RL
    framework's own terms (memory/rl/passes.py), no RL section but its framework (the training
    model only)."""
    values = dict(scenario.assumptions.values)
    values["logits.enabled"] = False
    training = replace(scenario.training, micro_batch=micro_batch, seq_len=seq_len)
    if recompute is not None:
        training = replace(training, recompute=recompute)
    if lora is not None:
        training = replace(training, lora_rank=lora)
    parallelism = scenario.parallelism
    if world is not None:
        parallelism = replace(parallelism, world_size=world, dp=None)
    model = scenario.model
    if config is not None and model is not None:
        model = replace(model, config=MappingProxyType(dict(model.config, **config)))
    return replace(scenario, training=training, model=model, rl=training_rl(scenario),
                   engine=Engine(),
                   parallelism=parallelism,
                   assumptions=Assumptions(scenario.assumptions.profile,
                                           MappingProxyType(values)))


def trained_role(name: str, scenario, shape: EngineShape, param_offload: bool,
                 optimizer_offload: bool, value_head: bool = False, context=None) -> Role:
    """A trained role from memlint's training estimate of `scenario` (already derived);
    `context`: the RL run's resolved context, whose architecture and counts the role's scenario
    shares when it has the same model (`Resolved.varied`: not read again for every role and for
    every length the step's bisection tries)."""
    # start-up: the training model loads only when an RL run is estimated
    from memlint.memory.training import training_estimate

    est = training_estimate(scenario, None if context is None else context.varied(scenario))
    ctx = est.context
    dt, topo = ctx.require("dtypes"), ctx.topology
    peaks = tuple(next(p for p in s.phases if p.name == s.phase) for s in est.stages)
    kinds = MODEL_STATE + (("gradients",) if dt.grads_persistent else ())
    resident, offloaded = [], []
    for peak in peaks:
        kept, moved = [], []
        for term in (t for t in peak.terms if t.component in kinds):
            away = param_offload if term.component in ("weights", "gradients") \
                else optimizer_offload
            (moved if away else kept).append(term)
        resident.append(_prefixed(name, kept))
        offloaded.append(_prefixed(name, moved))
    return Role(name, shape, tuple(resident), tuple(offloaded), topo.shard, dt.compute,
                value_head, tuple(_without_runtime(_prefixed(name, p.terms)) for p in peaks),
                est.stages)


def frozen_role(name: str, shape: EngineShape, param_bytes: int, shard: int, offload: bool,
                compute_bytes: int, value_head: bool, source: str) -> Role:
    params = shape.params if not value_head else shape.params - _head(shape)
    per_gpu = -(-params * param_bytes // max(1, shard))
    term = Term(f"{name}.weights", "weights", per_gpu,
                f"{params:,} params × {param_bytes} B / shard {shard}",
                {"params": params, "bytes_per_param": param_bytes, "shard": shard}, source)
    return Role(name, shape, ((),) if offload else ((term,),), ((term,),) if offload else ((),),
                shard, compute_bytes, value_head, frozen_offload=offload)


def at(terms_per_stage: tuple, stage: int) -> tuple:
    """A role's terms on `stage` (a frozen role's one set serves every stage)."""
    return terms_per_stage[min(stage, len(terms_per_stage) - 1)] if terms_per_stage else ()


def _head(shape: EngineShape) -> int:
    """An untied LM head the value-head model lacks (it adds hidden x 1)."""
    untied = shape.params > 2 * shape.vocab * shape.hidden
    return (shape.vocab * shape.hidden if untied else 0) - shape.hidden
