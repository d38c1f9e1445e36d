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
