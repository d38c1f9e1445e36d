"""The memory model on real Megatron-LM runs (issue 13): schedule, defaults, workspaces, MoE.

Measured values are Megatron-LM CI golden values on DGX H100 (world size 8), as recorded in
`bench/data/calibration/gpu-megatron-ci/records.json`; the configs are byte copies of the same
cases (fixtures/megatron-ci/SOURCES.md).
"""
from __future__ import annotations

import os

import pytest

from memlint.adapters import megatron as M
from memlint.ir import Provenance
from memlint.memory import activations as act
from memlint.memory import runtime
from memlint.memory.estimate import estimate
from memlint.memory.model import Model
from memlint.memory.context import resolve_context
from memlint.memory.params import architecture, count_params
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CI = os.path.join(ROOT, "fixtures", "megatron-ci")
MiB = 1024**2


def ci_estimate(name: str, *sets: str):
    path = os.path.join(CI, name)
    with open(path, encoding="utf-8") as handle:
        partial = M.load(path, handle.read())
    cli = overrides_partial(["world_size=8", "gpu=H100-80GB", *sets])
    scenario, diagnostics = build([partial, cli])
    assert not [d for d in diagnostics if d.severity.label == "error"]
    return scenario, estimate(scenario)


def args_scenario(text: str, *sets: str, entry=None):
    partial = M.load("run.txt", text, entry=entry)
    scenario, _ = build([partial, overrides_partial(["world_size=8", "gpu=H100-80GB", *sets])])
    return scenario


# -- whole runs: last-stage allocated vs Megatron's mem-max-allocated-bytes -------------------

@pytest.mark.parametrize("name, measured, after_step", [
    # interleaved 1F1B, pp 4, 3 virtual stages of 1 layer, TE spec, dropout defaults
    ("gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist.yaml", 2643299328, 763220480),
    # local spec (Megatron's own attention with its global memory buffer), 1F1B pp 2
    ("gpt3_mcore_tp1_pp2.yaml", 3633177600, 948653056),
])
def test_ci_runs_last_stage(name, measured, after_step):
    _, result = ci_estimate(name)
    last = result.stages[-1]
    assert abs(last.allocated_bytes - measured) / measured < 0.03
    persistent = sum(t.bytes for t in next(p for p in last.phases if p.name == "optimizer").terms
                     if t.component != "runtime")
    assert abs(persistent - after_step) / after_step < 0.05


def test_three_numbers_per_stage():
    _, result = ci_estimate("gpt3_mcore_tp1_pp2.yaml")
    for stage in result.stages:
        # Megatron's allocation order is not modeled (memory/allocator.py): no cached idle
        # block is counted, reserved = allocated; CUDA context and NCCL lie outside
        assert stage.allocated_bytes == stage.reserved_bytes < stage.device_bytes
        assert stage.device_bytes == stage.total_bytes
        data = stage.to_dict()
        assert data["allocated_bytes"] == stage.allocated_bytes
        assert data["reserved_bytes"] == stage.reserved_bytes


# -- workspaces ------------------------------------------------------------------------------

def test_workspace_terms_te_and_local():
    _, te = ci_estimate("gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist.yaml")
    last = te.stages[-1]
    # CUBLAS_WORKSPACE_CONFIG :4096:8 (ENV_VARS) = 32 MiB, forward + autograd threads
    assert last.term("buffers.cublas_workspace").bytes == 2 * 4096 * 1024 * 8
    assert last.term("buffers.te_workspace").bytes == 32 * MiB + 256
    assert last.term("buffers.global_memory_buffer") is None   # tp 1: nothing gathered
    _, local = ci_estimate("gpt3_mcore_tp1_pp2.yaml")
    last = local.stages[-1]
    assert last.term("buffers.te_workspace") is None
    # bf16 × B 4 × 8 heads × 1024² (dot_product_attention.py, global memory buffer "mpu")
    buffer = last.term("buffers.global_memory_buffer")
    assert buffer.bytes == 2 * 4 * 8 * 1024 * 1024
    assert buffer.inputs == {"attention baddbmm input": 2 * 4 * 8 * 1024 * 1024}
    assert last.term("buffers.cublaslt_workspace").bytes == 2 * 1024 * 1024  # biased linears
    for stage in local.stages:   # in every phase, they never go away
        for phase in stage.phases:
            assert any(t.name == "buffers.cublas_workspace" for t in phase.terms)


