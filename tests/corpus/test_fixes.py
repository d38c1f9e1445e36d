"""One test per false-alarm class the real-world corpus revealed, each on a real corpus file.

The files are in fixtures/real-world (provenance in its SOURCES.md); test_real_world.py checks
every file's verdict, these tests pin down the specific behaviour behind each fix.
"""
from __future__ import annotations

import os

from memlint.adapters import deepspeed, hf_config
from memlint.adapters.registry import load_file
from memlint.diagnostics import Severity

from test_real_world import CORPUS, errors, lint

SWIFT = "modelscope__ms-swift/"
MDS = "microsoft__Megatron-DeepSpeed/examples_deepspeed/"


def _read(name: str) -> tuple:
    path = os.path.join(CORPUS, name)
    with open(path, encoding="utf-8") as handle:
        return path, handle.read()


def test_trainer_argument_files_are_neither_deepspeed_nor_model_configs():
    """ms-swift's sft.json shares gradient_accumulation_steps with DeepSpeed, its sft_args.json
    and train_config.json carry a model_type: read as a DeepSpeed config or an HF config.json
    they gave "missing hidden_size" errors. Now they are a format memlint does not read."""
    for name in ("examples/pytorch/llm/scripts/baichuan2_7b_chat/lora_ddp/sft.json",
                 "examples/pytorch/llm/runs/baichuan2-7b-chat/v0-20230918-113200/sft_args.json",
                 "circle_rope/train/train_config.json"):
        path, text = _read(SWIFT + name)
        assert not deepspeed.detect(path, text) and not hf_config.detect(path, text), name
        diagnostics, formats, code = lint([SWIFT + name])
        assert formats == ["unknown"] and code == 0 and not errors(diagnostics)


def test_deepspeed_configs_beside_them_are_still_deepspeed():
    for name in ("swift/llm/ds_config/zero2.json", "swift/llm/ds_config/zero3_offload.json",
                 "examples/omega17_exp/ds_config_zero2.json"):
        path, text = _read(SWIFT + name)
        assert deepspeed.detect(path, text), name


def test_open_instruct_conf_is_read_as_deepspeed():
    """open-instruct keeps its DeepSpeed JSON as configs/ds_configs/*.conf."""
    partial = load_file(os.path.join(
        CORPUS, "allenai__open-instruct/configs/ds_configs/stage3_offloading_accelerate.conf"))
    assert partial.fmt == "deepspeed"
    assert partial.settings["zero"].value == 3
    assert partial.settings["offload_optimizer"].value == "cpu"


def test_gpt_neox_precision_block_extras_are_not_launch_failures():
    """gpt-neox writes "fp16": {"fp16": true, ...}; it runs DeeperSpeed, which reads the block
    key by key. A warning, not an error; a plain DeepSpeed file with the same key still errs."""
    diagnostics, _formats, code = lint(["EleutherAI__gpt-neox/configs/autotuning_configs/"
                                        "tune_1-3B.json"])
    assert code == 0 and not errors(diagnostics)
    assert any(d.code == "ML003" and d.severity == Severity.WARNING and "DeeperSpeed" in d.message
               for d in diagnostics)


def test_batch_mismatch_from_a_deepspeed_config_is_reported_once():
    """BingBertSquad's train_batch_size 24 with micro batch 6 on 8 GPUs: DeepSpeed derives 0
    accumulation steps. One diagnostic (ML301, DeepSpeed's derivation), not also ML206."""
    diagnostics, _formats, code = lint(
        ["microsoft__DeepSpeedExamples/BingBertSquad/deepspeed_bsz24_config.json"],
        "--world-size", "8", "--model", "llama3-8b")
    found = [d.code for d in errors(diagnostics)]
    assert "ML301" in found and "ML206" not in found, found


def test_megatron_deepspeed_flags_and_spellings_are_known():
    """Megatron-DeepSpeed's own flags (--no-query-key-layer-scaling, --num-key-value-heads) and
    its lower-case --normalization rmsnorm are not launch failures of Megatron-LM."""
    diagnostics, _formats, code = lint([MDS + "pretrain_llama2_distributed.sh"])
    assert code == 0 and not errors(diagnostics)
    unknown = [d.message for d in diagnostics if d.code == "ML003"]
    assert not unknown, unknown
    partial = load_file(os.path.join(CORPUS, MDS + "pretrain_llama2_distributed.sh"))
    assert partial.extra["megatron.normalization"].value == "RMSNorm"


def test_megatron_lm_still_rejects_the_fork_spelling():
    """Without --deepspeed the run is Megatron-LM, whose argparse choices are RMSNorm/LayerNorm."""
    from memlint.adapters import megatron

    partial = megatron.load("train.sh", "torchrun --nproc_per_node 8 pretrain_gpt.py "
                            "--num-layers 2 --normalization rmsnorm\n")
    assert any(d.code == "ML004" and "--normalization" in d.message for d in partial.diagnostics)
