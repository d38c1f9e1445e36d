"""Every output memlint gives on the corpus, in one JSON, to compare before and after a change.

A refactor must leave memlint's answers byte-identical (issues 29 and 31). This runs, in one
process, through the same entry point as the command line:
- `check --format json` on every file of `fixtures/real-world/` (each alone, and each group of
  its `verdicts.json` `runs` as one run, as tests/corpus/test_real_world.py lints them), of
  `fixtures/shared-real/` and of `fixtures/examples/`;
- `check --format json` on every other config under `fixtures/` (adapters, rules, megatron-ci,
  logs' runs), and `estimate` of every model of `fixtures/hf/` on 8 GPUs;
- a handful of `estimate`, `plan`, `fit` and `compare` scenarios (below);
- every row of `bench/accuracy.py --json` (the calibration sets: CPU, Megatron-LM CI on H100,
  published GPU runs), each record's predicted bytes and components as the benchmark computes them.

Per case it records the exit code, each diagnostic (code, severity, path, line, column, message),
each estimate's peak and per-stage totals (phase, allocated/reserved/device/total bytes, the
components), the whole JSON of `plan`, `fit` and `compare`, and a SHA-256 of the whole stdout and stderr (the memlint version and the planner's wall time taken out), so that
a change anywhere in the output shows even where the summary fields agree.

    python bench/corpus_outputs.py --out /tmp/before.json        # on the old code
    python bench/corpus_outputs.py --compare /tmp/before.json    # on the new code: the differences
    python bench/corpus_outputs.py --compare A.json --against B.json   # two saved runs
    python bench/corpus_outputs.py --root ../old-checkout --out /tmp/before.json   # another tree

`--compare` prints one block per case that changed (or appeared, or went) and exits 1 if any did,
0 if every case is identical. Paths are given relative to the repository root, and the root's absolute
path is written `<root>` in the outputs, so two checkouts in different folders give the same file. The Hugging Face cache is pointed at an empty folder and
the Hub is off, as in the tests, so that a developer's cache does not change the answers.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _root_from_argv(argv: list) -> str:
    """--root DIR, read before memlint is imported: the checkout whose code and corpus run."""
    for i, arg in enumerate(argv):
        if arg == "--root" and i + 1 < len(argv):
            return os.path.abspath(argv[i + 1])
        if arg.startswith("--root="):
            return os.path.abspath(arg.split("=", 1)[1])
    return ROOT


ROOT = _root_from_argv(sys.argv[1:])
sys.path.insert(0, ROOT)

REAL_WORLD = "fixtures/real-world"
SHARED_REAL = "fixtures/shared-real"
EXAMPLES = "fixtures/examples"
HF = "fixtures/hf"
# the other fixture folders, every config file in them checked alone
OTHER_FIXTURES = ("fixtures/adapters", "fixtures/rules", "fixtures/megatron-ci", "fixtures/logs")
CONFIG_EXTENSIONS = (".json", ".hjson", ".yaml", ".yml", ".toml", ".sh", ".txt", ".py", ".cfg")

# name -> command line (paths relative to the repository root)
SCENARIOS = {
    "estimate/example": ["estimate", f"{EXAMPLES}/llama3-8b-h100.memlint.toml"],
    "estimate/llama3-70b-fsdp2": ["estimate", "--model", "llama3-70b", "--set", "framework=fsdp2",
                                  "--set", "fsdp=full", "--world-size", "64", "--set",
                                  "seq_len=8192", "--set", "recompute=full"],
    "estimate/llama3-8b-zero1": ["estimate", "--model", "llama3-8b", "--world-size", "8",
                                 "--set", "tp=2", "--set", "zero=1"],
    "estimate/mixtral-zero3-offload": ["estimate", "--model", "mixtral-8x7b", "--set",
                                       "framework=deepspeed", "--set", "zero=3", "--set",
                                       "offload_optimizer=cpu", "--world-size", "16"],
    "estimate/deepseek-v3-megatron": ["estimate", "fixtures/adapters/megatron/good/"
                                      "deepseek_v3_mla_moe.sh", "--world-size", "1024"],
    "estimate/lora-70b": ["estimate", "--model", "llama3-70b", "--set", "framework=hf",
                          "--set", "lora_rank=16", "--set", "base_quant=nf4", "--world-size", "1"],
    "estimate/seed-m3": ["estimate", "--model", "seed-m3", "--set", "profile=seed", "--set",
                         "tp=4", "--set", "pp=4", "--set", "dp=4", "--set", "ep=8", "--set",
                         "zero=2", "--set", "recompute=full", "--set", "micro_batch=2"],
    "plan/llama3-70b-64": ["plan", "--model", "llama3-70b", "--gpus", "64", "--gpu", "H100",
                           "--seq-len", "8192", "--global-batch", "512"],
    "fit/example": ["fit", f"{EXAMPLES}/llama3-8b-h100.memlint.toml"],
    "compare/megatron-deepseek-v3-proxy": [
        "compare", "fixtures/logs/megatron-deepseek-v3-proxy.log",
        "fixtures/logs/megatron-deepseek-v3-proxy.memlint.toml"],
    "compare/torchtitan-llama3-8b-cp2": [
        "compare", "fixtures/logs/torchtitan-llama3-8b-cp2.log",
        "fixtures/logs/torchtitan-llama3-8b-cp2.memlint.toml"],
}


def _files(folder: str) -> list:
    out = []
    for directory, _dirs, names in os.walk(os.path.join(ROOT, folder)):
        out += [os.path.relpath(os.path.join(directory, n), ROOT).replace(os.sep, "/")
                for n in names if n.endswith(CONFIG_EXTENSIONS)]
    return sorted(out)


def cases() -> dict:
    """name -> ("cli", argv) or ("run", [files], [extra args])."""
    with open(os.path.join(ROOT, REAL_WORLD, "verdicts.json"), encoding="utf-8") as handle:
        verdicts = json.load(handle)
    out: dict = {}
    for name in sorted(verdicts["files"]):
        out[f"real-world/{name}"] = ("cli", ["check", f"{REAL_WORLD}/{name}"])
    for name, entry in sorted(verdicts["runs"].items()):
        out[f"real-world-run/{name}"] = ("run", [f"{REAL_WORLD}/{p}" for p in entry["files"]],
                                         list(entry.get("args", ())))
    for path in _files(SHARED_REAL) + _files(EXAMPLES):
        out[path.split("/", 1)[1]] = ("cli", ["check", path])
    for folder in OTHER_FIXTURES:
        for path in _files(folder):
            if not os.path.basename(path).startswith("_expect"):
                out[path.split("/", 1)[1]] = ("cli", ["check", path])
    for path in _files(HF):
        if path.endswith(".json"):
            out[f"estimate/{path.split('/', 1)[1]}"] = (
                "cli", ["estimate", "--model", path, "--world-size", "8"])
    for name, argv in SCENARIOS.items():
        out[name] = ("cli", argv)
    return out


def _run_cli(argv: list) -> tuple:
    from memlint.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv + ["--format", "json"])
        except SystemExit as stop:  # argparse
            code = stop.code if isinstance(stop.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _run_group(files: list, extra: list) -> tuple:
    """A `runs` group of verdicts.json linted as one run, as the corpus test does."""
    from memlint import report as reporters
    from memlint.api import one_run, run_pipeline
    from memlint.cli import build_parser, options_from
    from memlint.engine import exit_code
    from memlint.report import Report
    from memlint.rules import registry

    args = build_parser().parse_args(["check", *files, "--format", "json", *extra])
    options = options_from(args)
    reg = registry()
    run = one_run(files, options)
    diagnostics, estimate = run_pipeline(run, options, reg)
    report = Report(diagnostics=diagnostics, estimates=[estimate] if estimate else [],
                    units="GiB", registry=reg, fail_on=run.config.fail_on)
    return exit_code(diagnostics, run.config.fail_on), reporters.render("json", report), ""


# what differs from one run to the next by design: the version string, the planner's wall time
_VOLATILE = re.compile(r'"(memlint_version|seconds)": ("[^"]*"|[-+0-9.eE]+)')


def _summary(stdout: str) -> dict:
    try:
        doc = json.loads(stdout)
    except ValueError:
        return {}
    if not isinstance(doc, dict):
        return {}
    out: dict = {}
    if isinstance(doc.get("diagnostics"), list):
        out["diagnostics"] = [{k: d.get(k) for k in ("code", "severity", "path", "line",
                                                      "column", "message")}
                              for d in doc["diagnostics"]]
    if isinstance(doc.get("estimates"), list):
        out["estimates"] = [{
            "peak_bytes": e.get("peak_bytes"),
            "stages": [{k: s.get(k) for k in ("stage", "phase", "allocated_bytes",
                                               "reserved_bytes", "device_bytes", "total_bytes",
                                               "components")}
                       for s in e.get("stages", [])]} for e in doc["estimates"]]
    return out


def _parsed(stdout: str):
    try:
        return json.loads(_VOLATILE.sub(r'"\1": null', stdout))
    except ValueError:
        return None


def _digest(text: str) -> str:
    return hashlib.sha256(_VOLATILE.sub(r'"\1": null', text).encode()).hexdigest()


def run_all(selected: list = ()) -> dict:
    os.chdir(ROOT)
    # a fixed path (messages name it), empty: no model resolves from a developer's cache
    os.environ["HF_HUB_CACHE"] = os.path.join(tempfile.gettempdir(), "memlint-corpus-no-hf-cache")
    os.environ.pop("MEMLINT_HUB", None)
    results = {}
    for name, case in cases().items():
        if selected and not any(s in name for s in selected):
            continue
        if case[0] == "cli":
            code, out, err = _run_cli(case[1])
            argv = case[1]
        else:
            code, out, err = _run_group(case[1], case[2])
            argv = ["check", *case[1], *case[2], "(one run)"]
        # messages name some absolute paths: the same file in another checkout is the same
        out, err = out.replace(ROOT, "<root>"), err.replace(ROOT, "<root>")
        results[name] = {"argv": argv, "exit": code, **_summary(out),
                         "stdout_sha256": _digest(out), "stderr_sha256": _digest(err)}
        if argv[0] in ("plan", "fit", "compare"):  # their own JSON shapes: kept whole
            results[name]["output"] = _parsed(out)
    if not selected or any("accuracy" in s for s in selected):
        results.update(accuracy_rows())
    return results


def accuracy_rows() -> dict:
    """Each row of `bench/accuracy.py --json`, as a case `accuracy/<set>/<id>`."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import accuracy  # bench/accuracy.py of the checkout that runs

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        accuracy.main(["--json"])
    text = out.getvalue()
    doc = json.loads(text[text.index("{"):])  # the JSON follows any printed tables
    return {f"accuracy/{name}/{row.get('id')}": {"argv": ["bench/accuracy.py", "--json"], **row}
            for name, rows in sorted(doc.items()) for row in rows}


