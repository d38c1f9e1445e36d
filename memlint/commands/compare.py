"""`memlint compare LOG [CONFIG...]`: a training log's memory against the estimate of that run.

    memlint compare train.log train.sh
    memlint compare titan.log llama3_8b.toml --world-size 4 --set cp=2 --write-assumptions

The log's memory lines (memlint/logs.py: Megatron, torchtitan, DeepSpeed, HF Trainer, PyTorch
out-of-memory messages) are matched to ranks, each rank to its pipeline stage (every framework
read here orders ranks with the pipeline outermost: stage = rank // (world / pp)), and compared
metric by metric with the estimate of the same stage:
- `max_allocated` (Megatron's max allocated, DeepSpeed's Max_MA, the HF Trainer's train peak)
  with the stage's `allocated_bytes` (live tensors at its peak, no runtime terms);
- `max_reserved` (Megatron's max reserved, Max_CA, torchtitan's `memory:`) with `reserved_bytes`
  (plus the caching allocator's reserve, the term runtime.allocator);
- `device` (what an out-of-memory message says the process holds) with `device_bytes` (plus the
  CUDA context and NCCL buffers);
- `allocated` between steps (after the optimizer step) with the persistent model states
  (weights, gradients where they persist, optimizer states).
The differences are then split term by term where the two sides can be attributed: model states,
the step's transients (activations, logits, buffers), the allocator's reserve, and memory outside
the allocator. `fit_assumptions` turns the measured allocator reserve and the memory outside the
allocator into values of the runtime assumptions (memlint/assumptions.py), which
`write_assumptions` records in `[tool.memlint.assumptions]` of a pyproject.toml.

Anything that makes a comparison impossible (no memory lines, ranks outside the run, no estimate)
raises CompareError with a message that names what is missing.
"""
from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Optional

from memlint.logs import LogReport, read
from memlint.memory.context import context_of
from memlint.memory.terms import is_reserved_term
from memlint.units import fmt

MiB = 1024**2

#: What each measured metric is compared with, in words.
METRICS = {
    "max_allocated": "peak allocated (live tensors)",
    "max_active": "peak active (live tensors)",
    "max_reserved": "peak reserved (allocator)",
    "device": "process memory on the GPU",
    "allocated": "allocated between steps (model states)",
}
_PERSISTENT = ("weights", "gradients", "optimizer")


class CompareError(ValueError):
    """The log and the run cannot be compared: the message says what is missing."""


@dataclass
class Row:
    metric: str
    measured: int
    estimated: int
    line: int
    label: str

    @property
    def difference(self) -> int:
        return self.measured - self.estimated

    @property
    def relative(self) -> Optional[float]:
        return self.difference / self.estimated if self.estimated else None

    def to_dict(self) -> dict:
        return {"metric": self.metric, "measured_bytes": self.measured,
                "estimated_bytes": self.estimated, "difference_bytes": self.difference,
                "relative": None if self.relative is None else round(self.relative, 6),
                "line": self.line, "label": self.label}


@dataclass
class Part:
    """One attributable slice of the difference: measured vs the estimate's terms for it."""

    name: str
    measured: int
    estimated: int
    terms: list                   # [(term name, bytes)] of the estimate's side

    def to_dict(self) -> dict:
        return {"part": self.name, "measured_bytes": self.measured,
                "estimated_bytes": self.estimated,
                "difference_bytes": self.measured - self.estimated,
                "terms": [{"name": n, "bytes": b} for n, b in self.terms]}


@dataclass
class RankComparison:
    rank: int
    stage: int
    style: str
    rows: list
    parts: list
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"rank": self.rank, "stage": self.stage, "style": self.style,
                "metrics": [r.to_dict() for r in self.rows],
                "attribution": [p.to_dict() for p in self.parts], "notes": list(self.notes)}


@dataclass
class Comparison:
    log: str
    ranks: list
    fitted: dict                  # assumption -> (value, evidence)
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"log": self.log, "ranks": [r.to_dict() for r in self.ranks],
                "fitted_assumptions": {k: {"value": v, "evidence": e}
                                       for k, (v, e) in self.fitted.items()},
                "notes": list(self.notes)}


def read_log(path: str) -> LogReport:
    """The log's memory readings; a log without any is a CompareError."""
    try:
        report = read(path)
    except OSError as exc:
        raise CompareError(f"{path}: cannot read: {exc.strerror}") from None
    if not report.readings:
        raise CompareError(_no_lines(report))
    return report


