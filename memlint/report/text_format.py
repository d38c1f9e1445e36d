"""`--format text`: greppable diagnostics, then per estimate a stage table and stacked bars.

Diagnostics print as `path:line:col: CODE name message`, one per line. Each estimate gets a table
(one row per pipeline stage, components in the chosen units) and one horizontal stacked bar per
stage (weights / gradients / optimizer / activations / other) against the GPU capacity line `|`.
`--explain` adds the derivation term by term. Output is plain text; on a terminal (and without
NO_COLOR) `write` colours it with rich, imported only then.
"""
from __future__ import annotations

from memlint import lazy_import
from memlint.escape import one_line
from memlint.report import THREE_NUMBERS, location
from memlint.units import UNITS, fmt

# start-up: the phase and host lines load when an estimate is printed (most checks have none)
host_lines = lazy_import.module("memlint.report.host_lines")
phases = lazy_import.module("memlint.report.phases")

BAR_WIDTH = 50
GROUPS = (("weights", "#", "bold blue"), ("gradients", "=", "magenta"),
          ("optimizer", "%", "yellow"), ("activations", "+", "green"), ("other", ".", "dim"))
_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def diagnostic_line(d, report) -> str:
    return f"{location(d, report)}: {d.code} {d.severity.label} {d.rule} {d.message}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 or noun == 'info' else 's'}"


def _summary(diagnostics) -> str:
    """Problems are the errors and warnings; infos are counted apart."""
    counts = {}
    for d in diagnostics:
        counts[d.severity.label] = counts.get(d.severity.label, 0) + 1
    problems = counts.get("error", 0) + counts.get("warning", 0)
    parts = [_plural(counts[k], k) for k in ("error", "warning") if counts.get(k)]
    infos = f" and {_plural(counts['info'], 'info')}" if counts.get("info") else ""
    if not problems:
        return f"No problems found{' (' + _plural(counts['info'], 'info') + ')' if infos else ''}."
    return f"Found {_plural(problems, 'problem')} ({', '.join(parts)}){infos}."


def grouped(stage) -> dict:
    parts = stage.components()
    out = {name: int(parts.get(name, 0)) for name, _, _ in GROUPS[:4]}
    out["other"] = stage.total_bytes - sum(out.values())
    return out


def _number(nbytes: int, units: str) -> str:
    return f"{nbytes / UNITS[units]:.2f}"


def bar(stage, scale: int, capacity: int, width: int = BAR_WIDTH) -> list:
    """[(text, style)] segments: the stacked bar with the capacity marker inserted."""
    cells = []
    cumulative = 0
    drawn = 0
    groups = grouped(stage)
    for name, char, style in GROUPS:
        cumulative += max(0, groups[name])
        end = round(cumulative / scale * width) if scale else 0
        cells.extend([(char, style)] * max(0, end - drawn))
        drawn = max(drawn, end)
    cells.extend([(" ", "")] * (width - len(cells)))
    mark = min(width, round(capacity / scale * width)) if scale else width
    cells.insert(mark, ("|", "bold red"))
    segments = []
    for char, style in cells:
        if segments and segments[-1][1] == style:
            segments[-1] = (segments[-1][0] + char, style)
        else:
            segments.append((char, style))
    return segments


def model_origin(estimate, report) -> str:
    """' (model NAME, from WHERE)': which model the estimate is for and what named it."""
    scenario = getattr(estimate, "scenario", None)
    model = getattr(scenario, "model", None)
    if model is None or not model.name:
        return ""
    where = scenario.where("model")
    origin = ""
    if where is not None:
        origin = (f", from {report.path(where.file)}" if where.file
                  else f", from {where.key or 'the command line'}")
    return f" (model {model.name}{origin})"


