"""The caching allocator's modeled reserve (memory/allocator.py), the compiled and loss-parallel
losses (memory/logits.py), DeepSpeed's fp32 master over a bf16 module and PEFT's fp32 adapters:
hand-computed terms, and the real torchtitan configs of the published set
(fixtures/adapters/torchtitan/good/llama3_8b_9dec370.toml: benchmarks/llama3_h100_202412_torchtitan.md
Table 1, max reserved 82.4 GiB with FSDP over 8 H100s at local batch 2)."""
from __future__ import annotations

import os

from memlint.adapters import torchtitan
from memlint.memory import allocator
from memlint.memory.estimate import estimate
from memlint.memory.terms import Term, is_reserved_term
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TT = os.path.join(ROOT, "fixtures", "adapters", "torchtitan", "good")
LLAMA8B = os.path.join(ROOT, "fixtures", "hf", "Meta-Llama-3.1-8B.json")
GiB = 2**30
V, D, FFN, L = 128256, 4096, 14336, 32
P_ROOT = 2 * V * D + D            # tok_embeddings, output, final norm
P_UNIT = 218_112_000              # one Llama-3.1-8B TransformerBlock


def _scenario(sets, path=None, model=None):
    partials = []
    if path:
        partials.append(torchtitan.load(path, open(path, encoding="utf-8").read()))
    partials.append(overrides_partial(sets, model=model))
    scenario, diagnostics = build(partials)
    assert not [d for d in diagnostics if d.severity.label == "error"]
    return scenario


def _phase(result, name, stage=0):
    return next(p for p in result.stages[stage].phases if p.name == name)


def _term(phase, name):
    return next((t for t in phase.terms if t.name == name), None)


# -- hand-computed terms ---------------------------------------------------------------------

def test_freed_logits_block_is_the_compute_dtype_logits():
    term = allocator.freed_logits_block(2, V, 16384)
    assert term.bytes == 2 * V * 16384 and term.component == "runtime"
    assert is_reserved_term(term.name) and "CUDACachingAllocator" in term.source


def test_mlp_transients_and_stream_pools():
    assert allocator.mlp_transients(3, FFN, 2, 16384).bytes == 3 * 16384 * FFN * 2
    pool = allocator.all_gather_stream_pool(P_ROOT, P_UNIT, 2, 2)
    assert pool.bytes == (P_ROOT + P_UNIT) * 2 and "_fsdp_collectives.py" in pool.source
    # float8 all-gather: the unit's linear weights at 1 B, the root (embedding, output) at 2 B
    assert allocator.all_gather_stream_pool(P_ROOT, P_UNIT, 1, 2).bytes == P_ROOT * 2 + P_UNIT
    assert allocator.reduce_scatter_stream_pool(12345).bytes == 12345


def test_released_on_retry_caps_the_idle_blocks_at_the_gpu():
    live = Term("weights", "weights", 70, "w")
    idle = [Term("runtime.allocator.a", "runtime", 20, "a"),
            Term("runtime.allocator.b", "runtime", 10, "b")]
    outside = Term("runtime.cuda_context", "runtime", 5, "c")
    kept = allocator.released_on_retry([live, *idle, outside], 100)
    assert sum(t.bytes for t in kept) == 70 + 16 + 8 + 5   # 25 B of room, shared 20:10
    assert [t.bytes for t in kept if t.name.startswith("runtime.allocator.")] == [16, 8]
    assert "released on an out-of-memory retry" in kept[1].formula
    # with room to spare nothing changes
    assert allocator.released_on_retry([live, *idle, outside], 200) == [live, *idle, outside]


# -- the torchtitan 8B benchmark (real config) -----------------------------------------------

def _tt_8b(*extra):
    path = os.path.join(TT, "llama3_8b_9dec370.toml")
    return estimate(_scenario(["world_size=8", "micro_batch=2", "gpu_memory=95GiB", *extra],
                              path=path))


