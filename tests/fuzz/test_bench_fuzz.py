"""The long fuzz run's harness itself (bench/fuzz.py, mutate.mutate): a mutated input stays
within the size limit between rounds, an input the harness cannot build is its own failure
(with its seed), and reproducers go to a folder of this run."""
from __future__ import annotations

import importlib.util
import os
import random
import signal
import sys

import pytest

from fuzz import mutate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_no_mutation_round_is_handed_more_than_the_size_limit(monkeypatch):
    """duplicate_lines on a one-line file multiplies it (up to 4x a round): cut only at the end,
    the 12th round was handed 487 MB (with this seed)."""
    seen = []

    def grow(rng, name, raw):
        seen.append(len(raw))
        assert len(raw) <= mutate.MAX_INPUT, f"round {len(seen)} was handed {len(raw):,} bytes"
        return mutate.duplicate_lines(rng, name, raw)

    monkeypatch.setattr(mutate, "MUTATORS", (grow,))
    name, raw = mutate.mutate(random.Random(1), "a.txt", b"x" * 200_000, rounds=12)
    assert name == "a.txt" and len(raw) == mutate.MAX_INPUT and len(seen) == 12


@pytest.fixture
def bench(monkeypatch, tmp_path):
    """bench/fuzz.py as a module, with a one-file corpus and no address-space limit (the limit
    would hold for the rest of this test process)."""
    monkeypatch.setattr(sys, "path", list(sys.path))   # the module edits sys.path
    spec = importlib.util.spec_from_file_location("memlint_bench_fuzz",
                                                  os.path.join(ROOT, "bench", "fuzz.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    workdir = tmp_path / "work"
    (workdir / ".git").mkdir(parents=True)

    def init(_include_shared):
        module._CORPUS, module._WORKDIR = [("a.json", b"{}")], str(workdir)

    monkeypatch.setattr(module, "_init", init)
    monkeypatch.setattr(module, "_case",
                        lambda seed: ("a.json", b'{"train_batch_size": 8}', [], "json", "check"))
    previous = signal.getsignal(signal.SIGTERM)   # main() installs its own
    yield module
    signal.signal(signal.SIGTERM, previous)


def test_a_memory_error_building_an_input_is_a_harness_failure_with_its_seed(bench, capsys,
                                                                               monkeypatch):
    """The worker runs under an address-space limit; a MemoryError while a mutator or generator
    builds an input escaped _work and ended the whole run."""
    built = bench._case

    def case(seed):
        if seed == 3:
            raise MemoryError
        return built(seed)

    monkeypatch.setattr(bench, "_case", case)
    code = bench.main(["--count", "5", "--jobs", "1", "--progress", "0"])
    out = capsys.readouterr().out
    assert code == 2, out   # memlint did not fail; the harness did
    assert "inputs run: 5 " in out and "failures: 0 (0 distinct)" in out
    assert "harness failures: 1  harness: MemoryError while building the input" in out
    assert "seeds: 3 (rerun one: --seed SEED --count 1 --jobs 1)" in out
    assert "reproducers:" not in out


def test_reproducers_go_to_a_new_folder_each_run(bench, capsys, monkeypatch):
    """They went to one fixed /tmp/memlint-fuzz-failures, shared by every run and user."""
    monkeypatch.setattr(mutate, "run_one", lambda *args, **kwargs: "made up: failure")
    folders = []
    for _ in range(2):
        assert bench.main(["--count", "2", "--jobs", "1", "--progress", "0"]) == 1
        out = capsys.readouterr().out
        assert "failures: 2 (1 distinct)" in out
        [line] = [line for line in out.splitlines() if line.startswith("reproducers: ")]
        folder = line.split(": ", 1)[1]
        assert os.path.isdir(folder) and len(os.listdir(folder)) == 2   # the input, its .args
        assert os.path.basename(folder).startswith("memlint-fuzz-failures-")
        folders.append(folder)
    assert folders[0] != folders[1]


def test_out_names_the_reproducers_folder(bench, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(mutate, "run_one", lambda *args, **kwargs: "made up: failure")
    out_dir = tmp_path / "out"
    assert bench.main(["--count", "1", "--jobs", "1", "--progress", "0",
                       "--out", str(out_dir)]) == 1
    assert f"reproducers: {out_dir}" in capsys.readouterr().out
    assert len(os.listdir(out_dir)) == 2
