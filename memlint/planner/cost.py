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

from memlint.records import record

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


@record(frozen=True)
class Penalty:
    name: str
    fraction: float      # extra step time / ideal compute time
    explanation: str
    source: str

    def to_dict(self) -> dict:
        return {"name": self.name, "fraction": round(self.fraction, 6),
                "explanation": self.explanation, "source": self.source}


@record(frozen=True)
class Cost:
    relative_step_time: float
    penalties: tuple[Penalty, ...]

    def to_dict(self) -> dict:
        return {"relative_step_time": round(self.relative_step_time, 6),
                "penalties": [p.to_dict() for p in self.penalties]}


@record(frozen=True)
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


def _dp_mode(zero: int, fsdp: str) -> str:
    """How data parallelism moves bytes (what the data_parallel penalty reads of ZeRO / FSDP)."""
    if zero >= 3 or fsdp in ("full", "hybrid"):
        return "sharded"
    if zero == 2 or fsdp == "shard_grad_op":
        return "reduce_scatter"
    return "all_reduce"


def _sum(terms: list) -> float:
    """The penalties' fractions added in order (one summation for ranking and showing)."""
    total = 0.0
    for term in terms:
        total += term[1]
    return total


def _fmt(x: float) -> str:
    return f"{x * 100:.1f}%"


