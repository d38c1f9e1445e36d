"""Token mixers other than softmax attention: Mamba-2 (SSD), Mamba-1 (selective scan), Gated
DeltaNet and the gated short convolution of LFM2; their exact parameter counts.

One frozen record per mixer kind, with the dimensions its module is built from and `params(d)`,
the parameters of one mixer of a model of width d (what `sum(p.numel())` reports for that
module). `tp_replicated` is the part every tensor-parallel rank holds whole (Megatron's Mamba
mixer splits in_proj, conv1d, dt_bias, A_log, D, the gated norm and out_proj by heads and groups:
megatron/core/ssm/mamba_mixer.py at NVIDIA/Megatron-LM@d98e8a64dd; none of its parameters is
replicated).

Sources of the shapes (the module constructors):
- Mamba-2: mamba_ssm/modules/mamba2.py (state-spaces/mamba@e9594ce), transformers'
  Mamba2Mixer / NemotronHMamba2Mixer / BambaMixer / FalconH1Mixer / Zamba2MambaMixer /
  GraniteMoeHybridMambaLayer (5.24), Megatron's MambaMixer: in_proj d -> 2·d_inner + 2·G·N + H
  (z, x, B, C, dt), a depthwise conv1d over x, B, C (d_inner + 2·G·N channels, kernel K),
  dt_bias, A_log and D per head, a gated RMSNorm over d_inner, out_proj d_inner -> d.
- Mamba-1: transformers' JambaMambaMixer: in_proj d -> 2·d_inner, conv1d over d_inner, x_proj
  d_inner -> R + 2·N, dt_proj R -> d_inner (+ bias), A_log d_inner × N, D d_inner, out_proj;
  Jamba adds RMSNorms over dt (R), B and C (N each).
- Gated DeltaNet (Yang et al. 2024, "Gated Delta Networks"): transformers' Qwen3NextGatedDeltaNet
  (one fused in_proj_qkvz and in_proj_ba) and Qwen3_5GatedDeltaNet (in_proj_qkv, in_proj_z,
  in_proj_b, in_proj_a): q and k of H_k heads × d_k, v and the output gate z of H_v heads ×
  d_v, the decay inputs a and the write strengths b (one per value head), a bias-free depthwise
  conv1d over q, k, v, dt_bias and A_log per value head, a gated RMSNorm over d_v, out_proj.
- LFM2 short convolution (transformers' Lfm2ShortConv): in_proj d -> 3·d (B, C, x), a depthwise
  conv1d of `L_cache` taps over d channels, out_proj d -> d.
"""
from __future__ import annotations

from memlint.records import record

@record(frozen=True)
class Mamba2:
    """Mamba-2 / SSD mixer (Dao & Gu 2024, "Transformers are SSMs")."""

    d_inner: int      # heads · head_dim (or an explicit intermediate size)
    heads: int        # H
    head_dim: int     # P
    groups: int       # G: B and C are shared by the heads of a group
    state: int        # N
    conv_kernel: int  # K
    conv_bias: bool = True
    proj_bias: bool = False      # in_proj (and out_proj unless out_bias says otherwise)
    out_bias: bool = False
    gated_norm: bool = True      # RMSNormGated over d_inner (FalconH1: mamba_rms_norm)
    chunk: int = 256             # the SSD chunk length (chunk_size / mamba_chunk_size)

    @property
    def conv_dim(self) -> int:
        return self.d_inner + 2 * self.groups * self.state

    @property
    def in_proj_out(self) -> int:
        return self.d_inner + self.conv_dim + self.heads  # z, x B C, dt

    def params(self, d: int) -> int:
        p = d * self.in_proj_out + (self.in_proj_out if self.proj_bias else 0)
        p += self.conv_dim * self.conv_kernel + (self.conv_dim if self.conv_bias else 0)
        p += 3 * self.heads  # dt_bias, A_log, D
        p += self.d_inner if self.gated_norm else 0
        p += self.d_inner * d + (d if self.out_bias else 0)
        return p


@record(frozen=True)
class Mamba1:
    """Mamba-1 selective scan mixer (Gu & Dao 2023), as Jamba builds it."""

    d_inner: int
    state: int        # N
    conv_kernel: int
    dt_rank: int      # R
    conv_bias: bool = True
    proj_bias: bool = False
    dt_norms: bool = True  # Jamba: RMSNorms over dt, B and C

    def params(self, d: int) -> int:
        e, n, r = self.d_inner, self.state, self.dt_rank
        p = d * 2 * e + (2 * e if self.proj_bias else 0)
        p += e * self.conv_kernel + (e if self.conv_bias else 0)
        p += e * (r + 2 * n)          # x_proj (no bias)
        p += r * e + e                # dt_proj with its bias
        p += e * n + e                # A_log, D
        p += e * d + (d if self.proj_bias else 0)
        p += (r + 2 * n) if self.dt_norms else 0
        return p


@record(frozen=True)
class GatedDeltaNet:
    """Gated DeltaNet linear attention (Yang, Kautz & Hatamizadeh 2024)."""

    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    conv_kernel: int

    @property
    def qk_width(self) -> int:
        return self.key_heads * self.key_dim

    @property
    def v_width(self) -> int:
        return self.value_heads * self.value_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.qk_width + self.v_width

    def params(self, d: int) -> int:
        p = d * (self.conv_dim + self.v_width)      # q, k, v and the output gate z
        p += d * 2 * self.value_heads               # b and a
        p += self.conv_dim * self.conv_kernel       # conv1d, no bias
        p += 2 * self.value_heads                   # dt_bias, A_log
        p += self.value_dim                         # gated RMSNorm over one head
        p += self.v_width * d                       # out_proj
        return p


@record(frozen=True)
class ShortConv:
    """LFM2's gated short convolution."""

    kernel: int       # conv_L_cache
    bias: bool = False

    def params(self, d: int) -> int:
        return d * 3 * d + (3 * d if self.bias else 0) + d * self.kernel + (
            d if self.bias else 0) + d * d + (d if self.bias else 0)
