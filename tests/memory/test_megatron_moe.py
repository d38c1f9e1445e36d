"""Megatron-Core MoE layers on real Megatron-LM CI configs (bench/data/calibration/gpu-megatron-ci,
byte copies of the cases' model_config.yaml at NVIDIA/Megatron-LM@d98e8a64dd; measured peaks
in its records.json): what the routed experts save, the all-gather dispatcher's global buffer and
the dispatchers' routing state (memory/moe_activations.py, memory/global_buffer.py)."""
from __future__ import annotations

import json
import os

from memlint.adapters import megatron as M
from memlint.memory.activations import Shapes, fused_layer_items
from memlint.memory.conventions import MoeDispatch
from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CI = os.path.join(ROOT, "bench", "data", "calibration", "gpu-megatron-ci")


def ci(case: str):
    path = os.path.join(CI, "configs", case + ".yaml")
    partial = M.load_path(path, entry="pretrain_gpt.py")
    scenario, diagnostics = build([partial, overrides_partial(["world_size=8",
                                                               "gpu=H100-80GB"])])
    assert not [d for d in diagnostics if d.severity.label == "error"]
    return scenario, estimate(scenario)


def record(case: str) -> dict:
    with open(os.path.join(CI, "records.json"), encoding="utf-8") as handle:
        return next(r for r in json.load(handle) if case.endswith(r["case"]))


def saved(stage) -> dict:
    return stage.term("activations").inputs["saved"]


EP8 = "moe__gpt3_moe_mcore_te_ep8_resume_torch_dist_dist_optimizer"


def test_allgather_dispatcher_keeps_its_gathered_tokens_and_routing_state():
    """ep 8, tp 1, 8 experts top-2, B 4 x T 1024, d 512, 12 MoE layers, allgather (given),
    --moe-router-dtype fp32, unfused permutation. Megatron's own allocated_after_step of this
    rank is 788,384,256 B; the dense twin (tp1_pp1_dist_optimizer) is matched to 4 KiB."""
    scenario, result = ci(EP8)
    last = result.stages[-1]
    buffer = last.term("buffers.global_memory_buffer")
    # every token of the etp·ep = 8 ranks: 4096 x 8 tokens x d 512 x 2 B
    assert buffer.bytes == 4096 * 8 * 512 * 2
    state = last.term("buffers.moe_dispatcher_state")
    # local map 32768 x 1 local expert x 1 B + fp32 weights and int64 map of 8192 routed tokens
    assert state.inputs["bytes_per_layer"] == 32768 + 8192 * 4 + 8192 * 8
    assert state.bytes == 12 * (32768 + 8192 * 12)
    measured = record(EP8)["allocated_after_step_bytes"]
    persistent = sum(t.bytes for t in next(p for p in last.phases if p.name == "optimizer").terms
                     if t.component != "runtime")
    assert abs(persistent - measured) / measured < 0.005


def test_unfused_gelu_experts_keep_the_activation_output_not_the_weighted_output():
    """GPT-3 MoE (plain GeLU, --no-bias-gelu-fusion): the experts multiply GeLU's output by the
    routing weights, and that multiply keeps it; unpermute saves nothing of the output."""
    _, result = ci(EP8)
    items = saved(result.stages[-1])
    assert items["experts activation output, kept by the routing-weight multiply (top-2)"] \
        == 2 * 1024 * 2            # bf16 x ffn 1024 x top-2 per token
    assert items["experts fc1 output (top-2)"] == 2 * 1024 * 2
    assert items["routing weights of the routed tokens (top-2)"] == 4 * 2
    assert not any("before weighting" in name for name in items)


def test_expert_tensor_parallelism_gathers_tokens_and_splits_the_width():
    """tp 2 (SP), ep 4, etp 1 (a2a_ovlp): a rank's experts get its 2048 tokens x top-2 at the
    full width: 1/tp of the intermediates per token. tp 2 = etp 2, ep 2 (8experts2parallel,
    default etp = tp): the etp group's tokens are gathered, each half the width."""
    _, result = ci("moe__gpt3_mcore_te_tp2_pp1_te_a2a_ovlp_8experts_etp1_ep4")
    items = saved(result.stages[-1])
    assert items["routed tokens: top-2 copies of the input"] == 2 * 512 * 2 * 1 / 2
    assert items["experts fc1 output (top-2)"] == 2 * 2048 * 2 / 2    # ffn 4d = 2048
    _, result = ci("moe__gpt3_mcore_te_tp2_pp1_frozen_resume_torch_dist_te_8experts2parallel_"
                   "dist_optimizer")
    items = saved(result.stages[-1])
    assert items["routed tokens: top-1 copies of the input"] == 2 * 512 * 1 * 2 / 2
    assert items["experts fc1 output (top-1)"] == 2 * 2048 * 1 / 2


