"""FSDP (FSDP2 `fully_shard`, FSDP1, HSDP) memory terms: pure functions of plain numbers.

Each function returns Term-shaped dicts (`name`, `component`, `bytes`, `formula`, `inputs`,
`source`), so `memlint.memory.terms.Term(**d)` builds the Term; the memory model decides which
phase of the step each belongs to. Inputs are counts and byte widths, never the Scenario, so the
functions are tested on hand-checked numbers and against ../shared/calibration/fsdp2-records.json.

What FSDP2 keeps on one rank (PyTorch `torch/distributed/fsdp/_fully_shard/`: `_fsdp_param.py`,
`_fsdp_param_group.py`, `_fsdp_state.py`; FSDP2 tutorial and `fully_shard` docs):
- resident shards: parameters, gradients and optimizer states, each 1/shard of the total, in
  their own dtypes (with `MixedPrecisionPolicy(param_dtype=bf16)` the sharded params stay fp32);
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
  only `dp_shard` divides the resident states;
- CPU offload (`CPUOffloadPolicy`) keeps the sharded parameters, gradients and optimizer states in
  host memory; the GPU holds the shard of the unit being all-gathered (copied host-to-device) and
  the unsharded unit itself.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

from memlint.memory.states import ceil_div as _ceil_div

SRC_FSDP2 = "PyTorch FSDP2 fully_shard (torch/distributed/fsdp/_fully_shard)"


def _term(name: str, component: str, nbytes: int, formula: str, inputs: dict,
          source: str = SRC_FSDP2) -> dict:
    return {"name": name, "component": component, "bytes": int(nbytes), "formula": formula,
            "inputs": dict(inputs), "source": source}


def shard_degree(world: int, tp: int = 1, pp: int = 1, cp: int = 1, dp_replicate: int = 1,
                 dp_shard: Optional[int] = -1) -> int:
    """The FSDP shard group size; -1/None fills what tp·pp·cp·dp_replicate leave (torchtitan).

    torchtitan shards over dp_shard·cp ranks (its "fsdp" mesh dimension folds cp in).
    """
    if dp_shard not in (None, -1):
        return max(1, int(dp_shard)) * max(1, cp)
    rest = int(world) // max(1, tp * pp * cp * dp_replicate)
    return max(1, rest) * max(1, cp)


# ---------------------------------------------------------------------------------------------
# resident shards

def sharded_params(param_count: int, param_bytes: int, shard: int) -> dict:
    """Parameters this rank owns: ceil(N·b / shard). With HSDP pass dp_shard, not the world."""
    return _term("fsdp.sharded_params", "weights", _ceil_div(param_count * param_bytes, shard),
                 "ceil(N · b_param / shard)",
                 {"N": param_count, "b_param": param_bytes, "shard": shard})


def sharded_grads(param_count: int, grad_bytes: int, shard: int) -> dict:
    """Reduce-scattered gradients kept between backward and the optimizer step."""
    return _term("fsdp.sharded_grads", "gradients", _ceil_div(param_count * grad_bytes, shard),
                 "ceil(N · b_grad / shard)",
                 {"N": param_count, "b_grad": grad_bytes, "shard": shard})


def sharded_optimizer(param_count: int, state_bytes_per_param: int, shard: int) -> dict:
    """Optimizer states on the local shard (AdamW fp32: 8 bytes/param; +4 with a master copy)."""
    return _term("fsdp.sharded_optimizer", "optimizer",
                 _ceil_div(param_count * state_bytes_per_param, shard),
                 "ceil(N · b_states / shard)",
                 {"N": param_count, "b_states": state_bytes_per_param, "shard": shard})


def resident_shards(param_count: int, shard: int, param_bytes: int = 4, grad_bytes: int = 4,
                    state_bytes_per_param: int = 8) -> list:
    """The three resident terms together (params, grads, optimizer states), each / shard."""
    return [sharded_params(param_count, param_bytes, shard),
            sharded_grads(param_count, grad_bytes, shard),
            sharded_optimizer(param_count, state_bytes_per_param, shard)]


def hsdp_resident_shards(param_count: int, dp_shard: int, dp_replicate: int,
                         param_bytes: int = 4, grad_bytes: int = 4,
                         state_bytes_per_param: int = 8) -> list:
    """HSDP: states shard within dp_shard ranks and are replicated dp_replicate times."""
    out = []
    for term in resident_shards(param_count, dp_shard, param_bytes, grad_bytes,
                                state_bytes_per_param):
        term["name"] = term["name"].replace("fsdp.", "hsdp.")
        term["formula"] += "  (HSDP: shard = dp_shard; dp_replicate keeps full replicas)"
        term["inputs"]["dp_replicate"] = dp_replicate
        out.append(term)
    return out


# ---------------------------------------------------------------------------------------------
# unsharded parameters: the all-gather side

def unit_allgather(unit_params: int, compute_bytes: int, prefetched: int = 1) -> dict:
    """One FSDP unit unsharded for compute, plus `prefetched` units all-gathered ahead.

    Backward holds the current unit and the one prefetched before it (FSDP2 prefetches one unit
    ahead by default), so prefetched=1 gives 2 · P_unit · b_compute.
    """
    units = 1 + max(0, prefetched)
    return _term("fsdp.allgather_units", "buffers", units * unit_params * compute_bytes,
                 "(1 + prefetched) · P_unit · b_compute",
                 {"P_unit": unit_params, "b_compute": compute_bytes, "prefetched": prefetched})


def allgather_peak(layer_params: Sequence[int], compute_bytes: int, prefetched: int = 1) -> dict:
    """The largest run of (1 + prefetched) consecutive units unsharded at once (uneven layers:
    dense and MoE blocks differ)."""
    layers = [int(p) for p in layer_params]
    window = min(len(layers), 1 + max(0, prefetched)) or 1
    best = max((sum(layers[i:i + window]) for i in range(max(1, len(layers) - window + 1))),
               default=0)
    return _term("fsdp.allgather_units", "buffers", best * compute_bytes,
                 "max over consecutive units of Σ P_unit · b_compute",
                 {"units_at_once": window, "largest_window_params": best,
                  "b_compute": compute_bytes, "prefetched": prefetched})


SRC_BACKWARD = ("PyTorch FSDP2 _fsdp_param_group.py pre_backward/_backward_prefetch, "
                "post_backward + ReduceScatterState (pytorch/pytorch@62a45b6); "
                "_fsdp_collectives.py foreach_reduce (@8fc2039); torchtitan configs.py "
                "mixed_precision_reduce = float32 (pytorch/torchtitan@b5bcd76)")


def backward_unit_buffers(unit_params: int, compute_bytes: int, reduce_bytes: int, shard: int,
                          prefetched: int = 1) -> list:
    """What one FSDP2 unit's backward adds besides the units already unsharded.

    `pre_backward` of unit k all-gathers the unit before it in post-forward order
    (`_backward_prefetch`): `prefetched` more units unsharded in the compute dtype. The unit's
    gradients come out unsharded in the compute dtype (P · b_compute); `post_backward` reshards
    the unit, then `foreach_reduce` allocates the reduce-scatter input in the reduce dtype
    (P · b_reduce; fp32 under torchtitan's default `mixed_precision_reduce = float32`) and copies
    the gradients into it before freeing them, and the output (P · b_reduce / shard). The input is
    kept in `ReduceScatterState` until the next unit's reduce-scatter, so it is alive while the
    next unit computes its gradients: one unit's input and one unit's unsharded grads at once.
    """
    return [
        _term("fsdp.backward_prefetch", "buffers", prefetched * unit_params * compute_bytes,
              "prefetched · P_unit · b_compute",
              {"P_unit": unit_params, "b_compute": compute_bytes, "prefetched": prefetched},
              SRC_BACKWARD),
        _term("fsdp.unsharded_grads", "buffers", unit_params * compute_bytes,
              "P_unit · b_compute  (one unit's gradients before the reduce-scatter)",
              {"P_unit": unit_params, "b_compute": compute_bytes}, SRC_BACKWARD),
        _term("fsdp.reduce_scatter_input", "buffers", unit_params * reduce_bytes,
              "P_unit · b_reduce  (kept until the next reduce-scatter)",
              {"P_unit": unit_params, "b_reduce": reduce_bytes}, SRC_BACKWARD),
        _term("fsdp.reduce_scatter_output", "buffers", _ceil_div(unit_params * reduce_bytes, shard),
              "ceil(P_unit · b_reduce / shard)",
              {"P_unit": unit_params, "b_reduce": reduce_bytes, "shard": shard}, SRC_BACKWARD),
    ]


def root_unsharded(root_params: int, compute_bytes: int) -> dict:
    """The root unit (embedding, final norm, LM head): unsharded from forward through backward,
    since FSDP2 does not reshard the root after forward."""
    return _term("fsdp.root_unsharded", "buffers", root_params * compute_bytes,
                 "P_root · b_compute", {"P_root": root_params, "b_compute": compute_bytes})


def no_reshard_unsharded(layer_params: Sequence[int], compute_bytes: int,
                         root_params: int = 0) -> dict:
    """reshard_after_forward=False: every unit stays unsharded from its forward to its backward,
    so at the end of forward all of them (and the root) are alive at once."""
    total = sum(int(p) for p in layer_params) + int(root_params)
    return _term("fsdp.unsharded_no_reshard", "buffers", total * compute_bytes,
                 "(Σ P_unit + P_root) · b_compute",
                 {"sum_P_unit": total - int(root_params), "P_root": root_params,
                  "b_compute": compute_bytes, "units": len(layer_params)})


def mixed_precision_policy(param_count: int, unit_params: int, shard: int,
                           param_bytes: int = 4, compute_bytes: int = 2) -> list:
    """MixedPrecisionPolicy(param_dtype=bf16) over fp32 shards: the shards stay fp32; before each
    all-gather the unit's local shard is cast to the compute dtype (the all-gather input), and the
    unsharded copies (unit_allgather / root_unsharded with b_compute) are bf16."""
    return [
        _term("fsdp.sharded_params", "weights", _ceil_div(param_count * param_bytes, shard),
              "ceil(N · b_param / shard)  (fp32 shards under the mixed-precision policy)",
              {"N": param_count, "b_param": param_bytes, "shard": shard}),
        _term("fsdp.mp_cast_input", "buffers", _ceil_div(unit_params * compute_bytes, shard),
              "ceil(P_unit · b_compute / shard)  (local shard cast before all-gather)",
              {"P_unit": unit_params, "b_compute": compute_bytes, "shard": shard}),
    ]


def cpu_offload(param_count: int, unit_params: int, shard: int, param_bytes: int = 4,
                grad_bytes: int = 4, state_bytes_per_param: int = 8,
                offload_params: bool = True, offload_grads: bool = True,
                offload_optimizer: bool = True) -> dict:
    """CPU offload: what leaves the GPU (host terms) and what the GPU still holds.

    Returns {"gpu": [terms], "host": [terms]}; host terms belong in StageEstimate.host_terms.
    With offloaded params the GPU holds the current unit's shard copied to it for the all-gather.
    """
    gpu, host = [], []
    params = sharded_params(param_count, param_bytes, shard)
    grads = sharded_grads(param_count, grad_bytes, shard)
    states = sharded_optimizer(param_count, state_bytes_per_param, shard)
    for term, off in ((params, offload_params), (grads, offload_grads),
                      (states, offload_optimizer)):
        if off:
            term = dict(term, name=term["name"] + ".host",
                        formula=term["formula"] + "  (in host memory)")
            host.append(term)
        else:
            gpu.append(term)
    if offload_params:
        gpu.append(_term("fsdp.offload_h2d_shard", "buffers",
                         _ceil_div(unit_params * param_bytes, shard),
                         "ceil(P_unit · b_param / shard)  (shard copied to the GPU to all-gather)",
                         {"P_unit": unit_params, "b_param": param_bytes, "shard": shard}))
    return {"gpu": gpu, "host": host}


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

    Not a memory term: `bytes` are per rank per step, and the dict has no `component`.
    """
    layers = [int(p) for p in layer_params]
    received = allgather_bytes(layers, compute_bytes, shard)
    return {"name": "fsdp.recompute_allgather_traffic", "bytes": received,
            "unit": "bytes received per rank per step",
            "formula": "Σ P_unit · b_compute · (shard − 1) / shard",
            "inputs": {"sum_P_unit": sum(layers), "b_compute": compute_bytes, "shard": shard},
            "source": SRC_FSDP2 + "; transformers TrainingArguments (gradient_checkpointing "
                                  "with FSDP: redundant all-gather in backward)"}
