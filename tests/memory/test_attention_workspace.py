"""cuDNN's deterministic attention backward and its dP workspace (memory/attention_workspace.py),
on Megatron-LM's CI case multimodal_llava_mcore_te_tp4_sp_cp2 (LLaVA, tp 4 + sp, cp 2,
--use-packed-sequence: THD tensors, NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, --deterministic-mode).
Its H100 golden value (mem-max-allocated-bytes 2,137,679,360; 1,650,282,496 after the step) is in
bench/data/calibration/gpu-megatron-ci/records.json; the config is a byte copy of the case's
model_config.yaml at NVIDIA/Megatron-LM@d98e8a64."""
from __future__ import annotations

import os

import pytest

from memlint.adapters import megatron as M
from memlint.memory import attention_workspace as aw
from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "bench", "data", "calibration", "gpu-megatron-ci", "configs",
                      "multimodal-llava__multimodal_llava_mcore_te_tp4_sp_cp2.yaml")
MEASURED = 2_137_679_360


def llava(text=None, gpu="H100-80GB"):
    if text is None:
        with open(CONFIG, encoding="utf-8") as handle:
            text = handle.read()
    partial = M.load(CONFIG, text, entry="pretrain_vlm.py")
    cli = overrides_partial(["world_size=8", f"gpu={gpu}", "gpus_per_node=8"])
    scenario, diagnostics = build([partial, cli])
    assert not [d for d in diagnostics if d.severity.label == "error"]
    return estimate(scenario).stages[-1]


def config_text(*replace):
    with open(CONFIG, encoding="utf-8") as handle:
        text = handle.read()
    for old, new in replace:
        assert old in text
        text = text.replace(old, new)
    return text


def test_buckets_follow_transformer_engine():
    # transformer_engine/common/fused_attn/utils.cu get_max_batch_size / get_max_tokens comments
    assert [aw.bucket_batch(b) for b in (1, 32, 33, 512, 513)] == [32, 32, 64, 512, 1024]
    assert [aw.bucket_tokens(t) for t in (904, 1024, 1025, 32768, 32769)] == \
        [1024, 1024, 2048, 32768, 65536]


def test_llava_packed_cp_peaks_in_the_attention_backward():
    last = llava()
    assert last.phase == "backward_attention"
    term = next(t for t in last.terms if t.name == "buffers.cudnn_dp_workspace")
    # THD bucket: 1 sample -> batch 32, 904 tokens per cp rank -> 1024; 16 heads / tp 4
    assert term.bytes == 2 * 32 * 4 * 1024 * 1024
    assert not [t for t in last.terms if t.component == "logits"]
    # was -13.7% without the workspace
    assert abs(last.allocated_bytes - MEASURED) / MEASURED < 0.03


@pytest.mark.parametrize("replace, gpu", [
    # nondeterministic: cuDNN's dQ-accumulator path instead of the dP workspace
    ((("NVTE_ALLOW_NONDETERMINISTIC_ALGO: 0", "NVTE_ALLOW_NONDETERMINISTIC_ALGO: 1"),
      ("  --deterministic-mode: true\n", "")), "H100-80GB"),
    # flash-attn, not cuDNN
    ((("  --use-packed-sequence: true\n", "  --use-packed-sequence: true\n"
       "  --attention-backend: flash\n"),), "H100-80GB"),
    # before sm90 TE refuses FusedAttention for a deterministic backward
    ((), "A100-80GB"),
    # not an NVIDIA GPU (no compute capability)
    ((), "MI300X"),
])
def test_no_workspace_off_the_deterministic_cudnn_path(replace, gpu):
    last = llava(config_text(*replace), gpu)
    assert last.phase != "backward_attention"
    assert all(p.name != "backward_attention" for p in last.phases)


def test_bshd_sizes_from_the_run():
    # without packing the graph is the run's own: b = micro batch, s = T/cp (no bucket)
    last = llava(config_text(("  --use-packed-sequence: true\n", "")))
    phase = next(p for p in last.phases if p.name == "backward_attention")
    term = next(t for t in phase.terms if t.name == "buffers.cudnn_dp_workspace")
    assert (term.inputs["b"], term.inputs["s_q"], term.inputs["thd"]) == (1, 960, False)
