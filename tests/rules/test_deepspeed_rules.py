"""DeepSpeed rules (ML3xx) beyond their fixtures and Examples (tests/rules/test_rule_fixtures.py runs
those): messages, generic inputs, data-parallel size and "auto" values."""
from __future__ import annotations

import pathlib

from memlint.adapters import deepspeed as adapter
from memlint.ir import Partial, Provenance
from memlint.rules.base import Context
from memlint.rules.deepspeed import RULES
from memlint.scenario import build

ROOT = pathlib.Path(__file__).resolve().parents[2]
BY_CODE = {rule.code: rule for rule in RULES}


def _scenario(path: pathlib.Path, args=()):
    partial = adapter.load(str(path), path.read_text(encoding="utf-8"))
    cli = Partial(source="<command line>", fmt="cli")
    for item in args:
        key, value = item.split("=", 1)
        cli.set(key, value, Provenance(None, None, None, f"--set {key}"))
    scenario, _ = build([partial, cli])
    return scenario


def _run(rule, path, args=()):
    scenario = _scenario(path, args)
    return scenario, list(rule.check(Context(scenario, formats=("deepspeed",))))


def test_mixed_precision_conflict_is_generic():
    """Any adapter that records flags.fp16 and flags.bf16 triggers it, not only DeepSpeed."""
    partial = Partial(source="x.yaml", fmt="other")
    partial.set_extra("flags.fp16", True, Provenance("x.yaml", 3, 1, "fp16"))
    partial.set_extra("flags.bf16", True, Provenance("x.yaml", 4, 1, "bf16"))
    scenario, _ = build([partial])
    rule = BY_CODE["ML303"]
    assert rule.formats == ()
    assert len(list(rule.check(Context(scenario, formats=("other",))))) == 1


def test_rules_stay_quiet_when_the_config_did_not_parse(tmp_path):
    # a real config cut off mid-file (a bad merge): not even HJSON
    real = ROOT / "fixtures/rules/ML301-batch-size-mismatch/bad/broken_triple.json"
    path = tmp_path / "ds_config.json"
    path.write_text(real.read_text()[:-3])
    scenario = _scenario(path)
    for rule in RULES:
        assert list(rule.check(Context(scenario, formats=("deepspeed",)))) == []


def test_batch_message_names_values():
    case = ROOT / "fixtures/rules/ML301-batch-size-mismatch/bad/broken_triple.json"
    _, findings = _run(BY_CODE["ML301"], case, ["world_size=8"])
    assert "64 != train_micro_batch_size_per_gpu 4 x gradient_accumulation_steps 4 x data-parallel size 8 = 128" in findings[0].message


def test_batch_uses_tp_and_pp_for_the_data_parallel_size():
    case = ROOT / "fixtures/rules/ML301-batch-size-mismatch/good/matching_triple.json"
    # 16 GPUs with tp=2: dp = 8, so 256 = 4 x 8 x 8 holds.
    _, findings = _run(BY_CODE["ML301"], case, ["world_size=16", "tp=2"])
    assert findings == []
    _, findings = _run(BY_CODE["ML301"], case, ["world_size=16"])
    assert len(findings) == 1


def test_auto_filled_by_other_source_counts_as_given():
    path = ROOT / "fixtures/rules/ML302-batch-size-derived/bad/auto_batch.json"
    _, findings = _run(BY_CODE["ML301"], path, ["world_size=4", "global_batch=32", "micro_batch=4"])
    assert findings == []
    _, findings = _run(BY_CODE["ML301"], path, ["world_size=4", "global_batch=30", "micro_batch=4"])
    assert len(findings) == 1
