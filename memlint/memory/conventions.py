"""Framework conventions, one typed home: `Conventions`, built once per run on its resolved context.

What a framework does by convention and its config does not say (DeepSpeed in use, FSDP sharding,
eager transformers modules, the Transformer Engine spec, flash attention's head-dim rule, the
recompute modules, the pipeline schedule's settings, the ZeRO bucket sizes, the gather width, the
cuBLAS workspaces, the per-GPU sequence length) is decided here, and only here: from the
`framework` key and the declared convention keys (`memlint.keys.CONVENTION_KEYS`, which adapters
record and `--set` overrides). The memory model reads the record and never compares a framework's
name or reads an adapter's spelling of a flag (tests/memory/test_conventions.py checks both), so a
new framework fills the keys and, where its behaviour is new, this module, not the memory model.

Three facts are needed before the context exists (the dtypes and the parallel layout are parts of
it): `precision_convention` (bytes per parameter, gradient and state under mixed precision) and
`optimizer_shards_over_cp` (the layout); the record repeats them for readers.
"""
from __future__ import annotations

import os

from memlint.facts import deepspeed as ds_facts
from memlint.ir import RL, Provenance
from memlint.keys import version_numbers
from memlint.memory.rl.names import is_rl
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

MEGATRON, DEEPSPEED, FSDP2, HF = "megatron", "deepspeed", "fsdp2", "hf"

# Mixed precision (bf16 / fp16) by framework: (param, grad, master, state, compute) bytes, autocast,
# gradient buffers kept for the whole run, and the note the estimate prints. Sources: Megatron-LM
# keeps fp32 main grads (`--accumulate-allreduce-grads-in-fp32`, default for bf16) and fp32 master
# weights in its optimizer; DeepSpeed ZeRO keeps bf16/fp16 grads and fp32 master + moments
# (deepspeed/runtime/zero/stage_1_and_2.py); FSDP2's MixedPrecisionPolicy keeps fp32 sharded params
# (the master) and fp32 reduced grads; the HF Trainer's bf16 flag is autocast over fp32 params.
_MIXED = {
    MEGATRON: ((2, 4, 4, 4, 2), False, True,
               "Megatron: bf16 params, fp32 main grads, fp32 master and moments"),
    FSDP2: ((4, 4, 0, 4, 2), False, False,
            "FSDP2 MixedPrecisionPolicy: fp32 sharded params (the master) and grads, "
            "bf16 compute copies"),
    HF: ((4, 4, 0, 4, 2), True, False, "HF Trainer bf16: autocast over fp32 params"),
    DEEPSPEED: ((2, 2, 4, 4, 2), False, True,
                "DeepSpeed: low-precision params and grads, fp32 master and moments"),
}


@record(frozen=True)
class PrecisionConvention:
    """The framework's dtypes under bf16/fp16 mixed precision, and whether it keeps gradient
    buffers for the whole run (Megatron, DeepSpeed) or allocates them lazily (HF, FSDP2)."""

    widths: tuple            # (param, grad, master, state, compute) bytes under mixed precision
    autocast: bool
    grads_persistent: bool
    note: str
    # over a bf16 module (precision pure-bf16) the framework still keeps fp32 master weights and
    # moments of what it trains: DeepSpeed's ZeRO optimizers (master_weights_and_grads_dtype fp32
    # unless bf16_master_weights_and_gradients, which needs CPU offload)
    fp32_master_over_bf16: bool = False


DEEPSPEED_BF16_NOTE = ("DeepSpeed over a bf16 module: bf16 params and grads, ZeRO's fp32 master "
                       "partitions and moments (deepspeed/runtime/zero/stage3.py "
                       "_create_fp32_partitions, stage_1_and_2.py single_partition_of_fp32_groups, "
                       "deepspeedai/DeepSpeed@edaa722)")


def precision_convention(training) -> PrecisionConvention:
    widths, autocast, _persistent, note = _MIXED.get(training.framework, _MIXED[DEEPSPEED])
    persistent = training.framework in (MEGATRON, DEEPSPEED)
    return PrecisionConvention(widths, autocast, persistent, note,
                               fp32_master_over_bf16=training.framework == DEEPSPEED)


def optimizer_shards_over_cp(training) -> bool:
    """Megatron's distributed optimizer (and Megatron-FSDP) shard over the data-parallel group
    with context parallelism (parallel_state get_data_parallel_group(with_context_parallel=True))
    also when expert parallelism is carved out of dp·cp."""
    return training.framework == MEGATRON