def test_cublas_workspace_sizes():
    assert runtime.cublas_workspace_bytes(None, (9, 0))[0] == 32 * MiB
    assert runtime.cublas_workspace_bytes(None, (8, 0))[0] == 4096 * 1024 * 2 + 16 * 1024 * 8
    assert runtime.cublas_workspace_bytes(":4096:2:16:8", (9, 0))[0] == 8 * MiB + 128 * 1024
    assert runtime.cublas_workspace_bytes("garbage", (9, 0))[0] == 32 * MiB


def test_no_workspaces_on_cpu_or_seed():
    sc = args_scenario("--num-layers 2 --hidden-size 256 --num-attention-heads 4 "
                       "--seq-length 128 --micro-batch-size 1 --bf16\n", "device=cpu")
    assert not any(t.name.startswith("buffers.") for t in estimate(sc).stages[0].terms)


# -- interleaved 1F1B: Megatron's warm-up rule, every stage ----------------------------------

def test_interleaved_inflight_by_schedule_rule():
    # pp 4, vpp 3, m 4: last rank warm-up (3-1)·4 = 8 chunk forwards, holds 9 chunks = 3 stages
    assert act.inflight_microbatches(3, 4, 3, 4) == 3
    # first rank: 2·3 + 8 = 14 >= m·vpp = 12: every chunk of the step is in flight
    assert act.inflight_microbatches(0, 4, 3, 4) == 4
    # a group size of 6 and m 12: last rank 2·6 + 1 = 13 chunks
    assert act.inflight_microbatches(3, 4, 3, 12, group=6) == pytest.approx(13 / 3)
    # --overlap-moe-expert-parallel-comm: one more warm-up forward
    assert act.inflight_microbatches(3, 4, 3, 12, extra_warmup=1) == pytest.approx(10 / 3)
    # 1F1B unchanged: pp - i, at most m
    assert act.inflight_microbatches(0, 4, 1, 8) == 4
    assert act.inflight_microbatches(0, 4, 1, 2) == 2


def test_group_size_flag_reaches_the_schedule():
    base = ("--num-layers 8 --hidden-size 256 --num-attention-heads 4 --seq-length 128 "
            "--micro-batch-size 1 --global-batch-size 24 --bf16 "
            "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 ")
    plain = estimate(args_scenario(base + "\n")).stages[-1]
    grouped = estimate(args_scenario(base + "--microbatch-group-size-per-virtual-pipeline-stage"
                                            " 6\n")).stages[-1]
    ratio = (grouped.term("activations").inputs["inflight"]
             / plain.term("activations").inputs["inflight"])
    assert ratio == pytest.approx((6 + 1) / (2 + 1))   # (vpp-1)·g + 1 chunks on the last rank


# -- framework defaults and the model family -------------------------------------------------

def test_dropout_defaults_are_megatrons():
    sc = args_scenario("--num-layers 2 --hidden-size 256 --num-attention-heads 4\n")
    config = sc.model.config
    assert config["hidden_dropout"] == 0.1 and config["attention_dropout"] == 0.1
    assert config["embedding_dropout"] == 0.1
    assert "Megatron default 0.1" in sc.where("model.hidden_dropout").key
    sc = args_scenario("--num-layers 2 --hidden-size 256 --num-attention-heads 4 "
                       "--hidden-dropout 0.0 --attention-dropout 0\n")
    assert sc.model.config["hidden_dropout"] == 0.0
    assert sc.model.config["attention_dropout"] == 0.0


def test_dropout_masks_saved_with_defaults():
    text = ("--num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 128 "
            "--micro-batch-size 1 --bf16 --attention-backend unfused")
    with_dropout = estimate(args_scenario(text + "\n")).stages[0]
    without = estimate(args_scenario(text + " --hidden-dropout 0 --attention-dropout 0\n")
                       ).stages[0]
    saved = with_dropout.term("activations").inputs["saved"]
    assert "attention dropout mask" in saved and "mlp dropout mask" in saved
    assert "attention dropout mask" not in without.term("activations").inputs["saved"]


def test_gelu_layernorm_moe_has_experts():
    sc = args_scenario("--num-layers 4 --hidden-size 256 --num-attention-heads 4 "
                       "--num-experts 8 --moe-router-topk 2 --ffn-hidden-size 512\n")
    arch = architecture(sc.model.config)
    assert arch.moe is not None and arch.moe.num_experts == 8 and all(arch.moe_layers)
    assert arch.norm == "layernorm" and not arch.gated_mlp
    layer = count_params(arch).layers[0]
    assert layer.experts == 8 * 2 * 256 * 512          # fc1 + fc2 per GeLU expert
    assert layer.router == 256 * 8