def _no_lines(report: LogReport) -> str:
    return (f"{report.path}: no memory lines found in {report.lines:,} lines (looked for "
            "Megatron `memory (MB) | allocated: ... | max allocated: ...`, torchtitan `memory: "
            "X GiB(Y%)`, DeepSpeed `MA ... Max_MA ... CA ... Max_CA`, HF Trainer "
            "`train_mem_gpu_peaked_delta`, PyTorch `CUDA out of memory`)")


def estimate_run(scenario):
    """The estimate of the run, or a CompareError saying why there is none."""
    # start-up: the memory model loads only when a run is estimated
    from memlint.memory.estimate import EstimateError, estimate
    from memlint.memory.params import ConfigError

    if scenario.model is None:
        raise CompareError("the run has no model (give --model PATH|PRESET or config files)")
    try:
        return estimate(scenario)
    except (EstimateError, ConfigError) as exc:
        raise CompareError(f"the run cannot be estimated: {exc}") from None


# ---------------------------------------------------------------------------------------------
# The estimate's side


def estimate_sides(stage) -> dict:
    """The stage's numbers each measured metric is compared with, and their terms."""
    tensors = [t for t in stage.terms if t.component != "runtime"]
    allocator = [t for t in stage.terms if is_reserved_term(t.name)]
    outside = [t for t in stage.terms if t.component == "runtime" and t not in allocator]
    phases = {p.name: p for p in stage.phases}
    between = phases.get("forward_end") or next(iter(phases.values()), None)
    between_terms = between.terms if between is not None else stage.terms
    persistent = [t for t in between_terms if t.component in _PERSISTENT]
    return {"allocated_bytes": stage.allocated_bytes, "reserved_bytes": stage.reserved_bytes,
            "device_bytes": stage.device_bytes,
            "persistent_bytes": sum(t.bytes for t in persistent),
            "tensor_terms": tensors, "allocator_terms": allocator, "outside_terms": outside,
            "persistent_terms": persistent}


_SIDE = {"max_allocated": "allocated_bytes", "max_active": "allocated_bytes",
         "max_reserved": "reserved_bytes", "device": "device_bytes",
         "allocated": "persistent_bytes"}


# ---------------------------------------------------------------------------------------------
# Matching


def stage_of_rank(rank: int, world: int, pp: int) -> int:
    """Megatron (order tp-cp-ep-dp-pp), torchtitan (mesh pp, dp, cp, tp) and DeepSpeed's pipeline
    topology (pipe, data, model) all put the pipeline outermost."""
    return rank // max(1, world // max(1, pp))


def _measured(readings: list) -> tuple:
    """{metric: (bytes, reading)}: the largest of each peak metric over the rank's readings (a
    running peak, or a peak reset per log interval), the last of a current value."""
    out: dict = {}
    for reading in readings:
        for metric, value in reading.metrics.items():
            if metric == "capacity":
                continue
            if metric in ("allocated", "reserved"):
                if reading.style == "oom" and metric == "allocated":
                    continue  # at an OOM the live tensors are mid-step, not the model states
                out[metric] = (value, reading)
            elif metric not in out or value > out[metric][0]:
                out[metric] = (value, reading)
    return out


