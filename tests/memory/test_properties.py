"""Properties of the `precise` model (hypothesis): more parallelism or recompute never raises a
per-GPU term it should lower; totals are the sum of their terms, in integer bytes; estimates are
deterministic."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "fixtures", "hf")
DENSE = os.path.join(FIX, "Meta-Llama-3.1-8B.json")
MOE = os.path.join(FIX, "Mixtral-8x7B-v0.1.json")

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def run(config, sets):
    scenario, diagnostics = build([overrides_partial(sets, model=config)])
    errors = [d for d in diagnostics if d.severity.label == "error"]
    assert not errors, [d.message for d in errors]
    return estimate(scenario)


def component(est, name, stage=None, phase=None):
    """The most bytes of one component on any (or the given) stage, in one named phase (or the
    stage's peak): phases are compared like for like, since the peak phase may move."""
    stages = est.stages if stage is None else [est.stages[stage]]
    best = 0
    for s in stages:
        for p in s.phases:
            if phase is None or p.name == phase:
                best = max(best, sum(t.bytes for t in p.terms if t.component == name))
    return best


PHASES = ("forward_end", "backward_start", "backward_recompute", "optimizer")


def assert_lowered(high, low, names, stage=None):
    for phase in PHASES:
        for name in names:
            assert (component(high, name, stage, phase) <= component(low, name, stage, phase)), \
                (phase, name)


base = st.fixed_dictionaries({
    "framework": st.sampled_from(["megatron", "deepspeed", "fsdp2", "hf"]),
    "micro_batch": st.sampled_from([1, 2, 4]),
    "seq_len": st.sampled_from([1024, 4096]),
    "precision": st.sampled_from(["bf16", "fp32", "amp-bf16", "pure-bf16"]),
    "attention": st.sampled_from(["flash", "sdpa", "eager"]),
    "recompute": st.sampled_from(["none", "selective", "full"]),
})


def sets_of(params, **extra):
    merged = dict(params, **extra)
    return [f"{k}={v}" for k, v in merged.items()]


@SETTINGS
@given(base, st.sampled_from([1, 2, 4]))
def test_tp_with_sp_lowers_activations_and_states(params, tp):
    low = run(DENSE, sets_of(params, tp=tp, sp="true", world_size=8 * tp))
    high = run(DENSE, sets_of(params, tp=2 * tp, sp="true", world_size=16 * tp))
    assert_lowered(high, low, ("weights", "gradients", "optimizer", "activations", "logits"), 0)


@SETTINGS
@given(base, st.sampled_from([1, 2]))
def test_pp_lowers_states(params, pp):
    low = run(DENSE, sets_of(params, pp=pp, world_size=8 * pp, global_batch=64))
    high = run(DENSE, sets_of(params, pp=2 * pp, world_size=16 * pp, global_batch=64))
    assert_lowered(high, low, ("weights", "gradients", "optimizer"))


@SETTINGS
@given(base, st.sampled_from([1, 2, 4]))
def test_ep_lowers_expert_states(params, ep):
    low = run(MOE, sets_of(params, ep=ep, world_size=8))
    high = run(MOE, sets_of(params, ep=2 * ep, world_size=8))
    assert_lowered(high, low, ("weights", "gradients", "optimizer"))


@SETTINGS
@given(base, st.sampled_from([1, 2, 4]))
def test_cp_lowers_activations(params, cp):
    low = run(DENSE, sets_of(params, cp=cp, world_size=8 * cp))
    high = run(DENSE, sets_of(params, cp=2 * cp, world_size=16 * cp))
    assert_lowered(high, low, ("activations", "logits"))


@SETTINGS
@given(base, st.sampled_from([1, 2, 3]), st.sampled_from([1, 2, 4]))
def test_dp_with_zero_lowers_sharded_states(params, zero, dp):
    params = dict(params, framework="deepspeed")
    low = run(DENSE, sets_of(params, zero=zero, world_size=dp))
    high = run(DENSE, sets_of(params, zero=zero, world_size=2 * dp))
    lowered = ["optimizer"] + (["gradients"] if zero >= 2 else []) + (
        ["weights"] if zero >= 3 else [])
    assert_lowered(high, low, lowered)


@SETTINGS
@given(base)
def test_recompute_never_raises_activations(params):
    none = run(DENSE, sets_of(params, recompute="none"))
    for mode in ("selective", "full"):
        other = run(DENSE, sets_of(params, recompute=mode))
        for stage in range(len(none.stages)):
            for phase in ("forward_end", "backward_start"):
                assert (component(other, "activations", stage, phase)
                        <= component(none, "activations", stage, phase))


@SETTINGS
@given(base, st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]), st.sampled_from([0, 1, 3]))
def test_totals_are_integer_sums_and_deterministic(params, tp, pp, zero):
    sets = sets_of(params, tp=tp, pp=pp, zero=zero, world_size=8 * tp * pp, global_batch=32)
    first = run(MOE, sets)
    second = run(MOE, sets)
    assert first.to_dict() == second.to_dict()
    for stage in first.stages:
        assert all(isinstance(t.bytes, int) and t.bytes >= 0 for t in stage.terms)
        assert stage.total_bytes == sum(t.bytes for t in stage.terms)
        assert stage.total_bytes == sum(stage.components().values())
        for phase in stage.phases:
            assert phase.total <= stage.total_bytes
    assert first.peak_bytes == max(s.total_bytes for s in first.stages)