def estimate_lines(estimate, report) -> list:
    """Lines, each a list of (text, style) segments."""
    units = report.units
    capacity = estimate.capacity_bytes
    lines = []
    sources = ", ".join(report.path(s) or s for s in estimate.sources) or "<command line>"
    lines.append([(f"Estimate ({estimate.profile}) for {sources}: peak "
                   f"{fmt(estimate.peak_bytes, units, 2)} per GPU on {estimate.gpu_name} "
                   f"({fmt(capacity, units, 2)})", "bold")])
    params = estimate.params
    if params.get("total"):
        extra = "".join(f", {k} {params[k] / 1e9:.2f}B" for k in ("experts", "vision")
                        if params.get(k))
        lines.append([(f"params: total {params['total'] / 1e9:.2f}B, trainable "
                       f"{(params.get('trainable') or 0) / 1e9:.2f}B{extra}"
                       f"{model_origin(estimate, report)}", "")])
    header = (f"{'stage':>5} {'layers':>6} {'phase':<18} {'weights':>9} {'gradients':>9} "
              f"{'optimizer':>9} {'activations':>11} {'other':>9} {'total':>9} {'of GPU':>7}")
    lines.append([(f"{header}   ({units})", "bold")])
    stages = sorted(estimate.stages, key=lambda s: s.stage)
    for stage in stages:
        g = grouped(stage)
        share = stage.total_bytes / capacity if capacity else 0.0
        style = "bold red" if stage.total_bytes > capacity else ""
        lines.append([(f"{stage.stage:>5} {stage.layers:>6} {stage.phase:<18} "
                       f"{_number(g['weights'], units):>9} {_number(g['gradients'], units):>9} "
                       f"{_number(g['optimizer'], units):>9} "
                       f"{_number(g['activations'], units):>11} {_number(g['other'], units):>9} "
                       f"{_number(stage.total_bytes, units):>9} ", ""),
                      (f"{share:>7.0%}", style)])
    scale = max([capacity] + [s.total_bytes for s in stages])
    for stage in stages:
        label = f"stage {stage.stage:<3} "
        lines.append([(label, "")] + bar(stage, scale, capacity)
                     + [(f" {fmt(stage.total_bytes, units, 2)}", "")])
    legend = "  ".join(f"{char} {name}" for name, char, _ in GROUPS)
    lines.append([(f"{'':10}{legend}  | capacity {fmt(capacity, units, 2)}", "dim")])
    if phases.shows_phases(estimate):
        lines.extend(phases.text_lines(estimate, units))
    lines.extend([[(line, "dim")] for line in three_numbers_lines(stages, units)])
    lines += [[(line, "")] for line in host_lines.summary_lines(estimate, units)]
    for note in getattr(estimate, "notes", ()) or ():
        lines.append([(f"note: {note}", "dim")])
    lines.extend(assumed_lines(estimate))
    return lines


def three_numbers_lines(stages, units: str) -> list:
    """Per stage: allocated / reserved / device, and which log each one matches."""
    if not stages or not hasattr(stages[0], "allocated_bytes"):
        return []
    out = [f"{'':10}allocated / reserved / device ({units}): "
           + ", ".join(f"stage {s.stage} {_number(s.allocated_bytes, units)} / "
                       f"{_number(s.reserved_bytes, units)} / {_number(s.device_bytes, units)}"
                       for s in stages)]
    out.extend(f"{'':10}{line}" for line in THREE_NUMBERS)
    return out


def assumed_lines(estimate) -> list:
    """The verdict inputs no file gave, each with its source (memory/inputs.py): one line, or
    none when every one came from a file."""
    assumed = getattr(estimate, "assumed", ()) or ()
    if not assumed:
        return []
    parts = [f"{a['key']} = {'unknown' if a['value'] is None else a['value']} ({a['source']})"
             for a in assumed]
    return [[("not from a file: " + "; ".join(parts), "")]]


def _inputs(term) -> str:
    if not term.inputs:
        return "-"
    return ", ".join(f"{key} = {value}" for key, value in term.inputs.items())


def _order_caveat(estimate) -> str:
    """The reserved line's caveat when the run's idle cached blocks are not modeled
    (memory/allocator.py allocator_assumed)."""
    for entry in getattr(estimate, "assumed", ()) or ():
        if entry.get("key") == "runtime.allocator":
            return f"; runtime.allocator {entry['value']}: {entry['source']}"
    return ""


