"""The real pre-commit, on a scratch repository with the layouts users have (issue 15).

pre-commit passes only the changed files (pass_filenames). A DeepSpeed JSON that a memlint.toml
groups into a run, one that a [[tool.memlint.runs]] group lists, and a lone one that takes the
model and world size from [tool.memlint.scenario] must each be checked as their whole run: an
out-of-memory run blocks the commit, a good one passes.

The hook repository is a snapshot of this checkout committed once, so pre-commit installs the
hook's environment once for the whole module (`--ref` pins it; no shadow repository per call).
"""
import os
import re
import shutil
import subprocess

import pytest

from snapshot_repo import GIT_ENV, git, snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(os.path.abspath(os.sys.executable))
PRE_COMMIT = shutil.which("pre-commit") or shutil.which("pre-commit", path=BIN)

pytestmark = [pytest.mark.precommit, pytest.mark.slow,  # installs the hook with pip: ~30 s each
              pytest.mark.skipif(PRE_COMMIT is None or shutil.which("git") is None,
                                 reason="pre-commit (or git) is not installed")]

ENV = GIT_ENV
_git = git

def _hooks():
    import yaml

    with open(os.path.join(ROOT, ".pre-commit-hooks.yaml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_hook_files_cover_every_format_memlint_reads():
    hook = _hooks()[0]
    assert hook["id"] == "memlint" and hook["entry"].startswith("memlint check")
    assert hook["language"] == "python" and hook["pass_filenames"] is True
    pattern = re.compile(hook["files"])
    for name in ("memlint.toml", "x/run.memlint.yaml", "configs/ds_config.json", "config.json",
                 "examples/llama-3/lora-8b.yml", "scripts/pretrain_gpt.sh", "train.slurm",
                 "job.sbatch", "train.args", "torchtitan/llama3_8b.toml", "pyproject.toml",
                 "accelerate_config.yaml", "torchtitan/models/llama3/config_registry.py"):
        assert pattern.search(name), name
    assert not pattern.search("src/model.py")


FAMILIES = {   # file -> the family hooks that take it (`memlint` takes all of them)
    "configs/ds_config.json": {"memlint-deepspeed"},
    "ds_z3_offload_config.json": {"memlint-deepspeed"},
    "LLaVA/scripts/zero3_offload.json": {"memlint-deepspeed"},
    "examples/deepspeed/ds_z2_autotp_config.json": {"memlint-deepspeed"},
    "deepspeed_configs/zero3_bf16_cpuoffload_all.json": {"memlint-deepspeed"},
    "bing_bert/deepspeed_bsz64k_lamb_config_seq128.json": {"memlint-deepspeed"},
    "accelerate/sp-alst.ds-config.json": {"memlint-deepspeed"},
    "fixtures/adapters/deepspeed/stage_as_word.json": {"memlint-deepspeed"},
    "models/llama/config.json": {"memlint-hf"},
    "examples/llama-3/lora-8b.yml": {"memlint-hf"},
    "accelerate_config.yaml": {"memlint-hf"},
    "examples/pretrain_gpt.sh": {"memlint-megatron"},
    "train.slurm": {"memlint-megatron"},
    "tests/llama3_8b_h100_fp8.txt": {"memlint-megatron"},
    "torchtitan/llama3_8b.toml": {"memlint-torchtitan"},
    "torchtitan/models/llama3/config_registry.py": {"memlint-torchtitan"},
    "pyproject.toml": set(),
    "package.json": set(),
    "adsense.json": set(),
}


def test_each_family_hook_takes_its_own_files():
    hooks = {hook["id"]: hook for hook in _hooks()}
    assert set(hooks) == {"memlint", "memlint-deepspeed", "memlint-megatron",
                          "memlint-torchtitan", "memlint-hf"}
    for hook in hooks.values():
        assert hook["entry"] == hooks["memlint"]["entry"] and hook["language"] == "python"
        assert hook["minimum_pre_commit_version"] == "2.9.0"   # types_or
        assert hook.get("types") or hook.get("types_or")
    everything = re.compile(hooks["memlint"]["files"])
    for name, families in FAMILIES.items():
        taken = {hook_id for hook_id, hook in hooks.items() if hook_id != "memlint"
                 and re.search(hook["files"], name)
                 and not (hook.get("exclude") and re.search(hook["exclude"], name))}
        assert taken == families, name
        if families:
            assert everything.search(name), name


def _ds(micro_batch: int) -> str:
    return ('{\n  "train_micro_batch_size_per_gpu": %d,\n  "gradient_accumulation_steps": 1,\n'
            '  "bf16": {"enabled": true},\n  "zero_optimization": {"stage": 1}\n}\n' % micro_batch)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory):
    """This checkout (tracked and untracked, not ignored files) committed into a scratch repo."""
    return snapshot(tmp_path_factory.mktemp("hook-repo"))


@pytest.fixture(scope="module")
def user_repo(tmp_path_factory):
    """Three layouts, each with a good DeepSpeed file (micro batch 1 at seq 2048 fits)."""
    repo = tmp_path_factory.mktemp("user-repo")
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "trainer"\n\n'
        '[tool.memlint.scenario]\nmodel = "llama3-8b"\ngpu = "H100-80GB"\nworld_size = 8\n'
        'seq_len = 2048\nrecompute = "selective"\n\n'
        '[[tool.memlint.runs]]\nname = "grouped"\nfiles = ["grouped/ds_config.json"]\n'
        'set = ["seq_len=4096"]\n')
    for folder in ("toml", "grouped", "lone"):
        (repo / folder).mkdir()
        (repo / folder / "ds_config.json").write_text(_ds(1))
    (repo / "toml" / "memlint.toml").write_text(
        'files = ["ds_config.json"]\nmodel = "llama3-8b"\ngpu = "H100-80GB"\nworld_size = 8\n'
        'seq_len = 2048\nrecompute = "selective"\n')
    (repo / "README.md").write_text("not a config\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "good configs")
    return repo


def _try(user_repo, hook_repo, env, *files):
    path, ref = hook_repo
    return subprocess.run([PRE_COMMIT, "try-repo", path, "memlint", "--ref", ref, "--files",
                           *files], cwd=user_repo, capture_output=True, text=True, env=env,
                          timeout=900)


def _run(user_repo, env, *files):
    return subprocess.run([PRE_COMMIT, "run", "memlint", "--files", *files], cwd=user_repo,
                          capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return dict(ENV, PRE_COMMIT_HOME=str(tmp_path_factory.mktemp("pre-commit-home")))


def _bad(user_repo, folder, call):
    target = user_repo / folder / "ds_config.json"
    target.write_text(_ds(16))   # 16 micro-batches of 2048-4096 tokens: far beyond 80 GiB
    try:
        return call(f"{folder}/ds_config.json")
    finally:
        target.write_text(_ds(1))


def _blocked(result, folder):
    assert result.returncode == 1, (folder, result.stdout + result.stderr)
    assert "ML101 error exceeds-gpu-memory" in result.stdout, (folder, result.stdout)
    # the verdict points into a file of the run, never at the command line
    assert "<command line>" not in result.stdout


def test_try_repo_blocks_a_file_whose_memlint_toml_run_ooms(user_repo, hook_repo, env):
    # try-repo installs the hook afresh on every call (a temporary store): one call only
    bad = _bad(user_repo, "toml", lambda f: _try(user_repo, hook_repo, env, f, "README.md"))
    if bad.returncode != 1 and "memlint" not in bad.stdout + bad.stderr:
        pytest.skip(f"pre-commit could not install the hook here: {bad.stderr[-300:]}")
    _blocked(bad, "toml")


def test_each_layout_gates_its_run_then_a_real_commit(user_repo, hook_repo, env):
    path, ref = hook_repo
    (user_repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {path}\n    rev: {ref}\n    hooks:\n      - id: memlint\n")
    _git(user_repo, "add", ".pre-commit-config.yaml")
    _git(user_repo, "commit", "-q", "--no-verify", "-m", "hook config")
    good = _run(user_repo, env, "toml/ds_config.json", "grouped/ds_config.json",
                "lone/ds_config.json", "README.md", "pyproject.toml")
    if good.returncode != 0 and "memlint" not in good.stdout + good.stderr:
        pytest.skip(f"pre-commit could not install the hook here: {good.stderr[-300:]}")
    assert good.returncode == 0, good.stdout + good.stderr
    for folder in ("grouped", "lone"):
        _blocked(_bad(user_repo, folder, lambda f: _run(user_repo, env, f)), folder)

    installed = subprocess.run([PRE_COMMIT, "install"], cwd=user_repo, capture_output=True,
                               text=True, env=env)
    assert installed.returncode == 0, installed.stderr
    target = user_repo / "toml" / "ds_config.json"
    target.write_text(_ds(16))
    _git(user_repo, "add", "toml/ds_config.json")
    blocked = _git(user_repo, "commit", "-m", "bigger micro batch", check=False, env=env)
    assert blocked.returncode != 0 and "ML101" in blocked.stdout + blocked.stderr, blocked
    target.write_text(_ds(2))
    _git(user_repo, "add", "toml/ds_config.json")
    passed = _git(user_repo, "commit", "-m", "micro batch 2", check=False, env=env)
    assert passed.returncode == 0, passed.stdout + passed.stderr
