"""`--format html`: one self-contained page (inline CSS and SVG, no script, no network).

For each estimate: a per-stage stacked bar of its peak against the GPU capacity (and the
low-memory-headroom margin), the memory of each stage over the phases of a step (forward end,
backward start, backward through a recomputed layer, optimizer step: the `Phase`s the Estimate
carries), and the term table with every formula, input and source. `check` adds its diagnostics;
`render_plan` draws the planner's ranked layouts. Everything shown is read from the Estimate;
nothing is computed here but the drawing.
"""
from __future__ import annotations

import html

from memlint import __version__
from memlint.memory.terms import COMPONENTS
from memlint.report import THREE_NUMBERS, Report, blocking_errors, phases
from memlint.units import UNITS, fmt

#: One colour per component (colour-blind-safe Okabe-Ito order, then greys).
COLORS = {"weights": "#0072B2", "gradients": "#CC79A7", "optimizer": "#E69F00",
          "activations": "#009E73", "logits": "#56B4E9", "buffers": "#D55E00",
          "vision": "#F0E442", "runtime": "#999999"}
CAPACITY_COLOR = "#C00000"
MARGIN = 0.10            # the low-memory-headroom rule's default margin, drawn as a dashed line
PHASE_NAMES = {"forward_end": "forward end", "forward_softmax": "softmax",
               "backward_start": "backward start", "backward_attention": "attention backward",
               "backward_recompute": "recompute", "optimizer": "optimizer step",
               "backward": "step"}

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222;
max-width:1100px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px}.meta{color:#555;margin:0 0 12px}
.verdict{display:inline-block;padding:2px 8px;border-radius:4px;font-weight:600}
.ok{background:#e3f4ea;color:#14532d}.warn{background:#fff4d6;color:#7a4b00}
.bad{background:#fde2e2;color:#8a1c1c}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border-bottom:1px solid #e5e5e5;padding:3px 8px;text-align:left;vertical-align:top}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;color:#333}
.legend span{display:inline-block;margin-right:14px;white-space:nowrap}
.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
details{margin:4px 0}summary{cursor:pointer;color:#124}
.diag{margin:2px 0}.sev-error{color:#8a1c1c}.sev-warning{color:#7a4b00}.sev-info{color:#124}
svg text{font:12px system-ui,sans-serif;fill:#333}
.phase-block{display:inline-block;margin:0 18px 8px 0;vertical-align:top}
table.rl-phases tr.over td{color:#b00020;font-weight:600}table.rl-phases tr.peak td{font-weight:600}
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, body: list) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(body)
            + f"\n<p class=\"meta\">memlint {_e(__version__)}</p>\n</body></html>\n")


def _legend(components) -> str:
    items = "".join(f'<span><i style="background:{COLORS[c]}"></i>{_e(c)}</span>'
                    for c in COMPONENTS if c in components)
    return f'<div class="legend">{items}</div>'


def _by_component(terms) -> dict:
    out = {name: 0 for name in COMPONENTS}
    for term in terms:
        out[term.component] += term.bytes
    return out


def _stack(terms):
    """(component, start, bytes) of each non-empty component, stacked in vocabulary order."""
    start = 0
    for component, value in _by_component(terms).items():
        if value > 0:
            yield component, start, value
            start += value


# ---------------------------------------------------------------------------------------------
# Charts


def stage_bars(estimate, units: str, width: int = 860) -> str:
    """A horizontal stacked bar per stage (its peak, by component) against the capacity."""
    capacity = estimate.capacity_bytes
    scale = max([capacity] + [s.total_bytes for s in estimate.stages]) * 1.04
    left, bar_h, gap, top = 70, 26, 12, 22
    plot = width - left - 190
    height = top + len(estimate.stages) * (bar_h + gap) + 32   # + the headroom line's label

    def x(value: float) -> float:
        return left + plot * value / scale

    out = [f'<svg class="stages" width="{width}" height="{height}" role="img" '
           'aria-label="per-stage memory against the GPU capacity">']
    for index, stage in enumerate(sorted(estimate.stages, key=lambda s: s.stage)):
        y = top + index * (bar_h + gap)
        out.append(f'<text x="0" y="{y + bar_h * 0.7:.1f}">stage {stage.stage}</text>')
        cursor = stage.total_bytes
        for component, cursor0, value in _stack(stage.terms):
            cursor = cursor0 + value
            out.append(f'<rect class="seg seg-{component}" x="{x(cursor0):.1f}" y="{y}" '
                       f'width="{max(0.5, x(cursor) - x(cursor0)):.1f}" height="{bar_h}" '
                       f'fill="{COLORS[component]}"><title>stage {stage.stage} {component}: '
                       f'{_e(fmt(value, units))}</title></rect>')
        label_x = x(max(cursor, capacity)) + 8  # right of the bar and of the capacity line
        out.append(f'<text x="{label_x:.1f}" y="{y + bar_h * 0.7:.1f}">'
                   f'{_e(fmt(stage.total_bytes, units))} ({_e(stage.phase)})</text>')
    bottom = top + len(estimate.stages) * (bar_h + gap) - gap + 6
    out.append(f'<line class="capacity" x1="{x(capacity):.1f}" y1="{top - 8}" '
               f'x2="{x(capacity):.1f}" y2="{bottom}" stroke="{CAPACITY_COLOR}" '
               'stroke-width="2.5"/>')
    out.append(f'<text x="{x(capacity) - 4:.1f}" y="{top - 10}" text-anchor="end">capacity '
               f'{_e(fmt(capacity, units))}</text>')
    margin = capacity * (1 - MARGIN)
    headroom = (f"{MARGIN:.0%} headroom: {fmt(margin, units)} (low-memory-headroom warns "
                "past it)")
    out.append(f'<line class="margin" x1="{x(margin):.1f}" y1="{top - 4}" x2="{x(margin):.1f}" '
               f'y2="{bottom}" stroke="{CAPACITY_COLOR}" stroke-width="1" '
               f'stroke-dasharray="4 3"><title>{_e(headroom)}</title></line>')
    out.append(f'<text class="margin-label" x="{x(margin) - 4:.1f}" y="{bottom + 12}" '
               f'text-anchor="end">{_e(f"{MARGIN:.0%} headroom {fmt(margin, units)}")}</text>')
    out.append("</svg>")
    return "".join(out)


def phase_chart(stage, capacity: int, units: str, width: int = 440, height: int = 230) -> str:
    """Vertical stacked bars: what one stage holds in each phase of a step, and the capacity."""
    phases = list(stage.phases) or []
    if not phases:
        return ""
    scale = max([capacity] + [p.total for p in phases]) * 1.08
    left, top, bottom = 10, 16, 40
    plot_h = height - top - bottom
    slot = (width - left) / len(phases)
    bar_w = min(70, slot * 0.6)

    def y(value: float) -> float:
        return top + plot_h * (1 - value / scale)

    out = [f'<svg class="phases" width="{width}" height="{height}" role="img" '
           f'aria-label="stage {stage.stage} over the phases of a step">']
    for index, phase in enumerate(phases):
        cx = left + slot * index + slot / 2
        cursor = phase.total
        for component, start, value in _stack(phase.terms):
            out.append(f'<rect class="seg seg-{component}" x="{cx - bar_w / 2:.1f}" '
                       f'y="{y(start + value):.1f}" width="{bar_w:.1f}" '
                       f'height="{max(0.5, y(start) - y(start + value)):.1f}" '
                       f'fill="{COLORS[component]}"><title>{_e(phase.name)} {component}: '
                       f'{_e(fmt(value, units))}</title></rect>')
        peak = ' font-weight="700"' if phase.name == stage.phase else ""
        out.append(f'<text x="{cx:.1f}" y="{y(cursor) - 4:.1f}" text-anchor="middle"{peak}>'
                   f'{_e(fmt(phase.total, units))}</text>')
        out.append(f'<text x="{cx:.1f}" y="{height - bottom + 16}" text-anchor="middle"{peak}>'
                   f'{_e(PHASE_NAMES.get(phase.name, phase.name))}</text>')
    out.append(f'<line class="capacity" x1="{left}" y1="{y(capacity):.1f}" x2="{width}" '
               f'y2="{y(capacity):.1f}" stroke="{CAPACITY_COLOR}" stroke-width="2"/>')
    out.append(f'<text x="{width - 2}" y="{y(capacity) - 4:.1f}" text-anchor="end">capacity '
               f'{_e(fmt(capacity, units))}</text>')
    out.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{width}" y2="{top + plot_h}" '
               'stroke="#888"/>')
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Tables


def term_table(stage, units: str) -> str:
    rows = []
    for term in sorted(stage.terms, key=lambda t: (-t.bytes, t.name)):
        inputs = ", ".join(f"{k}={v}" for k, v in dict(term.inputs).items())
        rows.append(f'<tr><td><code>{_e(term.name)}</code></td>'
                    f'<td style="white-space:nowrap"><i style="display:inline-block;width:9px;'
                    f'height:9px;background:{COLORS[term.component]}"></i> '
                    f'{_e(term.component)}</td>'
                    f'<td class="num">{_e(fmt(term.bytes, units, 2))}</td>'
                    f'<td><code>{_e(term.formula)}</code>'
                    + (f'<br><small>{_e(inputs)}</small>' if inputs else "")
                    + f'</td><td><small>{_e(term.source)}</small></td></tr>')
    return ('<table class="terms"><thead><tr><th>term</th><th>component</th>'
            '<th class="num">bytes</th><th>formula (inputs)</th><th>source</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody><tfoot><tr><th colspan="2">total at the '
            f'{_e(stage.phase)} peak</th><th class="num">{_e(fmt(stage.total_bytes, units, 2))}'
            '</th><th colspan="2"></th></tr></tfoot></table>')


def _present(estimate) -> list:
    """The components any stage holds at its peak, in the vocabulary's order."""
    return [c for c in COMPONENTS if any(_by_component(s.terms)[c] for s in estimate.stages)]


# each stage's (and RL phase's) three numbers, as the JSON output gives them
THREE = ("allocated", "reserved", "device")


def _three(held, units: str) -> str:
    """allocated / reserved / device cells of a stage or phase (report THREE_NUMBERS)."""
    return "".join(f'<td class="num">{getattr(held, f"{n}_bytes") / UNITS[units]:.2f}</td>'
                   for n in THREE)


def _three_head() -> str:
    return "".join(f'<th class="num">{n}</th>' for n in THREE)


def stage_table(estimate, units: str) -> str:
    shown = _present(estimate)
    head = "".join(f'<th class="num">{_e(c)}</th>' for c in shown)
    rows = []
    for stage in sorted(estimate.stages, key=lambda s: s.stage):
        parts = _by_component(stage.terms)
        cells = "".join(f'<td class="num">{_e(f"{parts[c] / UNITS[units]:.2f}")}</td>'
                        for c in shown)
        rows.append(f'<tr><td>{stage.stage}</td><td class="num">{stage.layers}</td>'
                    f'<td>{_e(stage.phase)}</td>{cells}{_three(stage, units)}<td class="num"><b>'
                    f'{_e(f"{stage.total_bytes / UNITS[units]:.2f}")}</b></td>'
                    f'<td class="num">{stage.total_bytes / estimate.capacity_bytes:.0%}</td></tr>')
    return (f'<table class="stage-table"><thead><tr><th>stage</th><th class="num">layers</th>'
            f'<th>phase</th>{head}{_three_head()}<th class="num">total ({_e(units)})</th>'
            f'<th class="num">of GPU</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
            f'<p class="meta">{_e(" ".join(THREE_NUMBERS))}</p>')


def _verdict(peak: int, capacity: int, errors: int = 0) -> str:
    if errors:
        return (f'<span class="verdict bad">does not launch: {errors} '
                f'error{"s" if errors != 1 else ""} (see the diagnostics)</span>')
    if peak > capacity:
        return f'<span class="verdict bad">does not fit: {peak / capacity:.0%} of the GPU</span>'
    if peak > capacity * (1 - MARGIN):
        return (f'<span class="verdict warn">fits, under the {MARGIN:.0%} headroom: '
                f'{peak / capacity:.0%} of the GPU</span>')
    return f'<span class="verdict ok">fits: {peak / capacity:.0%} of the GPU</span>'


def estimate_section(estimate, report) -> list:
    units = report.units
    errors = len(blocking_errors(report, estimate))
    sources = ", ".join(report.path(s) or s for s in estimate.sources) or "command line"
    params = estimate.params or {}
    out = [f'<section class="estimate"><h2>Estimate for {_e(sources)}</h2>',
           f'<p class="meta">profile {_e(estimate.profile)} · {_e(estimate.gpu_name)} '
           f'({_e(fmt(estimate.capacity_bytes, units))}) · parameters '
           f'{params.get("total", 0) / 1e9:.2f}B · peak '
           f'<b>{_e(fmt(estimate.peak_bytes, units, 2))}</b> '
           f'{_verdict(estimate.peak_bytes, estimate.capacity_bytes, errors)}</p>',
           "<h3>Per stage, at its peak, against the GPU</h3>",
           _legend(_present(estimate)),
           stage_bars(estimate, units), stage_table(estimate, units),
           "<h3>Over the phases of a step</h3>"]
    for stage in sorted(estimate.stages, key=lambda s: s.stage):
        out.append(f'<div class="phase-block"><b>stage {stage.stage}</b> (peak: '
                   f'{_e(PHASE_NAMES.get(stage.phase, stage.phase))})<br>'
                   f'{phase_chart(stage, estimate.capacity_bytes, units)}</div>')
    if phases.shows_phases(estimate):
        out += phase_tables(estimate, units)
    out.append("<h3>Terms and formulas</h3>")
    for index, stage in enumerate(sorted(estimate.stages, key=lambda s: s.stage)):
        opened = " open" if index == 0 else ""
        out.append(f'<details{opened}><summary>stage {stage.stage}: {len(stage.terms)} terms, '
                   f'{_e(fmt(stage.total_bytes, units, 2))} at {_e(stage.phase)}</summary>'
                   f'{term_table(stage, units)}</details>')
    for note in estimate.notes:
        out.append(f'<p class="meta">note: {_e(note)}</p>')
    out.append("</section>")
    return out


def phase_tables(estimate, units: str) -> list:
    """An RL step's phases side by side per stage (report/phases.py rows): the peak in bold,
    a phase over the GPU's capacity marked as the one that breaks."""
    groups = getattr(getattr(estimate, "rl", None), "groups", None) or {}
    out = ["<h3>The phases of an RL step, side by side</h3>"]
    head = "".join(f'<th class="num">{_e(c)}</th>' for c in phases.COLUMNS)
    for stage in sorted(estimate.stages, key=lambda s: s.stage):
        held = f" ({_e(groups[stage.stage])})" if stage.stage in groups else ""
        rows = []
        for row, phase in zip(phases.rows(stage, estimate.capacity_bytes), stage.phases):
            mark = " breaks: over the GPU" if row.over else (" (peak)" if row.peak else "")
            cells = "".join(f'<td class="num">{row.parts[c] / UNITS[units]:.2f}</td>'
                            for c in phases.COLUMNS)
            style = ' class="over"' if row.over else (' class="peak"' if row.peak else "")
            rows.append(f"<tr{style}><td>{_e(row.name)}{_e(mark)}</td>{cells}{_three(phase, units)}"
                        f'<td class="num"><b>{row.total / UNITS[units]:.2f}</b></td>'
                        f'<td class="num">{row.total / estimate.capacity_bytes:.0%}</td></tr>')
        out.append(f'<p><b>stage {stage.stage}</b>{held}</p><table class="rl-phases"><thead><tr>'
                   f'<th>phase</th>{head}{_three_head()}<th class="num">total ({_e(units)})</th>'
                   f'<th class="num">of GPU</th></tr></thead><tbody>{"".join(rows)}</tbody>'
                   "</table>")
    return out


def diagnostics_section(report) -> list:
    if not report.diagnostics:
        return ['<section class="diagnostics"><h2>Diagnostics</h2><p>No problems found.</p>'
                '</section>']
    out = ['<section class="diagnostics"><h2>Diagnostics</h2>']
    for d in report.diagnostics:
        where = report.path(d.path) or "<command line>"
        if d.line is not None:
            where += f":{d.line}" + (f":{d.column}" if d.column is not None else "")
        out.append(f'<p class="diag sev-{_e(d.severity.label)}"><code>{_e(where)}</code> '
                   f'<b>{_e(d.code)}</b> {_e(d.rule)} ({_e(d.severity.label)}): '
                   f'{_e(d.message)}</p>')
    out.append("</section>")
    return out


def render(report) -> str:
    """`check` / `estimate` --format html."""
    body = ["<h1>memlint</h1>"]
    if report.diagnostics or not report.estimates:
        body += diagnostics_section(report)
    for estimate in report.estimates:
        body += estimate_section(estimate, report)
    if not report.estimates:
        body.append('<p class="meta">No estimate (see the diagnostics).</p>')
    return _page("memlint report", body)


# ---------------------------------------------------------------------------------------------
# plan


def render_plan(result, scenario, units: str = "GiB") -> str:
    """`plan --format html`: the ranked layouts, each with its per-stage bars."""
    cap = scenario.hardware.gpu_memory
    body = [f"<h1>memlint plan: {_e(scenario.model.name or 'model')} on {result.gpus} × "
            f"{_e(scenario.hardware.gpu)}</h1>",
            f'<p class="meta">{result.gpus_per_node} per node · framework '
            f'{_e(scenario.training.framework)} · profile {_e(scenario.assumptions.profile)} · '
            f'{result.stats.examined:,} candidates examined, {result.stats.estimated} estimated, '
            f'{result.stats.fitting} fit</p>']
    body += [f'<p class="meta">note: {_e(n)}</p>' for n in result.notes]
    if not result.plans:
        body.append('<p><span class="verdict bad">no configuration fits</span>'
                    + (f": {_e(result.reason)}" if getattr(result, "reason", None) else "")
                    + '</p>')
        return _page("memlint plan", body)
    rows = []
    for p in result.plans:
        s = p.settings
        shard = f"zero{s['zero']}" if s["fsdp"] == "none" else s["fsdp"]
        rows.append(f'<tr><td class="num">{p.rank}</td><td><b>{_e(p.label())}</b></td>'
                    f'<td>{_e(shard)}</td><td>{_e(s["recompute"])}</td>'
                    f'<td class="num">{_e(s["micro_batch"])}</td><td>{_e(p.offload())}</td>'
                    f'<td class="num">{_e(fmt(p.peak_bytes, units))}</td>'
                    f'<td class="num">{p.headroom_fraction:.0%}</td>'
                    f'<td class="num">{p.cost.relative_step_time:.2f}</td>'
                    f'<td><code>{_e(" ".join("--set " + a for a in p.assignments()))}</code>'
                    '</td></tr>')
    body.append('<h2>Ranked layouts</h2><table class="plans"><thead><tr><th class="num">#</th>'
                '<th>layout</th><th>zero/fsdp</th><th>recompute</th><th class="num">micro '
                'batch</th><th>offload</th><th class="num">peak</th><th class="num">headroom</th>'
                '<th class="num">step ×</th><th>reproduce</th></tr></thead><tbody>'
                + "".join(rows) + "</tbody></table>")
    report = Report(units=units)
    body.append(_legend(COMPONENTS))
    for p in result.plans:
        body.append(f'<h3>#{p.rank} {_e(p.label())} · peak {_e(fmt(p.peak_bytes, units))} of '
                    f'{_e(fmt(cap, units))}</h3>')
        body.append(stage_bars(p.estimate, report.units))
    return _page("memlint plan", body)
