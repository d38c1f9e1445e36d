"""The published GPU set (bench/data/calibration/gpu-published, issue 25) through bench/published.py,
as `python bench/accuracy.py` reports it: each row against the metric its source logs. The
torchtitan rows are the strong ones (their `memory:` line is the caching allocator's max
reserved, their configs are torchtitan's own at the benchmark's commit): eager within 6%,
compiled within 10%; the whole set's median within the issue's 5% is not reached yet (the HF +
PEFT and DeepSpeed rows, whose sources are weak, are 10% off at the median), so only what
holds is pinned."""
from __future__ import annotations

import os
import statistics
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.append(os.path.join(ROOT, "bench"))  # after tests/: bench/fuzz.py must not hide tests/fuzz

from published import METRIC_FIELD, published_rows  # noqa: E402

CALIB = os.path.join(ROOT, "bench", "data", "calibration")


@pytest.fixture(scope="module")
def rows():
    return published_rows(CALIB)


def test_every_row_is_estimated_against_its_metric(rows):
    assert len(rows) == 29
    for row in rows:
        assert "error" in row, row
        assert row["field"] == METRIC_FIELD[row["metric"]]


def test_torchtitan_rows(rows):
    titan = [r for r in rows if r["group"] == "torchtitan"]
    assert len(titan) == 11
    for row in titan:
        limit = 0.10 if row["compile"] else 0.06
        assert abs(row["error"]) <= limit, (row["id"], row["error"])
    assert statistics.median(abs(r["error"]) for r in titan) <= 0.05


def test_the_modeled_reserve_is_what_separates_reserved_from_allocated(rows):
    eager = next(r for r in rows if r["id"] == "tt-8b-fsdp8-eager")
    assert eager["reserved"] > eager["allocated"]
    deepspeed_rows = [r for r in rows if r["group"] == "deepspeed-gist"]
    # DeepSpeed's allocation order is not modeled: no reserve beyond the live tensors
    assert all(r["reserved"] == r["allocated"] for r in deepspeed_rows)
