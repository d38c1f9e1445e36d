"""The caching allocator's reserve: memory PyTorch holds in cached segments that no live tensor
uses at the peak (`reserved_bytes` − `allocated_bytes`), from the allocator's rules.

PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp; its size constants are in
c10/core/AllocatorConfig.h from 2.7: kMinBlockSize 512 B, kSmallSize 1 MiB, kSmallBuffer 2 MiB,
kLargeBuffer 20 MiB, kMinLargeAlloc 10 MiB, kRoundLarge 2 MiB):
- rounds every request to 512 B; requests up to 1 MiB share 2 MiB segments (small pool), requests
  up to 10 MiB share 20 MiB segments, larger ones get a segment of their own rounded to 2 MiB.
  Block rounding is therefore at most 2 MiB per large tensor: not counted here;
- never returns a segment to the driver (only `empty_cache()` or an out-of-memory retry does), so
  `reserved_bytes.all.peak` is the high-water mark of every pool together;
- keeps one pool per stream: a block allocated on a stream is reused only by allocations on that
  stream. So tensors that FSDP allocates on its all-gather and reduce-scatter streams hold
  segments the compute stream can never use (`fsdp_pool_terms`);
- splits a free block for a smaller request and merges a freed block only with its free
  neighbours of the same segment (with `expandable_segments:True`, which torchtitan's launch
  scripts set, one growing segment per stream: the same merge rule). A freed block smaller than the
  next request therefore stays cached and idle while that request gets new memory
  (`idle_block_terms`).

Every term is a `runtime.allocator.*` Term: reserved but not allocated (memory/terms.py
`is_reserved_term`). The flat `runtime.allocator` fraction (assumption runtime.allocator_fraction,
0 in the precise profile) stays for what a user measured (`memlint compare --write-assumptions`).
"""
from __future__ import annotations

import math

from memlint.memory.buffers import fsdp_gather_bytes, fsdp_root_and_unit
from memlint.memory.logits import logits_vocab
from memlint.memory.model import Model
from memlint.memory.stages import StagePlan
from memlint.memory.terms import Term

SRC_ALLOCATOR = ("pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp (per-stream pools; blocks split "
                 "from and merged within one segment; segments kept until empty_cache)")
SRC_FSDP_STREAMS = ("pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py "
                    "@010ae4a (foreach_all_gather: all_gather_output allocated on the all-gather "
                    "copy-in stream; foreach_reduce: reduce_output allocated in the reduce-scatter "
                    "stream, the sharded gradients are views of it); _fsdp_param_group.py "
                    "AllGatherState (the previous all-gather output kept until the next copy-out)")
SRC_LOGITS = ("torchtitan train.py `del pred` before loss.backward() @9dec370 and @e7c0cae; "
              "transformers Trainer.compute_loss returns the loss only (the logits die with the "
              "outputs); " + SRC_ALLOCATOR)
SRC_MLP = ("torchtitan models/llama/model.py FeedForward `w2(F.silu(w1(x)) * w3(x))` @9dec370; "
           "transformers LlamaMLP `down_proj(act_fn(gate_proj(x)) * up_proj(x))`; torch/_inductor "
           "fuses the pointwise silu·mul into one kernel; " + SRC_ALLOCATOR)

ORDER_NOT_MODELED = "not modeled (reserved = allocated)"
ORDER_NOT_MODELED_BUT_LOSS = ("not modeled but for the loss (reserved = allocated + the loss's "
                              "idle logits block)")
SRC_ORDER_NOT_MODELED = ("memlint/memory/allocator.py: Megatron's and DeepSpeed's allocation order "
                         "is not modeled, so no idle cached block of theirs is counted; their "
                         "fragmentation is left to the headroom margin (ML102)")


def order_modeled(model: Model) -> bool:
    """Whether the run's allocation order (and so its idle cached blocks) is modeled: on a GPU,
    for transformers / torchtitan modules. Megatron's and DeepSpeed's are not: their reserved
    equals allocated and the estimate says so (`allocator_assumed`)."""
    return model.conv.torch_modules


def loss_order_modeled(model: Model) -> bool:
    """Whether the loss's blocks are modeled: transformers' (or torchtitan's) log-softmax loss
    allocates the same blocks under a DeepSpeed engine, which runs the model's own forward."""
    return model.conv.loss == "log-softmax"


def allocator_assumed(model: Model) -> tuple:
    """The estimate's `assumed` entry when the caching allocator's reserve is not modeled for the
    run (a GPU run whose allocation order memlint does not model), else ()."""
    if model.scenario.hardware.device == "cpu" or not model.assume["buffers.enabled"] \
            or order_modeled(model):
        return ()
    value = ORDER_NOT_MODELED_BUT_LOSS if loss_order_modeled(model) else ORDER_NOT_MODELED
    return ({"key": "runtime.allocator", "value": value, "source": SRC_ORDER_NOT_MODELED},)


