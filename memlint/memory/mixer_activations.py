"""Saved activations of the token mixers of memory/mixers.py, per token of one layer, from the
kernels each framework calls (each an `Item`, so --explain lists them).

Megatron-LM (`megatron_mamba_items`): MambaLayer with the memory-efficient path (the default;
`--disable-mamba-mem-eff-path` turns it off) calls mamba_ssm's `mamba_split_conv1d_scan_combined`
(megatron/core/ssm/mamba_mixer.py `_ssm_training` at NVIDIA/Megatron-LM@d98e8a64dd). Its
autograd function (mamba_ssm/ops/triton/ssd_combined.py MambaSplitConv1dScanCombinedFn at
state-spaces/mamba@e9594ce) saves `zxbcdt` (the in_proj output: z, x, B, C, dt) and `out_x`
(the scan output before the z gate), and recomputes the causal conv1d (causal_conv1d_fwd) and the
chunk states in backward; Megatron then applies the gated RMSNorm (mamba_ssm
ops/triton/layernorm_gated.py LayerNormFn: saves its input and rstd per group) and out_proj (its
input). in_proj is a TELayerNormColumnParallelLinear (saves the layer input and the norm output);
bias-dropout-add keeps a dropout mask with hidden dropout.

transformers (`hf_mixer_items`), with the kernels the HF code dispatches to (assumption
`ssm.kernels`, "fused": mamba_ssm and causal-conv1d for Mamba-2/Mamba-1, fla for Gated DeltaNet;
"torch": the modules' own torch fallbacks, which transformers uses when those packages are absent
and on a CPU):
- Mamba-2 (NemotronH, Bamba, GraniteMoeHybrid, FalconH1, Zamba2, Mamba2 mixers, training path):
  fused: `mamba_split_conv1d_scan_combined` with the gated norm and out_proj inside: zxbcdt, out_x,
  rstd (fp32, one per group); torch: `torch_forward`'s chunked SSD in fp32 (the conv output; x,
  dt·x, B and C repeated to every head; the per-chunk L, G = C·Bᵀ and M = G·L (chunk length per
  head each); B·decay; the chunk states (H·P·N per chunk); C·states; the output).
- Gated DeltaNet (Qwen3-Next, Qwen3.5): fused: causal_conv1d_fn keeps the conv input, fla's
  ChunkGatedDeltaRuleFunction (fla/ops/gated_delta_rule/chunk.py at
  fla-org/flash-linear-attention@bc3b101d) keeps the l2-normalized q and k with their rstd, v, the
  gate cumsum g (fp32), beta and the WY matrix A (k.dtype, 64 per value head); torch:
  `torch_chunk_gated_delta_rule` in fp32 (q, k, v, beta, decay, the pairwise decay, UT system and
  intra-chunk attention (64 per head each), the solved values, and one recurrent state
  (d_k × d_v per head) per 64-token chunk).
- the gated RMSNorm and out_proj around them, and LFM2's short convolution (in_proj output, the
  B·x product, the conv output, C·conv, out_proj input).
All items are bytes per token of the local micro-batch; tensor-parallel regions divide by tp
(Megatron shards the mixer by heads and groups), the norm/dropout region by tp only with
sequence parallelism.
"""
from __future__ import annotations

from memlint.memory.mixers import GatedDeltaNet, Mamba1, Mamba2, ShortConv
from memlint.memory.terms import Item

#: fla's chunk size for Gated DeltaNet and transformers' torch fallback's (chunk_size=64)
GDN_CHUNK = 64


