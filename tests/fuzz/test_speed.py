"""Start-up stays fast: a one-file check imports only what that file needs (bench/speed.py
measures the times; these tests keep the structure that makes them fast)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fuzz import mutate
from memlint.adapters import registry

HEAVY = ("rich", "yaml", "jsonschema", "importlib.metadata", "memlint.memory.estimate",
         "memlint.adapters.megatron", "memlint.adapters.torchtitan", "memlint.adapters.axolotl",
         "memlint.adapters.accelerate",
         # issue 19 (start-up): argparse's terminal width without shutil (and bz2, lzma);
         # traceback only on a failure
         "shutil", "traceback",
         # models and adapters a DeepSpeed file without a model never uses
         "memlint.memory.host", "memlint.memory.fsdp", "memlint.memory.states",
         "memlint.adapters.gpt_neox")
VALID_DS = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2,
            "bf16": {"enabled": True}, "zero_optimization": {"stage": 2}}


def imported(repo, *argv) -> list:
    probe = ("import sys; from memlint.cli import main; main(sys.argv[1:]); "
             f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    env = dict(os.environ, NO_COLOR="1")
    result = subprocess.run([sys.executable, "-c", probe, *argv], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=60)
    return json.loads(result.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_one_deepspeed_json_imports_nothing_heavy(repo):
    (repo / "ds_config.json").write_text(json.dumps(VALID_DS))
    assert imported(repo, "check", "ds_config.json") == []
    assert imported(repo, "check", "--format", "json", "ds_config.json") == []


def test_only_an_invalid_deepspeed_json_loads_jsonschema(repo):
    """jsonschema walks the errors of a config the quick `conforms` check cannot clear (issue
    31: no re-implemented walk); a valid config (above) never loads it."""
    (repo / "ds_config.json").write_text(json.dumps(dict(VALID_DS, zero_optimization={
        "stage": 7})))
    found = imported(repo, "check", "ds_config.json")
    assert "jsonschema" in found and set(found) <= {"jsonschema", "shutil"}  # jsonschema's own


CORPUS = {name: raw.decode("utf-8", "replace") for name, raw in mutate.corpus()}
EXTENSIONS = (".json", ".hjson", ".yaml", ".yml", ".toml", ".sh", ".txt", ".py", ".args", ".cfg",
              ".slurm", "")


@pytest.mark.slow  # brute force: every corpus file under 15 names through every adapter: ~4 s
def test_claims_cover_every_detect():
    """A built-in adapter is skipped for names outside registry.CLAIMS: its detect() must never
    accept such a name, whatever the content."""
    modules = [__import__(m, fromlist=["detect"])
               for m in registry.BUILTIN_ADAPTERS + registry.FALLBACK_ADAPTERS]
    for name, text in sorted(CORPUS.items()):
        stem = os.path.splitext(name)[0]
        names = {name, "config.json", "pyproject.toml", "memlint.toml", "x.memlint.yaml"}
        names |= {stem + ext for ext in EXTENSIONS}
        for module_name, module in zip(registry.BUILTIN_ADAPTERS + registry.FALLBACK_ADAPTERS,
                                       modules):
            for candidate in sorted(names):
                if module.detect(candidate, text):
                    assert registry.could_claim(module_name, candidate), (module_name, candidate)
