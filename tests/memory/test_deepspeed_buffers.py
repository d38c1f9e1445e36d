import math
"""DeepSpeed buffer terms, against hand-computed values."""
from memlint.facts import deepspeed as facts
from memlint.memory import deepspeed_buffers as B
from memlint.memory.terms import Term


def test_reduce_bucket_stage2_overlap_doubles():
    t = B.reduce_bucket(2, 500_000_000, "bf16", contiguous_gradients=True, overlap_comm=True)
    assert t.bytes == 2 * 500_000_000 * 2 and t.component == "buffers"
    assert t.name == "buffers.zero_reduce_bucket"
    assert B.reduce_bucket(2, 500_000_000, "bf16", overlap_comm=False).bytes == 1_000_000_000
    assert B.reduce_bucket(2, 10, "bf16", contiguous_gradients=False).bytes == 0
    assert B.reduce_bucket(0, 10, "bf16").bytes == 0


def test_reduce_bucket_stage3_single_buffer():
    assert B.reduce_bucket(3, 12_845_056, "fp32", overlap_comm=True).bytes == 12_845_056 * 4


def test_stage3_live_parameters():
    assert B.stage3_live_parameters(10**9, "bf16", total_params=7 * 10**8).bytes == 14 * 10**8
    assert B.stage3_live_parameters(0, "bf16", largest_module_params=1000).bytes == 2000


def test_persistent_parameters():
    # 4 norms of 4096 (persist) and one 4096x4096 matrix (partitioned), dp 8, bf16.
    t = B.stage3_persistent_parameters([4096] * 4 + [4096 * 4096], dp=8, threshold=100_000)
    assert t.inputs["persistent_numel"] == 16384
    assert t.bytes == 16384 * 2 - 16384 * 2 // 8
    capped = B.stage3_persistent_parameters([4096] * 4, dp=8, model_threshold=8192)
    assert capped.inputs["persistent_numel"] == 8192


def test_defaults_are_deepspeeds():
    """deepspeed/runtime/zero/config.py at edaa722: reduce_bucket_size 5e8, max live 1e9,
    persistence threshold 1e5; the functions default to them."""
    assert B.reduce_bucket(1).inputs["reduce_bucket_size"] == facts.REDUCE_BUCKET_SIZE == 5 * 10**8
    assert B.stage3_live_parameters().inputs["max_live_parameters"] == 10**9
    assert B.stage3_persistent_parameters([1], 2).inputs["threshold"] == 10**5


def test_terms_have_sources_and_int_bytes():
    for t in (B.reduce_bucket(1), B.stage3_live_parameters(),
              B.stage3_persistent_parameters([1], 2)):
        assert isinstance(t, Term) and isinstance(t.bytes, int) and t.source and t.formula


def test_saved_gathered_weights_count_what_lies_beyond_the_live_ceiling():
    """LLaMA-7B's linear weights (32 layers x 202,375,168 + lm_head 131,072,000) in bf16, less
    the 2e9 B of gathered parameters the live-parameter term already holds."""
    linear = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008) + 32000 * 4096
    assert linear == 6_607_077_376
    t = B.stage3_saved_gathered_weights(linear, "bf16", 2 * 10**9, "memory_efficient_linear false")
    assert t.name == "buffers.zero3_saved_gathered_weights" and t.component == "buffers"
    assert t.bytes == 2 * linear - 2 * 10**9
    assert "memory_efficient_linear false" in t.formula and "#8189" in t.source
    assert B.stage3_saved_gathered_weights(10, "bf16", 10**6, "x").bytes == 0


