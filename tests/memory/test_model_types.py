"""Model types memlint counts, approximates or leaves without an estimate
(memlint/memory/model_types.py), and the false ML004 errors on valid hybrid / T5 config.json files
this replaced (issue 26)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlint.cli import main
from memlint.memory.architecture import ConfigError, UnknownModelType
from memlint.memory.params import architecture, count_params

ROOT = Path(__file__).resolve().parents[2]
HF = ROOT / "fixtures" / "hf"
SHARED = ROOT / "fixtures" / "shared-real" / "hf-configs"

HYBRID_CONFIGS = sorted(p.name for p in HF.glob("*.json") if json.loads(p.read_text())[
    "model_type"] in ("nemotron_h", "jamba", "zamba2", "falcon_h1", "bamba", "granitemoehybrid",
                      "lfm2", "mamba2", "qwen3_next", "qwen3_5", "qwen3_5_moe", "t5"))


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", ["MiMo-7B-Base", "Llama-3_3-Nemotron-Super-49B-v1",
                                  "gemma-4-26B-A4B"])
def test_a_type_memlint_does_not_count_gets_no_estimate(name):
    # mimo (Qwen2 + MTP, custom code), nemotron-nas (NAS blocks: read as llama it counted 88B
    # of its 49B), gemma4: never another family's count
    with pytest.raises(UnknownModelType) as caught:
        architecture(load(SHARED / f"{name}.json"))
    assert caught.value.severity == "warning" and caught.value.key == "model_type"
    assert isinstance(caught.value, ConfigError)


def test_a_custom_type_is_read_as_the_class_its_config_names():
    # Kimi-K2's config: model_type kimi_k2, architectures [DeepseekV3ForCausalLM]; transformers'
    # DeepseekV3ForCausalLM built from it (model_type swapped) has 1,026,408,209,408 parameters
    arch = architecture(load(SHARED / "Kimi-K2-Instruct.json"))
    assert arch.model_type == "kimi_k2" and not arch.known
    assert count_params(arch).total == 1_026_408_209_408


def test_approximated_types_stay_counted_and_flagged():
    arch = architecture(load(SHARED / "Llama-4-Scout-17B-16E-Instruct.json"))
    assert not arch.known and count_params(arch).total == 107_769_861_120


def test_a_config_without_model_type_is_read_by_its_dimensions():
    arch = architecture({"hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8,
                         "intermediate_size": 1024, "vocab_size": 1000})
    assert arch.layers == 2


def _check(capsys, *args) -> tuple:
    code = main(["check", *args, "--format", "json", "--allow-outside-root"])
    out = json.loads(capsys.readouterr().out)
    return code, out["diagnostics"]


@pytest.mark.parametrize("name", HYBRID_CONFIGS)
def test_real_hybrid_and_t5_configs_get_no_false_error(name, capsys):
    # A plain Mamba2 or T5 config.json was an ML004 "missing required key" error.
    code, diagnostics = _check(capsys, str(HF / name))
    assert code == 0, diagnostics
    assert not [d for d in diagnostics if d["severity"] == "error"]
    assert not [d for d in diagnostics if d["code"] in ("ML004", "ML008")]


@pytest.mark.parametrize("name", ["Nemotron-H-8B-Base-8K.json", "mamba2-780m.json",
                                  "t5-base.json", "Qwen3-Next-80B-A3B-Instruct.json"])
def test_hybrid_and_t5_configs_are_estimated_in_a_run(name, capsys):
    code, diagnostics = _check(capsys, str(HF / name), "--set", "world_size=8",
                               "--set", "zero=3", "--set", "micro_batch=1",
                               "--set", "seq_len=2048")
    assert not [d for d in diagnostics if d["severity"] == "error"], diagnostics
    assert not [d for d in diagnostics if d["code"] == "ML008"]
    assert not [d for d in diagnostics if "no memory estimate" in d["message"]], diagnostics


def test_an_unknown_type_is_a_warning_not_an_error(tmp_path, capsys):
    config = tmp_path / "memlint.toml"
    config.write_text('world_size = 1\n[model]\nmodel_type = "mystery"\nhidden_size = 1024\n'
                      "num_hidden_layers = 4\nnum_attention_heads = 16\n"
                      "intermediate_size = 4096\nvocab_size = 32000\n")
    code, diagnostics = _check(capsys, str(config))
    assert code == 0
    warning = [d for d in diagnostics if d["code"] == "ML008"]
    assert warning and warning[0]["severity"] == "warning"
    assert "'mystery' is not one memlint counts" in warning[0]["message"]
    assert not [d for d in diagnostics if d["code"] == "ML004"]
