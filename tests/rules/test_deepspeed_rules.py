"""DeepSpeed rules (ML3xx): one generic runner over fixtures/rules/ML3*-*/{good,bad}/, only the rule
under test selected, plus each rule's docstring Example (bad fires, good stays silent)."""
from __future__ import annotations

import pathlib
import re

import pytest
import yaml

from memlint.adapters import deepspeed as adapter
from memlint.ir import Partial, Provenance
from memlint.rules.base import DOC_SECTIONS, Context
from memlint.rules.deepspeed import RULES
from memlint.scenario import build

ROOT = pathlib.Path(__file__).resolve().parents[2]
CASES = sorted(p for p in (ROOT / "fixtures" / "rules").glob("ML3*-*") if p.is_dir())
BY_CODE = {rule.code: rule for rule in RULES}


def _scenario(path: pathlib.Path, args=()):
    partial = adapter.load(str(path), path.read_text(encoding="utf-8"))
    cli = Partial(source="<command line>", fmt="cli")
    for item in args:
        key, value = item.split("=", 1)
        cli.set(key, value, Provenance(None, None, None, f"--set {key}"))
    scenario, _ = build([partial, cli])
    return scenario


def _position(scenario, keys):
    """What the engine does: the first key with a known position names the line."""
    for key in keys:
        prov = scenario.provenance.get(key)
        if prov is None and key in scenario.extra:
            prov = scenario.extra[key].prov
        if prov is not None and prov.line is not None:
            return prov.line, prov.column
    return None, None


def _run(rule, path, args=()):
    scenario = _scenario(path, args)
    return scenario, list(rule.check(Context(scenario, formats=("deepspeed",))))


def _cases(kind):
    for case in CASES:
        for path in sorted((case / kind).glob("*.json")):
            yield pytest.param(case, path, id=f"{case.name}/{kind}/{path.name}")


def _args(case, kind, name):
    for meta in ("_expect.yaml", "_args.yaml"):
        file = case / kind / meta
        if file.exists():
            data = yaml.safe_load(file.read_text()) or {}
            found = (data.get("args") or {}) if meta == "_expect.yaml" else data
            if name in found:
                return [str(a) for a in found[name]]
    return []


def test_every_rule_has_fixtures():
    assert {c.name.split("-", 1)[0] for c in CASES} == set(BY_CODE)
    for case in CASES:
        code, name = case.name.split("-", 1)
        assert BY_CODE[code].name == name


@pytest.mark.parametrize("case,path", list(_cases("bad")))
def test_bad_fires_at_expected_positions(case, path):
    rule = BY_CODE[case.name.split("-", 1)[0]]
    expect = yaml.safe_load((case / "bad" / "_expect.yaml").read_text())[path.name]
    scenario, findings = _run(rule, path, _args(case, "bad", path.name))
    got = [(rule.code, *_position(scenario, f.keys)) for f in findings]
    assert got == [(e["code"], e["line"], e["column"]) for e in expect], [f.message for f in findings]


@pytest.mark.parametrize("case,path", list(_cases("good")))
def test_good_is_silent(case, path):
    rule = BY_CODE[case.name.split("-", 1)[0]]
    _, findings = _run(rule, path, _args(case, "good", path.name))
    assert findings == [], [f.message for f in findings]


def _example_blocks(rule):
    """Bad/Good blocks of the Example section: JSON text and trailing `--set k=v` lines."""
    blocks: dict = {}
    label = None
    for line in rule.sections()["Example"].splitlines():
        stripped = line.strip()
        if stripped in ("Bad:", "Good:"):
            label = stripped[:-1]
            blocks[label] = ([], [])
        elif label and stripped.startswith("--set"):
            blocks[label][1].extend(stripped.split()[1:])
        elif label and stripped:
            blocks[label][0].append(stripped)
    return {k: ("\n".join(text), args) for k, (text, args) in blocks.items()}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_docs_and_examples(rule, tmp_path):
    assert re.fullmatch(r"ML3\d\d", rule.code) and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)
    sections = rule.sections()
    for title in DOC_SECTIONS:
        assert sections.get(title), f"{rule.code} lacks {title}"
    blocks = _example_blocks(rule)
    assert set(blocks) == {"Bad", "Good"}
    for label, (text, args) in blocks.items():
        path = tmp_path / f"{label.lower()}.json"
        path.write_text(text)
        _, findings = _run(rule, path, args)
        assert bool(findings) == (label == "Bad"), (label, [f.message for f in findings])


def test_codes_and_names_unique():
    assert len({r.code for r in RULES}) == len(RULES) == len({r.name for r in RULES})


def test_mixed_precision_conflict_is_generic():
    """Any adapter that records flags.fp16 and flags.bf16 triggers it, not only DeepSpeed."""
    partial = Partial(source="x.yaml", fmt="other")
    partial.set_extra("flags.fp16", True, Provenance("x.yaml", 3, 1, "fp16"))
    partial.set_extra("flags.bf16", True, Provenance("x.yaml", 4, 1, "bf16"))
    scenario, _ = build([partial])
    rule = BY_CODE["ML303"]
    assert rule.formats == ()
    assert len(list(rule.check(Context(scenario, formats=("other",))))) == 1


def test_rules_stay_quiet_when_the_config_did_not_parse():
    bad = ROOT / "fixtures/adapters/deepspeed/bad"
    path = bad / "DeepSpeedExamples__training-data_efficiency-gpt_finetuning-finetune-ds_config_gpt2_TEMPLATE.json"
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
