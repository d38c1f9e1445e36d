"""torchtitan's torch.compile and float8 settings in both spellings (fixtures/adapters/SOURCES.md):
- 9dec370 (2024-12): `[training] compile`, `batch_size`, `[float8] enable_float8_linear`; its
  train.py compiled the TransformerBlocks only (the loss compile commented out);
- e7c0cae (2025-06): `[training] compile` beside `local_batch_size` (the loss compiled too,
  components/loss.py build_cross_entropy_loss), `[model] converters = ["float8"]`,
  `[float8] enable_fsdp_float8_all_gather`;
- `[compile] enable` + `components` (torchtitan/config/job_config.py Compile)."""
from __future__ import annotations

import os

from memlint.adapters import torchtitan

GOOD = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "fixtures", "adapters", "torchtitan", "good")


def _load(name=None, text=None):
    path = os.path.join(GOOD, name) if name else "train.toml"
    return torchtitan.load(path, text if text is not None else open(path, encoding="utf-8").read())


def test_9dec370_compile_flag_is_model_only_and_float8_off():
    partial = _load("llama3_8b_9dec370.toml")
    assert partial.settings["compile"].value is False
    assert partial.settings["compile"].prov.line == 37
    assert partial.settings["compile_loss"].value is False
    assert partial.settings["precision"].value == "bf16"


def test_e7c0cae_benchmark_compiles_model_and_loss_with_float8_all_gather():
    partial = _load("llama3_8b_e7c0cae_float8_compile.toml")
    assert partial.settings["compile"].value is True
    assert "compile_loss" not in partial.settings   # the default: the loss compiled with it
    precision = partial.settings["precision"]
    assert precision.value == "fp8" and precision.prov.line == 22   # converters = ["float8"]
    assert partial.extra["fsdp.allgather_dtype_bytes"].value == 1


def test_compile_components_decide_the_loss():
    model_only = _load(text='[compile]\nenable = true\ncomponents = ["model"]\n')
    assert model_only.settings["compile"].value is True
    assert model_only.settings["compile_loss"].value is False
    both = _load(text='[compile]\nenable = true\ncomponents = ["model", "loss"]\n')
    assert both.settings["compile"].value is True
    assert both.settings["compile_loss"].value is True
    off = _load(text='[compile]\nenable = false\ncomponents = ["model", "loss"]\n')
    assert off.settings["compile"].value is False
    assert off.settings["compile_loss"].value is False


def test_loss_only_compile_leaves_the_blocks_eager():
    """torchtitan's DeepSeek-V3 16B config (fixtures/shared-real/torchtitan, ../SOURCES.md)
    compiles the loss alone: `components = ["loss"]`. torchtitan compiles the blocks under
    `enable and "model" in components` (models/*/infra/parallelize.py) and the loss under
    `enable and "loss" in components` (components/loss.py build_cross_entropy_loss)."""
    path = os.path.join(os.path.dirname(GOOD), "..", "..", "shared-real", "torchtitan",
                        "torchtitan__torchtitan-models-deepseek_v3-train_configs-"
                        "deepseek_v3_16b.toml")
    partial = _load(text=open(path, encoding="utf-8").read())
    assert partial.settings["compile"].value is False
    assert partial.settings["compile_loss"].value is True
    assert partial.settings["compile_loss"].prov.line == 69


def test_old_float8_switch_sets_fp8():
    partial = _load(text="[float8]\nenable_float8_linear = true\n")
    assert partial.settings["precision"].value == "fp8"
