"""Fuzz every adapter and the CLI with mutated real configs (hypothesis, a small CI corpus).

Each input must give diagnostics and exit 0/1/2 as DESIGN.md says: no traceback, no internal
error (ML009), no hang (a per-input time limit). `bench/fuzz.py` runs the same oracle for long.
The real configs of fixtures/shared-real/ are part of the corpus.
"""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fuzz import mutate

CORPUS = mutate.corpus()
LIMIT = 5.0  # seconds per input; a normal one takes milliseconds

FAMILIES = {
    "json": (".json", ".hjson"),
    "yaml": (".yaml", ".yml"),
    "toml": (".toml",),
    "script": (".sh", ".txt"),
}


def _family(name: str) -> str:
    for family, endings in FAMILIES.items():
        if name.lower().endswith(endings):
            return family
    return "other"


BY_FAMILY = {f: [c for c in CORPUS if _family(c[0]) == f] for f in FAMILIES}
# The full corpus (600 inputs a family) is marked slow: CI runs it (`-m "slow or not slow"`,
# README); the default run takes a small deterministic sample of the same inputs. Every input
# runs under a CPU-time limit (mutate.run_one), so a loaded machine cannot fail it.
FULL, SAMPLE = 600, 40


def _settings(examples: int):
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


SETTINGS = _settings(FULL)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    where = tmp_path_factory.mktemp("fuzz")
    (where / ".git").mkdir()
    return str(where)


def _assert_ok(name, raw, args, workdir, fmt="json", command="check"):
    failure = mutate.run_one(name, raw, args, fmt=fmt, time_limit=LIMIT, workdir=workdir,
                             command=command)
    assert failure is None, f"{name} {args}: {failure}\n{raw[:600]!r}"


def _mutated(family, workdir, monkeypatch, examples):
    items = BY_FAMILY[family]
    if not items:
        pytest.skip(f"no {family} configs in the corpus")
    monkeypatch.chdir(workdir)

    @_settings(examples)
    @given(index=st.integers(0, len(items) - 1), seed=st.integers(0, 2**32 - 1),
           fmt=st.sampled_from(["json", "text", "sarif"]))
    def run(index, seed, fmt):
        rng = random.Random(seed)
        name, raw = mutate.mutate(rng, *items[index])
        _assert_ok(name, raw, mutate.extra_args(rng, name), workdir, fmt)

    run()


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_mutated_real_configs(family, workdir, monkeypatch):
    _mutated(family, workdir, monkeypatch, FULL)


@pytest.mark.slow  # fuzzing, like the full runs above: ~3 s per family
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_mutated_real_configs_sample(family, workdir, monkeypatch):
    _mutated(family, workdir, monkeypatch, SAMPLE)


@pytest.mark.slow
@pytest.mark.parametrize("mutator", list(dict.fromkeys(mutate.MUTATORS)),
                         ids=lambda m: m.__name__)
def test_each_mutator_on_each_family(mutator, workdir, monkeypatch):
    """Every kind of damage, once per format, with and without a model."""
    monkeypatch.chdir(workdir)
    rng = random.Random(mutator.__name__)
    for family, items in sorted(BY_FAMILY.items()):
        for name, raw in rng.sample(items, min(2, len(items))):
            name, bad = mutator(rng, name, raw)
            _assert_ok(name, bad, [], workdir)
            _assert_ok(name, bad, ["--model", "llama3-8b"], workdir)


SPECIALS = ["1e308", "1" + "0" * 400, "NaN", "Infinity", "-1", "0", "-0.0", "1e-320"]


@pytest.mark.slow
@pytest.mark.parametrize("value", SPECIALS)
def test_every_number_replaced(value, workdir, monkeypatch):
    """Huge numbers, NaN/Infinity, negative sizes and zero divisors in every numeric field."""
    monkeypatch.chdir(workdir)
    rng = random.Random(value)
    for family, items in sorted(BY_FAMILY.items()):
        for name, raw in rng.sample(items, min(3, len(items))):
            bad = mutate._NUMBER.sub(value.encode(), raw)
            _assert_ok(name, bad, ["--model", "seed-m3"], workdir)


@pytest.mark.parametrize("name", ["ds_config.json", "config.json", "acc.yaml", "job.toml",
                                  "train.sh", "args.txt", "run.memlint.toml", "x.memlint.yaml",
                                  "pyproject.toml"])
@pytest.mark.parametrize("raw", [b"", b"\n", b"\x00\x01\x02\xff", b"\xff\xfe{}", b"{" * 5000,
                                 b"\xef\xbb\xbf", b"--", b"[" * 100 + b"]" * 100],
                         ids=["empty", "newline", "binary", "non-utf8", "open-braces", "bom",
                              "dashes", "deep"])
