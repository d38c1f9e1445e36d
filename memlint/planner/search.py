"""Candidate generation, lower-bound pruning and the cost-ordered search of `memlint plan`.

The space (per framework, `FRAMEWORKS`): tp divides the attention and KV heads (and is at most
the GPUs of a node unless `cross_node_tp`), pp divides the layers or, where the framework allows
uneven stages (Megatron's decoder-first/last-pipeline-num-layers), splits them with lighter first
and last stages; cp is a power of two with T divisible by 2·cp (Megatron's load-balanced ring); ep
(MoE only) divides the experts; dp is what is left of the GPUs; ZeRO stage / FSDP / HSDP,
recompute none / selective every 2 or 4 layers / full, the micro batch among the divisors of the
per-replica batch, and optimizer / parameter offload to the CPU.

Pruning happens in two places, before any `estimate()`:
1. per layout (tp, pp, split, cp, ep, dp, sharding, offload): a lower bound of the model states
   (weights + gradients + optimizer) of every pipeline stage from the exact parameter counts and
   the divisors alone. A branch whose bound exceeds the GPU is cut with all its recompute and
   micro-batch leaves.
2. per leaf: the same plus a lower bound of the saved activations (each layer's checkpointed input
   at least, the per-layer tensors of the memory model when nothing is recomputed) and the
   runtime floor. Both bounds only ever leave terms out, so no plan that fits is cut (tested
   against brute force in tests/planner/test_plan.py).
A throughput rule cuts too: a pipeline must have at least as many micro-batches per step as
stages (m >= pp), else most of the step is bubble (Narayanan et al. 2021); `allow_bubble` lifts it.

Survivors are sorted by the cost model (memlint/planner/cost.py), which needs no estimate, and
estimated in that order; the search stops once it holds `top_k` plans with headroom and no later
candidate can rank above them.
"""
from __future__ import annotations

import math

from memlint.assumptions import assumed
from memlint.memory import activations as act
from memlint.memory import states
from memlint.memory.conventions import seq_per_gpu
from memlint.memory.estimate import estimate
from memlint.memory.params import architecture, count_params, pad_vocabulary
from memlint.memory.stages import stage_layers
from memlint.memory.topology import resolve
from memlint.planner import cost as costmod
from memlint.planner.factor import divisors
from memlint.records import field, record
from memlint.records import replace

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

#: Searched-key options by framework. `zero`: stages; `fsdp`: sharding modes; `uneven_pp`.
FRAMEWORKS = {
    # Megatron-LM: distributed optimizer (ZeRO-1 sharding of the optimizer); optimizer CPU offload
    # (--optimizer-cpu-offload, needs the distributed optimizer); TP/PP/CP/EP; uneven first/last
    # pipeline stages.
    "megatron": dict(zero=(0, 1), fsdp=("none",), tp=True, pp=True, cp=True, ep=True,
                     uneven_pp=True, offload_optimizer=True, offload_params=False),
    # DeepSpeed (Megatron-DeepSpeed for TP/PP, DeepSpeed-MoE for EP): ZeRO 0-3, pipeline only with
    # ZeRO <= 1; ZeRO-Offload of the optimizer (ZeRO >= 1) and of the parameters (ZeRO-3).
    "deepspeed": dict(zero=(0, 1, 2, 3), fsdp=("none",), tp=True, pp=True, cp=False, ep=True,
                      uneven_pp=False, offload_optimizer=True, offload_params=True),
    # torchtitan / FSDP2: DDP, FSDP (full), HSDP (hybrid); TP, PP, CP, EP; CPUOffloadPolicy moves
    # parameters, gradients and optimizer states together.
    "fsdp2": dict(zero=(0,), fsdp=("none", "full", "hybrid"), tp=True, pp=True, cp=True, ep=True,
                  uneven_pp=False, offload_optimizer=False, offload_params=True),
    # HF Trainer / accelerate: data parallel only, with FSDP or DeepSpeed ZeRO.
    "hf": dict(zero=(0, 1, 2, 3), fsdp=("none", "full", "hybrid", "shard_grad_op"), tp=False,
               pp=False, cp=False, ep=False, uneven_pp=False, offload_optimizer=True,
               offload_params=True),
}
#: The seed articles combine any ZeRO stage with Megatron TP/PP/EP (000 CH 3, 7: "Megatron
#: TP4+PP4+ZeRO2"); under states.model seed (the seed profile) the framework's list is widened.
SEED_ZERO = (0, 1, 2, 3)
RECOMPUTE = (("none", 1), ("selective", 2), ("selective", 4), ("full", 1))
#: Data-parallel sizes named when none divides the global batch.
MAX_LISTED = 6
#: Micro batches tried when no global batch is known.
DEFAULT_MICRO = (1, 2, 4, 8)
#: Keys compared to the starting configuration ("nearest = fewest changed keys").
DISTANCE_KEYS = ("tp", "pp", "cp", "ep", "zero", "fsdp", "dp_replicate", "recompute",
                 "recompute_every", "micro_batch", "offload_optimizer", "offload_params")


