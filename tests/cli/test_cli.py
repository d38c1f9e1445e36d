"""The real CLI: exit codes 0/1/2, no traceback on bad input, grouping, config, commands."""
import json
import os
import re
import subprocess
import sys

import pytest

from memlint import __version__
from memlint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--format", "json")
    return code, json.loads(out), err


def proc(*argv, cwd=None, env=None):
    environment = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    environment.update(env or {})
    return subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True,
                          env=environment, timeout=120)


def test_version_and_module_entry_point(repo):
    result = proc("-m", "memlint", "--version")
    assert result.returncode == 0 and __version__ in result.stdout
    (repo / "memlint.toml").write_text("zero = 5\n")
    result = proc("-m", "memlint", "check", "memlint.toml", cwd=repo)
    assert result.returncode == 1
    assert "memlint.toml:1:1: ML004 error invalid-value zero:" in result.stdout


def test_exit_codes(repo, capsys):
    (repo / "clean.memlint.toml").write_text("tp = 2\nsp = true\n")
    (repo / "bad.memlint.toml").write_text("tp = 4\nzero = 9\n")
    assert run(capsys, "check", "clean.memlint.toml")[0] == 0
    code, doc, _ = run_json(capsys, "check", "bad.memlint.toml")
    assert code == 1
    assert [(d["code"], d["line"]) for d in doc["diagnostics"]] == [
        ("ML006", 1), ("ML603", 1), ("ML004", 2)]
    # info findings fail only with --fail-on info
    assert run(capsys, "check", "clean.memlint.toml", "--set", "sp=false")[0] == 0
    assert run(capsys, "check", "clean.memlint.toml", "--set", "sp=false",
               "--fail-on", "info")[0] == 1
    assert run(capsys, "check", "bad.memlint.toml", "--ignore", "ML004")[0] == 0
    assert run(capsys, "check", "bad.memlint.toml", "--select", "ML6")[0] == 0


