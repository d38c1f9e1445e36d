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
    they gave "missing hidden_size" errors. Now they go to the trainer-argument reader (or nowhere)."""
    for name in ("examples/pytorch/llm/scripts/baichuan2_7b_chat/lora_ddp/sft.json",
                 "examples/pytorch/llm/runs/baichuan2-7b-chat/v0-20230918-113200/sft_args.json",
                 "circle_rope/train/train_config.json"):
        path, text = _read(SWIFT + name)
        assert not deepspeed.detect(path, text) and not hf_config.detect(path, text), name
        diagnostics, formats, code = lint([SWIFT + name])
        assert formats[0] not in ("deepspeed", "hf_config"), (name, formats)
        assert code == 0 and not errors(diagnostics)


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


def test_bloom_pipeline_partition_counts_embeddings():
    """BLOOM-176B (tr11): 70 layers over pp 12 with --pp-partition-method
    'type:transformer|embedding' (72 partitioned layers) trained on 384 A100s."""
    diagnostics, _formats, code = lint(["bigscience-workshop__bigscience/train/tr11-176B-ml/"
                                        "tr11-176B-ml.slurm"])
    assert code == 0 and not errors(diagnostics), diagnostics


def test_deepspeed_reads_hjson_line_breaks_as_separators():
    """DeepSpeedExamples training/imagenet/config/ds_config.json misses a comma at a line end;
    DeepSpeedConfig loads it with hjson.load (runtime/config.py), which accepts that."""
    partial = load_file(os.path.join(CORPUS, "microsoft__DeepSpeedExamples/training/imagenet/"
                                             "config/ds_config.json"))
    assert partial.fmt == "deepspeed"
    assert not [d for d in partial.diagnostics if d.severity == Severity.ERROR]
    diagnostics, _formats, code = lint(["microsoft__DeepSpeedExamples/training/imagenet/config/"
                                        "ds_config.json"])
    assert code == 0 and not errors(diagnostics)


def test_yaml_duplicate_key_in_a_framework_file_is_a_warning():
    """Megatron's gpt3_mcore_reruns_enable test case repeats --ffn-hidden-size (same value);
    PyYAML keeps the later one and the case runs in CI. memlint's own files still reject it."""
    name = ("NVIDIA__Megatron-LM/tests/functional_tests/test_cases/gpt/gpt3_mcore_reruns_enable/"
            "model_config.yaml")
    diagnostics, _formats, code = lint([name])
    assert code == 0 and not errors(diagnostics)
    assert [d for d in diagnostics if d.code == "ML010" and d.severity == Severity.WARNING]


def test_yaml_duplicate_key_in_a_memlint_file_is_still_an_error(tmp_path):
    path = tmp_path / "run.memlint.yaml"
    path.write_text("memlint:\n  tp: 2\n  tp: 4\n", encoding="utf-8")
    partial = load_file(str(path))
    assert [d for d in partial.diagnostics
            if d.code == "ML010" and d.severity == Severity.ERROR]


def test_verl_hydra_launch_is_not_a_megatron_script():
    """verl's run_qwen2-7b_megatron.sh sets actor_rollout_ref.actor.megatron.* overrides and
    converts a checkpoint with --hf_model_path: read as Megatron flags they were 'unknown flag'
    warnings and a phantom run. It is verl's Hydra launch, read by the verl adapter (issue 28)."""
    for name in ("run_qwen2-7b_megatron.sh", "run_qwen3moe-30b_megatron.sh"):
        partial = load_file(os.path.join(CORPUS, "volcengine__verl/examples/grpo_trainer", name))
        assert partial.fmt == "verl", name
        assert partial.settings["framework"].value == "megatron"
    megatron = load_file(os.path.join(CORPUS, "NVIDIA__Megatron-LM/examples/llama/"
                                              "train_llama3_8b_h100_fp8.sh"))
    assert megatron.fmt == "megatron"


LF_QWEN3 = "hiyouga__LLaMA-Factory/examples/train_full/qwen3_full_sft_autotp.yaml"


def test_trainer_deepspeed_path_is_found_from_the_project_root_above_the_yaml():
    """LLaMA-Factory's qwen3_full_sft_autotp.yaml names `examples/deepspeed/...json`, relative to
    the LLaMA-Factory root it is launched from (`llamafactory-cli train examples/...`). Checked
    alone it was not found (memlint looked beside the YAML and at the repository root only), and
    the memory check ran without ZeRO: a false ML101 error. The folders above the YAML are tried
    now, so the copied LLaMA-Factory tree's own DeepSpeed file is read."""
    diagnostics, formats, code = lint([LF_QWEN3])
    assert formats.count("deepspeed") == 1, formats
    assert code == 0 and not errors(diagnostics)
    assert not [d for d in diagnostics if "not found" in d.message]


def test_a_verdict_that_rests_on_an_unread_reference_is_a_warning(tmp_path):
    """The same YAML with its DeepSpeed file missing: the run's ZeRO stage is unknown, so the OOM
    verdict (Qwen3-32B full fine-tuning, unsharded) is a warning naming the file, not an error."""
    path = tmp_path / "qwen3_full_sft_autotp.yaml"
    path.write_text(open(os.path.join(CORPUS, LF_QWEN3), encoding="utf-8").read(),
                    encoding="utf-8")
    diagnostics, _formats, code = lint([str(path)], "--world-size", "8")
    oom = [d for d in diagnostics if d.code == "ML101"]
    assert len(oom) == 1 and oom[0].severity == Severity.WARNING, oom
    assert "examples/deepspeed/ds_z2_autotp_config.json" in oom[0].message
    assert oom[0].data["rests_on_unread_files"] == ["examples/deepspeed/ds_z2_autotp_config.json"]
    assert code == 0
