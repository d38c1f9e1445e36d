"""Model states: weights, gradients and optimizer states per GPU, under TP/PP/EP/ZeRO/FSDP/offload/LoRA.

Bytes per parameter follow the framework's dtype conventions (`dtypes()`); sharding divides each
parameter group by its own group size (Megatron-LM `theoretical_memory_usage.py` splits params the
same way: TP-sharded, expert-sharded). Seed article 000 CH 1-3 and 003 sections 2 and 4 give the
formulas: weights 2N, AdamW 12N (fp32 master + m + v), gradients 2N (bf16) or 4N (fp32), ZeRO-1/2/3
dividing optimizer / gradients / weights by dp.
"""
from __future__ import annotations

from memlint.memory import optimizer_quant as oq
from memlint.memory.conventions import DEEPSPEED_BF16_NOTE, precision_convention
from memlint.memory.terms import Term
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


@record(frozen=True)
class Dtypes:
    param: int          # bytes per working parameter
    grad: int           # bytes per kept gradient
    master: int         # bytes per fp32 master copy (0: none)
    state: int          # bytes per optimizer-moment element
    compute: int        # bytes per activation element (matmul outputs)
    autocast: bool      # amp: fp32 params, low-precision compute
    grads_persistent: bool  # gradient buffers allocated for the whole run (Megatron, DeepSpeed)
    note: str
    # optimizer moments as stored (memory/optimizer_quant.py): bits per element (0: 8 × state),
    # elements per fp32 scale (0: none), and whether they are paged (bitsandbytes Paged*)
    state_bits: int = 0
    state_block: int = 0
    state_paged: bool = False

    @property
    def moment_bits(self) -> int:
        return self.state_bits or 8 * self.state

    @property
    def state_element_bytes(self) -> float:
        """Average bytes per stored moment element (codes + block scales)."""
        return oq.bytes_per_element(self.moment_bits, self.state_block)

    def moment_bytes(self, elements: int, moments: float) -> int:
        return oq.moment_bytes(elements, moments, self.moment_bits, self.state_block)

    def moment_width(self) -> str:
        return oq.formula_width(self.moment_bits, self.state_block)


def dtypes(training, states_model: str = "precise") -> Dtypes:
    """Per-parameter dtypes of the scenario, then any explicit overrides.

    Mixed precision (bf16, fp16) follows the framework's convention (memory/conventions.py
    `precision_convention`, with its sources). `states_model` "seed" (assumption states.model)
    keeps the articles' 2 + 2 + 12 bytes.
    """
    precision = training.precision
    convention = precision_convention(training)
    persistent = convention.grads_persistent
    if precision == "fp32":
        base = Dtypes(4, 4, 0, 4, 4, False, persistent, "fp32 params, grads and states")
    elif (precision == "pure-bf16" and convention.fp32_master_over_bf16
          and states_model != "seed"):
        # a bf16 module under DeepSpeed: ZeRO still keeps fp32 master partitions and moments
        base = Dtypes(2, 2, 4, 4, 2, False, persistent, DEEPSPEED_BF16_NOTE)
    elif precision == "pure-bf16":
        base = Dtypes(2, 2, 0, 2, 2, False, persistent, "bf16 params, grads and states, no master")
    elif precision == "amp-bf16":
        base = Dtypes(4, 4, 0, 4, 2, True, persistent, "fp32 params/grads/states, bf16 autocast")
    elif states_model == "seed":
        base = Dtypes(2, 2, 4, 4, 2, False, persistent,
                      "seed: 2 bytes weights + 2 bytes grads + 12 bytes optimizer")
    else:
        base = Dtypes(*convention.widths, convention.autocast, persistent, convention.note)
    param = DTYPE_BYTES[training.param_dtype] if training.param_dtype else base.param
    grad = DTYPE_BYTES[training.grad_dtype] if training.grad_dtype else base.grad
    master = base.master if training.master_weights is None else (4 if training.master_weights else 0)
    state_name = training.optimizer_state_dtype
    state_bits = 0
    if state_name in oq.DEFAULT_BLOCK:
        # block-quantized moments: codes of BITS bits; the update works in fp32 (its width is what
        # `state` means for temporaries)
        state, state_bits = 4, oq.BITS[state_name]
    else:
        state = DTYPE_BYTES[state_name] if state_name else base.state
    if training.optimizer == "fp8_adam" and not state_name:
        state = 1
    block = getattr(training, "optimizer_state_block", None)
    block = block if block else oq.default_block(state_name or "")
    return Dtypes(param, grad, master, state, base.compute, base.autocast, base.grads_persistent,
                  base.note, state_bits=state_bits, state_block=block,
                  state_paged=bool(getattr(training, "optimizer_paged", False)))


# Optimizer moments per trainable parameter, in units of the state dtype.
# AdamW/Adam: m and v. SGD with momentum: one buffer. Muon: one momentum buffer on 2-D hidden
# matrices, AdamW on the rest. Adafactor: factored second moment (rows + columns, ~0 per param).
MOMENTS = {"adamw": 2, "adam": 2, "sgd": 1, "muon": 1, "adafactor": 0, "fp8_adam": 2}