def test_mla_without_experts_is_dense():
    sc = args_scenario("--num-layers 4 --hidden-size 256 --num-attention-heads 4 "
                       "--multi-latent-attention --kv-lora-rank 64 --swiglu "
                       "--normalization RMSNorm\n")
    arch = architecture(sc.model.config)
    assert arch.moe is None and arch.mla is not None and arch.mla.kv_lora_rank == 64
    assert count_params(arch).experts == 0


def test_megatron_gpt_count_matches_megatron_formula():
    """GPTModel, TE spec, LayerNorm, GeLU, biases, learned positions, tied embeddings:
    V·d + P·d + L·(12d² + 13d) + 2d (Megatron's own count for this layout)."""
    sc = args_scenario("--num-layers 12 --hidden-size 512 --num-attention-heads 8 "
                       "--max-position-embeddings 1024 --seq-length 1024 --vocab-size 50257\n")
    counts = resolve_context(sc).counts
    d, v = 512, 50304
    assert counts.total == v * d + 1024 * d + 12 * (12 * d * d + 13 * d) + 2 * d
    rope = args_scenario("--num-layers 12 --hidden-size 512 --num-attention-heads 8 "
                         "--position-embedding-type rope --vocab-size 50257\n")
    assert resolve_context(rope).counts.position_embedding == 0


def test_env_vars_recorded_from_yaml():
    path = os.path.join(CI, "gpt3_mcore_tp1_pp2.yaml")
    with open(path, encoding="utf-8") as handle:
        partial = M.load(path, handle.read())
    setting = partial.extra["env.CUBLAS_WORKSPACE_CONFIG"]
    assert setting.value == ":4096:8" and isinstance(setting.prov, Provenance)
    assert setting.prov.line == 5


# -- models memlint does not count: a warning, never ML004 -----------------------------------

@pytest.mark.parametrize("text", [
    # a hybrid layer memlint does not count (G: GatedDeltaNet)
    "--num-layers 8 --hidden-size 512 --num-attention-heads 8 "
    "--hybrid-layer-pattern M-G*-M-M-\n",
    # MTP layers after '/'
    "--hidden-size 512 --num-attention-heads 8 --hybrid-layer-pattern M-M*/M-/M-\n",
    # a hybrid script without a pattern (the deprecated ratio flags)
    "#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_mamba.py --num-layers 8 "
    "--hidden-size 512 --num-attention-heads 8\n",
    # T5 with pipeline parallelism: examples/t5/pretrain_t5.py raises ValueError
    "--encoder-num-layers 12 --decoder-num-layers 12 --hidden-size 768 "
    "--num-attention-heads 12 --pipeline-model-parallel-size 2\n",
])
def test_unsupported_architectures_warn(text):
    from memlint.memory.estimate import EstimateError, UnsupportedModel

    name = "run.sh" if text.startswith("#!") else "run.txt"
    partial = M.load(name, text)
    warnings = [d for d in partial.diagnostics if d.code == "ML008"]
    assert warnings and warnings[0].severity.label == "warning"
    assert "no estimate for this architecture" in warnings[0].message
    assert not [d for d in partial.diagnostics if d.severity.label == "error"]
    scenario, _ = build([partial, overrides_partial(["world_size=8"])])
    with pytest.raises(UnsupportedModel) as caught:
        estimate(scenario)
    assert isinstance(caught.value, EstimateError) and caught.value.severity == "warning"


@pytest.mark.parametrize("text, kind, layers", [
    ("--encoder-num-layers 12 --decoder-num-layers 12 --hidden-size 768 "
     "--num-attention-heads 12 --encoder-seq-length 512 --decoder-seq-length 128 "
     "--max-position-embeddings 512 --micro-batch-size 4\n", "megatron_t5", 24),
    ("--hidden-size 512 --num-attention-heads 8 --seq-length 1024 --micro-batch-size 2 "
     "--hybrid-layer-pattern M-M*-M-M-\n", "megatron_hybrid", 9),
    ("--hidden-size 512 --num-attention-heads 8 --seq-length 1024 --micro-batch-size 2 "
     "--hybrid-override-pattern M-M*-M-M-\n", "megatron_hybrid", 9),
])
def test_t5_and_hybrids_are_estimated(text, kind, layers):
    partial = M.load("run.txt", text)
    assert not [d for d in partial.diagnostics if d.code == "ML008"]
    assert partial.settings["model.model_type"].value == kind
    scenario, _ = build([partial, overrides_partial(["world_size=8"])])
    result = estimate(scenario)
    assert result.context.architecture.layers == layers
    assert result.stages[-1].allocated_bytes > 0


