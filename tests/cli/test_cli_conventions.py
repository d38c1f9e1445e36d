"""The conventions people reach for: --output-file, `-` with --stdin-filename, --statistics,
shell completion, and a warning for a suppression that names no rule or turns nothing off."""
import io
import json
import sys

from memlint.cli import main

DS = '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1, "reduce_bucket_sise": 1}}\n'


def test_stdin_is_checked_as_the_named_file(repo, monkeypatch, capsys):
    (repo / "configs").mkdir()
    monkeypatch.setattr(sys, "stdin", io.StringIO(DS))
    assert main(["check", "-", "--stdin-filename", "configs/ds_config.json", "--format",
                 "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    [typo] = [d for d in out["diagnostics"] if d["code"] == "ML003"]
    assert typo["path"] == "configs/ds_config.json" and typo["severity"] == "error"
    assert out["summary"]["files"] == 1
    assert not (repo / "configs" / "ds_config.json").exists()   # nothing written
    monkeypatch.setattr(sys, "stdin", io.StringIO(DS))
    assert main(["check", "-"]) == 2
    assert "--stdin-filename" in capsys.readouterr().err


def test_stdin_takes_the_run_of_its_folder(repo, monkeypatch, capsys):
    (repo / "memlint.toml").write_text('files = ["ds_config.json"]\nmodel = "llama3-8b"\n'
                                       'world_size = 8\ngpu = "H100-80GB"\nrecompute = "full"\n')
    # on disk the run shards everything (ZeRO-3); standard input (an editor's unsaved text) not
    (repo / "ds_config.json").write_text('{"train_micro_batch_size_per_gpu": 1, '
                                         '"zero_optimization": {"stage": 3}}\n')
    assert main(["check", "ds_config.json", "--quiet"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"train_micro_batch_size_per_gpu": 1}\n'))
    assert main(["check", "-", "--stdin-filename", "ds_config.json", "--quiet"]) == 1
    assert "ML101" in capsys.readouterr().out   # 8B unsharded: the run's verdict


def test_output_file_is_written_by_the_safe_writer(repo, capsys):
    (repo / "ds.json").write_text(DS)
    assert main(["check", "ds.json", "--format", "sarif", "--output-file", "out.sarif"]) == 1
    assert capsys.readouterr().out == ""
    assert json.loads((repo / "out.sarif").read_text())["version"] == "2.1.0"
    (repo / "link.sarif").symlink_to(repo / "out.sarif")
    assert main(["check", "ds.json", "-o", "link.sarif"]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert main(["estimate", "--model", "llama3-8b", "--world-size", "8", "-o",
                 "estimate.txt"]) == 0
    assert "Estimate" in (repo / "estimate.txt").read_text()


def test_statistics_counts_each_code(repo, capsys):
    (repo / "a.json").write_text(DS)
    (repo / "b.json").write_text(DS.replace("sise", "sice"))
    assert main(["check", "a.json", "b.json", "--statistics"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["2", "ML003", "error", "unknown-key"]
    assert all(len(line.split()) == 4 for line in lines)


def test_statistics_with_format_json_is_json(repo, capsys):
    # fuzz (issue 30): `--format json --statistics` wrote the text table to a JSON reader
    (repo / "a.json").write_text(DS)
    (repo / "b.json").write_text(DS.replace("sise", "sice"))
    assert main(["check", "a.json", "b.json", "--statistics", "--format", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)["statistics"]
    assert rows[0] == {"code": "ML003", "rule": "unknown-key", "severity": "error", "count": 2}


def test_a_suppression_naming_no_rule_is_a_warning(repo, capsys):
    (repo / "run.memlint.toml").write_text(
        'model = "llama3-8b"  # memlint: disable=ML11O,batch-size-derivd\nworld_size = 8\n')
    main(["check", "run.memlint.toml", "--format", "json"])
    found = [d for d in json.loads(capsys.readouterr().out)["diagnostics"]
             if "directive" in d["message"]]
    assert [(d["code"], d["severity"], d["line"]) for d in found] == [
        ("ML003", "warning", 1), ("ML003", "warning", 1)]
    assert "did you mean 'batch-size-derived'" in " ".join(d["message"] for d in found)


def _unused(argv: list, capsys) -> list:
    main(argv + ["--format", "json"])
    return [(d["path"], d["line"], d["message"].split("'")[1])
            for d in json.loads(capsys.readouterr().out)["diagnostics"] if d["code"] == "ML011"]


def test_a_suppression_that_turns_nothing_off_is_a_warning(repo, capsys):
    (repo / "run.memlint.toml").write_text(
        'model = "llama3-8b"\nworld_size = 8\n'
        'tp = 2  # memlint: disable=ML204,sequence-parallel-off\n'
        '# memlint: disable=unknown-key\nseq_lenn = 4096\n'
        'pp = 1  # memlint: disable=ML001\n')
    # ML204 finds nothing at tp 2 (32 heads), ML001 nothing anywhere; ML603 and ML003 are used
    assert _unused(["check", "run.memlint.toml"], capsys) == [
        ("run.memlint.toml", 3, "ML204"), ("run.memlint.toml", 6, "ML001")]
    assert _unused(["check", "run.memlint.toml", "--ignore", "ML011"], capsys) == []
    # a rule turned off is not judged: its directive may matter where it is on
    assert _unused(["check", "run.memlint.toml", "--ignore", "ML204"], capsys) == [
        ("run.memlint.toml", 6, "ML001")]
    # without an estimate only the problems found before the rules run are judged
    (repo / "run.memlint.toml").write_text('tp = 2  # memlint: disable=ML204\n'
                                          'pp = 1  # memlint: disable=ML001\n')
    assert _unused(["check", "run.memlint.toml"], capsys) == [("run.memlint.toml", 2, "ML001")]


def test_a_file_shared_by_runs_is_judged_on_all_of_them(repo, capsys):
    # train_batch_size 32 = 4 x 1 x dp 8: right in the 8-GPU run, ML301 in the 16-GPU one
    (repo / "ds_config.json").write_text(
        '{\n  "memlint": {"disable": ["batch-size-mismatch"]},\n  "train_batch_size": 32,\n'
        '  "train_micro_batch_size_per_gpu": 4,\n  "gradient_accumulation_steps": 1,\n'
        '  "zero_optimization": {"stage": 3}\n}\n')
    for gpus in (8, 16):
        (repo / f"w{gpus}.memlint.toml").write_text(
            f'files = ["ds_config.json"]\nmodel = "llama3-8b"\ngpu = "H100-80GB"\n'
            f'world_size = {gpus}\nseq_len = 1024\n')
    assert _unused(["check", "w8.memlint.toml"], capsys) == [
        ("ds_config.json", 2, "batch-size-mismatch")]
    assert _unused(["check", "w16.memlint.toml"], capsys) == []
    assert _unused(["check", "w8.memlint.toml", "w16.memlint.toml"], capsys) == []
    assert _unused(["check", "ds_config.json"], capsys) == []   # both runs it belongs to


def _completions(script: str, *words: str) -> list:
    import shutil
    import subprocess

    if shutil.which("bash") is None:
        import pytest
        pytest.skip("bash is not installed")
    line = " ".join(f"'{w}'" for w in words)
    done = subprocess.run(["bash", "-c", f'source /dev/stdin <<\'EOF\'\n{script}\nEOF\n'
                           f'COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _memlint; '
                           'printf "%s\\n" "${COMPREPLY[@]}"'],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_completion_scripts_come_from_the_parser(capsys):
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert _completions(script, "memlint", "ch") == ["check"]
    assert _completions(script, "memlint", "check", "--fo") == ["--format"]
    assert "sarif" in _completions(script, "memlint", "check", "--format", "")
    assert _completions(script, "memlint", "plan", "--for") == ["--format"]
    assert _completions(script, "memlint", "completion", "f") == ["fish"]
    assert main(["completion", "zsh"]) == 0
    zsh = capsys.readouterr().out
    assert zsh.startswith("#compdef memlint\n") and "bashcompinit" in zsh
    assert main(["completion", "fish"]) == 0
    fish = capsys.readouterr().out.splitlines()
    assert "complete -c memlint -f -n '__fish_use_subcommand' -a check -d 'lint config files'" \
        in fish
    assert any("-l fail-on -x -a 'error warning info'" in line for line in fish)
    assert all(line.startswith(("complete -c memlint ", "#")) for line in fish)


# ---------------------------------------------------------------------------------------------
# Report polish


def test_plan_says_it_is_searching_when_it_takes_long(monkeypatch, capsys):
    from memlint.commands import plan

    monkeypatch.setattr(plan, "PROGRESS_AFTER", 0.0)
    assert main(["plan", "--model", "llama3-8b", "--gpus", "8", "--gpu", "H100", "--top",
                 "1"]) == 0
    err = capsys.readouterr().err
    assert "memlint plan: searching the layouts of 8 GPUs (" in err


def test_plan_reproduce_lines_are_one_line_however_narrow(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "60")
    assert main(["plan", "--model", "llama3.1-405b", "--gpus", "1024", "--gpu", "H100",
                 "--seq-len", "8192", "--global-batch", "1024", "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    reproduce = [line for line in lines if line.startswith("#1 ")]
    assert len(reproduce) == 1 and reproduce[0].endswith("--set offload_params=none")
    follows = lines[lines.index(reproduce[0]) + 1]
    assert not follows.startswith("--set") and "first_stage_layers" in reproduce[0]


def test_html_labels_the_headroom_line_and_plans_show_offload(capsys):
    assert main(["estimate", "--model", "llama3-8b", "--world-size", "8", "--format",
                 "html"]) == 0
    page = capsys.readouterr().out
    assert 'class="margin-label"' in page and "10% headroom" in page
    assert main(["plan", "--model", "llama3-70b", "--gpus", "16", "--gpu", "H100", "--top",
                 "3", "--format", "html"]) == 0
    plans = capsys.readouterr().out
    assert "<th>offload</th>" in plans and plans.count("<td>-</td>") + plans.count(
        "<td>opt</td>") + plans.count("<td>params+opt</td>") >= 1


def test_compare_warns_before_writing_assumptions_over_other_states(repo, capsys):
    import os
    import shutil

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    shutil.copy(os.path.join(root, "fixtures", "logs", "megatron-gpt2-v100.log"), repo)
    assert main(["compare", "megatron-gpt2-v100.log", "--model", "llama3-8b", "--set",
                 "gpu=V100-32GB", "--write-assumptions", "pyproject.toml"]) in (0, 2)
    err = capsys.readouterr().err
    assert "memlint: warning: rank 0: the model states measure" in err
    assert "the assumptions written below would hide it" in err


def test_the_likely_settings_follow_the_ratio():
    from types import SimpleNamespace

    from memlint.comparison import _likely_settings

    scenario = SimpleNamespace(parallelism=SimpleNamespace(dp=8, zero=1, fsdp="none", tp=2,
                                                           pp=1))
    assert "zero / fsdp / world_size" in _likely_settings(8.1, scenario)
    assert "zero / fsdp / world_size" in _likely_settings(1 / 7.8, scenario)
    assert "tp (the estimate splits layers over tp 2)" in _likely_settings(2.05, scenario)
    assert "bytes per parameter" in _likely_settings(1.5, scenario)
