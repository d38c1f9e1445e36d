"""The resolved facts every term of an estimate reads, computed once per scenario: `Model`.

A `Model` holds the scenario's training and parallelism settings, the architecture and its exact
parameter counts (memory/params.py), the parallel layout (memory/topology.py), the framework's
dtypes (memory/states.py), the pipeline stages (`StagePlan`) with the decoder layers each holds,
LoRA's parameters per layer, the sequence length with any image tokens, the micro-batches per step
and the multi-token-prediction layers. Topology, architecture, counts, dtypes and the pipeline
schedule come from the run's resolved context (memory/context.py), computed once and shared with
the rules; the Model adds what only the terms need. The term modules (stage_states,
stage_activations, logits, lora, vision, buffers, optimizer_step, runtime, activation_extras)
read it through these public, typed attributes and methods.
"""
from __future__ import annotations

import functools
import math

from memlint.assumptions import assumed
from memlint.memory.context import MAX_STAGES, Resolved, resolve_context
from memlint.memory.conventions import Conventions, visual_tokens_per_image
from memlint.memory.params import ConfigError, LayerParams, ParamCounts, lora_params_per_layer
from memlint.memory.stages import StagePlan
from memlint.memory.topology import Topology

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

__all__ = ["MAX_STAGES", "EstimateError", "Model", "UnsupportedModel"]


class EstimateError(ValueError):
    """The scenario cannot be estimated; `key` names the scenario key at fault."""

    severity = "error"

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


class UnsupportedModel(EstimateError):
    """A valid model memlint does not count yet (a warning, not an invalid config)."""

    severity = "warning"


