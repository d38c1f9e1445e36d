"""training_estimate(scenario) -> Estimate of a training step: per pipeline stage, the named Terms
of its peak (memory/estimate.py `estimate` dispatches here, or to memory/rl for an RL step).

The flow: resolve the architecture and exact parameter counts (`params`), the parallel layout
(`topology`), the framework's dtypes (`states.dtypes`), split layers and parameters over pipeline
stages (stage 0 carries the embedding and any vision tower, the last stage the LM head and loss),
then compute each stage's terms in each phase of a step and keep the phase with the most bytes:
- forward end: weights, optimizer states, persistent gradient buffers, all saved activations;
- forward softmax (Megatron's unfused attention only): the last layer's softmax running, its
  live copies of the scores beside everything saved before it (memory/softmax.py);
- backward start: the same with the loss backward's temporaries (logits gradients);
- backward attention (Transformer Engine's deterministic cuDNN attention): the last layer's
  attention backward with the dP matrix in cuDNN's workspace (memory/attention_workspace.py);
- backward through a recomputed layer (full recompute): checkpoints plus one layer's full set;
  under torchtitan's op-level SAC the last layer's measured recompute and gradient transients
  (memory/sac_backward.py). Where the loop drops its logits before backward (torchtitan's
  `del pred`: convention loop.frees_logits), this phase comes after the loss's backward: the
  logits are freed and the LM head's gradient is held (sac_backward.root_gradient_term), as in
  FSDP's mid-backward phase;
- optimizer step: every gradient, the states and the optimizer implementation's temporaries.
Gradients of frameworks that allocate them lazily (`zero_grad(set_to_none=True)`: HF, FSDP2) exist
only from the backward on, unless gradient accumulation keeps them: `.grad` accumulates over the
micro-batches of a step and is cleared only after the optimizer step (transformers Trainer
`_inner_training_loop`: `model.zero_grad()` after `optimizer.step()`; torchtitan `train_step`),
so with more than one micro-batch the second one's forward and backward run beside them.
Megatron's and DeepSpeed's buffers exist all along.

The `seed` profile is the same code with the articles' assumptions (memlint/assumptions.py): one
phase holding everything, C_act coefficients, uniform parameter split, no logits or runtime.

Where things are: the facts every term reads (`Model`, memory/model.py), pipeline stages
(stages.py), weights/gradients/states (stage_states.py), saved activations
(stage_activations.py), logits and loss (logits.py), LoRA/QLoRA (lora.py), the vision encoder
(vision.py), ZeRO/FSDP buffers (buffers.py), optimizer-step temporaries (optimizer_step.py), the
runtime (runtime.py); the result is an `Estimate` (result.py). `EstimateError` and `UnsupportedModel`
are re-exported from memory/model.py.
"""
from __future__ import annotations

from memlint import lazy_import
from memlint.memory import inputs
from memlint.memory.allocator import allocator_assumed, released_on_retry, reserve_terms
from memlint.memory.attention_workspace import backward_attention_terms
from memlint.memory.buffers import buffer_terms, saved_weights_assumed, zero2_accumulation_terms
from memlint.memory.compile import compile_assumed, compile_notes
from memlint.memory.conventions import optimizer_instances
from memlint.memory.logits import held_logits_assumed, held_logits_terms, logits_terms
from memlint.memory.lora import dequant_terms
from memlint.memory.global_buffer import global_buffer_terms
from memlint.memory.model import EstimateError, Model, UnsupportedModel
from memlint.memory.optimizer_step import optimizer_step_terms
from memlint.memory.result import Estimate
from memlint.memory.runtime import allocator_terms, runtime_terms, workspace_terms
from memlint.memory.softmax import softmax_peak_terms
from memlint.memory.stage_activations import activation_terms, stage_inflight
from memlint.memory.stage_states import state_terms
from memlint.memory.stages import StagePlan
from memlint.memory.terms import Phase, StageEstimate, Term
from memlint.records import replace

sac_backward = lazy_import.module("memlint.memory.sac_backward")

__all__ = ["EstimateError", "UnsupportedModel", "Model", "training_estimate", "fsdp_layer_freed"]