class CostModel:
    """The cost model of one search: the model, the machine and the fixed settings given once;
    `step_time` ranks a candidate (numbers only), `cost` adds each penalty's explanation (for
    the plans shown). Both run the same formulas (`_core`, `_offload`) and add them in the same
    order, so a plan's shown cost is exactly the one it was ranked by."""

    def __init__(self, f: ModelFacts, *, gpu: str, gpus_per_node: int, world: int, seq: int,
                 vpp: int, seed_layout: bool, reshard_after_forward: bool, grad_bytes: int,
                 param_bytes: int):
        self.f = f
        self.flops, self.intra, self.hbm = hardware(gpu)
        self.gpus_per_node, self.world, self.seq, self.vpp = gpus_per_node, world, seq, vpp
        self.seed_layout, self.reshard = seed_layout, reshard_after_forward
        self.grad_bytes, self.param_bytes = grad_bytes, param_bytes
        self.per_token = 6 * f.active_params + 6 * f.layers * seq * f.q_width
        self._memo: dict = {}

    def _t_c(self, tokens: float) -> float:
        """The ideal compute time of a step of `tokens` tokens per GPU."""
        return tokens * self.per_token / (self.world * self.flops * MFU)

    def step_time(self, tokens: float, tp: int, pp: int, cp: int, ep: int, etp: int, dp: int,
                  expert_dp: int, zero: int, fsdp: str, replicate: int, recompute: str,
                  recompute_every: int, microbatches: int, micro_batch: int,
                  offload_optimizer: str, offload_params: str, optimizer_shard: int,
                  stage_layers: tuple) -> float:
        """relative_step_time of a layout (the arguments of `cost`), numbers only. The sum of
        the penalties before the offload ones is memoized: the ZeRO stages and offload choices
        of one layout that move the same bytes share it."""
        mode = _dp_mode(zero, fsdp)
        key = (tokens, tp, pp, cp, ep, etp, dp, expert_dp, mode, replicate, recompute,
               recompute_every, microbatches, micro_batch, stage_layers)
        total = self._memo.get(key)
        if total is None:
            total = self._memo[key] = _sum(self._core(
                tokens, tp, pp, cp, ep, etp, dp, expert_dp, zero, fsdp, replicate, recompute,
                recompute_every, microbatches, micro_batch, stage_layers, False))
        if offload_optimizer != "none" or offload_params != "none":
            for term in self._offload(tokens, tp, pp, ep, etp, offload_optimizer,
                                      offload_params, optimizer_shard, False):
                total += term[1]
        return 1.0 + total

    def cost(self, tokens: float, tp: int, pp: int, cp: int, ep: int, etp: int, dp: int,
             expert_dp: int, zero: int, fsdp: str, replicate: int, recompute: str,
             recompute_every: int, microbatches: int, micro_batch: int, offload_optimizer: str,
             offload_params: str, optimizer_shard: int, stage_layers: tuple) -> Cost:
        """The penalties of a layout with their explanations (the plans shown)."""
        terms = self._core(tokens, tp, pp, cp, ep, etp, dp, expert_dp, zero, fsdp, replicate,
                           recompute, recompute_every, microbatches, micro_batch, stage_layers,
                           True)
        terms += self._offload(tokens, tp, pp, ep, etp, offload_optimizer, offload_params,
                               optimizer_shard, True)
        return Cost(1.0 + _sum(terms), tuple(Penalty(*t) for t in terms))

    def _core(self, tokens: float, tp: int, pp: int, cp: int, ep: int, etp: int, dp: int,
              expert_dp: int, zero: int, fsdp: str, replicate: int, recompute: str,
              recompute_every: int, microbatches: int, micro_batch: int, stage_layers: tuple,
              explain: bool) -> list:
        """(name, fraction, explanation, source) of each penalty but the offload ones;
        explanations are "" unless `explain`. `tokens`: tokens per optimizer step (global
        batch · T)."""
        t_c = self._t_c(tokens)
        m = max(1, microbatches)
        out, re_frac = self._recompute(recompute, recompute_every, explain)
        if pp > 1:
            out.append(self._bubble(pp, m, explain))
        if tp > 1:
            out.append(self._tensor(tokens, tp, pp, cp, ep, dp, m, re_frac, t_c, explain))
        out += self._data(tp, pp, cp, ep, etp, dp, expert_dp, zero, fsdp, replicate, recompute,
                          m, t_c, explain)
        if ep > 1 and self.f.moe_layers:
            out.append(self._expert(tokens, tp, pp, ep, etp, m, re_frac, t_c, explain))
        if cp > 1:
            out.append(self._context(tp, pp, cp, m, micro_batch, re_frac, t_c, explain))
        if pp > 1:
            out += self._pipeline(tp, pp, cp, m, micro_batch, stage_layers, t_c, explain)
        out.append(self._small_gemm(cp, ep, micro_batch, explain))
        return out

    @staticmethod
    def _recompute(recompute: str, recompute_every: int, explain: bool) -> tuple:
        """([the recompute penalty] or [], the share of the forward run again)."""
        if recompute == "full":
            return [("recompute", 1 / 3, "full recompute re-runs every forward: +1/3 FLOPs",
                     "Korthikanti et al. 2022: full recompute +30-40%")], 1 / 3
        if recompute == "selective":
            k = max(1, recompute_every)
            re_frac = (1 / 3) * (k - 1) / k if k > 1 else SELECTIVE_CORE_FRACTION
            what = ((f"selective every {k} layers re-runs {k - 1}/{k} of the forward" if k > 1
                     else "selective (attention core only)") if explain else "")
            return [("recompute", re_frac, what,
                     "memlint throughput model: selective recompute +15-25%")], re_frac
        return [], 0.0

    def _bubble(self, pp: int, m: int, explain: bool) -> tuple:
        vpp = self.vpp
        frac = (pp - 1) / (m * max(1, vpp))
        what = ""
        if explain:
            idle = (pp - 1) / (m * max(1, vpp) + pp - 1)
            what = (f"(pp-1)/(m+pp-1) = {pp - 1}/({m}+{pp - 1}) = {_fmt(idle)} of the step "
                    f"idle with m = {m} micro-batches" + (f", vpp {vpp}" if vpp > 1 else ""))
        return ("pipeline_bubble", frac, what, "Narayanan et al. 2021 section 2.2")

    def _tensor(self, tokens: float, tp: int, pp: int, cp: int, ep: int, dp: int, m: int,
                re_frac: float, t_c: float, explain: bool) -> tuple:
        f = self.f
        layers_per_stage = f.layers / pp
        stage_tokens = tokens / (dp * cp) if not self.seed_layout else tokens / (dp * cp * ep)
        bw, where = link(tp, self.gpus_per_node, self.intra)
        collectives = 4 + 2 * (re_frac * 3)  # a recomputed forward repeats its 2 all-reduces
        volume = (layers_per_stage * stage_tokens * collectives * 2 * (tp - 1) / tp
                  * f.hidden * BF16)
        lat = layers_per_stage * m * collectives * latency(bw)
        frac = (volume / bw + lat) / t_c
        return ("tensor_parallel", frac,
                f"tp {tp} all-reduces ({collectives:g} per layer) {where} "
                f"at {bw / 1e9:.0f} GB/s" if explain else "", "Shoeybi et al. 2019")

    def _data(self, tp: int, pp: int, cp: int, ep: int, etp: int, dp: int, expert_dp: int,
              zero: int, fsdp: str, replicate: int, recompute: str, m: int, t_c: float,
              explain: bool) -> list:
        """Data parallelism / ZeRO / FSDP traffic of the dense and the expert parameters."""
        f, seed_layout = self.f, self.seed_layout
        dense_local = f.dense_params / (tp * pp)
        expert_local = f.expert_params / ((tp if seed_layout else etp) * ep * pp)
        stride = tp * cp * (ep if seed_layout else 1)
        dp_time = 0.0
        parts = []
        for params, group in ((dense_local, dp), (expert_local, expert_dp)):
            if params <= 0 or group <= 1:
                continue
            t, part = self._dp_group(params, group, stride, zero, fsdp, replicate, recompute, m,
                                     explain)
            dp_time += t
            if explain:
                parts.append(part)
        if not dp_time:
            return []
        frac = dp_time * (1 - DP_OVERLAP) / t_c
        return [("data_parallel", frac, "; ".join(parts) +
                 f" ({_fmt(DP_OVERLAP)} hidden under compute)" if explain else "",
                 "Rajbhandari et al. 2020")]

    def _dp_group(self, params: float, group: int, stride: int, zero: int, fsdp: str,
                  replicate: int, recompute: str, m: int, explain: bool) -> tuple:
        """(seconds per step, what) of one parameter group's data-parallel traffic."""
        gpus_per_node, intra = self.gpus_per_node, self.intra
        param_bytes, grad_bytes = self.param_bytes, self.grad_bytes
        ring = (group - 1) / group
        if zero >= 3 or fsdp in ("full", "hybrid"):
            shard_group = max(1, group // max(1, replicate))
            gathers = (2 if self.reshard else 1) + (1 if recompute == "full" else 0)
            s_ring = (shard_group - 1) / shard_group
            bw, _ = link(stride * shard_group, gpus_per_node, intra)
            t = m * (gathers * s_ring * params * param_bytes
                     + s_ring * params * grad_bytes) / bw
            if replicate > 1:
                bw_r, _ = link(stride * group, gpus_per_node, intra)
                t += 2 * (replicate - 1) / replicate * params / shard_group * grad_bytes / bw_r
            return t, (f"{gathers} param all-gathers + grad reduce-scatter per "
                       f"micro-batch over {shard_group}" if explain else "")
        bw, _ = link(stride * group, gpus_per_node, intra)
        if zero == 2 or fsdp == "shard_grad_op":
            t = (m * ring * params * grad_bytes + ring * params * param_bytes) / bw
            return t, f"grad reduce-scatter per micro-batch over {group}" if explain else ""
        t = 2 * ring * params * grad_bytes / bw
        return t, f"one grad all-reduce per step over {group}" if explain else ""

    def _expert(self, tokens: float, tp: int, pp: int, ep: int, etp: int, m: int,
                re_frac: float, t_c: float, explain: bool) -> tuple:
        f = self.f
        span = ep * (tp if self.seed_layout else etp)
        bw, where = link(span, self.gpus_per_node, self.intra)
        passes = 4 + 2 * (re_frac * 3)
        volume = ((f.moe_layers / pp) * (tokens * pp / self.world) * passes * f.top_k * f.hidden
                  * BF16 * (ep - 1) / ep)
        lat = (f.moe_layers / pp) * m * passes * latency(bw)
        frac = (volume / bw + lat) / t_c
        return ("expert_parallel", frac,
                f"ep {ep} all-to-all ({passes:g} per MoE layer, top-{f.top_k}) {where}"
                if explain else "", "all-to-all per MoE layer, expensive across nodes")

    def _context(self, tp: int, pp: int, cp: int, m: int, micro_batch: int, re_frac: float,
                 t_c: float, explain: bool) -> tuple:
        f = self.f
        layers_per_stage = f.layers / pp
        bw, where = link(tp * cp, self.gpus_per_node, self.intra)
        local = micro_batch * self.seq / cp
        kv = 2 * f.kv_width / tp * BF16
        hops = (cp - 1) * (1 + 2 + re_frac * 3)  # forward K,V; backward K,V + dK,dV
        volume = layers_per_stage * m * hops * local * kv
        lat = layers_per_stage * m * hops * latency(bw)
        frac = (volume / bw * (1 - CP_OVERLAP) + lat) / t_c
        return ("context_parallel", frac,
                f"cp {cp} ring: {cp - 1} serial K/V hops per layer {where}, "
                f"{local:,.0f} tokens per chunk" if explain else "",
                "Liu et al. 2023, ring attention: P2P ring, latency-bound")

    def _pipeline(self, tp: int, pp: int, cp: int, m: int, micro_batch: int,
                  stage_layers: tuple, t_c: float, explain: bool) -> list:
        """Stage imbalance (the LM head on the last stage) and the sends between stages."""
        f, gpus_per_node = self.f, self.gpus_per_node
        out = []
        layer_active = max(1.0, (f.active_params - 2 * f.vocab * f.hidden) / max(1, f.layers))
        loads = [float(n) for n in (stage_layers or [f.layers / pp] * pp)]
        loads[-1] += f.vocab * f.hidden / layer_active
        loads[0] += 0.0  # the embedding lookup costs no GEMM
        imbalance = max(loads) * pp / sum(loads) - 1
        if imbalance > 1e-9:
            out.append(("stage_imbalance", imbalance,
                        f"slowest stage: {max(loads):.2f} layer-equivalents vs mean "
                        f"{sum(loads) / pp:.2f} (LM head on the last stage)"
                        if explain else "",
                        "Narayanan et al. 2021; Megatron uneven pipeline splits"))
        bw_p, _ = link(gpus_per_node + 1, gpus_per_node, self.intra)
        p2p = 2 * m * micro_batch * (self.seq / cp) * f.hidden * BF16 / tp
        t = p2p / bw_p + 2 * m * latency(bw_p)
        out.append(("pipeline_p2p", t / t_c,
                    f"activations sent between stages: 2 x {m} micro-batches"
                    if explain else "", "Narayanan et al. 2021"))
        return out

    def _small_gemm(self, cp: int, ep: int, micro_batch: int, explain: bool) -> tuple:
        f = self.f
        ridge = self.flops / self.hbm
        tokens_mb = micro_batch * self.seq / cp
        dense_share = f.dense_params / max(1.0, f.active_params)
        frac = dense_share * ridge / tokens_mb
        why = f"{tokens_mb:,.0f} tokens per micro-batch per GPU" if explain else ""
        if f.num_experts and f.expert_params:
            per_expert = tokens_mb * f.top_k * ep / f.num_experts
            frac += (1 - dense_share) * ridge / max(1.0, per_expert)
            if explain:
                why += f", {per_expert:,.0f} per local expert"
        return ("small_gemm", frac, f"{why} (ridge point {ridge:.0f} FLOP/B)"
                if explain else "", "roofline: GEMM arithmetic intensity ~ tokens")

    def _offload(self, tokens: float, tp: int, pp: int, ep: int, etp: int,
                 offload_optimizer: str, offload_params: str, optimizer_shard: int,
                 explain: bool) -> list:
        """The offload penalties, as `_core` gives the others."""
        f, out = self.f, []
        if offload_optimizer != "none":
            dense_local = f.dense_params / (tp * pp)
            expert_local = f.expert_params / ((tp if self.seed_layout else etp) * ep * pp)
            shard = (dense_local + expert_local) / max(1, optimizer_shard)
            t = 4 * shard / HOST_BANDWIDTH + shard / CPU_ADAM_PARAMS_PER_S
            out.append(("offload_optimizer", t / self._t_c(tokens),
                        f"{shard / 1e9:.2f}B params/GPU: PCIe 4N bytes + CPU Adam each step"
                        if explain else "", "ZeRO-Offload, Ren et al. 2021; 3-5x at 26.75B/GPU"))
        if offload_params != "none":
            out.append(("offload_params", PARAM_OFFLOAD_SLOWDOWN - 1,
                        f"parameters streamed over PCIe every micro-batch: "
                        f"x{PARAM_OFFLOAD_SLOWDOWN:g}" if explain else "",
                        "ZeRO-Infinity, Rajbhandari et al. 2021; 5-20x"))
        return out

