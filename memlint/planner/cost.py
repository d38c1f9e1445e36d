"""The throughput-penalty model that ranks fitting plans (`memlint plan`).

A plan's cost is its estimated step time relative to the ideal step (all GPUs computing the
model's FLOPs at a fixed utilization, nothing else): `relative_step_time = 1 + sum(fractions)`,
where each `Penalty.fraction` is the extra time of one mechanism divided by the ideal compute
time `t_c`. Lower is better. The numbers are order-of-magnitude engineering estimates meant to
rank layouts the way the seed article's decision tree does (article 000 CH 10.1-10.2, docs/seeds.md),
not to predict absolute throughput; every constant is named below with its source.

Ideal compute time per step and GPU (Kaplan et al. 2020 / Narayanan et al. 2021 FLOP count):
    t_c = tokens · (6·N_active + 6·L·T·d_q) / (world · peak_flops · MFU)
with N_active the parameters a token passes through (MoE: dense + experts·top_k/E), and the
attention score/value FLOPs halved for the causal mask.

Penalties (fractions of t_c):
- recompute (seed 000 CH 5.2): full re-runs the forward, forward ≈ 1/3 of forward+backward:
  +1/3 (the article's 30-40%); selective every K layers recomputes (K-1)/K of them:
  +(1/3)·(K-1)/K (K=2: 17%, K=4: 25%; the article's 15-25%); selective attention-core only
  (K=1, Megatron `--recompute-activations`): +3%.
- pipeline bubble (Narayanan et al. 2021, section 2.2): with m micro-batches per step and pp
  stages (vpp virtual stages each), the idle share of the step is (pp-1)/(m·vpp+pp-1), i.e.
  extra time (pp-1)/(m·vpp) of the ideal step.
- tensor parallelism (Megatron-LM, Shoeybi et al. 2019 / Korthikanti et al. 2022): per layer and
  token 4 all-reduces (or reduce-scatter + all-gather with SP, same bytes) of d values in bf16,
  each moving 2·(tp-1)/tp of the message per GPU (ring); 6 with full recompute. Over NVLink
  inside a node; across nodes the per-GPU NIC bandwidth applies (about 9x slower: the "big
  penalty"). Not overlapped.
- data parallelism / ZeRO / FSDP (seed 000 CH 3, 10.1; Rajbhandari et al. 2020): ZeRO-0/1
  all-reduce (or reduce-scatter + all-gather) the gradients once per step; ZeRO-2 reduce-
  scatters in every micro-batch's backward; ZeRO-3 / FSDP all-gather the parameters in every
  micro-batch's forward and backward (again for a full-recompute forward, seed 000 CH 5.3) and
  reduce-scatter gradients every micro-batch; HSDP does that inside the shard group and an
  all-reduce of the shard across replicas. `DP_OVERLAP` of it hides under compute.
- expert parallelism (seed 000 CH 10.1: all-to-all, expensive across nodes): per MoE layer and
  token, dispatch + combine in forward and backward of top_k·d bf16 values, (ep-1)/ep of it
  leaving the GPU. Not overlapped.
- context parallelism (seed 000 CH 4.4: ring P2P, cp-1 serial hops): K and V blocks passed
  cp-1 times in forward, K, V, dK, dV in backward; `CP_OVERLAP` hides under attention compute.
- small GEMMs (roofline): a GEMM of M tokens against a d×d' weight does ~M FLOPs per byte of
  weight it reads, so below the GPU's ridge point (peak FLOP/s / HBM bandwidth, ~295 on H100)
  it is bandwidth-bound; extra time ≈ ridge / M. M is the tokens of one micro-batch on one GPU
  (micro_batch · T / cp) for the dense part, and the tokens each local expert receives
  (M · top_k · ep / E) for the experts, weighted by their FLOP shares. This is what makes tiny
  CP chunks and MoE without EP slow.
- stage imbalance (uneven pipeline splits, the LM head on the last stage): the slowest stage
  sets the pace: max stage load · pp / total load - 1.
- pipeline P2P: each micro-batch's activations (micro_batch · T/cp · d / tp bf16 values) go to
  the next stage in forward and back in backward, across nodes.
- latency: every collective / P2P hop pays `LATENCY_INTRA` or `LATENCY_INTER` (NCCL small-
  message latency); it is what makes many-hop CP rings and deep pipelines of thin stages slow.
- optimizer offload (seed 000 CH 6.1): PCIe 4·N_shard bytes each step (bf16 grads down, bf16
  params up) at `HOST_BANDWIDTH`, plus CPU Adam at `CPU_ADAM_PARAMS_PER_S`. The article's
  example (26.75B params per GPU) gives its 3-5x; sharded by ZeRO the cost shrinks, as it says.
- parameter offload (seed 000 CH 6.2, 10.1: 5-20x): a flat x10 step time (+9).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

# Peak dense bf16 FLOP/s and per-GPU intra-node bandwidth (one direction, bytes/s), from the
# vendors' data sheets. Unknown GPUs use the H100 row.
_HW = {
    "H100-80GB": (989e12, 450e9, 3.35e12), "H100-94GB": (835e12, 300e9, 3.9e12),
    "H200": (989e12, 450e9, 4.8e12), "B200": (2250e12, 900e9, 8e12),
    "B300": (2250e12, 900e9, 8e12), "A100-80GB": (312e12, 300e9, 2.0e12),
    "A100-40GB": (312e12, 300e9, 1.55e12), "V100-32GB": (125e12, 150e9, 0.9e12),
    "V100-16GB": (125e12, 150e9, 0.9e12), "L40S": (362e12, 32e9, 0.86e12),
    "A10G": (125e12, 16e9, 0.6e12), "RTX-4090": (165e12, 16e9, 1.0e12),
    "MI300X": (1307e12, 448e9, 5.3e12), "MI325X": (1307e12, 448e9, 6e12),
    "MI250X": (383e12, 200e9, 3.2e12),
}
#: NCCL latency per collective step / P2P hop.
LATENCY_INTRA = 10e-6
LATENCY_INTER = 25e-6
#: Across nodes: one 400 Gb/s NIC per GPU (InfiniBand NDR / RoCE), ~50 GB/s.
INTER_NODE_BANDWIDTH = 50e9
#: Host link for offload: PCIe 4.0 x16 effective, seed 000 CH 6.1 (25-32 GB/s).
HOST_BANDWIDTH = 25e9
#: CPU Adam throughput per GPU process, seed 000 CH 6.1 (~8B params/s).
CPU_ADAM_PARAMS_PER_S = 8e9
#: Model FLOP utilization of the ideal step (only scales t_c; ranks are insensitive to it).
MFU = 0.5
#: Share of data-parallel / FSDP traffic hidden under compute (bucketed overlap, prefetch).
DP_OVERLAP = 0.5
#: Share of the CP ring hidden under the attention of the block in hand.
CP_OVERLAP = 0.5
#: Parameter offload multiplier (seed 000 CH 6.2 / 10.1: 5-20x).
PARAM_OFFLOAD_SLOWDOWN = 10.0
#: Selective recompute of the attention core only (Korthikanti et al. 2022: ~2-4% with flash).
SELECTIVE_CORE_FRACTION = 0.03
BF16 = 2


@dataclass(frozen=True)
class Penalty:
    name: str
    fraction: float      # extra step time / ideal compute time
    explanation: str
    source: str

    def to_dict(self) -> dict:
        return {"name": self.name, "fraction": round(self.fraction, 6),
                "explanation": self.explanation, "source": self.source}


@dataclass(frozen=True)
class Cost:
    relative_step_time: float
    penalties: tuple

    def to_dict(self) -> dict:
        return {"relative_step_time": round(self.relative_step_time, 6),
                "penalties": [p.to_dict() for p in self.penalties]}


@dataclass(frozen=True)
class ModelFacts:
    """What the cost model needs of the model, computed once per search."""

    layers: int
    moe_layers: int
    vocab: int
    hidden: int
    q_width: int           # heads · head_dim
    kv_width: int          # kv_heads · head_dim
    dense_params: int
    expert_params: int
    top_k: int
    num_experts: int

    @property
    def active_params(self) -> float:
        share = self.top_k / self.num_experts if self.num_experts else 0.0
        return self.dense_params + self.expert_params * share


def hardware(gpu: str):
    return _HW.get(gpu, _HW["H100-80GB"])


def link(span: int, gpus_per_node: int, intra: float) -> tuple:
    """Bandwidth of a group spanning `span` consecutive ranks: NVLink inside a node, else NIC."""
    if span <= gpus_per_node:
        return intra, "inside a node"
    return INTER_NODE_BANDWIDTH, "across nodes"


def latency(bw: float) -> float:
    return LATENCY_INTER if bw == INTER_NODE_BANDWIDTH else LATENCY_INTRA


def _fmt(x: float) -> str:
    return f"{x * 100:.1f}%"


@dataclass(frozen=True)
class Layout:
    """One candidate layout and the step it runs: what the penalties read."""

    gpu: str
    gpus_per_node: int
    world: int
    seq: int
    tokens: float           # tokens per optimizer step (global batch · T)
    tp: int
    pp: int
    vpp: int
    cp: int
    ep: int
    etp: int
    dp: int
    expert_dp: int
    seed_layout: bool       # the articles' layout: ep outside dp (states.model seed)
    zero: int
    fsdp: str
    replicate: int
    reshard_after_forward: bool
    recompute: str
    recompute_every: int
    microbatches: int
    micro_batch: int
    offload_optimizer: str
    offload_params: str
    grad_bytes: int
    param_bytes: int
    optimizer_shard: int
    stage_layers: tuple = ()


@dataclass(frozen=True)
class _Step:
    """What every penalty shares: the layout, the model, the compute time of a step t_c, the
    micro-batches m, the recomputed share of the forward and the hardware's numbers."""

    f: ModelFacts
    lay: Layout
    t_c: float
    m: int
    re_frac: float
    intra: float

    def link(self, span: int) -> tuple:
        return link(span, self.lay.gpus_per_node, self.intra)


