"""`memlint fit`: every answer re-checked by the memory model through the `--set` path a user
would take (the value found fits with the headroom, the next one does not), on the bundled
example and on real configs in fixtures/ (their sources: fixtures/adapters/SOURCES.md)."""
from __future__ import annotations

import json
import os

import pytest

from memlint.cli import main
from memlint import fitting as fit
from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "fixtures", "examples", "llama3-8b-h100.memlint.toml")
MEGATRON = os.path.join(ROOT, "fixtures", "adapters", "megatron", "good")
TORCHTITAN = os.path.join(ROOT, "fixtures", "adapters", "torchtitan", "good", "llama3_70b.toml")


def load(path, *assignments, model=None):
    from memlint.adapters.registry import load_with_references

    partials = list(load_with_references(path, 4 << 20, False)) if path else []
    scenario, diagnostics = build(partials + [overrides_partial(list(assignments), model)],
                                  base_dir=ROOT)
    assert not [d for d in diagnostics if d.severity.label == "error"], diagnostics
    return scenario


def peak(path, assignments, model=None):
    """The peak of the run with `--set` assignments, as `memlint estimate` computes it, beside
    the allocator's releasable cache (what fit's headroom is measured on)."""
    return estimate(load(path, *assignments, model=model)).held_peak_bytes


def assert_boundary(path, answer, budget, key, step, model=None, smaller_fails=False):
    """The answer fits; the neighbouring value (one step on) does not."""
    assert answer.fits, answer.notes
    assert peak(path, answer.assignments(), model) <= budget
    neighbour = answer.value - step if smaller_fails else answer.value + step
    settings = dict(answer.settings, **{key: neighbour})
    over = [f"{k}={v}" for k, v in settings.items()]
    assert peak(path, over, model) > budget
    assert answer.failing == neighbour


# ---------------------------------------------------------------------------------------------
# the searches


@pytest.mark.parametrize("boundary", [1, 2, 3, 7, 64, 1000])
def test_largest_and_smallest_find_a_threshold(boundary):
    assert fit.largest(lambda v: v <= boundary, 1, 10_000) == (boundary, boundary + 1)
    assert fit.smallest(lambda v: v >= boundary, 1, 10_000) == (
        boundary, None if boundary == 1 else boundary - 1)


def test_largest_and_smallest_report_the_ends():
    assert fit.largest(lambda v: False, 1, 100) == (None, 1)
    assert fit.largest(lambda v: True, 1, 100) == (100, None)
    assert fit.smallest(lambda v: False, 1, 100) == (None, 100)


def test_search_calls_are_logarithmic():
    calls = []

    def fits(v):
        calls.append(v)
        return v <= 5000

    fit.largest(fits, 1, 1 << 20)
    assert len(calls) <= 2 * 14


# ---------------------------------------------------------------------------------------------
# the bundled example


def test_bundled_example_answers_all_three_questions():
    scenario = load(EXAMPLE)
    result = fit.fit(scenario)
    budget = scenario.hardware.gpu_memory * 0.9
    assert result.budget_bytes == budget
    micro = result.answer("micro_batch")
    assert_boundary(EXAMPLE, micro, budget, "micro_batch", 1)
    # what limits it: activations grow with the micro batch
    assert micro.limit.grew == "activations" or micro.limit.term == "activations"
    seq = result.answer("seq_len")
    assert seq.settings["cp"] == 1
    assert_boundary(EXAMPLE, seq, budget, "seq_len", fit.SEQ_GRANULE)
    # with more cp a longer sequence fits; each row is itself a boundary
    assert len(seq.rows) >= 2
    for row in seq.rows[1:]:
        if row.fits:
            cp = row.settings["cp"]
            assert_boundary(EXAMPLE, row, budget, "seq_len", fit._seq_granule(cp))
    assert max(r.value or 0 for r in seq.rows) > seq.value
    world = result.answer("world_size")
    assert_boundary(EXAMPLE, world, budget, "world_size", 2, smaller_fails=True)
    assert world.settings["tp"] == 2
    assert world.limit.term.startswith("optimizer")  # the distributed optimizer shards over dp


def test_headroom_moves_the_answer():
    scenario = load(EXAMPLE)
    loose = fit.fit(scenario, 0.0, questions=("seq_len",)).answer("seq_len")
    tight = fit.fit(scenario, 0.2, questions=("seq_len",)).answer("seq_len")
    assert tight.value < loose.value
    assert peak(EXAMPLE, loose.assignments()) <= scenario.hardware.gpu_memory


