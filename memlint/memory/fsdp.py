"""FSDP (FSDP2 `fully_shard`, FSDP1, HSDP) memory terms: pure functions of plain numbers.

Each function returns `Term`s of the `buffers` component (memory/buffers.py decides which phase
of the step each belongs to); the resident shards (parameters, gradients, optimizer states, each
/ shard) are memory/states.py's terms. Inputs are counts and byte widths, never the Scenario, so
the functions are tested on hand-checked numbers and against
bench/data/calibration/fsdp2-records.json.

What FSDP2 keeps on one rank (PyTorch `torch/distributed/fsdp/_fully_shard/`: `_fsdp_param.py`,
`_fsdp_param_group.py`, `_fsdp_state.py`; FSDP2 tutorial and `fully_shard` docs):
- resident shards: parameters, gradients and optimizer states, each 1/shard of the total, in
  their own dtypes (with `MixedPrecisionPolicy(param_dtype=bf16)` the sharded params stay fp32):
  memory/states.py, with the shard group of memory/topology.py;
- per FSDP unit (here one decoder layer), the unsharded parameters in the compute dtype while the
  unit runs. Forward keeps the previous unit's all-gather output until the next copy-out
  (`AllGatherState`, implicit prefetch) and frees it at the end of forward; the root's backward
  prefetches the last unit (one unit at the start of backward, as the calibration records
  show). Inside backward, each unit prefetches the one before it and leaves its gradients and
  a reduce-scatter input behind (`backward_unit_buffers`): the mid-backward phase;
- the root unit (embedding, final norm, LM head when they are not wrapped separately) is not
  resharded after forward: it stays unsharded from forward through backward;
- `reshard_after_forward=False` keeps every unit's unsharded parameters from forward to backward;
- HSDP shards within a group of `dp_shard` ranks and replicates across `dp_replicate` groups, so
  only `dp_shard` divides the resident states (memory/topology.py's shard group);
- CPU offload (`CPUOffloadPolicy`) keeps the sharded parameters, gradients and optimizer states in
  host memory (memory/offload.py).
"""
from __future__ import annotations

from memlint.memory.states import ceil_div as _ceil_div
from memlint.memory.terms import Term

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Iterable, Sequence

SRC_FSDP2 = "PyTorch FSDP2 fully_shard (torch/distributed/fsdp/_fully_shard)"


def _term(name: str, nbytes: int, formula: str, inputs: dict, source: str = SRC_FSDP2) -> Term:
    return Term("buffers.fsdp." + name, "buffers", int(nbytes), formula, dict(inputs), source)


# ---------------------------------------------------------------------------------------------
# unsharded parameters: the all-gather side

def unit_allgather(unit_params: int, compute_bytes: int, prefetched: int = 1) -> Term:
    """One FSDP unit unsharded for compute, plus `prefetched` units all-gathered ahead.

    Backward holds the current unit and the one prefetched before it (FSDP2 prefetches one unit
    ahead by default), so prefetched=1 gives 2 · P_unit · b_compute.
    """
    units = 1 + max(0, prefetched)
    return _term("allgather_units", units * unit_params * compute_bytes,
                 "(1 + prefetched) · P_unit · b_compute",
                 {"P_unit": unit_params, "b_compute": compute_bytes, "prefetched": prefetched})


SRC_BACKWARD = ("PyTorch FSDP2 _fsdp_param_group.py pre_backward/_backward_prefetch, "
                "post_backward + ReduceScatterState (pytorch/pytorch@62a45b6); "
                "_fsdp_collectives.py foreach_reduce (@8fc2039); torchtitan configs.py "
                "mixed_precision_reduce = float32 (pytorch/torchtitan@b5bcd76)")


