"""The last layer's backward under torchtitan's op-level selective AC: what it allocates above what
the step holds when it starts (the `backward_recompute` phase's `activations.backward_layer` term).

When the backward reaches a checkpointed block, the block re-runs the ops its policy did not save
(the RMSNorms with their fp32 upcast, wk/wo/w3, RoPE, SiLU and its product) and then writes the
gradients of its activations: the fp32 RMSNorm backward's d-wide temporaries (4 B each) and the
FFN-width bf16 ones (w3's recomputed output, silu(w1), their product and their gradients, 3.5 d
wide: 7 B each), the attention backward's dq/dk/dv, and the block input's gradient. Measured by
bench/compile_saved.py (torch 2.13 CPU, Inductor; a torchtitan-style Llama-3 block with the 8B's
ratios, bf16; bench/data/compile/saved_llama_block.torch-2.13.json `bwd_peak`), the highest live
bytes above the backward's start, per token per hidden unit:
  - eager SAC, bf16 linears 65.05; compiled (the partitioner's graph, Inductor's fused
    pointwise kernels) 39.02. Both scale exactly with the tokens (65.047 / 39.016 at 1024, 2048
    and 4096 tokens, `--batch 2/4/8`): nothing weight-sized is in them (the weights' gradients
    exist before; FSDP2's unsharded gradient is memory/buffers.py's term);
  - torchao float8 linears (pytorch/ao@0afa4c1): eager 108.55, compiled 63.08 at 1024 tokens,
    falling with more tokens (60.86 at 2048): the weights' float8 casts are weight-sized. The
    1024-token value is kept (tokens / (ffn) of that shape, 1.14, is the 8B rows' 16384 / 14336).
Which set applies follows the block's saved set: eager SAC's unless the block is compiled and
`compile.block_saved = partitioner` (memory/compile.py). Under torchtitan's tensor parallelism
every one of these is sharded over tp (the norms under sequence parallelism). The full-AC path has
its own term (stage_activations.py `activations.recomputed_layer`).
"""
from __future__ import annotations

from memlint.memory import activations as act
from memlint.memory.terms import Term

# bytes per token per hidden unit, bf16 compute (bench/data/compile/saved_llama_block.torch-2.13.json)
BWD_PEAK = {
    ("eager", False): 65.0469,
    ("compiled", False): 39.0156,
    ("eager", True): 108.5471,
    ("compiled", True): 63.0783,
}

SOURCE = ("measured: bench/compile_saved.py `bwd_peak` (torch 2.13 CPU, Inductor; torchao float8 "
          "at pytorch/ao@0afa4c1), bench/data/compile/saved_llama_block.torch-2.13.json; "
          "torch/utils/checkpoint.py (non-reentrant: the block's unsaved ops re-run in its "
          "backward); torchtitan distributed/activation_checkpoint.py (_save_list, every other mm)")


def backward_layer_term(model, tokens: int, compiled_cut: bool) -> Term:
    """The last op-SAC layer's backward transients: measured bytes per token per hidden unit ×
    tokens × d / tp, scaled from bf16 to the run's compute dtype."""
    float8 = model.tr.precision == "fp8"
    kind = "compiled" if compiled_cut else "eager"
    per = BWD_PEAK[(kind, float8)]
    d, tp, c = model.arch.hidden, model.topo.tp, model.dt.compute
    value = int(per * c / 2 * tokens * d / tp)
    what = (("a compiled block (the partitioner's graph)" if compiled_cut else "eager SAC")
            + (", float8 linears" if float8 else ""))
    return Term(
        name="activations.backward_layer", component="activations", bytes=value,
        formula=(f"the last layer's backward ({what}): {per:g} B per token per hidden unit"
                 + (f" × {c}/2 B" if c != 2 else "")
                 + f" × {tokens:,} tokens × d {d}" + (f" / tp {tp}" if tp > 1 else "")),
        inputs={"bytes_per_token_hidden": per, "tokens": tokens, "hidden": d, "tp": tp,
                "compiled": compiled_cut, "float8": float8, "b_compute": c},
        source=SOURCE)