def _changes(before, after, path: str = "") -> list:
    """Differences between two JSON values, as 'path: before -> after' lines."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in sorted(set(before) | set(after), key=str):
            if key not in after:
                out.append(f"{path}.{key}: removed (was {json.dumps(before[key])[:200]})")
            elif key not in before:
                out.append(f"{path}.{key}: new {json.dumps(after[key])[:200]}")
            else:
                out += _changes(before[key], after[key], f"{path}.{key}")
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [c for i, (b, a) in enumerate(zip(before, after))
                for c in _changes(b, a, f"{path}[{i}]")]
    if before != after:
        return [f"{path}: {json.dumps(before)[:200]} -> {json.dumps(after)[:200]}"]
    return []


def compare(before: dict, after: dict) -> list:
    """One text block per case that differs."""
    blocks = []
    for name in sorted(set(before) | set(after)):
        if name not in after:
            blocks.append(f"{name}: gone")
        elif name not in before:
            blocks.append(f"{name}: new (exit {after[name]['exit']})")
        else:
            lines = [c for c in _changes(before[name], after[name]) if not c.startswith(".argv")]
            if lines:
                blocks.append(f"{name}:\n  " + "\n  ".join(lines))
    return blocks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the outputs to this JSON file")
    parser.add_argument("--compare", metavar="BEFORE", help="compare with a saved JSON")
    parser.add_argument("--against", metavar="AFTER",
                        help="with --compare: a second saved JSON instead of a fresh run")
    parser.add_argument("--root", default=ROOT,
                        help="the checkout to run (its memlint and its corpus); default: this one")
    parser.add_argument("--only", action="append", default=[],
                        help="only the cases whose name contains this (repeatable)")
    args = parser.parse_args(argv)
    if args.against and not args.compare:
        parser.error("--against needs --compare")
    if args.against:
        with open(args.against, encoding="utf-8") as handle:
            results = json.load(handle)
    else:
        results = run_all(args.only)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1, sort_keys=True)
            handle.write("\n")
    if not args.compare:
        if not args.out:
            json.dump(results, sys.stdout, indent=1, sort_keys=True)
            sys.stdout.write("\n")
        else:
            print(f"{len(results)} cases written to {args.out}")
        return 0
    with open(args.compare, encoding="utf-8") as handle:
        before = json.load(handle)
    if args.only:
        before = {k: v for k, v in before.items() if any(s in k for s in args.only)}
    blocks = compare(before, results)
    for block in blocks:
        print(block)
    print(f"{len(results)} cases, {len(blocks)} differ from {args.compare}")
    return 1 if blocks else 0


if __name__ == "__main__":
    sys.exit(main())
