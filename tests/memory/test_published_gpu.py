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
    # DeepSpeed's allocation order is not modeled: beyond the live tensors only the idle logits
    # block of transformers' loss, which the engine runs as the model's own code
    for row in deepspeed_rows:
        assert row["reserved"] - row["allocated"] == row["components"].get("runtime", 0) \
            - (row["device"] - row["reserved"])
        assert "runtime.allocator" in row["assumed"]
    z2 = next(r for r in deepspeed_rows if r["id"] == "ds-llama7b-z2-mbs1")
    assert z2["reserved"] - z2["allocated"] == 2 * 32000 * 4096   # bf16 logits, V x T


def test_qwen_qlora_rows_run_as_their_script(rows):
    """The Q-LoRA rows as Qwen's finetune_qlora_single_gpu.sh runs them: DeepSpeed ZeRO-2, fp16,
    a GPTQ base, Qwen's loss in fp16; the 7B rows stay 10-13% under at every length (a constant
    ~1.5 GiB the sources do not explain, README of the set)."""
    qlora = {r["id"]: r for r in rows if "qlora" in r["id"]}
    assert len(qlora) == 3
    for row in qlora.values():
        assert abs(row["error"]) < 0.15, (row["id"], row["error"])
    long = qlora["qwen-7b-qlora-T8192"]
    assert long["phase"] == "backward_start"
    # the fp16 loss: 3 x 2 B per logit (V 151,936 x 8,192 tokens), not 12 B
    assert long["components"]["logits"] == 6 * 151936 * 8192


def test_deepspeed_rows_run_transformers_modules(rows):
    """The gist's LLaMA-7B rows run transformers' modules under DeepSpeed (the hf activation
    model), in a loop that keeps the fp32 logits (`loop.held_logits=fp32`), with the gradient
    accumulation of its BS column: ZeRO-3 without checkpointing within 5% once the gathered linear
    weights DeepSpeed 0.14.2's standard linear layers keep are counted (#8189); every row but the
    two ZeRO-2 rows of 8 micro-batches within 3%."""
    ds = {r["id"]: r for r in rows if r["group"] == "deepspeed-gist"}
    z3 = ds["ds-llama7b-z3-mbs2"]
    assert abs(z3["error"]) < 0.05, z3["error"]
    assert "buffers.zero3_saved_gathered_weights" in z3["terms"]
    for name in ("ds-llama7b-z3-ckpt-mbs2", "ds-llama7b-z3-ckpt-optoff-mbs2",
                 "ds-llama7b-z3-ckpt-mbs8"):
        assert "buffers.zero3_saved_gathered_weights" not in ds[name]["terms"]
        assert "buffers.zero3_gathered_parameters" in ds[name]["terms"]
    for name, row in ds.items():
        assert "logits.loop_outputs" in row["terms"], name
        if name not in FIRST_STEP_ROWS:
            assert abs(row["error"]) < 0.03, (name, row["error"])
    assert "gradients.zero2_accumulation" in ds["ds-llama7b-z2-ckpt-mbs4"]["terms"]
    assert "gradients.zero2_accumulation" not in ds["ds-llama7b-z2-ckpt-optoff-mbs1"]["terms"]


# The gist's two ZeRO-2 rows of 8 micro-batches per step (BS 1/64 on 8 GPUs), read before their
# first optimizer step (the README of the set gives the evidence): DeepSpeed 0.14.2 creates Adam's
# moments in the first step, so those runs never held them.
FIRST_STEP_ROWS = ("ds-llama7b-z2-mbs1", "ds-llama7b-z2-ckpt-mbs1")
LLAMA_7B_MOMENTS = 2 * 4 * 6_738_415_616 // 8     # exp_avg + exp_avg_sq, fp32, 1/8 partition


def test_the_zero2_rows_of_8_micro_batches_are_over_by_the_moments_they_never_held(rows):
    ds = {r["id"]: r for r in rows if r["group"] == "deepspeed-gist"}
    for name in FIRST_STEP_ROWS:
        row = ds[name]
        assert row["error"] > 0, name          # over, the safe side
        before_step = row["allocated"] - LLAMA_7B_MOMENTS
        assert abs(before_step / row["measured"] - 1) < 0.04, (name, before_step / 2**30)


def test_qwen_rows_read_qwen_v1_configs():
    """The Qwen HF + PEFT rows ran Qwen v1 (remote code QWenLMHeadModel, fused c_attn: one LoRA
    adapter where a q/k/v split would count three), so their configs have the public Qwen-7B
    config.json's layout (fixtures/hf/Qwen-7B.json) at each size, not a Qwen2 stand-in."""
    import json
    with open(os.path.join(ROOT, "fixtures", "hf", "Qwen-7B.json"), encoding="utf-8") as f:
        public = json.load(f)
    sizes = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "vocab_size")
    for name in ("qwen-1_8b", "qwen-7b", "qwen-14b", "qwen-72b"):
        path = os.path.join(CALIB, "gpu-published", "configs", "models", name, "config.json")
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        assert {k: v for k, v in config.items() if k not in sizes} == \
            {k: v for k, v in public.items() if k not in sizes}, name
    with open(os.path.join(CALIB, "gpu-published", "configs", "models", "qwen-7b",
                           "config.json"), encoding="utf-8") as f:
        assert json.load(f) == public