def test_fused_swiglu_and_moe_act_recompute():
    """The fused weighted SwiGLU keeps only fc1's output; --no-bias-swiglu-fusion keeps the
    gate's activation and the GLU product too; `moe_act` recomputes them and fc2's input."""
    sh = Shapes(d=1024, dq=1024, dk=1024, dv=1024, heads=8, do=1024, ffn=4096, gated=True,
                layernorm=False, moe_ffn=1024, top_k=4, experts=32)
    fused = MoeDispatch("alltoall", True, 4, True)
    names = {i.name for i in fused_layer_items(sh, 2, True, 2, True, False, False, False,
                                               etp=1, moe_layer=True, moe_dispatch=fused)}
    assert not any("kept by the routing-weight multiply" in n for n in names)
    unfused = MoeDispatch("alltoall", False, 4, True)
    items = {i.name: i.per_token for i in fused_layer_items(
        sh, 2, True, 2, True, False, False, False, etp=1, moe_layer=True, moe_dispatch=unfused)}
    assert items["experts gate activation and GLU product, kept by the routing-weight "
                 "multiply (top-4)"] == 2 * 2 * 1024 * 4 / 2
    names = {i.name for i in fused_layer_items(
        sh, 2, True, 2, True, False, False, False, etp=1, moe_layer=True, moe_dispatch=unfused,
        modules=frozenset({"moe_act"}))}
    assert "experts fc1 output (top-4)" in names
    assert not any(n.startswith(("experts fc2 input", "experts gate activation")) for n in names)


def test_sequence_parallel_output_layer_gathers_into_the_global_buffer():
    """tp 2 with sequence parallelism: the output layer (tensor_parallel.ColumnParallelLinear)
    all-gathers its B x T/cp x d input into the global buffer on the last stage only."""
    scenario, result = ci("gpt__gpt3_mcore_te_tp2_pp2_cp2")
    assert scenario.parallelism.sp
    last, first = result.stages[-1], result.stages[0]
    tokens = scenario.training.micro_batch * scenario.training.seq_len // 2
    assert last.term("buffers.global_memory_buffer").inputs == {
        "sequence-parallel input all-gather": tokens * 512 * 2}   # d 512, bf16
    assert first.term("buffers.global_memory_buffer") is None


def test_bert_heads_are_counted_on_their_stages():
    """examples/bert/pretrain_bert.py (Megatron CI bert_mcore_tp4_pp1: d 1024, 24 layers, tp 4,
    vocab 30,522 padded to 30,720): the masked-LM head's dense and LayerNorm, the pooler and the
    binary head are held whole by every tensor-parallel rank, the output bias is split, and the
    head keeps three d-wide tensors per token (bert_model.py, bert_lm_head.py, pooler.py)."""
    path = os.path.join(CI, "configs", "bert__bert_mcore_tp4_pp1.yaml")
    partial = M.load_path(path, entry="examples/bert/pretrain_bert.py")
    scenario, _ = build([partial, overrides_partial(["world_size=8", "gpu=H100-80GB"])])
    assert scenario.model.config["bert_heads"] == "lm+binary"
    result = estimate(scenario)
    counts = result.context.counts
    d = 1024
    assert counts.head_whole == (d * d + d + 2 * d) + (d * d + d) + (2 * d + 2)
    assert counts.head_split == 30720 and counts.tokentype == 2 * d
    last = result.stages[-1]
    assert last.term("activations.bert_lm_head").bytes == (3 * 2 * d + 8) * 4 * 512
    measured = record("bert__bert_mcore_tp4_pp1")["allocated_after_step_bytes"]
    assert abs(persistent(last) - measured) / measured < 0.025


def persistent(stage) -> int:
    optimizer = next(p for p in stage.phases if p.name == "optimizer")
    return sum(t.bytes for t in optimizer.terms if t.component != "runtime")
