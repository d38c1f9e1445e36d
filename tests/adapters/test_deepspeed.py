"""DeepSpeed adapter: every real config loads without an exception, invalid ones give a parse
error with a position, values and provenance lines on a few, schema diagnostics with positions."""
from __future__ import annotations

import pathlib

import pytest
import yaml

from memlint.adapters import deepspeed as adapter
from memlint.diagnostics import Severity

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT / "fixtures" / "shared-real"
REAL = sorted((SHARED / "deepspeed").glob("*.json"))
INVALID = sorted((SHARED / "deepspeed-invalid").glob("*.json"))
GOOD = ROOT / "fixtures/adapters/deepspeed/good"
BAD = ROOT / "fixtures/adapters/deepspeed/bad"


def load(path: pathlib.Path):
    return adapter.load(str(path), path.read_text(encoding="utf-8"))


def codes(partial, at_least=Severity.INFO):
    return [d.code for d in partial.diagnostics if d.severity >= at_least]


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_configs_load(path):
    partial = load(path)
    assert adapter.detect(str(path), path.read_text())
    assert "ML001" not in codes(partial)
    assert partial.settings["framework"].value == "deepspeed"
    for diagnostic in partial.diagnostics:
        assert diagnostic.line is not None and diagnostic.column is not None, diagnostic


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_template_placeholders_are_positioned_errors_with_a_hint(path):
    # DeepSpeedConfig reads the file with hjson.load (runtime/config.py at edaa722): a bare
    # placeholder is an HJSON string to the end of its line, which DeepSpeed then refuses
    partial = load(path)
    errors = [d for d in partial.diagnostics if d.severity == Severity.ERROR]
    assert errors and all(d.code == "ML002" and d.line and d.column for d in errors)
    assert all("template placeholder?" in d.message for d in errors)


@pytest.mark.parametrize("path", sorted(GOOD.glob("*.json")), ids=lambda p: p.name)
def test_good_fixtures_load_cleanly(path):
    assert codes(load(path), Severity.WARNING) == []


def _bad_cases():
    expect = yaml.safe_load((BAD / "_expect.yaml").read_text())
    return [pytest.param(name, items, id=name) for name, items in expect.items()]


@pytest.mark.parametrize("name,items", _bad_cases())
def test_bad_fixtures_give_expected_diagnostics(name, items):
    partial = load(BAD / name)
    got = {(d.code, d.line, d.column) for d in partial.diagnostics}
    for item in items:
        assert (item["code"], item["line"], item["column"]) in got, sorted(got)


def test_zero3_values_and_lines():
    p = load(GOOD / "transformers__tests-deepspeed-ds_config_zero3.json")
    s = p.settings
    assert s["zero"].value == 3 and s["zero"].prov.line == 31
    assert s["offload_optimizer"].value == "cpu" and s["offload_optimizer"].prov.line == 33
    assert s["offload_params"].value == "cpu" and s["offload_params"].prov.line == 37
    assert s["optimizer"].value == "adamw" and s["optimizer"].prov.line == 12
    assert "micro_batch" not in s and "precision" not in s  # "auto": the HF Trainer decides
    e = p.extra
    assert e["deepspeed.stage3_max_live_parameters"].value == 10**9
    assert e["deepspeed.sub_group_size"].value == 10**14
    assert e["deepspeed.reduce_bucket_size"].value == "auto"
    assert e["deepspeed.train_batch_size"].value == "auto"
    assert "zero_optimization.stage3_prefetch_bucket_size" in e["deepspeed.auto_keys"].value
    assert e["deepspeed.deprecated.zero_optimization.stage3_gather_fp16_weights_on_model_save"].prov.line == 48


def test_autotp_and_precision():
    p = load(GOOD / "LLaMA-Factory__examples-deepspeed-ds_z2_autotp_config.json")
    assert p.settings["tp"].value == 2 and p.settings["tp"].prov.line == 30
    assert p.extra["deepspeed.allgather_bucket_size"].value == 500_000_000
    assert p.extra["deepspeed.precision_auto"].value is True
    p = load(GOOD / "Megatron-DeepSpeed__tests-ds_config_bf16.json")
    assert p.settings["precision"].value == "bf16" and p.settings["precision"].prov.line == 9
    assert p.extra["flags.bf16"].prov.line == 9 and "flags.fp16" not in p.extra
    assert (p.settings["micro_batch"].value, p.settings["global_batch"].value) == (1, 16)
    assert p.settings["micro_batch"].prov.line == 2


