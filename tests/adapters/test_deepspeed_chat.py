"""Issue 27 class 2: DeepSpeed-Chat's command line states the sharding (`--zero_stage`), the
offload (`--offload`), the precision (`--dtype`), recompute (`--gradient_checkpointing`) and LoRA
(`--lora_dim`): main.py builds the DeepSpeed config from them (dschat/utils/ds_utils.py). It was
read as a plain HF Trainer script (fp32, unsharded: 106 GiB for Llama-2-7B); now each flag reaches
the estimate. Real files: microsoft/DeepSpeedExamples applications/DeepSpeed-Chat
(fixtures/real-world, SOURCES.md)."""
import os

from memlint.adapters.registry import load_file
from memlint.api import Options, check_paths
from memlint.diagnostics import Severity

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHAT = os.path.join(ROOT, "fixtures", "real-world", "microsoft__DeepSpeedExamples", "applications",
                    "DeepSpeed-Chat", "training")
STEP1 = os.path.join(CHAT, "step1_supervised_finetuning", "training_scripts")


def settings(path) -> dict:
    partial = load_file(path)
    assert partial.fmt == "deepspeed-chat"
    return {key: s.value for key, s in partial.settings.items()}


def test_the_command_line_states_zero_dtype_recompute_and_batch():
    # ZERO_STAGE=$2 with the script's own default 3; --gradient_checkpointing; dtype default fp16
    found = settings(os.path.join(STEP1, "llama2", "run_llama2_7b.sh"))
    assert found["framework"] == "deepspeed" and found["zero"] == 3
    assert found["recompute"] == "full" and found["precision"] == "fp16"
    assert found["micro_batch"] == 4 and found["seq_len"] == 512
    assert found["model"] == "meta-llama/Llama-2-7b-hf"


def test_offload_and_lora_only():
    # opt/single_node/run_1.3b_lora.sh: --lora_dim 128 --lora_module_name decoder.layers.
    # --only_optimize_lora; step2 llama2/run_llama2_7b.sh: --offload at ZeRO-3 (its default)
    lora = settings(os.path.join(STEP1, "opt", "single_node", "run_1.3b_lora.sh"))
    assert lora["lora_rank"] == 128 and lora["lora_targets"] == "all-linear"
    offload = settings(os.path.join(CHAT, "step2_reward_model_finetuning", "training_scripts",
                                    "llama2", "run_llama2_7b.sh"))
    assert offload["offload_optimizer"] == "cpu" and offload["zero"] == 3
    assert offload["offload_params"] == "cpu"


def test_lora_without_only_optimize_lora_trains_the_base_and_says_so():
    path = os.path.join(STEP1, "llama2", "run_llama2_7b_lora.sh")
    found = settings(path)
    assert "lora_rank" not in found  # the base is trained: full fine-tuning
    partial = load_file(path)
    assert any("without --only_optimize_lora" in d.message for d in partial.diagnostics)


def test_the_estimate_follows_the_stated_sharding():
    result = check_paths([os.path.join(STEP1, "llama2", "run_llama2_7b.sh")],
                         Options(assignments=("world_size=8", "gpu=A100-80GB")))
    [estimate] = result.estimates
    assert estimate.peak_bytes < 30 * 2**30   # ZeRO-3 over 8 GPUs with recompute, not 106 GiB
    assert not [d for d in result.diagnostics if d.severity >= Severity.WARNING
                and d.code == "ML101"]


def test_step3_rlhf_is_read_and_gets_a_named_reason():
    path = os.path.join(CHAT, "step3_rlhf_finetuning", "training_scripts", "llama2",
                        "run_llama2_7b.sh")
    result = check_paths([path], Options(assignments=("world_size=8",)))
    assert not result.estimates
    assert result.summary.files and list(result.summary.without.values()) == [
        "training setup not modeled"]   # it trains (an actor and a critic), unmodeled


def test_every_argument_it_reads_has_a_memory_class():
    from memlint.facts.coverage import table
    spec = table("deepspeed_chat")
    for step in ("step1_supervised_finetuning", "step2_reward_model_finetuning"):
        root = os.path.join(CHAT, step, "training_scripts")
        for folder, _dirs, names in os.walk(root):
            for name in names:
                partial = load_file(os.path.join(folder, name))
                for key in partial.extra:
                    if key.startswith("deepspeed_chat."):
                        assert spec.memory_class(key[len("deepspeed_chat."):]), key