def test_t5_reads_both_sequence_lengths_and_the_extra_ids():
    partial = M.load("run.txt", "--encoder-num-layers 12 --decoder-num-layers 12 "
                     "--hidden-size 768 --num-attention-heads 12 --encoder-seq-length 512 "
                     "--decoder-seq-length 128 --tokenizer-type BertWordPieceCase\n")
    values = {k: v.value for k, v in partial.settings.items()}
    assert values["seq_len"] == 512 and values["model.decoder_seq_length"] == 128
    # BERT cased WordPiece (28,996) + the 100 <extra_id_i> tokens build_tokenizer.py adds
    assert values["model.vocab_size"] == 29096


def test_hybrid_pipe_segments_give_the_virtual_stages():
    partial = M.load("run.txt", "--hidden-size 1024 --num-attention-heads 16 "
                     "--pipeline-model-parallel-size 2 "
                     "--hybrid-layer-pattern M-M-M-M*-M-|M-M-M*-M-M-|M-M*-M-M-M-|M*-M-M-M-M-\n")
    assert partial.settings["vpp"].value == 2
    assert partial.extra["megatron.pipeline-layout-stages"].value == ["t" * 11] * 4


# -- logits: fused cross entropy, deferred embedding wgrad, MTP heads ------------------------

BASE = ("--num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
        "--max-position-embeddings 1024 --micro-batch-size 4 --global-batch-size 32 --bf16 "
        "--vocab-size 50257 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 ")


def logits_of(text: str, phase: str = "forward_end"):
    result = estimate(args_scenario(BASE + text + "\n"))
    stage = result.stages[-1]
    terms = next(p for p in stage.phases if p.name == phase).terms
    return {t.name: t for t in terms if t.component == "logits"}


def test_megatron_logits_bytes_per_logit():
    vocab, tokens = 50432 // 2, 4 * 1024   # 50257 padded to a multiple of 128·tp
    plain = logits_of("")["logits"]
    assert plain.bytes == (2 + 4) * vocab * tokens           # logits + fp32 exp-logits
    fused = logits_of("--cross-entropy-loss-fusion")["logits"]
    assert fused.bytes == (2 + 4 + 4) * vocab * tokens       # + the fused path's fp32 copy
    assert logits_of("--cross-entropy-loss-fusion", "backward_start")["logits"].bytes \
        == plain.bytes
    mtp = logits_of("--mtp-num-layers 1 --position-embedding-type rope")["logits"]
    assert mtp.bytes == (2 * 4 + 2) * vocab * tokens and mtp.inputs["loss_heads"] == 2


def test_deferred_embedding_wgrad_buffers():
    vocab, tokens = 50432 // 2, 4 * 1024   # 50257 padded to a multiple of 128·tp
    # dp = 8 / (2·2) = 2: m = 32 / (4·2) = 4 micro-batches; a limit of 2 holds 2 of them
    term = logits_of("--defer-embedding-wgrad-compute --wgrad-deferral-limit 2")[
        "logits.deferred_wgrad"]
    assert term.bytes == 2 * (2 * vocab * tokens + 2 * 512 * tokens)
    unlimited = logits_of("--defer-embedding-wgrad-compute")["logits.deferred_wgrad"]
    assert unlimited.inputs["held"] == 3                     # all but the current one


# -- attention kernels and the unfused softmax ------------------------------------------------

def test_te_head_dim_not_multiple_of_8_is_unfused():
    text = ("--num-layers 2 --hidden-size 624 --num-attention-heads 12 --seq-length 1024 "
            "--micro-batch-size 4 --bf16 --attention-dropout 0 --hidden-dropout 0\n")
    saved = estimate(args_scenario(text)).stages[0].term("activations").inputs["saved"]
    assert any("T×T" in name for name in saved)              # head dim 52: no flash kernel
    text64 = text.replace("--hidden-size 624", "--hidden-size 768")
    saved = estimate(args_scenario(text64)).stages[0].term("activations").inputs["saved"]
    assert not any("T×T" in name for name in saved)