def test_legacy_cpu_offload_and_activation_checkpointing():
    p = load(GOOD / "DeepSpeedExamples__megatron-Megatron-LM-scripts-ds_zero-offload_10B_config.json")
    assert p.settings["offload_optimizer"].value == "cpu"
    assert p.settings["offload_optimizer"].prov.line == 14
    assert p.settings["precision"].value == "fp16" and p.settings["optimizer"].value == "adamw"
    assert p.extra["deepspeed.partition_activations"].value is True
    assert p.extra["deepspeed.cpu_checkpointing"].prov.line == 29
    assert "recompute" not in p.settings  # driven by the model code, not the config


def test_unprefixed_stage3_aliases_map_to_documented_names():
    p = load(GOOD / "axolotl__deepspeed_configs-zero3_bf16_cpuoffload_all.json")
    assert p.extra["deepspeed.stage3_max_live_parameters"].value == 0
    assert p.extra["deepspeed.stage3_max_live_parameters"].prov.key == "zero_optimization.max_live_parameters"


def test_required_errors_name_the_line():
    misspelt = load(BAD / "misspelt_zero_key.json")
    [d] = [d for d in misspelt.diagnostics if d.code == "ML003"]
    assert d.severity == Severity.ERROR and d.line == 7
    assert "did you mean 'stage3_max_live_parameters'" in d.message


def test_top_level_unknown_key_is_a_warning_with_suggestion():
    p = load(BAD / "types_and_duplicates.hjson")
    [d] = [d for d in p.diagnostics if d.code == "ML003"]
    assert d.severity == Severity.WARNING and "did you mean 'zero_optimization'" in d.message


def test_type_errors_name_the_expected_type():
    p = load(BAD / "types_and_duplicates.hjson")
    messages = {d.line: d.message for d in p.diagnostics if d.code == "ML002"}
    assert "expected a positive whole number" in messages[3]
    assert "expected a whole number >= 0" in messages[7] and "drop the quotes" in messages[7]
    assert "expected one of none, cpu, nvme" in messages[8]
    assert "expected true or false" in messages[10]


def test_hjson_comments_and_numeric_strings():
    text = '{\n  // comment\n  "train_micro_batch_size_per_gpu": 2, # more\n  "zero_optimization": {"stage": 3, "reduce_bucket_size": "500000000", "stage3_prefetch_bucket_size": 5e7},\n  "fp16": {"enabled": true, "loss_scale": "0"},\n}\n'
    p = adapter.load("ds_config.json", text)
    assert codes(p) == []
    assert p.extra["deepspeed.reduce_bucket_size"].value == 500_000_000
    assert p.settings["micro_batch"].value == 2 and p.settings["micro_batch"].prov.line == 3


@pytest.mark.parametrize("text", ["", "[1, 2]", "{", '{"zero_optimization": {"stage": [0, 1]}}',
                                  '{"zero_optimization": true}', '{"fp16": 1, "bf16": null}',
                                  '{"optimizer": {"type": 5}}', '{"zero_optimization": {"offload_param": null}}'])
def test_odd_input_never_raises(text):
    p = adapter.load("ds.json", text)
    assert all(d.line is not None for d in p.diagnostics)


def test_legacy_boolean_zero():
    p = adapter.load("ds.json", '{"train_batch_size": 8, "zero_optimization": true}')
    assert p.settings["zero"].value == 1 and codes(p) == []


def test_validator_is_compiled_once():
    assert adapter.validator() is adapter.validator()


def test_schema_documents_every_block():
    schema = adapter.schema()
    assert schema["$schema"].endswith("2020-12/schema") and schema["version"]
    for name, sub in schema["properties"].items():
        if name in ("fp16", "bf16", "bfloat16"):
            sub = schema["$defs"][name if name != "bfloat16" else "bf16"]
        assert sub.get("description") or sub.get("$comment") or sub.get("$ref") or sub.get("anyOf"), name
    for name in ("zero_optimization", "offload_param", "offload_optimizer", "fp16", "bf16"):
        assert schema["$defs"][name]["description"]


def test_detect():
    assert adapter.detect("ds_config.json", '{"train_batch_size": 8}')
    assert not adapter.detect("config.json", '{"model_type": "llama", "hidden_size": 8}')
    assert not adapter.detect("ds.yaml", '{"train_batch_size": 8}')


def test_find_sibling_model(tmp_path):
    ds = tmp_path / "ds_config.json"
    ds.write_text('{"train_batch_size": 8}')
    assert adapter.find_sibling_model(str(ds)) is None
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    assert adapter.find_sibling_model(str(ds)) == str(tmp_path / "config.json")
    assert adapter.load(str(ds), ds.read_text()).references == [str(tmp_path / "config.json")]
    assert adapter.find_sibling_model(str(tmp_path / "config.json")) is None
