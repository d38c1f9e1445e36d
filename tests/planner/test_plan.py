"""memlint plan: every plan is confirmed by estimate(), pruning never drops a fitting plan, the
seed M3 case, and the JSON output round-trips through --set."""
import argparse
import io
import json
from contextlib import redirect_stdout

import pytest

from memlint.commands import plan as plan_cmd
from memlint.memory.estimate import estimate
from memlint.planner import search_plans
from memlint.planner.search import uneven_split
from memlint.scenario import build, overrides_partial

M3_SEED = ["profile=seed", "model.total_params=428e9", "model.expert_params=398e9",
           "seq_len=8192", "global_batch=32", "gpu=H100-80GB"]


def scenario(sets, model):
    s, diagnostics = build([overrides_partial(sets, model=model)])
    assert not [d for d in diagnostics if d.severity.label == "error"], diagnostics
    return s


def key(p):
    return tuple(sorted(p.settings.items()))


def confirm(plans, base_sets, model):
    """Rebuild each plan from --set assignments alone and estimate it again."""
    for p in plans:
        again = estimate(scenario(base_sets + p.assignments(), model))
        assert again.peak_bytes == p.peak_bytes, p.assignments()
        assert again.peak_bytes <= p.capacity_bytes
        assert [st.total_bytes for st in again.stages] == [st.total_bytes
                                                          for st in p.estimate.stages]


@pytest.fixture(scope="module")
def m3_seed_all():
    return search_plans(scenario(M3_SEED, "seed-m3"), 512, 8, None)


def test_every_printed_plan_is_confirmed_by_estimate():
    sets = ["seq_len=8192", "global_batch=2048", "gpu=H100-80GB"]
    result = search_plans(scenario(sets, "llama3.1-405b"), 16384, 8, 10)
    assert len(result.plans) == 10
    confirm(result.plans, sets, "llama3.1-405b")
    ranks = [(not p.has_headroom, p.cost.relative_step_time) for p in result.plans]
    assert ranks == sorted(ranks)
    for p in result.plans:
        assert p.penalties and all(pen.explanation for pen in p.penalties)


@pytest.mark.slow  # the 512-GPU search of the seed article's MoE (shared by the next test): ~4 s
def test_m3_seed_article_plan_fits(m3_seed_all):
    """seed 000 CH 7.2: TP4·PP4·EP8·DP4 + ZeRO-2 + full recompute on 512 H100 (world =
    tp·pp·ep·dp under profile=seed) is among the fitting plans, at the article's 30.4 GB."""
    article = [p for p in m3_seed_all.plans
               if (p.settings["tp"], p.settings["pp"], p.settings["ep"], p.settings["dp"],
                   p.settings["cp"], p.settings["zero"], p.settings["recompute"],
                   p.settings["micro_batch"]) == (4, 4, 8, 4, 1, 2, "full", 2)]
    assert len(article) == 1
    assert article[0].peak_bytes / 1e9 == pytest.approx(30.4, rel=0.01)
    assert article[0].has_headroom


@pytest.mark.slow  # the same 512-GPU search
def test_m3_seed_ep_in_every_fitting_plan_without_cp_or_deep_pipelines(m3_seed_all):
    """CH 7.6: without EP, TP·PP alone cannot hold M3. Under the seed profile that holds for the
    article's own layouts (pp <= 4, cp = 1); only context parallelism or pp >= 8 with ZeRO
    sharding makes non-EP layouts fit (reported, not hidden)."""
    assert m3_seed_all.plans
    no_ep = [p for p in m3_seed_all.plans if p.settings["ep"] == 1]
    assert all(p.settings["cp"] > 1 or p.settings["pp"] >= 8 for p in no_ep)
    top = search_plans(scenario(M3_SEED, "seed-m3"), 512, 8, 10)
    assert all(p.settings["ep"] > 1 for p in top.plans)


@pytest.mark.slow  # a 428B-parameter MoE search: ~10 s
def test_m3_precise_megatron_needs_ep():
    """Under Megatron's conventions (fp32 main grads, distributed optimizer = ZeRO-1, EP inside
    DP) and the decision tree's pp <= 8 (CH 10.2 step 3), EP is in every fitting plan."""
    sets = [s for s in M3_SEED if s != "profile=seed"]
    result = search_plans(scenario(sets, "seed-m3"), 512, 8, None, max_pp=8)
    assert result.plans
    assert all(p.settings["ep"] > 1 for p in result.plans)


SMALL = [
    # brute force over every layout: 4-8 s each, in the slow suite CI runs (the others stay quick)
    pytest.param("llama3-8b", ["seq_len=4096", "global_batch=16", "gpu_memory=40GiB"], 16, {},
                 marks=pytest.mark.slow),
    pytest.param("llama3-8b", ["seq_len=4096", "global_batch=16", "gpu_memory=24GiB",
                               "framework=fsdp2"], 8, {}, marks=pytest.mark.slow),
    pytest.param("llama3-8b", ["seq_len=2048", "global_batch=8", "gpu_memory=40GiB",
                               "framework=deepspeed"], 8, {}, marks=pytest.mark.slow),
    # MoE brute force: 20-60 s each (every layout estimated), in the slow suite CI runs
    pytest.param("mixtral-8x7b", ["seq_len=4096", "global_batch=16", "gpu_memory=80GiB"], 32, {},
                 marks=pytest.mark.slow),
    pytest.param("mixtral-8x7b", ["seq_len=4096", "global_batch=16", "gpu_memory=80GiB",
                                  "profile=seed"], 16, {}, marks=pytest.mark.slow),
    ("llama3-8b", ["seq_len=4096", "global_batch=8", "gpu_memory=24GiB", "framework=hf"], 8, {}),
]


