"""SARIF over every fixture and real config: valid 2.1.0 and acceptable to GitHub code scanning.

GitHub's rules for an upload (docs "SARIF support for code scanning"; the sarif-sdk validator's
GH1001/GH1003/GH1004/GH1005 rules): every result has a location with an artifact URI that is
relative or a file: URI, and a region with startLine; each ruleId is declared in
tool.driver.rules; at most 20 runs, 25,000 results and rules per run, 10 locations per result.
memlint adds: no helpUri (memlint has no public address a link could count on; each rule's page
travels in `help` instead), an https informationUri only where the installed distribution names
its home page, and results below the severity floor left out (notes, by default).
"""
import contextlib
import io
import json
import multiprocessing
import os
import re

import pytest

from memlint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = os.path.join(ROOT, "tests", "data", "sarif-schema-2.1.0.json")
SHARED_REAL = os.path.join(ROOT, "fixtures", "shared-real")


def github_problems(doc: dict) -> list:
    """What GitHub code scanning would reject or fail to show, as readable strings."""
    problems = []
    runs = doc.get("runs", [])
    if len(runs) > 20:
        problems.append(f"{len(runs)} runs (GitHub accepts 20)")
    for run in runs:
        rules = run["tool"]["driver"].get("rules", [])
        ids = [r["id"] for r in rules]
        if len(rules) > 25000 or len(run.get("results", [])) > 25000:
            problems.append("more than 25,000 rules or results in a run")
        uri = run["tool"]["driver"].get("informationUri")
        if uri is not None and not uri.startswith("https://"):
            problems.append(f"informationUri {uri}: not an https address")
        for rule in rules:
            if "helpUri" in rule:
                problems.append(f"{rule['id']}: helpUri {rule['helpUri']} (a link that may lead "
                                "nowhere)")
        for result in run.get("results", []):
            where = f"{result.get('ruleId')}: {result.get('message', {}).get('text', '')[:60]}"
            if result.get("ruleId") not in ids:
                problems.append(f"{where}: ruleId not declared in tool.driver.rules")
            elif "ruleIndex" in result and ids[result["ruleIndex"]] != result["ruleId"]:
                problems.append(f"{where}: ruleIndex points at another rule")
            if not result.get("message", {}).get("text"):
                problems.append(f"{where}: no message text")
            locations = result.get("locations") or []
            if not 1 <= len(locations) <= 10:
                problems.append(f"{where}: {len(locations)} locations")
            for location in locations:
                physical = location.get("physicalLocation") or {}
                uri = (physical.get("artifactLocation") or {}).get("uri")
                if not uri:
                    problems.append(f"{where}: location without artifactLocation.uri")
                elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", uri) and not uri.startswith("file:"):
                    problems.append(f"{where}: {uri} is neither relative nor a file: URI")
                elif uri.startswith("/"):
                    problems.append(f"{where}: {uri} is an absolute path, not a URI")
                start = (physical.get("region") or {}).get("startLine")
                if not isinstance(start, int) or start < 1:
                    problems.append(f"{where}: region.startLine missing or < 1")
    return problems


def _sarif(capsys, *argv) -> dict:
    code = main(["check", "--format", "sarif", "--quiet", "--no-color", *argv])
    out = capsys.readouterr().out
    assert code in (0, 1), out[-2000:]
    return json.loads(out)