def _term(name: str, nbytes: int, formula: str, inputs: dict, source: str) -> Term:
    return Term("runtime.allocator." + name, "runtime", int(nbytes), formula, dict(inputs),
                source)


def freed_logits_block(compute_bytes: int, vocab: int, tokens: int) -> Term:
    """The compute-dtype logits, freed before the loss backward (`del pred`; the Trainer drops
    the outputs), leave a block of c·V·N bytes the backward's fp32 buffers (4 B per logit each)
    cannot use: it stays cached and idle while they take new memory. Under expandable segments
    it merges with the freed fp32 upcast beside it; the first fp32 gradient takes 4 of those
    c + 4 bytes per logit and the same c bytes stay idle. A loss in the logits' own dtype
    (memory/logits.py, `transformers.loss_upcast` false) keeps 3c at its backward's start in
    blocks of (N−1)·V (the shifted copy, the log-probs, their gradients), and the backward of
    the `[..., :-1, :]` slice asks for zeros of the full N·V logits (slice_backward: a new
    zeros tensor of the input's size), which fit none of them: c·V·N more is reserved."""
    return _term("freed_logits", compute_bytes * vocab * tokens,
                 f"logits {compute_bytes} B × V {vocab:,} × {tokens:,} tokens (freed before the "
                 "loss backward, too small for its fp32 buffers)",
                 {"b_compute": compute_bytes, "vocab_per_gpu": vocab, "tokens": tokens},
                 SRC_LOGITS)


def freed_loss_parallel_blocks(compute_bytes: int, vocab: int, tokens: int) -> Term:
    """DTensor's loss_parallel (memory/logits.py loss_parallel_term) frees the compute-dtype
    logits, their fp32 upcast and `x - max` after its forward (c + 8 B per logit, one free region
    under expandable segments). Its backward's `zeros_like(x)` and `exp(x)` fit there, the sum
    and the product do not: at the product c + 4 B per logit stay cached and idle."""
    return _term("freed_logits", (compute_bytes + 4) * vocab * tokens,
                 f"(logits {compute_bytes} B + freed exp 4 B) × V {vocab:,} × {tokens:,} "
                 "tokens (loss parallel's freed forward blocks its backward cannot use)",
                 {"b_compute": compute_bytes, "vocab_per_gpu": vocab, "tokens": tokens,
                  "loss_parallel": True},
                 SRC_LOGITS + "; torch/distributed/tensor/parallel/loss.py @02eef6b")


def mlp_transients(intermediates: int, ffn: int, compute_bytes: int, tokens: int) -> Term:
    """Under recompute the last layer's MLP intermediates are computed and freed in the forward
    (the checkpoint keeps none of them, op-level SAC only the w1 output): `intermediates` blocks
    of N × ffn alive together (eager SwiGLU: w3 output, silu(w1), their product; plain GeLU: fc1
    output and its activation). They are freed before the logits, which do not fit them, so they
    stay cached and idle at the loss."""
    return _term("mlp_transients", intermediates * tokens * ffn * compute_bytes,
                 f"{intermediates} intermediates × {tokens:,} tokens × ffn/tp {ffn:,} × "
                 f"{compute_bytes} B (the last layer's MLP, freed in the forward)",
                 {"intermediates": intermediates, "tokens": tokens, "ffn_per_gpu": ffn,
                  "b_compute": compute_bytes}, SRC_MLP)


def all_gather_stream_pool(root_params: int, unit_params: int, gather_bytes: int,
                           root_gather_bytes: int) -> Term:
    """FSDP's all-gather outputs live on its own stream: the previous unit's output is kept until
    the next unit's copy-out (`AllGatherState`) while the next one is gathered, so the pool holds
    the largest pair, the root's and the first unit's (later pairs fit the same blocks)."""
    value = root_params * root_gather_bytes + unit_params * gather_bytes
    return _term("fsdp_all_gather_stream", value,
                 f"P_root {root_params:,} × {root_gather_bytes} B + P_unit {unit_params:,} × "
                 f"{gather_bytes} B (all-gather outputs on the all-gather stream)",
                 {"P_root": root_params, "P_unit": unit_params, "b_gather": gather_bytes,
                  "b_root": root_gather_bytes}, SRC_FSDP_STREAMS)