def uneven_split(layers: int, pp: int) -> Optional[tuple]:
    """(first, last) layers of a split with equal middle stages and first = last <= middle,
    as heavy as possible (the ends carry the embedding and the head); None if there is none."""
    if pp <= 2:
        if pp == 2 and layers >= 2:
            return (layers // 2, layers - layers // 2) if layers % 2 else None
        return None
    for k in range(layers // pp, 0, -1):
        rest = layers - 2 * k
        if rest > 0 and rest % (pp - 2) == 0 and k <= rest // (pp - 2):
            return (k, k)
    return None


@record
class Stats:
    examined: int = 0           # leaves (complete settings) considered
    pruned_states: int = 0      # leaves cut with their branch by the model-states bound
    pruned_bound: int = 0       # leaves cut by the states + activations bound
    pruned_rules: int = 0       # leaves cut by validity / throughput rules (m >= pp, batch)
    estimated: int = 0          # estimate() calls
    fitting: int = 0
    seconds: float = 0.0
    # why nothing fits, when nothing does (memlint.planner.why_none)
    layouts: int = 0            # (tp, pp, cp, ep) layouts whose product divides the GPUs
    no_batch: int = 0           # ... of them cut because dp does not divide the global batch
    batch_mismatch: list = field(default_factory=list)  # their dp sizes that do not divide gb
    lowest_peak: Optional[int] = None   # the smallest peak estimated (bytes)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class Branch:
    """One layout and sharding of the search (tp, pp, split, cp, ep, dp, ZeRO / FSDP, offload):
    what its leaves (recompute x micro batch) share, made once per branch."""

    __slots__ = ("settings", "topo", "zero", "fsdp", "off_opt", "off_par", "stage_layers",
                 "with_accum")

    def __init__(self, settings: dict, topo, stage_layers: tuple, with_accum: bool):
        self.settings, self.topo, self.stage_layers = settings, topo, stage_layers
        self.with_accum = with_accum  # a global batch is known: grad_accum is a setting
        self.zero, self.fsdp = settings["zero"], settings["fsdp"]
        self.off_opt, self.off_par = settings["offload_optimizer"], settings["offload_params"]


class Candidate:
    """A leaf of the search that the ranking reached: its branch, its leaf (recompute, every,
    micro batch, micro-batches per step) and its rank order. The search itself holds each leaf
    as a plain (order, branch, leaf) tuple; settings, scenario and the explained cost are made
    only for the candidates estimated or shown."""

    __slots__ = ("branch", "recompute", "every", "micro", "m", "order", "changed", "_settings")

    def __init__(self, branch: Branch, leaf: tuple, order: tuple, near: Optional[dict]):
        self.branch, self.order = branch, order
        self.recompute, self.every, self.micro, self.m = leaf
        self._settings = None
        self.changed = _changed(self.settings, near) if near is not None else ()

    @property
    def distance(self) -> int:
        return self.order[0]

    @property
    def settings(self) -> dict:
        """The scenario keys of this plan, in the order `--set` lists them."""
        if self._settings is None:
            settings = dict(self.branch.settings)
            settings.update({"recompute": self.recompute, "micro_batch": self.micro})
            if self.recompute == "selective":
                settings["recompute_every"] = self.every
            if self.branch.with_accum:
                settings["grad_accum"] = self.m
            self._settings = settings
        return self._settings

    def scenario(self, space: "Space"):
        return space.scenario(self.settings)

    def cost(self, space: "Space") -> costmod.Cost:
        return space.cost_model.cost(*space.cost_args(self.branch, self.recompute, self.every,
                                                      self.micro, self.m))


class Space:
    """Everything about the base scenario the search reuses, computed once."""

    def __init__(self, base, gpus: int, gpus_per_node: int, *, cross_node_tp: bool = False,
                 max_pp: Optional[int] = None, allow_bubble: bool = False):
        if base.model is None:
            raise ValueError("no model: give --model PATH|PRESET")
        self.base = base
        self.gpus = gpus
        self.gpus_per_node = gpus_per_node
        self.cross_node_tp = cross_node_tp
        self.allow_bubble = allow_bubble
        tr, self.tr = base.training, base.training
        self.framework = tr.framework
        # the articles' model-state accounting (assumption states.model, the seed profile's)
        self.seed_states = assumed(base.assumptions, "states.model") == "seed"
        self.ep_in_dp = bool(base.assumptions.get("parallel.ep_in_dp", True))
        opts = dict(FRAMEWORKS[self.framework])
        if self.seed_states:
            opts["zero"] = SEED_ZERO if self.framework != "fsdp2" else opts["zero"]
        self.opts = opts
        self.arch = architecture(base.model.config)
        self.counts = count_params(self.arch)
        self.dt = states.dtypes(tr, assumed(base.assumptions, "states.model"))
        model = base.model
        self.uniform = self.seed_states or model.total_params is not None
        total = model.total_params if model.total_params is not None else self.counts.total
        experts = (model.expert_params if model.expert_params is not None
                   else (0 if model.total_params is not None else self.counts.experts))
        self.total_params, self.expert_params = total, experts
        self.max_pp = max_pp or self.arch.layers
        self.seq = tr.seq_len
        self.moe = self.arch.is_moe
        a = self.arch
        moe_layers = sum(1 for x in a.moe_layers if x) if self.moe else 0
        self.facts = costmod.ModelFacts(
            layers=a.layers, moe_layers=moe_layers, vocab=a.vocab, hidden=a.hidden,
            q_width=a.heads * a.head_dim, kv_width=a.kv_heads * a.head_dim,
            dense_params=total - experts, expert_params=experts,
            top_k=a.moe.top_k if a.moe else 0, num_experts=a.moe.num_experts if a.moe else 0)
        self._act_cache: dict = {}
        self._stage_cache: dict = {}
        self._counts_by_tp: dict = {}
        self._bounds: dict = {}
        self._ckpt: dict = {}
        self._topologies: dict = {}
        self._splits: dict = {}
        par = base.parallelism
        self.cost_model = costmod.CostModel(
            self.facts, gpu=base.hardware.gpu, gpus_per_node=gpus_per_node, world=gpus,
            seq=self.seq, vpp=par.vpp, seed_layout=not self.ep_in_dp,
            reshard_after_forward=par.reshard_after_forward, grad_bytes=self.dt.grad,
            param_bytes=self.dt.compute)
        self._runtime = self._runtime_assumptions()

    # -- the space ----------------------------------------------------------------------------
    def tp_options(self) -> list:
        if not self.opts["tp"]:
            return [1]
        a = self.arch
        limit = self.gpus if self.cross_node_tp else min(self.gpus, self.gpus_per_node)
        g = math.gcd(a.heads, a.kv_heads)
        return [t for t in divisors(g) if t <= limit and self.gpus % t == 0]

    def pp_options(self) -> list:
        if not self.opts["pp"]:
            return [(1, None)]
        layers = self.arch.layers
        out = []
        for p in divisors(self.gpus):
            if p > min(layers, self.max_pp):
                break
            if layers % p == 0:
                out.append((p, None))
            elif self.opts["uneven_pp"]:
                split = uneven_split(layers, p)
                if split is not None:
                    out.append((p, split))
        return out

    def cp_options(self) -> list:
        if not self.opts["cp"]:
            return [1]
        out, c = [], 1
        while c <= self.gpus and (c == 1 or self.seq % (2 * c) == 0):
            if self.gpus % c == 0:
                out.append(c)
            c *= 2
        return out

    def ep_options(self) -> list:
        if not (self.opts["ep"] and self.moe):
            return [1]
        return [e for e in divisors(self.arch.moe.num_experts) if self.gpus % e == 0]

    def sharding_options(self, pp: int, dp: int) -> list:
        """(zero, fsdp, dp_replicate, offload_optimizer, offload_params) the framework allows."""
        out = []
        for zero in self.opts["zero"]:
            if self.framework == "deepspeed" and pp > 1 and zero > 1:
                continue  # DeepSpeed's pipeline engine supports ZeRO-1 at most
            for fsdp in self.opts["fsdp"]:
                if zero and fsdp != "none":
                    continue
                replicas = [1]
                if fsdp == "hybrid":
                    replicas = [r for r in divisors(dp) if 1 < r < dp]
                    if not replicas:
                        continue
                for r in replicas:
                    sharded = zero >= 1 or fsdp != "none"
                    out.append((zero, fsdp, r, "none", "none"))
                    if not sharded or dp == 1:
                        continue
                    if self.framework == "fsdp2":
                        out.append((zero, fsdp, r, "cpu", "cpu"))  # CPUOffloadPolicy
                        continue
                    if self.opts["offload_optimizer"] and (self.framework != "megatron"
                                                           or zero == 1):
                        out.append((zero, fsdp, r, "cpu", "none"))
                    if self.opts["offload_params"] and (zero == 3 or fsdp in ("full", "hybrid")):
                        out.append((zero, fsdp, r, "cpu", "cpu"))
        return out

    def micro_options(self, dp: int) -> Optional[list]:
        gb = self.tr.global_batch
        if gb is None:
            return list(DEFAULT_MICRO)
        if gb % dp:
            return None
        return divisors(gb // dp)

    # -- scenarios ----------------------------------------------------------------------------
    def scenario(self, settings: dict):
        base = self.base
        par_keys = {k: v for k, v in settings.items() if k in PAR_FIELDS}
        tr_keys = {k: v for k, v in settings.items() if k in TR_FIELDS}
        par = replace(base.parallelism, world_size=self.gpus, **par_keys)
        if "first_stage_layers" not in settings:
            par = replace(par, first_stage_layers=None, last_stage_layers=None)
        hw = replace(base.hardware, gpus_per_node=self.gpus_per_node)
        return replace(base, parallelism=par, training=replace(base.training, **tr_keys),
                       hardware=hw)

    # -- lower bounds -------------------------------------------------------------------------
    def stage_params(self, tp: int, pp: int, split, ep: int, etp: int) -> list:
        """Per stage (dense, experts) parameters per GPU after tp/pp/ep, never above what
        estimate() counts (it rounds up where this rounds down)."""
        key = (tp, pp, split, ep, etp)
        cached = self._stage_cache.get(key)
        if cached is not None:
            return cached
        layers = stage_layers(self.arch.layers, pp, *(split or (None, None)))
        out = []
        if self.uniform:
            expert_div = tp * ep if self.seed_states else etp * ep
            for n in layers:
                share = n / max(1, self.arch.layers)
                out.append(((self.total_params - self.expert_params) * share / tp,
                            self.expert_params * share / expert_div, n))
        else:
            start = 0
            c = self.counts_at(tp)
            for i, n in enumerate(layers):
                dense = experts = 0
                for layer in c.layers[start:start + n]:
                    dense += layer.total - layer.experts
                    experts += layer.experts
                if i == 0:
                    dense += c.embedding + c.position_embedding
                if i == pp - 1:
                    dense += c.final_norm + (c.lm_head if c.lm_head else 0)
                out.append((dense / tp, experts / (etp * ep), n))
                start += n
        self._stage_cache[key] = out
        return out

    def counts_at(self, tp: int):
        """Parameter counts with the vocabulary padded for `tp` (Megatron and gpt-neox pad it
        with the run's tp: memlint/facts/vocab.py), as each candidate's estimate counts them."""
        multiple = self.base.model.vocab_pad_multiple
        if not multiple:
            return self.counts
        cached = self._counts_by_tp.get(tp)
        if cached is None:
            cached = self._counts_by_tp[tp] = count_params(
                pad_vocabulary(self.arch, multiple, tp))
        return cached

    def states_bound(self, stage_params: list, topo, zero: int, fsdp: str, off_opt: str,
                     off_par: str) -> list:
        """Per stage (W + G + O, W + O + persistent G) lower bounds in bytes."""
        dt = self.dt
        if self.tr.lora_rank > 0 or self.tr.base_quant != "none":
            return [(0, 0)] * len(stage_params)
        moments = {"adamw": 2, "adam": 2, "fp8_adam": 2, "sgd": 1, "muon": 1}.get(
            self.tr.optimizer, 0)
        paged = 0 if dt.state_paged else 1  # paged states are host memory
        per_state = dt.master + paged * moments * dt.state_element_bytes
        one_moment = assumed(self.base.assumptions, "step.phases") == "one"
        keep_grads = one_moment or dt.grads_persistent
        sharded_w = zero >= 3 or fsdp in ("full", "hybrid")
        sharded_g = zero >= 2 or fsdp in ("full", "hybrid", "shard_grad_op")
        sharded_o = zero >= 1 or fsdp != "none"
        out, seen = [], {}   # the middle stages of a pipeline are alike: each bound made once
        for dense, experts, _ in stage_params:
            found = seen.get((dense, experts))
            if found is None:
                w = g = o = 0.0
                for params, shard in ((dense, topo.shard), (experts, topo.expert_shard)):
                    if params <= 0:
                        continue
                    sw = shard if sharded_w else 1
                    sg = shard if sharded_g else 1
                    so = shard if sharded_o else 1
                    if not (off_par != "none" and sw > 1):
                        w += params / sw * dt.param
                    g += params / sg * dt.grad
                    if off_opt == "none":
                        o += params / so * per_state
                persistent = g if keep_grads else 0.0
                found = seen[(dense, experts)] = (w + g + o, w + o + persistent)
            out.append(found)
        return out

    def activation_bound(self, tp: int, sp: bool, cp: int, layers: int, micro: int,
                         recompute: str, every: int, inflight: float) -> float:
        """A lower bound of a stage's saved activations, memoized: the shardings of a layout
        share it."""
        key = (tp, sp, cp, layers, micro, recompute, every, inflight)
        found = self._bounds.get(key)
        if found is None:
            found = self._bounds[key] = self._activation_bound(*key)
        return found

    def _activation_bound(self, tp: int, sp: bool, cp: int, layers: int, micro: int,
                          recompute: str, every: int, inflight: float) -> float:
        seq_local = seq_per_gpu(self.seq, cp)
        tokens = micro * seq_local
        assume = self.base.assumptions
        arch = self.arch
        try:
            if assume["activations.model"] == "seed":
                flash = self.tr.attention in ("flash", "sdpa")
                coeff = act.seed_layer_coefficient(assume["activations.c_act"],
                                                   assume["activations.c_attn_scores"],
                                                   arch.heads, self.seq, arch.hidden, flash)
                units = act.seed_stage_units(layers, recompute, every, coeff,
                                             assume["activations.c_act_full_recompute"])
                tp_div = tp if assume["activations.tp_divides"] else 1
                return units * tokens * arch.hidden / tp_div
            ckpt = self._checkpoint_bytes(tp, sp)
            if recompute == "full":
                return layers * ckpt * tokens * inflight
            full = 0.0
            if self.framework != "hf":
                full = self._min_layer_bytes(tp, sp, seq_local,
                                             recompute == "selective" and every <= 1)
            if recompute == "selective" and every > 1:
                full_layers = math.ceil(layers / every)
                return (full_layers * full + (layers - full_layers) * ckpt) * tokens * inflight
            return layers * full * tokens * inflight
        except Exception:  # the memory model changed shape: no activation bound, still sound
            return 0.0

    def _checkpoint_bytes(self, tp: int, sp: bool) -> float:
        """Per token, what a fully recomputed layer keeps (its checkpointed input)."""
        key = (tp, sp)
        found = self._ckpt.get(key)
        if found is None:
            found = self._ckpt[key] = sum(i.per_token for i in act.recompute_items(
                self.dt.compute, self.arch.hidden, tp, sp))
        return found

    def _min_layer_bytes(self, tp: int, sp: bool, seq_local: int, selective: bool) -> float:
        key = (tp, sp, seq_local, selective)
        if key in self._act_cache:
            return self._act_cache[key]
        arch = self.arch
        kinds = {bool(x) for x in arch.moe_layers} or {False}
        best = None
        for moe_layer in kinds:
            sh = act.shapes(arch, moe_layer and arch.moe is not None)
            items = act.fused_layer_items(sh, self.dt.compute, self.tr.attention in ("flash", "sdpa"),
                                          tp, sp, arch.hidden_dropout > 0,
                                          arch.attention_dropout > 0, selective)
            value = sum(i.bytes_per_token(seq_local) for i in items)
            best = value if best is None else min(best, value)
        self._act_cache[key] = best
        return best

    def _runtime_assumptions(self) -> Optional[tuple]:
        """(CUDA context bytes, allocator fraction) in force, None on a CPU or when unreadable."""
        if self.base.hardware.device == "cpu":
            return None
        assume = self.base.assumptions
        try:
            return (float(assume["runtime.cuda_context_bytes"]),
                    float(assume["runtime.allocator_fraction"]))
        except (KeyError, TypeError, ValueError):
            return None

    def runtime_floor_terms(self) -> Optional[tuple]:
        """(context, fraction): the CUDA context and allocator reserve over `tensors` bytes are
        context + tensors · fraction, as the assumptions in force set them (0 in seed); None:
        no floor."""
        return self._runtime

    # -- memoized per search ------------------------------------------------------------------
    def topology(self, settings: dict):
        """The resolved layout of a branch's settings (memory/topology.py), made once per
        distinct layout and sharding mode (offload choices share it)."""
        key = (settings["tp"], settings["pp"], settings["dp"], settings["cp"], settings["ep"],
               settings["zero"], settings["fsdp"], settings.get("dp_replicate"),
               settings.get("first_stage_layers"))
        topo = self._topologies.get(key)
        if topo is None:
            topo = self._topologies[key] = resolve(self.scenario(dict(settings)))
        return topo

    def stage_split(self, pp: int, split) -> tuple:
        """Layers per pipeline stage of (pp, uneven split)."""
        key = (pp, split)
        found = self._splits.get(key)
        if found is None:
            found = self._splits[key] = tuple(stage_layers(self.arch.layers, pp,
                                                           *(split or (None, None))))
        return found

    def cost_args(self, branch: Branch, recompute: str, every: int, micro: int, m: int) -> tuple:
        """The cost model's arguments for a leaf of `branch`."""
        s, topo = branch.settings, branch.topo
        gb = self.tr.global_batch or (micro * s["dp"] * m)
        so = topo.shard if (branch.zero >= 1 or branch.fsdp != "none") else 1
        return (gb * self.seq, s["tp"], s["pp"], s["cp"], s["ep"], topo.etp, topo.dp,
                topo.expert_dp, branch.zero, branch.fsdp, topo.replicate, recompute, every, m,
                micro, branch.off_opt, branch.off_par, so, branch.stage_layers)


PAR_FIELDS = {"tp", "pp", "dp", "cp", "ep", "zero", "fsdp", "dp_replicate", "offload_optimizer",
              "offload_params", "sp", "first_stage_layers", "last_stage_layers", "world_size"}
TR_FIELDS = {"recompute", "recompute_every", "micro_batch", "grad_accum"}

#: Relative slack on bounds: estimate() rounds each term to whole bytes.
_SLACK = 1e-6
_SLACK_BYTES = 1 << 16


def _sound(value: float) -> float:
    return value * (1 - _SLACK) - _SLACK_BYTES


def enumerate_candidates(space: Space, stats: Stats, prune: bool = True,
                         near: Optional[dict] = None) -> list:
    """Every valid leaf that survives the bounds, with its cost. `prune=False`: no memory bounds
    (brute force, for tests); validity and throughput rules still apply."""
    capacity = space.base.hardware.gpu_memory
    gpus = space.gpus
    out = []
    recompute_opts = RECOMPUTE
    if space.tr.attention == "eager":
        recompute_opts = RECOMPUTE + (("selective", 1),)
    gb = space.tr.global_batch
    for tp in space.tp_options():
        for pp, split in space.pp_options():
            for cp in space.cp_options():
                for ep in space.ep_options():
                    if space.ep_in_dp:
                        mp = tp * pp * cp
                    else:
                        mp = tp * pp * cp * ep
                    if gpus % mp:
                        continue
                    dp = gpus // mp
                    etp = space.base.parallelism.etp or tp
                    if space.ep_in_dp and ep > 1 and (dp * cp * tp) % (etp * ep):
                        continue  # Megatron: ep·etp must divide dp·cp·tp
                    stats.layouts += 1
                    micros = space.micro_options(dp)
                    if micros is None:
                        stats.no_batch += 1
                        if len(stats.batch_mismatch) < MAX_LISTED and \
                                dp not in stats.batch_mismatch:
                            stats.batch_mismatch.append(dp)
                        continue
                    out.extend(_layout(space, stats, prune, near, capacity, tp, pp, split, cp,
                                       ep, dp, micros, recompute_opts, gb))
    return out


def _layout(space, stats, prune, near, capacity, tp, pp, split, cp, ep, dp, micros,
            recompute_opts, gb) -> list:
    """The (order, branch, leaf) of every leaf of one layout that survives the bounds."""
    out = []
    sp = tp > 1 and space.framework in ("megatron", "fsdp2")
    if space.base.is_set("sp"):
        sp = space.base.parallelism.sp
    etp = space.base.parallelism.etp or tp
    params = space.stage_params(tp, pp, split, ep, etp)
    layer_counts = [n for _, _, n in params]
    leaves_per_sharding = len(recompute_opts) * len(micros)
    # The bound of any subset of stages is a bound of the peak: the first stage (most in-flight
    # micro-batches), the heaviest and the last (LM head) stand for all.
    probe_stages = sorted({0, layer_counts.index(max(layer_counts)), pp - 1})
    leaves, cut_by_rules = _leaves(space, prune, tp, sp, cp, pp, dp, micros, recompute_opts, gb,
                                   [(s, layer_counts[s]) for s in probe_stages])
    stage_split = space.stage_split(pp, split)
    runtime = space.runtime_floor_terms()
    cost_model = space.cost_model
    for zero, fsdp, rep, off_opt, off_par in space.sharding_options(pp, dp):
        settings0 = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "zero": zero,
                     "fsdp": fsdp, "offload_optimizer": off_opt, "offload_params": off_par,
                     "sp": sp}
        if fsdp == "hybrid":
            settings0["dp_replicate"] = rep
        if split is not None:
            settings0["first_stage_layers"], settings0["last_stage_layers"] = split
        topo = space.topology(settings0)
        if (zero or fsdp != "none") and topo.shard <= 1 and topo.expert_shard <= 1:
            continue  # nothing to shard over: the same plan as without ZeRO / FSDP
        stage_states = space.states_bound(params, topo, zero, fsdp, off_opt, off_par)
        stats.examined += leaves_per_sharding
        if prune and _sound(max(s[0] for s in stage_states)) > capacity:
            stats.pruned_states += leaves_per_sharding
            continue
        stats.pruned_rules += cut_by_rules
        branch = Branch(settings0, topo, stage_split, gb is not None)
        probe_states = [stage_states[s] for s in probe_stages]
        base_distance = _branch_distance(settings0, near) if near is not None else 0
        for leaf, acts in leaves:
            recompute, every, micro, m = leaf
            if prune:
                bound = 0.0
                for (wgo, wop), a in zip(probe_states, acts):
                    tensors = max(wgo, wop + a)
                    floor = runtime[0] + tensors * runtime[1] if runtime else 0.0
                    bound = max(bound, tensors + floor)
                if _sound(bound) > capacity:
                    stats.pruned_bound += 1
                    continue
            step = cost_model.step_time(*space.cost_args(branch, recompute, every, micro, m))
            distance = base_distance + _leaf_distance(leaf, near) if near is not None else 0
            out.append(((distance, round(step, 9)), branch, leaf))
    return out


def _leaves(space, prune, tp, sp, cp, pp, dp, micros, recompute_opts, gb, probes) -> tuple:
    """([(leaf, activation bounds of the probe stages)], leaves the m >= pp rule cuts) of one
    layout: a leaf is (recompute, every, micro batch, micro-batches per step m); every sharding
    of the layout shares them."""
    inflight_by_stage = space.base.assumptions.get("pipeline.inflight_microbatches")
    vpp = space.base.parallelism.vpp
    bubble = pp > 1 and not space.allow_bubble and gb is not None
    leaves, cut = [], 0
    for recompute, every in recompute_opts:
        for micro in micros:
            m = gb // (micro * dp) if gb is not None else (space.tr.grad_accum or 1)
            if bubble and m < pp:
                cut += 1
                continue
            acts = ()
            if prune:
                acts = tuple(space.activation_bound(
                    tp, sp, cp, n, micro, recompute, every,
                    act.inflight_microbatches(s, pp, vpp, m if gb is not None else 0)
                    if inflight_by_stage else 1.0) for s, n in probes)
            leaves.append(((recompute, every, micro, m), acts))
    return leaves, cut


_DEFAULTS = {"cp": 1, "ep": 1, "zero": 0, "fsdp": "none", "dp_replicate": 1, "recompute": "none",
             "recompute_every": 1, "offload_optimizer": "none", "offload_params": "none"}


def _value(settings: dict, key: str):
    return settings.get(key, _DEFAULTS.get(key))


_LEAF_KEYS = ("recompute", "recompute_every", "micro_batch")


def _leaf_settings(leaf: tuple) -> dict:
    recompute, every, micro, _ = leaf
    out = {"recompute": recompute, "micro_batch": micro}
    if recompute == "selective":
        out["recompute_every"] = every
    return out


def _differs(settings: dict, near: dict, key: str) -> bool:
    return _value(settings, key) != near.get(key, _value({}, key))


def _branch_distance(settings: dict, near: dict) -> int:
    """How many of the starting configuration's keys a branch changes (its leaves' aside)."""
    return sum(1 for k in DISTANCE_KEYS if k not in _LEAF_KEYS and _differs(settings, near, k))


def _leaf_distance(leaf: tuple, near: dict) -> int:
    settings = _leaf_settings(leaf)
    return sum(1 for k in _LEAF_KEYS if _differs(settings, near, k))


def _changed(settings: dict, near: dict) -> tuple:
    """The starting configuration's keys a plan changes, in DISTANCE_KEYS order."""
    return tuple(k for k in DISTANCE_KEYS if _differs(settings, near, k))


def _ranked(space: Space, leaves: list, near: Optional[dict]):
    """The leaves as Candidates in (order, settings) order, lazily: sorted on the order alone,
    and each run of equal orders by its settings when the search reaches it (the same order as
    sorting on both, without a settings dict for every leaf)."""
    leaves.sort(key=_order)
    start, count = 0, len(leaves)
    while start < count:
        end = start + 1
        order = leaves[start][0]
        while end < count and leaves[end][0] == order:
            end += 1
        run = [Candidate(branch, leaf, order, near) for order, branch, leaf in leaves[start:end]]
        if len(run) > 1:
            run.sort(key=lambda c: _tiebreak(c.settings))
        yield from run
        start = end


def _order(leaf: tuple) -> tuple:
    return leaf[0]


def run_estimates(space: Space, candidates: list, stats: Stats, capacity: int, headroom: float,
                  top_k: Optional[int], near: Optional[dict] = None):
    """Estimate candidates in (distance, cost) order; stop once `top_k` plans with headroom are
    held and no later candidate can outrank them. Returns [(candidate, estimate), ...] fitting."""
    found = []     # (rank key, candidate, estimate)
    need = capacity * (1 - headroom)
    best_k: list = []
    for cand in _ranked(space, candidates, near):
        if top_k is not None and len(best_k) >= top_k:
            kth = best_k[top_k - 1]
            if kth < (cand.order[0], 0, cand.order[1]):
                break
        stats.estimated += 1
        e = estimate(cand.scenario(space))
        peak = e.peak_bytes
        if stats.lowest_peak is None or peak < stats.lowest_peak:
            stats.lowest_peak = peak
        if peak > capacity:
            continue
        stats.fitting += 1
        roomy = e.held_peak_bytes <= need   # the margin beside the allocator's releasable cache
        key = (cand.order[0], 0 if roomy else 1, cand.order[1], peak, _tiebreak(cand.settings))
        found.append((key, cand, e))
        if roomy:
            best_k.append((key[0], key[1], key[2]))
            best_k.sort()
    found.sort(key=lambda x: x[0])
    return found


def _tiebreak(settings: dict) -> tuple:
    return tuple((k, str(settings.get(k))) for k in sorted(settings))