# RL frameworks that build the FSDP mesh (world // fsdp_size, fsdp_size) and the Ulysses mesh
# (world // sp, sp) apart: their dp_shard (fsdp_size) is the FSDP group itself, whatever cp is
# (verl@f9c855f7 verl/workers/fsdp_workers.py:167-176; EasyR1@b44b311b
# verl/workers/fsdp_workers.py:120-134, the same meshes)
SEPARATE_FSDP_MESH = ("verl", "easyr1")


def shard_group_of(scenario, dp_shard: int) -> int:
    """The FSDP shard group of an explicit `dp_shard`: dp_shard·cp, the context-parallel ranks
    shard the model too (torchtitan ParallelDims: fsdp = dp_shard * cp, mesh ("pp",
    "dp_replicate", "fsdp", "tp"), pytorch/torchtitan@238fa9953e4a
    torchtitan/distributed/parallel_dims.py; accelerate ParallelismConfig.fsdp_dim_names
    flattens dp_shard and cp into "dp_shard_cp", huggingface/accelerate@16cb6eb
    src/accelerate/parallelism_config.py; axolotl builds that ParallelismConfig), except where
    the framework's FSDP mesh is built apart from its sequence-parallel one (SEPARATE_FSDP_MESH)."""
    if scenario.rl.framework in SEPARATE_FSDP_MESH:
        return dp_shard
    return dp_shard * scenario.parallelism.cp


def training_rl(scenario) -> RL:
    """The RL section of a role's training scenario (memory/rl/roles.py derived): none but the
    framework, whose meshes its parallel sizes describe (shard_group_of)."""
    return RL(framework=scenario.rl.framework)


def optimizer_instances(scenario) -> int:
    """Megatron's `--num-distributed-optimizer-instances` (default 1): the distributed optimizer
    shards over the intra-instance group of dp·cp / N ranks, and the expert states over
    expert-dp / N (parallel_state.py initialize_model_parallel, intra_partial_data_parallel_size,
    intra_partial_expert_data_parallel_size; optimizer/__init__.py, NVIDIA/Megatron-LM@d98e8a64).
    1 outside Megatron's distributed optimizer."""
    if scenario.training.framework != MEGATRON or scenario.parallelism.zero < 1:
        return 1
    value = scenario.convention_keys.get("megatron.num-distributed-optimizer-instances", 1)
    return value if isinstance(value, int) and value > 1 else 1


@record(frozen=True)
class ZeroSettings:
    """DeepSpeed's ZeRO and offload settings as the config gives them (None: not given; sizes may
    be "auto", which the HF Trainer fills in from the model's hidden size), with DeepSpeed's
    defaults (memlint/facts/deepspeed.py) where the memory model applies them unconditionally."""

    reduce_bucket_size: Any = None
    contiguous_gradients: Optional[bool] = None
    overlap_comm: Optional[bool] = None
    max_live_parameters: Any = None
    max_reuse_distance: Any = None
    prefetch_bucket_size: Any = None
    param_persistence_threshold: Any = None
    gather_16bit_on_save: bool = False
    sub_group_size: int = ds_facts.SUB_GROUP_SIZE
    optimizer_pin_memory: bool = ds_facts.PIN_MEMORY
    optimizer_buffer_count: int = ds_facts.OPTIMIZER_BUFFER_COUNT
    param_pin_memory: bool = ds_facts.PIN_MEMORY
    param_buffer_count: int = ds_facts.PARAM_BUFFER_COUNT
    param_buffer_size: int = ds_facts.PARAM_BUFFER_SIZE
    param_max_in_cpu: int = ds_facts.PARAM_MAX_IN_CPU


@record(frozen=True)
class MoeDispatch:
    """How Megatron-Core's MoE layers move tokens and apply the routing weights (read at
    NVIDIA/Megatron-LM@d98e8a64: megatron/core/transformer/moe/token_dispatcher.py, experts.py,
    moe_utils.py): the experts multiply their activation output by the routing weights
    (permute/unpermute carry no weights since "Memory efficient token permutation", 2659630721),
    and the expert-tensor-parallel group gathers its tokens."""

    dispatcher: str               # allgather (TransformerConfig default), alltoall, flex
    fused_activation: bool        # weighted_bias_swiglu: the gated activation keeps only its input
    router_bytes: int             # bytes of a routing weight (--moe-router-dtype, else compute)
    permute_fused: bool           # TE's fused permutation (--moe-permute-fusion)


