"""The real `pre-commit try-repo` against this checkout: one config passes, one fails."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(shutil.which("pre-commit") is None or shutil.which("git") is None,
                                reason="pre-commit (or git) is not installed")


def _git(cwd, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def test_hook_declares_memlint():
    import yaml

    with open(os.path.join(ROOT, ".pre-commit-hooks.yaml"), encoding="utf-8") as handle:
        [hook] = yaml.safe_load(handle)
    assert hook["id"] == "memlint" and hook["entry"] == "memlint check"
    assert hook["language"] == "python"
    import re

    pattern = re.compile(hook["files"])
    for name in ("memlint.toml", "x/run.memlint.yaml", "configs/ds_config.json",
                 "scripts/pretrain_gpt.sh", "train.args", "torchtitan/llama3_8b.toml",
                 "accelerate_config.yaml"):
        assert pattern.search(name), name
    assert not pattern.search("src/model.py")


@pytest.mark.slow
def test_try_repo(tmp_path):
    repo = tmp_path / "user-repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "good.memlint.toml").write_text("tp = 2\nsp = true\n")
    (repo / "bad.memlint.toml").write_text("zero = 5\n")
    _git(repo, "add", ".")
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "cache"), NO_COLOR="1")
    env.pop("PYTHONPATH", None)

    def run(name):
        return subprocess.run(["pre-commit", "try-repo", ROOT, "memlint", "--files", name],
                              cwd=repo, capture_output=True, text=True, env=env, timeout=600)

    good = run("good.memlint.toml")
    if good.returncode != 0 and "memlint" not in good.stdout + good.stderr:
        pytest.skip(f"pre-commit could not install the hook here: {good.stderr[-300:]}")
    assert good.returncode == 0, good.stdout + good.stderr
    bad = run("bad.memlint.toml")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "ML004 invalid-value" in bad.stdout
