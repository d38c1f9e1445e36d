"""A GPTQ 4-bit base (memory/lora.py: auto-gptq QuantLinear's buffers and its torch dequantize
path) and a loss in the logits' own dtype (memory/logits.py, `transformers.loss_upcast` false:
Qwen v1's remote modeling code run by a DeepSpeed engine): hand-computed terms on the Qwen-7B
architecture of the published set (bench/data/calibration/gpu-published/configs/models/qwen-7b,
QwenLM/Qwen README 'Profiling of Memory and Speed')."""
from __future__ import annotations

import os

from memlint.memory import lora
from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN7B = os.path.join(ROOT, "bench", "data", "calibration", "gpu-published", "configs", "models",
                      "qwen-7b", "config.json")
V, D, FFN, L = 151936, 4096, 11008, 32
QLORA = ["world_size=1", "gpu=A100-80GB", "micro_batch=1", "train_base=false", "lora_rank=64",
         "lora_targets=all-linear", "attention=flash", "framework=deepspeed", "zero=2",
         "precision=fp16", "base_quant=gptq"]


def _estimate(sets):
    scenario, diagnostics = build([overrides_partial(sets, model=QWEN7B)])
    assert not [d for d in diagnostics if d.severity.label == "error"]
    return estimate(scenario)


def _phase(result, name):
    return next(p for p in result.stages[0].phases if p.name == name)


def _term(phase, name):
    return next((t for t in phase.terms if t.name == name), None)


def test_gptq_bytes_per_weight():
    # qweight 4 bits + per 128 input rows an fp16 scale and a 4-bit zero per output column
    assert lora.frozen_bytes_per_param("gptq", 2, False) == 0.5 + (2 + 0.5) / 128
    assert "qlinear_cuda_old.py" in lora.SRC_GPTQ


def test_gptq_dequantize_transient_and_saved_weights_under_recompute():
    result = _estimate(QLORA + ["seq_len=2048", "recompute=full"])
    layer = D * D * 4 + 3 * D * FFN            # q, k, v, o + gate, up, down (qwen2 layout)
    recompute = _phase(result, "backward_recompute")
    unpack = _term(recompute, "buffers.dequantized_weight")
    assert unpack.bytes == 5 * D * FFN         # int32 + int8 of the largest linear
    saved = _term(recompute, "activations.gptq_dequantized_weights")
    assert saved.bytes // 2 - layer in range(0, 3 * D + 1)   # + the q/k/v biases
    # the checkpointed forward saves none: no saved weights at the end of the forward
    assert _term(_phase(result, "forward_end"), "activations.gptq_dequantized_weights") is None


def test_gptq_without_recompute_saves_every_layers_weights():
    result = _estimate(QLORA + ["seq_len=256", "recompute=none"])
    saved = _term(_phase(result, "backward_start"), "activations.gptq_dequantized_weights")
    assert saved.inputs["layers"] == L


def test_a_loss_in_the_logits_dtype_outside_autocast():
    tokens = 8192
    upcast = _estimate(QLORA + [f"seq_len={tokens}", "recompute=full"])
    plain = _estimate(QLORA + [f"seq_len={tokens}", "recompute=full",
                               "transformers.loss_upcast=false"])
    assert _term(_phase(upcast, "backward_start"), "logits").bytes == 12 * V * tokens
    fp16 = _term(_phase(plain, "backward_start"), "logits")
    assert fp16.bytes == 3 * 2 * V * tokens and "modeling_qwen.py" in fp16.source
    assert _term(_phase(plain, "forward_end"), "logits").bytes == 2 * 2 * V * tokens
    # the slice backward's full-size zeros fit no freed (N-1) x V block: c x V x N reserved
    idle = _term(_phase(plain, "backward_start"), "runtime.allocator.freed_logits")
    assert idle.bytes == 2 * V * tokens


def test_under_autocast_cross_entropy_runs_in_fp32_either_way():
    sets = ["world_size=1", "gpu=A100-80GB", "micro_batch=1", "seq_len=1024", "framework=hf",
            "precision=bf16", "recompute=full"]
    a = _term(_phase(_estimate(sets), "backward_start"), "logits")
    b = _term(_phase(_estimate(sets + ["transformers.loss_upcast=false"]), "backward_start"),
              "logits")
    assert a.bytes == b.bytes == 12 * V * 1024