@record(frozen=True)
class FineOffload:
    """Megatron's fine-grained activation offloading settings (memory/fine_offload.py)."""

    modules: frozenset            # --offload-modules
    min_elements: int = 1024 * 1024   # --min-offloaded-tensor-size (TransformerConfig default)
    fraction: float = 1.0         # --activation-offload-fraction


@record(frozen=True)
class TpCommOverlap:
    """Megatron `--tp-comm-overlap`: Transformer Engine's userbuffers (memory/userbuffers.py)."""

    seq: int                      # tokens per sample the buffers hold (before cp)
    fp8: bool                     # FP8 quantization mode (--fp8-format)
    bf16_set: bool                # a second, unquantized set (--first-last-layers-bf16)


@record(frozen=True)
class Conventions:
    """The conventions of one run (module docstring). Every field is plain data."""

    # -- who runs the training
    uses_deepspeed: bool          # a DeepSpeed engine: framework deepspeed, or a DeepSpeed config
    deepspeed_config: Optional[Provenance]  # where the run's DeepSpeed config was given
    deepspeed_conventions: bool   # DeepSpeed's own (framework deepspeed): host staging, checkpoints
    fsdp_sharded: bool            # FSDP-style parameter sharding outside DeepSpeed, over > 1 GPU
    states_own_sharding: bool     # the config states its sharding (all but HF recipes)
    # -- how the model runs
    megatron_modules: bool        # Megatron-Core layers: its loss, MTP, softmax paths, schedules
    te_spec: bool                 # Megatron's Transformer Engine spec (the default)
    local_spec: bool              # Megatron's local spec (--transformer-impl local)
    torch_modules: bool           # transformers / PyTorch modules (HF Trainer, FSDP2)
    eager_modules: bool           # ... run op by op without tensor parallelism (HF; FSDP2 tp 1)
    op_level_sac: bool            # torchtitan's op-level selective activation checkpointing
    float8_switch: Optional[str]  # torchtitan's float8 spelling ("enable_float8_linear",
    #                               "converters"): dates its op-level SAC list; None: unstated
    logits_freed: bool            # the loop drops its logits before backward (torchtitan `del
    #                               pred`; torchtitan's op-level SAC): the layers' backward runs
    #                               after the loss's has freed them
    autocast_weight_copies: bool  # torch.autocast caches low-precision copies of fp32 weights
    te_fp8: bool                  # FP8 through Transformer Engine (not torchao float8)
    flash_head_dim_multiple: int  # flash/fused attention needs head_dim % this == 0 (0: any)
    loss: str                     # "vocab-parallel" (Megatron, gpt-neox), "log-softmax"
    #                               (transformers, also run by DeepSpeed; torchtitan), "softmax"
    #                               (an fp32 exp-logits buffer)
    loss_parallel: bool           # torchtitan under tp: DTensor's loss_parallel on sharded logits
    gathered_logits: bool         # torchtitan under tp without it: full-vocabulary logits per rank
    loss_upcast: bool             # the model's loss upcasts its logits to fp32 (transformers'
    #                               own classes); false: remote code's loss in the logits' dtype
    held_logits: str              # the logits the training loop's `outputs` keeps through the
    #                               backward and the step: none, fp32, compute (memory/logits.py)
    held_logits_assumed: bool     # ... memlint's default for a loop it cannot see (framework
    #                               deepspeed, transformers' loss, no loop.held_logits given)
    compiled_loss: bool           # torch.compile runs the loss too (memory/compile.py)
    fsdp_version: int             # 2: fully_shard (torchtitan, accelerate fsdp_version 2); 1:
    #                               FullyShardedDataParallel (the HF Trainer's --fsdp)
    fp32_adapters: bool           # PEFT casts LoRA weights to fp32 under the HF Trainer
    fused_cross_entropy: bool
    deferred_wgrad: bool          # the output layer's weight gradient waits for the flush
    wgrad_deferral_limit: int     # micro-batches deferred (0: all)
    softmax_in_fp32: bool         # Megatron's unfused softmax in fp32 (TE, or a flag says so)
    recompute_modules: Optional[frozenset]  # Megatron selective recompute; None outside it
    moe_dispatch: Optional[MoeDispatch]     # Megatron-Core MoE layers; None: the generic count
    fine_offload: Optional[FineOffload]     # Megatron fine-grained activation offloading
    tp_comm_overlap: Optional[TpCommOverlap]  # Megatron --tp-comm-overlap userbuffers
    grouped_gemm: bool            # TE grouped GEMMs for the experts
    gpt_batch: bool               # Megatron's GPT get_batch (labels, loss mask on the GPU)
    dataloader_mask: bool         # ... with the dataloader's B x 1 x T/cp x T bool mask
    deterministic_attention: bool  # TE's DotProductAttention deterministic (memory/
    #                               attention_workspace.py): NVTE_ALLOW_NONDETERMINISTIC_ALGO=0
    #                               or --deterministic-mode
    attention_backend: str        # Megatron --attention-backend (default auto)
    thd_attention: bool           # the language model attends over THD (packed) tensors
    # -- optimizer, precision and layout
    main_grads_to_fp32: bool      # Megatron copies low-precision main grads to fp32 for the step
    in_place_optimizer: bool      # fused optimizers that update in place (Megatron, DeepSpeed)
    torch_version: Optional[tuple]  # the run's PyTorch release (key torch.version); None: a
    #                               current one (memory/optimizer_step.py reads what changed)
    optimizer_over_cp: bool       # the distributed optimizer shards over dp·cp (see above)
    gather_bytes: int             # FSDP all-gather width: the compute dtype's (bf16 2) else fp32;
    #                               1 with torchao's float8 all-gather of the linear weights
    zero: ZeroSettings
    zero3_saved_weights: Optional[str]  # why ZeRO-3's forward keeps gathered linear weights for
    #                               backward (standard linear layers: memory/deepspeed_buffers.py
    #                               stage3_saved_gathered_weights); None: the wrapper frees them
    zero3_version_assumed: tuple  # (key, value, source) when that rests on memlint's DeepSpeed
    #                               version (none given, the model built outside zero.Init); ()
    # -- pipeline schedule
    pipeline_layout: Optional[tuple]   # --pipeline-model-parallel-layout stages
    embedding_in_split: bool      # the embedding counts as a layer of the pipeline split
    loss_in_split: bool           # the loss counts as a layer of the pipeline split
    deepspeed_pipeline: bool      # DeepSpeed's PipelineModule partitions the layers
    #                               (Megatron-DeepSpeed): stages may hold no decoder layer
    microbatch_group_size: Optional[int]  # interleaved schedule's group (None: pp)
    extra_warmup_forwards: int    # one more with overlapped MoE expert-parallel communication
    # -- runtime and inputs
    cublas_workspace_config: Optional[str]  # CUBLAS_WORKSPACE_CONFIG
    cublaslt_workspace_size: Optional[str]  # CUBLASLT_WORKSPACE_SIZE
    checkpoint_keep: tuple        # (checkpoints kept by default: 0 every one, its source)
    checkpoint_sources: tuple     # (model state, optimizer state) as the framework saves them
    model_init: tuple             # (how ranks build the model by default, its source)
    unsupported_architecture: Optional[str]  # why the run's architecture gets no estimate
    world_size_assumed: bool      # the launcher reader assumed the world size
    seq: int                      # tokens per sample, image tokens included
    seq_local: int                # per GPU: split over context parallelism
    # -- RL post-training: the RL framework's own record (memory/rl/frameworks.py); None for a
    # run that is not RL (the phase model, its only reader, runs for RL runs only)
    rl: Any = None