def fsdp_layer_freed(terms: list, layers: int) -> list:
    """After the last layer's backward its saved tensors are gone: the full-layer activations
    term keeps (L − 1) / L of its bytes (one micro-batch in flight under FSDP)."""
    out = []
    for term in terms:
        if term.name == "activations" and layers > 0:
            held = int(term.inputs.get("layers", layers)) or 1
            kept = term.bytes * (held - 1) // held
            term = Term(term.name, term.component, kept,
                        f"({term.formula}) × ({held} − 1) / {held}  (last layer's backward done)",
                        dict(term.inputs), term.source)
        out.append(term)
    return out


def _allocator(model: Model, terms: list) -> list:
    """The caching allocator's share of a phase; none on the CPU or at a zero fraction."""
    return [t for t in allocator_terms(model, terms) if t.bytes]


def _phase_terms(model: Model, plan: StagePlan, phase: str, weights, gradients, optimizer,
                 workspaces: list):
    terms = list(weights) + list(optimizer)
    # one moment (assumption step.phases "one", the articles' sum) holds the gradients too
    grads_now = (model.assume["step.phases"] == "one" or model.dt.grads_persistent
                 or phase == "optimizer" or model.microbatches > 1)
    if grads_now:
        terms += list(gradients)
        terms += zero2_accumulation_terms(model, gradients, phase)
    terms += workspaces
    # the layers' backward after the loss's and the output projection's: the LM head's gradient
    # is written (FSDP2's root holds it unsharded to the end: memory/sac_backward.py)
    head_grad = plan.last and not grads_now
    if phase == "backward_layer":
        # FSDP mid-backward (memory/fsdp.py backward_unit_buffers): the logits and the last
        # layer's saved tensors are freed, the other layers' are still held
        terms += fsdp_layer_freed(activation_terms(model, plan, phase), len(plan.layers))
        if head_grad:
            terms.append(sac_backward.root_gradient_term(model, plan))
        terms += buffer_terms(model, plan, phase)
        terms += dequant_terms(model, plan, phase)
    elif phase != "optimizer":
        terms += activation_terms(model, plan, phase)
        if phase == "backward_recompute" and model.conv.logits_freed and plan.last:
            # the last layer's backward under activation checkpointing (op-level SAC:
            # memory/sac_backward.py; full: its recompute) comes after the loss's: the logits and
            # their gradient are freed (torchtitan `del pred`), the LM head's gradient is held
            if head_grad:
                terms.append(sac_backward.root_gradient_term(model, plan))
        elif plan.last and model.assume["logits.enabled"]:
            terms += logits_terms(model, phase)
        terms += buffer_terms(model, plan, phase)
        terms += dequant_terms(model, plan, phase)
    else:
        terms += optimizer_step_terms(model, plan)
        terms += buffer_terms(model, plan, phase)
        if plan.last and model.assume["logits.enabled"]:
            terms += held_logits_terms(model)   # the loop's outputs outlive the step too
    return terms


def _stage_class(model: Model, plan: StagePlan) -> tuple:
    """Everything a stage's terms read besides the model: first/last, each of its layers' kind
    (parameter counts, MoE or dense, LoRA parameters) in order, and the micro-batches it holds in
    flight. Stages of one class have the same terms, so they are computed once: 10,000 stages of
    one layer each took 24-47 s (issue 19); the cost is now per class, not per stage."""
    moe, lora, layers = model.arch.moe_layers, model.lora_per_layer, model.counts.layers
    kinds = tuple((layers[i], moe[i] if i < len(moe) else None, lora[i] if model.lora else 0)
                  for i in plan.layers)
    inflight = (None if model.assume["activations.model"] == "seed"
                else stage_inflight(model, plan))
    return plan.first, plan.last, kinds, inflight


