"""Hand-built Scenarios and Estimates for rule, engine and reporter tests (no memory model)."""
from __future__ import annotations

from memlint.ir import Assumptions, Hardware, Parallelism, Provenance, Scenario, Training
from memlint.assumptions import profile_defaults
from memlint.memory.model import Model as MemoryModel
from memlint.memory.result import Estimate
from memlint.memory.terms import Phase, StageEstimate, Term

GiB = 1024**3


def scenario(training=None, parallelism=None, hardware=None, model=None, provenance=None,
             profile="precise", extra=None, sources=("run.memlint.toml",)):
    return Scenario(
        model=model,
        training=Training(**(training or {})),
        parallelism=Parallelism(**(parallelism or {})),
        hardware=Hardware(**(hardware or {})),
        assumptions=Assumptions(profile=profile, values=dict(profile_defaults(profile))),
        provenance=dict(provenance or {}),
        sources=tuple(sources),
        extra=dict(extra or {}),
    )


def at(line, key, path="run.memlint.toml", column=1):
    return Provenance(path, line, column, key)


def stage(index=0, layers=8, phase="backward", **components):
    """A stage whose terms are one per component (`weights=10*GiB`, ...) plus named extras.

    A keyword `terms` may give extra Term objects.
    """
    extra_terms = components.pop("terms", ())
    terms = [Term(f"{name}.total", name, int(value), f"{name} formula", {"x": 1})
             for name, value in components.items() if value]
    terms.extend(extra_terms)
    return StageEstimate(stage=index, layers=layers, phase=phase, terms=tuple(terms),
                         phases=(Phase(phase, tuple(terms)),))


def estimate(*stages, capacity=80 * GiB, gpu="H100-80GB", params=None, profile="precise",
             sources=("run.memlint.toml",)):
    return Estimate(profile=profile, sources=tuple(sources),
                    params=dict(params or {"total": 8_000_000_000, "trainable": 8_000_000_000}),
                    gpu_name=gpu, capacity_bytes=capacity, stages=tuple(stages))


def run_rule(rule, scen, est, **options):
    from memlint.rules import configure
    from memlint.rules.base import Context

    return list(rule.check(Context(scenario=scen, estimate=est,
                                   options=configure(rule, options))))


def check_json(folder, rel, *extra):
    """`memlint check REL --format json EXTRA...` run from FOLDER (a project root in the
    real-world corpus): (exit code, the JSON report)."""
    import contextlib
    import io
    import json
    import os

    from memlint.cli import main

    cwd = os.getcwd()
    os.chdir(folder)
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["check", rel, "--format", "json", *extra])
    finally:
        os.chdir(cwd)
    return code, json.loads(out.getvalue())


def padded_vocab(scenario) -> int:
    """The vocabulary the memory model builds for a scenario (padded with its tp where the
    framework pads: memlint/facts/vocab.py)."""
    return MemoryModel(scenario).arch.vocab
