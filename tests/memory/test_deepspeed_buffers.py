"""DeepSpeed buffer and host-memory terms, against hand-computed values."""
from memlint.memory import deepspeed_buffers as B


def test_reduce_bucket_stage2_overlap_doubles():
    t = B.reduce_bucket(2, 500_000_000, "bf16", contiguous_gradients=True, overlap_comm=True)
    assert t["bytes"] == 2 * 500_000_000 * 2 and t["component"] == "buffers" and t["device"] == "gpu"
    assert B.reduce_bucket(2, 500_000_000, "bf16", overlap_comm=False)["bytes"] == 1_000_000_000
    assert B.reduce_bucket(2, 10, "bf16", contiguous_gradients=False)["bytes"] == 0
    assert B.reduce_bucket(0, 10, "bf16")["bytes"] == 0


def test_reduce_bucket_stage3_single_buffer():
    assert B.reduce_bucket(3, 12_845_056, "fp32", overlap_comm=True)["bytes"] == 12_845_056 * 4


def test_allgather_is_in_place():
    assert B.allgather_bucket(2, 200_000_000)["bytes"] == 0


def test_stage3_prefetch_and_live():
    assert B.stage3_prefetch_bucket(50_000_000, "bf16")["bytes"] == 100_000_000
    assert B.stage3_prefetch_bucket(50_000_000, "bf16", max_live_parameters=1000)["bytes"] == 2000
    assert B.stage3_live_parameters(10**9, "bf16", total_params=7 * 10**8)["bytes"] == 14 * 10**8
    assert B.stage3_live_parameters(0, "bf16", largest_module_params=1000)["bytes"] == 2000


def test_persistent_parameters():
    # 4 norms of 4096 (persist) and one 4096x4096 matrix (partitioned), dp 8, bf16.
    t = B.stage3_persistent_parameters([4096] * 4 + [4096 * 4096], dp=8, threshold=100_000)
    assert t["inputs"]["persistent_numel"] == 16384
    assert t["bytes"] == 16384 * 2 - 16384 * 2 // 8
    capped = B.stage3_persistent_parameters([4096] * 4, dp=8, model_threshold=8192)
    assert capped["inputs"]["persistent_numel"] == 8192


def test_offload_host_terms():
    t = B.offload_optimizer_host(7_000_000_000, shard=8, ranks_per_node=8)
    assert t["device"] == "host" and t["bytes"] == 7_000_000_000 * 16
    assert B.offload_optimizer_host(10, shard=1, device="nvme")["bytes"] == 0
    assert B.offload_param_host(7_000_000_000, shard=8, ranks_per_node=8)["bytes"] == 14_000_000_000
    assert B.nvme_swap_buffers_host(5, 100_000_000, "bf16", True)["bytes"] == 1_000_000_000
    assert B.nvme_swap_buffers_host()["bytes"] == 0


def test_terms_have_sources_and_int_bytes():
    for t in (B.reduce_bucket(1), B.allgather_bucket(1), B.stage3_prefetch_bucket(),
              B.stage3_live_parameters(), B.stage3_persistent_parameters([1], 2),
              B.offload_optimizer_host(1, 1), B.offload_param_host(1, 1), B.nvme_swap_buffers_host()):
        assert isinstance(t["bytes"], int) and t["source"] and t["formula"]
