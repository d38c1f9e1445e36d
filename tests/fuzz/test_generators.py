"""The generated cases of bench/fuzz.py (tests/fuzz/generators.py: logs for `compare`,
[tool.memlint] tables, directory trees) hold their oracle: a small seeded sample in the default
run, a larger one in the slow run. Each case runs under a CPU-time limit (mutate.invoke), so a
loaded machine cannot fail it."""
from __future__ import annotations

import random

import pytest

from fuzz import generators, mutate

CORPUS = mutate.corpus(include_shared=False)
LIMIT = 5.0


def _run(generator, seeds, workdir):
    failures = []
    for seed in seeds:
        rng = random.Random(seed)
        case = generator(rng, CORPUS)
        failure = generators.run_case(case, LIMIT, str(workdir))
        if failure is not None:
            failures.append(f"seed {seed} {case.argv!r}: {failure}")
    assert not failures, "\n".join(failures[:10])


@pytest.mark.parametrize("generator", generators.GENERATORS, ids=lambda g: g.__name__)
def test_generated_cases_sample(generator, tmp_path):
    _run(generator, range(12), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("generator", generators.GENERATORS, ids=lambda g: g.__name__)
def test_generated_cases_more(generator, tmp_path):
    _run(generator, range(1000, 1300), tmp_path)


def test_the_oracle_sees_what_issue_30_found():
    """The output contract catches a forged line, a raw ESC, a foreign GitHub command, HTML in
    Markdown, and a --write-assumptions that changed more than its table."""
    case = generators.Case("tree", [], ["check", "x"], "text")
    assert "forged" in generators._output_contract(case, "a\nFORGED::error", "")
    assert "control" in generators._output_contract(case, "a\x1b[31m", "")
    github = generators.Case("tree", [], ["check", "x"], "github")
    assert generators._output_contract(github, "::error file=x,title=ML1 a::m\n", "") is None
    assert "did not write" in generators._output_contract(
        github, "::error file=x,title=ML1 a::m\n::error file=y::forged\n", "")
    markdown = generators.Case("tree", [], ["check", "x"], "markdown")
    assert generators._output_contract(markdown, "| `<img src=x>` |", "") is None
    assert "<img" in generators._output_contract(markdown, "| <img src=x> |", "")


def test_the_pyproject_oracle_allows_the_tables_a_first_write_adds(tmp_path, monkeypatch):
    """A write into a pyproject.toml without [tool.memlint] adds [tool.memlint.assumptions] and
    so the tables above it (fuzz seed 5019091); anything else changed is still caught."""
    monkeypatch.chdir(tmp_path)
    before = b'[project]\nname = "demo"\n'
    case = generators.Case("log", [], ["compare", "--write-assumptions"], "json", "compare",
                           before)
    (tmp_path / "pyproject.toml").write_bytes(
        before + b'\n[tool.memlint.assumptions]\n"runtime.cuda_context_bytes" = 0\n')
    assert generators._pyproject_after(case, 0) is None
    (tmp_path / "pyproject.toml").write_bytes(b'[project]\nname = "x"\n')
    assert "changed more" in generators._pyproject_after(case, 0)