def cost(f: ModelFacts, lay: Layout) -> Cost:
    """The penalties of one layout."""
    flops, intra, hbm = hardware(lay.gpu)
    per_token = 6 * f.active_params + 6 * f.layers * lay.seq * f.q_width
    t_c = lay.tokens * per_token / (lay.world * flops * MFU)
    recompute, re_frac = _recompute(lay)
    step = _Step(f, lay, t_c, max(1, lay.microbatches), re_frac, intra)
    out = [p for p in (recompute, _bubble(step), _tensor_parallel(step), _data_parallel(step),
                       _expert_parallel(step), _context_parallel(step)) if p is not None]
    out += _pipeline(step)
    out.append(_small_gemm(step, flops / hbm))
    out += _offload(step)
    total = 1.0 + sum(p.fraction for p in out)
    return Cost(total, tuple(out))


def _recompute(lay: Layout) -> tuple:
    """(penalty or None, share of the forward recomputed)."""
    if lay.recompute == "full":
        return Penalty("recompute", 1 / 3, "full recompute re-runs every forward: +1/3 FLOPs",
                       "Korthikanti et al. 2022: full recompute +30-40%"), 1 / 3
    if lay.recompute == "selective":
        k = max(1, lay.recompute_every)
        re_frac = (1 / 3) * (k - 1) / k if k > 1 else SELECTIVE_CORE_FRACTION
        what = (f"selective every {k} layers re-runs {k - 1}/{k} of the forward" if k > 1
                else "selective (attention core only)")
        return Penalty("recompute", re_frac, what,
                       "memlint throughput model: selective recompute +15-25%"), re_frac
    return None, 0.0