SRC_DEL_PRED = ("torchtitan train.py forward_backward_step (9dec370, e7c0cae): `del pred` before "
                "`loss.backward()`, so the logits live only in the loss's autograd graph, whose "
                "saved tensors autograd frees once the loss's backward node has run")

SRC_ROOT_GRAD = ("FSDP2 fully_shard: the root unit's post-backward (its reduce-scatter) runs in "
                 "the root's final callback at the end of the backward (its forward inputs, the "
                 "token ids, need no gradient), so the LM head's and final norm's unsharded "
                 "gradients are held from the output projection's backward on; torch/distributed/"
                 "fsdp/_fully_shard/_fsdp_state.py _root_post_backward_final_callback, "
                 "_fsdp_param_group.py _register_post_backward_hook (only inputs that require "
                 "grad), torch 2.13")


def root_gradient_term(model, plan) -> Term:
    """While the layers' backward runs (the last layer's recompute under op-level SAC or full
    AC, FSDP's mid-backward unit without AC: memory/training.py), the gradients of the LM head
    and the final norm (written by the output projection's backward before) are held: unsharded
    in the compute dtype under FSDP2 until the root's reduce-scatter at the end, else in the
    gradients' dtype.
    A tied head's gradient is the embedding's."""
    counts, tp = model.counts, model.topo.tp
    params = -(-(counts.final_norm + (counts.lm_head or counts.embedding)) // tp)
    b = (2 if model.dt.compute == 2 else 4) if model.fsdp_sharded else model.dt.grad
    return Term(
        name="gradients.lm_head", component="gradients", bytes=params * b,
        formula=f"(final norm + LM head) {params:,} params (/ tp {tp}) × {b} B",
        inputs={"params": params, "bytes_per_param": b, "tp": tp},
        source=SRC_ROOT_GRAD if model.fsdp_sharded else
        "autograd writes each parameter's .grad when its backward runs (the LM head's first)")


def float8_abs_applies(model) -> bool:
    """Whether the run's saved set could hold the float8 casts' abs outputs: eager torchao
    float8 linears under torchtitan's op-level SAC whose file does not date its torchtitan after
    the list lost aten.abs (`model.converters` came 2025-02-15, after 88247277c 2025-02-06).
    Compiled blocks keep only what their backward reads (the min-cut partitioner; measured:
    13.625 B per token per hidden unit with the abs list too, bench/data/compile/)."""
    return bool(model.op_sac and model.tr.precision == "fp8" and not model.conv.te_fp8
                and not model.tr.compile and model.conv.float8_switch != "converters")


def float8_abs_saved(model) -> bool:
    """The casts' abs outputs are counted (assumption sac.float8_abs = saved)."""
    return float8_abs_applies(model) and model.assume["sac.float8_abs"] == "saved"


def float8_abs_assumed(model) -> tuple:
    """The estimate's `assumed` entry and note for sac.float8_abs, where it applies."""
    if not float8_abs_applies(model):
        return (), []
    arch, tr, topo = model.arch, model.tr, model.topo
    tokens = tr.micro_batch * model.seq_local
    items = act.float8_abs_items(act.shapes(arch, False), model.dt.compute, topo.tp, tokens,
                                 weights_cast=model.conv.gather_bytes != 1)
    layers = -(-arch.layers // max(1, model.par.pp))
    extra = sum(i.per_token for i in items) * tokens * layers
    value = model.assume["sac.float8_abs"]
    entry = {"key": "sac.float8_abs", "value": value,
             "source": "assumption (memlint/assumptions.py): the file's float8 switch "
                       f"({model.conv.float8_switch or 'not stated'}) does not date its "
                       "torchtitan; " + act.SRC_FLOAT8_ABS}
    gib = extra / 2 ** 30
    note = ("eager float8 under torchtitan's op-level SAC: "
            + ("the float8 casts' abs outputs are counted (assumption sac.float8_abs=saved)"
               if value == "saved" else
               f"a torchtitan of 2024-11-26..2025-02-06 (aten.abs in its SAC list) also keeps "
               f"abs() of every float8 cast, {gib:.1f} GiB more per GPU here; not counted "
               "(assumption sac.float8_abs=recomputed; --set sac.float8_abs=saved)"))
    return (entry,), [note]