class Model:
    """Everything the stage estimates share, computed once (see the module docstring)."""

    def __init__(self, scenario, context: Optional[Resolved] = None):
        self.scenario = scenario
        # (stage, its layers, first, last, recompute) -> saved bytes per token per layer
        # (memory/stage_activations.py layer_bytes_per_token), once per stage, not per phase
        self.per_token: dict = {}
        # the run's resolved context (memory/context.py): topology, architecture, counts,
        # dtypes and pipeline schedule, computed once and shared with the rules
        self.context = context if context is not None else resolve_context(scenario)
        self.tr = scenario.training
        self.par = scenario.parallelism
        self.assume = scenario.assumptions
        self.profile = scenario.assumptions.profile
        # the articles' model-state accounting (assumption states.model; the seed profile's)
        self.seed_states = assumed(self.assume, "states.model") == "seed"
        model = scenario.model
        # the framework's conventions (memory/conventions.py): the only place the memory model
        # learns what a framework does by convention
        self.conv: Conventions = self.context.require("conventions")
        unsupported = self.conv.unsupported_architecture
        if unsupported is not None:
            raise UnsupportedModel("model", f"no estimate for this architecture: "
                                            f"{unsupported}")
        if model is None:
            raise EstimateError("model", "no model: give --model PATH|PRESET or model.* keys")
        self.topo: Topology = self.context.topology
        try:
            # the vocabulary as the framework builds it for this run's tp (memlint/facts/vocab.py)
            self.arch = self.context.require("architecture")
        except ConfigError as exc:
            if exc.severity == "warning":  # a model type memlint does not count (model_types.py)
                raise UnsupportedModel(f"model.{exc.key}", str(exc)) from None
            raise EstimateError(f"model.{exc.key}", str(exc)) from None
        self.counts: ParamCounts = self.context.require("counts")
        self.dt = self.context.require("dtypes")
        self.total_override = model.total_params
        self.expert_override = model.expert_params
        self.uniform = self.seed_states or self.total_override is not None
        if self.par.pp > MAX_STAGES:
            raise UnsupportedModel("pp", f"pp = {self.par.pp:,} pipeline stages: memlint "
                                         f"estimates pipelines of up to {MAX_STAGES} stages "
                                         "(each is its own estimate)")
        units = self.arch.layers + int(self.conv.embedding_in_split) + int(
            self.conv.loss_in_split)
        if self.par.pp > units:
            if self.conv.deepspeed_pipeline:
                # DeepSpeed's PipelineModule balances however many layers there are over the
                # stages; which ones stay empty is its partitioner's choice (a warning, ML008)
                raise UnsupportedModel("pp", f"pp = {self.par.pp} pipeline stages for "
                                             f"{units} layers under DeepSpeed's PipelineModule: "
                                             "memlint does not place the empty stages")
            raise EstimateError("pp", f"pp = {self.par.pp} pipeline stages for "
                                      f"{self.arch.layers} layers: a stage would hold none")
        schedule = self.context.require("schedule")
        self.chunks = schedule.chunks
        self.plans = schedule.plans
        self.lora = self.tr.lora_rank > 0
        # torchtitan's op-level selective AC (FSDP2, selective without an every-N option)
        self.op_sac = self.conv.op_level_sac
        self.lora_per_layer = (lora_params_per_layer(self.arch, self.tr.lora_rank, self.tr.lora_targets)
                               if self.lora else [0] * self.arch.layers)
        if self.seed_states and self.lora:
            # seed 000 CH 9.2: N_LoRA = L·8·d·r for q, k, v, o (square d×d projections)
            self.lora_per_layer = [8 * self.arch.hidden * self.tr.lora_rank] * self.arch.layers
        self.uses_deepspeed = self.conv.uses_deepspeed
        # FSDP-style sharding outside DeepSpeed (memory/fsdp.py; buffers.buffer_terms)
        self.fsdp_sharded = self.conv.fsdp_sharded
        # tokens per sample (image tokens included) and per GPU (over context parallelism)
        self.seq, self.seq_local = self.conv.seq, self.conv.seq_local
        self.microbatches = schedule.microbatches
        self.mtp_layers = self._mtp_layers()

    def visual_tokens_per_image(self) -> int:
        return visual_tokens_per_image(self.tr, self.arch)

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

    def rank_chunks(self, stage: int) -> Optional[list]:
        """Layers of each model chunk of one rank (None: an even split)."""
        if self.chunks is None:
            return None
        return self.chunks[stage::self.par.pp]

    def _mtp_layers(self) -> int:
        """Multi-token-prediction layers (`--mtp-num-layers`, DeepSeek-V3's
        num_nextn_predict_layers): Megatron builds them on the last stage with their own loss."""
        if not self.conv.megatron_modules or self.seed_states:
            return 0
        value = self.scenario.model.config.get("num_nextn_predict_layers") or 0
        return value if isinstance(value, int) and value > 0 else 0

    def total_params(self) -> int:
        return self.total_override if self.total_override is not None else self.counts.total

    def largest_linear(self) -> int:
        """Elements per GPU of a decoder layer's largest linear weight: the query / output
        projection (d x heads·head_dim), an MLP projection (d x ffn) or a routed expert's
        (d x expert_ffn), divided by tp (bitsandbytes and auto-gptq dequantize one at a time;
        ZeRO-3's reuse rule counts from the end of a layer's largest module)."""
        arch = self.arch
        widths = [arch.hidden * arch.heads * arch.head_dim, arch.hidden * arch.ffn]
        if arch.moe is not None:
            widths.append(arch.hidden * arch.moe.expert_ffn)
        return max(widths) // self.topo.tp

    def expert_params(self) -> int:
        if self.expert_override is not None:
            return self.expert_override
        if self.total_override is not None:
            return 0
        return self.counts.experts

    @functools.cached_property
    def trained_layers(self) -> frozenset:
        """Decoder layers a partial fine-tune trains (`trainable_layers`; empty otherwise), as
        LLaMA-Factory's freeze tuning picks them (model/adapter.py _setup_freeze_tuning): the
        last N, the first N, or LLaMA-Pro's expanded layers, every (L/N)-th ending at the last."""
        spec = self.tr.trainable_layers
        if self.tr.train_base or not spec:
            return frozenset()
        kind, count = spec.split(":")
        n, layers = int(count), self.arch.layers
        if kind == "last":
            return frozenset(range(max(0, layers - n), layers))
        if kind == "first":
            return frozenset(range(min(n, layers)))
        stride = max(1, layers // n)
        return frozenset(range(stride - 1, layers, stride))

    def trained_layer_params(self, plan: Optional[StagePlan] = None) -> int:
        """Parameters of the trained layers, per GPU of one stage (the whole model without one)."""
        layers = self.trained_layers if plan is None else self.trained_layers & set(plan.layers)
        count = sum(self.counts.layers[i].total for i in layers)
        return count if plan is None else -(-count // self.topo.tp)

    def saved_module_params(self, plan: Optional[StagePlan] = None) -> int:
        """Parameters of the PEFT `modules_to_save` copies memlint counts, per GPU of one stage
        (the whole model without a plan): the word embedding and the output layer (a tied
        output layer gets a copy of its own). Other names (a classifier head, a norm) are small
        next to them and are not counted."""
        roles = self.tr.lora_modules_to_save.split(",") if self.tr.lora_modules_to_save else []
        counts = self.counts
        count = 0
        if "embedding" in roles and (plan is None or plan.first):
            count += counts.embedding
        if "output" in roles and (plan is None or plan.last):
            count += counts.lm_head or counts.embedding
        return count if plan is None else -(-count // self.topo.tp)

    def params_block(self) -> dict:
        counts = self.counts
        total = self.total_params()
        lora = sum(self.lora_per_layer) if self.lora else 0
        trainable = lora + self.saved_module_params() if self.lora else (
            total if self.tr.train_base else self.trained_layer_params())
        return {"total": total + lora, "trainable": trainable,
                "embedding": counts.embedding + counts.position_embedding,
                "lm_head": counts.lm_head, "experts": self.expert_params(),
                "vision": counts.vision + counts.projector}

    def stage_param_groups(self, plan: StagePlan) -> dict:
        """{'dense': n, 'experts': n} per GPU of this stage after tp/pp/ep (before ZeRO/FSDP),
        and under 'split' how tp, pp and ep divided each (the text the formulas show)."""
        topo = self.topo
        if self.uniform:
            total = self.total_params()
            experts = self.expert_params()
            share = len(plan.layers) / max(1, self.arch.layers)
            dense = (total - experts) * share
            expert_part = experts * share
            expert_div = topo.tp * topo.ep if self.seed_states else topo.etp * topo.ep
            layers = f"{len(plan.layers)}/{self.arch.layers} layers"
            return {"dense": int(round(dense / topo.tp)),
                    "experts": int(round(expert_part / expert_div)),
                    "split": {
                        "dense": f"(total {total:,} − experts {experts:,}) × {layers} "
                                 f"/ tp {topo.tp}",
                        "experts": f"experts {experts:,} × {layers} / "
                                   + (f"(tp {topo.tp} · ep {topo.ep})" if self.seed_states
                                      else f"(etp {topo.etp} · ep {topo.ep})")}}
        dense = 0
        experts = 0
        whole = 0   # held whole by every tensor-parallel rank (tp_replicated)
        for index in plan.layers:
            layer: LayerParams = self.counts.layers[index]
            dense += layer.total - layer.experts
            experts += layer.experts
            whole += self.tp_replicated(layer)
        if plan.first:
            dense += self.counts.embedding + self.counts.position_embedding
            whole += self.counts.position_embedding
            dense += self.counts.tokentype
            whole += self.counts.tokentype
        if plan.last and self.mtp_layers:
            mtp_dense, mtp_experts = self.mtp_params()
            dense += mtp_dense
            experts += mtp_experts
        if plan.last:
            dense += self.counts.final_norm + self.counts.head_whole + self.counts.head_split
            whole += self.counts.final_norm + self.counts.head_whole
            if self.counts.lm_head:
                dense += self.counts.lm_head
            elif self.par.pp > 1:
                # tied embeddings under PP: the last stage keeps its own copy of the word
                # embedding for the output layer (Megatron-LM `setup_embeddings_and_output_layer`)
                dense += self.counts.embedding
        if topo.tp <= 1:
            whole = 0
        where = f"a stage of pp {self.par.pp}: "  # no index: stages of one class share terms
        host_experts = 0
        if self.par.offload_experts == "cpu":   # KTransformers: the routed experts on the host
            host_experts, experts = math.ceil(experts / (topo.etp * topo.ep)), 0
        return {"dense": math.ceil((dense - whole) / topo.tp) + whole,
                "experts": math.ceil(experts / (topo.etp * topo.ep)),
                "host_experts": host_experts,
                "split": {  # how tp, pp and ep divide them, for the formulas
                    "dense": where + (f"({dense:,} − tp-replicated {whole:,}) / tp {topo.tp} + "
                                      f"{whole:,}" if whole else f"{dense:,} / tp {topo.tp}"),
                    "experts": where + f"{experts:,} / (etp {topo.etp} · ep {topo.ep})"}}

    def tp_replicated(self, layer: LayerParams) -> int:
        """A layer's parameters that tensor parallelism does not split: its norms (and q/k
        norms), the router, and the biases of the row-parallel output projections (attention
        output, MLP fc2), which each rank adds after the reduction (Megatron-LM
        RowParallelLinear, TopKRouter; torchtitan's TP plans keep norms replicated too)."""
        arch, d = self.arch, self.arch.hidden
        qk = 0
        if arch.qk_norm == "head":
            qk = 2 * arch.head_dim
        elif arch.qk_norm == "full":
            qk = d + (d // max(1, arch.heads)) * arch.kv_heads
        row_bias = (d if arch.output_bias else 0) + (d if arch.mlp_bias and layer.mlp else 0)
        return layer.norms + layer.router + qk + row_bias

    def vision_params(self, plan: StagePlan) -> int:
        if not plan.first or self.arch.vision is None:
            return 0
        total = self.arch.vision.params + self.arch.vision.projector_params
        if self.arch.vision.model_type == "megatron_clip":
            # Megatron's ViT and projection are tensor-parallel layers like the language model's
            whole = self.arch.vision.tp_replicated if self.topo.tp > 1 else 0
            return math.ceil((total - whole) / self.topo.tp) + whole
        return total

    def muon_matrix_shares(self, plan, dense_params: int) -> dict:
        """Share of each state group's parameters that are 2-D hidden matrices (Muon's domain:
        Megatron-Core's emerging_optimizers.py routes embeddings, the output layer and every
        non-2-D parameter to the scalar optimizer, Adam): the stage's attention, dense MLP,
        shared-expert and router weights per GPU over its dense parameters (their biases counted
        with them), and every routed expert weight. Only totals known (seed): all of them
        (seed 000 CH 7.4)."""
        if self.uniform:
            return {"dense": 1.0, "experts": 1.0}
        counts, topo = self.counts, self.topo
        layers = [counts.layers[i] for i in plan.layers]
        matrices = sum(l.attention + l.mlp + l.shared_experts + l.router for l in layers)
        dense = min(1.0, -(-matrices // max(1, topo.tp)) / max(1, dense_params))
        return {"dense": dense, "experts": 1.0}
