"""ML5xx rules: each fires on one config and not on a near-identical one; docstring examples too."""
from __future__ import annotations

import os
import re

import pytest

from memlint.adapters import accelerate, axolotl, torchtitan
from memlint.ir import Partial, Provenance
from memlint.rules.base import DOC_SECTIONS, Context
from memlint.rules.fsdp import RULES
from memlint.scenario import build

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "fixtures", "rules")
_LANG_FILE = {"yaml": "config.yaml", "toml": "job.toml", "sh": "run.sh"}


def _load(path: str) -> Partial:
    text = open(path, encoding="utf-8").read()
    for adapter in (accelerate, axolotl, torchtitan):
        if adapter.detect(path, text):
            return adapter.load(path, text)
    raise AssertionError(f"no adapter detects {path}")


def _findings(rule_cls, partials: list) -> list:
    scenario, _ = build(partials)
    return list(rule_cls().check(Context(scenario, formats=tuple(p.fmt for p in partials))))


def _manual(**settings) -> Partial:
    partial = Partial(source="test", fmt="test")
    for key, value in settings.items():
        partial.set(key, value, Provenance("test.yaml", 1, 1, key))
    return partial


def _examples(rule_cls) -> list:
    section = rule_cls().sections()["Example"]
    return re.findall(r"```(\w+)\n(.*?)```", section, re.S)


@pytest.mark.parametrize("rule_cls", RULES, ids=lambda r: r.code)
def test_docs_have_all_sections(rule_cls):
    sections = rule_cls().sections()
    for title in DOC_SECTIONS:
        assert sections.get(title), f"{rule_cls.code} lacks {title}"
    assert re.fullmatch(r"ML5\d\d", rule_cls.code)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", rule_cls.name)


@pytest.mark.parametrize("rule_cls", RULES, ids=lambda r: r.code)
def test_doc_example_bad_fires_good_does_not(rule_cls, tmp_path):
    import textwrap

    blocks = _examples(rule_cls)
    assert len(blocks) == 2, "Example needs one bad and one good snippet"
    results = []
    for index, (lang, body) in enumerate(blocks):
        folder = tmp_path / str(index)
        folder.mkdir()
        path = folder / _LANG_FILE[lang]
        path.write_text(textwrap.dedent(body))
        results.append(_findings(rule_cls, [_load(str(path))]))
    assert results[0], f"{rule_cls.code}: bad example does not fire"
    assert not results[1], f"{rule_cls.code}: good example fires: {results[1]}"


def _fixture_cases():
    cases = []
    if not os.path.isdir(FIXTURES):
        return cases
    for rule_cls in RULES:
        folder = os.path.join(FIXTURES, f"{rule_cls.code}-{rule_cls.name}")
        for kind in ("bad", "good"):
            sub = os.path.join(folder, kind)
            if not os.path.isdir(sub):
                continue
            for name in sorted(os.listdir(sub)):
                if not name.startswith("_"):
                    cases.append((rule_cls, kind, os.path.join(sub, name)))
    return cases


@pytest.mark.parametrize("rule_cls,kind,path", _fixture_cases(),
                         ids=lambda v: v if isinstance(v, str) and "/" not in v else
                         (os.path.basename(v) if isinstance(v, str) else getattr(v, "code", v)))
def test_fixture(rule_cls, kind, path):
    import yaml

    findings = _findings(rule_cls, [_load(path)])
    if kind == "good":
        assert not findings, findings
        return
    expect_file = os.path.join(os.path.dirname(path), "_expect.yaml")
    expected = yaml.safe_load(open(expect_file))[os.path.basename(path)]
    assert len(findings) == len(expected)
    scenario, _ = build([_load(path)])
    for finding, want in zip(findings, expected):
        assert want["code"] == rule_cls.code
        spots = {(scenario.where(k).line, scenario.where(k).column) for k in finding.keys
                 if scenario.where(k)}
        assert (want["line"], want["column"]) in spots, (finding, spots)


def test_fixture_folders_exist_for_every_rule():
    for rule_cls in RULES:
        folder = os.path.join(FIXTURES, f"{rule_cls.code}-{rule_cls.name}")
        assert os.path.isdir(os.path.join(folder, "bad")), folder
        assert os.path.isdir(os.path.join(folder, "good")), folder


# --- direct scenario cases -------------------------------------------------------------------

def test_ml501_zero3_full_recompute_with_model_gives_bytes():
    from memlint.rules.fsdp import FullRecomputeDoubleAllgather

    bad = _manual(framework="deepspeed", zero=3, recompute="full", world_size=8,
                  model="torchtitan:llama3/8b")
    findings = _findings(FullRecomputeDoubleAllgather, [bad])
    assert len(findings) == 1
    # 32 layers x 218,112,000 params x 2 bytes x 7/8
    layer = 4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336 + 2 * 4096
    assert findings[0].data["extra_bytes_per_step"] == -(-32 * layer * 2 * 7 // 8)
    assert "GiB more received per GPU per step" in findings[0].message
    good = _manual(framework="deepspeed", zero=3, recompute="selective", world_size=8,
                   model="torchtitan:llama3/8b")
    assert not _findings(FullRecomputeDoubleAllgather, [good])


def test_ml501_without_model_says_it_without_bytes():
    from memlint.rules.fsdp import FullRecomputeDoubleAllgather

    findings = _findings(FullRecomputeDoubleAllgather,
                         [_manual(framework="deepspeed", zero=3, recompute="full")])
    assert findings and "GiB" not in findings[0].message and not findings[0].data


def test_ml501_fsdp_without_reshard_is_silent():
    from memlint.rules.fsdp import FullRecomputeDoubleAllgather

    base = dict(framework="hf", fsdp="full", recompute="full", world_size=8)
    assert _findings(FullRecomputeDoubleAllgather, [_manual(**base)])
    assert not _findings(FullRecomputeDoubleAllgather,
                         [_manual(reshard_after_forward=False, **base)])


def test_ml502_fires_on_product_mismatch_only():
    from memlint.rules.fsdp import ParallelDegreesWorldMismatch

    bad = _manual(fsdp="full", world_size=16, dp_shard=4, tp=2)
    good = _manual(fsdp="full", world_size=16, dp_shard=8, tp=2)
    assert _findings(ParallelDegreesWorldMismatch, [bad])
    assert not _findings(ParallelDegreesWorldMismatch, [good])


def test_ml503_remainder_and_nothing_left():
    from memlint.rules.fsdp import ShardFillNothingLeft

    assert _findings(ShardFillNothingLeft, [_manual(dp_shard=-1, world_size=12, tp=8)])
    assert _findings(ShardFillNothingLeft, [_manual(dp_shard=-1, world_size=4, tp=8)])
    assert not _findings(ShardFillNothingLeft, [_manual(dp_shard=-1, world_size=16, tp=8)])


def test_ml504_misaligned_tp():
    from memlint.rules.fsdp import TPCrossesNode

    assert _findings(TPCrossesNode, [_manual(tp=3, world_size=24, gpus_per_node=8)])
    assert not _findings(TPCrossesNode, [_manual(tp=4, world_size=24, gpus_per_node=8)])


def test_ml505_single_node_hybrid():
    from memlint.rules.fsdp import HybridShardGroupNotNode

    assert _findings(HybridShardGroupNotNode, [_manual(fsdp="hybrid", world_size=8)])
    assert not _findings(HybridShardGroupNotNode, [_manual(fsdp="full", world_size=8)])
