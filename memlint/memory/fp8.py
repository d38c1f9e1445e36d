"""FP8 weights under Transformer Engine (`precision=fp8`, `fp8_params`).

Read at NVIDIA/TransformerEngine@d0067d0 (transformer_engine/pytorch/module/linear.py,
module/base.py):
- Without FP8 parameters the weights stay in high precision (bf16 under Megatron, the
  optimizer's fp32 master besides), and every forward of a TE `Linear` quantizes its weight:
  `_Linear.forward` sets the weight quantizer to rowwise usage (the forward GEMM) plus columnwise
  usage when the input needs a gradient (the transposed FP8 copy the dgrad GEMM reads on Hopper),
  then `quantize_weight` builds the FP8 copy. When the caller passes `is_first_microbatch` (Megatron
  does, to reuse the cast over micro-batches) the copy is cached in the module's
  `_fp8_workspaces["weight"]` for the whole step; otherwise it is saved for backward (`wt_save`).
  Either way every linear of the stage holds 1 B (rowwise) + 1 B (columnwise) per weight element
  at the end of forward: `weights.fp8_copies`.
- With FP8 parameters (`te.quantized_model_init` / `fp8_model_init`, Megatron
  `--fp8-param-gather`, read as `param_dtype=fp8` or `fp8_params=true`) the linear weights *are*
  FP8 tensors (1 B per element, no bf16 copy);
  `quantize_weight` only calls `update_usage(columnwise_usage=True)` on them, which adds the
  transposed 1 B copy: `weights.fp8` (1 B) + `weights.fp8_transpose` (1 B).
- Megatron `--fp8-param-gather` (with `--fp8-format`) is read as `fp8_params=true`: by the TE
  code above the embedding and output layer stay bf16 and Hopper keeps a 1 B transpose. Megatron
  CI's gpt3_weekly_mcore_tp4_cp2_current_scaling_native_fp8_tp_sp_cp_tp_overlap (H100,
  `--fp8-param-gather`, distributed optimizer) allocates 300.7 MB after the step: 299.5 MB
  (-0.4%) this way, 283.1 MB (-5.9%) with every weight 1 B and no transpose (`param_dtype=fp8`,
  the earlier reading, still what an explicit `param_dtype=fp8` means). NVIDIA's Llama-3-8B FP8
  H100 example (examples/llama/train_llama3_8b_h100_fp8.sh at d98e8a6, CP_SIZE=1, no recompute)
  then needs 81.3 GiB of an 80 GiB GPU, a warning (it rests on the default GPU and on
  --empty-unused-memory-level, which memlint counts too high) that points to cp=2. No
  measurement of that layout is published: the example's README reports its FP8 throughput at
  CP 2, which fits (61.6 GiB), and Megatron-Bridge's H100 FP8 recipe at CP 1
  (perf_recipes/llama/h100/llama3.py) recomputes 5 layers (tests/cli/test_real_configs.py).
- Norms, embeddings, the output layer and the MoE router are not TE FP8 GEMMs and keep the
  high-precision width. The per-tensor scales (a few floats per linear) are not counted. FSDP2
  runs do not cache or save the workspace (`is_fsdp2`: re-quantized in backward), and PyTorch
  runs without TE (torchao float8) are not modeled here: for `framework=fsdp2` no term is added.
"""
from __future__ import annotations

from memlint.memory.terms import Term

SOURCE = ("NVIDIA/TransformerEngine@d0067d0 pytorch/module/linear.py _Linear.forward (rowwise + columnwise FP8 "
          "weight), module/base.py quantize_weight / _fp8_workspaces")


def linear_params(counts, layers, tp: int, etp_ep: int) -> tuple:
    """(dense linear, expert linear) weight elements of the given decoder layers per GPU:
    attention + dense MLP + shared experts divided by tp; routed experts by etp·ep."""
    dense = sum(counts.layers[i].attention + counts.layers[i].mlp
                + counts.layers[i].shared_experts for i in layers)
    experts = sum(counts.layers[i].experts for i in layers)
    return -(-dense // max(1, tp)), -(-experts // max(1, etp_ep))


def fp8_params(training) -> bool:
    """FP8 parameters: `fp8_params=true`."""
    return bool(training.fp8_params)


def adapter_fp8_weights(training) -> bool:
    """`param_dtype=fp8` without `fp8_params`: every weight already 1 B, nothing added here
    (see the module docstring)."""
    return training.param_dtype == "fp8" and not training.fp8_params


def high_precision_bytes(param_bytes: int) -> int:
    """Width of the weights TE does not quantize: the run's param width, or bf16 (2 B) when
    `param_dtype=fp8` describes only the FP8 linears."""
    return param_bytes if param_bytes > 1 else 2


def applies(precision: str, te_fp8: bool, seed_states: bool) -> bool:
    """Whether TE's FP8 weight copies are counted: FP8 through Transformer Engine (the run's
    conventions, `te_fp8`), not under the articles' states.model."""
    return precision == "fp8" and te_fp8 and not seed_states


def needs_transpose(compute_capability) -> bool:
    """TE utils.py `is_non_tn_fp8_gemm_supported`: sm 10.x/11.x and 13+ read FP8 data in any
    layout, so no transposed copy; Hopper, Ada and sm 12.x need one for the dgrad GEMM."""
    cc = tuple(compute_capability or (9, 0))
    return not ((10, 0) <= cc < (12, 0) or cc >= (13, 0))


def fp8_copy_terms(dense_linear: int, expert_linear: int, transpose: bool = True) -> list:
    """High-precision weights plus FP8 rowwise (and, where needed, columnwise) copies of every
    linear weight."""
    n = dense_linear + expert_linear
    if n <= 0:
        return []
    per = 2 if transpose else 1
    return [Term("weights.fp8_copies", "weights", per * n,
                 f"linear weights ({dense_linear:,} dense/tp + {expert_linear:,} experts/(etp·ep))"
                 + (" × (1 B rowwise + 1 B columnwise FP8)" if transpose
                    else " × 1 B FP8 (no transpose on this GPU)"),
                 {"dense_linear": dense_linear, "expert_linear": expert_linear,
                  "bytes_per_element": per}, SOURCE)]


def fp8_param_terms(dense_linear: int, expert_linear: int, param_bytes: int,
                    transpose: bool = True) -> tuple:
    """FP8 parameters: (elements to remove from the high-precision weight terms, new terms).

    The linear weights are 1 B FP8 tensors instead of `param_bytes`, plus their 1 B transpose
    where the GPU needs one (Megatron's distributed optimizer pre-creates it after each param
    all-gather: TE tensor/utils.py `post_all_gather_processing`)."""
    n = dense_linear + expert_linear
    if n <= 0:
        return 0, []
    inputs = {"dense_linear": dense_linear, "expert_linear": expert_linear}
    terms = [Term("weights.fp8", "weights", n,
                  f"FP8 linear weights {n:,} × 1 B (instead of {param_bytes} B)", dict(inputs),
                  SOURCE + "; fp8_model_init / Megatron --fp8-param-gather")]
    if transpose:
        terms.append(Term("weights.fp8_transpose", "weights", n,
                          f"columnwise (transposed) FP8 copy {n:,} × 1 B", dict(inputs),
                          SOURCE + "; tensor/utils.py post_all_gather_processing, "
                          "float8_tensor_storage.py update_usage"))
    return n, terms
