"""No silent defaults (issue 14 section 3): a verdict that rests on a value no file gave says so,
in text, JSON and SARIF, and is at most a warning.

Real file: DeepSpeedExamples training/bing_bert/deepspeed_bsz64k_lamb_config_seq128.json
(fixtures/shared-real/SOURCES.md), a BERT pre-training config at micro batch 64 whose
sequence length (128) lives in the training script, with GPT-2's real config.json
(fixtures/hf/SOURCES.md). DeepSpeed JSON carries no seq_len: memlint's 4,096 default made it an
81 GiB OOM error before.
"""
import json
import os


from memlint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DS = os.path.join(ROOT, "fixtures", "shared-real", "deepspeed",
                  "DeepSpeedExamples__training-bing_bert-deepspeed_bsz64k_lamb_config_seq128.json")
GPT2 = os.path.join(ROOT, "fixtures", "hf", "gpt2.json")


def run(capsys, fmt, *extra):
    code = main(["check", DS, "--model", GPT2, "--format", fmt, *extra])
    out, _ = capsys.readouterr()
    return code, out


def test_oom_on_a_default_seq_len_is_a_warning_that_says_so(capsys):
    code, out = run(capsys, "json")
    doc = json.loads(out)
    [ml101] = [d for d in doc["diagnostics"] if d["code"] == "ML101"]
    assert code == 0 and ml101["severity"] == "warning"
    assert "seq_len 4096" in ml101["message"] and "defaults no file gave" in ml101["message"]
    assumed = {a["key"]: a for a in doc["estimates"][0]["assumed"]}
    assert assumed["seq_len"] == {"key": "seq_len", "value": 4096, "source": "default"}
    assert "micro_batch" not in assumed  # train_micro_batch_size_per_gpu gave it
    code, out = run(capsys, "text")
    assert "not from a file: seq_len = 4096 (default)" in out
    assert "world_size = unknown (default)" in out
    code, out = run(capsys, "sarif")
    run_ = json.loads(out)["runs"][0]
    assert any(r["ruleId"] == "ML101" and r["level"] == "warning"
               and "seq_len 4096" in r["message"]["text"] for r in run_["results"])
    [bag] = run_["properties"]["memlint"]["assumed"]
    assert {"key": "seq_len", "value": 4096, "source": "default"} in bag["assumed"]


def test_given_values_make_it_firm(capsys):
    """The real sequence length fits; the same 4,096 given on purpose no longer rests on a
    default. It stays a warning only because the config's `sparse_attention` is not modeled
    (ML107: the estimate is too high, so the OOM could be false)."""
    code, out = run(capsys, "json", "--set", "seq_len=128")
    assert code == 0 and "ML101" not in out
    code, out = run(capsys, "json", "--set", "seq_len=4096", "--set", "recompute=none",
                    "--set", "gpu=H100-80GB")
    [ml101] = [d for d in json.loads(out)["diagnostics"] if d["code"] == "ML101"]
    assert "defaults" not in ml101["message"]
    assert ml101["severity"] == "warning" and "sparse_attention" in ml101["message"]
    assert code == 1  # ML106: 4,096 positions for GPT-2's 1,024 is an error of its own
    sources = {a["key"]: a["source"] for a in json.loads(out)["estimates"][0]["assumed"]}
    assert sources["seq_len"] == "--set seq_len" and sources["gpu"] == "--set gpu"


def test_states_alone_over_the_gpu_stay_an_error(tmp_path, capsys):
    """70B unsharded on 8 GPUs: no seq_len, batch or precision makes it fit; only a GPU far
    larger than any in the catalogue would. The defaults do not soften it."""
    (tmp_path / "memlint.toml").write_text('model = "llama3-70b"\nworld_size = 8\n')
    code = main(["check", str(tmp_path / "memlint.toml"), "--format", "json"])
    doc = json.loads(capsys.readouterr()[0])
    [ml101] = [d for d in doc["diagnostics"] if d["code"] == "ML101"]
    assert code == 1 and ml101["severity"] == "error"
    assert {a["key"] for a in doc["estimates"][0]["assumed"]} >= {"seq_len", "gpu"}


def test_gpu_memory_units_are_strict():
    """hardware.py: GB is decimal, GiB binary; a "48 GB" card is 48 GiB by name."""
    from memlint.hardware import lookup
    from memlint.keys import KEYS

    convert = KEYS["gpu_memory"].convert
    assert convert("48GB") == 48 * 10**9 and convert("48GiB") == 48 * 2**30
    assert convert("48 gib") == lookup("L40S").capacity_bytes


def test_states_that_fit_without_the_sequence_keep_it_a_warning(capsys, monkeypatch):
    """linkedin/Liger-Kernel examples/huggingface/run_qwen.sh (fixtures/real-world): Qwen2-7B,
    FSDP on 4 GPUs, batch 48, no sequence length (training.py's own max_seq_length, 512, is not a
    Trainer flag). At memlint's default 4,096 tokens the activations, the logits and the
    allocator slack sized from them pass 1.5 TB; subtracting only the first two left ~100 GiB
    of "states", so the OOM stood as an error on a run Liger's benchmark makes. Re-estimated at
    one token the states are ~25 GiB: the verdict rests on seq_len and is a warning."""
    monkeypatch.chdir(os.path.join(ROOT, "fixtures", "real-world", "linkedin__Liger-Kernel"))
    code = main(["check", "examples/huggingface/run_qwen.sh", "--format", "json"])
    doc = json.loads(capsys.readouterr()[0])
    [ml101] = [d for d in doc["diagnostics"] if d["code"] == "ML101"]
    assert code == 0 and ml101["severity"] == "warning"
    assert "seq_len 4096" in ml101["message"]