def _partition_counts_embeddings(keys) -> bool:
    """bigscience Megatron-DeepSpeed `--pp-partition-method 'type:transformer|embedding'`:
    DeepSpeed's PipelineModule balances the layers whose class name matches, so the first
    EmbeddingPipe and the tied one at the end each take a stage's share like a decoder layer
    (deepspeed/runtime/pipe/module.py _partition_layers, `type:` at edaa722)."""
    method = keys.get("megatron.pp-partition-method")
    return isinstance(method, str) and method.startswith("type:") and "embedding" in method


def _torchtitan_loop(framework: str, tr, keys: dict) -> dict:
    """torchtitan's loop: its op-level SAC (FSDP2, selective without an every-N option), its
    `del pred` (convention loop.frees_logits; op-level SAC is torchtitan's), the float8 spelling
    that dates its SAC list (convention float8.switch)."""
    op_sac = framework == FSDP2 and tr.recompute == "selective" and tr.recompute_every <= 1
    return {"op_level_sac": op_sac,
            "logits_freed": op_sac or keys.get("loop.frees_logits") is True,
            "float8_switch": keys.get("float8.switch")}


def _rl_record(scenario):
    """The RL framework's record of an RL run, else None (start-up: a run that is not RL never
    loads the RL records)."""
    if not is_rl(scenario):
        return None
    # start-up: the RL records load for an RL run only
    from memlint.memory.rl.frameworks import conventions as rl_conventions

    return rl_conventions(scenario.rl.framework)


