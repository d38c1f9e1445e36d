"""Offload: what moves to host memory, and what the GPU still holds.

Three kinds, each read from the framework that does it:
- optimizer offload (DeepSpeed ZeRO-Offload, `offload_optimizer`): the host keeps fp32 master
  weights, the moments and an fp32 gradient copy (Ren et al. 2021, ZeRO-Offload section 4);
- FSDP2 `CPUOffloadPolicy` (torchtitan `enable_cpu_offload`, accelerate `fsdp_offload_params`,
  both mapped to `offload_params=cpu offload_optimizer=cpu`): the sharded parameters, their
  gradients and the optimizer states all live on the host. In `_fsdp_param.py` `FSDPParam` pins the
  sharded parameter in CPU memory (`offload_to_cpu`), and after the reduce-scatter
  `_fsdp_collectives.py` `foreach_reduce` copies each new sharded gradient to the CPU
  (`to(torch.device("cpu"), non_blocking=True)`), so the optimizer steps there
  (pytorch/pytorch@62a45b6 and @8fc2039, torch/distributed/fsdp/_fully_shard/). The GPU keeps only
  the all-gather buffers (memory/fsdp.py);
- activation offload (`offload_activations`, optionally `offload_activations_layers`): saved
  activations copied to pinned host memory in forward and back in backward. torchtune's
  `OffloadActivations` (training/_activation_offloading.py, pytorch/torchtune@e511d5a; axolotl's
  `activation_offloading` reuses it) offloads every saved tensor of at least 1 KiB that is not a
  parameter, and keeps the most recent `max_fwd_stash_size = 5` tensors alive on the GPU until
  their copy ends; backward brings one autograd node's tensors back at a time. Megatron's
  `--cpu-offloading --cpu-offloading-num-layers N` (Transformer Engine `get_cpu_offload_context`)
  offloads N layers' activations and keeps the others. memlint keeps the layers that are not
  offloaded plus one layer in transit (one micro-batch) on the GPU, and counts the offloaded
  layers as host memory. The logits and the loss are not offloaded (torchtune wraps the output
  head in a no-op context; Megatron offloads transformer layers only).
"""
from __future__ import annotations

from memlint.memory.states import MOMENTS, ceil_div
from memlint.memory.terms import Term

SRC_ZERO_OFFLOAD = "ZeRO-Offload (Ren et al. 2021)"
SRC_FSDP_OFFLOAD = ("pytorch/pytorch@62a45b6 FSDP2 CPUOffloadPolicy: _fsdp_param.py offload_to_cpu, "
                    "_fsdp_collectives.py foreach_reduce (sharded grads to CPU)")
SRC_ACT_OFFLOAD = ("pytorch/torchtune@e511d5a training/_activation_offloading.py OffloadActivations; Transformer "
                   "Engine get_cpu_offload_context (Megatron --cpu-offloading)")

# Layer activation terms of memory/estimate.py that hold the saved tensors of decoder layers.
LAYER_TERMS = ("activations", "activations.checkpoints")


def fsdp_cpu_offload(fsdp: str, offload_params: str, uses_deepspeed: bool) -> bool:
    """Whether FSDP's CPUOffloadPolicy applies: FSDP sharding with parameter offload."""
    return fsdp in ("full", "hybrid") and offload_params != "none" and not uses_deepspeed


SRC_ZERO_OFFLOAD_GRADS = (
    "microsoft/DeepSpeed@5f631ab (v0.14.2) deepspeed/runtime/zero/stage_1_and_2.py "
    "copy_grads_in_partition (under cpu_offload it returns before allocating the GPU "
    "grads_in_partition; the reduced gradients go to the fp32 partition on the host) and "
    "stage3.py (grad_partitions_flat_buffer on self.device, the CPU under offload_optimizer)")


