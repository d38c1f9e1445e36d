"""ZeRO / FSDP communication buffers of a step: DeepSpeed's bucket and prefetch buffers
(memory/deepspeed_buffers.py, with DeepSpeed's defaults from memlint/facts/deepspeed.py) and FSDP's all-gather and reduce-scatter buffers (memory/fsdp.py)
as Terms of the phase they are live in.
"""
from __future__ import annotations

import math

from memlint import lazy_import
from memlint.facts import deepspeed as facts
from memlint.memory.lora import frozen_bytes_per_param
from memlint.memory.model import Model
from memlint.memory.stages import StagePlan
from memlint.records import replace

# start-up: DeepSpeed's and FSDP's buffer terms load only for a run that has them (every estimate
# imports this module)
ds = lazy_import.module("memlint.memory.deepspeed_buffers")
fsdp = lazy_import.module("memlint.memory.fsdp")


def buffer_terms(model: Model, plan: StagePlan, phase: str) -> list:
    """Gather and bucket buffers of sharded data parallelism around a step.

    DeepSpeed ZeRO (memory/deepspeed_buffers.py): the gradient-reduction bucket of ZeRO-1/2/3
    and, under ZeRO-3, the ceiling on gathered parameters (max_live_parameters, prefetch
    included) plus the small parameters kept unpartitioned (param_persistence_threshold).
    FSDP2 with one unit per decoder layer plus the root (memory/fsdp.py): the root stays
    unsharded from forward through backward and one layer's all-gather is prefetched; with
    reshard_after_forward=False every layer stays unsharded from its forward to its backward
    (checked against bench/data/calibration/fsdp2-records.json). Parameters are gathered in the
    compute dtype (bf16 under a MixedPrecisionPolicy). In the middle of backward
    (`backward_layer`, `backward_recompute`) a unit's backward adds the prefetched unit, its
    unsharded gradients and the reduce-scatter buffers (fsdp.backward_unit_buffers).
    """
    par, topo, counts = model.par, model.topo, model.counts
    if phase == "optimizer" or not model.assume["buffers.enabled"]:
        return []
    layer_params = [math.ceil(counts.layers[i].total / topo.tp) for i in plan.layers]
    if model.conv.uses_deepspeed and par.zero >= 1 and par.fsdp == "none":
        return _deepspeed_buffers(model, plan, layer_params, phase)
    sharded = par.fsdp in ("full", "hybrid") or par.zero >= 3
    if not sharded or topo.shard <= 1:
        return []
    compute = 2 if model.dt.compute == 2 else 4
    gather = fsdp_gather_bytes(model)   # a QLoRA base: its stored dtype
    root, unit = fsdp_root_and_unit(model, plan)
    mid_backward = phase in ("backward_layer", "backward_recompute")
    if par.reshard_after_forward:
        terms = [fsdp.root_unsharded(root, compute),
                 fsdp.unit_allgather(unit, gather, prefetched=0)]
    elif mid_backward:
        # the last unit resharded after its backward; the others still unsharded
        terms = [fsdp.no_reshard_unsharded(layer_params[:-1], gather, root)]
    else:
        terms = [fsdp.no_reshard_unsharded(layer_params, gather, root)]
    if mid_backward:
        # a unit's backward: the prefetched unit before it, its unsharded grads and the
        # reduce-scatter buffers in the reduce dtype (= the sharded grads' dtype)
        terms += fsdp.backward_unit_buffers(unit, compute, model.dt.grad, topo.shard,
                                            prefetched=1 if par.reshard_after_forward else 0,
                                            gather_bytes=gather,
                                            grad_params=fsdp_grad_unit(model, plan))
    # P_unit and P_root are per GPU: tensor parallelism divided them first
    return [replace(term, formula=f"{term.formula}  (P: parameters / tp {topo.tp})")
            for term in terms if term.bytes]


def fsdp_gather_bytes(model: Model) -> float:
    """Bytes per parameter FSDP all-gathers for a decoder layer: the compute dtype, or for a
    quantized frozen base (QLoRA + FSDP) the stored dtype, since FSDP flattens and gathers the
    packed 4-bit / 8-bit storage as it is (bnb_4bit_quant_storage; Linear4bit dequantizes only
    inside its forward)."""
    if model.lora and model.tr.base_quant != "none":
        return frozen_bytes_per_param(model.tr.base_quant, model.dt.param, model.seed_states)
    # torchao's float8 all-gather (conventions gather_bytes 1): the linear weights are gathered,
    # and stay unsharded, as 1-byte Float8 data (norms: a rounding)
    return model.conv.gather_bytes


def fsdp_grad_unit(model: Model, plan: StagePlan) -> int:
    """The parameters of the largest unit that get gradients in a unit's backward: under FSDP2
    with LoRA only the adapters (FSDP2 reduce-scatters the FSDPParams that have a gradient:
    _fsdp_param_group.py post_backward); -1: all of them (FSDP1's FlatParameter gets a
    gradient as a whole, the frozen parts zero-filled)."""
    if not model.lora or model.conv.fsdp_version != 2:
        return -1
    tp = model.topo.tp
    return max([math.ceil(model.lora_per_layer[i] / tp) for i in plan.layers] or [0])


