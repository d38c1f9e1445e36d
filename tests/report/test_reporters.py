"""Each reporter once, on one fixed set of diagnostics and one fixed estimate (snapshots).

Regenerate with MEMLINT_UPDATE_SNAPSHOTS=1 and review the diff like code.
"""
import dataclasses
import json
import os
import xml.etree.ElementTree as ET

import pytest
from helpers import GiB, estimate, stage

from memlint.diagnostics import Diagnostic, Severity
from memlint.memory.terms import Term
from memlint.report import Report, display_path, render
from memlint.report.text_format import bar
from memlint.rules import registry

SNAPSHOTS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "snapshots")
SCHEMA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data",
                      "sarif-schema-2.1.0.json")

DIAGNOSTICS = [
    Diagnostic("ML001", "parse-error", Severity.ERROR, "invalid JSON: expected ',' or '}'",
               "configs/ds_config.json", 7, 3),
    Diagnostic("ML101", "exceeds-gpu-memory", Severity.ERROR,
               "stage 0 needs 95.0 GiB at its backward peak, 15.0 GiB more than the 80.0 GiB",
               "configs/train.memlint.toml", 4, 1, "micro_batch"),
    Diagnostic("ML102", "low-memory-headroom", Severity.WARNING,
               "stage 1 peaks at 75.0 GiB, \"tight\", 100% sure: a,b", "configs/train.memlint.toml",
               None, None),
    Diagnostic("ML603", "sequence-parallel-off", Severity.INFO, "tp=4 without sp", None, None,
               None, "tp"),
]

WEIGHTS = Term("weights", "weights", 20 * GiB, "2 B × N / tp", {"N": 10_737_418_240, "tp": 1},
               "seed 000 CH 1.1")
ESTIMATE_BASE = estimate(
    stage(0, layers=16, weights=0, terms=(
        WEIGHTS,
        Term("gradients", "gradients", 20 * GiB, "2 B × N", {"N": 10_737_418_240}),
        Term("optimizer.moments", "optimizer", 40 * GiB, "8 B × N", {"N": 10_737_418_240}),
        Term("activations", "activations", 12 * GiB + 123, "34·B·T·d·L", {"B": 1, "T": 4096}),
        Term("runtime.cuda_context", "runtime", 3 * GiB, "measured", {}))),
    stage(1, layers=16, phase="forward_end", terms=(
        WEIGHTS,
        Term("logits", "logits", 10 * GiB, "B·T·V·6", {"V": 128256}),
        Term("activations", "activations", 30 * GiB, "34·B·T·d·L", {}))),
    sources=("configs/train.memlint.toml",),
    params={"total": 10_737_418_240, "trainable": 10_737_418_240, "embedding": 525_336_576,
            "lm_head": 525_336_576, "experts": 0, "vision": 0, "extra_key": 5})
# two verdict inputs no file gave (memory/inputs.py): shown in text and JSON
ESTIMATE = dataclasses.replace(ESTIMATE_BASE, assumed=(
    {"key": "seq_len", "value": 4096, "source": "default"},
    {"key": "world_size", "value": 8, "source": "--set world_size"}))


def report(**kwargs):
    kwargs.setdefault("registry", registry())
    return Report(diagnostics=list(DIAGNOSTICS), estimates=[ESTIMATE], root=os.getcwd(),
                  **kwargs)


