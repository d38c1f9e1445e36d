"""Megatron-style (fused) terms: FP8 GEMM inputs and the vocab-parallel cross entropy."""
from memlint.memory import activations as act
from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial


def _shapes():
    return act.Shapes(d=4096, dq=4096, dk=1024, dv=1024, heads=32, do=4096, ffn=14336, gated=True,
                      layernorm=False)


def test_fp8_keeps_one_byte_gemm_inputs():
    """Transformer Engine FP8: qkv/o-proj/fc1/fc2 inputs are kept as FP8 casts (1 byte)."""
    sh = _shapes()
    bf16 = {i.name: i.per_token for i in act.fused_layer_items(sh, 2, True, 1, False, False,
                                                               False, False)}
    fp8 = {i.name: i.per_token for i in act.fused_layer_items(sh, 2, True, 1, False, False,
                                                              False, False, gemm=1)}
    assert fp8["qkv input (norm1 output)"] == 4096 and bf16["qkv input (norm1 output)"] == 8192
    assert fp8["fc2 input (activation output)"] == 14336
    assert fp8["o-proj input (FP8 cast)"] == 4096 and "o-proj input (FP8 cast)" not in bf16
    assert fp8["norm1 input"] == bf16["norm1 input"] == 8192  # the norm's input stays bf16
    # Llama-3 8B: 139,392 B/token/layer in bf16, 120,960 with FP8 GEMM inputs (both with the
    # 4 B log-sum-exp per head)
    assert sum(bf16.values()) == 139392
    assert sum(fp8.values()) == 120960


def _megatron(phase_sets=()):
    scenario, _ = build([overrides_partial(["framework=megatron", "seq_len=4096", "tp=2",
                                            *phase_sets], model="llama3-8b")])
    return estimate(scenario)


def test_megatron_logits_keep_fp32_softmax_and_cast_gradient():
    """(c + 4) B per logit at forward end and at the start of backward (gradient in place)."""
    stage = _megatron().stages[0]
    phases = {p.name: p for p in stage.phases}
    for name in ("forward_end", "backward_start"):
        logits = [t for t in phases[name].terms if t.name == "logits"][0]
        assert logits.bytes == (2 + 4) * (128256 // 2) * 4096


def test_torchtitan_op_level_selective_ac_keeps_every_other_matmul():
    """FSDP2 + selective (op) AC: layer input, wq/wv/w1/w2 outputs, SDPA output + lse."""
    scenario, _ = build([overrides_partial(["framework=fsdp2", "fsdp=full", "world_size=8",
                                            "seq_len=8192", "recompute=selective"],
                                           model="llama3-8b")])
    stage = estimate(scenario).stages[0]
    term = [t for p in stage.phases for t in p.terms if t.name == "activations"][0]
    per_token = 2 * (4096 + 4096 + 1024 + 14336 + 4096 + 4096) + 4 * 32
    assert term.inputs["bytes_per_token_per_layer"] == per_token
    assert term.bytes == per_token * 8192 * 32


def test_expert_mlps_split_over_expert_tensor_parallel_group():
    """Megatron splits the experts' MLPs over etp (default tp), not over tp."""
    sh = act.Shapes(d=4096, dq=4096, dk=1024, dv=1024, heads=32, do=4096, ffn=14336, gated=True,
                    layernorm=False, moe_ffn=14336, top_k=2, experts=8)
    items = {i.name: i.per_token for i in act.fused_layer_items(sh, 2, True, 4, True, False,
                                                                False, False, etp=1)}
    assert items["experts fc1 output (top-2)"] == 2 * 2 * 14336 * 2   # not divided by tp=4
    assert items["q, k, v"] == 2 * (4096 + 1024 + 1024) / 4
