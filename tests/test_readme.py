"""What the README tells a user works as written: the Python API example runs, the pre-commit
snippets match the hook, the install lines name the real distribution, plan output is short."""
import os
import re

import yaml

from memlint import DISTRIBUTION, __version__
from memlint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as _handle:
    README = _handle.read()


def _blocks(language: str) -> list:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def test_python_api_example_runs(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    [example] = _blocks("python")
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("0 ") and out[1].startswith("True ") and out[3].startswith("3 {")
    assert out[2] == "4 32 2"   # Estimate.context: dp 8/tp 2, Llama-3-8B's 32 layers, bf16 params


def test_install_and_hook_snippets_use_the_real_names():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as handle:
        assert f'name = "{DISTRIBUTION}"' in handle.read()
    assert f"pip install {DISTRIBUTION}" in README
    assert "<org>" not in README and "<you>" not in README
    # no address memlint does not own: links and hooks name the package index only
    assert not re.search(r"https?://(?!(www\.)?(pypi\.org|pre-commit\.com|docs\.github\.com))"
                         r"[^\s)]*memlint", README)
    configs = [yaml.safe_load(b) for b in _blocks("yaml") if "repos:" in b]
    assert len(configs) == 1
    [repo] = configs[0]["repos"]
    [local] = repo["hooks"]
    assert repo["repo"] == "local"
    assert local["additional_dependencies"] == [f"{DISTRIBUTION}=={__version__}"]
    with open(os.path.join(ROOT, ".pre-commit-hooks.yaml"), encoding="utf-8") as handle:
        [hook] = yaml.safe_load(handle)
    assert local["entry"] == hook["entry"] and local["id"] == hook["id"]
    ours, theirs = re.compile(hook["files"]), re.compile(local["files"])
    for name in ("ds_config.json", "a/b.yml", "run.slurm", "torchtitan.toml", "x.args",
                 "m/config_registry.py", "model.py", "README.md", "notes.txt"):
        assert bool(ours.search(name)) == bool(theirs.search(name)), name
    [workflow] = [yaml.safe_load(b) for b in _blocks("yaml") if "jobs:" in b]
    [action] = [s for s in workflow["jobs"]["memlint"]["steps"]
                if s.get("uses", "").startswith("./")]
    assert action["with"]["version"] == __version__


def test_plan_prints_the_ranked_table_and_details_on_request(capsys):
    argv = ["plan", "--model", "llama3-8b", "--gpus", "64", "--gpu", "H100", "--top", "3"]
    assert main(argv) == 0
    short = capsys.readouterr().out
    assert "ranked plans" in short and "forward_end" not in short
    assert len(short.splitlines()) < 40
    assert main(argv + ["--detail"]) == 0
    detail = capsys.readouterr().out
    assert "forward_end" in detail
    # sources name papers and frameworks, never memlint's internal notes
    assert "seed 000" not in detail and " CH " not in detail


def test_rl_example_prints_what_the_readme_shows(capsys, monkeypatch):
    """The README's RL section: the command on verl's run_qwen2-7b.sh prints the lines shown."""
    monkeypatch.setenv("NO_COLOR", "1")
    [block] = [b for b in _blocks("text") if "rollout-exceeds-gpu-memory" in b]
    command = block.splitlines()[0].split("$ memlint ", 1)[1].split()
    path = os.path.join(ROOT, "fixtures", "real-world", "volcengine__verl", command[1])
    assert main([command[0], path, *command[2:]]) == 1
    out = capsys.readouterr().out
    shown = block.splitlines()[1:]
    first = shown[0].split(" the rollout phase")[0].split(": ", 1)[1]
    assert first in out and shown[0].split("; ...")[0].split(": ", 1)[1] in out
    for line in shown[1:]:
        assert line in out.splitlines(), line
