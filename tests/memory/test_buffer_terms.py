"""The estimate carries DeepSpeed's ZeRO buffers and FSDP2's gather buffers as named terms."""
import json

from memlint.adapters.registry import load_file
from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial


def _deepspeed_estimate(tmp_path, zero: dict):
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
              "zero_optimization": zero}
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(config, indent=1))
    scenario, _ = build([load_file(str(path)),
                         overrides_partial(["world_size=8", "seq_len=2048"], model="llama3-8b")])
    return estimate(scenario).stages[0]


def _term(stage, name):
    return next(t for p in stage.phases for t in p.terms if t.name == name)


def test_zero2_reduce_bucket_doubles_with_overlap_comm(tmp_path):
    stage = _deepspeed_estimate(tmp_path, {"stage": 2, "reduce_bucket_size": 1e8,
                                           "overlap_comm": True, "contiguous_gradients": True})
    assert _term(stage, "buffers.zero_reduce_bucket").bytes == 2 * 10**8 * 2


def test_zero3_live_parameters_and_persistence(tmp_path):
    stage = _deepspeed_estimate(tmp_path, {"stage": 3, "stage3_max_live_parameters": 5e8,
                                           "stage3_param_persistence_threshold": 1e4})
    # the ceiling is 5e8, but Llama-3-8B's output layer (128,256 x 4,096 = 525,336,576
    # elements) is one module, gathered whole at the loss
    assert _term(stage, "buffers.zero3_live_parameters").bytes == 128256 * 4096 * 2
    lower = _deepspeed_estimate(tmp_path, {"stage": 3, "stage3_max_live_parameters": 6e8})
    assert _term(lower, "buffers.zero3_live_parameters").bytes == 6 * 10**8 * 2
    persistent = _term(stage, "buffers.zero3_persistent_parameters")
    assert persistent.inputs["tensors"] == 2 * 32 + 1  # two norms per layer + the final norm
    assert persistent.bytes == 65 * 4096 * 2 - (65 * 4096 * 2) // 8


def test_fsdp2_root_and_one_gathered_layer():
    scenario, _ = build([overrides_partial(["framework=fsdp2", "fsdp=full", "world_size=8",
                                            "seq_len=2048"], model="llama3-8b")])
    stage = estimate(scenario).stages[0]
    root = _term(stage, "buffers.fsdp.root_unsharded")
    assert root.bytes == (128256 * 4096 * 2 + 4096) * 2
    layer = _term(stage, "buffers.fsdp.allgather_units")
    assert layer.bytes == 218112000 * 2
