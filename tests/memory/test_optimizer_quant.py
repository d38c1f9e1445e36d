"""8-bit / 4-bit / paged optimizer states (memory/optimizer_quant.py), hand-computed.

Byte counts follow bitsandbytes `Optimizer2State.init_state` (uint8 state + fp32 absmax per 256
elements) and torchao `AdamW8bit` (block 256) / `AdamW4bit` (block 128, two codes per byte).
"""
from __future__ import annotations

import os

import pytest

from memlint.memory import optimizer_quant as oq
from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLAMA8B = os.path.join(ROOT, "fixtures", "hf", "Meta-Llama-3.1-8B.json")


def run(sets):
    scenario, diagnostics = build([overrides_partial(sets, model=LLAMA8B)])
    assert not [d for d in diagnostics if d.severity.label == "error"]
    return estimate(scenario)


def test_moment_bytes_hand_computed():
    # int8: 1000 codes + 4 B × ceil(1000/256)=4 scales, two moments
    assert oq.moment_bytes(1000, 2, 8, 256) == 2 * (1000 + 16)
    # int4: ceil(1000/2)=500 packed codes + 4 B × ceil(1000/128)=8 scales, two moments
    assert oq.moment_bytes(1000, 2, 4, 128) == 2 * (500 + 32)
    # plain fp32: no scales
    assert oq.moment_bytes(1000, 2, 32, 0) == 8000
    assert oq.bytes_per_element(8, 256) == 1 + 4 / 256


def moments(est):
    return sum(t.bytes for t in est.stages[0].terms if t.name.startswith("optimizer.moments"))


def test_int8_and_int4_states_on_a_real_model():
    base = ["framework=hf", "precision=pure-bf16", "seq_len=512", "optimizer=adamw"]
    n = run(base).params["trainable"]
    int8 = run(base + ["optimizer_state_dtype=int8"])
    int4 = run(base + ["optimizer_state_dtype=int4"])
    assert moments(int8) == 2 * (n + 4 * -(-n // 256))
    assert moments(int4) == 2 * (-(-n // 2) + 4 * -(-n // 128))
    term = next(t for t in int8.stages[0].terms if t.name == "optimizer.moments")
    assert "1 B + 4 B / block 256" in term.formula and "bitsandbytes" in term.source
    # a block size of the user's own
    custom = run(base + ["optimizer_state_dtype=int8", "optimizer_state_block=2048"])
    assert moments(custom) == 2 * (n + 4 * -(-n // 2048))
    # fused update kernels: no foreach temporaries under quantized states
    assert not any(t.name == "optimizer.step_temporaries"
                   for p in int8.stages[0].phases for t in p.terms)


def test_paged_states_are_host_memory():
    base = ["framework=hf", "precision=pure-bf16", "seq_len=512", "optimizer_state_dtype=int8"]
    plain, paged = run(base), run(base + ["optimizer_paged=true"])
    host = [t for t in paged.stages[0].host_terms if t.name == "host.optimizer_paged"]
    assert host and host[0].bytes == moments(plain)
    assert moments(paged) == 0
    assert paged.peak_bytes < plain.peak_bytes


@pytest.mark.parametrize("value,expected", [("8bit", "int8"), ("4bit", "int4"), ("uint8", "int8"),
                                            ("bf16", "bf16")])
def test_state_dtype_aliases(value, expected):
    scenario, _ = build([overrides_partial([f"optimizer_state_dtype={value}"])])
    assert scenario.training.optimizer_state_dtype == expected


def test_param_dtype_refuses_int8():
    _, diagnostics = build([overrides_partial(["param_dtype=int8"])])
    assert any(d.severity.label == "error" for d in diagnostics)