@pytest.mark.parametrize("argv,message", [
    (["check", "missing.json"], "missing.json: no such file"),
    (["check", "clean.memlint.toml", "--select", "exceeds-gpu-memry"], "did you mean"),
    (["check", "clean.memlint.toml", "--set", "novalue"], "--set: expected key=value"),
    (["check", "clean.memlint.toml", "--max-file-size", "lots"], "--max-file-size"),
    (["estimate", "."], "is a directory"),
    (["estimate", "clean.memlint.toml"], "no memory estimate"),
    (["explain", "ML999"], "no rule is called 'ML999'"),
    (["check", "clean.memlint.toml", "--format", "xml"], "invalid choice"),
    ([], "usage"),
])
def test_usage_errors_exit_2_with_one_line(repo, capsys, argv, message):
    (repo / "clean.memlint.toml").write_text("tp = 2\nsp = true\n")
    code, _out, err = run(capsys, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("name,content", [
    ("config.json", b"\x00\x01\x02garbage"),
    ("config.json", b'{"model_type": "llama", "hidden_size": "big"}'),
    ("config.json", b"[" * 5000),
    ("config.json", b"\xff\xfe not utf-8"),
    ("memlint.toml", b"[[[\n"),
    ("x.memlint.yaml", b"memlint: &a [*a, *a]\n"),
    ("x.memlint.yaml", b"memlint: !!python/object:os.system {}\n"),
    ("x.memlint.yaml", b"memlint:\n  model: {nested: [1, 2]}\n  tp: -3\n"),
    ("memlint.toml", b'model = "no-such-model"\nmicro_batch = "lots"\n'),
    ("memlint.toml", b'files = ["../../../etc/passwd", 7]\n'),
    ("random.bin", bytes(range(256)) * 10),
])
def test_garbage_never_gives_a_traceback(repo, name, content, capsys):
    """In process (main() is what the console script calls; an exception escaping it fails the
    test); test_version_and_module_entry_point runs the real process."""
    (repo / name).write_bytes(content)
    code, out, err = run(capsys, "check", name)
    assert code in (0, 1), err
    assert "Traceback" not in out + err
    assert out.strip()


def test_group_by_memlint_toml_files(repo, capsys):
    (repo / "base.memlint.toml").write_text("tp = 2\nmicro_batch = 2\n")
    (repo / "memlint.toml").write_text('files = ["base.memlint.toml"]\nsp = true\n')
    code, doc, _ = run_json(capsys, "check", "memlint.toml", "base.memlint.toml",
                            "--fail-on", "info")
    # one run: tp=2 from the referenced file, sp from the referrer: no ML603; one no-model note
    assert [d["code"] for d in doc["diagnostics"]] == ["ML006"]
    assert code == 1


def test_pyproject_config_select_per_file_runs_and_default_paths(repo, capsys):
    (repo / "pyproject.toml").write_text(
        '[tool.memlint]\nfiles = ["*.memlint.toml"]\nignore = ["no-model"]\nfail-on = "info"\n'
        '[tool.memlint.per-file-ignores]\n"legacy.memlint.toml" = ["ML6"]\n'
        '[[tool.memlint.runs]]\nname = "pair"\nfiles = ["a.memlint.toml", "b.memlint.toml"]\n'
        'set = ["sp=true"]\n')
    (repo / "a.memlint.toml").write_text("tp = 2\n")
    (repo / "b.memlint.toml").write_text("micro_batch = 1\n")
    (repo / "legacy.memlint.toml").write_text("tp = 8\n")
    (repo / "alone.memlint.toml").write_text("tp = 4  # memlint: disable=sequence-parallel-off\n")
    code, doc, _ = run_json(capsys, "check")
    assert code == 0, doc
    assert doc["diagnostics"] == []
    (repo / "alone.memlint.toml").write_text("tp = 4\n")
    code, doc, _ = run_json(capsys, "check")
    assert code == 1
    assert [(d["code"], d["path"]) for d in doc["diagnostics"]] == [
        ("ML603", "alone.memlint.toml")]


def test_bad_pyproject_is_exit_2(repo, capsys):
    (repo / "pyproject.toml").write_text('[tool.memlint]\nselekt = ["ML1"]\n')
    (repo / "memlint.toml").write_text("tp = 1\n")
    code, _, err = run(capsys, "check", "memlint.toml")
    assert code == 2 and "did you mean 'select'" in err


def test_no_paths_and_no_config(repo, capsys):
    code, _, err = run(capsys, "check")
    assert code == 2 and "no paths given" in err


def test_estimate_json_and_explain(repo, capsys):
    code, doc, _ = run_json(capsys, "estimate", "--model", "llama3-8b", "--set", "world_size=8",
                            "--set", "fsdp=full", "--set", "recompute=full", "--set",
                            "seq_len=2048", "--set", "micro_batch=1", "--select", "ML1")
    assert code == 0
    [est] = doc["estimates"]
    assert est["params"]["total"] > 8_000_000_000
    for stage in est["stages"]:
        assert sum(t["bytes"] for t in stage["terms"]) == stage["total_bytes"]
    code, out, _ = run(capsys, "estimate", "--model", "llama3-8b", "--set", "pp=2",
                       "--set", "world_size=8", "--explain", "--stage", "1", "--units", "GB")
    assert "Stage 1" in out and "Stage 0 " not in out and "total = sum of" in out
    code, _, err = run(capsys, "estimate", "--model", "llama3-8b", "--explain", "--stage", "5")
    assert code == 2 and "--stage 5" in err


def test_estimate_json_gives_each_stage_its_three_numbers(capsys, monkeypatch):
    """allocated / reserved / device per stage, as --explain prints them (and bench/accuracy.py
    compares them with logs); the JSON had only total_bytes (= device). The published torchtitan
    row tt-8b-fsdp8-eager (bench/data/calibration/gpu-published/manifest.json), whose three
    differ: the caching allocator's idle blocks and the CUDA context."""
    monkeypatch.chdir(os.path.join(ROOT, "bench", "data", "calibration", "gpu-published"))
    argv = ("estimate", "configs/torchtitan/llama3_8b_9dec370.toml", "--world-size", "8",
            "--set", "micro_batch=2", "--set", "gpu_memory=95GiB")
    code, doc, _ = run_json(capsys, *argv)
    assert code == 0
    [stage] = doc["estimates"][0]["stages"]
    _, explained, _ = run(capsys, *argv, "--explain")
    for key in ("allocated", "reserved", "device"):
        [number] = re.findall(rf"^  {key} = .* = ([\d,]+) B ", explained, re.M)
        assert stage[f"{key}_bytes"] == int(number.replace(",", "")), key
    assert stage["allocated_bytes"] < stage["reserved_bytes"] < stage["device_bytes"]
    assert stage["device_bytes"] == stage["total_bytes"]
    runtime = sum(t["bytes"] for t in stage["terms"] if t["component"] == "runtime")
    assert stage["allocated_bytes"] == stage["total_bytes"] - runtime


def test_check_with_model_runs_memory_rules(repo, capsys):
    (repo / "memlint.toml").write_text('model = "llama3-70b"\ngpu = "H100-80GB"\n'
                                       'world_size = 8\n')
    code, doc, _ = run_json(capsys, "check", "memlint.toml")
    assert code == 1
    [d] = [d for d in doc["diagnostics"] if d["code"] == "ML101"]
    assert d["rule"] == "exceeds-gpu-memory" and d["severity"] == "error"
    assert d["path"] == "memlint.toml" and d["line"] == 2
    assert doc["estimates"][0]["peak_bytes"] > doc["estimates"][0]["gpu"]["capacity_bytes"]
    code, out, _ = run(capsys, "check", "memlint.toml", "--no-color")
    assert "stage 0" in out and "| capacity 80.00 GiB" in out


def test_text_formats_and_quiet(repo, capsys):
    (repo / "memlint.toml").write_text('model = "llama3-8b"\ntp = 2\n')
    code, out, _ = run(capsys, "check", "memlint.toml", "--quiet", "--select", "ML6")
    [line] = out.splitlines()
    assert line.startswith("memlint.toml:2:1: ML603 info sequence-parallel-off tp=2 without "
                           "sequence parallelism")
    for fmt in ("sarif", "github", "junit"):
        code, out, _ = run(capsys, "check", "memlint.toml", "--format", fmt, "--select", "ML6")
        assert code == 0 and out.strip()


def test_rules_and_explain(capsys):
    code, out, _ = run(capsys, "rules", "--format", "json")
    rows = json.loads(out)
    assert code == 0 and {"ML101", "ML601", "ML001"} <= {r["code"] for r in rows}
    code, out, _ = run(capsys, "explain", "context-parallel-needed")
    assert code == 0 and out.startswith("ML103 context-parallel-needed")
    assert "Options:" in out and "min_seq_len (int, default 8192)" in out


def test_lazy_imports(repo):
    (repo / "memlint.toml").write_text("tp = 2\n")
    (repo / "config.json").write_text('{"model_type": "llama"}')
    probe = ("import sys; from memlint.cli import main; code = main(['check', sys.argv[1], "
             "'--quiet']); print(sorted(m for m in ('rich', 'yaml', 'jsonschema') "
             "if m in sys.modules))")
    for name in ("memlint.toml", "config.json"):
        result = proc("-c", probe, name, cwd=repo)
        assert result.stdout.strip().splitlines()[-1] == "[]", (name, result.stdout,
                                                               result.stderr)


def test_internal_error_in_rule_exits_2(repo, capsys, monkeypatch):
    from memlint.rules import registry
    from memlint.rules.strategy import SequenceParallelOff

    def boom(self, ctx):
        raise RuntimeError("kaput")

    monkeypatch.setattr(SequenceParallelOff, "check", boom)
    registry()  # built already; the instance's method is patched through the class
    (repo / "memlint.toml").write_text("tp = 2\n")
    code, out, err = run(capsys, "check", "memlint.toml")
    assert code == 2 and "ML009 error internal-error rule ML603 sequence-parallel-off failed: " \
        "RuntimeError: kaput" in out and "Traceback" not in err
    code, out, err = run(capsys, "check", "memlint.toml", "--debug")
    assert "Traceback" in err


def test_help_wraps_at_the_terminal_width_without_shutil(monkeypatch):
    # issue 19 (start-up): the width is read once, as shutil.get_terminal_size() would read it
    from memlint import cli
    from memlint.commands import arguments

    monkeypatch.setattr(arguments.Formatter, "width", None)
    monkeypatch.setenv("COLUMNS", "60")
    text = cli.build_parser().format_help()
    assert max(len(line) for line in text.splitlines()) <= 60
    assert arguments.Formatter.width == 58
    monkeypatch.setattr(arguments.Formatter, "width", None)
    monkeypatch.setenv("COLUMNS", "140")
    assert max(len(line) for line in cli.build_parser().format_help().splitlines()) > 60