def training_estimate(scenario, context=None) -> Estimate:
    """The Estimate of one training step of `scenario`; `context`: its resolved context
    (memory/context.py) when the caller already has one, so that nothing is resolved twice."""
    model = Model(scenario, context)
    stages = []
    # zero-byte runtime terms (the seed profile's assumptions) are not listed
    runtime = [t for t in runtime_terms(model) if t.bytes]
    workspaces = workspace_terms(model)
    classes: dict = {}
    for plan in model.plans:
        key = _stage_class(model, plan)
        done = classes.get(key)
        if done is not None:
            stages.append(replace(done, stage=plan.stage))
            continue
        weights, gradients, optimizer, host = state_terms(model, plan)
        if ((model.par.offload_activations or model.conv.fine_offload is not None)
                and model.assume["activations.model"] != "seed"):
            # the host side of activation offload (memory/offload.py), at the end of forward
            moved: list = []
            activation_terms(model, plan, "forward_end", host_out=moved)
            host = list(host) + moved
        if model.assume["step.phases"] == "one":
            names = ["backward"]
        else:
            names = ["forward_end", "backward_start", "optimizer"]
            if model.tr.recompute != "none":
                names.insert(2, "backward_recompute")
            elif model.fsdp_sharded:
                names.insert(2, "backward_layer")  # FSDP: a unit's backward (memory/fsdp.py)
        phases = []
        backward = None
        kept = workspaces + global_buffer_terms(model, plan)
        for name in names:
            terms = _phase_terms(model, plan, name, weights, gradients, optimizer, kept)
            terms = [t for t in terms if t.bytes or t.component in ("weights",)]
            if name == "forward_end":
                # the last layer's unfused softmax (memory/softmax.py), a moment of its own
                during = softmax_peak_terms(model, terms, model.seq_local)
                if during is not None:
                    phases.append(Phase("forward_softmax", tuple(
                        during + _allocator(model, during) + runtime)))
                # cuDNN's deterministic attention backward (memory/attention_workspace.py)
                backward = backward_attention_terms(model, terms)
            # the caching allocator's reserve: cached blocks idle now (memory/allocator.py)
            terms = released_on_retry(
                terms + _allocator(model, terms) + reserve_terms(model, plan, name, gradients)
                + runtime, scenario.hardware.gpu_memory)
            phases.append(Phase(name, tuple(terms)))
            if name == "backward_start" and backward is not None:
                phases.append(Phase("backward_attention", tuple(
                    backward + _allocator(model, backward) + runtime)))
        peak = max(phases, key=lambda p: p.total)
        stages.append(StageEstimate(stage=plan.stage, layers=len(plan.layers), phase=peak.name,
                                    terms=peak.terms, phases=tuple(phases), host_terms=tuple(host)))
        classes[key] = stages[-1]
    notes = [model.dt.note]
    notes += compile_notes(scenario.training)  # memory/compile.py: what is not modeled
    notes += instances_note(scenario, model.topo)
    # eager float8 under op-level SAC: the SAC list's aten.abs (memory/sac_backward.py)
    abs_assumed, abs_notes = sac_backward.float8_abs_assumed(model) if model.op_sac else ((), [])
    notes += abs_notes
    if model.profile == "seed":  # a label of the profile; the model reads its values
        notes.append("seed profile: the articles' formulas (decimal GB), no logits, no runtime")
    return Estimate(profile=model.profile, sources=tuple(scenario.sources),
                    params=model.params_block(), gpu_name=scenario.hardware.gpu,
                    capacity_bytes=scenario.hardware.gpu_memory, stages=tuple(stages),
                    notes=tuple(notes),
                    assumed=inputs.assumed(scenario, model.topo, model.conv)
                    + compile_assumed(scenario, model.conv) + abs_assumed
                    + allocator_assumed(model)
                    + saved_weights_assumed(model) + held_logits_assumed(model),
                    scenario=scenario, context=model.context)


def instances_note(scenario, topo) -> list:
    """What the optimizer shard of Megatron's distributed-optimizer instances is, for --explain."""
    instances = optimizer_instances(scenario)
    if instances <= 1:
        return []
    return [f"{instances} distributed-optimizer instances: optimizer states sharded over "
            f"{topo.shard} ranks (dp·cp / {instances}), expert states over {topo.expert_shard} "
            f"(expert-dp / {instances}); megatron/core/parallel_state.py "
            "intra_partial_data_parallel_size"]
