"""What the README tells a user works as written: the Python API example runs, the install and
pre-commit snippets run against a clone at the release tag, the install lines name the real
distribution, plan output is short."""
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from memlint import DISTRIBUTION, __version__
from memlint.cli import main
from snapshot_repo import GIT_ENV, git, snapshot

BIN = os.path.dirname(os.path.abspath(sys.executable))
PRE_COMMIT = shutil.which("pre-commit") or shutil.which("pre-commit", path=BIN)

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
    assert repo["rev"] == f"v{__version__}" and os.path.isabs(repo["repo"])
    with open(os.path.join(ROOT, ".pre-commit-hooks.yaml"), encoding="utf-8") as handle:
        hooks = {hook["id"]: hook for hook in yaml.safe_load(handle)}
    assert {hook["id"] for hook in repo["hooks"]} <= set(hooks)
    for hook_id in hooks:   # each id the hook file defines is named in the README
        assert f"`{hook_id}`" in README, hook_id
    assert configs[0]["minimum_pre_commit_version"] == hooks["memlint"][
        "minimum_pre_commit_version"]
    [workflow] = [yaml.safe_load(b) for b in _blocks("yaml") if "jobs:" in b]
    [action] = [s for s in workflow["jobs"]["memlint"]["steps"]
                if s.get("uses", "").startswith("./")]
    # until a release is on the index the action installs from its own source tree
    assert "version" not in action["with"]
    assert f"install \"git+file://$HOME/src/memlint@v{__version__}\"" in README


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


# ---------------------------------------------------------------------------------------------
# The install and pre-commit snippets, run as written, against a clone of this checkout at the
# release tag in a scratch home (~/src/memlint). The Action's recipe: tests/test_action.py.

def _block(language: str, containing: str) -> str:
    [block] = [b for b in _blocks(language) if containing in b]
    return block


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    snapshot(home / "src" / "memlint")
    return home


@pytest.mark.slow   # pip builds and installs memlint from a git URL: ~30 s
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_install_snippet_installs_the_tag(home, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = dict(GIT_ENV, HOME=str(home), VIRTUAL_ENV=str(venv),
               PATH=str(venv / "bin") + os.pathsep + os.environ["PATH"])
    snippet = _block("bash", "git+file://")
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", snippet], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == f"memlint {__version__}"
    assert os.path.exists(venv / "bin" / "memlint")


def _ds(micro_batch: int) -> str:
    return ('{\n  "train_micro_batch_size_per_gpu": %d,\n  "gradient_accumulation_steps": 1,\n'
            '  "bf16": {"enabled": true},\n  "zero_optimization": {"stage": 1}\n}\n' % micro_batch)


@pytest.mark.slow   # pre-commit installs the hook's environment from the tag: ~30 s
@pytest.mark.precommit
@pytest.mark.skipif(PRE_COMMIT is None or shutil.which("git") is None,
                    reason="pre-commit (or git) is not installed")
def test_the_pre_commit_snippet_blocks_an_oom_and_each_family_takes_its_files(home, tmp_path):
    config = yaml.safe_load(_block("yaml", "repos:"))
    clone = str(home / "src" / "memlint")
    config["repos"][0]["repo"] = clone          # the README's placeholder path, nothing else
    families = ["memlint-deepspeed", "memlint-megatron", "memlint-torchtitan", "memlint-hf"]
    config["repos"][0]["hooks"] += [{"id": family} for family in families]
    user = tmp_path / "trainer"
    (user / "configs" / "deepspeed").mkdir(parents=True)
    (user / "configs" / "memlint.toml").write_text(
        'files = ["deepspeed/ds_config.json"]\nmodel = "llama3-8b"\ngpu = "H100-80GB"\n'
        'world_size = 8\nseq_len = 4096\nrecompute = "selective"\n')
    (user / "configs" / "deepspeed" / "ds_config.json").write_text(_ds(1))
    (user / "README.md").write_text("not a config\n")
    (user / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = dict(GIT_ENV, HOME=str(home), PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"))
    git(user, "init", "-q")
    git(user, "add", "-A")
    git(user, "commit", "-q", "-m", "good configs")

    def run(*args):
        return subprocess.run([PRE_COMMIT, "run", *args, "--all-files"], cwd=user, env=env,
                              capture_output=True, text=True, timeout=900)

    good = run()
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr[-2000:]
    (user / "configs" / "deepspeed" / "ds_config.json").write_text(_ds(16))
    # the torchtitan family takes memlint.toml too, and so checks the run it describes
    for hook_id in ("memlint", "memlint-deepspeed", "memlint-torchtitan"):
        bad = run(hook_id)
        assert bad.returncode == 1 and "ML101" in bad.stdout, bad.stdout[-3000:]
    skipped = run("memlint-megatron")   # no launch script or argument file here
    assert skipped.returncode == 0 and "no files to check" in skipped.stdout, skipped.stdout