def test_notes_stay_out_unless_the_check_fails_on_them(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    # two folders of real configs whose findings have all three levels (the every-fixture SARIF
    # runs below are the slow ones)
    target = ["fixtures/shared-real/accelerate", "fixtures/shared-real/deepspeed-invalid",
              "--model", "llama3-8b", "--world-size", "16"]
    levels = lambda doc: {r["level"] for r in doc["runs"][0]["results"]}  # noqa: E731
    default = _sarif(capsys, *target)
    everything = _sarif(capsys, *target, "--sarif-min-severity", "info")
    failing = _sarif(capsys, *target, "--fail-on", "info")
    errors = _sarif(capsys, *target, "--sarif-min-severity", "error")
    assert levels(everything) == {"note", "warning", "error"} and "note" in levels(failing)
    assert "note" not in levels(default) and levels(default) >= {"warning"}
    assert levels(errors) == {"error"}
    assert len(default["runs"][0]["results"]) < len(everything["runs"][0]["results"])
    driver = default["runs"][0]["tool"]["driver"]
    assert driver["semanticVersion"] == driver["version"]
    for doc in (default, everything, errors):
        _validate(doc)


def test_information_uri_is_the_distributions_home_page(monkeypatch):
    from importlib import metadata

    from memlint.report import sarif_format

    class Meta:
        def __init__(self, urls):
            self.urls = urls

        def get_all(self, name):
            return self.urls if name == "Project-URL" else None

    pages = {"memlint-llm": Meta(["Source, https://example.org/memlint",
                                  "Homepage, https://example.org/home"])}
    monkeypatch.setattr(metadata, "metadata", lambda name: pages[name])
    assert sarif_format.information_uri() == "https://example.org/home"
    pages["memlint-llm"] = Meta(None)
    assert sarif_format.information_uri() is None
    pages.clear()   # not installed: KeyError, like PackageNotFoundError
    assert sarif_format.information_uri() is None


def _validate(doc: dict) -> None:
    import jsonschema

    with open(SCHEMA, encoding="utf-8") as handle:
        jsonschema.Draft7Validator(json.load(handle)).validate(doc)
    assert github_problems(doc) == []


def _sarif_in_a_child(argv: list) -> tuple:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["check", "--format", "sarif", "--quiet", "--no-color", *argv])
    return code, out.getvalue()


@pytest.mark.slow  # every fixture of the repository, twice, in two processes: ~10 s CPU each
def test_every_fixture_alone_and_with_a_command_line_scenario(monkeypatch):
    monkeypatch.chdir(ROOT)
    # the model and world size from the command line only: run-level verdicts (ML101 ...) are
    # anchored to the files of each run, never left without a location
    argvs = [["fixtures"], ["fixtures", "--model", "llama3-70b", "--world-size", "8",
                            "--gpu", "A100-40GB", "--extend-select", "ALL"]]
    with multiprocessing.get_context("fork").Pool(2) as pool:   # CI has two cores
        outputs = pool.map(_sarif_in_a_child, argvs)
    for code, out in outputs:
        assert code in (0, 1), out[-2000:]
    alone, scenario = (json.loads(out) for _code, out in outputs)
    assert len(alone["runs"][0]["results"]) > 50
    _validate(alone)
    codes = {r["ruleId"] for r in scenario["runs"][0]["results"]}
    assert "ML101" in codes
    _validate(scenario)


@pytest.mark.slow  # every shared real config (tests/corpus checks them for false alarms)
def test_every_real_config(capsys, monkeypatch):
    monkeypatch.chdir(SHARED_REAL)
    doc = _sarif(capsys, ".", "--allow-outside-root", "--model", "llama3-8b", "--world-size", "16")
    assert len(doc["runs"][0]["results"]) > 100
    _validate(doc)
    notes_too = _sarif(capsys, ".", "--allow-outside-root", "--model", "llama3-8b",
                       "--world-size", "16", "--sarif-min-severity", "info")
    assert "note" in {r["level"] for r in notes_too["runs"][0]["results"]}
    _validate(notes_too)


def test_the_checker_catches_what_github_rejects():
    doc = {"runs": [{"tool": {"driver": {"name": "m", "rules": [
        {"id": "ML101", "helpUri": "https://example.org/ML101"}]}},
        "results": [{"ruleId": "ML101", "message": {"text": "x"}},
                    {"ruleId": "ML999", "message": {"text": "y"}, "locations": [
                        {"physicalLocation": {"artifactLocation": {"uri": "/abs/a.json"},
                                              "region": {}}}]}]}]}
    problems = "\n".join(github_problems(doc))
    for expected in ("helpUri", "0 locations", "not declared", "absolute path", "startLine"):
        assert expected in problems
