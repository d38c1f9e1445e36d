"""`memlint check --fix` / `--diff` (memlint/fixes.py, memlint/commands/fix.py): safe fixes as
position edits that keep everything else in the file, verified before they are written, written
through the safe writer; the corpus round-trips unchanged where there is nothing to fix."""
import filecmp
import os
import shutil

import pytest

from memlint import fixes
from memlint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DS = """{
  // a comment DeepSpeed's hjson loader keeps: so does the fix
  "train_micro_batch_size_per_gpu": 1,
  "gradient_accumulation_steps": 1,
  "bfloat16": {"enabled": true},
  "zero_optimization": {
    "stage": 2,
    "cpu_offload": true,
    "reduce_bucket_sise": 5e8
  }
}
"""
DS_FIXED = DS.replace('"bfloat16"', '"bf16"').replace(
    '"cpu_offload": true', '"offload_optimizer": {"device": "cpu"}').replace(
    "reduce_bucket_sise", "reduce_bucket_size")


def test_diff_shows_the_fixes_and_writes_nothing(repo, capsys):
    (repo / "ds_config.json").write_text(DS)
    assert main(["check", "ds_config.json", "--diff"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("--- a/ds_config.json\n+++ b/ds_config.json\n")
    assert '-  "bfloat16": {"enabled": true},\n+  "bf16": {"enabled": true},' in out
    assert '+    "offload_optimizer": {"device": "cpu"},' in out
    assert "3 fix(es) in 1 file(s) would be made" in err
    assert (repo / "ds_config.json").read_text() == DS


def test_fix_writes_them_keeping_the_rest_and_reports_what_is_left(repo, capsys):
    (repo / "ds_config.json").write_text(DS)
    code = main(["check", "ds_config.json", "--fix", "--format", "json"])
    out, err = capsys.readouterr()
    assert (repo / "ds_config.json").read_text() == DS_FIXED
    assert "fixed 3 finding(s) in 1 file(s)" in err
    codes = {d["code"] for d in __import__("json").loads(out)["diagnostics"]}
    assert not codes & {"ML003", "ML308"} and code == 0
    assert [p.name for p in repo.iterdir() if p.name.startswith(".ds_config")] == []   # no lock
    assert main(["check", "ds_config.json", "--diff"]) == 0   # nothing left to fix


def test_a_renamed_block_reveals_its_own_typo_and_that_is_fixed_too(repo, capsys):
    # zero_optimisation is ignored by DeepSpeed (a warning: never renamed by --fix) ...
    text = '{"train_micro_batch_size_per_gpu": 1, "zero_optimisation": {"stage": 1}}\n'
    (repo / "ds.json").write_text(text)
    assert main(["check", "ds.json", "--diff"]) == 0
    assert capsys.readouterr().out == ""
    # ... but the editor's quick fix offers it (memlint/lsp), for the author to choose
    from memlint.document import analyze

    found = analyze(str(repo / "ds.json"), {})
    [typo] = [d for d in found.diagnostics if d.code == "ML003"]
    assert fixes.rename(typo, text.splitlines()) is None
    assert fixes.rename(typo, text.splitlines(), ignored_keys=True).edits[0].text == \
        "zero_optimization"


def test_memlint_toml_and_yaml_keys(repo, capsys):
    (repo / "run.memlint.toml").write_text('# the run\nmodel = "llama3-8b"\ntpp = 2  # tensor\n'
                                           'world_sise = 8\n')
    (repo / "run.memlint.yaml").write_text("memlint:\n  model: llama3-8b  # the model\n"
                                           "  micro_bacth: 2\n")
    assert main(["check", "run.memlint.toml", "run.memlint.yaml", "--fix", "--quiet"]) in (0, 1)
    capsys.readouterr()
    assert (repo / "run.memlint.toml").read_text() == ('# the run\nmodel = "llama3-8b"\n'
                                                      'tp = 2  # tensor\nworld_size = 8\n')
    assert (repo / "run.memlint.yaml").read_text() == ("memlint:\n  model: llama3-8b  # the "
                                                      "model\n  micro_batch: 2\n")


def test_only_a_clear_match_is_fixed():
    assert fixes.clear_match("zero_optimisation", "zero_optimization")
    assert fixes.clear_match("tpp", "tp") and fixes.clear_match("--num-layer", "--num-layers")
    assert not fixes.clear_match("zero_opt", "zero_optimization")
    assert not fixes.clear_match("lr", "tp") and not fixes.clear_match("ep", "dp")
    assert fixes._distance("abcd", "abdc") == 1 and fixes._distance("kitten", "sitting") == 3


def test_a_shell_flag_rename_is_a_position_edit():
    from memlint.diagnostics import Diagnostic, Severity

    lines = ["torchrun pretrain_gpt.py \\", "  --num-layer 2 --num-layers-x 3 \\"]
    d = Diagnostic("ML003", "unknown-key", Severity.WARNING, "unknown Megatron flag "
                   "--num-layer; did you mean --num-layers?", "train.sh", 2, 3)
    [edit] = fixes.rename(d, lines, ignored_keys=True).edits
    assert (edit.start, edit.end, edit.text) == ((2, 3), (2, 14), "--num-layers")
    assert fixes.apply("\n".join(lines), [edit]).splitlines()[1] == \
        "  --num-layers 2 --num-layers-x 3 \\"


def test_fix_refuses_a_symbolic_link_and_a_file_outside_the_root(repo, tmp_path_factory, capsys):
    (repo / "real.json").write_text(DS)
    (repo / "link.json").symlink_to(repo / "real.json")
    assert main(["check", "link.json", "--fix", "--quiet"]) == 2
    assert "link.json is a symbolic link; not written" in capsys.readouterr().err
    assert (repo / "real.json").read_text() == DS
    outside = tmp_path_factory.mktemp("outside") / "ds.json"
    outside.write_text(DS)
    assert main(["check", str(outside), "--fix", "--quiet"]) == 2
    assert "outside the repository root" in capsys.readouterr().err
    assert outside.read_text() == DS
    assert main(["check", str(outside), "--fix", "--quiet", "--allow-outside-root"]) in (0, 1)
    capsys.readouterr()
    assert outside.read_text() == DS_FIXED   # only where the user allows it


@pytest.mark.slow   # the whole real-world corpus and the shared real configs, fixed in a copy
def test_the_corpus_round_trips_unchanged_where_there_is_nothing_to_fix(tmp_path, monkeypatch,
                                                                       capsys):
    for name in ("real-world", "shared-real"):
        shutil.copytree(os.path.join(ROOT, "fixtures", name), tmp_path / name)
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    main(["check", "real-world", "shared-real", "--fix", "--quiet"])
    capsys.readouterr()
    changed, planned = [], ""
    for name in ("real-world", "shared-real"):
        for folder, _dirs, files in os.walk(os.path.join(ROOT, "fixtures", name)):
            for file in files:
                original = os.path.join(folder, file)
                copy = tmp_path / os.path.relpath(original, os.path.join(ROOT, "fixtures"))
                if not filecmp.cmp(original, copy, shallow=False):
                    changed.append(str(copy.relative_to(tmp_path)))
                    with open(original, encoding="utf-8") as old:
                        planned += fixes.diff(changed[-1], old.read(), copy.read_text())
    # every changed line is one of the fixes; every other file is byte for byte the same
    assert 10 <= len(changed) < 60
    lines = [line for line in planned.splitlines() if line[:1] in "+-"
             and not line.startswith(("+++", "---"))]
    assert all(any(word in line for word in ("bf16", "bfloat16", "offload", "16bit",
                                             "fp16_weights", "persistence", "persitance",
                                             "persitence", "cpu_offload_param"))
               for line in lines), lines
    # a second run has nothing left to fix (a file left unchanged had nothing to fix)
    assert main(["check", *changed, "--diff"]) in (0, 1)
    assert capsys.readouterr().out == ""