def compare(scenario, estimate, report: LogReport) -> Comparison:
    if not report.readings:
        raise CompareError(_no_lines(report))
    if estimate is None or not estimate.stages:
        raise CompareError("no estimate of the run to compare with (give the run's config "
                           "files, --model and --set)")
    topo = context_of(scenario, estimate).topology   # the estimate's, resolved once
    world = topo.world
    pp = scenario.parallelism.pp
    notes = []
    by_rank: dict = {}
    for reading in report.readings:
        rank = reading.rank
        if rank is None:
            rank = 0
            if reading.style != "hf":
                note = f"{reading.style} lines name no rank: read as rank 0"
                if note not in notes:
                    notes.append(note)
        by_rank.setdefault(rank, []).append(reading)
    if world is None:
        if pp > 1 or any(rank > 0 for rank in by_rank):
            raise CompareError(f"the log has lines of ranks {_ranks(by_rank)} but the run's "
                               "world size is not known (give --world-size N or world_size)")
        world = 1
    outside = [rank for rank in by_rank if rank >= world]
    if outside:
        raise CompareError(f"ranks {_ranks(outside)} of the log do not exist in the run "
                           f"(world size {world}: ranks 0-{world - 1}); give the run's world "
                           "size (--world-size) and layout (--set tp=... pp=...)")
    stages = {s.stage: s for s in estimate.stages}
    ranks = []
    for rank in sorted(by_rank):
        stage_index = stage_of_rank(rank, world, pp)
        stage = stages[stage_index]
        measured = _measured(by_rank[rank])
        if not measured:
            continue
        sides = estimate_sides(stage)
        rows = [Row(metric, value, sides[_SIDE[metric]], reading.line, reading.label)
                for metric, (value, reading) in sorted(
                    ((m, v) for m, v in measured.items() if m in _SIDE),
                    key=lambda kv: list(_SIDE).index(kv[0]))]
        styles = sorted({r.style for r in by_rank[rank]})
        comparison = RankComparison(rank, stage_index, "+".join(styles), rows,
                                    attribute(measured, sides))
        if any(reading.step == 1 for _v, reading in measured.values()):
            comparison.notes.append("read from the first step only: later steps can peak "
                                    "higher (optimizer states, allocator warm-up)")
        for reading in by_rank[rank]:
            for note in reading.notes:
                if note not in comparison.notes:
                    comparison.notes.append(note)
            capacity = reading.metrics.get("capacity")
            if capacity and abs(capacity - estimate.capacity_bytes) > 0.03 * capacity:
                note = (f"the log's GPU has {fmt(capacity)}, the run's {estimate.gpu_name} "
                        f"{fmt(estimate.capacity_bytes)} (set gpu_memory= to match)")
                if note not in comparison.notes:
                    comparison.notes.append(note)
        ranks.append(comparison)
    if not ranks:
        raise CompareError(f"{report.path}: memory lines found, but none with a byte count")
    return Comparison(report.path, ranks, fit_assumptions(ranks, stages), notes)


def _ranks(ranks) -> str:
    return ", ".join(str(r) for r in sorted(ranks))


def attribute(measured: dict, sides: dict) -> list:
    """The difference split into what each side can name: model states, the step's transients,
    the allocator's reserve, memory outside the allocator."""
    value = {metric: entry[0] for metric, entry in measured.items()}
    parts = []
    persistent = sides["persistent_terms"]
    transient = [t for t in sides["tensor_terms"] if t not in persistent]
    peak = value.get("max_allocated", value.get("max_active"))
    if "allocated" in value:
        parts.append(Part("model states (weights, gradients, optimizer)", value["allocated"],
                          sides["persistent_bytes"], _terms(persistent)))
        if peak is not None:
            parts.append(Part("step transients (activations, logits, buffers)",
                              peak - value["allocated"],
                              sides["allocated_bytes"] - sides["persistent_bytes"],
                              _terms(transient)))
    if peak is not None and "max_reserved" in value:
        parts.append(Part("allocator reserve (runtime.allocator)", value["max_reserved"] - peak,
                          sides["reserved_bytes"] - sides["allocated_bytes"],
                          _terms(sides["allocator_terms"])))
    if "device" in value and "reserved" in value:
        parts.append(Part("outside the allocator (CUDA context, NCCL)",
                          value["device"] - value["reserved"],
                          sides["device_bytes"] - sides["reserved_bytes"],
                          _terms(sides["outside_terms"])))
    return parts


def _terms(terms) -> list:
    merged: dict = {}
    for t in terms:
        merged[t.name] = merged.get(t.name, 0) + t.bytes
    return sorted(merged.items(), key=lambda kv: -kv[1])


# ---------------------------------------------------------------------------------------------
# Fitted runtime assumptions


