"""Fit/OOM pairs from the frameworks' issues and commits (fixtures/rl-pairs/pairs.json).

Each pair is a run reported out of memory beside the change that made it fit. Both sides are
checked as `memlint check FILE --set ...`; the outcome memlint gives the pair is pinned, so a model
change that turns a pair (for better or worse) shows here, and no pair may ever be a false error:
an out-of-memory error on the side that ran.
"""
from __future__ import annotations

import json
import os

import pytest

from memlint.api import Options, one_run, run_pipeline
from memlint.diagnostics import Severity
from memlint.rules import registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAIRS_DIR = os.path.join(ROOT, "fixtures", "rl-pairs")
with open(os.path.join(PAIRS_DIR, "pairs.json"), encoding="utf-8") as _handle:
    PAIRS = json.load(_handle)["pairs"]
# the out-of-memory rules: a training step, an RL rollout, an RL log-prob or update phase
OOM_CODES = ("ML101", "ML801", "ML804")


def _oom(path: str, settings: list) -> "Severity | None":
    """The most severe out-of-memory finding memlint gives the file, None without one."""
    options = Options(assignments=tuple(settings), allow_outside_root=True)
    diagnostics, _estimate = run_pipeline(one_run([path], options), options, registry())
    found = [d.severity for d in diagnostics if d.code in OOM_CODES]
    return max(found) if found else None


def outcome(pair: dict) -> str:
    oom = _oom(os.path.join(PAIRS_DIR, pair["oom"]), pair["settings"])
    fits = _oom(os.path.join(PAIRS_DIR, pair["fits"]), pair["settings"])
    if fits == Severity.ERROR:
        return "false-error"
    if oom is None:
        return "miss"
    return "firm" if oom == Severity.ERROR and fits is None else "soft"


OUTCOMES = {pair["id"]: outcome(pair) for pair in PAIRS}


@pytest.mark.parametrize("pair", PAIRS, ids=[p["id"] for p in PAIRS])
def test_each_pair_gets_its_recorded_outcome(pair):
    assert OUTCOMES[pair["id"]] == pair["outcome"], pair["id"]


def test_no_pair_is_a_false_error_and_most_are_firm():
    assert "false-error" not in OUTCOMES.values()
    firm = sum(1 for o in OUTCOMES.values() if o == "firm")
    assert firm >= 3 and firm * 2 > len(PAIRS), OUTCOMES


def test_a_verdict_resting_on_the_verl_version_says_so():
    """EasyR1's fork slept vLLM after every rollout, as verl before 0.5.0 did
    (sharding_manager/fsdp_vllm.py at v0.4.1); since verl PR #1464 free_cache_engine=False keeps
    it awake. The log-prob pass fits with the engine asleep, so its verdict is a warning that
    names the version."""
    pair = next(p for p in PAIRS if p["id"] == "easyr1-pr1")
    options = Options(assignments=tuple(pair["settings"]), allow_outside_root=True)
    path = os.path.join(PAIRS_DIR, pair["fits"])
    diagnostics, _ = run_pipeline(one_run([path], options), options, registry())
    [found] = [d for d in diagnostics if d.code == "ML804"]
    assert found.severity == Severity.WARNING
    assert "verl 0.5.0" in found.message and "PR #1464" in found.message


def test_the_version_does_not_soften_a_rollout_over_the_gpu():
    """The rollout holds the awake engine in every version: its verdict stays an error (with the
    vLLM version given, whose budget semantics ML801 otherwise names)."""
    pair = next(p for p in PAIRS if p["id"] == "easyr1-pr1")
    settings = (*pair["settings"], "engine.gpu_memory_utilization=0.95", "engine.version=0.8.5")
    options = Options(assignments=settings, allow_outside_root=True)
    path = os.path.join(PAIRS_DIR, pair["fits"])
    diagnostics, _ = run_pipeline(one_run([path], options), options, registry())
    [found] = [d for d in diagnostics if d.code == "ML801"]
    assert found.severity == Severity.ERROR and "verl 0.5.0" not in found.message


def _verl_async(tmp_path, fsdp_size: int):
    """The verl pair's fitting script (Ulysses 4 on 16 GPUs) with its FSDP group size."""
    pair = next(p for p in PAIRS if p["id"] == "verl-7d6505432")
    with open(os.path.join(PAIRS_DIR, pair["fits"]), encoding="utf-8") as handle:
        text = handle.read().replace("fsdp_size=2\n", f"fsdp_size={fsdp_size}\n")
    path = tmp_path / "run.sh"
    path.write_text(text, encoding="utf-8")
    options = Options(assignments=tuple(pair["settings"]), allow_outside_root=True)
    return run_pipeline(one_run([str(path)], options), options, registry())


@pytest.mark.parametrize("fsdp_size", [2, 8])
def test_verl_shards_over_fsdp_size_whatever_the_ulysses_size(tmp_path, fsdp_size):
    """verl builds its FSDP mesh (16 // fsdp_size, fsdp_size) apart from the Ulysses mesh
    (16 // 4, 4) (fsdp_workers.py:167-176): the states shard over fsdp_size GPUs, and the
    product of the two is no world size verl refuses (no ML502)."""
    diagnostics, est = _verl_async(tmp_path, fsdp_size)
    assert not [d for d in diagnostics if d.code == "ML502"]
    update = next(p for p in est.stages[0].phases if p.name == "update_actor")
    [weights] = [t for t in update.terms if t.name == "actor.weights"]
    assert weights.bytes == 7_615_616_512 * 4 // fsdp_size
