"""Issue 27 class 2: ms-swift's `swift sft` / `megatron sft` arguments are read (adapters/ms_swift.py,
ms_swift_megatron.py) with ms-swift's own defaults. Real files: modelscope/ms-swift examples at
3602360 (fixtures/real-world, SOURCES.md). Several examples state their memory in their first
line ("# 10GB", "# 2 * 62GiB"): those are independent checks, not fitted (a band of 25%)."""
import os

import pytest

from memlint.adapters.registry import load_file
from memlint.api import Options, check_paths
from memlint.diagnostics import Severity

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EX = os.path.join(ROOT, "fixtures", "real-world", "modelscope__ms-swift", "examples")


def settings(*parts) -> dict:
    partial = load_file(os.path.join(EX, *parts))
    assert partial.fmt == "ms-swift"
    return {key: s.value for key, s in partial.settings.items()}


def test_swift_sft_lora_with_swift_defaults():
    # train/tuners/lora/train.sh: CUDA_VISIBLE_DEVICES=0 swift sft --tuner_type lora --lora_rank 8
    found = settings("train", "tuners", "lora", "train.sh")
    assert found["model"] == "Qwen/Qwen2.5-7B-Instruct"   # not --model_name swift-robot
    assert found["lora_rank"] == 8 and found["lora_targets"] == "all-linear"
    assert found["world_size"] == 1 and found["micro_batch"] == 1 and found["grad_accum"] == 16
    assert found["recompute"] == "full"                    # gradient_checkpointing default True


def test_swift_deepspeed_names_are_its_bundled_configs():
    # train/multi-gpu/deepspeed/train_zero3.sh: NPROC_PER_NODE=2 ... --deepspeed zero3
    found = settings("train", "multi-gpu", "deepspeed", "train_zero3.sh")
    assert found["framework"] == "deepspeed" and found["zero"] == 3
    assert found["world_size"] == 2


def test_megatron_sft_reads_megatron_arguments_with_underscores():
    # megatron/lora/dense.sh: NPROC_PER_NODE=2 megatron sft --tensor_model_parallel_size 2
    # --sequence_parallel true --micro_batch_size 16 --recompute_granularity full --tuner_type lora
    found = settings("megatron", "lora", "dense.sh")
    assert found["framework"] == "megatron" and found["tp"] == 2 and found["sp"] is True
    assert found["micro_batch"] == 16 and found["recompute"] == "full"
    assert found["world_size"] == 2 and found["lora_rank"] == 8
    assert found["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert not any(k.startswith("model.") for k in found)  # the HF checkpoint is the model


def test_ulysses_sequence_parallel_splits_the_sequence_and_is_padded():
    path = os.path.join(EX, "train", "sequence_parallel", "sequence_parallel_qwen3_5.sh")
    result = check_paths([path], Options())
    # seq 65535 at sequence_parallel_size 4: ms-swift pads the split itself (no ML207)
    assert not [d for d in result.diagnostics if d.severity == Severity.ERROR]


def test_commands_that_do_not_train_get_a_named_reason():
    # `megatron rlhf --rlhf_type dpo` trains beside a reference model memlint does not model
    result = check_paths([os.path.join(EX, "megatron", "lora", "dpo.sh")], Options())
    assert not result.estimates
    [reason] = result.summary.without.values()
    assert reason == "training setup not modeled"


# (file, the GiB per GPU its first line states)
STATED = [
    (("train", "qlora", "bnb", "train.sh"), 10 * 10**9 / 2**30),      # "# 10GB"
    (("train", "multi-gpu", "deepspeed", "train_zero3.sh"), 16),     # "# 16GiB"
    (("megatron", "lora", "moe.sh"), 62),                            # "# 2 * 62GiB"
    (("megatron", "rlhf", "rm", "moe.sh"), 45),                      # "# 2 * 45GiB"
]


@pytest.mark.parametrize("parts,stated", STATED, ids=lambda v: "/".join(v) if isinstance(
    v, tuple) else str(v))
def test_the_estimate_is_near_the_memory_the_example_states(parts, stated):
    result = check_paths([os.path.join(EX, *parts)], Options(assignments=("gpu=H100-80GB",)))
    [estimate] = result.estimates
    assert abs(estimate.peak_bytes / 2**30 - stated) <= 0.25 * stated


def test_every_argument_it_records_has_a_memory_class():
    from memlint.facts.coverage import table
    spec = table("ms_swift")
    for folder, _dirs, names in os.walk(EX):
        for name in names:
            partial = load_file(os.path.join(folder, name))
            if partial.fmt != "ms-swift":
                continue
            for key in partial.extra:
                if key.startswith("ms_swift."):
                    assert spec.memory_class(key[len("ms_swift."):]), (name, key)


def test_an_arguments_file_alone_is_read_with_ms_swifts_meaning():
    # examples/yaml/deepspeed/sft.json (`swift sft sft.json`): `model` is the model and
    # `model_name: swift-bot` only the self-cognition name; read as HF arguments it took
    # swift-bot for the model, and `deepspeed: zero2` names ms-swift's bundled ZeRO-2 config
    got = settings("yaml", "deepspeed", "sft.json")
    assert got["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert got["zero"] == 2 and got["lora_rank"] == 8


def test_an_arguments_file_alone_leaves_the_world_size_to_its_command():
    # examples/yaml/megatron/sft.yaml states ep 4; the processes come from the command that runs
    # it (NPROC_PER_NODE=... megatron sft sft.yaml, sft.sh beside it), so alone it must not be
    # one GPU (an ML202 "ep must divide 1" error on a valid file)
    partial = load_file(os.path.join(EX, "yaml", "megatron", "sft.yaml"))
    assert partial.fmt == "ms-swift" and "world_size" not in partial.settings
    result = check_paths([os.path.join(EX, "yaml", "megatron", "sft.yaml")], Options())
    assert not [d for d in result.diagnostics if d.severity == Severity.ERROR]


def test_a_ray_config_is_not_read_as_one_trainer():
    # examples/ray/grpo/ray_grpo_colocate.yaml places train and rollout groups on GPUs
    partial = load_file(os.path.join(EX, "ray", "grpo", "ray_grpo_colocate.yaml"))
    assert partial.fmt != "ms-swift"
