"""memlint/logs.py on real log excerpts (fixtures/logs/SOURCES.md gives each line's origin)."""
from __future__ import annotations

import os

import pytest

from memlint import logs

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(HERE, "fixtures", "logs")
MiB, GiB = 1024**2, 1024**3


def read(name):
    return logs.read(os.path.join(LOGS, name))


def test_megatron_ranked_lines():
    report = read("megatron-deepseek-v3-proxy.log")
    assert report.styles == ["megatron"]
    assert report.ranks() == [0, 16, 32, 48]
    first = report.readings[0]
    assert first.step == 10 and first.line == 1
    assert first.metrics == {"allocated": round(24761.02978515625 * MiB),
                             "max_allocated": round(65203.93359375 * MiB),
                             "reserved": 64438 * MiB, "max_reserved": 74306 * MiB}


def test_megatron_old_form_without_rank_is_rank_0():
    (reading,) = read("megatron-gpt2-v100.log").readings
    assert reading.rank == 0 and reading.step == 5 and reading.line == 2
    assert reading.metrics["max_allocated"] == round(12606.06201171875 * MiB)
    assert reading.metrics["max_reserved"] == 17482 * MiB


def test_torchtitan_memory_is_max_reserved_with_capacity():
    report = read("torchtitan-llama3-8b-cp2.log")
    assert report.styles == ["torchtitan"] and report.ranks() == [0, 1, 2, 3]
    last = report.readings[-1]
    assert (last.rank, last.step) == (2, 10)
    assert last.metrics["max_reserved"] == round(44.84 * GiB)
    # 44.84 GiB is 47.19% of the device: a 95 GiB H100
    assert abs(last.metrics["capacity"] / GiB - 95.02) < 0.01


def test_torchtitan_metrics_dict():
    text = "{'memory/max_active(GiB)': 40.5, 'memory/max_reserved(GiB)': 44.84}"
    (reading,) = logs.parse_text(text).readings
    assert reading.metrics == {"max_active": round(40.5 * GiB), "max_reserved": round(44.84 * GiB)}


def test_deepspeed_see_memory_usage_pairs_message_and_numbers():
    report = read("deepspeed-zero2-offload.log")
    assert [r.label for r in report.readings] == ["before forward 1", "before backward 1"]
    second = report.readings[1]
    assert second.rank == 0 and second.line == 5
    assert second.metrics == {"allocated": round(5.19 * GiB), "max_allocated": round(5.31 * GiB),
                              "reserved": round(6.68 * GiB), "max_reserved": 7 * GiB}
    assert any("rounded" in note for note in second.notes)
    labels = [r.label for r in read("deepspeed-zero3-init.log").readings]
    assert labels == ["Before initializing optimizer states", "After initializing optimizer states",
                      "After initializing ZeRO optimizer"]


def test_hf_trainer_metrics_add_up_to_the_train_peak():
    (reading,) = read("hf-trainer-zero3.log").readings
    assert reading.style == "hf" and reading.rank == 0
    assert reading.metrics["max_allocated"] == (312 - 153 + 2012) * MiB
    assert reading.metrics["allocated"] == (312 - 153) * MiB


def test_hf_trainer_metrics_as_bytes_in_a_dict():
    text = ("{'train_runtime': 10.0, 'train_mem_gpu_alloc_delta': 1048576, "
            "'train_mem_gpu_peaked_delta': 2097152}")
    (reading,) = logs.parse_text(text).readings
    assert reading.metrics["max_allocated"] == 3 * MiB
    assert any("before_init_mem_gpu" in n for n in reading.notes)


@pytest.mark.parametrize("name,capacity,allocated,reserved,free", [
    ("oom-megatron-gpt2-large-v100.log", 31.74 * GiB, 28.82 * GiB, 29.97 * GiB, 577.12 * MiB),
    ("oom-llama-allowed.log", 11.93 * GiB, 10.67 * GiB, 10.92 * GiB, 515.38 * MiB),
])
def test_out_of_memory_messages(name, capacity, allocated, reserved, free):
    (reading,) = read(name).readings
    assert reading.style == "oom" and reading.rank is None
    assert reading.metrics["capacity"] == round(capacity)
    assert reading.metrics["allocated"] == round(allocated)
    assert reading.metrics["reserved"] == round(reserved)
    assert reading.metrics["device"] == round(capacity) - round(free)


def test_out_of_memory_message_of_recent_pytorch():
    # the message as c10/cuda/CUDACachingAllocator.cpp formats it (PyTorch >= 2.1)
    text = ("[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. "
            "GPU 3 has a total capacity of 79.11 GiB of which 1.18 GiB is free. Including "
            "non-PyTorch memory, this process has 77.92 GiB memory in use. Of the allocated "
            "memory 74.63 GiB is allocated by PyTorch, and 1.54 GiB is reserved by PyTorch but "
            "unallocated.")
    (reading,) = logs.parse_text(text).readings
    assert reading.rank == 3
    assert reading.metrics["device"] == round(77.92 * GiB)
    assert reading.metrics["reserved"] == round(74.63 * GiB) + round(1.54 * GiB)


def test_a_log_without_memory_lines_has_no_readings():
    assert read("no-memory-lines.log").readings == []
    assert logs.parse_text("").readings == []