@pytest.mark.parametrize("model,sets,gpus,opts", SMALL)
def test_pruning_never_drops_a_fitting_plan(model, sets, gpus, opts):
    base = scenario(sets, model)
    pruned = search_plans(base, gpus, 8, None, **opts)
    brute = search_plans(base, gpus, 8, None, prune=False, **opts)
    assert {key(p) for p in pruned.plans} == {key(p) for p in brute.plans}
    assert pruned.stats.estimated <= brute.stats.estimated
    # top-k with early stopping = the first k of the full ranking
    top = search_plans(base, gpus, 8, 5, **opts)
    assert [key(p) for p in top.plans] == [key(p) for p in brute.plans[:5]]


def test_pruning_prunes():
    base = scenario(["seq_len=8192", "global_batch=2048"], "llama3.1-405b")
    stats = search_plans(base, 16384, 8, 10).stats
    assert stats.examined > 10_000
    assert stats.pruned_states + stats.pruned_bound > stats.examined / 2
    assert stats.estimated < 100


def test_uneven_split():
    assert uneven_split(126, 16) == (7, 7)   # Llama 3 405B: 7 + 14 x 8 + 7
    assert uneven_split(60, 8) == (6, 6)
    assert uneven_split(60, 32) is None


def _args(argv):
    parser = argparse.ArgumentParser()
    plan_cmd.add_arguments(parser)
    return parser.parse_args(argv)


def _run_json(argv):
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = plan_cmd.run(_args(argv + ["--format", "json"]))
    return rc, json.loads(buf.getvalue())


def test_json_round_trip_via_set():
    argv = ["--model", "seed-m3", "--gpus", "512", "--gpu", "H100-80GB", "--seq-len", "8192",
            "--global-batch", "32", "--top", "3", "--set", "model.total_params=428e9",
            "--set", "model.expert_params=398e9"]
    rc, out = _run_json(argv)
    assert rc == 0 and len(out["plans"]) == 3
    base = out["base"]["set"] + ["model.total_params=428e9", "model.expert_params=398e9"]
    for entry in out["plans"]:
        assert entry["set"] == [f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                                for k, v in entry["settings"].items()]
        again = estimate(scenario(base + entry["set"], "seed-m3"))
        assert again.peak_bytes == entry["peak_bytes"]
        assert [s["total_bytes"] for s in entry["stages"]] == [s.total_bytes for s in again.stages]
        assert entry["cost"]["penalties"]


def test_text_output_and_exit_codes():
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = plan_cmd.run(_args(["--model", "llama3-8b", "--gpus", "8", "--gpu", "H100",
                                 "--seq-len", "4096", "--global-batch", "16", "--top", "2"]))
    assert rc == 0
    text = buf.getvalue()
    assert "ranked plans" in text and "--set tp=" in text
    rc, out = _run_json(["--model", "llama3.1-405b", "--gpus", "8", "--gpu", "A100-40GB",
                         "--seq-len", "8192", "--global-batch", "8"])
    assert rc == 1 and out["plans"] == []
    assert plan_cmd.run(_args(["--gpus", "8"])) == 2           # no model
    # no GPU budget: the smallest GPU count is answered first (issue 17), then its plans
    assert plan_cmd.run(_args(["--model", "llama3-8b"])) == 0


def test_nearest_to_a_starting_configuration():
    """Starting from tp=1 pp=1 zero=0 on a budget where it does not fit: the first plans change
    as few keys as possible."""
    base = scenario(["seq_len=4096", "global_batch=16", "gpu_memory=40GiB", "tp=1", "pp=1",
                     "micro_batch=2"], "llama3-8b")
    from memlint.planner import near_settings
    plans = search_plans(base, 16, 8, 5, near=near_settings(base)).plans
    assert plans
    distances = [len(p.changed) for p in plans]
    assert distances == sorted(distances)
    assert distances[0] <= 2


class _Terminal(io.StringIO):
    def isatty(self):
        return True


PLAN = ["plan", "--model", "gpt2", "--gpus", "2", "--gpu", "H100-80GB", "--seq-len", "1024",
        "--global-batch", "8", "--top", "2"]


@pytest.mark.parametrize("env,flags,stream,coloured", [
    ({}, [], _Terminal, True),
    ({"NO_COLOR": "1"}, [], _Terminal, False),
    ({}, ["--no-color"], _Terminal, False),
    ({"FORCE_COLOR": "1"}, [], io.StringIO, False),
    ({"TTY_COMPATIBLE": "1"}, [], io.StringIO, False),
], ids=["terminal", "NO_COLOR", "--no-color", "pipe-FORCE_COLOR", "pipe-TTY_COMPATIBLE"])
def test_plan_colours_as_check_does(monkeypatch, env, flags, stream, coloured):
    """Escape codes only on a terminal, never under NO_COLOR or --no-color (cli._color, what
    `check` uses): rich alone printed bold under NO_COLOR and coloured a pipe under FORCE_COLOR,
    and plan had no --no-color."""
    from memlint.cli import main

    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out = stream()
    with redirect_stdout(out):
        assert main(PLAN + flags) == 0
    text = out.getvalue()
    assert "memlint plan" in text and "ranked plans" in text
    assert ("\x1b[" in text) is coloured, text[:200]
