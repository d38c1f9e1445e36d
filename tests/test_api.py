"""The public API (memlint.check / estimate / plan / fit / compare) and run discovery, in process
(fast).

The same layouts go through the real pre-commit in tests/cli/test_precommit.py.
"""
import os

import pytest

import memlint
from memlint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DS = ('{\n  "train_micro_batch_size_per_gpu": %d,\n  "gradient_accumulation_steps": 1,\n'
      '  "bf16": {"enabled": true},\n  "zero_optimization": {"stage": 1}\n}\n')
# every input an out-of-memory verdict rests on is given (a default could flip it: a warning)
RUN = ('model = "llama3-8b"\ngpu = "H100-80GB"\nworld_size = 8\nseq_len = 4096\n'
       'recompute = "selective"\n')


def codes(result):
    return sorted({d.code for d in result.diagnostics})


def test_estimate_api():
    est = memlint.estimate(model="llama3-8b", world_size=8, tp=2, zero=1, seq_len=4096,
                           gpu="H100-80GB")
    assert est.fits and est.peak_bytes == max(s.total_bytes for s in est.stages)
    assert all(sum(t.bytes for t in s.terms) == s.total_bytes for s in est.stages)
    bigger = memlint.estimate(model="llama3-8b", world_size=8, tp=2, zero=1, seq_len=4096,
                              gpu="H100-80GB", settings={"micro_batch": 8})
    assert bigger.peak_bytes > est.peak_bytes
    with pytest.raises(memlint.MemlintError, match="neither a config.json"):
        memlint.estimate(model="./no-such-config.json")
    with pytest.raises(memlint.MemlintError, match="could not resolve"):
        memlint.estimate(model="no-such-org/no-such-model")
    with pytest.raises(memlint.MemlintError, match="needs a model"):
        memlint.estimate()


