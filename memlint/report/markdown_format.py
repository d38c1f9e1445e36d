"""`--format markdown`: GitHub-flavoured Markdown for job summaries and pull-request comments.

A headline with the counts, the diagnostics as a table (location, severity, rule code and name,
message), then per estimate the per-stage memory table: the same grouping into weights,
gradients, optimizer, activations and other as the text report, with the share of the GPU.
"""
from __future__ import annotations

from memlint.diagnostics import Severity
from memlint.report import blocking_errors, location
from memlint.report.text_format import grouped
from memlint.units import UNITS, fmt

_MARK = {"error": "🔴 error", "warning": "🟡 warning", "info": "🔵 info"}


# Text from the configs (messages, file names, a GPU's name) is shown as text, never read as
# Markdown or HTML: `<img src=x>` or `<a href>` in a job summary or a pull-request comment, a
# `[link](...)`, emphasis or an `@team` mention (which notifies) must come out as typed.
_MARKDOWN = {c: "\\" + c for c in "\\`*_[]|~"}
_MARKDOWN.update({"<": "&lt;", ">": "&gt;", "&": "&amp;", "\n": " ",
                  # a zero-width space after @: GitHub links (and notifies) @name in text
                  "@": "@&#8203;"})
_MARKDOWN_TABLE = str.maketrans(_MARKDOWN)


def _cell(text) -> str:
    """Plain text for a table cell or a sentence: Markdown and HTML characters escaped."""
    return str(text).translate(_MARKDOWN_TABLE)


def _code(text) -> str:
    """A code span (no Markdown, HTML or mention inside one); a text holding a backtick or a
    backslash, which could end it or escape the table's pipe, is shown as escaped text."""
    text = str(text)
    if "`" in text or "\\" in text or "\n" in text:
        return _cell(text)
    return "`" + text.replace("|", "\\|") + "`"


def _rule(d, report) -> str:
    # no link: `memlint explain CODE` prints the rule's page wherever the table is read
    return f"{d.code} {_code(d.rule)}"


def _where(d, report) -> str:
    return _code(location(d, report, "command line"))


def headline(report) -> str:
    counts = {label: 0 for label in ("error", "warning", "info")}
    for d in report.diagnostics:
        counts[d.severity.label] += 1
    fail_on = report.fail_on if report.fail_on is not None else Severity.ERROR
    failing = any(d.severity >= fail_on for d in report.diagnostics)
    parts = [f"{n} {label}{'s' if n != 1 and label != 'info' else ''}"
             for label, n in counts.items() if n]
    verdict = "❌ fails" if failing else "✅ passes"
    return (f"## memlint {verdict}: " + (", ".join(parts) if parts else "no problems found")
            + "\n")


def diagnostics_table(report) -> list:
    if not report.diagnostics:
        return []
    lines = ["| where | severity | rule | message |", "| --- | --- | --- | --- |"]
    for d in report.diagnostics:
        lines.append(f"| {_where(d, report)} | {_MARK[d.severity.label]} | {_rule(d, report)} | "
                     f"{_cell(d.message)} |")
    return lines + [""]


def estimate_table(estimate, report) -> list:
    units = report.units
    capacity = estimate.capacity_bytes
    sources = ", ".join(_code(report.path(s) or s) for s in estimate.sources) or "command line"
    errors = blocking_errors(report, estimate)
    if errors:
        fits = (f"❌ does not launch ({len(errors)} error{'s' if len(errors) != 1 else ''}, "
                "see the diagnostics)")
    else:
        fits = "✅ fits" if estimate.peak_bytes <= capacity else "❌ does not fit"
    lines = [f"### Memory per GPU: {sources}", "",
             f"{fits}: peak **{fmt(estimate.peak_bytes, units, 2)}** of "
             f"{fmt(capacity, units, 2)} on {_cell(estimate.gpu_name)} "
             f"({_cell(estimate.profile)} profile).", "",
             f"| stage | layers | phase | weights | gradients | optimizer | activations | other "
             f"| total ({units}) | of GPU |",
             "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    scale = UNITS[units]
    for stage in sorted(estimate.stages, key=lambda s: s.stage):
        g = grouped(stage)
        share = stage.total_bytes / capacity if capacity else 0.0
        total = f"{stage.total_bytes / scale:.2f}"
        if stage.total_bytes > capacity:
            total = f"**{total}**"
        cells = [f"{g[name] / scale:.2f}" for name in ("weights", "gradients", "optimizer",
                                                        "activations", "other")]
        lines.append(f"| {stage.stage} | {stage.layers} | {stage.phase} | "
                     + " | ".join(cells) + f" | {total} | {share:.0%} |")
    return lines + [""]


def render(report) -> str:
    lines = [headline(report)]
    lines += diagnostics_table(report)
    if not report.quiet:
        for estimate in report.estimates:
            lines += estimate_table(estimate, report)
    lines.append("<sub>memlint: per-GPU memory estimated from the configs; `memlint estimate "
                 "--explain` shows every term.</sub>")
    return "\n".join(lines).rstrip() + "\n"
