"""The conventions people reach for: --output-file, `-` with --stdin-filename, --statistics,
shell completion, and a warning for a suppression that names no rule."""
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


def test_a_suppression_naming_no_rule_is_a_warning(repo, capsys):
    (repo / "run.memlint.toml").write_text(
        'model = "llama3-8b"  # memlint: disable=ML11O,batch-size-derivd\nworld_size = 8\n')
    main(["check", "run.memlint.toml", "--format", "json"])
    found = [d for d in json.loads(capsys.readouterr().out)["diagnostics"]
             if "directive" in d["message"]]
    assert [(d["code"], d["severity"], d["line"]) for d in found] == [
        ("ML003", "warning", 1), ("ML003", "warning", 1)]
    assert "did you mean 'batch-size-derived'" in " ".join(d["message"] for d in found)


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