def test_saved_gathered_weights_follow_deepspeeds_linear_wrapper():
    """The term appears only where ZeRO-3's linear layers are torch's own (runtime/zero/linear.py):
    memory_efficient_linear false, or DeepSpeed before 0.19.4 (#8189) with the model built outside
    zero.Init; a recomputed forward saves nothing, and ZeRO-2 gathers nothing."""
    from memlint.memory.estimate import estimate
    from memlint.scenario import build, overrides_partial

    base = ["framework=deepspeed", "zero=3", "world_size=8", "precision=bf16", "micro_batch=1",
            "seq_len=2048", "recompute=none"]

    def terms(*extra):
        scenario, diagnostics = build([overrides_partial(base + list(extra), model="llama3-8b")])
        assert not [d for d in diagnostics if d.severity.label == "error"]
        peak = estimate(scenario).stages[0]
        return {t.name: t for phase in peak.phases if phase.name == "backward_start"
                for t in phase.terms}

    name = "buffers.zero3_saved_gathered_weights"
    old = ("deepspeed.version=0.14.2", "model_init=cpu")
    assert name in terms(*old)
    assert name in terms("deepspeed.memory_efficient_linear=false")
    assert name not in terms()                                  # memlint's DeepSpeed: v0.19.6
    assert name not in terms("deepspeed.version=0.14.2")        # HF's from_pretrained: zero.Init
    assert name not in terms("deepspeed.version=0.19.4", "model_init=cpu")
    assert name not in terms(*old, "recompute=full")
    assert name in terms(*old, "recompute=selective")          # no such thing for HF layers
    # Megatron-Core's linear layers save the parameter itself
    assert name not in terms(*old, "framework=megatron", "deepspeed.config=ds.json")
    live = terms(*old)["buffers.zero3_live_parameters"].bytes
    saved = terms(*old)[name]
    assert saved.bytes == saved.inputs["linear_params"] * 2 - live


def test_the_output_layer_is_a_module_the_live_ceiling_cannot_split():
    """The coordinator gathers a module whole and keeps the running module's parameters beyond
    stage3_max_live_parameters: at the loss that is the output layer, 1.23e9 elements for a
    300k x 4096 head (Qwen-72B's 152,064 x 8,192 is 1.25e9), above the 1e9 default."""
    from memlint.memory.estimate import estimate
    from memlint.scenario import build, overrides_partial

    def live(*extra):
        sets = ["framework=deepspeed", "zero=3", "world_size=8", "precision=bf16",
                "micro_batch=1", "seq_len=2048", "recompute=none", *extra]
        scenario, diagnostics = build([overrides_partial(sets, model="llama3-8b")])
        assert not [d for d in diagnostics if d.severity.label == "error"]
        return estimate(scenario).stages[0].term("buffers.zero3_live_parameters")

    assert live().bytes == 10**9 * 2
    big = live("model.vocab_size=300000")
    assert big.inputs["largest_module_params"] == 300000 * 4096
    assert big.bytes == 300000 * 4096 * 2


def test_the_assumed_deepspeed_version_is_named_where_it_decides():
    """A ZeRO-3 model built outside zero.Init with no version given: the estimate rests on
    memlint's DeepSpeed (v0.19.6, the wrapper installed for built models) and says so; a given
    version, zero.Init (the default) or full recompute need no such entry."""
    from memlint.memory.estimate import estimate
    from memlint.scenario import build, overrides_partial

    def assumed(*extra):
        sets = ["framework=deepspeed", "zero=3", "world_size=8", "micro_batch=1",
                "seq_len=2048", *extra]
        scenario, _ = build([overrides_partial(sets, model="llama3-8b")])
        return [a["key"] for a in estimate(scenario).assumed]

    assert "deepspeed.version" in assumed("model_init=cpu")
    for extra in ((), ("model_init=cpu", "deepspeed.version=0.14.2"),
                  ("model_init=cpu", "recompute=full"), ("model_init=cpu", "zero=2")):
        assert "deepspeed.version" not in assumed(*extra), extra


def _ds_estimate(*sets, model="llama3-8b"):
    from memlint.memory.estimate import estimate
    from memlint.scenario import build, overrides_partial

    scenario, diagnostics = build([overrides_partial(list(sets), model=model)])
    assert not [d for d in diagnostics if d.severity.label == "error"]
    return estimate(scenario)


def _phase_terms(est, phase):
    return {t.name: t for p in est.stages[0].phases if p.name == phase for t in p.terms}