def snapshot(name: str, text: str) -> None:
    path = os.path.join(SNAPSHOTS, name)
    if os.environ.get("MEMLINT_UPDATE_SNAPSHOTS") == "1" or not os.path.exists(path):
        os.makedirs(SNAPSHOTS, exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    with open(path, encoding="utf-8") as handle:
        assert text == handle.read(), f"snapshot {name} differs (MEMLINT_UPDATE_SNAPSHOTS=1)"


@pytest.fixture(autouse=True)
def _fixed_cwd(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github", "junit", "markdown"])
def test_snapshot(fmt):
    suffix = {"text": "txt", "junit": "xml", "github": "txt", "markdown": "md"}.get(fmt, "json")
    snapshot(f"reporters.{fmt}.{suffix}" if fmt != "text" else "reporters.text.txt",
             render(fmt, report()))


def test_text_quiet_explain_and_units():
    quiet = render("text", report(quiet=True))
    assert quiet.splitlines()[0] == ("configs/ds_config.json:7:3: ML001 error parse-error invalid "
                                     "JSON: expected ',' or '}'")
    assert "Estimate" not in quiet and len(quiet.splitlines()) == 4
    explained = render("text", report(explain=True, stage=0, units="GB"))
    snapshot("reporters.explain.txt", explained)
    assert "Stage 1" not in explained
    total = 20 * GiB * 2 + 40 * GiB + 12 * GiB + 123 + 3 * GiB
    assert f"total = sum of 5 terms = {total:,} B" in explained
    estimate_part = explained.split("Estimate (precise)")[1]
    assert "GB" in estimate_part and "GiB" not in estimate_part


def test_json_contract():
    doc = json.loads(render("json", report()))
    assert set(doc) == {"memlint_version", "estimates", "diagnostics"}
    [est] = doc["estimates"]
    assert set(est) == {"sources", "profile", "params", "gpu", "assumed", "stages",
                        "peak_bytes", "host", "checkpoint"}
    assert est["host"] == [] and est["checkpoint"] is None   # a hand-built estimate: no scenario
    assert set(est["params"]) == {"total", "trainable", "embedding", "lm_head", "experts",
                                  "vision"}
    for stage_doc in est["stages"]:
        assert set(stage_doc) == {"stage", "phase", "components", "total_bytes", "terms",
                                  "allocated_bytes", "reserved_bytes", "device_bytes"}
        assert sum(t["bytes"] for t in stage_doc["terms"]) == stage_doc["total_bytes"]
        assert sum(stage_doc["components"].values()) == stage_doc["total_bytes"]
        assert all(set(t) == {"name", "component", "bytes", "formula"} for t in stage_doc["terms"])
    assert est["peak_bytes"] == max(s["total_bytes"] for s in est["stages"])
    assert doc["diagnostics"][3] == {"code": "ML603", "rule": "sequence-parallel-off",
                                     "severity": "info", "message": "tp=4 without sp",
                                     "path": None, "line": None, "column": None}


def test_sarif_validates_against_schema():
    import jsonschema

    with open(SCHEMA, encoding="utf-8") as handle:
        schema = json.load(handle)
    doc = json.loads(render("sarif", report()))
    jsonschema.validate(doc, schema)
    run = doc["runs"][0]
    # ML603 has no file: a tool notification, not a result (GitHub rejects unlocated results)
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["ML001", "ML101", "ML102"]
    # the rule's page travels in help; no link to an address memlint cannot promise is live
    assert all("helpUri" not in r and r["help"]["markdown"].startswith(f"# {r['id']}")
               for r in run["tool"]["driver"]["rules"])
    first = run["results"][0]
    assert first["locations"][0]["physicalLocation"]["region"] == {"startLine": 7,
                                                                  "startColumn": 3}
    assert first["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "configs/ds_config.json"
    assert [r["level"] for r in run["results"]] == ["error", "error", "warning"]
    # a file-level finding without a line is at the file's first line
    assert run["results"][2]["locations"][0]["physicalLocation"]["region"] == {"startLine": 1}
    [note] = run["invocations"][0]["toolExecutionNotifications"]
    assert note["level"] == "note" and note["descriptor"] == {"id": "ML603"}


def test_github_escaping():
    lines = render("github", report()).splitlines()
    assert lines[0] == ("::error file=configs/ds_config.json,line=7,col=3,title=ML001 "
                        "parse-error::invalid JSON: expected ',' or '}'")
    assert lines[2].startswith("::warning file=configs/train.memlint.toml,title=ML102")
    assert "100%25 sure" in lines[2]
    assert lines[3] == "::notice title=ML603 sequence-parallel-off::tp=4 without sp"


def test_junit_failures_only_at_or_above_fail_on():
    from memlint.diagnostics import Severity

    root = ET.fromstring(render("junit", report()))
    # default --fail-on error: the two errors fail; the warning and the info note pass
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "2", "0")
    assert len(root.findall(".//failure")) == 2 and len(root.findall(".//system-out")) == 2
    strict = ET.fromstring(render("junit", report(fail_on=Severity.WARNING)))
    assert strict.get("failures") == "3"
    internal = Diagnostic("ML009", "internal-error", Severity.ERROR, "rule crashed", "a.json", 1,
                          1, data={"internal": True})
    broken = ET.fromstring(render("junit", Report(diagnostics=[internal])))
    assert (broken.get("failures"), broken.get("errors")) == ("0", "1")
    empty = ET.fromstring(render("junit", Report()))
    assert empty.get("failures") == "0"


def test_markdown_summary():
    text = render("markdown", report())
    assert text.startswith("## memlint ❌ fails: 2 errors, 1 warning, 1 info\n")
    assert "| `configs/ds_config.json:7:3` | 🔴 error | ML001 `parse-error` |" in text
    assert "100% sure: a,b" in text and "\\|" not in text
    rows = [line for line in text.splitlines() if line.startswith("| 0 |")
            or line.startswith("| 1 |")]
    assert len(rows) == 2 and rows[0].endswith("| **95.00** | 119% |")
    assert render("markdown", Report()).startswith("## memlint ✅ passes: no problems found")


def test_bar_marks_capacity():
    segments = bar(ESTIMATE.stages[0], scale=100 * GiB, capacity=80 * GiB, width=50)
    text = "".join(t for t, _ in segments)
    assert len(text) == 51 and text.index("|") == 40
    assert text.startswith("#" * 10 + "=" * 10 + "%" * 20 + "|")


def test_display_path(tmp_path):
    inside = tmp_path / "a" / "b.json"
    assert display_path(str(inside), str(tmp_path)) == "a/b.json"
    assert display_path("/elsewhere/x.json", str(tmp_path)) == "/elsewhere/x.json"
    assert display_path(None) is None and display_path("<command line>") == "<command line>"


def test_color_output_uses_rich(monkeypatch):
    import io

    from memlint.report.text_format import write

    # rich leaves colour out under NO_COLOR or a dumb terminal, wherever the suite runs
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    stream = io.StringIO()
    write(report(color=True), stream)
    assert "\x1b[" in stream.getvalue()
    plain = io.StringIO()
    write(report(), plain)
    assert "\x1b[" not in plain.getvalue()