def test_torchtitan_8b_fsdp8_reserve_term_by_term():
    result = _tt_8b()
    stage = result.stages[0]
    assert stage.phase == "backward_start"
    tokens = 2 * 8192
    peak = _phase(result, "backward_start")
    assert _term(peak, "runtime.allocator.freed_logits").bytes == 2 * V * tokens
    # op-level SAC keeps w1's output: w3's output, silu(w1) and their product are freed
    assert _term(peak, "runtime.allocator.mlp_transients").bytes == 3 * tokens * FFN * 2
    assert _term(peak, "runtime.allocator.fsdp_all_gather_stream").bytes == (P_ROOT + P_UNIT) * 2
    # the fp32 sharded gradients, idle in the reduce-scatter stream's pool until the backward
    grads = _term(_phase(result, "optimizer"), "gradients").bytes
    assert grads == -(-8_030_261_248 // 8) * 4
    assert _term(peak, "runtime.allocator.fsdp_reduce_scatter_stream").bytes == grads
    assert _term(_phase(result, "optimizer"), "runtime.allocator.fsdp_reduce_scatter_stream") \
        is None   # live there, counted as gradients
    assert stage.reserved_bytes == stage.allocated_bytes + sum(
        t.bytes for t in stage.terms if t.name.startswith("runtime.allocator."))
    # measured: 82.4 GiB max reserved (Table 1 row 'FSDP'); within 6%
    assert abs(stage.reserved_bytes / GiB - 82.4) / 82.4 < 0.06


def test_torchtitan_8b_compiled_blocks_fuse_one_mlp_temporary():
    result = _tt_8b("compile=true")
    peak = _phase(result, "backward_start")
    # 9dec370 compiled the blocks only: the loss stays eager (12 B per logit)
    assert result.scenario.training.compile_loss is False
    assert _term(peak, "logits").bytes == 12 * V * 2 * 8192
    assert _term(peak, "runtime.allocator.mlp_transients").bytes == 2 * 2 * 8192 * FFN * 2


def test_torchtitan_h200_compiled_loss_and_float8_all_gather():
    """benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md: 47.96 GiB on 32 H200s."""
    path = os.path.join(TT, "llama3_8b_e7c0cae_float8_compile.toml")
    result = estimate(_scenario(["world_size=32", "gpu=H200"], path=path))
    peak = _phase(result, "backward_start")
    tokens = 2 * 8192
    logits = _term(peak, "logits")
    assert logits.bytes == 4 * V * tokens and "compiled loss" in logits.formula
    assert _term(peak, "runtime.allocator.freed_logits") is None  # the loss keeps the logits
    assert _term(peak, "runtime.allocator.fsdp_all_gather_stream").bytes == P_ROOT * 2 + P_UNIT
    assert any(a["key"] == "compile.loss_saved" for a in result.assumed)
    assert abs(result.stages[0].reserved_bytes / GiB - 47.96) / 47.96 < 0.06


def test_loss_parallel_under_tensor_parallelism():
    result = estimate(_scenario(["framework=fsdp2", "fsdp=full", "world_size=16", "tp=8",
                                 "seq_len=4096"], model=LLAMA8B))
    peak = _phase(result, "backward_start")
    vocab, tokens = V // 8, 4096
    assert _term(peak, "logits").bytes == 16 * vocab * tokens
    assert _term(peak, "runtime.allocator.freed_logits").bytes == (2 + 4) * vocab * tokens


def test_disable_loss_parallel_gathers_the_full_vocabulary_logits(tmp_path):
    """torchtitan's disable_loss_parallel ([parallelism] at e7c0cae, [training] at 9dec370): the
    output layer returns Replicate() logits of the whole vocabulary on every tp rank and the plain
    fp32 log-softmax loss runs on them."""
    tokens = 4096
    for section in ("parallelism", "training"):
        path = tmp_path / f"{section}.toml"
        path.write_text(f"[{section}]\ndisable_loss_parallel = true\n", encoding="utf-8")
        result = estimate(_scenario(["framework=fsdp2", "fsdp=full", "world_size=16", "tp=8",
                                     f"seq_len={tokens}", "micro_batch=1"], path=str(path),
                                    model=LLAMA8B))
        peak = _phase(result, "backward_start")
        logits = _term(peak, "logits")
        assert logits.bytes == 12 * V * tokens and "parallelize_llama.py" in logits.source
        assert "gathered over tp 8" in logits.formula
        assert _term(peak, "runtime.allocator.freed_logits").bytes == 2 * V * tokens
    # false (the default) keeps loss parallel
    path = tmp_path / "off.toml"
    path.write_text("[parallelism]\ndisable_loss_parallel = false\n", encoding="utf-8")
    result = estimate(_scenario(["framework=fsdp2", "fsdp=full", "world_size=16", "tp=8",
                                 f"seq_len={tokens}", "micro_batch=1"], path=str(path),
                                    model=LLAMA8B))
    assert _term(_phase(result, "backward_start"), "logits").bytes == 16 * (V // 8) * tokens


def test_no_reserve_on_the_cpu_and_none_modeled_for_megatron():
    cpu = estimate(_scenario(["framework=fsdp2", "fsdp=full", "world_size=8", "device=cpu"],
                             model=LLAMA8B))
    assert not [t for t in cpu.stages[0].terms if t.name.startswith("runtime.allocator")]
    megatron = estimate(_scenario(["framework=megatron", "world_size=8", "recompute=full"],
                                  model=LLAMA8B))
    stage = megatron.stages[0]
    assert stage.reserved_bytes == stage.allocated_bytes


def test_fsdp1_all_gathers_into_the_live_flat_parameter():
    hf = estimate(_scenario(["framework=hf", "fsdp=full", "world_size=8", "recompute=full"],
                            model=LLAMA8B))
    peak = _phase(hf, "backward_start")
    assert _term(peak, "runtime.allocator.fsdp_all_gather_stream") is None
    assert _term(peak, "runtime.allocator.fsdp_reduce_scatter_stream").bytes > 0


# -- states ----------------------------------------------------------------------------------

def test_deepspeed_keeps_fp32_master_over_a_bf16_module():
    """ZeRO-3 over a bf16 module (the HF Trainer's torch_dtype bfloat16): master partitions and
    moments in fp32 (deepspeed/runtime/zero/stage3.py _create_fp32_partitions @edaa722)."""
    result = estimate(_scenario(["framework=deepspeed", "zero=3", "world_size=8",
                                 "precision=pure-bf16"], model=LLAMA8B))
    terms = {t.name: t.bytes for t in result.stages[0].phases[-1].terms}
    shard = -(-8_030_261_248 // 8)
    assert terms["weights"] == 2 * shard
    assert terms["optimizer.master"] == 4 * shard
    assert terms["optimizer.moments"] == 8 * shard


def test_peft_adapters_are_fp32_under_autocast_over_a_bf16_base():
    sets = ["framework=hf", "world_size=1", "lora_rank=16", "train_base=false",
            "precision=bf16", "param_dtype=bf16"]
    result = estimate(_scenario(sets, model=LLAMA8B))
    lora = next(t for t in result.stages[0].terms if t.name == "weights.lora")
    assert lora.inputs["bytes_per_param"] == 4 and "autocast_adapter_dtype" in lora.source


NF4 = 0.5 + 1 / 64 + 4 / (64 * 256)   # nf4 with its absmax scales, per parameter


def _qlora_fsdp_phase(recompute: str, phase: str) -> dict:
    """QLoRA (nf4 base, r 16) on Llama-3.1-8B under FSDP2 over 8 ranks: one phase's terms."""
    sets = ["framework=fsdp2", "fsdp=full", "world_size=8", "lora_rank=16", "train_base=false",
            "base_quant=nf4", f"recompute={recompute}"]
    return {t.name: t for t in _phase(estimate(_scenario(sets, model=LLAMA8B)), phase).terms}


def test_qlora_fsdp_gathers_the_stored_four_bit_base():
    """QLoRA + FSDP (bnb_4bit_quant_storage): a layer's all-gather moves the packed nf4 base
    (0.5 B + its absmax scales), not 2 B per parameter; the root (embedding, LM head) is not
    quantized and is gathered in bf16."""
    terms = _qlora_fsdp_phase("full", "forward_end")
    unit = terms["buffers.fsdp.allgather_units"]
    assert unit.inputs["b_compute"] == NF4
    assert unit.bytes == int(unit.inputs["P_unit"] * NF4)
    assert terms["buffers.fsdp.root_unsharded"].inputs["b_compute"] == 2


def test_qlora_fsdp2_mid_backward_prefetches_four_bit_and_reduces_only_the_adapters():
    """A unit's backward under QLoRA + FSDP2: the unit prefetched before it is gathered in the
    stored dtype like the forward's, and only the adapters get gradients (FSDP2's
    foreach_reduce takes the FSDPParams whose gradient is not None)."""
    terms = _qlora_fsdp_phase("none", "backward_layer")
    prefetch = terms["buffers.fsdp.backward_prefetch"]
    assert prefetch.inputs["b_gather"] == NF4
    assert prefetch.bytes == int(prefetch.inputs["P_unit"] * NF4)
    # Llama-3.1-8B, r 16 on q, k, v, o (memlint's default targets): 16 x (in + out) each
    adapters = 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2)
    assert terms["buffers.fsdp.unsharded_grads"].bytes == 2 * adapters
    assert terms["buffers.fsdp.reduce_scatter_input"].bytes == 4 * adapters


# -- where the allocation order is not modeled, the estimate says so ---------------------------

MEGATRON_CI = os.path.join(ROOT, "bench", "data", "calibration", "gpu-megatron-ci")


def _allocator_entries(result):
    return [a for a in result.assumed if a["key"] == "runtime.allocator"]


def test_deepspeed_and_megatron_runs_say_their_idle_blocks_are_not_modeled():
    base = ["world_size=8", "gpu=A100-80GB", "precision=bf16", "micro_batch=1", "seq_len=4096"]
    megatron = estimate(_scenario(base + ["framework=megatron", "tp=2"], model=LLAMA8B))
    stage = megatron.stages[0]
    assert stage.reserved_bytes == stage.allocated_bytes   # nothing idle counted...
    (entry,) = _allocator_entries(megatron)                 # ... and the estimate says so
    assert entry["value"] == allocator.ORDER_NOT_MODELED and "allocator.py" in entry["source"]
    # a DeepSpeed engine runs transformers' own loss: only its idle logits block is counted
    deepspeed = estimate(_scenario(base + ["framework=deepspeed", "zero=2"], model=LLAMA8B))
    stage = deepspeed.stages[0]
    idle = [t for t in stage.terms if t.name.startswith("runtime.allocator.")]
    assert [t.name for t in idle] == ["runtime.allocator.freed_logits"]
    assert idle[0].bytes == 2 * V * 4096
    assert stage.reserved_bytes == stage.allocated_bytes + idle[0].bytes
    (entry,) = _allocator_entries(deepspeed)
    assert entry["value"] == allocator.ORDER_NOT_MODELED_BUT_LOSS
    # transformers / torchtitan runs model their idle blocks: no such entry; nor on the CPU
    for sets in (["framework=hf"], ["framework=fsdp2", "fsdp=full"], ["framework=deepspeed",
                                                                      "device=cpu"]):
        assert not _allocator_entries(estimate(_scenario(base + sets, model=LLAMA8B)))


def test_explain_and_headroom_name_the_unmodeled_fragmentation():
    from memlint.api import estimate_paths
    from memlint.cli import build_parser, options_from
    from memlint.report.text_format import explain_lines

    args = ["estimate", "--model", LLAMA8B, "--world-size", "8", "--gpu", "A100-80GB",
            "--set", "framework=deepspeed", "--set", "zero=2", "--set", "precision=bf16",
            "--set", "micro_batch=1", "--set", "seq_len=6144", "--set", "recompute=none",
            "--allow-outside-root"]
    parsed = build_parser().parse_args(args)
    result = estimate_paths(list(parsed.paths), options_from(parsed))
    headroom = [d for d in result.diagnostics if d.code == "ML102"]
    assert headroom and "fragmentation is not modeled" in headroom[0].message
    report = type("R", (), {"units": "GiB", "stage": None})()
    text = "\n".join(span for line in explain_lines(result.estimates[0], report)
                     for span, _ in line)
    assert "runtime.allocator not modeled but for the loss" in text