def test_plan_api_is_the_plan_command(capsys):
    """memlint.plan and `memlint plan --format json` are one search: same plans, same order;
    every plan's settings reproduce its estimate through memlint.estimate."""
    import json

    ranked = memlint.plan(model="llama3-8b", gpus=16, gpu="H100-80GB", global_batch=64, top=3)
    assert 1 <= len(ranked.plans) <= 3 and ranked.reason is None
    assert main(["plan", "--model", "llama3-8b", "--gpus", "16", "--gpu", "H100-80GB",
                 "--global-batch", "64", "--top", "3", "--format", "json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert [p["settings"] for p in cli["plans"]] == [p.settings for p in ranked.plans]
    best = ranked.plans[0]
    again = memlint.estimate(model="llama3-8b", world_size=16, gpu="H100-80GB", global_batch=64,
                             **best.settings)
    assert again.peak_bytes == best.estimate.peak_bytes
    with pytest.raises(memlint.MemlintError, match="GPU budget"):
        memlint.plan(model="llama3-8b", gpu="H100-80GB")


def test_check_api(repo):
    (repo / "ds_config.json").write_text(DS % 16)
    result = memlint.check(["ds_config.json"], model="llama3-8b", world_size=8, gpu="H100-80GB",
                           seq_len=4096, recompute="selective")
    assert result.exit_code == 1 and "ML101" in codes(result)
    [oom] = [d for d in result.diagnostics if d.code == "ML101"]
    assert (oom.path, oom.line) == ("ds_config.json", 2)   # the micro batch's line
    assert result.estimates and not result.estimates[0].fits
    assert memlint.check(["ds_config.json"], model="llama3-8b", world_size=8,
                         ignore=["ML1"]).exit_code == 0
    with pytest.raises(memlint.MemlintError, match="no such file"):
        memlint.check(["missing.json"])


def test_a_file_alone_is_checked_as_the_run_a_memlint_toml_above_lists(repo):
    (repo / "configs" / "deep").mkdir(parents=True)
    (repo / "configs" / "deep" / "ds_config.json").write_text(DS % 16)
    (repo / "configs" / "memlint.toml").write_text(
        RUN + 'files = ["deep/ds_config.json"]\n')
    result = memlint.check(["configs/deep/ds_config.json"])
    assert "ML101" in codes(result) and result.exit_code == 1
    (repo / "configs" / "deep" / "ds_config.json").write_text(DS % 1)
    assert memlint.check(["configs/deep/ds_config.json"]).exit_code == 0
    # a memlint.toml that does not list the file does not apply to it
    (repo / "configs" / "memlint.toml").write_text(RUN)
    (repo / "configs" / "deep" / "ds_config.json").write_text(DS % 16)
    assert "ML101" not in codes(memlint.check(["configs/deep/ds_config.json"]))


def test_the_model_file_a_run_names_belongs_to_the_run(repo):
    import shutil

    from conftest import ROOT

    shutil.copy(f"{ROOT}/fixtures/hf/Meta-Llama-3.1-8B.json", repo / "config.json")
    (repo / "ds_config.json").write_text(DS % 16)
    (repo / "memlint.toml").write_text('model = "config.json"\nfiles = ["ds_config.json"]\n'
                                       'world_size = 8\nseq_len = 4096\n')
    result = memlint.check(["config.json"])
    assert "ML101" in codes(result)   # not "a config.json alone describes a model"


def test_pyproject_groups_and_project_scenario(repo):
    (repo / "pyproject.toml").write_text(
        '[tool.memlint.scenario]\nmodel = "llama3-8b"\ngpu = "H100-80GB"\nworld_size = 8\n'
        'seq_len = 2048\nrecompute = "selective"\n\n'
        '[[tool.memlint.runs]]\nname = "long"\nfiles = ["long.json"]\n'
        'set = ["seq_len=16384"]\n')
    (repo / "long.json").write_text(DS % 2)
    (repo / "lone.json").write_text(DS % 2)
    long = memlint.check(["long.json"])
    assert "ML101" in codes(long)
    [oom] = [d for d in long.diagnostics if d.code == "ML101"]
    assert oom.path == "long.json"
    lone = memlint.check(["lone.json"])
    assert lone.exit_code == 0 and lone.estimates   # the project scenario gave model and GPUs
    # a file overriding a project default is no conflict
    (repo / "lone.memlint.toml").write_text('files = ["lone.json"]\nseq_len = 4096\n')
    assert "ML005" not in codes(memlint.check(["lone.json"]))


def test_a_file_shared_by_two_runs_is_checked_in_both(repo):
    (repo / "ds_config.json").write_text(DS % 4)
    (repo / "short.memlint.toml").write_text(RUN.replace("4096", "1024")
                                             + 'files = ["ds_config.json"]\n')
    (repo / "long.memlint.toml").write_text(RUN.replace("4096", "32768")
                                            + 'files = ["ds_config.json"]\n')
    result = memlint.check(["ds_config.json"])
    assert len(result.estimates) == 2 and "ML101" in codes(result)


def test_directories_are_walked_with_excludes(repo, capsys):
    (repo / "pyproject.toml").write_text('[tool.memlint]\nexclude = ["legacy"]\n')
    for folder in ("a", "legacy", "node_modules", ".hidden"):
        (repo / folder).mkdir()
        (repo / folder / "x.memlint.toml").write_text("zero = 9\n")
    (repo / "a" / "package.json").write_text('{"name": "web"}\n')
    result = memlint.check(["."])
    assert {d.path for d in result.diagnostics if d.code == "ML004"} == {"a/x.memlint.toml"}
    assert not any("package.json" in (d.path or "") for d in result.diagnostics)
    # a file given by name is linted even in an excluded folder
    assert memlint.check(["legacy/x.memlint.toml"]).exit_code == 1


def test_skip_unknown_and_one_exit_code_per_failure_kind(repo, capsys):
    (repo / "notes.yaml").write_text("just: data\n")
    assert main(["check", "notes.yaml", "--fail-on", "warning"]) == 1
    assert main(["check", "notes.yaml", "--fail-on", "warning", "--skip-unknown"]) == 0
    capsys.readouterr()
    (repo / "ds_config.json").write_text(DS % 1)
    for command in ("check", "estimate"):
        assert main([command, "ds_config.json", "--model", "./nope.json"]) == 2, command
        assert "neither a config.json" in capsys.readouterr().err
        assert main([command, "ds_config.json", "--model", "nope-org/nope"]) == 2, command
        assert "could not resolve" in capsys.readouterr().err
        # a bad value is a finding (exit 1), from a file or the command line alike
        assert main([command, "ds_config.json", "--model", "llama3-8b", "--set",
                     "tp=lots"]) == 1, command
        capsys.readouterr()


# ---------------------------------------------------------------------------------------------
# Every feature has an API door (issue 31): fit and compare, with the CLI calling them


def test_fit_from_python_is_what_the_cli_answers(capsys):
    import json as _json

    import memlint
    from memlint.cli import main

    result = memlint.fit(model="llama3-8b", world_size=8, gpu="H100-80GB", seq_len=4096, tp=2,
                         zero=1, questions=("micro_batch",))
    answer = result.answer("micro_batch")
    assert answer is not None and isinstance(answer.value, int) and answer.value >= 1
    assert main(["fit", "--model", "llama3-8b", "--set", "world_size=8", "--gpu", "H100-80GB",
                 "--set", "seq_len=4096", "--set", "tp=2", "--set", "zero=1", "--only",
                 "micro_batch", "--format", "json"]) == 0
    shown = _json.loads(capsys.readouterr().out)
    assert shown == _json.loads(_json.dumps(result.to_dict()))


def test_compare_from_python_reads_a_log(tmp_path):
    import memlint

    logs = os.path.join(ROOT, "fixtures", "logs")
    result = memlint.compare(os.path.join(logs, "torchtitan-llama3-8b-cp2.log"),
                             [os.path.join(logs, "torchtitan-llama3-8b-cp2.memlint.toml")])
    assert result.ranks and result.ranks[0].rows[0].metric == "max_reserved"
    with pytest.raises(memlint.MemlintError, match="no such file"):
        memlint.compare(str(tmp_path / "missing.log"))


def test_fit_and_compare_are_in_the_public_api():
    import memlint

    assert {"fit", "compare"} <= set(memlint.__all__)
    assert memlint.fit.__module__ == "memlint.api" and memlint.compare.__module__ == "memlint.api"


def test_severity_prints_its_name():
    from memlint.diagnostics import Severity

    assert str(Severity.ERROR) == "error" and f"{Severity.WARNING}" == "warning"
    assert f"{Severity.INFO:>6}" == "  info" and Severity.ERROR > Severity.WARNING


def test_each_subcommand_module_has_the_documented_entry_points():
    """memlint/commands/__init__.py: every module there but arguments.py (the parser) and fix.py
    (check --fix) is a subcommand with add_arguments(parser) and run(args), named in
    cli.COMMANDS."""
    import importlib

    from memlint.cli import COMMANDS

    folder = os.path.join(ROOT, "memlint", "commands")
    modules = {f"memlint.commands.{name[:-3]}" for name in os.listdir(folder)
               if name.endswith(".py") and name not in ("__init__.py", "arguments.py", "fix.py")}
    named = {c.arguments for c in COMMANDS.values() if isinstance(c.arguments, str)}
    assert modules == named
    for name in modules:
        module = importlib.import_module(name)
        assert callable(module.add_arguments) and callable(module.run), name