def build(scenario, context) -> Conventions:
    """The record of `scenario`, from its resolved context (topology, dtypes; the architecture
    only when images add tokens of the vision tower's count)."""
    tr, par = scenario.training, scenario.parallelism
    keys = scenario.convention_keys
    framework = tr.framework
    topo = context.topology
    megatron = framework == MEGATRON
    uses_deepspeed = framework == DEEPSPEED or "deepspeed.config" in keys
    impl = keys.get("megatron.transformer-impl")
    local = megatron and impl == "local"
    # without images the vision tower's count (and so the architecture) is not needed
    seq = tr.seq_len + (tr.images_per_sample * visual_tokens_per_image(tr, context.architecture)
                        if tr.images_per_sample else 0)
    return Conventions(
        uses_deepspeed=uses_deepspeed,
        deepspeed_config=scenario.where("deepspeed.config") if "deepspeed.config" in keys
        else None,
        deepspeed_conventions=framework == DEEPSPEED,
        fsdp_sharded=(not uses_deepspeed and topo.shard > 1
                      and (par.fsdp in ("full", "hybrid") or par.zero >= 3)),
        # an HF recipe's sharding is the launcher's: stated when an accelerate config is part of
        # the run (MULTI_GPU is DDP, no sharding), else memlint's default none
        states_own_sharding=framework != HF or "accelerate.distributed_type" in keys,
        megatron_modules=megatron,
        te_spec=megatron and not local,
        local_spec=local,
        torch_modules=framework in (HF, FSDP2),
        # DeepSpeed has no model code of its own: deepspeed.initialize wraps the module it is
        # given, which for an HF config is transformers' (gpt-neox's is its own fused code)
        eager_modules=framework == HF or (framework == FSDP2 and topo.tp == 1)
        or (framework == DEEPSPEED and topo.tp == 1 and "gpt_neox.config" not in keys),
        **_torchtitan_loop(framework, tr, keys),
        autocast_weight_copies=framework == HF,
        te_fp8=framework != FSDP2,
        flash_head_dim_multiple=8 if megatron and not local else 0,
        loss=_loss(framework, keys),
        loss_parallel=framework == FSDP2 and topo.tp > 1 and not _loss_parallel_disabled(keys),
        gathered_logits=framework == FSDP2 and topo.tp > 1 and _loss_parallel_disabled(keys),
        loss_upcast=keys.get("transformers.loss_upcast") is not False,
        held_logits=str(keys.get("loop.held_logits", "none")),
        held_logits_assumed=(framework == DEEPSPEED and _loss(framework, keys) == "log-softmax"
                             and "loop.held_logits" not in keys),
        # compile_loss true without compile: the loss alone (torchtitan components ["loss"])
        compiled_loss=(framework in (HF, FSDP2) and (tr.compile_loss is True
                                                     or (tr.compile and tr.compile_loss is None))),
        fsdp_version=(2 if keys.get("accelerate.fsdp_version") == 2 else 1)
        if "accelerate.fsdp_version" in keys else (1 if framework == HF else 2),
        fp32_adapters=framework == HF,
        fused_cross_entropy=keys.get("megatron.cross-entropy-loss-fusion") is True,
        deferred_wgrad=keys.get("megatron.defer-embedding-wgrad-compute") is True,
        wgrad_deferral_limit=keys.get("megatron.wgrad-deferral-limit", 0),
        softmax_in_fp32=(not local or any(keys.get("megatron." + f) is not None for f in (
            "attention-softmax-in-fp32", "apply-query-key-layer-scaling"))),
        recompute_modules=_recompute_modules(tr, keys) if megatron else None,
        moe_dispatch=_moe_dispatch(keys, context.dtypes.compute) if megatron else None,
        fine_offload=_fine_offload(keys) if megatron else None,
        tp_comm_overlap=TpCommOverlap(
            seq, tr.precision == "fp8", keys.get("megatron.first-last-layers-bf16") is True)
        if megatron and keys.get("megatron.tp-comm-overlap") is True else None,
        grouped_gemm=bool(keys.get("megatron.moe-grouped-gemm")),
        gpt_batch=megatron and _gpt_batch(keys),
        dataloader_mask=megatron and _gpt_batch(keys)
        and keys.get("megatron.no-create-attention-mask-in-dataloader") is not True,
        deterministic_attention=megatron and _deterministic_attention(keys),
        attention_backend=str(keys.get("megatron.attention-backend", "auto")),
        thd_attention=megatron and _llava_thd(keys, seq, topo, par),
        main_grads_to_fp32=megatron,
        in_place_optimizer=framework in (MEGATRON, DEEPSPEED),
        torch_version=version_numbers(keys.get("torch.version")),
        optimizer_over_cp=optimizer_shards_over_cp(tr),
        gather_bytes=1 if keys.get("fsdp.allgather_dtype_bytes") == 1
        else 2 if context.dtypes.compute == 2 else 4,
        zero=_zero_settings(keys),
        zero3_saved_weights=_zero3_saved_weights(keys, tr, par, framework, uses_deepspeed),
        zero3_version_assumed=ZERO3_VERSION_ASSUMED if _zero3_saved_weights(
            keys, tr, par, framework, uses_deepspeed, unknown_version=True) else (),
        pipeline_layout=keys.get("megatron.pipeline-layout-stages"),
        embedding_in_split=(keys.get("megatron.account-for-embedding-in-pipeline-split") is True
                            or _partition_counts_embeddings(keys)),
        loss_in_split=(keys.get("megatron.account-for-loss-in-pipeline-split") is True
                       or _partition_counts_embeddings(keys) and not keys.get(
                           "megatron.untie-embeddings-and-output-weights")),
        deepspeed_pipeline=megatron and keys.get("megatron.deepspeed") is True,
        microbatch_group_size=keys.get("megatron.microbatch-group-size-per-virtual-pipeline-stage"),
        extra_warmup_forwards=1 if keys.get("megatron.overlap-moe-expert-parallel-comm") is True
        else 0,
        cublas_workspace_config=keys.get("env.CUBLAS_WORKSPACE_CONFIG"),
        cublaslt_workspace_size=keys.get("env.CUBLASLT_WORKSPACE_SIZE"),
        checkpoint_keep=_CHECKPOINT_KEEP.get(framework, _CHECKPOINT_KEEP[None]),
        checkpoint_sources=_CHECKPOINT_SOURCES.get(framework, _CHECKPOINT_SOURCES[None]),
        model_init=_model_init(framework, par),
        unsupported_architecture=(keys.get("megatron.unsupported-architecture")
                                  or keys.get("gpt_neox.unsupported-architecture")),
        world_size_assumed=keys.get("world_size.assumed") is True,
        seq=seq,
        seq_local=seq_per_gpu(seq, topo.cp),
        rl=_rl_record(scenario),
    )