def test_degenerate_files(name, raw, workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    _assert_ok(name, raw, [], workdir)


@pytest.mark.slow
@SETTINGS
@given(sets=st.lists(st.tuples(st.sampled_from(mutate.SET_KEYS),
                               st.sampled_from(mutate.SET_VALUES) | st.text(max_size=12)),
                     max_size=5),
       model=st.sampled_from(mutate.MODELS),
       fmt=st.sampled_from(["json", "text"]))
def test_cli_estimate_with_random_sets(sets, model, fmt):
    """The command line alone: `estimate --model PRESET --set k=v ...` never crashes."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from memlint import cli

    args = ["estimate", "--format", fmt, "--model", model]
    for key, value in sets:
        args += ["--set", f"{key}={value}"]
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(args)
    failure = mutate.check_result(code, out.getvalue(), err.getvalue(), fmt, "", "estimate")
    assert failure is None, (args, failure)


def test_corpus_is_there():
    assert len(CORPUS) >= 30
    assert any(name.endswith(".txt") for name, _ in CORPUS)


# Inputs that once crashed or hung memlint, one per bug found by fuzzing (bench/fuzz.py).
BIG = "1" + "0" * 400
GQA = ("torchrun pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
       "--num-query-groups {groups} --seq-length 4096 --max-position-embeddings 4096 "
       "--micro-batch-size 1 --global-batch-size 8 --bf16\n")
REGRESSIONS = {
    "huge micro batch (float overflow in activations)": (
        "ds_config.json", '{"train_micro_batch_size_per_gpu": %s}' % BIG, ["--model", "llama3-8b"]),
    "huge gpu_memory (to_bytes overflow)": (
        "run.memlint.toml", 'model = "llama3-8b"\n', ["--set", f"gpu_memory={BIG}"]),
    "pp far beyond the layer count (a hang)": (
        "run.memlint.toml", 'model = "llama3-8b"\npp = 1000000000\n', []),
    "LoRA over 2**40 experts (a hang)": (
        "run.memlint.toml", 'model = "mixtral-8x7b"\nlora_rank = 8\nlora_targets = "all-linear"\n',
        ["--set", f"model.num_local_experts={2**40}"]),
    "ML401 with a string head_dim": (
        "train.sh", GQA.format(groups=8), ["--set", "model.head_dim=x"]),
    "ML401 with a 400-digit group count": (
        "train.sh", GQA.format(groups="-" + "9" * 400), ["--model", "llama3-70b"]),
    "ML401 with 1e308 layers": (
        "train.sh", GQA.format(groups=8), ["--set", "model.num_hidden_layers=1e308"]),
    "torchtitan degree of 1e400 (inf to int)": (
        "job.toml", '[job]\ndump_folder = "x"\n[parallelism]\ntensor_parallel_degree = 1e400\n',
        []),
    "axolotl dropout of 10**400 (int to float)": (
        "axolotl.yaml", f"base_model: x\nsequence_len: 2048\nmicro_batch_size: 1\n"
        f"adapter: lora\nlora_r: 8\nlora_dropout: {BIG}\n", []),
    "accelerate shard size of the wrong type": (
        "acc.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nnum_processes: 8\n"
        "fsdp_config:\n  fsdp_version: 2\nparallelism_config:\n"
        "  parallelism_config_dp_replicate_size: 2\n  parallelism_config_dp_shard_size: x\n", []),
    "an HF config key of 100,000 dots (quadratic position look-up, 41 s)": (
        "config.json", '{"model_type": "llama", "num' + "." * 100_000 + '_key_value_heads": 4}',
        ["--world-size", "8"]),
    "lora_r and lora_dropout of 130 digits in a TRL recipe (OverflowError)": (
        "config_qlora.yaml", "model_name_or_path: alignment-handbook/zephyr-7b-sft-qlora\n"
        "use_peft: true\nper_device_train_batch_size: 4\nlora_r: 1%s\nlora_dropout: 1%s\n"
        % ("0" * 130, "0" * 130), []),
}


@pytest.mark.parametrize("case", sorted(REGRESSIONS))
def test_regressions_found_by_fuzzing(case, workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    name, text, args = REGRESSIONS[case]
    _assert_ok(name, text.encode(), args, workdir)
    _assert_ok(name, text.encode(), args, workdir, fmt="text")


@pytest.mark.slow  # fuzzing the planner's command line: 15 searches
@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(sets=st.lists(st.tuples(st.sampled_from(mutate.SET_KEYS), st.sampled_from(mutate.SET_VALUES)),
                     max_size=3),
       model=st.sampled_from(mutate.MODELS), gpus=st.sampled_from(["8", "16", "0", "-1", "x"]))
def test_cli_plan_with_random_sets(sets, model, gpus):
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from memlint import cli

    args = ["plan", "--format", "json", "--model", model, "--gpus", gpus, "--top", "3"]
    for key, value in sets:
        args += ["--set", f"{key}={value}"]
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(args)
    assert code in (0, 1, 2), (args, code)
    assert "internal error" not in err.getvalue() and "Traceback" not in err.getvalue(), \
        (args, err.getvalue())
