"""`vllm serve` scripts and vLLM YAML configs (memlint/adapters/vllm_serve.py): the engine alone.

The numbers checked come from vLLM's own start-up logs (bench/data/calibration/vllm-startups, llm-d-planner's
vLLM 0.19.0 runs on H100) and from open-r1's published serving script for DeepSeek-R1.
"""
from __future__ import annotations

import os

import pytest

from memlint.adapters import vllm_serve
from memlint.adapters.registry import load_file
from memlint.api import Options, one_run, run_pipeline
from memlint.diagnostics import Severity
from memlint.memory.rl.result import RLEstimate
from memlint.rules import registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPEN_R1 = os.path.join(ROOT, "fixtures", "real-world", "huggingface__open-r1", "slurm")
GiB = 1024**3


def _check(path: str, *assignments: str):
    options = Options(assignments=assignments)
    run = one_run([path], options)
    return run_pipeline(run, options, registry())


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _values(partial) -> dict:
    return {key: setting.value for key, setting in partial.settings.items()}


def test_open_r1_deepseek_r1_server_script_is_read():
    partial = load_file(os.path.join(OPEN_R1, "experimental", "serve_r1_vllm.slurm"))
    values = _values(partial)
    assert partial.fmt == "vllm-serve"
    assert values["engine.tp"] == 8 and values["engine.pp"] == 4
    assert values["engine.gpu_memory_utilization"] == 0.9
    assert values["engine.max_model_len"] == 32768
    assert values["engine.max_num_batched_tokens"] == 262144
    assert values["engine.max_num_seqs"] == 128
    assert values["world_size"] == 32
    # the model comes from `getopts -m` with a default the reader cannot tell from $OPTARG
    assert "model" not in values
    assert any("served model is not known" in d.message for d in partial.diagnostics)


def test_open_r1_deepseek_r1_on_four_h100_nodes_fits():
    """open-r1 served DeepSeek-R1 (FP8 checkpoint) with this script on 4 x 8 H100: vLLM loads
    the FP8 weights (quantization_config, no --quantization flag), 21 GB a GPU at tp 8 x pp 4."""
    path = os.path.join(OPEN_R1, "experimental", "serve_r1_vllm.slurm")
    diagnostics, est = _check(path, "gpu=H100-80GB", "model=deepseek-ai/DeepSeek-R1")
    errors = [d for d in diagnostics if d.severity == Severity.ERROR]
    assert not errors, [(d.code, d.message[:200]) for d in errors]
    assert isinstance(est, RLEstimate) and est.rl.placement == "serve"
    engine = est.rl.engine
    assert 19 * GiB < engine.weights < 20.5 * GiB
    assert engine.concurrency > 1
    assert [p.name for p in est.stages[0].phases] == ["serve"]


def test_generate_script_with_unknown_parallel_sizes_gives_infos_not_errors():
    partial = load_file(os.path.join(OPEN_R1, "generate.slurm"))
    unresolved = [d.message for d in partial.diagnostics if d.code == "ML007"]
    assert any("--tensor-parallel-size" in m for m in unresolved)
    assert _values(partial)["engine.max_model_len"] == 16384


def test_llama_8b_kv_pool_matches_vllm_start_up_log(tmp_path):
    """vLLM 0.19.0 on an H100 (79.19 GiB as torch sees it), Llama-3.1-8B-Instruct at 0.95 and
    max_model_len 8192 logged a KV cache of 58.11 GiB, 476,000 tokens, 58.11x concurrency
    (bench/data/calibration/vllm-startups/results_raw-v0.19.0.csv)."""
    path = _write(tmp_path, "serve.sh", "#!/bin/bash\nvllm serve meta-llama/Llama-3.1-8B-Instruct "
                  "\\\n  --gpu-memory-utilization 0.95 --max-model-len 8192\n")
    diagnostics, est = _check(path, "gpu=H100-80GB", "gpu_memory=79.19GiB")
    assert not [d for d in diagnostics if d.severity >= Severity.WARNING]
    engine = est.rl.engine
    assert engine.kv_pool == pytest.approx(58.11 * GiB, rel=0.02)
    assert engine.pool_tokens == pytest.approx(476_000, rel=0.02)
    assert engine.concurrency == pytest.approx(58.11, rel=0.02)
    # the API server's defaults on an H100: 8192 batched tokens, 1024 sequences
    assert est.stages[0].phases[0].terms[1].inputs["max_num_batched_tokens"] == 8192


def test_api_server_module_and_yaml_config_command_line_wins(tmp_path):
    _write(tmp_path, "engine.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\n"
           "gpu-memory-utilization: 0.5\nmax-model-len: 4096\ntensor-parallel-size: 2\n")
    path = _write(tmp_path, "serve.sh", "python -m vllm.entrypoints.openai.api_server "
                  "--config engine.yaml --max-model-len 32K\n")
    values = _values(load_file(path))
    assert values["engine.gpu_memory_utilization"] == 0.5
    assert values["engine.tp"] == 2 and values["world_size"] == 2
    assert values["engine.max_model_len"] == 32768       # the command line over the file


def test_yaml_config_alone(tmp_path):
    path = _write(tmp_path, "vllm.yaml", "model: Qwen/Qwen2.5-7B-Instruct\n"
                  "gpu_memory_utilization: 0.8\nmax_model_len: 32k\ntensor_parallel_size: 1\n")
    partial = load_file(path)
    assert partial.fmt == "vllm-serve"
    assert _values(partial)["engine.max_model_len"] == 32000


@pytest.mark.parametrize("text,value", [("32768", 32768), ("32k", 32000), ("32K", 32768),
                                        ("1.5k", 1500), ("1M", 1024**2), ("auto", None)])
def test_human_readable_integers(text, value):
    assert vllm_serve._size(text) == value


def test_max_model_len_beyond_the_pool_is_vllms_own_refusal(tmp_path):
    path = _write(tmp_path, "serve.sh", "vllm serve meta-llama/Llama-3.1-8B-Instruct "
                  "--gpu-memory-utilization 0.25 --max-model-len 131072\n")
    diagnostics, est = _check(path, "gpu=H100-80GB")
    refusal = [d for d in diagnostics if d.code == "ML802"]
    assert refusal and "kv_cache_utils.py:708" in refusal[0].message
    assert est.rl.engine.pool_tokens < 131072