def explain_lines(estimate, report) -> list:
    """The derivation: every term's formula, substituted inputs and result; sums to the total."""
    units = report.units
    lines = []
    stages = sorted(estimate.stages, key=lambda s: s.stage)
    if report.stage is not None:
        stages = [s for s in stages if s.stage == report.stage]
    for stage in stages:
        lines.append(f"Stage {stage.stage} ({stage.layers} layers), peak in phase "
                     f"{stage.phase!r}:")
        for term in stage.terms:
            lines.append(f"  {term.name} [{term.component}]")
            lines.append(f"      formula: {term.formula}")
            lines.append(f"      inputs:  {_inputs(term)}")
            if term.source:
                lines.append(f"      source:  {term.source}")
            lines.append(f"      = {term.bytes:,} B ({fmt(term.bytes, units, 3)})")
        total = sum(t.bytes for t in stage.terms)
        lines.append(f"  total = sum of {len(stage.terms)} terms = {total:,} B "
                     f"({fmt(total, units, 3)})")
        if hasattr(stage, "allocated_bytes"):
            lines.append(f"  allocated = every term but runtime = {stage.allocated_bytes:,} B "
                         f"({fmt(stage.allocated_bytes, units, 3)}): compare with Megatron's "
                         "max allocated / torch.cuda.max_memory_allocated")
            lines.append(f"  reserved = allocated + runtime.allocator* (cached, idle) = "
                         f"{stage.reserved_bytes:,} B ({fmt(stage.reserved_bytes, units, 3)}): "
                         "compare with torchtitan's max reserved" + _order_caveat(estimate))
            lines.append(f"  device = reserved + CUDA context + NCCL = {stage.device_bytes:,} B "
                         f"({fmt(stage.device_bytes, units, 3)}): nvidia-smi; the OOM verdict "
                         "uses this one")
        for phase in getattr(stage, "phases", ()) or ():
            lines.append(f"  phase {phase.name}: {phase.total:,} B ({fmt(phase.total, units, 3)})")
        for term in getattr(stage, "host_terms", ()) or ():
            lines.append(f"  host (not GPU): {term.name} = {term.bytes:,} B "
                         f"({fmt(term.bytes, units, 3)}) = {term.formula}")
        lines.append("")
    if phases.shows_phases(estimate):
        lines += phases.explain_lines(estimate, units)
    if report.stage is None:
        lines += host_lines.explain_lines(estimate, units)
    return [[(line, "")] for line in lines]


def report_lines(report) -> list:
    lines = [[(diagnostic_line(d, report), _SEVERITY_STYLE.get(d.severity.label, ""))]
             for d in report.diagnostics]
    if not report.quiet:
        if report.show_estimates:
            for estimate in report.estimates:
                if lines:
                    lines.append([("", "")])
                lines.extend(estimate_lines(estimate, report))
                if report.explain:
                    lines.append([("", "")])
                    lines.extend(explain_lines(estimate, report))
        if lines:
            lines.append([("", "")])
        lines.append([(_summary(report.diagnostics), "bold")])
    if report.summary is not None and not report.quiet:
        lines.append([(report.summary.line(), "bold" if report.summary.without else "")])
    return lines


def render(report) -> str:
    return "".join("".join(one_line(text) for text, _ in line).rstrip() + "\n"
                   for line in report_lines(report))


def write(report, stream) -> None:
    """Print the report, coloured with rich when `report.color`."""
    if not report.color:
        stream.write(render(report))
        return
    # start-up: rich loads only when a table is printed
    from rich.console import Console
    from rich.text import Text

    console = Console(file=stream, force_terminal=True, highlight=False, soft_wrap=True)
    for line in report_lines(report):
        console.print(Text.assemble(*[(one_line(text), style) if style else one_line(text)
                                      for text, style in line]))