def fsdp_root_and_unit(model: Model, plan: StagePlan) -> tuple:
    """(P_root, P_unit) per GPU of a stage under FSDP: the root unit's parameters (embedding on
    the first stage; final norm and LM head on the last) and the largest decoder layer's, each
    divided by tp."""
    counts, tp = model.counts, model.topo.tp
    root = 0
    if plan.first:
        root += counts.embedding + counts.position_embedding
    if plan.last:
        root += counts.final_norm + counts.lm_head
    unit = max([math.ceil(counts.layers[i].total / tp) for i in plan.layers] or [0])
    return math.ceil(root / tp), unit


def _deepspeed_buffers(model: Model, plan: StagePlan, layer_params: list, phase: str) -> list:
    """DeepSpeed's ZeRO buffers with the sizes its config gives (or DeepSpeed's defaults; an
    "auto" size is the HF Trainer's: reduce bucket d², prefetch 0.9·d², persistence 10·d).
    Where ZeRO-3's linear layers are torch's own (`Conventions.zero3_saved_weights`), a forward
    without recompute leaves every linear weight gathered until its backward: at the end of the
    forward and the start of the backward."""
    zero = model.conv.zero
    d = model.arch.hidden

    def size(value, default, auto):
        if value is None:
            return int(default)
        return int(auto) if value == "auto" else int(value)

    def flag(value, default):
        return default if value is None else value

    name_of = {4: "fp32", 2: "bf16", 1: "fp8"}  # bytes -> the dtype names of DTYPE_BYTES
    dtype = name_of.get(model.dt.grad, "bf16")
    stage = model.par.zero
    bucket = size(zero.reduce_bucket_size, facts.REDUCE_BUCKET_SIZE, d * d)
    terms = [ds.reduce_bucket(stage, bucket, dtype,
                              flag(zero.contiguous_gradients, facts.CONTIGUOUS_GRADIENTS),
                              flag(zero.overlap_comm, stage == 3))]
    if stage >= 3:
        param_dtype = name_of.get(model.dt.param, "bf16")
        stage_params = sum(layer_params)
        # the output layer is one module, gathered whole for its forward and kept for its
        # backward right after (the loss is between them): on the last stage it is a module the
        # ceiling cannot split (a 152k x 8192 head is 1.25e9 elements)
        head = 0
        if plan.last:
            counts = model.counts
            head = math.ceil((counts.lm_head or counts.embedding) / model.topo.tp)
        max_live = size(zero.max_live_parameters, facts.MAX_LIVE_PARAMETERS,
                        facts.MAX_LIVE_PARAMETERS)
        if (model.tr.recompute == "full" and plan.last and plan.layers
                and phase in ("forward_end", "backward_start", "backward_recompute")):
            # transformers' gradient checkpointing: what the coordinator's reuse rule keeps
            live = ds.stage3_gathered_recompute(
                phase, layer_params, head, model.largest_linear(),
                size(zero.max_reuse_distance, facts.MAX_REUSE_DISTANCE, facts.MAX_REUSE_DISTANCE),
                size(zero.prefetch_bucket_size, facts.PREFETCH_BUCKET_SIZE, 0.9 * d * d),
                max_live, param_dtype)
        else:
            live = ds.stage3_live_parameters(
                max_live, param_dtype, total_params=stage_params,
                largest_module_params=max(layer_params + [head]))
        terms.append(live)
        why = model.conv.zero3_saved_weights
        # transformers' gradient checkpointing recomputes every layer or none (a selective
        # setting is Megatron's and leaves HF layers as they are)
        if why and model.tr.recompute != "full" and phase in ("forward_end", "backward_start"):
            counts, tp = model.counts, model.topo.tp
            linear = sum(math.ceil((counts.layers[i].total - counts.layers[i].norms) / tp)
                         for i in plan.layers)
            if plan.last:
                linear += math.ceil(counts.lm_head / tp)
            terms.append(ds.stage3_saved_gathered_weights(linear, param_dtype, live.bytes, why))
        norms = [d] * (2 * len(plan.layers) + (1 if plan.last else 0))
        terms.append(ds.stage3_persistent_parameters(
            norms, model.topo.shard, param_dtype,
            size(zero.param_persistence_threshold, facts.PARAM_PERSISTENCE_THRESHOLD, 10 * d)))
    return terms


def saved_weights_assumed(model: Model) -> tuple:
    """The estimate's `assumed` entry when whether ZeRO-3 keeps gathered linear weights rests on
    the DeepSpeed version and none is given (a model built outside zero.Init, no recompute)."""
    entry = model.conv.zero3_version_assumed
    if not entry or model.tr.recompute == "full":
        return ()
    key, value, source = entry
    return ({"key": key, "value": value, "source": source},)


def zero2_accumulation_terms(model: Model, gradients, phase: str) -> list:
    """ZeRO-2's second gradient partition in a backward under gradient accumulation
    (deepspeed_buffers.zero2_accumulation_partition): a DeepSpeed ZeRO-2 run with more than one
    micro-batch per step, contiguous_gradients on (DeepSpeed's default) and no optimizer offload,
    in the phases of a backward."""
    par = model.par
    if (phase not in ("backward_start", "backward_recompute", "backward_layer")
            or not model.assume["buffers.enabled"] or not model.conv.uses_deepspeed
            or par.zero != 2 or par.fsdp != "none" or model.microbatches <= 1
            or par.offload_optimizer != "none"
            or model.conv.zero.contiguous_gradients is False):
        return []
    partition = sum(t.bytes for t in gradients if t.component == "gradients")
    if not partition:
        return []
    return [ds.zero2_accumulation_partition(partition, model.microbatches)]
