"""The vocabulary is padded once, by the memory model, with the run's tp (memlint/facts/vocab.py).

The adapters record the raw vocabulary and the framework's multiple; Megatron-LM pads to a
multiple of make_vocab_size_divisible_by × tensor_model_parallel_size
(megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding), so the same script run
at tp=1 builds a smaller embedding than at tp=8.
"""
from __future__ import annotations

import os

import memlint
from memlint.facts.vocab import padded_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# NVIDIA/Megatron-LM examples/gpt3/train_gpt3_175b_distributed.sh (fixtures/real-world/SOURCES.md):
# --tensor-model-parallel-size 8, hidden 12288, the GPT-2 BPE vocabulary (50,257 tokens).
GPT3 = os.path.join(ROOT, "fixtures", "real-world", "NVIDIA__Megatron-LM", "examples", "gpt3",
                    "train_gpt3_175b_distributed.sh")
HIDDEN, POSITIONS = 12288, 2048
# NVIDIA/Megatron-LM tests/functional_tests/test_cases/gpt/gpt3_345m_nightly_dgx_a100_1N8G_mcore_
# tp4_pp1/model_config.yaml: tp 4, hidden 512, 1,024 learned positions, GPT-2 BPE.
GPT_CI = os.path.join(ROOT, "fixtures", "real-world", "NVIDIA__Megatron-LM", "tests",
                      "functional_tests", "test_cases", "gpt",
                      "gpt3_345m_nightly_dgx_a100_1N8G_mcore_tp4_pp1", "model_config.yaml")


def test_padding_closed_form_matches_megatron_loop():
    for vocab in (1, 127, 128, 50257, 128256, 129280):
        for multiple, tp in ((128, 1), (128, 8), (64, 3)):
            after = vocab
            while after % (multiple * tp):
                after += 1
            assert padded_vocab(vocab, multiple, tp) == after


def test_megatron_script_pads_with_the_runs_tp():
    at_tp8 = memlint.estimate([GPT3], world_size=1024, gpu="H100-80GB")
    at_tp1 = memlint.estimate([GPT3], world_size=1024, gpu="H100-80GB", tp=1)
    # word embedding (tied with the output layer) + learned positions
    assert at_tp8.params["embedding"] == (51200 + POSITIONS) * HIDDEN  # ceil(50257/1024)·1024
    assert at_tp1.params["embedding"] == (50304 + POSITIONS) * HIDDEN  # ceil(50257/128)·128
    last = at_tp1.stages[-1]
    logits = last.term("logits") or next(
        (t for p in last.phases for t in p.terms if t.name == "logits"), None)
    assert logits is not None
    assert "ceil(V 50,257 / (128·tp 1))·128 = 50,304" in logits.formula


def test_plan_pads_each_candidate_with_its_tp():
    ranked = memlint.plan([GPT_CI], gpus=8, gpu="H100-80GB", top=None)
    embedding = {plan.settings["tp"]: plan.estimate.params["embedding"] for plan in ranked.plans}
    assert set(embedding) == {1, 2, 4, 8}, ranked.reason
    for tp, count in embedding.items():
        assert count == (padded_vocab(50257, 128, tp) + 1024) * 512