def _bubble(s: _Step) -> Optional[Penalty]:
    pp, vpp, m = s.lay.pp, s.lay.vpp, s.m
    if pp <= 1:
        return None
    frac = (pp - 1) / (m * max(1, vpp))
    idle = (pp - 1) / (m * max(1, vpp) + pp - 1)
    return Penalty("pipeline_bubble", frac,
                   f"(pp-1)/(m+pp-1) = {pp - 1}/({m}+{pp - 1}) = {_fmt(idle)} of the step "
                   f"idle with m = {m} micro-batches" + (f", vpp {vpp}" if vpp > 1 else ""),
                   "Narayanan et al. 2021 section 2.2")


def _stage_tokens(s: _Step) -> float:
    lay = s.lay
    return (lay.tokens / (lay.dp * lay.cp) if not lay.seed_layout
            else lay.tokens / (lay.dp * lay.cp * lay.ep))


def _tensor_parallel(s: _Step) -> Optional[Penalty]:
    f, tp = s.f, s.lay.tp
    if tp <= 1:
        return None
    bw, where = s.link(tp)
    collectives = 4 + 2 * (s.re_frac * 3)  # a recomputed forward repeats its 2 all-reduces
    layers_per_stage = f.layers / s.lay.pp
    volume = layers_per_stage * _stage_tokens(s) * collectives * 2 * (tp - 1) / tp * f.hidden \
        * BF16
    lat = layers_per_stage * s.m * collectives * latency(bw)
    return Penalty("tensor_parallel", (volume / bw + lat) / s.t_c,
                   f"tp {tp} all-reduces ({collectives:g} per layer) {where} "
                   f"at {bw / 1e9:.0f} GB/s", "Shoeybi et al. 2019")


