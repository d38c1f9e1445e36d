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
import sys
from dataclasses import dataclass, field
from typing import Optional

from memlint import comparison_rl as compare_rl
from memlint.escape import one_line
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
    **compare_rl.METRICS,
}
_PERSISTENT = ("weights", "gradients", "optimizer")


class CompareError(ValueError):
    """The log and the run cannot be compared: the message says what is missing."""


@dataclass
class Row:
    metric: str
    measured: int
    estimated: int
    line: Optional[int]           # None: in a part of a long log whose lines were not counted
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
    terms: list[tuple[str, int]]  # (term name, bytes) of the estimate's side

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
    rows: list[Row]
    parts: list[Part]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"rank": self.rank, "stage": self.stage, "style": self.style,
                "metrics": [r.to_dict() for r in self.rows],
                "attribution": [p.to_dict() for p in self.parts], "notes": list(self.notes)}


@dataclass
class Comparison:
    log: str
    ranks: list[RankComparison]
    fitted: dict[str, tuple[object, str]]   # assumption -> (value, evidence)
    notes: list[str] = field(default_factory=list)

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
    if report.skipped:
        line, why = report.skipped[0]
        return (f"{report.path}: {report.skipped_count:,} memory line(s), none readable (line "
                f"{line if line is not None else '?'}: {why})")
    return (f"{report.path}: no memory lines found in {report.lines:,} lines (looked for "
            "Megatron `memory (MB) | allocated: ... | max allocated: ...`, torchtitan `memory: "
            "X GiB(Y%)`, DeepSpeed `MA ... Max_MA ... CA ... Max_CA`, HF Trainer "
            "`train_mem_gpu_peaked_delta`, PyTorch `CUDA out of memory`, verl "
            "`perf/max_memory_allocated_gb`, vLLM `Model loading took` / `Available KV cache "
            "memory`)")


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
         "allocated": "persistent_bytes", **compare_rl.SIDE}


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


MAX_RANKS_SHOWN = 64       # more ranks than this: each stage is shown by one rank
MAX_RANKS_NAMED = 10       # ranks named one by one in a message; the rest are counted


def _by_rank(report: LogReport, notes: list) -> dict:
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
    return by_rank


def _log_notes(report: LogReport) -> list:
    notes = list(report.notes)
    for line, why in report.skipped:
        notes.append(f"line {line if line is not None else '?'} not read: {why}")
    if report.skipped_count > len(report.skipped):
        notes.append(f"{report.skipped_count - len(report.skipped):,} more memory lines not read")
    return notes


def _world(scenario, estimate, by_rank: dict) -> int:
    world = context_of(scenario, estimate).topology.world   # the estimate's, resolved once
    if world is None:
        if scenario.parallelism.pp > 1 or any(rank > 0 for rank in by_rank):
            raise CompareError(f"the log has lines of ranks {_ranks(by_rank)} but the run's "
                               "world size is not known (give --world-size N or world_size)")
        return 1
    outside = [rank for rank in by_rank if rank >= world]
    if outside:
        raise CompareError(f"ranks {_ranks(outside)} of the log do not exist in the run "
                           f"(world size {world}: ranks 0-{world - 1}); give the run's world "
                           "size (--world-size) and layout (--set tp=... pp=...)")
    return world


def _pipeline(scenario, stages: dict, world: int) -> int:
    """The pipeline stages ranks are placed on: the estimate's own (a vLLM engine's is one stage
    whatever pp the scenario sets), which must divide the world size."""
    pp = scenario.parallelism.pp if len(stages) == scenario.parallelism.pp else len(stages)
    if world % pp or sorted(stages) != list(range(pp)):
        raise CompareError(f"the run's world size {world} is not a multiple of its {pp} pipeline "
                           "stages: its ranks cannot be placed on stages (give the run's "
                           "--world-size and --set pp=...)")
    return pp


def _peak(measured: dict) -> int:
    for metric in ("max_allocated", "max_active", "max_reserved", "device", "allocated"):
        if metric in measured:
            return measured[metric][0]
    return 0


def _shown_ranks(by_rank: dict, world: int, pp: int, notes: list) -> dict:
    """{rank: measured} of the ranks to compare: all of them, or with more than MAX_RANKS_SHOWN
    the rank of each stage with the highest peak (the one nearest to running out)."""
    measured = {rank: _measured(readings) for rank, readings in by_rank.items()}
    measured = {rank: m for rank, m in measured.items() if m}
    if len(measured) <= MAX_RANKS_SHOWN:
        return measured
    stages: dict = {}
    for rank, values in measured.items():
        stages.setdefault(stage_of_rank(rank, world, pp), []).append(rank)
    shown = {}
    for stage, ranks in sorted(stages.items()):
        best = max(ranks, key=lambda r: (_peak(measured[r]), -r))
        peaks = [_peak(measured[r]) for r in ranks]
        shown[best] = measured[best]
        notes.append(f"stage {stage}: {len(ranks):,} ranks logged, shown by rank {best}, the "
                     f"highest peak (peaks {fmt(min(peaks))} to {fmt(max(peaks))})")
    notes.insert(0, f"{len(measured):,} ranks logged: each pipeline stage is shown by its rank "
                    "with the highest peak")
    return shown


