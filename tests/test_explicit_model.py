"""Issue 27 class 3: an explicit model always wins. A config.json beside a DeepSpeed file (which
memlint picks up as the run's model) used to override `--model` and a memlint.toml `model =`
silently: the estimate was for the wrong model. Now the explicit model is used, and a warning
names both. Real files: GPT-2's config.json (fixtures/hf/gpt2.json, from openai-community/gpt2)
beside LLaMA-Factory's examples/deepspeed/ds_z3_config.json (fixtures/real-world)."""
import os
import shutil

import pytest

from memlint.api import Options, check_paths
from memlint.diagnostics import Severity

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT2 = os.path.join(ROOT, "fixtures", "hf", "gpt2.json")
DS = os.path.join(ROOT, "fixtures", "real-world", "hiyouga__LLaMA-Factory", "examples",
                  "deepspeed", "ds_z3_config.json")
RUN = ("world_size=8", "micro_batch=1", "seq_len=1024")


@pytest.fixture
def run_dir(tmp_path):
    (tmp_path / ".git").mkdir()
    shutil.copy(GPT2, tmp_path / "config.json")
    shutil.copy(DS, tmp_path / "ds_z3_config.json")
    return tmp_path


def conflicts(result) -> list:
    return [d for d in result.diagnostics if d.code == "ML005" and "the model is" in d.message]


def params(result) -> int:
    [estimate] = result.estimates
    return estimate.params["total"]


def test_the_sibling_config_json_is_the_model_when_nothing_else_names_one(run_dir):
    result = check_paths([str(run_dir / "ds_z3_config.json")], Options(assignments=RUN))
    assert 120e6 < params(result) < 130e6  # GPT-2 small, 124M
    assert not conflicts(result)


def test_model_on_the_command_line_wins_over_the_sibling(run_dir):
    result = check_paths([str(run_dir / "ds_z3_config.json")],
                         Options(model="llama3-8b", assignments=RUN))
    assert 8.0e9 < params(result) < 8.1e9  # Llama-3-8B, not GPT-2
    [conflict] = conflicts(result)
    assert conflict.severity == Severity.WARNING
    assert "'llama3-8b'" in conflict.message and "config.json" in conflict.message


def test_memlint_toml_model_wins_over_the_sibling(run_dir):
    (run_dir / "memlint.toml").write_text(
        'model = "llama3-8b"\nfiles = ["ds_z3_config.json"]\nworld_size = 8\nmicro_batch = 1\n'
        "seq_len = 1024\n", encoding="utf-8")
    result = check_paths([str(run_dir / "ds_z3_config.json")], Options())
    assert 8.0e9 < params(result) < 8.1e9
    [conflict] = conflicts(result)
    assert "memlint.toml" in conflict.message


def test_naming_the_sibling_itself_is_no_conflict(run_dir):
    result = check_paths([str(run_dir / "ds_z3_config.json")],
                         Options(model=str(run_dir / "config.json"), assignments=RUN))
    assert 120e6 < params(result) < 130e6
    assert not conflicts(result)
