"""Issue 27 class 1: a format is detected by its own top-level keys, positively; the configs of
neighbouring frameworks are named, never read as one of memlint's formats, and --skip-unknown
skips them silently. Every file is a real one from fixtures/real-world (SOURCES.md)."""
import json
import os

import pytest

from memlint.adapters._neighbours import neighbour_format
from memlint.adapters._toplevel import top_level_keys
from memlint.adapters.registry import load_file
from memlint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "fixtures", "real-world")

NEIGHBOURS = {
    # file -> the framework it is named as
    "huggingface__nanotron/examples/config_tiny_llama.yaml": "nanotron",
    "huggingface__nanotron/examples/moe/config_llamoe.yaml": "nanotron",
    "huggingface__picotron/template/base_config.json": "picotron",
    "pytorch__torchtune/recipes/configs/llama3_1/8B_lora.yaml": "torchtune",
    "Lightning-AI__litgpt/config_hub/finetune/llama-3-8b/lora.yaml": "LitGPT",
    "Lightning-AI__litgpt/config_hub/pretrain/tinyllama.yaml": "LitGPT",
    # NeMo 1 Hydra configs (NVIDIA/NeMo 8cfedd7)
    "NVIDIA__NeMo/examples/nlp/language_modeling/conf/megatron_llama_config.yaml": "NeMo",
    "NVIDIA__NeMo/examples/nlp/language_modeling/tuning/conf/megatron_gpt_finetuning_config.yaml":
        "NeMo",
    # a Megatron-LM CI test case that NeMo 2 runs: MODEL_ARGS are NeMo-Run overrides, not flags
    # (it got about 20 unknown-flag warnings read as Megatron)
    "NVIDIA__Megatron-LM/tests/functional_tests/test_cases/gpt-nemo/"
    "llama3-nemo_8b_mr_mbs1_gbs8_mcore_te_8experts_tp2_ep2_pp2_dgx_a100_1N8G/model_config.yaml":
        "NeMo 2",
    # Megatron-Bridge (NVIDIA-NeMo/Megatron-Bridge 067f987): an override YAML and launches of
    # run_recipe.py / its MIMO trainer (read as Megatron-LM, their flags were unknown flags)
    "NVIDIA-NeMo__Megatron-Bridge/examples/models/qwen/qwen3_next/conf/"
    "qwen3_next_80b_a3b_finetune_override_example.yaml": "Megatron-Bridge / NeMo 2",
    "NVIDIA-NeMo__Megatron-Bridge/examples/models/gemma/gemma4/slurm_pretrain.sh":
        "Megatron-Bridge",
    "NVIDIA-NeMo__Megatron-Bridge/examples/megatron_mimo/llava/run_hetero_llava.sh":
        "Megatron-Bridge",
}


def corpus(name: str) -> str:
    return os.path.join(CORPUS, name)


def text(name: str) -> str:
    with open(corpus(name), encoding="utf-8") as handle:
        return handle.read()


@pytest.mark.parametrize("name,framework", sorted(NEIGHBOURS.items()))
def test_a_neighbours_config_is_named_and_read_by_no_adapter(name, framework):
    found = neighbour_format(corpus(name), text(name))
    assert found is not None and found.name == framework
    partial = load_file(corpus(name))
    assert partial.fmt == "unknown"
    [warning] = partial.diagnostics
    assert warning.code == "ML001" and warning.severity.label == "warning"
    assert f"a {framework} config" in warning.message


@pytest.mark.parametrize("name", sorted(NEIGHBOURS))
def test_skip_unknown_skips_a_neighbours_config_silently(name, capsys):
    # nanotron was read as gpt-neox (an ML004 error that --skip-unknown did not skip)
    assert main(["check", corpus(name), "--skip-unknown", "--fail-on", "info",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["diagnostics"] == []


def test_nested_keys_do_not_make_a_format():
    # nanotron nests gpt-neox's lr_decay_style and hidden_size; picotron nests DeepSpeed's
    # gradient_accumulation_steps: only top-level keys count
    nanotron = top_level_keys(text("huggingface__nanotron/examples/config_tiny_llama.yaml"))
    assert "lr_decay_style" not in nanotron and "hidden_size" not in nanotron
    assert {"general", "parallelism", "model", "tokens"} <= nanotron
    picotron = top_level_keys(text("huggingface__picotron/template/base_config.json"))
    assert picotron == {"distributed", "model", "training", "dataset", "checkpoint", "logging",
                        "environment"}


def test_top_level_keys_of_flow_yaml_and_commented_json():
    # gpt-neox writes its YAML as a JSON-like flow mapping with # comments
    keys = top_level_keys(text("EleutherAI__gpt-neox/configs/125M.yml"))
    assert {"pipe_parallel_size", "zero_optimization", "num_layers"} <= keys
    assert "stage" not in keys  # zero_optimization.stage is nested
    assert top_level_keys('// c\n{"a": {"b": 1}, /* x */ "c": [1, {"d": 2}], e: "f:g"}') == {
        "a", "c", "e"}
    assert top_level_keys("a: 1\n  b: 2\n'c d': 3\n- x\n") == {"a", "c d"}


def test_a_megatron_test_case_with_flags_is_still_megatron():
    # the NeMo 2 signature needs dotted NeMo-Run keys and no `--flag` key under MODEL_ARGS
    name = ("NVIDIA__Megatron-LM/tests/functional_tests/test_cases/gpt/"
            "gpt3_345m_nightly_dgx_a100_1N8G_mcore_tp1_pp2/model_config.yaml")
    assert neighbour_format(corpus(name), text(name)) is None
    assert load_file(corpus(name)).fmt == "megatron"


def test_a_nemo2_python_recipe_is_never_executed_nor_read():
    # NeMo 2's recipes are Python (nemo/collections/llm/recipes at 8cfedd7); torchtitan's reader
    # takes .py files (config_registry.py) and must not claim them
    partial = load_file(corpus("NVIDIA__NeMo/nemo/collections/llm/recipes/llama3_8b.py"))
    assert partial.fmt == "unknown"
    assert [d.code for d in partial.diagnostics] == ["ML001"]


@pytest.mark.parametrize("name,fmt", [
    ("EleutherAI__gpt-neox/configs/125M.yml", "gpt-neox"),
    ("EleutherAI__gpt-neox/configs/llama/7B.yml", "gpt-neox-model"),
    ("microsoft__DeepSpeedExamples/Megatron-LM/model_size_test/ds_zero-offload_4B_config.json",
     "deepspeed"),
])
def test_memlints_own_formats_are_still_detected(name, fmt):
    assert load_file(corpus(name)).fmt == fmt