# Training scripts whose get_batch takes the GPT dataloader's batch (get_batch_on_this_tp_rank):
# NVIDIA/Megatron-LM@d98e8a64 pretrain_gpt.py, pretrain_hybrid.py (pretrain_mamba.py before it)
_GPT_BATCH_SCRIPTS = ("pretrain_gpt.py", "pretrain_hybrid.py", "pretrain_mamba.py")


def _gpt_batch(keys) -> bool:
    """Whether the run's batch comes from Megatron's GPT get_batch: the GPT and hybrid scripts (a
    run without a script is read as pretrain_gpt.py); Megatron-DeepSpeed builds its own. Its
    GPTDataset builds the attention mask unless --no-create-attention-mask-in-dataloader
    (megatron/core/datasets/gpt_dataset.py create_attention_mask; arguments.py store_false)."""
    if keys.get("megatron.deepspeed") is True:
        return False
    script = keys.get("megatron.entry-script")
    return script is None or os.path.basename(str(script)) in _GPT_BATCH_SCRIPTS


def _deterministic_attention(keys) -> bool:
    """Transformer Engine's DotProductAttention runs deterministically when
    NVTE_ALLOW_NONDETERMINISTIC_ALGO is 0 or torch's deterministic algorithms are on
    (transformer_engine/pytorch/attention/dot_product_attention/dot_product_attention.py,
    NVIDIA/TransformerEngine@d0067d0d); Megatron's --deterministic-mode turns them on
    (megatron/training/determinism.py apply_determinism_to_args at d98e8a64)."""
    if keys.get("megatron.deterministic-mode") is True:
        return True
    value = keys.get("env.NVTE_ALLOW_NONDETERMINISTIC_ALGO")
    try:
        return value is not None and int(str(value).strip()) == 0
    except ValueError:
        return False


def _llava_thd(keys, seq: int, topo, par) -> bool:
    """Megatron's LLaVA (pretrain_vlm.py) hands its language model THD tensors under context
    parallelism with --use-packed-sequence or when the combined sequence needs padding to a
    multiple of 2·cp (2·cp·tp with sequence parallelism): pretrain_vlm.py get_batch,
    megatron/core/models/multimodal/context_parallel.py get_padding / get_packed_seq_params."""
    script = keys.get("megatron.entry-script")
    if topo.cp <= 1 or script is None or os.path.basename(str(script)) != "pretrain_vlm.py":
        return False
    if keys.get("megatron.use-packed-sequence") is True:
        return True
    factor = 2 * topo.cp * (topo.tp if par.sp else 1)
    return seq % factor != 0