def offload_host_terms(groups, dt, optimizer: str, offload_optimizer: str, offload_params: str,
                       lora: bool, fsdp_offload: bool = False) -> list:
    """Host memory of offloaded model states, per GPU's share.

    FSDP CPUOffloadPolicy: sharded params × b_param + sharded grads × b_grad + master × b_master
    + moments (in their stored width). ZeRO-Offload: params × (4 master + moments × 4 + 4 grad).
    Parameter offload (ZeRO-Infinity): parameter shards × b_param.
    """
    terms = []
    total = sum(ceil_div(g.params, g.shard) for g in groups)
    # this GPU's share, each group divided by its ZeRO/FSDP shard (the divisors in the formula)
    share = f"{total:,} params (" + " + ".join(
        f"{g.params:,}" + (f" / shard {g.shard}" if g.shard > 1 else "") for g in groups) + ")"
    moments = MOMENTS[optimizer]
    if fsdp_offload:
        if not lora:
            terms.append(Term(
                "host.gradients_cpu", "gradients", total * dt.grad,
                f"sharded grads: {share} × {dt.grad} B", {"params": total, "bytes": dt.grad},
                SRC_FSDP_OFFLOAD))
            if offload_optimizer != "none":
                state = total * dt.master + dt.moment_bytes(total, moments)
                terms.append(Term(
                    "host.optimizer_cpu", "optimizer", state,
                    f"{share} × ({dt.master} B master + {moments} × {dt.moment_width()})",
                    {"params": total, "moments": moments}, SRC_FSDP_OFFLOAD))
        terms.append(Term("host.params_cpu", "weights", total * dt.param,
                          f"sharded params: {share} × {dt.param} B", {"params": total},
                          SRC_FSDP_OFFLOAD))
        return terms
    if offload_optimizer != "none" and not lora:
        per = 4 + moments * 4 + 4
        terms.append(Term(f"host.optimizer_{offload_optimizer}", "optimizer", total * per,
                          f"{share} × (4 master + {moments}×4 moments + 4 grad) B",
                          {"params": total},
                          f"{SRC_ZERO_OFFLOAD}; the gradient partitions: {SRC_ZERO_OFFLOAD_GRADS}"))
    if offload_params != "none":
        terms.append(Term(f"host.params_{offload_params}", "weights", total * dt.param,
                          f"{share} × {dt.param} B", {"params": total},
                          "ZeRO-Infinity param offload"))
    return terms


def zero_offload_gradients(uses_deepspeed: bool, zero: int, offload_optimizer: str) -> bool:
    """Whether DeepSpeed keeps the partitioned gradients on the host: ZeRO-2/3 with the
    optimizer offloaded (`SRC_ZERO_OFFLOAD_GRADS`); each parameter's unreduced gradient still
    passes through the GPU's reduce bucket (memory/deepspeed_buffers.py)."""
    return uses_deepspeed and zero >= 2 and offload_optimizer != "none"


def split_gradients(gradients: list, host_gradients: bool):
    """(GPU, host) gradient terms: under FSDP CPUOffloadPolicy, and ZeRO-2/3 with the optimizer
    offloaded (`zero_offload_gradients`), the sharded grads are host memory (offload_host_terms
    counts them), so none stay on the GPU."""
    if not host_gradients:
        return list(gradients), []
    return [], []


def activation_offload(terms: list, layers: int, offloaded_layers) -> tuple:
    """Split the layer activation terms of one stage into (GPU terms, host terms).

    Of a term holding L layers × m in-flight micro-batches, the GPU keeps the L − N layers that
    are not offloaded plus one layer of one micro-batch in transit:
      GPU = bytes / (L·m) · ((L − N)·m + 1),  host = bytes − GPU   (N = offloaded layers, ≤ L).
    Other terms (embedding, logits, masks, a recomputed layer) stay on the GPU.
    """
    gpu, host = [], []
    for term in terms:
        if term.name not in LAYER_TERMS or term.bytes == 0:
            gpu.append(term)
            continue
        held = int(term.inputs.get("layers", layers)) or 1
        inflight = float(term.inputs.get("inflight", 1.0)) or 1.0
        off = held if offloaded_layers is None else min(held, int(offloaded_layers))
        if off <= 0:
            gpu.append(term)
            continue
        per_layer_mb = term.bytes / (held * inflight)
        keep_units = (held - off) * inflight + 1
        kept = min(term.bytes, int(round(per_layer_mb * keep_units)))
        gpu.append(Term(
            term.name, term.component, kept,
            f"({term.formula}) / (L {held} × m {inflight:g}) × ((L − offloaded {off}) × m + 1 "
            f"in transit)",
            dict(term.inputs, offloaded_layers=off), term.source + "; " + SRC_ACT_OFFLOAD))
        host.append(Term(
            "host." + term.name.replace("activations", "activations_offloaded"), "activations",
            term.bytes - kept, f"{off} offloaded layers of ({term.formula}) − the layer in transit",
            {"offloaded_layers": off, "layers": held, "inflight": inflight}, SRC_ACT_OFFLOAD))
    return gpu, host
