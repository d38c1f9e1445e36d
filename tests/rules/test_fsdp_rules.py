"""ML5xx rules on scenarios built by hand (tests/rules/test_rule_fixtures.py runs their fixtures and
Examples): bytes in messages, edge cases of each degree check."""
from __future__ import annotations

from memlint.ir import Partial, Provenance
from memlint.rules.base import Context
from memlint.scenario import build

def _findings(rule_cls, partials: list) -> list:
    scenario, _ = build(partials)
    return list(rule_cls().check(Context(scenario, formats=tuple(p.fmt for p in partials))))


def _manual(**settings) -> Partial:
    partial = Partial(source="test", fmt="test")
    for key, value in settings.items():
        partial.set(key, value, Provenance("test.yaml", 1, 1, key))
    return partial


# --- direct scenario cases -------------------------------------------------------------------

def test_ml501_zero3_full_recompute_with_model_gives_bytes():
    from memlint.rules.fsdp import FullRecomputeDoubleAllgather

    bad = _manual(framework="deepspeed", zero=3, recompute="full", world_size=8,
                  model="llama3-8b")
    findings = _findings(FullRecomputeDoubleAllgather, [bad])
    assert len(findings) == 1
    # 32 layers x 218,112,000 params x 2 bytes x 7/8
    layer = 4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336 + 2 * 4096
    assert findings[0].data["extra_bytes_per_step"] == -(-32 * layer * 2 * 7 // 8)
    assert "GiB more received per GPU per step" in findings[0].message
    good = _manual(framework="deepspeed", zero=3, recompute="selective", world_size=8,
                   model="llama3-8b")
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