def compare(scenario, estimate, report: LogReport) -> Comparison:
    if not report.readings:
        raise CompareError(_no_lines(report))
    if estimate is None or not estimate.stages:
        raise CompareError("no estimate of the run to compare with (give the run's config "
                           "files, --model and --set)")
    notes = _log_notes(report)
    by_rank = _by_rank(report, notes)
    world = _world(scenario, estimate, by_rank)
    stages = {s.stage: s for s in estimate.stages}
    pp = _pipeline(scenario, stages, world)
    sides_of: dict = {}
    ranks = []
    for rank, measured in sorted(_shown_ranks(by_rank, world, pp, notes).items()):
        stage_index = stage_of_rank(rank, world, pp)
        sides = sides_of.get(stage_index)
        if sides is None:
            sides = sides_of[stage_index] = estimate_sides(stages[stage_index])
            if getattr(estimate, "rl", None) is not None:
                sides = sides_of[stage_index] = compare_rl.sides(estimate, stages[stage_index],
                                                                 sides)
        rl_notes = []
        if getattr(estimate, "rl", None) is not None:
            rl_notes = compare_rl.rank_notes(measured, sides)
            measured = {m: v for m, v in measured.items() if m not in compare_rl.NOT_COMPARED}
        rows = [Row(metric, value, sides[_SIDE[metric]], reading.line, reading.label)
                for metric, (value, reading) in sorted(
                    ((m, v) for m, v in measured.items() if m in _SIDE and _SIDE[m] in sides),
                    key=lambda kv: list(_SIDE).index(kv[0]))]
        styles = sorted({r.style for r in by_rank[rank]})
        comparison = RankComparison(rank, stage_index, "+".join(styles), rows,
                                    attribute(measured, sides))
        comparison.notes.extend(rl_notes)
        _rank_notes(comparison, measured, by_rank[rank], estimate)
        ranks.append(comparison)
    if not ranks:
        raise CompareError(f"{report.path}: memory lines found, but none with a byte count")
    return Comparison(report.path, ranks, fit_assumptions(ranks, stages), notes)


def _rank_notes(comparison: RankComparison, measured: dict, readings: list, estimate) -> None:
    if any(reading.step == 1 for _v, reading in measured.values()):
        comparison.notes.append("read from the first step only: later steps can peak "
                                "higher (optimizer states, allocator warm-up)")
    for reading in readings:
        for note in reading.notes:
            if note not in comparison.notes:
                comparison.notes.append(note)
        capacity = reading.metrics.get("capacity")
        if capacity and abs(capacity - estimate.capacity_bytes) > 0.03 * capacity:
            note = (f"the log's GPU has {fmt(capacity)}, the run's {estimate.gpu_name} "
                    f"{fmt(estimate.capacity_bytes)} (set gpu_memory= to match)")
            if note not in comparison.notes:
                comparison.notes.append(note)


def _ranks(ranks) -> str:
    """'0, 16, 32' or, for many, '8-15, 24, ... (1,000,000 ranks)': at most MAX_RANKS_NAMED
    ranges named, so that the message stays one short line."""
    ordered = sorted(ranks)
    spans: list = []
    for rank in ordered:
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            if len(spans) == MAX_RANKS_NAMED:
                break
            spans.append([rank, rank])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
    if spans[-1][1] < ordered[-1]:
        text += f", ... ({len(ordered):,} ranks)"
    return text


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
        fraction, rank, line = max(fractions, key=lambda item: (item[0], item[1]))
        fitted["runtime.allocator_fraction"] = (
            round(max(0.0, fraction), 4),
            f"(max reserved - max allocated - modeled reserve) / max allocated on rank {rank} "
            f"(log line {_line(line)})")
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
                     f"{fmt(nccl)} on rank {rc.rank} (log line {_line(values['device'].line)})")
        break
    return fitted


ASSUMPTIONS_TABLE = ("tool", "memlint", "assumptions")
STATES_TOLERANCE = 0.20   # model states further apart than this are not a runtime assumption


