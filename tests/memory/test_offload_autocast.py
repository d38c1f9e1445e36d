"""Offload (memory/offload.py) and autocast weight copies (extras.autocast_weight_terms).

Sources: FSDP2 CPUOffloadPolicy (torch/distributed/fsdp/_fully_shard: sharded params pinned on
the CPU, sharded grads copied to the CPU after the reduce-scatter); torchtune OffloadActivations;
aten autocast_mode.cpp `cached_cast` (only fp32 leaves that require grad are cached).
"""
from __future__ import annotations

import os

from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "fixtures", "hf")
LLAMA8B = os.path.join(FIX, "Meta-Llama-3.1-8B.json")
QWEN8B = os.path.join(FIX, "Qwen3-8B.json")


def run(sets, model=LLAMA8B):
    scenario, diagnostics = build([overrides_partial(sets, model=model)])
    assert not [d for d in diagnostics if d.severity.label == "error"], diagnostics
    return estimate(scenario)


def term(est, name, phase=None, stage=0):
    st = est.stages[stage]
    terms = st.terms if phase is None else next(p.terms for p in st.phases if p.name == phase)
    return next((t for t in terms if t.name == name), None)


# -- autocast copies --------------------------------------------------------------------------

HF_AMP = ["framework=hf", "precision=bf16", "seq_len=1024"]


def test_full_finetune_fp32_weights_get_cached_copies():
    est = run(HF_AMP)
    copies = term(est, "activations.autocast_weight_copies", "forward_end")
    counts = copies.inputs
    assert copies.bytes == 2 * (counts["layer_linear_params"] + counts["head_params"])
    assert counts["layer_linear_params"] > 6_000_000_000


def test_bf16_weights_get_no_copies():
    # axolotl loads bf16 weights: autocast has nothing to cast
    est = run(HF_AMP + ["param_dtype=bf16"])
    assert term(est, "activations.autocast_weight_copies", "forward_end") is None


def test_qlora_base_gets_no_copies_only_adapters():
    # a 4-bit base: bitsandbytes saves the quantized weight; only the fp32 adapters are cached
    est = run(HF_AMP + ["lora_rank=16", "lora_targets=all-linear", "base_quant=nf4"])
    copies = term(est, "activations.autocast_weight_copies", "forward_end")
    assert copies.inputs["layer_linear_params"] == 0 and copies.inputs["head_params"] == 0
    assert copies.bytes == 2 * copies.inputs["lora_params"]
    assert copies.bytes < 200 * 2**20  # adapters only (was 2 B × every base weight: ~15 GiB)


def test_lora_fp32_frozen_base_kept_by_mm_except_first_qkv():
    est = run(HF_AMP + ["lora_rank=8"])
    copies = term(est, "activations.autocast_weight_copies", "forward_end")
    # Llama-3.1-8B: q 4096², k and v 4096·1024 each
    assert copies.inputs["first_layer_qkv"] == 4096 * 4096 + 2 * 4096 * 1024
    i = copies.inputs
    assert copies.bytes == 2 * (i["layer_linear_params"] - i["first_layer_qkv"] + i["head_params"]
                                + i["lora_params"])


# -- FSDP2 CPUOffloadPolicy -------------------------------------------------------------------

FSDP = ["framework=fsdp2", "fsdp=full", "world_size=8", "dp_shard=8", "seq_len=2048"]


def test_fsdp_cpu_offload_moves_sharded_grads_to_host():
    plain = run(FSDP)
    off = run(FSDP + ["offload_params=cpu", "offload_optimizer=cpu"])
    assert term(plain, "gradients", "optimizer") is not None
    for phase in ("forward_end", "backward_start", "optimizer"):
        assert term(off, "gradients", phase) is None
    host = {t.name: t for t in off.stages[0].host_terms}
    grads = term(plain, "gradients", "optimizer")
    assert host["host.gradients_cpu"].bytes == grads.bytes
    # fp32 params are the master: host optimizer = 2 fp32 moments, no extra master copy
    shard = -(-plain.params["total"] // 8)
    assert host["host.optimizer_cpu"].bytes == shard * 8
    assert host["host.params_cpu"].bytes == shard * 4
    assert off.peak_bytes < plain.peak_bytes


def test_deepspeed_offload_keeps_the_gradient_partitions_on_the_host():
    # DeepSpeed v0.14.2 stage3.py: grad_partitions_flat_buffer is allocated on self.device,
    # the CPU under offload_optimizer; without the optimizer offloaded it is on the GPU
    ds = ["framework=deepspeed", "zero=3", "world_size=8", "seq_len=2048", "offload_params=cpu"]
    assert term(run(ds + ["offload_optimizer=cpu"]), "gradients", "optimizer") is None
    assert term(run(ds), "gradients", "optimizer") is not None


# -- activation offload -----------------------------------------------------------------------

def test_activation_offload_keeps_one_layer_on_gpu():
    base = ["framework=hf", "precision=pure-bf16", "seq_len=4096"]
    plain, off = run(base), run(base + ["offload_activations=true"])
    full = term(plain, "activations", "forward_end")
    kept = term(off, "activations", "forward_end")
    layers = full.inputs["layers"]
    assert kept.bytes == round(full.bytes / layers)
    host = next(t for t in off.stages[0].host_terms
                if t.name == "host.activations_offloaded")
    assert host.bytes == full.bytes - kept.bytes
    assert off.peak_bytes < plain.peak_bytes


def test_activation_offload_of_some_layers():
    base = ["framework=megatron", "precision=bf16", "seq_len=4096", "tp=1"]
    plain = run(base)
    off = run(base + ["offload_activations=true", "offload_activations_layers=8"])
    full = term(plain, "activations", "forward_end")
    kept = term(off, "activations", "forward_end")
    per_layer = full.bytes / (full.inputs["layers"] * full.inputs["inflight"])
    assert kept.bytes == round(per_layer * ((full.inputs["layers"] - 8) + 1))


def test_activation_offload_with_checkpoints():
    base = ["framework=hf", "precision=pure-bf16", "seq_len=4096", "recompute=full"]
    plain, off = run(base), run(base + ["offload_activations=true"])
    ck, kept = (term(e, "activations.checkpoints", "forward_end") for e in (plain, off))
    assert kept.bytes == round(ck.bytes / ck.inputs["layers"])
    # the recomputed layer stays on the GPU
    assert (term(off, "activations.recomputed_layer", "backward_recompute").bytes
            == term(plain, "activations.recomputed_layer", "backward_recompute").bytes)
