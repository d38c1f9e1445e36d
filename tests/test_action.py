"""The GitHub Action (action.yml + action/*.sh), run locally as the runner would run it
(tests/action_runner.py), including the README's recipe from a copy of memlint's source tree."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "action", "run.sh")
GATE = os.path.join(ROOT, "action", "upload-allowed.sh")
needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


def _action() -> dict:
    with open(os.path.join(ROOT, "action.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_action_is_a_composite_that_runs_the_script():
    with open(os.path.join(ROOT, "action.yml"), encoding="utf-8") as handle:
        action = yaml.safe_load(handle)
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    text = yaml.safe_dump(action)
    for name in action["inputs"]:
        assert f"inputs.{name}" in text, f"input {name} is never used"
    assert any("action/run.sh" in step.get("run", "") for step in steps)
    upload = [s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif")]
    # v3 is deprecated (github/codeql-action#3271); the upload waits for the fork gate
    assert [s["uses"] for s in upload] == ["github/codeql-action/upload-sarif@v4"]
    assert "steps.upload.outputs.allowed == 'true'" in upload[0]["if"]
    assert all(step.get("shell") == "bash" for step in steps if "run" in step)
    # workflow expressions never expand inside a script (no injection through a step output)
    assert not any("${{" in step.get("run", "") for step in steps)


def test_the_expression_evaluator_reads_what_action_yml_writes():
    from action_runner import condition, substitute

    contexts = {"inputs": {"sarif": "true", "sarif-file": "m.sarif"}, "runner": {"os": "Linux"},
                "steps": {"upload": {"outputs": {"allowed": "false"}}}}
    assert substitute("${{ inputs.sarif == 'true' && inputs.sarif-file || '' }}", contexts) \
        == "m.sarif"
    contexts["inputs"]["sarif"] = "false"
    assert substitute("${{ inputs.sarif == 'true' && inputs.sarif-file || '' }}", contexts) == ""
    assert not condition("${{ runner.os == 'Windows' }}", contexts)
    assert not condition("inputs.sarif == 'true' && steps.upload.outputs.allowed == 'true'",
                         contexts)
    assert condition("!(steps.missing.outputs.x == 'true')", contexts)


def _gate(tmp_path, **github) -> tuple:
    output = tmp_path / "gate-output.txt"
    output.write_text("")
    env = dict(os.environ, GITHUB_OUTPUT=str(output), MEMLINT_REPO="me/trainer",
               **{f"MEMLINT_{k.upper()}": v for k, v in github.items()})
    done = subprocess.run(["bash", GATE], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return output.read_text(), done.stdout


@needs_bash
@pytest.mark.parametrize("event,head,actor,allowed", [
    ("push", "", "me", True),
    ("pull_request", "me/trainer", "me", True),
    ("pull_request", "someone/trainer", "someone", False),     # a fork: read-only token
    ("pull_request", "me/trainer", "dependabot[bot]", False),  # Dependabot: read-only token
    ("pull_request_target", "someone/trainer", "someone", True),  # runs with the base's token
    ("schedule", "", "me", True),
])
def test_forks_and_dependabot_skip_the_upload_with_a_notice(tmp_path, event, head, actor,
                                                            allowed):
    output, stdout = _gate(tmp_path, event=event, head_repo=head, actor=actor)
    assert output == f"allowed={'true' if allowed else 'false'}\n"
    assert ("::notice title=memlint::SARIF not uploaded" in stdout) is (not allowed)


@needs_bash
def test_the_job_summary_is_cut_below_one_mib(tmp_path):
    fake = tmp_path / "fake_memlint.py"
    fake.write_text("import sys\n"
                    "if 'markdown' in sys.argv:\n"
                    "    print('## memlint report')\n"
                    "    for i in range(40000):\n"
                    "        print(f'| {i} | configs/ds_config.json | ML102 | ' + 'x' * 40 + ' |')\n"
                    "sys.exit(0)\n")
    summary = tmp_path / "summary.md"
    summary.write_text("# an earlier step's summary\n")
    env = dict(os.environ, MEMLINT=f"{sys.executable} {fake}", MEMLINT_SUMMARY="true",
               GITHUB_STEP_SUMMARY=str(summary))
    done = subprocess.run(["bash", SCRIPT], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    data = summary.read_bytes()
    assert 900_000 < len(data) <= 1_000_000 < 1024 * 1024
    text = data.decode()
    assert text.startswith("# an earlier step's summary\n## memlint report\n")
    body, note = text.rsplit("\n\n> memlint: this report was cut here", 1)
    assert all(line.endswith(" |") for line in body.splitlines()[2:]), "a line cut in two"
    assert "GitHub drops a job summary over 1 MiB" in note
    # a small report is appended whole, without a note
    env["MEMLINT_SUMMARY_LIMIT"] = str(10 * len(data))
    summary.write_text("")
    subprocess.run(["bash", SCRIPT], cwd=tmp_path, env=env, check=True, timeout=60)
    assert "cut here" not in summary.read_text()


@pytest.mark.slow  # runs the action's script, which installs and runs memlint in subprocesses
@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_script_writes_annotations_sarif_summary_and_exit_code(tmp_path):
    (tmp_path / ".git").mkdir()
    cfg = tmp_path / "configs"
    cfg.mkdir()
    (cfg / "memlint.toml").write_text('model = "llama3-70b"\ngpu = "H100-80GB"\n'
                                      'world_size = 8\n')
    (cfg / "notes.json").write_text('{"not": "a config"}\n')
    summary, output = tmp_path / "summary.md", tmp_path / "output.txt"
    env = dict(os.environ, MEMLINT=f"{sys.executable} -m memlint", MEMLINT_PATHS="configs",
               MEMLINT_ARGS="--fail-on error", MEMLINT_SARIF=str(tmp_path / "out.sarif"),
               MEMLINT_SUMMARY="true", GITHUB_STEP_SUMMARY=str(summary),
               GITHUB_OUTPUT=str(output), NO_COLOR="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run(["bash", SCRIPT], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "::error file=configs/memlint.toml,line=" in result.stdout
    assert "title=ML101 exceeds-gpu-memory" in result.stdout
    assert output.read_text() == "exit-code=1\n"
    table = summary.read_text()
    assert table.startswith("## memlint ❌ fails")
    assert "| stage | layers | phase |" in table and "| 0 |" in table
    sarif = json.loads((tmp_path / "out.sarif").read_text())
    assert all(r["locations"] for r in sarif["runs"][0]["results"])


def _readme_blocks(language: str) -> list:
    import re

    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        return re.findall(rf"```{language}\n(.*?)```", handle.read(), re.S)


@pytest.mark.slow   # copies memlint's tree as the README says, then installs it as the action does
@needs_bash
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_readme_recipe_runs_the_action_from_a_copy_of_the_source_tree(tmp_path):
    from action_runner import run_action, run_steps
    from snapshot_repo import GIT_ENV, snapshot

    home, user, temp = tmp_path / "home", tmp_path / "trainer", tmp_path / "runner-temp"
    snapshot(home / "src" / "memlint")
    for folder in (user / "configs", temp):
        folder.mkdir(parents=True)
    (user / ".git").mkdir()
    (user / "configs" / "memlint.toml").write_text('model = "llama3-70b"\ngpu = "H100-80GB"\n'
                                                   'world_size = 8\n')
    env = dict(GIT_ENV, HOME=str(home))
    [copy] = [b for b in _readme_blocks("bash") if "archive" in b]
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", copy], cwd=user, env=env,
                          capture_output=True, text=True, timeout=300)
    # `git add` needs a real repository; the copy is what matters here
    assert (user / ".github" / "actions" / "memlint" / "action.yml").exists(), done.stderr
    [workflow] = [yaml.safe_load(b) for b in _readme_blocks("yaml") if "jobs:" in b]
    [step] = [s for s in workflow["jobs"]["memlint"]["steps"] if s["uses"].startswith("./")]
    folder = str(user / step["uses"][2:])
    env.pop("VIRTUAL_ENV", None)
    run = run_action(folder, step["with"], workspace=str(user), temp=str(temp), env=env)
    assert "Install memlint" in run.ran and "Check the runner" in run.skipped
    assert (temp / "memlint-venv" / "bin" / "memlint").exists(), run.stdout[-3000:]
    assert "::error file=configs/memlint.toml,line=" in run.stdout, run.stdout[-3000:]
    assert "title=ML101 exceeds-gpu-memory" in run.stdout
    [(uses, inputs)] = run.used
    assert uses == "github/codeql-action/upload-sarif@v4"
    assert inputs == {"sarif_file": "memlint.sarif", "category": "memlint"}
    sarif = json.loads((user / "memlint.sarif").read_text())
    assert sarif["runs"][0]["results"] and sarif["runs"][0]["tool"]["driver"]["semanticVersion"]
    assert (temp / "step-summary.md").read_text().startswith("## memlint ❌ fails")
    assert run.ran[-1] == "Fail on findings" and run.failed and run.outputs["exit-code"] == "1"

    # "Or by hand, from the same copy": the README's steps, in the action's virtual environment
    [by_hand] = [yaml.safe_load(b) for b in _readme_blocks("yaml") if b.startswith("- run: pip")]
    (user / "memlint.sarif").unlink()
    (temp / "by-hand").mkdir()
    venv = str(temp / "memlint-venv")
    env = dict(env, VIRTUAL_ENV=venv, PATH=os.path.join(venv, "bin") + os.pathsep + env["PATH"])
    hand = run_steps(by_hand, {"runner": {"os": "Linux", "temp": str(temp)}}, folder=folder,
                     workspace=str(user), temp=str(temp / "by-hand"), env=env)
    assert hand.used == [("github/codeql-action/upload-sarif@v4",
                          {"sarif_file": "memlint.sarif"})], hand.stdout[-3000:]
    # the SARIF step goes on past the findings (`|| true`); the summary step gates the job
    assert hand.ran == ["step 0", "step 1", "step 2"] and hand.failed
    results = json.loads((user / "memlint.sarif").read_text())["runs"][0]["results"]
    assert any(r["ruleId"] == "ML101" for r in results)
    assert "ML101" in (temp / "by-hand" / "step-summary.md").read_text()