def states_mismatch(comparison: Comparison, scenario) -> list:
    """Why not to fit runtime assumptions: per rank whose measured model states (allocated
    between steps) differ from the estimate's by more than STATES_TOLERANCE, one line naming the
    settings whose factor the ratio matches (the sharding degree, tp, pp), else the settings that
    decide the bytes per parameter."""
    out = []
    for rc in comparison.ranks:
        states = next((p for p in rc.parts if p.name.startswith("model states")), None)
        if states is None or states.estimated <= 0:
            continue
        ratio = states.measured / states.estimated
        if abs(ratio - 1) <= STATES_TOLERANCE:
            continue
        out.append(f"rank {rc.rank}: the model states measure {fmt(states.measured)}, the "
                   f"estimate has {fmt(states.estimated)} ({(ratio - 1) * 100:+.0f}%): "
                   + _likely_settings(ratio, scenario))
    return out


def _likely_settings(ratio: float, scenario) -> str:
    par = scenario.parallelism
    shard = par.dp if par.dp and (par.zero > 0 or par.fsdp != "none") else None
    factors = [("zero / fsdp / world_size (the estimate shards the states over dp "
                f"{shard})", shard), (f"tp (the estimate splits layers over tp {par.tp})",
                                      par.tp), (f"pp (the estimate has pp {par.pp})", par.pp)]
    for text, factor in factors:
        if factor and factor > 1 and (abs(ratio * factor - 1) <= 0.1
                                      or abs(ratio / factor - 1) <= 0.1):
            return f"{ratio:.2f}x is about {factor}x: check {text}"
    return ("check the settings that decide the bytes per parameter: precision, param_dtype, "
            "master_weights, optimizer and optimizer_state_dtype, and what is trained "
            "(train_base, lora_rank, trainable_layers)")


def write_assumptions(path: str, fitted: dict, source: str, root: str,
                      allow_outside_root: bool = False) -> dict:
    """Record `fitted` in `[tool.memlint.assumptions]` of the TOML file at `path` (created when
    absent), replacing the keys it already sets and keeping the rest of the document as it was
    (memlint/toml_edit.py), written atomically under a lock inside `root`
    (memlint/safe_write.py). Returns {assumption: value} as written."""
    # start-up: the TOML editor loads only when assumptions are written
    from memlint import safe_write, toml_edit

    values = {name: value for name, (value, _evidence) in sorted(fitted.items())}
    comment = f"fitted by memlint compare {source}"
    safe_write.edit(path, lambda old: toml_edit.set_values(old, ASSUMPTIONS_TABLE, values,
                                                          comment, where=path),
                    root, allow_outside_root, max_bytes=toml_edit.MAX_EDIT_BYTES)
    return values


# ---------------------------------------------------------------------------------------------
# Output


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value * 100:+.1f}%"


def _line(number: Optional[int]) -> str:
    return "?" if number is None else str(number)


def render_text(comparison: Comparison, units: str = "GiB", stream=None) -> None:
    """The comparison as text; every line is escaped (memlint/escape.py): the log's name and
    words (a DeepSpeed message) are the log's, not memlint's."""
    lines = [f"Compare {comparison.log} with the estimate ({units}; difference = measured - "
             "estimated)"]
    lines += [f"note: {note}" for note in comparison.notes]
    for rc in comparison.ranks:
        lines += ["", f"rank {rc.rank} (stage {rc.stage}, {rc.style})",
                  f"  {'metric':<40} {'measured':>11} {'estimated':>11} {'difference':>11} "
                  f"{'':>7}  log"]
        for row in rc.rows:
            lines.append(f"  {METRICS[row.metric]:<40} {fmt(row.measured, units):>11} "
                         f"{fmt(row.estimated, units):>11} {fmt(row.difference, units):>11} "
                         f"{_pct(row.relative):>7}  line {_line(row.line)} ({row.label})")
        if rc.parts:
            lines.append("  term by term:")
            for part in rc.parts:
                terms = ", ".join(f"{n} {fmt(b, units)}" for n, b in part.terms[:4]) or "none"
                lines.append(f"    {part.name}: measured {fmt(part.measured, units)}, estimated "
                             f"{fmt(part.estimated, units)} ({terms}); difference "
                             f"{fmt(part.measured - part.estimated, units)}")
        lines += [f"  note: {note}" for note in rc.notes]
    if comparison.fitted:
        lines += ["", "fitted runtime assumptions (--write-assumptions records them):"]
        for name, (value, evidence) in sorted(comparison.fitted.items()):
            shown = fmt(value, units) if name.endswith("_bytes") else value
            lines.append(f"  {name} = {shown}  from {evidence}")
    (stream or sys.stdout).write("".join(one_line(line) + "\n" for line in lines))


def render_json(comparison: Comparison) -> str:
    return json.dumps(comparison.to_dict(), indent=2, sort_keys=True) + "\n"