def test_softmax_fallback_keeps_fp32_probabilities():
    text = ("--num-layers 2 --hidden-size 512 --num-attention-heads 8 --micro-batch-size 4 "
            "--bf16 --attention-backend unfused --attention-dropout 0 ")
    kernel = estimate(args_scenario(text + "--seq-length 1024\n")).stages[0]
    fallback = estimate(args_scenario(text + "--seq-length 1022\n")).stages[0]
    name = "attention scores, softmax, dropout (T×T)"
    per_pair = 8  # heads
    assert kernel.term("activations").inputs["saved"][name] == pytest.approx(
        2 * per_pair * 1024)
    assert fallback.term("activations").inputs["saved"][name] == pytest.approx(
        (4 + 2) * per_pair * 1022)


# -- LLaVA (pretrain_vlm.py) ------------------------------------------------------------------

LLAVA = ("--num-layers 12 --hidden-size 1024 --num-attention-heads 16 --seq-length 576 "
         "--dataloader-seq-length 1232 --max-position-embeddings 4096 --micro-batch-size 1 "
         "--bf16 --img-h 336 --img-w 336 --patch-dim 14 --vocab-size 8193 "
         "--tensor-model-parallel-size 4 --disable-vision-class-token\n")


def test_llava_vision_tower_and_tokens():
    # only pretrain_vlm.py builds this model: the same flags under another script do not
    assert args_scenario(LLAVA).training.images_per_sample == 0
    sc = args_scenario(LLAVA, entry="pretrain_vlm.py")
    assert sc.training.images_per_sample == 1 and sc.training.tokens_per_image == 576
    assert sc.training.seq_len == 1232
    arch = architecture(sc.model.config)
    d, ffn = 1024, 4096
    vit_layer = (4 * d * d + 4 * d) + (2 * d * ffn + ffn + d) + 2 * 2 * d
    assert arch.vision.params == 3 * 14 * 14 * d + d + 577 * d + 2 * d + 12 * vit_layer
    assert arch.vision.projector_params == 2 * d * ffn + ffn + d
    result = estimate(sc)
    first = result.stages[0]
    weights = first.term("vision.weights")
    # tensor-parallel like the LM, except what every rank holds whole: conv1, class token, 577
    # positions, ln_pre, per layer two LayerNorms and the proj / fc2 biases, the projection's
    # fc2 bias (Megatron RowParallelLinear adds its bias after the reduction)
    whole = 3 * 14 * 14 * d + d + 577 * d + 2 * d + 12 * (2 * 2 * d + 2 * d) + d
    assert arch.vision.tp_replicated == whole
    total = arch.vision.params + arch.vision.projector_params
    assert weights.inputs["params"] == -(-(total - whole) // 4) + whole
    # the ViT's layers run on the class token too (CLIPViTModel adds it; LLaVA drops it after the
    # encoder), the projection on the 576 tokens the language model sees
    vision = first.term("vision.activations").inputs
    assert vision["tokens"] == 577 and vision["projection_tokens"] == 576


def test_llava_language_model_has_its_own_output_layer_and_positions():
    """pretrain_vlm.py builds LLaVAModel without share_embeddings_and_output_weights (default
    False: an untied output layer) and sizes the learned positions by
    language_max_sequence_length: text 1232 + image 576 tokens, padded to tp·cp·2 = 16 with SP
    and CP (1808 already is), times the micro batch in the THD layout; not by
    --max-position-embeddings 4096 (Megatron CI multimodal_llava_mcore_te_tp4_sp_cp2)."""
    sc = args_scenario(LLAVA + "--sequence-parallel --context-parallel-size 2 "
                       "--use-packed-sequence\n", entry="pretrain_vlm.py")
    assert sc.model.config["tie_word_embeddings"] is False
    assert sc.model.config["learned_positions"] == 1232 + 576
    # without CP or SP no padding; the class token is one more image token
    plain = args_scenario(LLAVA.replace("--disable-vision-class-token", "")
                          .replace("--tensor-model-parallel-size 4", ""), entry="pretrain_vlm.py")
    assert plain.model.config["learned_positions"] == 1232 + 577
    padded = args_scenario(LLAVA.replace("--dataloader-seq-length 1232",
                                         "--dataloader-seq-length 1230")
                           + "--sequence-parallel --context-parallel-size 2 --micro-batch-size 2\n",
                           entry="pretrain_vlm.py")
    # 1806 -> 1808 (16 | 1808), padding > 0 puts it in the THD layout: x micro batch 2
    assert padded.model.config["learned_positions"] == 1808 * 2


CALIBRATION = os.path.join(ROOT, "bench", "data", "calibration", "gpu-megatron-ci", "configs")


def test_llava_peak_is_the_last_layers_unfused_softmax():
    """Megatron CI multimodal_llava_mcore_te_tp1_pp1 (8 x H100, measured max allocated
    15,774,200,832 B on the last rank): head size 624/12 = 52 is no multiple of 8, so Transformer
    Engine runs UnfusedDotProductAttention; T = 1024 text + 577 image tokens = 1601 is no multiple
    of 8, so its softmax is torch's, in fp32. While the last layer's softmax runs, the bf16
    scores, their fp32 copy and the masked copy live beside the fp32 probabilities and their bf16
    cast: 4 x 12 heads x 1601^2 elements x 10 B, more than the logits that come later."""
    path = os.path.join(CALIBRATION, "multimodal-llava__multimodal_llava_mcore_te_tp1_pp1.yaml")
    partial = M.load_path(path, entry="pretrain_vlm.py")
    scenario, _ = build([partial, overrides_partial(["world_size=8", "gpu=H100-80GB"])])
    last = estimate(scenario).stages[-1]
    assert last.phase == "forward_softmax"
    live = last.term("activations.softmax_live")
    assert live.inputs["path"] == "torch-fp32" and live.inputs["bytes_per_element"] == 10
    assert live.inputs["elements"] == 4 * 12 * 1601 * 1601
    assert not [t for t in last.terms if t.component == "logits"]
    assert abs(last.allocated_bytes - 15774200832) / 15774200832 < 0.02


def test_softmax_paths_follow_the_kernels_conditions():
    from memlint.memory.model import Model
    from memlint.memory.softmax import live_bytes, softmax_path

    te = Model(args_scenario(LLAVA))           # TE spec, bf16, micro batch 1, tp 4: 4 heads
    assert softmax_path(te, 2048, 16, flash=True) is None
    assert softmax_path(te, 2048, 16, flash=False) == "fused"
    assert softmax_path(te, 2044, 16, flash=False) == "torch-fp32"   # TE wants T % 8 == 0
    local = Model(args_scenario(LLAVA + "--transformer-impl local\n"))
    assert softmax_path(local, 2044, 16, flash=False) == "fused"     # Megatron's: T % 4 == 0
    assert softmax_path(local, 2043, 16, flash=False) == "torch"
    assert [live_bytes(te, p) for p in ("fused", "torch-fp32", "torch")] == [2, 10, 4]


def test_norms_biases_and_positions_are_whole_on_every_tp_rank():
    """Megatron CI multimodal_llava_mcore_te_tp4_sp_cp2's language model at tp 4: per layer the
    qkv/proj/fc1/fc2 matrices and the column-parallel biases split four ways; the two fused
    LayerNorms (weight and bias), the proj and fc2 biases, the final norm and the 1808 learned
    positions stay whole: 44,153,856 parameters per rank (embedding and untied output layer of
    8,704 padded tokens split too)."""
    sc = args_scenario(LLAVA + "--sequence-parallel --context-parallel-size 2 "
                       "--use-packed-sequence\n", entry="pretrain_vlm.py")
    d, ffn, layers = 1024, 4096, 12
    split = 3 * d * d + 3 * d + d * d + d * ffn + ffn + ffn * d
    whole = 2 * 2 * d + 2 * d
    embedding = 8704 * d // 4
    expected = layers * (split // 4 + whole) + 2 * embedding + 2 * d + 1808 * d
    first = estimate(sc).stages[0]
    assert first.term("weights").inputs["params"] == expected == 44_153_856


# -- selective recompute modules, pipeline layout, MTP ---------------------------------------

def test_recompute_modules_drop_what_they_recompute():
    from memlint.memory.activations import Shapes, fused_layer_items

    dense = Shapes(d=512, dq=512, dk=512, dv=512, heads=8, do=512, ffn=2048, gated=False,
                   layernorm=True)
    names = {i.name for i in fused_layer_items(dense, 2, False, 1, False, False, False, False,
                                               modules=frozenset({"core_attn"}))}
    assert not any("T×T" in n for n in names)            # default: core attention recomputed
    names = {i.name for i in fused_layer_items(dense, 2, False, 1, False, False, False, False,
                                               modules=frozenset({"mlp"}))}
    assert any("T×T" in n for n in names)                 # scores kept without core_attn
    assert "fc1 output (activation input)" not in names
    moe = Shapes(d=512, dq=512, dk=512, dv=512, heads=8, do=512, ffn=2048, gated=True,
                 layernorm=False, moe_ffn=1024, top_k=2, experts=8)
    names = {i.name for i in fused_layer_items(moe, 2, True, 1, False, False, False, False,
                                               modules=frozenset({"mlp", "moe_act"}),
                                               moe_layer=True)}
    assert "experts fc1 output (top-2)" in names          # "mlp" leaves MoE layers alone
    assert "experts fc2 input (top-2)" not in names       # moe_act drops the activation output
    names = {i.name for i in fused_layer_items(moe, 2, True, 1, False, False, False, False,
                                               modules=frozenset({"moe", "layernorm"}),
                                               moe_layer=True)}
    assert not any(n.startswith(("experts", "routed", "router")) for n in names)
    assert "mlp input (norm2 output)" not in names        # MoE pre-MLP norm is its own module


def test_recompute_modules_flag_reaches_the_model():
    base = ("--num-layers 2 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
            "--micro-batch-size 1 --bf16 --attention-backend unfused "
            "--recompute-granularity selective")
    default = estimate(args_scenario(base + "\n")).stages[0].term("activations")
    mlp_only = estimate(args_scenario(base + " --recompute-modules mlp\n")).stages[0].term(
        "activations")
    assert not any("T×T" in n for n in default.inputs["saved"])
    assert any("T×T" in n for n in mlp_only.inputs["saved"])


def test_pipeline_layout_places_layers_and_mtp():
    text = ("--num-layers 16 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
            "--micro-batch-size 1 --global-batch-size 16 --bf16 --swiglu --normalization RMSNorm "
            "--position-embedding-type rope --pipeline-model-parallel-size 2 --disable-bias-linear "
            "--pipeline-model-parallel-layout 'Et*3|(tt|)*6tmL' --mtp-num-layers 1\n")
    sc = args_scenario(text)
    assert sc.parallelism.vpp == 4
    result = estimate(sc)
    # virtual stages Ettt, tt, tt, tt, tt, tt, tt, tmL: rank 0 holds 3+2+2+2, rank 1 2+2+2+1
    assert [s.layers for s in result.stages] == [9, 7]
    last = result.stages[-1]
    assert last.term("activations.mtp").inputs["layers"] == 1
    plain = estimate(args_scenario(text.replace(" --mtp-num-layers 1", ""))).stages[-1]
    d = 512
    ffn = int(4 * d * 2 / 3 / 64) * 64
    layer = 4 * d * d + 3 * d * ffn + 2 * d
    mtp = layer + 2 * d * d + 3 * d                       # + eh_proj, enorm, hnorm, final norm
    assert last.term("weights").inputs["params"] - plain.term("weights").inputs["params"] == mtp


def test_distributed_optimizer_shards_over_dp_and_cp():
    text = ("--num-layers 2 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
            "--micro-batch-size 1 --bf16 --use-distributed-optimizer "
            "--tensor-model-parallel-size 4 --context-parallel-size 2\n")
    last = estimate(args_scenario(text)).stages[-1]
    assert last.term("optimizer.master").inputs["shard"] == 2   # dp 1 × cp 2


def test_bert_script_default_tokenizer():
    text = "--num-layers 2 --hidden-size 512 --num-attention-heads 8 --vocab-file vocab.txt\n"
    bert = M.load("run.txt", text, entry="examples/bert/pretrain_bert.py")
    scenario, _ = build([bert])
    assert scenario.model.config["vocab_size"] == 30522
    assert Model(scenario).arch.vocab == 30592               # padded to 128
    assert any("BertWordPieceLowerCase" in d.message for d in bert.diagnostics)
    gpt, _ = build([M.load("run.txt", text, entry="pretrain_gpt.py")])
    assert Model(gpt).arch.vocab == 50304


def test_embedding_and_loss_in_the_split():
    # 6 layers + embedding + loss over pp 4 × vpp 2 = 8 chunks of one unit: the last rank holds
    # one layer (chunk 3) and the loss (chunk 7); its warm-up runs 4 forwards of the layer chunk
    text = ("--num-layers 6 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
            "--micro-batch-size 4 --global-batch-size 32 --bf16 --pipeline-model-parallel-size 4 "
            "--num-virtual-stages-per-pipeline-rank 2 --account-for-embedding-in-pipeline-split "
            "--account-for-loss-in-pipeline-split\n")
    result = estimate(args_scenario(text))
    assert [s.layers for s in result.stages] == [1, 2, 2, 1]
    assert result.stages[-1].term("activations").inputs["inflight"] == 4
    assert act.inflight_microbatches(3, 4, 2, 4, chunk_layers=[1, 0]) == 4
    assert act.inflight_microbatches(3, 4, 2, 4) == 2.5      # an even split would say 2.5


def test_mtp_stage_builds_its_own_embedding_when_untied():
    text = ("--num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 "
            "--micro-batch-size 1 --bf16 --position-embedding-type rope --vocab-size 32000 "
            "--untie-embeddings-and-output-weights --pipeline-model-parallel-size 2 ")
    with_mtp = estimate(args_scenario(text + "--mtp-num-layers 1\n")).stages[-1]
    without = estimate(args_scenario(text + "\n")).stages[-1]
    added = with_mtp.term("weights").inputs["params"] - without.term("weights").inputs["params"]
    d = 512
    layer = 4 * d * d + 4 * d + 2 * d * 4 * d + 4 * d + d + 2 * 2 * d   # biased GeLU layer
    assert added == layer + 2 * d * d + 3 * 2 * d + 32000 * d           # + embedding (untied)


# -- the GPT batch: the dataloader's attention mask, labels and loss mask -----------------------

def test_gpt_batch_keeps_the_dataloaders_attention_mask():
    """pretrain_gpt.py get_batch puts the batch on the first and last stages' GPUs: GPTDataset's
    B x 1 x T x T bool attention mask (create_attention_mask, on unless
    --no-create-attention-mask-in-dataloader), and on the last stage the labels (int64) and loss
    mask (fp32). Megatron's own CI shows it: the peak of gpt3_mcore_te_tp2_pp2_resume_torch_dist
    above its persistent state is 4.2 MB (B 4 x 1024 x 1024 x 1 B) higher than that of
    ..._no_create_attention_mask_in_dataloader, on H100 and on A100 (golden values at d98e8a64)."""
    _, result = ci_estimate("gpt3_mcore_tp1_pp2.yaml")
    first, last = result.stages
    mask = 4 * 1024 * 1024   # B 4 x T/cp 1024 x T 1024 x 1 B
    assert first.term("activations.batch").bytes == mask
    assert last.term("activations.batch").bytes == mask + 12 * 4 * 1024
    _, without = ci_estimate("gpt3_mcore_tp1_pp2.yaml",
                             "megatron.no-create-attention-mask-in-dataloader=true")
    assert without.stages[0].term("activations.batch") is None
    assert without.stages[-1].term("activations.batch").bytes == 12 * 4 * 1024
    assert last.allocated_bytes - without.stages[-1].allocated_bytes == mask


def test_gpt_batch_under_context_parallelism_and_other_scripts():
    text = ("--num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 2048 "
            "--micro-batch-size 2 --bf16 --context-parallel-size 2\n")
    # get_batch_on_this_cp_rank slices the mask's query rows: B x 1 x T/cp x T
    term = estimate(args_scenario(text)).stages[0].term("activations.batch")
    assert term.inputs["attention_mask"] == 2 * 1024 * 2048
    # LLaVA's get_batch (pretrain_vlm.py) passes no mask: no GPT batch
    llava = estimate(args_scenario(LLAVA, entry="pretrain_vlm.py")).stages[0]
    assert llava.term("activations.batch") is None


def test_packed_sequence_under_cp_is_modeled_as_thd_attention():
    """LLaVA hands its language model THD tensors under context parallelism with
    --use-packed-sequence (memory/attention_workspace.py counts cuDNN's bucketed workspace, no
    not-modeled warning); without context parallelism get_packed_seq_params keeps sbhd."""
    from memlint.facts.coverage import set_not_modeled
    from memlint.memory.context import resolve_context

    def thd(text):
        sc = args_scenario(text, entry="pretrain_vlm.py")
        assert "--use-packed-sequence" not in [f.entry.key for f in set_not_modeled(sc.extra)]
        return resolve_context(sc).require("conventions").thd_attention

    assert thd(LLAVA + "--sequence-parallel --context-parallel-size 2 --use-packed-sequence\n")
    assert not thd(LLAVA + "--use-packed-sequence\n")
    assert not thd(LLAVA + "--context-parallel-size 1 --use-packed-sequence\n")
    # padding to 2·cp·tp also takes THD: 1808 tokens are no multiple of 2·4·4 = 32
    assert thd(LLAVA + "--sequence-parallel --context-parallel-size 4\n")
