"""A user's script calling memlint's public API: `mypy --strict --disallow-any-expr` must find no
error and no expression of type Any in it (tests/test_typing.py)."""
from __future__ import annotations

import memlint
from memlint.diagnostics import Diagnostic, Severity


def lint(paths: list[str]) -> int:
    result = memlint.check(paths, model="llama3-8b", world_size=64, gpu="H100-80GB")
    worst: Severity | None = None
    for d in result.diagnostics:
        where: str = f"{d.path}:{d.line}:{d.column}"
        print(where, d.code, d.rule, str(d.severity), d.message)
        worst = d.severity if worst is None or d.severity > worst else worst
    first: Diagnostic | None = result.diagnostics[0] if result.diagnostics else None
    print(first.message if first is not None else "clean", worst)
    return result.exit_code


def memory() -> int:
    est = memlint.estimate(model="llama3-8b", world_size=8, tp=2, zero=1, seq_len=8192)
    stage = est.stages[0]
    biggest = stage.terms[0]
    for term in stage.terms:
        biggest = term if term.bytes > biggest.bytes else biggest
    print(est.fits, est.peak_bytes, stage.stage, stage.phase, stage.total_bytes,
          biggest.name, biggest.component, biggest.formula, biggest.source)
    return est.peak_bytes


def layouts() -> None:
    result = memlint.plan(model="llama3-8b", gpus=64, gpu="H100-80GB", top=3)
    for plan in result.plans:
        settings: dict[str, object] = plan.settings
        print(plan.rank, settings, plan.estimate.peak_bytes, plan.cost.relative_step_time)
    print(result.reason)


def what_fits() -> None:
    result = memlint.fit(model="llama3-8b", world_size=8, gpu="H100-80GB", tp=2, zero=1)
    for answer in result.answers:
        value: int | None = answer.value
        print(answer.question, value, answer.notes)
    micro = result.answer("micro_batch")
    print(micro.value if micro is not None else None)


def against_a_log(log: str, run: str) -> None:
    seen = memlint.compare(log, [run])
    for rank in seen.ranks:
        for row in rank.rows:
            print(rank.rank, rank.stage, row.metric, row.measured, row.estimated, row.relative)
    for name, (value, evidence) in seen.fitted.items():
        print(name, value, evidence)


try:
    lint(["ds_config.json"])
except memlint.MemlintError as exc:
    print(f"memlint could not run: {exc}")