def backward_unit_buffers(unit_params: int, compute_bytes: int, reduce_bytes: int, shard: int,
                          prefetched: int = 1, gather_bytes: float = 0,
                          grad_params: int = -1) -> list:
    """What one FSDP2 unit's backward adds besides the units already unsharded.

    `pre_backward` of unit k all-gathers the unit before it in post-forward order
    (`_backward_prefetch`): `prefetched` more units unsharded in the compute dtype. The unit's
    gradients come out unsharded in the compute dtype (P · b_compute); `post_backward` reshards
    the unit, then `foreach_reduce` allocates the reduce-scatter input in the reduce dtype
    (P · b_reduce; fp32 under torchtitan's default `mixed_precision_reduce = float32`) and copies
    the gradients into it before freeing them, and the output (P · b_reduce / shard). The input is
    kept in `ReduceScatterState` until the next unit's reduce-scatter, so it is alive while the
    next unit computes its gradients: one unit's input and one unit's unsharded grads at once.

    `gather_bytes` (default: `compute_bytes`): the width the prefetched unit is all-gathered in,
    as for the forward's units (torchao's float8 all-gather, a QLoRA base's stored dtype).
    `grad_params` (default: `unit_params`): the unit's parameters that get gradients: FSDP2's
    `foreach_reduce` takes only the FSDPParams whose gradient is not None
    (_fsdp_param_group.py post_backward), so a frozen base (LoRA) has none.
    """
    gather = gather_bytes or compute_bytes
    grads = unit_params if grad_params < 0 else grad_params
    return [
        _term("backward_prefetch", int(prefetched * unit_params * gather),
              "prefetched · P_unit · b_gather" if gather != compute_bytes
              else "prefetched · P_unit · b_compute",
              {"P_unit": unit_params, "b_gather": gather, "prefetched": prefetched},
              SRC_BACKWARD),
        _term("unsharded_grads", grads * compute_bytes,
              ("P_grad" if grads != unit_params else "P_unit")
              + " · b_compute  (one unit's gradients before the reduce-scatter)",
              {"P_unit": grads, "b_compute": compute_bytes}, SRC_BACKWARD),
        _term("reduce_scatter_input", grads * reduce_bytes,
              ("P_grad" if grads != unit_params else "P_unit")
              + " · b_reduce  (kept until the next reduce-scatter)",
              {"P_unit": grads, "b_reduce": reduce_bytes}, SRC_BACKWARD),
        _term("reduce_scatter_output", _ceil_div(grads * reduce_bytes, shard),
              ("ceil(P_grad" if grads != unit_params else "ceil(P_unit")
              + f" · b_reduce / shard {shard})",
              {"P_unit": grads, "b_reduce": reduce_bytes, "shard": shard}, SRC_BACKWARD),
    ]


def root_unsharded(root_params: int, compute_bytes: int) -> Term:
    """The root unit (embedding, final norm, LM head): unsharded from forward through backward,
    since FSDP2 does not reshard the root after forward."""
    return _term("root_unsharded", root_params * compute_bytes,
                 "P_root · b_compute", {"P_root": root_params, "b_compute": compute_bytes})


def no_reshard_unsharded(layer_params: Sequence[int], compute_bytes: int,
                         root_params: int = 0) -> Term:
    """reshard_after_forward=False: every unit stays unsharded from its forward to its backward,
    so at the end of forward all of them (and the root) are alive at once."""
    total = sum(int(p) for p in layer_params) + int(root_params)
    return _term("unsharded_no_reshard", total * compute_bytes,
                 "(Σ P_unit + P_root) · b_compute",
                 {"sum_P_unit": total - int(root_params), "P_root": root_params,
                  "b_compute": compute_bytes, "units": len(layer_params)})


# ---------------------------------------------------------------------------------------------
# communication (not memory): bytes moved per step

def allgather_bytes(layer_params: Iterable[int], compute_bytes: int, shard: int) -> int:
    """Bytes one rank receives to all-gather every unit once: Σ P_unit · b · (shard-1)/shard."""
    total = sum(int(p) for p in layer_params) * compute_bytes
    return _ceil_div(total * (shard - 1), shard) if shard > 1 else 0


def recompute_allgather_traffic(layer_params: Iterable[int], compute_bytes: int,
                                shard: int) -> dict:
    """Full recompute that re-enters an FSDP/ZeRO-3 unit re-gathers its weights: one more
    all-gather of every unit per step (3 instead of 2 with resharding after forward).

    Not a memory term (so not a Term): `bytes` are per rank per step, for rule ML-FSDP's message.
    """
    layers = [int(p) for p in layer_params]
    received = allgather_bytes(layers, compute_bytes, shard)
    return {"name": "fsdp.recompute_allgather_traffic", "bytes": received,
            "unit": "bytes received per rank per step",
            "formula": "Σ P_unit · b_compute · (shard − 1) / shard",
            "inputs": {"sum_P_unit": sum(layers), "b_compute": compute_bytes, "shard": shard},
            "source": SRC_FSDP2 + "; transformers TrainingArguments (gradient_checkpointing "
                                  "with FSDP: redundant all-gather in backward)"}
