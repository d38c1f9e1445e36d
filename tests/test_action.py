"""The GitHub Action (action.yml + action/run.sh), run locally as the runner would run it."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "action", "run.sh")


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
    assert upload and upload[0]["if"] == "${{ inputs.sarif == 'true' }}"
    assert all(step.get("shell") == "bash" for step in steps if "run" in step)


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