def fit_assumptions(ranks: list, stages: dict) -> dict:
    """Runtime assumptions the log measures: the allocator's reserve as a fraction of the peak
    of live tensors (the largest over the ranks), and the CUDA context (with workspaces) as what
    an out-of-memory message shows outside the allocator, less the estimate's NCCL buffers."""
    fitted: dict = {}
    fractions = []
    for rc in ranks:
        values = {r.metric: r for r in rc.rows}
        peak = values.get("max_allocated")
        reserved = values.get("max_reserved")
        if peak is not None and reserved is not None and peak.measured > 0:
            # what the modeled reserve (memory/allocator.py) leaves unexplained
            stage = stages.get(rc.stage)
            modeled = sum(t.bytes for t in stage.terms if t.name.startswith("runtime.allocator.")
                          ) if stage is not None else 0
            fractions.append(((reserved.measured - peak.measured - modeled) / peak.measured,
                              rc.rank, reserved.line))
    if fractions:
        fraction, rank, line = max(fractions)
        fitted["runtime.allocator_fraction"] = (
            round(max(0.0, fraction), 4),
            f"(max reserved - max allocated - modeled reserve) / max allocated on rank {rank} "
            f"(log line {line})")
    for rc in ranks:
        values = {r.metric: r for r in rc.rows}
        parts = {p.name: p for p in rc.parts}
        out = next((p for name, p in parts.items() if name.startswith("outside")), None)
        if out is None:
            continue
        nccl = sum(b for n, b in out.terms if n == "runtime.nccl")
        context = max(0, out.measured - nccl)
        context = int(round(context / MiB)) * MiB
        fitted["runtime.cuda_context_bytes"] = (
            context, f"device {fmt(values['device'].measured)} - reserved - NCCL "
                     f"{fmt(nccl)} on rank {rc.rank} (log line {values['device'].line})")
        break
    return fitted


_TABLE = "[tool.memlint.assumptions]"
_HEADER = re.compile(r"^\s*\[\s*tool\s*\.\s*memlint\s*\.\s*assumptions\s*\]\s*(#.*)?$")
_ANY_HEADER = re.compile(r"^\s*\[")


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def write_assumptions(path: str, fitted: dict, source: str) -> list:
    """Record `fitted` in `[tool.memlint.assumptions]` of the TOML file at `path` (created when
    absent), replacing the keys it already sets and keeping every other line. Returns the lines
    written."""
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    lines = text.splitlines()
    written = [f'"{name}" = {_toml_value(value)}  # fitted by memlint compare {source}'
               for name, (value, _evidence) in sorted(fitted.items())]
    start = next((i for i, line in enumerate(lines) if _HEADER.match(line)), None)
    if start is None:
        if lines and lines[-1].strip():
            lines.append("")
        lines.append(_TABLE)
        lines.extend(written)
    else:
        end = start + 1
        while end < len(lines) and not _ANY_HEADER.match(lines[end]):
            end += 1
        keep = [line for line in lines[start + 1:end]
                if not any(re.match(rf'^\s*"?{re.escape(name)}"?\s*=', line) for name in fitted)]
        while keep and not keep[-1].strip():
            keep.pop()
        lines[start + 1:end] = keep + written + ([""] if end < len(lines) else [])
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return written


# ---------------------------------------------------------------------------------------------
# Output


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value * 100:+.1f}%"


def render_text(comparison: Comparison, units: str = "GiB", stream=None) -> None:
    out = stream or sys.stdout
    out.write(f"Compare {comparison.log} with the estimate ({units}; difference = measured - "
              "estimated)\n")
    for note in comparison.notes:
        out.write(f"note: {note}\n")
    for rc in comparison.ranks:
        out.write(f"\nrank {rc.rank} (stage {rc.stage}, {rc.style})\n")
        out.write(f"  {'metric':<40} {'measured':>11} {'estimated':>11} {'difference':>11} "
                  f"{'':>7}  log\n")
        for row in rc.rows:
            out.write(f"  {METRICS[row.metric]:<40} {fmt(row.measured, units):>11} "
                      f"{fmt(row.estimated, units):>11} {fmt(row.difference, units):>11} "
                      f"{_pct(row.relative):>7}  line {row.line} ({row.label})\n")
        if rc.parts:
            out.write("  term by term:\n")
            for part in rc.parts:
                terms = ", ".join(f"{n} {fmt(b, units)}" for n, b in part.terms[:4]) or "none"
                out.write(f"    {part.name}: measured {fmt(part.measured, units)}, estimated "
                          f"{fmt(part.estimated, units)} ({terms}); difference "
                          f"{fmt(part.measured - part.estimated, units)}\n")
        for note in rc.notes:
            out.write(f"  note: {note}\n")
    if comparison.fitted:
        out.write("\nfitted runtime assumptions (--write-assumptions records them):\n")
        for name, (value, evidence) in sorted(comparison.fitted.items()):
            shown = fmt(value, units) if name.endswith("_bytes") else value
            out.write(f"  {name} = {shown}  from {evidence}\n")


def render_json(comparison: Comparison) -> str:
    return json.dumps(comparison.to_dict(), indent=2, sort_keys=True) + "\n"