def _local_params(s: _Step) -> tuple:
    """(dense, expert) parameters per GPU after tp/pp/ep (before data-parallel sharding)."""
    f, lay = s.f, s.lay
    dense = f.dense_params / (lay.tp * lay.pp)
    expert = f.expert_params / ((lay.tp if lay.seed_layout else lay.etp) * lay.ep * lay.pp)
    return dense, expert


def _data_parallel(s: _Step) -> Optional[Penalty]:
    """DP / ZeRO / FSDP traffic of the dense and the expert parameters, each over its group."""
    lay = s.lay
    dense_local, expert_local = _local_params(s)
    stride = lay.tp * lay.cp * (lay.ep if lay.seed_layout else 1)
    dp_time = 0.0
    parts = []
    for params, group in ((dense_local, lay.dp), (expert_local, lay.expert_dp)):
        if params <= 0 or group <= 1:
            continue
        t, part = _dp_group_time(s, params, group, stride)
        dp_time += t
        parts.append(part)
    if not dp_time:
        return None
    return Penalty("data_parallel", dp_time * (1 - DP_OVERLAP) / s.t_c, "; ".join(parts) +
                   f" ({_fmt(DP_OVERLAP)} hidden under compute)", "Rajbhandari et al. 2020")


def _dp_group_time(s: _Step, params: float, group: int, stride: int) -> tuple:
    """(seconds, what) of one parameter group's data-parallel traffic per step."""
    lay, m = s.lay, s.m
    ring = (group - 1) / group
    if lay.zero >= 3 or lay.fsdp in ("full", "hybrid"):
        shard_group = max(1, group // max(1, lay.replicate))
        gathers = (2 if lay.reshard_after_forward else 1) + (1 if lay.recompute == "full" else 0)
        s_ring = (shard_group - 1) / shard_group
        bw, _ = s.link(stride * shard_group)
        t = m * (gathers * s_ring * params * lay.param_bytes
                 + s_ring * params * lay.grad_bytes) / bw
        if lay.replicate > 1:
            bw_r, _ = s.link(stride * group)
            t += 2 * (lay.replicate - 1) / lay.replicate * params / shard_group \
                * lay.grad_bytes / bw_r
        return t, (f"{gathers} param all-gathers + grad reduce-scatter per micro-batch "
                   f"over {shard_group}")
    bw, _ = s.link(stride * group)
    if lay.zero == 2 or lay.fsdp == "shard_grad_op":
        t = (m * ring * params * lay.grad_bytes + ring * params * lay.param_bytes) / bw
        return t, f"grad reduce-scatter per micro-batch over {group}"
    return 2 * ring * params * lay.grad_bytes / bw, f"one grad all-reduce per step over {group}"


def _expert_parallel(s: _Step) -> Optional[Penalty]:
    f, lay = s.f, s.lay
    if lay.ep <= 1 or not f.moe_layers:
        return None
    span = lay.ep * (lay.tp if lay.seed_layout else lay.etp)
    bw, where = s.link(span)
    passes = 4 + 2 * (s.re_frac * 3)
    volume = (f.moe_layers / lay.pp) * (lay.tokens * lay.pp / lay.world) * passes * f.top_k \
        * f.hidden * BF16 * (lay.ep - 1) / lay.ep
    lat = (f.moe_layers / lay.pp) * s.m * passes * latency(bw)
    return Penalty("expert_parallel", (volume / bw + lat) / s.t_c,
                   f"ep {lay.ep} all-to-all ({passes:g} per MoE layer, top-{f.top_k}) {where}",
                   "all-to-all per MoE layer, expensive across nodes")


def _context_parallel(s: _Step) -> Optional[Penalty]:
    f, lay = s.f, s.lay
    cp = lay.cp
    if cp <= 1:
        return None
    bw, where = s.link(lay.tp * cp)
    local = lay.micro_batch * lay.seq / cp
    kv = 2 * f.kv_width / lay.tp * BF16
    hops = (cp - 1) * (1 + 2 + s.re_frac * 3)  # forward K,V; backward K,V + dK,dV
    layers_per_stage = f.layers / lay.pp
    volume = layers_per_stage * s.m * hops * local * kv
    lat = layers_per_stage * s.m * hops * latency(bw)
    return Penalty("context_parallel", (volume / bw * (1 - CP_OVERLAP) + lat) / s.t_c,
                   f"cp {cp} ring: {cp - 1} serial K/V hops per layer {where}, "
                   f"{local:,.0f} tokens per chunk",
                   "Liu et al. 2023, ring attention: P2P ring, latency-bound")


def _pipeline(s: _Step) -> list:
    """Stage imbalance (the LM head on the last stage) and the P2P sends between stages."""
    f, lay = s.f, s.lay
    pp = lay.pp
    if pp <= 1:
        return []
    out = []
    layer_active = max(1.0, (f.active_params - 2 * f.vocab * f.hidden) / max(1, f.layers))
    loads = [float(n) for n in (lay.stage_layers or [f.layers / pp] * pp)]
    loads[-1] += f.vocab * f.hidden / layer_active
    loads[0] += 0.0  # the embedding lookup costs no GEMM
    imbalance = max(loads) * pp / sum(loads) - 1
    if imbalance > 1e-9:
        out.append(Penalty("stage_imbalance", imbalance,
                           f"slowest stage: {max(loads):.2f} layer-equivalents vs mean "
                           f"{sum(loads) / pp:.2f} (LM head on the last stage)",
                           "Narayanan et al. 2021; Megatron uneven pipeline splits"))
    bw_p, _ = s.link(lay.gpus_per_node + 1)
    p2p = 2 * s.m * lay.micro_batch * (lay.seq / lay.cp) * f.hidden * BF16 / lay.tp
    t = p2p / bw_p + 2 * s.m * latency(bw_p)
    out.append(Penalty("pipeline_p2p", t / s.t_c,
                       f"activations sent between stages: 2 x {s.m} micro-batches",
                       "Narayanan et al. 2021"))
    return out


def _small_gemm(s: _Step, ridge: float) -> Penalty:
    f, lay = s.f, s.lay
    tokens_mb = lay.micro_batch * lay.seq / lay.cp
    dense_share = f.dense_params / max(1.0, f.active_params)
    frac = dense_share * ridge / tokens_mb
    why = f"{tokens_mb:,.0f} tokens per micro-batch per GPU"
    if f.num_experts and f.expert_params:
        per_expert = tokens_mb * f.top_k * lay.ep / f.num_experts
        frac += (1 - dense_share) * ridge / max(1.0, per_expert)
        why += f", {per_expert:,.0f} per local expert"
    return Penalty("small_gemm", frac, f"{why} (ridge point {ridge:.0f} FLOP/B)",
                   "roofline: GEMM arithmetic intensity ~ tokens")


def _offload(s: _Step) -> list:
    lay = s.lay
    out = []
    if lay.offload_optimizer != "none":
        dense_local, expert_local = _local_params(s)
        shard = (dense_local + expert_local) / max(1, lay.optimizer_shard)
        t = 4 * shard / HOST_BANDWIDTH + shard / CPU_ADAM_PARAMS_PER_S
        out.append(Penalty("offload_optimizer", t / s.t_c,
                           f"{shard / 1e9:.2f}B params/GPU: PCIe 4N bytes + CPU Adam each step",
                           "ZeRO-Offload, Ren et al. 2021; 3-5x at 26.75B/GPU"))
    if lay.offload_params != "none":
        out.append(Penalty("offload_params", PARAM_OFFLOAD_SLOWDOWN - 1,
                           f"parameters streamed over PCIe every micro-batch: "
                           f"x{PARAM_OFFLOAD_SLOWDOWN:g}",
                           "ZeRO-Infinity, Rajbhandari et al. 2021; 5-20x"))
    return out
