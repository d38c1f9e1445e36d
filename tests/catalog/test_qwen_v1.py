"""Qwen v1 Hub ids (model_type qwen, QWenLMHeadModel remote code) resolve from the bundled
catalog: the real Qwen finetune scripts (fixtures/real-world/QwenLM__Qwen/finetune/*.sh, from
QwenLM/Qwen, blob ids in fixtures/real-world/SOURCES.md) name `Qwen/Qwen-7B` and
`Qwen/Qwen-7B-Chat-Int4`; the Int4 uploads carry a 4-bit GPTQ quantization_config (group 128)
that becomes base_quant gptq, the Int8 ones an 8-bit one memlint records as not modeled."""
from __future__ import annotations

import json
import os

import pytest

from memlint.catalog import hub
from memlint.scenario import UNMODELED_QUANTIZATION, build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN = os.path.join(ROOT, "fixtures", "real-world", "QwenLM__Qwen")
SIZES = ("1_8B", "7B", "14B", "72B")


def test_the_qwen_7b_entry_is_the_published_config_json():
    """fixtures/hf/Qwen-7B.json: a copy of Qwen/Qwen-7B's config.json (fixtures/hf/SOURCES.md);
    every key the entry holds has the file's value."""
    with open(os.path.join(ROOT, "fixtures", "hf", "Qwen-7B.json"), encoding="utf-8") as handle:
        published = json.load(handle)
    entry, _ = hub.catalog_lookup("Qwen/Qwen-7B")
    assert {k: published[k] for k in entry["config"]} == entry["config"]


@pytest.mark.parametrize("size", SIZES)
def test_every_qwen_v1_size_resolves_with_its_chat_and_gptq_variants(size):
    base, _ = hub.catalog_lookup(f"Qwen/Qwen-{size}")
    chat, _ = hub.catalog_lookup(f"Qwen/Qwen-{size}-Chat")
    assert base is chat and base["config"]["model_type"] == "qwen"
    for bits in (4, 8):
        quant, _ = hub.catalog_lookup(f"qwen/qwen-{size}-chat-int{bits}")
        assert quant["config"]["quantization_config"]["bits"] == bits
        assert {k: v for k, v in quant["config"].items() if k != "quantization_config"} \
            == base["config"]
        assert quant["params"] == base["params"]


def _scenario(name):
    return build([overrides_partial(["micro_batch=1"], model=name)])[0]


def test_int4_is_modeled_gptq_and_int8_is_named_not_modeled():
    four = _scenario("Qwen/Qwen-7B-Chat-Int4")
    assert four.training.base_quant == "gptq"
    assert UNMODELED_QUANTIZATION not in four.extra
    eight = _scenario("Qwen/Qwen-14B-Chat-Int8")
    assert eight.training.base_quant in (None, "none")
    assert "8-bit" in str(eight.extra[UNMODELED_QUANTIZATION].value)


def _check(rel, *extra):
    from helpers import check_json

    return check_json(QWEN, rel, *extra)


def test_qwen_lora_single_gpu_script_gets_an_estimate():
    """finetune_lora_single_gpu.sh line 6: MODEL="Qwen/Qwen-7B"; before the catalog held Qwen v1
    it had no estimate ("model not resolved")."""
    code, report = _check("finetune/finetune_lora_single_gpu.sh")
    assert code == 0, report["diagnostics"]
    assert report["estimates"], report["diagnostics"]
    assert not [d for d in report["diagnostics"] if d["severity"] == "error"]


def test_qwen_qlora_script_reads_the_int4_checkpoint_as_gptq():
    """finetune_qlora_single_gpu.sh line 5: MODEL="Qwen/Qwen-7B-Chat-Int4" (DeepSpeed ZeRO-2: the
    world size decides the estimate, given here)."""
    code, report = _check("finetune/finetune_qlora_single_gpu.sh", "--world-size", "1")
    assert code == 0, report["diagnostics"]
    terms = {t["name"]: t for t in report["estimates"][0]["stages"][0]["terms"]}
    # the blocks' linear weights at GPTQ's 0.5 + 2.5/128 B (memory/lora.py GPTQ_BYTES)
    assert "0.51953125 B" in terms["weights.frozen"]["formula"]
    assert "GPTQ" in terms["buffers.dequantized_weight"]["formula"]