def test_planner_smallest_gpu_count_is_a_boundary():
    scenario = load(EXAMPLE)
    answer = fit.smallest_gpus(scenario, 0.1)
    assert answer.fits
    budget = scenario.hardware.gpu_memory * 0.9
    assert peak(EXAMPLE, answer.assignments()) <= budget
    from memlint.planner import search_plans

    if answer.failing is not None:
        fewer = search_plans(scenario, answer.failing, 8, 1, headroom=0.1).plans
        assert not fewer or not fewer[0].has_headroom


# ---------------------------------------------------------------------------------------------
# real configs


@pytest.mark.parametrize("name", ["llama3_8b.sh", "mixtral_8x7b.sh", "llama3_70b.sh"])
def test_real_megatron_scripts(name):
    path = os.path.join(MEGATRON, name)
    scenario = load(path)
    result = fit.fit(scenario)
    budget = result.budget_bytes
    micro = result.answer("micro_batch")
    if micro.fits and micro.failing is not None:
        assert_boundary(path, micro, budget, "micro_batch", 1)
    seq = result.answer("seq_len")
    if seq.fits:
        assert_boundary(path, seq, budget, "seq_len", fit._seq_granule(seq.settings["cp"]))
    else:  # the states alone overflow (llama3_70b.sh at its 32 GPUs): seq_len cannot help
        assert peak(path, [f"seq_len={seq.failing}"]) > budget
        assert not seq.limit.term.startswith("activations")
    world = result.answer("world_size")
    assert world.fits
    assert peak(path, world.assignments()) <= budget
    if world.failing is not None:
        smaller = dict(world.settings, world_size=world.failing)
        assert peak(path, [f"{k}={v}" for k, v in smaller.items()]) > budget


def test_mixtral_expert_layout_decides_the_smallest_world():
    path = os.path.join(MEGATRON, "mixtral_8x7b.sh")
    world = fit.fit(load(path), questions=("world_size",)).answer("world_size")
    # ep = 8 with tp = 1 needs dp a multiple of 8 (Megatron: ep·etp divides dp·cp·tp)
    assert world.value == 32
    assert any("expert layout" in note for note in world.notes)


def test_torchtitan_run_without_world_size_finds_it():
    scenario = load(TORCHTITAN)
    world = fit.fit(scenario, questions=("world_size",)).answer("world_size")
    assert world.fits
    budget = scenario.hardware.gpu_memory * 0.9
    assert peak(TORCHTITAN, world.assignments()) <= budget
    smaller = dict(world.settings, world_size=world.failing)
    assert peak(TORCHTITAN, [f"{k}={v}" for k, v in smaller.items()]) > budget


def test_nothing_fits_names_the_dominating_term():
    scenario = load(None, "world_size=8", model="llama3-70b")
    result = fit.fit(scenario)
    for answer in result.answers:
        assert not answer.fits
        assert answer.limit.term.startswith("optimizer")
    assert fit.exit_code(result) == 1
    notes = " ".join(result.answer("world_size").notes)
    assert "nothing is sharded" in notes


# ---------------------------------------------------------------------------------------------
# the command


def test_cli_fit_text_and_json(capsys):
    assert main(["fit", EXAMPLE, "--no-color"]) == 0
    text = capsys.readouterr().out
    assert "largest micro_batch: 1" in text
    assert "largest seq_len:" in text and "limited by" in text
    assert "smallest world_size (layout kept): 4" in text
    assert main(["fit", EXAMPLE, "--format", "json", "--only", "seq_len"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (answer,) = doc["answers"]
    assert answer["question"] == "seq_len" and answer["fits"]
    assert answer["limit"]["term"] and answer["stages"][0]["total_bytes"] <= doc["budget_bytes"]


def test_cli_fit_reads_the_margin_from_pyproject(repo, capsys):
    (repo / "pyproject.toml").write_text(
        "[tool.memlint.options.low-memory-headroom]\nmargin = 0.25\n")
    assert main(["fit", "--model", "llama3-8b", "--world-size", "8", "--set", "tp=2",
                 "--set", "zero=1", "--format", "json", "--only", "micro_batch"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["headroom"] == 0.25


def test_cli_fit_nothing_fits_exits_1(capsys):
    assert main(["fit", "--model", "llama3-70b", "--world-size", "8"]) == 1
    out = capsys.readouterr().out
    assert "none fits" in out and "does not fit:" in out and "optimizer.moments" in out


def test_cli_fit_without_a_model_exits_2(capsys, repo):
    assert main(["fit", "--set", "tp=2"]) == 2
    assert "no model" in capsys.readouterr().err


def test_plan_without_gpus_answers_the_smallest_count(capsys):
    assert main(["plan", "--model", "llama3-70b", "--seq-len", "8192", "--global-batch", "512",
                 "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "smallest GPU count with a layout that leaves 10% free: 16" in out
    assert "on 16 x H100-80GB" in out