def megatron_mamba_items(m: Mamba2, d: int, c: int, tp: int, sp: bool, hidden_dropout: bool,
                         gemm: int = 0) -> list:
    """A Megatron MambaLayer's saved tensors (module docstring)."""
    g = gemm or c
    rep = tp if sp else 1
    items = [
        Item("norm input (in_proj's fused LayerNorm)", c * d / rep),
        Item("in_proj input (norm output)", g * d / rep),
        Item("zxBCdt: in_proj output, kept by mamba_split_conv1d_scan_combined",
             c * m.in_proj_out / tp),
        Item("SSM scan output before the z gate (out_x)", c * m.d_inner / tp),
        Item("gated RMSNorm input and rstd (fp32 per group)",
             (c * m.d_inner + 4 * m.groups) / tp),
        Item("out_proj input (norm output)", g * m.d_inner / tp),
    ]
    if hidden_dropout:
        items.append(Item("mixer dropout mask", d / rep))
    return items


def megatron_mamba_backward_transient(m: Mamba2, c: int, tp: int, chunk: int) -> float:
    """Bytes per token the Mamba layer's backward allocates on top of the saved tensors
    (MambaSplitConv1dScanCombinedFn.backward: the recomputed conv output, dzxbcdt, dxBC, and
    `_mamba_chunk_scan_combined_bwd`'s chunk states and their gradients, fp32 H·P·N per chunk,
    and C·Bᵀ per chunk, fp32 G·chunk)."""
    states = 2 * 4 * m.heads * m.head_dim * m.state / chunk
    cb = 4 * m.groups * chunk
    return (c * (m.conv_dim * 2 + m.in_proj_out) + states + cb) / tp


def hf_mixer_items(kind: str, mixer, d: int, c: int, fused: bool) -> list:
    """The HF mixer's saved tensors beyond its input (the layer's norm output, counted by the
    norm): fused kernels or the torch fallback (module docstring)."""
    if kind == "mamba2":
        return _hf_mamba2(mixer, c, fused)
    if kind == "mamba1":
        return _hf_mamba1(mixer, c, fused)
    if kind == "gdn":
        return _hf_gdn(mixer, d, c, fused)
    if kind == "shortconv":
        return _hf_shortconv(mixer, d, c)
    return []


def _hf_mamba2(m: Mamba2, c: int, fused: bool) -> list:
    if fused:
        items = [Item("zxBCdt: in_proj output, kept by mamba_split_conv1d_scan_combined",
                      c * m.in_proj_out),
                 Item("SSM scan output before the gate (out_x)", c * m.d_inner)]
        if m.gated_norm:
            items.append(Item("gated RMSNorm rstd (fp32 per group)", 4 * m.groups))
        return items
    h, p, n = m.heads, m.head_dim, m.state
    k = m.chunk
    return [
        Item("in_proj output (z, xBC, dt)", c * m.in_proj_out),
        Item("conv1d output (x, B, C)", c * m.conv_dim),
        # x.float(): a copy below fp32; in an fp32 model x stays a view of the SiLU output, which
        # it keeps whole
        Item("x after SiLU in fp32", 4 * h * p if c < 4 else c * m.conv_dim),
        Item("dt: biased, softplus, clamped, broadcast (fp32)", 4 * 4 * h),
        Item("torch SSD: x padded for the D residual (fp32)", 4 * h * p),
        Item("torch SSD: L = exp(segment_sum(A)) per chunk (fp32)", 4 * h * k),
        Item("torch SSD: G = C·Bᵀ and M = G·L per chunk (fp32)", 2 * 4 * h * k),
        Item("torch SSD: B and C repeated to every head, their chunked layouts, B·decay (fp32)",
             5 * 4 * h * n),
        Item("torch SSD: x·dt and its layout for the state einsum (fp32)", 2 * 4 * h * p),
        Item("torch SSD: chunk states and the inter-chunk recurrence (fp32, H·P·N per chunk)",
             2 * 4 * h * p * n / k),
        Item("torch SSD: C·states (fp32)", 4 * h * p),
        Item("gated RMSNorm: SiLU(z), gated input, grouped view, normalized (fp32), rstd",
             4 * 4 * m.d_inner + (4 * m.d_inner if c < 4 else 0) + 4 * m.groups)
        if m.gated_norm else
        Item("gate: SiLU(z) and the fp32 SSM output", c * m.d_inner + 4 * m.d_inner),
        Item("out_proj input", c * m.d_inner),
    ]