@record(frozen=True)
class ShardedCount:
    """Parameters of one group held by one GPU, and the group's divisors (for formulas)."""

    name: str
    params: int       # per GPU after model parallelism (tp, pp, ep), before ZeRO/FSDP
    shard: int        # ZeRO/FSDP shard group size for this group
    split: str = ""   # how tp, pp and ep divided the model into `params` (Model.stage_param_groups)

    def text(self, label: str, shard: int) -> str:
        """`params 1,463,270,400 (a stage of pp 2: 11,706,163,200 / tp 8) / shard 4` in a
        formula: every divisor from the model to this GPU's count."""
        out = f"{label} {self.params:,}" + (f" ({self.split})" if self.split else "")
        return out + (f" / shard {shard}" if shard > 1 else "")


def ceil_div(a: int, b: int) -> int:
    """Elements per shard when `a` is split over `b` ranks (sharding rounds up)."""
    return -(-int(a) // max(1, int(b)))


_ceil_div = ceil_div


WEIGHTS_SOURCE = ("Narayanan et al. 2021 (weights split over tp·pp: 2N/(tp·pp)); "
                  "Rajbhandari et al. 2020 (ZeRO-3: 2N/dp)")


def weight_terms(groups, dt: Dtypes, zero: int, fsdp: str, offload_params: str,
                 frozen_bytes_per_param=None, source: str = WEIGHTS_SOURCE) -> list:
    """Resident working weights. ZeRO-3 / FSDP shard them; param offload moves them to the host."""
    terms = []
    for group in groups:
        shard = group.shard if (zero >= 3 or fsdp in ("full", "hybrid")) else 1
        per_param = dt.param if frozen_bytes_per_param is None else frozen_bytes_per_param
        if offload_params != "none" and shard > 1:
            continue
        count = _ceil_div(group.params, shard)
        terms.append(Term(
            name="weights" + ("" if group.name == "dense" else f".{group.name}"),
            component="weights", bytes=int(round(count * per_param)),
            formula=f"{group.text('params', shard)} × {per_param} B",
            inputs={"params": group.params, "shard": shard, "bytes_per_param": per_param},
            source=source))
    return terms


def gradient_terms(groups, dt: Dtypes, zero: int, fsdp: str) -> list:
    terms = []
    for group in groups:
        shard = group.shard if (zero >= 2 or fsdp in ("full", "hybrid", "shard_grad_op")) else 1
        count = _ceil_div(group.params, shard)
        terms.append(Term(
            name="gradients" + ("" if group.name == "dense" else f".{group.name}"),
            component="gradients", bytes=count * dt.grad,
            formula=f"{group.text('trainable', shard)} × {dt.grad} B",
            inputs={"params": group.params, "shard": shard, "bytes_per_grad": dt.grad},
            source="Rajbhandari et al. 2020 (ZeRO-2 partitions gradients: 2N/dp)"))
    return terms


def optimizer_terms(groups, dt: Dtypes, optimizer: str, zero: int, fsdp: str,
                    offload_optimizer: str, muon_matrix_shares: Optional[dict] = None,
                    adafactor_factored: int = 0) -> list:
    """fp32 master weights + moments, sharded by ZeRO-1+ / FSDP, or moved off the GPU by offload."""
    terms = []
    if offload_optimizer != "none":
        return terms
    for group in groups:
        shard = group.shard if (zero >= 1 or fsdp in ("full", "hybrid", "shard_grad_op")) else 1
        count = _ceil_div(group.params, shard)
        suffix = "" if group.name == "dense" else f".{group.name}"
        if dt.master:
            terms.append(Term(
                name="optimizer.master" + suffix, component="optimizer", bytes=count * dt.master,
                formula=f"{group.text('trainable', shard)} × {dt.master} B (fp32 master)",
                inputs={"params": group.params, "shard": shard, "bytes": dt.master},
                source="Micikevicius et al. 2018 (fp32 master weights: 4 B/param)"))
        moments = MOMENTS[optimizer]
        width = dt.moment_width()
        shard_text = f" / shard {shard}" if shard > 1 else ""
        if optimizer == "muon":
            # Muon: one buffer on 2-D hidden matrices, AdamW's two elsewhere (seed 000 CH 1.2).
            share = (muon_matrix_shares or {}).get(group.name, 1.0)
            mix = share * 1 + (1 - share) * 2
            moment_bytes = dt.moment_bytes(count, mix)
            formula = (f"{group.text('trainable', shard)} × {width} × "
                       f"(1 on 2-D share {share:.3f}, 2 else)")
        elif optimizer == "adafactor":
            factored = _ceil_div(adafactor_factored, shard)
            moment_bytes = dt.moment_bytes(factored, 1)
            formula = (f"factored second moment: {adafactor_factored:,} row+column elements"
                       f"{shard_text} × {width}")
        else:
            moment_bytes = dt.moment_bytes(count, moments)
            formula = f"{group.text('trainable', shard)} × {moments} moments × {width}"
        source = ("Loshchilov & Hutter 2019 (AdamW m, v); Jordan et al. 2024 (Muon m); "
                  "Shazeer & Stern 2018 (Adafactor factored)")
        if dt.state_block:
            source += "; " + oq.SOURCE
        name = "optimizer.moments" + suffix
        if dt.state_paged:
            # paged states live in CUDA unified memory the driver evicts to the host
            name = "host.optimizer_paged" + suffix
            formula += "  (paged: unified memory, host under pressure)"
            source += "; " + oq.PAGED_SOURCE
        terms.append(Term(name=name, component="optimizer",
                          bytes=moment_bytes, formula=formula,
                          inputs={"params": group.params, "shard": shard, "moments": moments,
                                  "bits": dt.moment_bits, "block": dt.state_block,
                                  "paged": dt.state_paged},
                          source=source))
    return terms