# ---------------------------------------------------------------------------------------------
# The whole CLI output is a function of its input: byte-identical across processes with different
# string hashing (set and dict orders), for every format.


def _env(seed) -> dict:
    return dict(os.environ, PYTHONHASHSEED=str(seed), NO_COLOR="1", COLUMNS="100",
                PYTHONPATH=ROOT)


def _cli_output(argv, seed):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "memlint", *argv], cwd=ROOT, env=_env(seed),
                            capture_output=True, timeout=120)
    return result.returncode, result.stdout, result.stderr


# One fresh interpreter runs `memlint.cli.main` once per command line (read from stdin); the
# checks of the same files share one pipeline run (check_paths, which no format option
# reaches), and each format renders its report from it as `memlint check --format F` does.
_EACH_FORMAT = """
import contextlib, io, json, sys
from memlint import api, cli
check_paths, done = api.check_paths, {}
def once(paths, options):
    key = repr((list(paths), options))
    if key not in done:
        done[key] = check_paths(paths, options)
    return done[key]
api.check_paths = once
outputs = []
for argv in json.load(sys.stdin):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    outputs.append([code, out.getvalue(), err.getvalue()])
sys.stdout.write(json.dumps(outputs))
"""


def _cli_outputs(argvs, seed) -> list:
    import json
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", _EACH_FORMAT], input=json.dumps(argvs),
                            cwd=ROOT, env=_env(seed), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def _determinism_inputs():
    fixtures = os.path.join(ROOT, "fixtures")
    shared = os.path.join(fixtures, "shared-real")
    files = []
    for root in (fixtures, os.path.join(shared, "deepspeed-invalid"),
                 os.path.join(shared, "accelerate"), os.path.join(shared, "megatron-args")):
        for folder, _dirs, names in sorted(os.walk(root)):
            if root == fixtures and (folder + os.sep).startswith(shared + os.sep):
                continue  # three of its folders, below
            files += [os.path.relpath(os.path.join(folder, n), ROOT) for n in sorted(names)
                      if n.endswith((".json", ".hjson", ".yaml", ".yml", ".toml", ".sh", ".txt"))
                      and not n.startswith("_expect")]
    return files



@pytest.mark.slow  # two fresh interpreters, each checking the files once: ~15 s of CPU each
def test_cli_output_is_byte_identical_across_hash_seeds():
    formats = ["text", "json", "sarif"]
    argvs = [["check", "--format", fmt, "--allow-outside-root", "--fail-on", "info",
              "--model", "mixtral-8x7b", *_determinism_inputs()] for fmt in formats]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:   # the two interpreters at once (CI has two cores)
        first, second = pool.map(lambda seed: _cli_outputs(argvs, seed), (0, 4242))
    for fmt, (code, out, err) in zip(formats, first):
        assert code in (0, 1, 2) and out, (fmt, err[-2000:])
    for fmt, one, other in zip(formats, first, second):
        assert one == other, fmt


@pytest.mark.slow  # fresh interpreters
def test_estimate_output_is_byte_identical_across_hash_seeds():
    argv = ["estimate", "--format", "json", "--model", "seed-m3", "--set", "profile=seed",
            "--set", "model.total_params=428e9", "--set", "model.expert_params=398e9",
            "--set", "tp=4", "--set", "pp=4", "--set", "ep=8", "--set", "dp=4",
            "--set", "zero=2", "--set", "recompute=full", "--set", "micro_batch=2",
            "--set", "seq_len=8192"]
    first = _cli_output(argv, 1)
    assert first[0] == 0, first[2]
    assert _cli_output(argv, 987654) == first
    explain = ["estimate", "--explain", "--model", "fixtures/hf/DeepSeek-V3.json", "--set", "pp=4",
               "--set", "tp=8", "--set", "ep=8", "--set", "world_size=256"]
    assert _cli_output(explain, 1) == _cli_output(explain, 31337)


# -- framework effects (memory/optimizer_quant.py, offload.py, moe_balance.py) -----------------

@SETTINGS
@given(world=st.sampled_from([8, 16, 32]), seq=st.sampled_from([1024, 4096]))
def test_narrower_optimizer_states_never_cost_more(world, seq):
    base = ["framework=fsdp2", "fsdp=full", f"world_size={world}", f"seq_len={seq}"]
    totals = [component(run(DENSE, base + [f"optimizer_state_dtype={d}"]), "optimizer",
                        phase="optimizer") for d in ("fp32", "bf16", "int8", "int4")]
    assert totals == sorted(totals, reverse=True)


@SETTINGS
@given(layers=st.integers(1, 32), seq=st.sampled_from([1024, 4096]))
def test_activation_offload_never_raises_gpu_activations(layers, seq):
    base = ["framework=megatron", "world_size=8", f"seq_len={seq}"]
    plain = run(DENSE, base)
    off = run(DENSE, base + ["offload_activations=true", f"offload_activations_layers={layers}"])
    assert_lowered(off, plain, ["activations"])


@SETTINGS
@given(imbalance=st.floats(1.0, 4.0), ep=st.sampled_from([2, 4, 8]))
def test_routing_imbalance_never_lowers_activations(imbalance, ep):
    base = ["framework=megatron", "world_size=8", f"ep={ep}", "seq_len=2048"]
    assert_lowered(run(MOE, base), run(MOE, base + [f"moe.routing_imbalance={imbalance}"]),
                   ["activations"])
