"""Megatron's global memory buffer and the MoE dispatchers' state: memory a stage keeps for the
whole run beside its parameters.

Megatron-Core's `GlobalMemoryBuffer` (megatron/core/utils.py, NVIDIA/Megatron-LM@d98e8a64) keeps
one tensor per (name, dtype), allocated on first use and replaced by a larger one when a request
outgrows it: a rank holds the largest request. Its users under the name "mpu", in the compute
dtype:
- a column-parallel linear of Megatron's own under sequence parallelism all-gathers its input
  (B · T/cp · d) into it, forward and backward (tensor_parallel/layers.py
  LinearWithGradAccumulationAndAsyncCommunication): the language model's output layer always
  (gpt_model.py builds tensor_parallel.ColumnParallelLinear), every column-parallel linear under
  the local spec;
- the all-gather MoE dispatcher gathers the hidden states of every token of the etp·ep group
  into it (moe/token_dispatcher.py, `use_global_buffer=True`);
- the local spec's unfused attention keeps its baddbmm input there (B · heads/tp · T²;
  transformer/dot_product_attention.py).

Each MoE layer's dispatcher also keeps the routing state of its last forward as attributes
(memory/moe_activations.py dispatcher_state_bytes).
"""
from __future__ import annotations

import math

from memlint import lazy_import
from memlint.memory.activations import shapes
from memlint.memory.terms import Term

# start-up: the MoE layers' items load only for a model with experts
moe_activations = lazy_import.module("memlint.memory.moe_activations")

SOURCE = ("megatron/core/utils.py GlobalMemoryBuffer; tensor_parallel/layers.py; "
          "transformer/moe/token_dispatcher.py; transformer/dot_product_attention.py")


def global_buffer_terms(model, plan) -> list:
    """The global memory buffer ('mpu') of this stage and its MoE dispatchers' state."""
    if model.scenario.hardware.device == "cpu" or not model.assume["buffers.enabled"]:
        return []
    conv = model.conv
    terms = []
    requests = _requests(model, plan) if conv.megatron_modules else {}
    if requests:
        largest = max(requests, key=requests.get)
        terms.append(Term("buffers.global_memory_buffer", "buffers", requests[largest],
                          f"the largest request ({largest}) of "
                          + ", ".join(f"{name} {value:,} B" for name, value in requests.items()),
                          dict(requests), SOURCE))
    terms += _dispatcher_state(model, plan)
    return terms


def _requests(model, plan) -> dict:
    """What asks the stage's global buffer for room, in bytes."""
    tr, arch, topo, par, conv = model.tr, model.arch, model.topo, model.par, model.conv
    c = model.dt.compute
    seq = model.seq_local
    tokens = tr.micro_batch * seq
    out = {}
    if par.sp and topo.tp > 1 and (plan.last or conv.local_spec):
        out["sequence-parallel input all-gather"] = tokens * arch.hidden * c
    dispatch = conv.moe_dispatch
    if (dispatch is not None and dispatch.dispatcher == "allgather" and _moe_layers(model, plan)):
        rep = topo.tp if par.sp else 1
        gathered = moe_activations.gathered_tokens_bytes(tokens, arch.hidden, c, rep, topo.etp,
                                                         topo.ep)
        if gathered:
            out["MoE all-gather of the etp·ep group's tokens"] = gathered
    if conv.local_spec and tr.attention == "eager":
        heads = math.ceil(arch.heads / topo.tp)
        out["attention baddbmm input"] = c * tr.micro_batch * heads * seq * seq
    return out


def _moe_layers(model, plan) -> int:
    moe = model.arch.moe_layers
    return sum(1 for i in plan.layers if i < len(moe) and moe[i]) if model.arch.moe else 0


def _dispatcher_state(model, plan) -> list:
    dispatch = model.conv.moe_dispatch
    layers = _moe_layers(model, plan)
    if dispatch is None or not layers:
        return []
    topo, par = model.topo, model.par
    sh = shapes(model.arch, True)
    rep = topo.tp if par.sp else 1
    one, how = moe_activations.dispatcher_state_bytes(model.tr.micro_batch * model.seq_local, sh,
                                                      rep, topo.etp, topo.ep, dispatch)
    return [Term("buffers.moe_dispatcher_state", "buffers", layers * one,
                 f"{layers} MoE layers × ({how}) = {layers} × {one:,} B",
                 {"layers": layers, "bytes_per_layer": one, "dispatcher": dispatch.dispatcher},
                 "megatron/core/transformer/moe/token_dispatcher.py (routing_map, probs, "
                 "local_map, local_probs, reversed_local_input_permutation_mapping)")]
