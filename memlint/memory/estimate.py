"""estimate(scenario) -> Estimate: per pipeline stage, the named Terms of its peak.

The flow: resolve the architecture and exact parameter counts (`params`), the parallel layout
(`topology`), the framework's dtypes (`states.dtypes`), split layers and parameters over pipeline
stages (stage 0 carries the embedding and any vision tower, the last stage the LM head and loss),
then compute each stage's terms in each phase of a step and keep the phase with the most bytes:
- forward end: weights, optimizer states, persistent gradient buffers, all saved activations;
- backward start: the same with the loss backward's temporaries (logits gradients);
- backward through a recomputed layer (full recompute): checkpoints plus one layer's full set;
- optimizer step: every gradient, the states and the optimizer implementation's temporaries.
Gradients of frameworks that allocate them lazily (`zero_grad(set_to_none=True)`: HF, FSDP2) exist
only from the backward on; Megatron's and DeepSpeed's buffers exist all along.

The `seed` profile is the same code with the articles' assumptions (memory/assumptions.py): one
phase holding everything, C_act coefficients, uniform parameter split, no logits or runtime.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Optional

from memlint.memory import activations as act
from memlint.memory import extras, fp8, inputs, moe_balance, offload, states
from memlint.memory.compile import compile_notes
from memlint.memory.params import (Architecture, ConfigError, LayerParams, ParamCounts,
                                   architecture, count_params)
from memlint.memory.terms import Estimate, Phase, StageEstimate, Term
from memlint.memory.topology import Topology, resolve


class EstimateError(ValueError):
    """The scenario cannot be estimated; `key` names the scenario key at fault."""

    severity = "error"

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


class UnsupportedModel(EstimateError):
    """A valid model memlint does not count yet (a warning, not an invalid config)."""

    severity = "warning"


@dataclass(frozen=True)
class StagePlan:
    stage: int
    layers: tuple           # indices of decoder layers on this stage
    first: bool
    last: bool


def stage_layers(total: int, pp: int, first: Optional[int], last: Optional[int]) -> list:
    """Layers per pipeline stage; an uneven first/last stage is honoured (Megatron's
    decoder-first/last-pipeline-num-layers), the rest split as evenly as possible."""
    if pp <= 1:
        return [total]
    counts = [0] * pp
    remaining = total
    middle = list(range(pp))
    if first is not None:
        counts[0] = min(first, remaining)
        remaining -= counts[0]
        middle.remove(0)
    if last is not None and pp - 1 in middle:
        counts[-1] = min(last, remaining)
        remaining -= counts[-1]
        middle.remove(pp - 1)
    if middle:
        base, extra = divmod(remaining, len(middle))
        for i, stage in enumerate(middle):
            counts[stage] = base + (1 if i < extra else 0)
    elif remaining:
        counts[-1] += remaining
    return counts


def _lora_params(arch: Architecture, rank: int, targets: str) -> list:
    """Exact LoRA adapter parameters per layer (A: in×r, B: r×out per target linear; GQA-aware)."""
    d = arch.hidden
    if arch.mla is not None:
        m = arch.mla
        q_out = arch.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        kv_out = arch.heads * (m.qk_nope_head_dim + m.v_head_dim)
        qkvo = [(d, q_out), (d, m.kv_lora_rank + m.qk_rope_head_dim), (arch.heads * m.v_head_dim, d)]
        del kv_out
    else:
        dq = arch.heads * arch.head_dim
        dkv = arch.kv_heads * arch.head_dim
        qkvo = [(d, dq), (d, dkv), (d, dkv), (dq, d)]
    # (shape, how many): counted by multiplication, never by listing every expert's linears
    attention = sum(rank * (a + b) for a, b in qkvo)
    per_layer = []
    for i in range(arch.layers):
        total = attention
        if targets == "all-linear":
            moe_layer = arch.moe is not None and i < len(arch.moe_layers) and arch.moe_layers[i]
            if moe_layer:
                ffn = arch.moe.expert_ffn
                count = arch.moe.num_experts * (3 if arch.gated_mlp else 2)
                ups = count * 2 // 3 if arch.gated_mlp else count // 2
                downs = count // 3 if arch.gated_mlp else count // 2
            else:
                ffn = arch.ffn
                ups, downs = (2 if arch.gated_mlp else 1), 1
            total += (ups + downs) * rank * (d + ffn)
        per_layer.append(total)
    return per_layer


class _Model:
    """Everything the stage estimates share, computed once."""

    def __init__(self, scenario):
        self.scenario = scenario
        self.tr = scenario.training
        self.par = scenario.parallelism
        self.assume = scenario.assumptions
        self.profile = scenario.assumptions.profile
        self.seed = self.profile == "seed"
        model = scenario.model
        unsupported = scenario.extra.get("megatron.unsupported-architecture")
        if unsupported is not None:
            raise UnsupportedModel("model", f"no estimate for this architecture: "
                                            f"{unsupported.value}")
        if model is None:
            raise EstimateError("model", "no model: give --model PATH|PRESET or model.* keys")
        try:
            self.arch = architecture(model.config)
        except ConfigError as exc:
            raise EstimateError(f"model.{exc.key}", str(exc)) from None
        self.counts: ParamCounts = count_params(self.arch)
        self.topo: Topology = resolve(scenario)
        self.dt = states.dtypes(self.tr, self.profile)
        self.total_override = model.total_params
        self.expert_override = model.expert_params
        self.uniform = self.seed or self.total_override is not None
        if self.par.pp > self.arch.layers:
            raise EstimateError("pp", f"pp = {self.par.pp} pipeline stages for "
                                      f"{self.arch.layers} layers: a stage would hold none")
        self.chunks = self._virtual_chunks()
        by_layout = self._layout_layers()
        if by_layout is not None:
            self.plans = [StagePlan(i, tuple(indices), i == 0, i == len(by_layout) - 1)
                          for i, indices in enumerate(by_layout)]
        else:
            layers = stage_layers(self.arch.layers, self.par.pp, self.par.first_stage_layers,
                                  self.par.last_stage_layers)
            plans, start = [], 0
            for i, n in enumerate(layers):
                plans.append(StagePlan(i, tuple(range(start, start + n)), i == 0,
                                       i == len(layers) - 1))
                start += n
            self.plans = plans
        self.lora = self.tr.lora_rank > 0
        # torchtitan's op-level selective AC (FSDP2, selective without an every-N option)
        self.op_sac = (self.tr.framework == "fsdp2" and self.tr.recompute == "selective"
                       and self.tr.recompute_every <= 1 and not self.seed)
        self.lora_per_layer = (_lora_params(self.arch, self.tr.lora_rank, self.tr.lora_targets)
                               if self.lora else [0] * self.arch.layers)
        if self.seed and self.lora:
            # seed 000 CH 9.2: N_LoRA = L·8·d·r for q, k, v, o (square d×d projections)
            self.lora_per_layer = [8 * self.arch.hidden * self.tr.lora_rank] * self.arch.layers
        self.uses_deepspeed = (self.tr.framework == "deepspeed"
                               or "deepspeed.config" in scenario.extra)
        # FSDP-style sharding outside DeepSpeed (memory/fsdp.py; extras.buffer_terms)
        self.fsdp_sharded = (not self.uses_deepspeed and not self.seed and self.topo.shard > 1
                             and (self.par.fsdp in ("full", "hybrid") or self.par.zero >= 3))
        visual = self.tr.images_per_sample * self.visual_tokens_per_image()
        self.seq = self.tr.seq_len + visual
        self.microbatches = self._microbatches()
        self.mtp_layers = self._mtp_layers()
        self.workspaces = extras.workspace_terms(self)

    # -- facts ---------------------------------------------------------------------------------
    def visual_tokens_per_image(self) -> int:
        if self.tr.tokens_per_image:
            return self.tr.tokens_per_image
        if self.arch.vision is not None:
            return self.arch.vision.tokens_per_image
        return 0

    def mtp_params(self) -> tuple:
        """(dense, expert) parameters of the multi-token-prediction layers on the last stage:
        each a decoder layer like the model's last one, plus enorm and hnorm, the eh_proj
        linear (2d -> d) and the block's final norm (megatron/core/transformer/
        multi_token_prediction.py MultiTokenPredictionLayer), and under pipeline parallelism
        the word embedding the MTP stage builds for itself."""
        last = self.counts.layers[-1]
        per_norm = 2 * self.arch.hidden if self.arch.norm == "layernorm" else self.arch.hidden
        dense = last.total - last.experts + 2 * self.arch.hidden * self.arch.hidden \
            + 3 * per_norm
        dense, experts = self.mtp_layers * dense, self.mtp_layers * last.experts
        if self.par.pp > 1 and self.counts.lm_head:
            # the MTP stage builds its own word embedding (`if self.pre_process or
            # self.mtp_process: self.embedding = ...`, gpt_model.py); untied models only (a tied
            # last stage already keeps one for the output layer)
            dense += self.counts.embedding
        return dense, experts

    def _virtual_chunks(self) -> Optional[list]:
        """Decoder layers of each virtual pipeline stage (pp·vpp of them, virtual stage k on rank
        k mod pp), when Megatron's split is not an even one: `--pipeline-model-parallel-layout`
        (PipelineParallelLayerLayout: the 't' of each '|'-separated stage), or
        `--account-for-embedding-in-pipeline-split` / `--account-for-loss-in-pipeline-split`
        (the embedding and the loss each count as one layer of the even split:
        megatron/core/transformer/transformer_block.py get_num_layers_to_build). None otherwise."""
        extra, par = self.scenario.extra, self.par
        pp, vpp = par.pp, max(1, par.vpp)
        if pp <= 1 or self.seed:
            return None
        layout = extra.get("megatron.pipeline-layout-stages")
        if layout is not None and isinstance(layout.value, (list, tuple)):
            stages = [str(stage) for stage in layout.value]
            if len(stages) % pp == 0 and \
                    sum(stage.count("t") for stage in stages) == self.arch.layers:
                return [stage.count("t") for stage in stages]
            return None
        embedding = extra.get("megatron.account-for-embedding-in-pipeline-split") is not None
        loss = extra.get("megatron.account-for-loss-in-pipeline-split") is not None
        if not (embedding or loss) or par.first_stage_layers or par.last_stage_layers:
            return None
        units = ["E"] * embedding + ["t"] * self.arch.layers + ["L"] * loss
        chunks = pp * vpp
        if len(units) % chunks:
            return None
        size = len(units) // chunks
        return [units[k * size:(k + 1) * size].count("t") for k in range(chunks)]

    def _layout_layers(self) -> Optional[list]:
        """Decoder-layer indices per pipeline rank from the virtual stages (`_virtual_chunks`)."""
        chunks = self.chunks
        if chunks is None:
            return None
        pp = self.par.pp
        ranks: list = [[] for _ in range(pp)]
        index = 0
        for k, count in enumerate(chunks):
            ranks[k % pp].extend(range(index, index + count))
            index += count
        return ranks

    def rank_chunks(self, stage: int) -> Optional[list]:
        """Layers of each model chunk of one rank (None: an even split)."""
        if self.chunks is None:
            return None
        return self.chunks[stage::self.par.pp]

    def _mtp_layers(self) -> int:
        """Multi-token-prediction layers (`--mtp-num-layers`, DeepSeek-V3's
        num_nextn_predict_layers): Megatron builds them on the last stage with their own loss."""
        if self.tr.framework != "megatron" or self.seed:
            return 0
        value = self.scenario.model.config.get("num_nextn_predict_layers") or 0
        return value if isinstance(value, int) and value > 0 else 0

    def _microbatches(self) -> int:
        if self.tr.grad_accum:
            return self.tr.grad_accum
        if self.tr.global_batch:
            return max(1, self.tr.global_batch // (self.tr.micro_batch * self.topo.dp))
        return 0

    def total_params(self) -> int:
        return self.total_override if self.total_override is not None else self.counts.total

    def expert_params(self) -> int:
        if self.expert_override is not None:
            return self.expert_override
        if self.total_override is not None:
            return 0
        return self.counts.experts

    def params_block(self) -> dict:
        counts = self.counts
        total = self.total_params()
        lora = sum(self.lora_per_layer) if self.lora else 0
        trainable = lora if self.lora else (total if self.tr.train_base else 0)
        return {"total": total + lora, "trainable": trainable,
                "embedding": counts.embedding + counts.position_embedding,
                "lm_head": counts.lm_head, "experts": self.expert_params(),
                "vision": counts.vision + counts.projector}

    # -- parameters per stage ------------------------------------------------------------------
    def stage_param_groups(self, plan: StagePlan) -> dict:
        """{'dense': n, 'experts': n} per GPU of this stage after tp/pp/ep (before ZeRO/FSDP)."""
        topo = self.topo
        if self.uniform:
            total = self.total_params()
            experts = self.expert_params()
            share = len(plan.layers) / max(1, self.arch.layers)
            dense = (total - experts) * share
            expert_part = experts * share
            expert_div = topo.tp * topo.ep if self.seed else topo.etp * topo.ep
            return {"dense": int(round(dense / topo.tp)),
                    "experts": int(round(expert_part / expert_div))}
        dense = 0
        experts = 0
        for index in plan.layers:
            layer: LayerParams = self.counts.layers[index]
            dense += layer.total - layer.experts
            experts += layer.experts
        if plan.first:
            dense += self.counts.embedding + self.counts.position_embedding
        if plan.last and self.mtp_layers:
            mtp_dense, mtp_experts = self.mtp_params()
            dense += mtp_dense
            experts += mtp_experts
        if plan.last:
            dense += self.counts.final_norm
            if self.counts.lm_head:
                dense += self.counts.lm_head
            elif self.par.pp > 1:
                # tied embeddings under PP: the last stage keeps its own copy of the word
                # embedding for the output layer (Megatron-LM `setup_embeddings_and_output_layer`)
                dense += self.counts.embedding
        return {"dense": math.ceil(dense / topo.tp),
                "experts": math.ceil(experts / (topo.etp * topo.ep))}

    def vision_params(self, plan: StagePlan) -> int:
        if not plan.first or self.arch.vision is None:
            return 0
        total = self.arch.vision.params + self.arch.vision.projector_params
        if self.arch.vision.model_type == "megatron_clip":
            # Megatron's ViT and projection are tensor-parallel layers like the language model's
            return math.ceil(total / self.topo.tp)
        return total

    # -- terms ---------------------------------------------------------------------------------
    def state_terms(self, plan: StagePlan):
        """(weights, gradients, optimizer, host) term lists for one stage."""
        par, topo, dt, tr = self.par, self.topo, self.dt, self.tr
        groups_raw = self.stage_param_groups(plan)
        vision = self.vision_params(plan)
        groups = [states.ShardedCount("dense", groups_raw["dense"], topo.shard)]
        if groups_raw["experts"]:
            groups.append(states.ShardedCount("experts", groups_raw["experts"], topo.expert_shard))
        weights, gradients, optimizer, host = [], [], [], []
        if self.lora:
            trainable_count = sum(self.lora_per_layer[i] for i in plan.layers)
            trainable = [states.ShardedCount("lora", trainable_count, topo.shard)]
            frozen_bytes = extras.frozen_bytes_per_param(tr.base_quant, dt.param, self.seed)
            weights += states.weight_terms(
                [states.ShardedCount("frozen", g.params, g.shard) for g in groups], dt, par.zero,
                par.fsdp, par.offload_params, frozen_bytes_per_param=frozen_bytes)
            weights += states.weight_terms(trainable, dt, par.zero, par.fsdp, par.offload_params)
            gradients += states.gradient_terms(trainable, dt, par.zero, par.fsdp)
            optimizer += states.optimizer_terms(trainable, dt, tr.optimizer, par.zero, par.fsdp,
                                                par.offload_optimizer,
                                                adafactor_factored=trainable_count)
        elif not tr.train_base:
            # the base is frozen (Megatron --freeze-LM, a frozen backbone): its weights are held,
            # but it has no gradients and no optimizer states
            weights += states.weight_terms(
                [states.ShardedCount("frozen", g.params, g.shard) for g in groups], dt, par.zero,
                par.fsdp, par.offload_params)
        else:
            # -- Transformer Engine FP8 weights (memory/fp8.py): copies, or FP8 parameters
            fp8_weights = []
            weight_groups = groups
            remainder_bytes = None
            if (fp8.applies(tr.precision, tr.framework, self.seed) and not self.uniform
                    and par.zero < 3 and par.fsdp == "none"
                    and not fp8.adapter_fp8_weights(tr)):
                lin = fp8.linear_params(self.counts, plan.layers, topo.tp, topo.etp * topo.ep)
                transpose = fp8.needs_transpose(
                    extras.compute_capability(self.scenario.hardware.gpu))
                if fp8.fp8_params(tr):
                    hp = fp8.high_precision_bytes(dt.param)
                    _, fp8_weights = fp8.fp8_param_terms(lin[0], lin[1], hp, transpose)
                    weight_groups = [states.ShardedCount(
                        g.name, g.params - (lin[0] if g.name == "dense" else lin[1]), g.shard)
                        for g in groups]
                    remainder_bytes = hp  # norms, embeddings, output layer, router
                else:
                    fp8_weights = fp8.fp8_copy_terms(*lin, transpose=transpose)
            weights += states.weight_terms(weight_groups, dt, par.zero, par.fsdp,
                                           par.offload_params,
                                           frozen_bytes_per_param=remainder_bytes) + fp8_weights
            gradients += states.gradient_terms(groups, dt, par.zero, par.fsdp)
            optimizer += states.optimizer_terms(
                groups, dt, tr.optimizer, par.zero, par.fsdp, par.offload_optimizer,
                muon_matrix_fraction=self.muon_matrix_fraction(),
                adafactor_factored=self.adafactor_factored(plan))
        if vision:
            vision_terms = extras.vision_state_terms(vision, dt, tr.optimizer, topo.shard,
                                                     par.zero, par.fsdp, self.lora)
            weights += vision_terms
        # -- offload (memory/offload.py): FSDP CPUOffloadPolicy moves sharded grads to the host
        fsdp_offload = offload.fsdp_cpu_offload(par.fsdp, par.offload_params, self.uses_deepspeed)
        gradients, _ = offload.split_gradients(gradients, fsdp_offload)
        host += offload.offload_host_terms(groups, dt, tr.optimizer, par.offload_optimizer,
                                           par.offload_params, self.lora, fsdp_offload)
        # paged optimizer states (memory/optimizer_quant.py) are host memory, not GPU memory
        host += [t for t in optimizer if t.name.startswith("host.")]
        optimizer = [t for t in optimizer if not t.name.startswith("host.")]
        return weights, gradients, optimizer, host

    @functools.cached_property
    def _muon_fraction(self) -> float:
        counts = self.counts
        matrices = sum(l.attention + l.mlp + l.experts + l.shared_experts for l in counts.layers)
        return matrices / max(1, counts.total)

    def muon_matrix_fraction(self) -> float:
        """Share of parameters that are 2-D hidden matrices (Muon's domain); embeddings, the LM
        head and norms stay on AdamW. Only totals known (seed): all of them (seed 000 CH 7.4).
        Computed once per estimate, not once per stage."""
        if self.uniform:
            return 1.0
        return self._muon_fraction

    def adafactor_factored(self, plan: StagePlan) -> int:
        """Adafactor's factored second moment: rows + columns of each 2-D parameter (transformers
        Adafactor, beta1=None), approximated per layer from the architecture."""
        arch = self.arch
        d = arch.hidden
        per_layer = 0
        dq = arch.heads * arch.head_dim
        dkv = arch.kv_heads * arch.head_dim
        per_layer += (d + dq) * 2 + (d + dkv) * 2 + 2 * d
        per_layer += 3 * (d + arch.ffn) if arch.moe is None else (
            arch.moe.num_experts * 3 * (d + arch.moe.expert_ffn) + d + arch.moe.num_experts)
        total = per_layer * len(plan.layers)
        if plan.first:
            total += arch.vocab + d
        if plan.last:
            total += (arch.vocab + d) if not arch.tied else 0
        return total

    def activation_terms(self, plan: StagePlan, phase: str, host_out=None) -> list:
        """Saved activations of this stage at the given phase (all in-flight micro-batches)."""
        tr, par, topo, arch = self.tr, self.par, self.topo, self.arch
        layers = len(plan.layers)
        tokens = tr.micro_batch * math.ceil(self.seq / topo.cp)
        seq_local = math.ceil(self.seq / topo.cp)
        terms = []
        if self.assume["activations.model"] == "seed":
            flash = tr.attention in ("flash", "sdpa")
            coeff = act.seed_layer_coefficient(self.assume["activations.c_act"],
                                               self.assume["activations.c_attn_scores"],
                                               arch.heads, self.seq, arch.hidden, flash)
            units = act.seed_stage_units(layers, tr.recompute, tr.recompute_every, coeff,
                                         self.assume["activations.c_act_full_recompute"])
            tp_div = topo.tp if self.assume["activations.tp_divides"] else 1
            value = int(round(units * tokens * arch.hidden / tp_div))
            terms.append(Term(
                name="activations", component="activations", bytes=value,
                formula=(f"{units:g} (C_act × layers) × B {tr.micro_batch} × T/cp {seq_local} × "
                         f"d {arch.hidden}" + (f" / tp {tp_div}" if tp_div > 1 else "")),
                inputs={"layers": layers, "c_act_sum": units, "micro_batch": tr.micro_batch,
                        "seq_per_cp": seq_local, "hidden": arch.hidden, "tp": tp_div},
                source="seed 000 CH 1.4, 2.2, 4.1, 5.2"))
            if plan.first and self.arch.vision is not None and tr.images_per_sample:
                terms += extras.vision_activation_terms(self, 1)
            return terms
        inflight = 1.0
        if self.assume["pipeline.inflight_microbatches"]:
            inflight = act.inflight_microbatches(plan.stage, par.pp, par.vpp, self.microbatches,
                                                 *self.schedule_knobs(),
                                                 chunk_layers=self.rank_chunks(plan.stage))
        per_layer_full, items_full = self.layer_bytes_per_token(plan, recompute=False)
        if tr.recompute == "full":
            items = act.recompute_items(self.dt.compute, arch.hidden, topo.tp, par.sp)
            per_layer = sum(i.per_token for i in items)
            kept = layers
            full_layers = 0
        elif tr.recompute == "selective" and tr.recompute_every > 1:
            full_layers = math.ceil(layers / tr.recompute_every)
            kept = layers - full_layers
            per_layer = sum(i.per_token for i in act.recompute_items(
                self.dt.compute, arch.hidden, topo.tp, par.sp))
        else:
            full_layers, kept, per_layer = layers, 0, 0.0
        stage_tokens = tokens * inflight
        if full_layers:
            full_bytes = int(per_layer_full * tokens) * full_layers
            terms.append(Term(
                name="activations", component="activations",
                bytes=int(round(full_bytes * inflight)),
                formula=(f"{full_layers} layers × {per_layer_full:,.1f} B/token × "
                         f"{tokens:,} tokens (B {tr.micro_batch} × T/cp {seq_local})"
                         + (f" × {inflight:g} in-flight micro-batches" if inflight != 1 else "")),
                inputs={"layers": full_layers, "bytes_per_token_per_layer": per_layer_full,
                        "tokens": tokens, "inflight": inflight,
                        "saved": {i.name: round(i.per_token + i.per_token_pair * seq_local, 2)
                                  for i in items_full}},
                source=self.activation_source()))
        if kept:
            terms.append(Term(
                name="activations.checkpoints", component="activations",
                bytes=int(round(per_layer * stage_tokens * kept)),
                formula=(f"{kept} checkpointed layers × {per_layer:g} B/token (layer input) × "
                         f"{tokens:,} tokens" + (f" × {inflight:g} in flight" if inflight != 1 else "")),
                inputs={"layers": kept, "bytes_per_token": per_layer, "tokens": tokens,
                        "inflight": inflight},
                source="seed 000 CH 5.2; torch.utils.checkpoint keeps each layer's input"))
            if phase == "backward_recompute":
                terms.append(Term(
                    name="activations.recomputed_layer", component="activations",
                    bytes=int(per_layer_full * tokens),
                    formula=f"one layer recomputed in backward: {per_layer_full:,.1f} B/token × {tokens:,}",
                    inputs={"bytes_per_token": per_layer_full, "tokens": tokens},
                    source="activation checkpointing re-runs one layer's forward in its backward"))
        if plan.last and self.mtp_layers and tr.recompute != "full":
            last = self.arch.layers - 1
            mtp_plan = StagePlan(plan.stage, (last,), False, True)
            per_token, _ = self.layer_bytes_per_token(mtp_plan, recompute=False)
            c = self.dt.compute
            rep = topo.tp if par.sp else 1
            # the layer itself, plus the normed embedding and hidden halves and their
            # concatenation (eh_proj's input): 3 × 2d·c / rep per token
            extra = 3 * 2 * arch.hidden * c / rep
            value = int((per_token + extra) * tokens * self.mtp_layers)
            terms.append(Term(
                name="activations.mtp", component="activations", bytes=value,
                formula=(f"{self.mtp_layers} MTP layer(s) × ({per_token:,.1f} B/token (a layer "
                         f"like the last) + {extra:,.1f} B/token (enorm, hnorm, eh_proj input)) "
                         f"× {tokens:,} tokens, one micro-batch (the loss runs in the 1F1B "
                         "steady state)"),
                inputs={"layers": self.mtp_layers, "bytes_per_token": per_token,
                        "tokens": tokens},
                source="megatron/core/transformer/multi_token_prediction.py"))
        if par.offload_activations:
            # activation offload (memory/offload.py): offloaded layers are host memory
            terms, moved = offload.activation_offload(terms, layers,
                                                      par.offload_activations_layers)
            if host_out is not None:
                host_out.extend(moved)
        terms += extras.autocast_weight_terms(self, plan)
        terms += extras.attention_mask_terms(self, plan, tr.micro_batch, seq_local)
        if plan.first:
            terms += extras.embedding_activation_terms(self, tokens, seq_local, inflight)
            if self.arch.vision is not None and tr.images_per_sample:
                if self.arch.vision.model_type == "megatron_clip":
                    terms += self.megatron_vision_terms(inflight)
                else:
                    terms += extras.vision_activation_terms(self, inflight)
        return terms

    def megatron_vision_terms(self, inflight: float) -> list:
        """Megatron LLaVA's CLIP ViT, layer by layer like the language model (fused items on the
        ViT's shapes: its config is a copy of the LM's), over B × image tokens, with tensor
        parallelism but no sequence or context parallelism (pretrain_vlm.py turns them off for
        the vision model and projection), plus the projection MLP's fc1 output, activation output
        and input (megatron/core/models/multimodal/llava_model.py)."""
        tr, topo, vision = self.tr, self.topo, self.arch.vision
        c = self.dt.compute
        tokens_per_image = self.visual_tokens_per_image()
        tokens = tr.micro_batch * tr.images_per_sample * tokens_per_image
        sh = act.Shapes(d=vision.hidden, dq=vision.hidden, dk=vision.hidden, dv=vision.hidden,
                        heads=vision.heads, do=vision.hidden, ffn=vision.ffn,
                        gated=self.arch.gated_mlp, layernorm=vision.norm == "layernorm")
        flash = self.flash_for(vision.hidden // max(1, vision.heads))
        items = act.fused_layer_items(
            sh, c, flash, topo.tp, False, self.arch.hidden_dropout > 0,
            self.arch.attention_dropout > 0,
            self.tr.recompute == "selective" and self.tr.recompute_every <= 1,
            softmax_bytes=self.softmax_bytes(tokens_per_image, vision.heads, flash))
        per_token = sum(i.per_token + i.per_token_pair * tokens_per_image for i in items)
        layers_bytes = int(per_token * tokens * vision.layers * inflight)
        width = (2 if self.arch.gated_mlp else 1) * self.arch.ffn
        projection = int((c * vision.hidden + 2 * c * width / topo.tp) * tokens * inflight)
        return [Term("vision.activations", "vision", layers_bytes + projection,
                     f"{vision.layers} ViT layers × {per_token:,.1f} B/token × {tokens:,} image "
                     f"tokens (B {tr.micro_batch} × {tokens_per_image}) + projection MLP "
                     f"{projection:,} B" + (f" × {inflight:g} in flight" if inflight != 1 else ""),
                     {"layers": vision.layers, "tokens": tokens, "bytes_per_token": per_token,
                      "saved": {i.name: round(i.per_token + i.per_token_pair * tokens_per_image, 2)
                                for i in items}},
                     "Korthikanti et al. 2022 on the ViT's shapes; megatron/core/models/vision/"
                     "clip_vit_model.py, llava_model.py")]

    def recompute_modules(self) -> Optional[frozenset]:
        """Megatron's selective recompute modules (`--recompute-modules`, default core_attn,
        TransformerConfig.__post_init__); None outside Megatron's selective recompute."""
        if self.tr.framework != "megatron" or self.tr.recompute != "selective" \
                or self.tr.recompute_every > 1:
            return None
        setting = self.scenario.extra.get("megatron.recompute-modules")
        if setting is None:
            return frozenset({"core_attn"})
        value = setting.value
        text = " ".join(value) if isinstance(value, (list, tuple)) else str(value)
        names = frozenset(re.findall(r"[a-z_]+", text))
        return names or frozenset({"core_attn"})

    def flash_for(self, head_dim: int) -> bool:
        """Whether attention runs a flash/fused kernel (no T×T tensors saved)."""
        return self.tr.attention in ("flash", "sdpa") and not (
            self.tr.framework == "megatron" and head_dim % 8 and self.te_spec())

    def te_spec(self) -> bool:
        setting = self.scenario.extra.get("megatron.transformer-impl")
        return setting is None or setting.value != "local"

    def softmax_bytes(self, seq: int, heads: int, flash: bool) -> Optional[float]:
        """Bytes per attention-score element kept by an unfused softmax (before dropout).

        Megatron's and Transformer Engine's FusedScaleMaskSoftmax run the fused kernel only when
        16 < T_k <= 16384, T_q and T_k are multiples of 4 and B·heads/tp is a multiple of 4
        (`is_kernel_available`, megatron/core/fusions/fused_softmax.py): it keeps its c-byte
        output. Otherwise torch's softmax runs, in fp32 when softmax-in-fp32 is on (TE's unfused
        attention, --attention-softmax-in-fp32, --apply-query-key-layer-scaling): the fp32
        probabilities (kept by softmax) and their c-byte cast (kept by the next bmm)."""
        if flash or self.tr.framework != "megatron":
            return None
        c = self.dt.compute
        batches = self.tr.micro_batch * math.ceil(heads / self.topo.tp)
        if 16 < seq <= 16384 and seq % 4 == 0 and batches % 4 == 0:
            return float(c)
        extra = self.scenario.extra
        fp32 = self.te_spec() or any(extra.get("megatron." + f) is not None for f in (
            "attention-softmax-in-fp32", "apply-query-key-layer-scaling"))
        return float(4 + c) if fp32 else float(c)

    def schedule_knobs(self) -> tuple:
        """(micro-batch group size per virtual stage, extra warm-up forwards) of Megatron's
        interleaved schedule: `--microbatch-group-size-per-virtual-pipeline-stage` (default pp,
        ModelParallelConfig.__post_init__) and one more with
        `--overlap-moe-expert-parallel-comm` (schedules.py get_pp_rank_microbatches)."""
        extra = self.scenario.extra
        group = extra.get("megatron.microbatch-group-size-per-virtual-pipeline-stage")
        try:
            size = int(group.value) if group is not None else None
        except (TypeError, ValueError):
            size = None
        overlap = extra.get("megatron.overlap-moe-expert-parallel-comm")
        return (size if size and size > 0 else None,
                1 if overlap is not None and overlap.value is True else 0)

    def activation_source(self) -> str:
        if self.op_sac:
            return "torchtitan op-level selective AC (memory/activations.py op_sac_items)"
        if self.tr.framework == "hf" or (self.tr.framework == "fsdp2" and self.topo.tp == 1):
            return ("eager PyTorch modules (transformers), op by op "
                    "(memory/activations.py hf_layer_items)")
        return "Korthikanti et al. 2022 section 4 (memory/activations.py fused_layer_items)"

    def layer_bytes_per_token(self, plan: StagePlan, recompute: bool):
        """Average bytes per token per layer of this stage (dense and MoE layers differ)."""
        arch, tr, par, topo = self.arch, self.tr, self.par, self.topo
        seq_local = math.ceil(self.seq / topo.cp)
        total = 0.0
        items_seen = []
        # transformers modules run eagerly (HF Trainer, accelerate FSDP2); a tensor-parallel FSDP2
        # run (torchtitan) has TP/SP-sharded activations, which the fused model describes.
        eager_modules = tr.framework == "hf" or (tr.framework == "fsdp2" and topo.tp == 1)
        cache: dict = {}
        for index in plan.layers:
            moe_layer = bool(arch.moe is not None and index < len(arch.moe_layers)
                             and arch.moe_layers[index])
            first = plan.first and index == plan.layers[0]
            key = (moe_layer, first and eager_modules)
            if key not in cache:
                sh = act.shapes(arch, moe_layer)
                if self.op_sac and not moe_layer:
                    items = act.op_sac_items(sh, self.dt.compute, topo.tp)
                elif eager_modules:
                    items = act.hf_layer_items(sh, self.hf_run(first))
                else:
                    flash = self.flash_for(sh.dq // max(1, sh.heads))
                    items = act.fused_layer_items(
                        sh, self.dt.compute, flash, topo.tp, par.sp,
                        arch.hidden_dropout > 0, arch.attention_dropout > 0,
                        tr.recompute == "selective" and tr.recompute_every <= 1,
                        gemm=1 if tr.precision == "fp8" else None, etp=topo.etp,
                        softmax_bytes=self.softmax_bytes(seq_local, arch.heads, flash),
                        modules=self.recompute_modules(), moe_layer=moe_layer,
                        separate_norm1=arch.mla is not None or not self.te_spec())
                    if self.lora:
                        items = items + extras.lora_activation_items(self, sh)
                imbalance = float(self.assume.get("moe.routing_imbalance", 1.0))
                if moe_layer and moe_balance.applies(topo.ep, imbalance):
                    # the busiest expert-parallel rank (memory/moe_balance.py)
                    items = moe_balance.scale_routed(items, imbalance)
                cache[key] = (items, sum(i.per_token + i.per_token_pair * seq_local for i in items))
            items, per_token = cache[key]
            total += per_token
            items_seen = items
        return total / max(1, len(plan.layers)), items_seen

    def hf_run(self, first_layer: bool) -> "act.HFRun":
        """The transformers run settings of one layer (memory/activations.py HFRun)."""
        tr, arch = self.tr, self.arch
        return act.HFRun(
            c=self.dt.param if self.dt.autocast else self.dt.compute, autocast=self.dt.autocast,
            attention=tr.attention, device=self.scenario.hardware.device,
            dropout_attn=arch.attention_dropout, dropout_hidden=arch.hidden_dropout,
            base_trainable=not self.lora,
            lora_rank=tr.lora_rank if self.lora else 0,
            lora_targets=tr.lora_targets if self.lora else "", lora_dropout=tr.lora_dropout,
            fused_qkv=arch.fused_qkv, softmax_fp32=arch.model_type != "gpt2",
            first_frozen_input=self.lora and first_layer)

    def logits_terms(self, plan: StagePlan, phase: str) -> list:
        if not plan.last or not self.assume["logits.enabled"]:
            return []
        return extras.logits_terms(self, phase)

    def runtime_terms(self) -> list:
        return extras.runtime_terms(self)


def fsdp_layer_freed(terms: list, layers: int) -> list:
    """After the last layer's backward its saved tensors are gone: the full-layer activations
    term keeps (L − 1) / L of its bytes (one micro-batch in flight under FSDP)."""
    out = []
    for term in terms:
        if term.name == "activations" and layers > 0:
            held = int(term.inputs.get("layers", layers)) or 1
            kept = term.bytes * (held - 1) // held
            term = Term(term.name, term.component, kept,
                        f"({term.formula}) × ({held} − 1) / {held}  (last layer's backward done)",
                        dict(term.inputs), term.source)
        out.append(term)
    return out


def _phase_terms(model: _Model, plan: StagePlan, phase: str, weights, gradients, optimizer):
    terms = list(weights) + list(optimizer)
    if model.seed:
        terms += list(gradients)
        terms += model.activation_terms(plan, phase)
        terms += extras.dequant_terms(model, plan)
        return terms
    grads_now = model.dt.grads_persistent or phase == "optimizer"
    if grads_now:
        terms += list(gradients)
    terms += model.workspaces
    if phase == "backward_layer":
        # FSDP mid-backward (memory/fsdp.py backward_unit_buffers): the logits and the last
        # layer's saved tensors are freed, the other layers' are still held
        terms += fsdp_layer_freed(model.activation_terms(plan, phase), len(plan.layers))
        terms += extras.buffer_terms(model, plan, phase)
        terms += extras.dequant_terms(model, plan)
    elif phase != "optimizer":
        terms += model.activation_terms(plan, phase)
        terms += model.logits_terms(plan, phase)
        terms += extras.buffer_terms(model, plan, phase)
        terms += extras.dequant_terms(model, plan)
    else:
        terms += extras.optimizer_step_terms(model, plan)
        terms += extras.buffer_terms(model, plan, phase)
    return terms


def estimate(scenario) -> Estimate:
    model = _Model(scenario)
    stages = []
    runtime = [] if model.seed else model.runtime_terms()
    for plan in model.plans:
        weights, gradients, optimizer, host = model.state_terms(plan)
        if model.par.offload_activations and not model.seed:
            # the host side of activation offload (memory/offload.py), at the end of forward
            moved: list = []
            model.activation_terms(plan, "forward_end", host_out=moved)
            host = list(host) + moved
        if model.seed:
            names = ["backward"]
        else:
            names = ["forward_end", "backward_start", "optimizer"]
            if model.tr.recompute != "none":
                names.insert(2, "backward_recompute")
            elif model.fsdp_sharded:
                names.insert(2, "backward_layer")  # FSDP: a unit's backward (memory/fsdp.py)
        phases = []
        for name in names:
            terms = _phase_terms(model, plan, name, weights, gradients, optimizer)
            terms = [t for t in terms if t.bytes or t.component in ("weights",)]
            if runtime:
                terms = terms + extras.allocator_terms(model, terms) + runtime
            phases.append(Phase(name, tuple(terms)))
        peak = max(phases, key=lambda p: p.total)
        stages.append(StageEstimate(stage=plan.stage, layers=len(plan.layers), phase=peak.name,
                                    terms=peak.terms, phases=tuple(phases), host_terms=tuple(host)))
    notes = [model.dt.note]
    notes += compile_notes(scenario.training)  # memory/compile.py: what is not modeled
    if model.seed:
        notes.append("seed profile: the articles' formulas (decimal GB), no logits, no runtime")
    return Estimate(profile=model.profile, sources=tuple(scenario.sources),
                    params=model.params_block(), gpu_name=scenario.hardware.gpu,
                    capacity_bytes=scenario.hardware.gpu_memory, stages=tuple(stages),
                    notes=tuple(notes), assumed=inputs.assumed(scenario, model.topo),
                    scenario=scenario)
