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
- which activations a compiled block saves: with activation checkpointing the policy decides
  (torchtitan's op-level SAC marks what must be saved, torch/utils/checkpoint.py), so memlint keeps
  the eager saved set; without it the partitioner may recompute more than eager autograd keeps,
  which memlint does not model (an estimate at or above the real one): the note below.
"""
from __future__ import annotations

from memlint.assumptions import assumed

NOTE = ("compile=true: a compiled loss keeps the compute-dtype logits (assumption "
        "compile.loss_saved); the saved activations are eager PyTorch's (what activation "
        "checkpointing keeps; without it a compiled block may save less)")

SRC_PARTITIONER = ("pytorch/pytorch torch/_functorch/partitioners.py "
                   "min_cut_rematerialization_partition (the fewest-bytes cut between forward "
                   "and backward; pointwise ops recomputed)")


def compile_notes(training) -> list:
    """Notes for the estimate: what `compile` changes that memlint does not model."""
    return [NOTE] if getattr(training, "compile", False) else []


def compile_assumed(scenario, conv) -> tuple:
    """The compile assumptions an estimate rests on, for its `assumed` list (`conv`: the run's
    Conventions, whose `compiled_loss` says whether the loss runs compiled)."""
    if not conv.compiled_loss:
        return ()
    value = assumed(scenario.assumptions, "compile.loss_saved")
    return ({"key": "compile.loss_saved", "value": value,
             "source": f"assumption (memlint/assumptions.py); {SRC_PARTITIONER}"},)