def reduce_scatter_stream_pool(sharded_grad_bytes: int) -> Term:
    """FSDP's sharded gradients are views of the reduce-scatter outputs, allocated on the
    reduce-scatter stream. Between `zero_grad(set_to_none=True)` and the next backward they are
    freed, but their segments stay in that stream's pool, idle for the compute stream."""
    return _term("fsdp_reduce_scatter_stream", sharded_grad_bytes,
                 f"sharded gradients {sharded_grad_bytes:,} B (the reduce-scatter stream's "
                 "pool, idle until the backward refills it)",
                 {"sharded_grad_bytes": sharded_grad_bytes}, SRC_FSDP_STREAMS)


# ---------------------------------------------------------------------------------------------
# Which terms a phase of a stage has


def reserve_terms(model: Model, plan: StagePlan, phase: str, gradients: list) -> list:
    """The modeled reserve of one phase of a stage (none on the CPU: no caching allocator)."""
    if model.scenario.hardware.device == "cpu" or not model.assume["buffers.enabled"]:
        return []
    terms = idle_block_terms(model, plan, phase) + fsdp_pool_terms(model, plan, phase, gradients)
    return [t for t in terms if t.bytes > 0]


def _tokens(model: Model) -> int:
    return model.tr.micro_batch * model.seq_local


def idle_block_terms(model: Model, plan: StagePlan, phase: str) -> list:
    """Blocks freed before the loss that its buffers cannot use (last stage, forward end and
    the start of the backward)."""
    tr, arch = model.tr, model.arch
    if not plan.last or phase not in ("forward_end", "backward_start"):
        return []
    if not order_modeled(model) and not loss_order_modeled(model):
        return []   # Megatron's allocation order: allocator_assumed says so
    terms = []
    tokens = _tokens(model)
    c = model.dt.compute
    if order_modeled(model) and tr.recompute in ("full", "selective") and arch.moe is None:
        # under tp (with sequence parallel too: the MLP's input is gathered) each rank's
        # intermediates are N × ffn/tp
        compiled = tr.compile
        count = (3 if arch.gated_mlp else 2) - (1 if compiled else 0)
        terms.append(mlp_transients(count, math.ceil(arch.ffn / model.topo.tp), c, tokens))
    if (phase == "backward_start" and model.assume["logits.enabled"]
            and model.conv.loss == "log-softmax" and not model.conv.compiled_loss
            and model.dt.compute < 4):
        vocab = logits_vocab(model)[0]
        if model.conv.loss_parallel:
            terms.append(freed_loss_parallel_blocks(c, vocab, tokens))
        else:
            terms.append(freed_logits_block(c, vocab, tokens))
    return terms


def released_on_retry(terms: list, capacity: int) -> list:
    """The allocator keeps idle cached blocks only until a cudaMalloc fails: then it frees them
    (`release_cached_blocks`, c10/cuda/CUDACachingAllocator.cpp) and retries. So the modeled
    reserve never takes a phase past the GPU: the `runtime.allocator.*` terms are scaled down to
    what the capacity leaves beside the other terms."""
    idle = [t for t in terms if t.name.startswith("runtime.allocator.")]
    spare = capacity - sum(t.bytes for t in terms if t not in idle)
    wanted = sum(t.bytes for t in idle)
    if not idle or wanted <= spare:
        return terms
    keep = max(0, spare)
    out = []
    for t in terms:
        if t in idle:
            share = t.bytes * keep // wanted
            t = Term(t.name, t.component, share,
                     f"{t.formula}; capped: released on an out-of-memory retry ({share:,} of "
                     f"{t.bytes:,} B fit the GPU)", dict(t.inputs, uncapped=t.bytes), t.source)
        out.append(t)
    return out


def fsdp_pool_terms(model: Model, plan: StagePlan, phase: str, gradients: list) -> list:
    """FSDP's all-gather and reduce-scatter stream pools (PyTorch's fully_shard / FSDP over > 1
    rank; Megatron-FSDP's own buffers are not modeled)."""
    if not model.fsdp_sharded or not model.conv.torch_modules:
        return []
    root, unit = fsdp_root_and_unit(model, plan)
    compute = 2 if model.dt.compute == 2 else 4
    gather = fsdp_gather_bytes(model)   # float8 all-gather, a QLoRA base: fewer bytes
    # FSDP1 (FullyShardedDataParallel: the HF Trainer's --fsdp, accelerate fsdp_version 1)
    # all-gathers into the unsharded flat parameter itself, on its unshard stream: those blocks
    # are the live unsharded parameters memory/buffers.py counts, nothing idle beside them
    terms = [all_gather_stream_pool(root, unit, gather, compute)] if model.conv.fsdp_version == 2 \
        else []
    grads_live = (phase == "optimizer" or model.dt.grads_persistent or model.microbatches > 1)
    if not grads_live and model.par.offload_params == "none":
        sharded = sum(t.bytes for t in gradients if t.component == "gradients")
        terms.append(reduce_scatter_stream_pool(sharded))
    return terms