def _hf_mamba1(m: Mamba1, c: int, fused: bool) -> list:
    e, n, r = m.d_inner, m.state, m.dt_rank
    items = [Item("in_proj output (x, z)", c * 2 * e),
             Item("conv1d output and SiLU", 2 * c * e),
             Item("x_proj output (dt, B, C) and their RMSNorms (fp32)", (c + 4) * (r + 2 * n)),
             Item("dt_proj output", c * e)]
    if fused:
        # selective_scan_fn (mamba_ssm/ops/selective_scan_interface.py) keeps u, delta, A, B, C,
        # D, z and the chunk states x (fp32, 2·N per channel per 2048 positions)
        items.append(Item("selective scan: u, delta, z, output", 4 * c * e))
    else:
        # JambaMambaMixer.slow_forward: discretize, then a loop over positions whose every
        # state (fp32) and its cast for the C·state product are kept
        items += [
            Item("torch scan: dt softplus (fp32), broadcast", 2 * 4 * e + c * e),
            Item("torch scan: discretized A and B·x per state (fp32)", 2 * 4 * e * n),
            Item("torch scan: the state after each position (fp32)", 4 * e * n),
            Item("torch scan: each state cast for C·state", c * e * n if c < 4 else 0),
            Item("gate: SiLU(z), gated output", 2 * c * e),
        ]
    items.append(Item("out_proj input", c * e))
    return items


def _hf_gdn(g: GatedDeltaNet, d: int, c: int, fused: bool) -> list:
    hk, hv, qk, v = g.key_heads, g.value_heads, g.qk_width, g.v_width
    k, dk, dv = GDN_CHUNK, g.key_dim, g.value_dim
    items = [Item("conv input: q, k, v concatenated", c * g.conv_dim),
             Item("conv1d output (q, k, v)", c * g.conv_dim),
             Item("beta = sigmoid(b); decay: a + dt_bias, softplus (fp32)", 4 * 4 * hv)]
    if fused:
        items += [
            Item("fla: l2-normalized q, k and their rstd", c * 2 * qk + 2 * 4 * hk),
            Item("fla: gate cumsum g (fp32) and beta", (4 + c) * hv),
            Item(f"fla: WY matrix A ({k} per value head)", c * hv * k),
        ]
    else:
        items += [
            Item("torch rule: q, k repeated to the value heads, l2-normalized (fp32), rstd",
                 2 * (4 * hv * dk + 4 * hv)),
            Item("torch rule: padded v and k·beta, beta (fp32)", 4 * (hv * dv + hv * dk + hv)),
            # (an fp32 model keeps two more of each: its reshapes are copies, not views)
            Item("torch rule: chunked k·beta, k, q for the matmuls (fp32)",
                 (4 if c == 4 else 2) * 4 * hv * dk),
            Item(f"torch rule: pairwise decay, UT system, intra-chunk attention, their "
                 f"solves ({k} per head, fp32)", (8 if c == 4 else 6) * 4 * hv * k),
            Item(f"torch rule: recurrent states and chunk slices (fp32, per {k}-token chunk)",
                 4 * 4 * hv * dk * dv / k),
            Item("torch rule: output (fp32)", 4 * v),
        ]
    items += [Item("gated RMSNorm: fp32 input, z and SiLU(z); normalized, product; rstd",
                   3 * 4 * v + 2 * c * v + 4 * hv),
              Item("out_proj input", c * v)]
    return items


def _hf_shortconv(s: ShortConv, d: int, c: int) -> list:
    return [Item("in_proj output (B, C, x)", c * 3 * d),
            Item("B·x (conv input)", c * d),
            Item("conv output", c * d),
            Item("out_proj input (C·conv)", c * d)]
