"""torch.compile (`compile`, `compile_loss` scenario keys): what memlint models and what it assumes.

torchtitan compiles each TransformerBlock and, by default, the loss (`CompileConfig.components =
["model", "loss"]`, torchtitan/config/job_config.py; `training.compile` compiled the loss from
bbb1b616e, 2025-04-02, torchtitan/components/loss.py build_cross_entropy_loss; at 9dec370 the
loss compile was commented out). The HF Trainer's `torch_compile` compiles the model's forward,
loss included. What changes, as terms with sources:
- a compiled cross-entropy (memory/logits.py `compiled_loss_terms`): AOTAutograd's min-cut
  partitioner (torch/_functorch/partitioners.py `min_cut_rematerialization_partition`) saves the
  cut of fewest bytes between forward and backward and recomputes pointwise ops in the backward.
  For `cross_entropy(pred.float(), labels)` that cut is the compute-dtype logits plus per-row
  statistics (amax, log-sum-exp): the fp32 upcast, the log-probabilities and their gradient are
  never materialized, and Inductor's fused backward writes the logits' gradient in their dtype.
  Whether the partitioner keeps exactly that cut depends on the graph and the torch version, so
  it is the named assumption `compile.loss_saved` (default `logits`; `eager`: the eager loss's
  buffers, an upper bound), listed in the estimate's `assumed`;
- compiled blocks fuse the SwiGLU's pointwise silu·mul (Inductor's pointwise fusion), one
  intermediate fewer in the forward's cached temporaries (memory/allocator.py mlp_transients);
- which activations a compiled block saves, measured by bench/compile_saved.py on a
  torchtitan-style Llama-3 block in bf16 (torch 2.6, 2.8 and 2.13 CPU builds, Inductor; torchao
  float8 linears at pytorch/ao@0afa4c1; bench/data/compile/), in bytes per token per hidden unit:
  - op-level SAC (torchtitan's `_save_list` policy): eager 15.625, compiled 13.625, with float8
    linears compiled 13.625 too. Eager SAC caches the output of every MUST_SAVE op whether or
    not the backward reads it (torch/utils/checkpoint.py _CachingTorchDispatchMode); the min-cut
    partitioner bans recomputing MUST_SAVE nodes but saves only the nodes a backward op reads
    (the cut between forward and backward), and no backward op reads w2's output. Which of the
    two memlint counts is the assumption `compile.block_saved`: `eager` (the default, an upper
    bound by 2 B per token per hidden unit and layer) or `partitioner` (the measured set,
    activations.op_sac_items `compiled`). Under FSDP2 (four blocks, rank 0 of 8 on the fake
    process group) the compiled blocks keep 13.625 per layer too, with bf16 linears, float8
    linears and float8 all-gathers. The default stays at the upper bound because the
    measured set, applied to the published torchtitan rows, leaves the two H200 rows
    (torchtitan e7c0cae, torch 2.8, float8 all-gather, compiled loss) 8-10% under with 4-5 GiB
    per GPU that memlint does not find, while the H100 rows (9dec370) would come within 2.5%;
  - full AC: eager 2.0, compiled 2.0 (the block input; plus the 5 KB CPU generator state):
    unchanged;
  - no AC: eager 60.2, compiled 37.2 (the partitioner recomputes the RMSNorm's fp32 upcast,
    RoPE and SiLU in the backward). Not modeled: memlint keeps eager's saved set, an estimate
    at or above the real one, and says so in the note.
  The last op-SAC layer's backward (its recompute and activation gradients) follows the same
  assumption: memory/sac_backward.py (eager 65.05, compiled 39.02 bytes per token per hidden
  unit above the backward's start, measured).
  The partitioner's choice does not depend on the device for these ops; the GPU runs' SDPA is
  aten._scaled_dot_product_flash_attention (in the policy's list), the CPU's
  _scaled_dot_product_flash_attention_for_cpu, which the script's policy treats alike.
- the compiled loss, measured by the same script on torch 2.6, 2.8 and 2.13: the forward keeps 0.001 B
  per logit beyond the bf16 logits (per-row statistics), the backward peaks at 2 B per logit
  (the bf16 gradient); eager keeps 4 B (the fp32 log-probabilities) and peaks 8 B above it: the
  terms above.
"""
from __future__ import annotations

from memlint.assumptions import assumed

NOTE = ("compile=true: a compiled loss keeps the compute-dtype logits (assumption "
        "compile.loss_saved); a compiled block under torchtitan's op-level AC is counted with "
        "eager SAC's saved outputs (assumption compile.block_saved; the partitioner keeps "
        "2 bytes per token per hidden unit less, measured), under full AC it keeps what eager "
        "does; without activation checkpointing the saved activations are eager PyTorch's, "
        "though a compiled block saves less (37 vs 60 bytes per token per hidden unit "
        "measured, bench/compile_saved.py)")

SRC_BLOCK = ("eager: the policy's MUST_SAVE outputs as eager SAC caches them (an upper bound); "
             "partitioner: measured, bench/compile_saved.py, bench/data/compile/")

SRC_COMPILED_SAC = ("compiled block: w2's output, which no backward op reads, is not saved "
                    "(pytorch/pytorch torch/_functorch/partitioners.py "
                    "min_cut_rematerialization_partition saves the forward-backward cut; eager "
                    "SAC caches every MUST_SAVE output, torch/utils/checkpoint.py "
                    "_CachingTorchDispatchMode); measured with torch 2.6-2.13: 15.625 -> "
                    "13.625 B per token per hidden unit (bench/compile_saved.py, "
                    "bench/data/compile/)")

SRC_PARTITIONER = ("pytorch/pytorch torch/_functorch/partitioners.py "
                   "min_cut_rematerialization_partition (the fewest-bytes cut between forward "
                   "and backward; pointwise ops recomputed)")


def compile_notes(training) -> list:
    """Notes for the estimate: what `compile` changes that memlint does not model."""
    return [NOTE] if getattr(training, "compile", False) else []


def compiled_block_saves_cut(model) -> bool:
    """Whether the compiled blocks of an op-level SAC run keep only the partitioner's cut
    (assumption compile.block_saved=partitioner) rather than eager SAC's cached outputs."""
    return bool(model.tr.compile and model.op_sac
                and model.assume["compile.block_saved"] == "partitioner")


def compile_assumed(scenario, conv) -> tuple:
    """The compile assumptions an estimate rests on, for its `assumed` list (`conv`: the run's
    Conventions, whose `compiled_loss` says whether the loss runs compiled and `op_level_sac`
    whether torchtitan's op-level policy checkpoints the compiled blocks)."""
    out = []
    if conv.compiled_loss:
        value = assumed(scenario.assumptions, "compile.loss_saved")
        out.append({"key": "compile.loss_saved", "value": value,
                    "source": f"assumption (memlint/assumptions.py); {SRC_PARTITIONER}"})
    if scenario.training.compile and conv.op_level_sac:
        value = assumed(scenario.assumptions, "compile.block_saved")
        out.append({"key": "compile.block_saved", "value": value,
                    "source": "assumption (memlint/assumptions.py); " + SRC_BLOCK})
    return tuple(out)
