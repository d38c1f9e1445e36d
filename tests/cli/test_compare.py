"""`memlint compare LOG`: real log excerpts (fixtures/logs/SOURCES.md) against the estimate of
the run they come from, metric by metric and rank by rank; exit 2 with a message naming what is
missing when they cannot be compared."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from memlint.cli import main
from memlint import comparison as compare
from memlint.memory.estimate import estimate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOGS = os.path.join(ROOT, "fixtures", "logs")
GPT2 = os.path.join(ROOT, "fixtures", "hf", "gpt2.json")


def log(name):
    return os.path.join(LOGS, name)


def run_json(capsys, *argv):
    code = main(["compare", *argv, "--format", "json"])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out else None), captured.err


def test_megatron_ranks_are_matched_to_their_pipeline_stages(capsys):
    code, doc, _ = run_json(capsys, log("megatron-deepseek-v3-proxy.log"),
                            log("megatron-deepseek-v3-proxy.memlint.toml"))
    assert code == 0
    # pp = 4 over 64 ranks: ranks 0, 16, 32, 48 are the first of stages 0-3
    assert [(r["rank"], r["stage"]) for r in doc["ranks"]] == [(0, 0), (16, 1), (32, 2), (48, 3)]
    rank0 = {m["metric"]: m for m in doc["ranks"][0]["metrics"]}
    assert set(rank0) == {"max_allocated", "max_reserved", "allocated"}
    assert rank0["max_allocated"]["measured_bytes"] == round(65203.93359375 * 1024**2)
    assert rank0["max_allocated"]["difference_bytes"] == (
        rank0["max_allocated"]["measured_bytes"] - rank0["max_allocated"]["estimated_bytes"])
    parts = {p["part"].split(" (")[0]: p for p in doc["ranks"][0]["attribution"]}
    assert set(parts) == {"model states", "step transients", "allocator reserve"}
    # the parts split the measured peak reserved exactly
    assert sum(p["measured_bytes"] for p in parts.values()) == \
        {m["metric"]: m for m in doc["ranks"][0]["metrics"]}["max_reserved"]["measured_bytes"]
    assert doc["fitted_assumptions"]["runtime.allocator_fraction"]["value"] > 0


def test_estimated_side_is_the_stage_of_the_same_run(capsys):
    from memlint.adapters.registry import load_with_references
    from memlint.scenario import build

    path = log("megatron-deepseek-v3-proxy.memlint.toml")
    scenario, _ = build(list(load_with_references(path, 4 << 20, False)))
    est = estimate(scenario)
    code, doc, _ = run_json(capsys, log("megatron-deepseek-v3-proxy.log"), path)
    for rank in doc["ranks"]:
        stage = est.stages[rank["stage"]]
        sides = compare.estimate_sides(stage)
        metrics = {m["metric"]: m for m in rank["metrics"]}
        assert metrics["max_allocated"]["estimated_bytes"] == sides["allocated_bytes"] == sum(
            t.bytes for t in stage.terms if t.component != "runtime")
        assert metrics["max_reserved"]["estimated_bytes"] == sides["reserved_bytes"]


def test_torchtitan_reserved_per_rank(capsys):
    code, doc, _ = run_json(capsys, log("torchtitan-llama3-8b-cp2.log"),
                            log("torchtitan-llama3-8b-cp2.memlint.toml"))
    assert code == 0
    assert [(r["rank"], r["stage"]) for r in doc["ranks"]] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    rank2 = doc["ranks"][2]
    (metric,) = rank2["metrics"]
    assert metric["metric"] == "max_reserved" and metric["label"] == "step 10"
    assert any("first step" in n for n in doc["ranks"][0]["notes"])
    # the log's device (95.0 GiB) matches the run's gpu_memory: no capacity note
    assert not any("GPU has" in n for n in rank2["notes"])


def test_text_report_names_rank_stage_and_terms(capsys):
    assert main(["compare", log("megatron-deepseek-v3-proxy.log"),
                 log("megatron-deepseek-v3-proxy.memlint.toml")]) == 0
    out = capsys.readouterr().out
    assert "rank 48 (stage 3, megatron)" in out
    assert "peak allocated (live tensors)" in out and "term by term:" in out
    assert "logits" in out  # the last stage's transients name the loss's logits


def test_deepspeed_and_hf_logs_against_a_run(capsys):
    code, doc, _ = run_json(capsys, log("deepspeed-zero2-offload.log"), "--model", GPT2,
                            "--set", "framework=deepspeed", "--set", "zero=2",
                            "--world-size", "1")
    assert code == 0
    (rank,) = doc["ranks"]
    assert {m["metric"] for m in rank["metrics"]} == {"max_allocated", "max_reserved",
                                                      "allocated"}
    code, doc, _ = run_json(capsys, log("hf-trainer-zero3.log"), "--model", GPT2,
                            "--set", "framework=hf")
    assert code == 0
    assert {m["metric"] for m in doc["ranks"][0]["metrics"]} == {"max_allocated", "allocated"}


def test_out_of_memory_message_fits_the_cuda_context(capsys):
    code, doc, _ = run_json(capsys, log("oom-megatron-gpt2-large-v100.log"), "--model", GPT2,
                            "--set", "gpu=V100-32GB")
    assert code == 0
    fitted = doc["fitted_assumptions"]["runtime.cuda_context_bytes"]
    # 31.74 GiB capacity - 577.12 MiB free - 29.97 GiB reserved, no NCCL on one GPU
    expected = round(31.74 * 1024**3) - round(577.12 * 1024**2) - round(29.97 * 1024**3)
    assert abs(fitted["value"] - expected) <= 1024**2


def test_write_assumptions_is_used_by_the_next_estimate(repo, capsys):
    for name in ("megatron-deepseek-v3-proxy.log", "megatron-deepseek-v3-proxy.memlint.toml"):
        shutil.copy(log(name), repo / name)
    shutil.copy(os.path.join(ROOT, "fixtures", "hf", "DeepSeek-V3.json"), repo)
    toml = repo / "megatron-deepseek-v3-proxy.memlint.toml"
    toml.write_text(toml.read_text().replace("../hf/DeepSeek-V3.json", "DeepSeek-V3.json"))
    (repo / "pyproject.toml").write_text('[tool.memlint]\nfail-on = "error"\n')
    assert main(["compare", "megatron-deepseek-v3-proxy.log", str(toml),
                 "--write-assumptions"]) == 0
    capsys.readouterr()
    text = (repo / "pyproject.toml").read_text()
    assert "[tool.memlint.assumptions]" in text and '"runtime.allocator_fraction" = 0.' in text
    fraction = float(text.split('"runtime.allocator_fraction" = ')[1].split()[0])
    assert main(["estimate", str(toml), "--format", "json"]) == 1  # stage 0 does not fit
    doc = json.loads(capsys.readouterr().out)
    stage = doc["estimates"][0]["stages"][3]
    allocator = next(t for t in stage["terms"] if t["name"] == "runtime.allocator")
    tensors = sum(t["bytes"] for t in stage["terms"] if t["component"] != "runtime")
    assert allocator["bytes"] == int(tensors * fraction)
    # a second write replaces the value instead of adding a line
    assert main(["compare", "megatron-deepseek-v3-proxy.log", str(toml),
                 "--write-assumptions"]) == 0
    assert (repo / "pyproject.toml").read_text().count("runtime.allocator_fraction") == 1


def test_assumption_table_errors_point_at_the_line(repo, capsys):
    (repo / "pyproject.toml").write_text(
        '[tool.memlint]\n\n[tool.memlint.assumptions]\n"runtime.allocator_fraction" = "lots"\n')
    assert main(["estimate", "--model", "llama3-8b"]) == 1
    out = capsys.readouterr().out
    assert "pyproject.toml:4:1" in out and "runtime.allocator_fraction" in out


@pytest.mark.parametrize("argv,message", [
    (["no-memory-lines.log", "--model", GPT2], "no memory lines found"),
    (["megatron-deepseek-v3-proxy.log", "--model", GPT2, "--world-size", "8"],
     "ranks 16, 32, 48 of the log do not exist in the run (world size 8"),
    (["torchtitan-llama3-8b-cp2.log", "--model", GPT2], "world size is not known"),
    (["megatron-gpt2-v100.log", "--set", "tp=2"], "no model"),
    (["megatron-gpt2-v100.log", "--model", GPT2, "--set", "pp=64"], "cannot be estimated"),
    (["missing.log", "--model", GPT2], "no such file"),
])
def test_cannot_compare_exits_2_with_what_is_missing(argv, message, capsys, monkeypatch):
    monkeypatch.chdir(LOGS)
    assert main(["compare", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
