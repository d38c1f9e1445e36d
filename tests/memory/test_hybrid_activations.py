"""Saved activations of hybrid layers (memory/layout_activations.py, mixer_activations.py)
against what autograd keeps in transformers' torch paths, and the Megatron Mamba layer's items.

MEASURED: bytes per token each decoder layer of the small models in fixtures/hf/tiny saves in a
CPU training forward (batch 2, 256 tokens, sdpa attention, no mamba_ssm / causal-conv1d / fla:
transformers' torch fallbacks), recorded with bench/saved_truth.py (torch 2.13.0+cpu,
transformers 5.24.0). memlint's items for the same layers are within 4% of each (the torch
fallbacks' many small fp32 intermediates are grouped, not listed one by one).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlint.memory import activations as act
from memlint.memory import activations_eager as eager
from memlint.memory.layout_activations import layer_items
from memlint.memory.mixer_activations import megatron_mamba_items
from memlint.memory.mixers import Mamba2
from memlint.memory.params import architecture

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "hf" / "tiny"

MEASURED = {
    ("falcon_h1", 4): [40268.19, 40268.19],
    ("granitemoehybrid", 4): [64888.32, 21608.03],
    ("jamba", 4): [133996.0, 17432.0, 133996.0, 29808.03],
    ("lfm2", 4): [20496.0, 20784.0],
    ("nemotron_h", 4): [50219.29, 7172.0, 6164.0, 7172.0],
    ("qwen3_next", 4): [46028.31, 24693.0, 46028.31, 24693.0],
    ("falcon_h1", 2): [28858.43, 28858.43],
    ("granitemoehybrid", 2): [54102.82, 11876.03],
    ("jamba", 2): [136708.0, 9752.0, 136708.0, 15980.03],
    ("lfm2", 2): [11276.0, 12208.0],
    ("nemotron_h", 2): [46606.29, 4614.0, 4118.0, 4614.0],
    ("qwen3_next", 2): [33464.31, 15445.0, 33464.31, 15445.0],
}


def predicted(name: str, c: int, seq: int = 256) -> list:
    config = json.loads((TINY / f"{name}.json").read_text(encoding="utf-8"))
    arch = architecture(config)

    def base(moe):
        return eager.hf_layer_items(act.shapes(arch, moe), eager.HFRun(
            c=c, autocast=False, attention="sdpa", device="cpu"))
    return [sum(i.bytes_per_token(seq) for i in layer_items(
        layer, base, True, d=arch.hidden, c=c, tp=1, sp=False, hidden_dropout=False,
        fused_kernels=False, model_type=arch.model_type)) for layer in arch.layout.layers]


@pytest.mark.parametrize("name, c", sorted(MEASURED), ids=lambda x: str(x))
def test_torch_path_items_match_autograd(name, c):
    for got, want in zip(predicted(name, c), MEASURED[(name, c)], strict=True):
        assert abs(got - want) <= 0.04 * want, (got, want)


def test_fused_kernels_keep_less_than_the_torch_path():
    config = json.loads((TINY / "nemotron_h.json").read_text(encoding="utf-8"))
    arch = architecture(config)
    mamba = arch.layout.layers[0]

    def base(moe):
        return eager.hf_layer_items(act.shapes(arch, moe), eager.HFRun(
            c=2, autocast=False, attention="sdpa", device="cuda"))
    fused = sum(i.per_token for i in layer_items(mamba, base, True, d=256, c=2, tp=1, sp=False,
                                                 hidden_dropout=False, fused_kernels=True,
                                                 model_type="nemotron_h"))
    torch_path = sum(i.per_token for i in layer_items(mamba, base, True, d=256, c=2, tp=1,
                                                      sp=False, hidden_dropout=False,
                                                      fused_kernels=False,
                                                      model_type="nemotron_h"))
    # mamba_split_conv1d_scan_combined keeps zxBCdt (2 x 1160), out_x (2 x 512) and rstd
    # (4 x 2 groups) beside the layer norm's fp32 input + rstd, fp32 normalized and output
    assert fused == 1028 + 1024 + 512 + 2 * 1160 + 2 * 512 + 8
    assert torch_path > 5 * fused


def test_megatron_mamba_layer_items():
    # The gpu-megatron-ci hybrid model's Mamba layer (d 1024: d_inner 2048, 32 heads of 64,
    # 8 groups, state 128) at tp 1, bf16, hidden dropout: in_proj's fused LayerNorm input and
    # output, zxBCdt (6,176 wide), out_x, the gated norm's input and rstd, out_proj's input,
    # the dropout mask (megatron/core/ssm/mamba_mixer.py, mamba_ssm ssd_combined.py).
    m = Mamba2(d_inner=2048, heads=32, head_dim=64, groups=8, state=128, conv_kernel=4,
               chunk=128)
    items = megatron_mamba_items(m, 1024, 2, 1, False, True)
    assert sum(i.per_token for i in items) == 2048 + 2048 + 2 * 6176 + 4096 + 4096 + 32 + 4096 \
        + 1024
    tp2 = megatron_mamba_items(m, 1024, 2, 2, True, True)
    assert sum(i.per_token for i in tp2) * 2 == sum(i.per_token for i in items)
