"""What the run's PyTorch release changes in the optimizer step (key `torch.version`,
memory/optimizer_step.py), and the dtype of PEFT's modules_to_save copies' gradients and moments
under a torch optimizer (memory/lora.py saved_copy_dtypes).

The Qwen v1 finetuning table (QwenLM/Qwen README @2df8e8a l.796) was measured with "CUDA 11.8 and
Pytorch 2.0"; its single-GPU LoRA runs step with the HF Trainer's torch AdamW (adamw_torch).
"""
from __future__ import annotations

import os

import pytest

from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN_7B = os.path.join(ROOT, "bench", "data", "calibration", "gpu-published", "configs", "models",
                       "qwen-7b", "config.json")
# Qwen README's 7B LoRA rows (finetune_lora_single_gpu.sh: HF Trainer, bf16, r 64 on c_attn,
# c_proj, w1, w2; the manifest's qwen-7b-lora-T256 arguments)
QWEN_LORA = ["world_size=1", "gpu=A100-80GB", "micro_batch=1", "grad_accum=8", "seq_len=256",
             "recompute=full", "attention=flash", "train_base=false", "lora_rank=64",
             "lora_targets=all-linear", "lora_dropout=0.05", "optimizer=adamw", "framework=hf",
             "precision=bf16", "param_dtype=bf16", "transformers.loss_upcast=false"]
# Qwen-7B v1: fused c_attn (4096 -> 12288), attention c_proj, w1 / w2 (4096 -> 11008), MLP c_proj
QWEN_7B_ADAPTERS = 32 * 64 * ((4096 + 12288) + (4096 + 4096) + 2 * (4096 + 11008) + (11008 + 4096))
QWEN_7B_VOCAB_BY_HIDDEN = 151_936 * 4_096


def _estimate(sets, model=QWEN_7B):
    scenario, diagnostics = build([overrides_partial(list(sets), model=model)])
    assert not [d for d in diagnostics if d.severity.label == "error"], diagnostics
    return estimate(scenario)


def _optimizer_terms(result) -> dict:
    phase = next(p for p in result.stages[0].phases if p.name == "optimizer")
    return {t.name: t for t in phase.terms}


def test_torch_2_0_foreach_adamw_keeps_sqrt_and_denom():
    """torch 2.0's `_multi_tensor_adamw`: `exp_avg_sq_sqrt = _foreach_sqrt(...)` and `denom =
    _foreach_add(exp_avg_sq_sqrt, eps)` alive together; from 2.1 (#104898) eps is added in place."""
    current = _optimizer_terms(_estimate(QWEN_LORA))["optimizer.step_temporaries"]
    old = _optimizer_terms(_estimate(QWEN_LORA + ["torch.version=2.0"]))[
        "optimizer.step_temporaries"]
    assert current.bytes == QWEN_7B_ADAPTERS * 4                 # fp32 adapters' moments
    assert old.bytes == 2 * QWEN_7B_ADAPTERS * 4
    assert old.inputs["intermediates"] == 2 and current.inputs["intermediates"] == 1
    assert "#104898" in old.source and "denom" in old.formula
    later = _optimizer_terms(_estimate(QWEN_LORA + ["torch.version=2.1.0"]))
    assert later["optimizer.step_temporaries"].bytes == current.bytes


def test_torch_before_2_0_steps_the_for_loop_by_default():
    """Before 2.0 torch's Adam family defaults to the for-loop step on CUDA (#97712): two
    temporaries of the largest parameter, not of all of them."""
    terms = _optimizer_terms(_estimate(QWEN_LORA + ["torch.version=1.13.1"]))
    term = terms["optimizer.step_temporaries"]
    assert "for-loop" in term.formula
    assert term.bytes == 2 * 64 * 11008 * 4          # the largest adapter matrix, r x ffn
    # an explicit implementation wins over the version's default
    chosen = _optimizer_terms(_estimate(QWEN_LORA + ["torch.version=1.13.1",
                                                     "optimizer_impl=foreach"]))
    assert "foreach" in chosen["optimizer.step_temporaries"].formula


def test_qwen_7b_lora_at_256_tokens_peaks_in_the_torch_2_0_step():
    """At 256 tokens the activations are small: with torch 2.0's two temporaries the step
    (weights, fp32 adapters, their gradients, moments and 2 x 4 B per adapter parameter) is the
    peak, above the backward's start."""
    result = _estimate(QWEN_LORA + ["torch.version=2.0"])
    stage = result.stages[0]
    assert stage.phase == "optimizer"
    before = _estimate(QWEN_LORA).stages[0]
    assert before.phase == "backward_start"
    assert stage.allocated_bytes - before.allocated_bytes > 0


def test_torch_version_is_a_version():
    scenario, diagnostics = build([overrides_partial(["torch.version=v2.0.1"])])
    assert scenario.convention_keys.get("torch.version") == "2.0.1"
    _, bad = build([overrides_partial(["torch.version=two"])])
    assert any("torch.version" in d.message for d in bad)


@pytest.mark.parametrize("version,count", [(None, 1), ("2.0", 2)])
def test_modules_to_save_copies_train_in_the_loaded_dtype(version, count):
    """Qwen's finetune.py @e6f2a7a l.323-326 sets modules_to_save ["wte", "lm_head"] for a base
    (non-chat) model: the README's "LoRA (emb)" rows. PEFT deep-copies the bf16 modules, so the
    copies' gradients (a gradient has its parameter's dtype) and torch AdamW's moments
    (`zeros_like(p)`) are bf16, while the fp32 adapters keep fp32 ones."""
    sets = QWEN_LORA + ["lora_modules_to_save=wte,lm_head"]
    if version:
        sets.append(f"torch.version={version}")
    result = _estimate(sets)
    terms = _optimizer_terms(result)
    copies = 2 * QWEN_7B_VOCAB_BY_HIDDEN
    assert terms["weights.modules_to_save"].bytes == copies * 2
    assert terms["gradients.modules_to_save"].bytes == copies * 2
    assert terms["optimizer.moments.modules_to_save"].bytes == copies * 2 * 2
    assert terms["gradients.lora"].bytes == QWEN_7B_ADAPTERS * 4
    assert terms["optimizer.moments.lora"].bytes == QWEN_7B_ADAPTERS * 2 * 4
    step = terms["optimizer.step_temporaries"]
    assert step.bytes == count * (QWEN_7B_ADAPTERS * 4 + copies * 2)
    assert f"{copies:,} × 2 B" in step.formula


def test_modules_to_save_copies_of_an_fp32_model_stay_fp32():
    """Loaded in fp32 (no param_dtype), the copies, their gradients and moments are fp32."""
    sets = [s for s in QWEN_LORA if not s.startswith("param_dtype")] + [
        "lora_modules_to_save=wte,lm_head"]
    terms = _optimizer_terms(_estimate(sets))
    copies = 2 * QWEN_7B_VOCAB_BY_HIDDEN
    assert terms["weights.modules_to_save"].bytes == copies * 4
    assert terms["gradients.modules_to_save"].bytes == copies * 4
    assert terms["optimizer.moments.modules_to_save"].bytes == copies * 2 * 4