def _loss_parallel_disabled(keys) -> bool:
    """torchtitan's disable_loss_parallel (default false: parallel_dims.loss_parallel_enabled is
    tp > 1 and enable_loss_parallel, pytorch/torchtitan@e7c0cae torchtitan/distributed/
    parallel_dims.py)."""
    return keys.get("torchtitan.disable_loss_parallel") is True


def _loss(framework: str, keys) -> str:
    """Which cross-entropy the run computes: Megatron's vocab-parallel one (also gpt-neox's, on
    DeepSpeed); transformers' log-softmax over upcast logits (ForCausalLMLoss: the HF Trainer,
    DeepSpeed running an HF model, torchtitan's cross_entropy(pred.float())); else an fp32
    exp-logits buffer."""
    if framework == MEGATRON or (framework == DEEPSPEED and "gpt_neox.config" in keys):
        return "vocab-parallel" if framework == MEGATRON else "softmax"
    if framework in (HF, FSDP2, DEEPSPEED):
        return "log-softmax"
    return "softmax"


def seq_per_gpu(seq: int, cp: int) -> int:
    """The tokens of one sequence on each GPU of a context-parallel group of `cp`: ceil(seq / cp)
    (the one place this is computed; a run's own is `Conventions.seq_local`)."""
    return -(-seq // max(1, cp))


def visual_tokens_per_image(tr, arch) -> int:
    """Tokens each image adds to a sample: `tokens_per_image`, else the vision tower's count."""
    if tr.tokens_per_image:
        return tr.tokens_per_image
    if arch is not None and arch.vision is not None:
        return arch.vision.tokens_per_image
    return 0


def _recompute_modules(tr, keys) -> Optional[frozenset]:
    """Megatron's selective recompute modules (`--recompute-modules`, default core_attn,
    TransformerConfig.__post_init__); None outside Megatron's selective recompute."""
    if tr.recompute != "selective" or tr.recompute_every > 1:
        return None
    names = frozenset(keys.get("megatron.recompute-modules", ()))
    return names or frozenset({"core_attn"})


def _fine_offload(keys) -> Optional[FineOffload]:
    """--fine-grained-activation-offloading with its --offload-modules (TransformerConfig
    asserts the list is not empty when the feature is on)."""
    modules = frozenset(keys.get("megatron.offload-modules", ()))
    if keys.get("megatron.fine-grained-activation-offloading") is not True or not modules:
        return None
    return FineOffload(modules, keys.get("megatron.min-offloaded-tensor-size", 1024 * 1024),
                       keys.get("megatron.activation-offload-fraction", 1.0))


_ROUTER_BYTES = {"fp32": 4, "fp64": 8}


def _moe_dispatch(keys, compute_bytes: int) -> MoeDispatch:
    """Megatron's MoE dispatch settings: the dispatcher (default allgather,
    TransformerConfig.moe_token_dispatcher_type), the fused weighted SwiGLU (bias_swiglu_fusion,
    default on, unless Transformer Engine's activation modules run it: arguments.py,
    argument_utils.py), the router dtype and the fused permutation."""
    return MoeDispatch(
        dispatcher=keys.get("megatron.moe-token-dispatcher-type", "allgather"),
        fused_activation=not (keys.get("megatron.no-bias-swiglu-fusion") is True
                              or keys.get("megatron.use-te-activation-func") is True),
        router_bytes=_ROUTER_BYTES.get(keys.get("megatron.moe-router-dtype"), compute_bytes),
        permute_fused=keys.get("megatron.moe-permute-fusion") is True)


def _zero_settings(keys) -> ZeroSettings:
    given = {field: keys[f"deepspeed.{name}"] for field, name in _ZERO_KEYS.items()
             if f"deepspeed.{name}" in keys}
    return ZeroSettings(**given)


# ZeroSettings field -> the DeepSpeed key (keys.py, `deepspeed.<key>`)
_ZERO_KEYS = {
    "reduce_bucket_size": "reduce_bucket_size", "contiguous_gradients": "contiguous_gradients",
    "overlap_comm": "overlap_comm", "max_live_parameters": "stage3_max_live_parameters",
    "max_reuse_distance": "stage3_max_reuse_distance",
    "prefetch_bucket_size": "stage3_prefetch_bucket_size",
    "param_persistence_threshold": "stage3_param_persistence_threshold",
    "gather_16bit_on_save": "stage3_gather_16bit_weights_on_model_save",
    "sub_group_size": "sub_group_size",
    "optimizer_pin_memory": "offload_optimizer.pin_memory",
    "optimizer_buffer_count": "offload_optimizer.buffer_count",
    "param_pin_memory": "offload_param.pin_memory",
    "param_buffer_count": "offload_param.buffer_count",
    "param_buffer_size": "offload_param.buffer_size",
    "param_max_in_cpu": "offload_param.max_in_cpu",
}

TORCHTITAN_KEEP_LATEST_K = 10   # torchtitan CheckpointManager keep_latest_k default
_CHECKPOINT_KEEP = {
    FSDP2: (TORCHTITAN_KEEP_LATEST_K, "torchtitan keep_latest_k default 10"),
    MEGATRON: (0, "Megatron-LM keeps every checkpoint"),
    DEEPSPEED: (0, "DeepSpeed keeps every checkpoint"),
    HF: (0, "HF Trainer save_total_limit None keeps every checkpoint"),
    None: (0, "every checkpoint is kept"),
}
_CHECKPOINT_SOURCES = {
    MEGATRON: ("Megatron-LM torch_dist model state",
               "Megatron-LM distrib_optimizer.py sharded_state_dict"),
    DEEPSPEED: ("DeepSpeed mp_rank_00_model_states.pt", "DeepSpeed zero_pp_rank_*_optim_states.pt"),
    FSDP2: ("torchtitan DCP model state (sharded params)", "torchtitan DCP optimizer state"),
    None: ("transformers save_pretrained", "transformers Trainer optimizer.pt"),
}


ZERO3_VERSION_ASSUMED = (
    "deepspeed.version",
    "v0.19.6 (memlint's DeepSpeed facts), whose ZeRO-3 linear wrapper frees a built model's "
    "gathered weights too (before 0.19.4 the forward keeps them for the backward: set "
    "deepspeed.version)",
    "deepspeedai/DeepSpeed#8189 (617061d6b, v0.19.4), the ZeRO-3 linear wrapper for a model built "
    "outside zero.Init, memlint/facts/deepspeed.py")


def _zero3_saved_weights(keys, tr, par, framework: str, uses_deepspeed: bool,
                         unknown_version: bool = False) -> Optional[str]:
    """Why a ZeRO-3 run's linear layers keep their gathered weights for the backward, or None.
    With `unknown_version`: what an older DeepSpeed would do where no version is given (the
    estimate then names the version it assumed).

    torch's linear saves `weight.t()`, a view that holds the gathered storage after ZeRO-3 frees
    the parameter; DeepSpeed's LinearFunctionForZeroStage3 saves the parameter itself instead
    (runtime/zero/linear.py). The wrapper is off with memory_efficient_linear false, and before
    v0.19.4 it was installed only for a model built inside zero.Init (#8189, 617061d6b)."""
    # layers that call torch's linear (transformers, gpt-neox's mpu layers): Megatron-Core's
    # LinearWithGradAccumulationAndAsyncCommunication saves the parameter itself
    if not uses_deepspeed or par.zero < 3 or framework not in (DEEPSPEED, HF):
        return None
    if keys.get("deepspeed.memory_efficient_linear") is False:
        return "memory_efficient_linear false"
    version = keys.get("deepspeed.version")
    if unknown_version:
        if version is not None:
            return None
        version = "0.0"
    if version is None:
        return None
    numbers = version_numbers(version)
    init = tr.model_init or _model_init(framework, par)[0]
    if numbers < ds_facts.LINEAR_WRAPPER_FOR_BUILT_MODELS and init != "zero-init":
        return (f"DeepSpeed {version} < 0.19.4 installs the ZeRO-3 linear wrapper only inside "
                f"zero.Init, and the model is built outside it (model_init {init})")
    return None


def _model_init(framework: str, par) -> tuple:
    """(model_init, source): how each rank builds the model when no input says."""
    if framework == MEGATRON:
        return "gpu", ("Megatron-LM arguments.py: --use-cpu-initialization defaults to False, "
                       "parameters are created on the GPU")
    if framework == FSDP2:
        return "meta", "torchtitan train.py builds the model on the meta device"
    if par.zero >= 3:
        return "zero-init", ("transformers integrations/deepspeed.py: from_pretrained under "
                             "deepspeed.zero.Init when ZeRO-3 is enabled")
    return "cpu", ("transformers from_pretrained materializes the whole model on the CPU of "
                   "every rank before it is moved to the GPU")