def test_zero2_accumulation_holds_a_second_gradient_partition():
    """stage_1_and_2.py (v0.14.2): from the second micro-batch on, the backward's
    copy_grads_in_partition allocates a new grads_in_partition while averaged_gradients holds the
    accumulated one: one more partition in every backward phase, none in the optimizer step, and
    none with one micro-batch, optimizer offload (the gradients go to the host), ZeRO-3 (one
    persistent flat buffer) or contiguous_gradients off."""
    base = ["framework=deepspeed", "zero=2", "world_size=8", "precision=bf16", "micro_batch=1",
            "seq_len=2048", "recompute=full"]
    name = "gradients.zero2_accumulation"
    est = _ds_estimate(*base, "grad_accum=4")
    for phase in ("backward_start", "backward_recompute"):
        terms = _phase_terms(est, phase)
        assert terms[name].bytes == terms["gradients"].bytes, phase
        assert terms[name].component == "gradients"
    grads = terms["gradients"]
    assert grads.bytes == math.ceil(grads.inputs["params"] / 8) * 2    # the bf16 partition
    for phase in ("forward_end", "optimizer"):
        assert name not in _phase_terms(est, phase), phase
    for extra in (("grad_accum=1",), ("grad_accum=4", "offload_optimizer=cpu"),
                  ("grad_accum=4", "zero=3"),
                  ("grad_accum=4", "deepspeed.contiguous_gradients=false")):
        assert name not in _phase_terms(_ds_estimate(*base, *extra), "backward_start"), extra


def test_zero3_gathered_parameters_under_full_recompute_follow_the_reuse_rule():
    """LLaMA-7B's numbers (32 layers of 202,383,360, LM head 131,072,000, largest linear
    4096 x 11008): at the loss the head and the last layer are kept (3·0 + 2·head + layer -
    largest = 419M < 1e9), the one before is not (3 x 202M + 2 x 131M + 157M > 1e9); the
    prefetcher adds its bucket. Mid-backward only the recomputed layer and the prefetch."""
    layers, head, largest = [202_383_360] * 32, 131_072_000, 4096 * 11008
    at_loss = B.stage3_gathered_recompute("backward_start", layers, head, largest,
                                          10**9, 50_000_000, 10**9)
    assert at_loss.inputs["kept_layers"] == 1
    assert at_loss.bytes == (head + layers[0] + 50_000_000) * 2
    mid = B.stage3_gathered_recompute("backward_recompute", layers, head, largest,
                                      10**9, 50_000_000, 10**9)
    assert mid.bytes == (layers[0] + 50_000_000) * 2
    wider = B.stage3_gathered_recompute("backward_start", layers, head, largest,
                                        3 * 10**9, 50_000_000, 10**9)
    assert wider.inputs["kept_layers"] > 1
    # the prefetch is capped by what max_live_parameters leaves
    capped = B.stage3_gathered_recompute("backward_start", layers, head, largest,
                                         10**9, 50_000_000, head + layers[0] + 10)
    assert capped.inputs["prefetch_elements"] == 10
    # an output layer above max_live_parameters is still kept whole, with no prefetch beside it
    big = B.stage3_gathered_recompute("backward_start", layers, 300_000 * 4096, largest,
                                      10**9, 50_000_000, 10**9)
    assert big.bytes == 300_000 * 4096 * 2 and big.inputs["kept_layers"] == 0
    assert SOURCE_REUSE_PINNED in at_loss.source


SOURCE_REUSE_PINNED = "partitioned_param_coordinator.py"


def test_zero3_full_recompute_uses_the_reuse_rule_and_reads_its_keys():
    base = ["framework=deepspeed", "zero=3", "world_size=8", "precision=bf16", "micro_batch=1",
            "seq_len=2048", "recompute=full"]
    est = _ds_estimate(*base)
    for phase in ("forward_end", "backward_start", "backward_recompute"):
        terms = _phase_terms(est, phase)
        assert "buffers.zero3_gathered_parameters" in terms, phase
        assert "buffers.zero3_live_parameters" not in terms, phase
    far = _ds_estimate(*base, "deepspeed.stage3_max_reuse_distance=100000000000")
    near = _phase_terms(est, "backward_start")["buffers.zero3_gathered_parameters"]
    wide = _phase_terms(far, "backward_start")["buffers.zero3_gathered_parameters"]
    assert wide.inputs["kept_layers"] == 32 > near.inputs["kept_layers"]
    small = _ds_estimate(*base, "deepspeed.stage3_prefetch_bucket_size=1000")
    assert _phase_terms(small, "backward_start")[
        "buffers.zero3_gathered_parameters"].inputs["prefetch_elements"] == 1000
