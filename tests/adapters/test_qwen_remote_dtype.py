"""Qwen v1's remote code casts its own weights: QWenLMHeadModel.__init__ (modeling_qwen.py,
zhangningboo/Qwen-7B@ffe04dd lines 939-988, a copy of Qwen/Qwen-7B's) turns on bf16 when
config.json sets none of bf16/fp16/fp32 (bf16 where the GPU supports it) and calls
`self.transformer.bfloat16()`, whatever dtype from_pretrained loaded. The HF Trainer reader
takes from_pretrained's default (fp32) when the arguments give no torch_dtype; for a model_type
qwen config the scenario holds the weights in the remote code's dtype instead, says so, and
lists the precision as not from a file. Real file: fixtures/real-world/QwenLM__Qwen/finetune/
finetune_lora_single_gpu.sh (QwenLM/Qwen, blob 343017c in fixtures/real-world/SOURCES.md):
`--bf16 True`, no torch_dtype, MODEL="Qwen/Qwen-7B" (its config.json: fixtures/hf/Qwen-7B.json,
bf16/fp16/fp32 all false)."""
from __future__ import annotations

import os
import shutil

from memlint.ir import Provenance, Setting
from memlint.scenario import remote_code_dtype

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN = os.path.join(ROOT, "fixtures", "real-world", "QwenLM__Qwen")
SCRIPT = "finetune/finetune_lora_single_gpu.sh"
QWEN_7B_PARAMS = 7_721_324_544


def _check(folder, *extra):
    from helpers import check_json

    return check_json(folder, SCRIPT, *extra)


def _frozen(report):
    terms = {t["name"]: t for t in report["estimates"][0]["stages"][0]["terms"]}
    return terms["weights.frozen"]["bytes"]


def _copy(tmp_path, edit):
    folder = tmp_path / "qwen"
    shutil.copytree(QWEN, folder)
    path = folder / SCRIPT
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    return str(folder)


def test_qwen_lora_script_holds_the_base_in_bf16_and_says_why():
    code, report = _check(QWEN)
    assert code == 0, report["diagnostics"]
    estimate = report["estimates"][0]
    # the frozen base: every weight but the LoRA adapters, 2 B each (the fp32 default gave 4 B)
    assert _frozen(report) < 2.01 * QWEN_7B_PARAMS
    assumed = {a["key"]: a for a in estimate["assumed"]}
    assert assumed["precision"]["value"] == "pure-bf16"
    assert "Qwen v1 remote code" in assumed["precision"]["source"]
    notes = [d for d in report["diagnostics"] if "from_pretrained loads without torch_dtype"
             in d["message"]]
    assert len(notes) == 1 and notes[0]["severity"] == "info"
    assert "modeling_qwen.py" in notes[0]["message"]
    assert not [d for d in report["diagnostics"] if d["severity"] == "error"]


def test_a_torch_dtype_argument_wins(tmp_path):
    folder = _copy(tmp_path, lambda text: text.replace(
        "--bf16 True", "--bf16 True \\\n  --torch_dtype float32"))
    code, report = _check(folder)
    assert code == 0, report["diagnostics"]
    assert _frozen(report) > 3.9 * QWEN_7B_PARAMS     # fp32 weights, bf16 autocast
    assert "precision" not in {a["key"] for a in report["estimates"][0]["assumed"]}


def test_a_precision_set_by_the_user_wins():
    code, report = _check(QWEN, "--set", "precision=bf16")
    assert code == 0, report["diagnostics"]
    assert _frozen(report) > 3.9 * QWEN_7B_PARAMS
    assert not [d for d in report["diagnostics"] if "from_pretrained loads without torch_dtype"
                in d["message"]]


def test_a_model_without_remote_code_keeps_from_pretrained_default(tmp_path):
    folder = _copy(tmp_path, lambda text: text.replace('MODEL="Qwen/Qwen-7B"',
                                                       'MODEL="Qwen/Qwen1.5-7B"'))
    code, report = _check(folder)
    assert code == 0, report["diagnostics"]
    assert _frozen(report) > 3.9 * QWEN_7B_PARAMS


def _settings(**flags):
    here = Provenance(file="config.json", line=1)
    out = {"model.model_type": Setting("qwen", here)}
    out.update({f"model.{name}": Setting(value, here) for name, value in flags.items()})
    return out


def test_the_remote_code_rule():
    assert remote_code_dtype(_settings(bf16=False, fp16=False, fp32=False))[0] == "bf16"
    assert remote_code_dtype(_settings())[0] == "bf16"        # QWenConfig defaults them False
    assert remote_code_dtype(_settings(fp16=True))[0] == "fp16"
    assert remote_code_dtype(_settings(fp32=True, bf16=False))[0] == "fp32"
    assert remote_code_dtype(_settings(fp16=True, bf16=True)) is None   # its assert refuses it
    qwen2 = {"model.model_type": Setting("qwen2", Provenance(file="config.json"))}
    assert remote_code_dtype(qwen2) is None
