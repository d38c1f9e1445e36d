"""What the language server knows about one document, without the protocol (testable alone).

`analyze(path, buffers)` (memlint/document.py) checks the file as `memlint check PATH` does,
reading every open editor buffer instead of the file on disk, and keeps the runs' parsed files,
so a hover re-estimates with one value changed without reading or parsing anything again.

- `hover(analysis, line, column)`: for the setting under the cursor, what it does to memory:
  the peak now, and at the neighbour values (half and double a size or degree, the other ZeRO
  stages, the other recompute / offload choices).
- `actions(analysis, text, line)`: code actions for the diagnostics on a line: the ML003
  did-you-mean rename, and "suppress this finding" (a `# memlint: disable-next-line=` comment
  above the line, or the top-level `"memlint": {"disable": [...]}` key of a JSON file); for an
  unused suppression (ML011), removing it. None of these is `check --fix`'s: whether a
  suppression is used depends on the run, so only the author removes one.

Lines and columns here are memlint's: 1-based. memlint/lsp/server.py converts.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace

from memlint import fixes, loaders
from memlint.api import run_pipeline
from memlint.diagnostics import Severity
from memlint.document import Analysis, RunState
from memlint.keys import parse_bool
from memlint.rules import registry

GiB = 1024**3

# Settings whose neighbour values a hover shows, and how to find them.
DOUBLING = ("micro_batch", "seq_len", "tp", "pp", "cp", "ep", "world_size", "grad_accum")
CHOICES = {"recompute": ("none", "selective", "full"), "offload_optimizer": ("none", "cpu"),
           "offload_params": ("none", "cpu"), "zero": (0, 1, 2, 3)}
FLAGS = ("offload_activations", "sp", "fp8_params")


# ---------------------------------------------------------------------------------------------
# Hover


def setting_at(analysis: Analysis, line: int, column: int):
    """(scenario key, Setting) the document sets on `line` nearest before `column`, or None."""
    best = None
    for state in analysis.runs:
        for partial in state.run.partials:
            if not partial.source or os.path.abspath(partial.source) != analysis.path:
                continue
            for key, setting in partial.settings.items():
                prov = setting.prov
                if prov.line != line:
                    continue
                start = prov.column or 1
                if best is None or (start <= column and start > (best[1].prov.column or 1)):
                    best = (key, setting)
    return best


def neighbours(key: str, value) -> list:
    """The values a hover compares with (never the value itself)."""
    if key in CHOICES:
        options = CHOICES[key]
        return [o for o in options if str(o) != str(value).lower()]
    if key in FLAGS:
        found = parse_bool(value)
        return [] if found is None else [not found]
    if key in DOUBLING:
        try:
            number = int(value)
        except (TypeError, ValueError):
            return []
        out = [number // 2] if number >= 2 else []
        return out + [number * 2]
    return []


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def peak(estimate) -> tuple:
    """(stage, bytes) of the stage that peaks highest."""
    stage = max(estimate.stages, key=lambda s: s.total_bytes)
    return stage.stage, stage.total_bytes


def _estimate_with(analysis: Analysis, state: RunState, key: str, value):
    options = replace(analysis.options, assignments=tuple(analysis.options.assignments)
                      + (f"{key}={_scalar(value)}",))
    _found, estimate = run_pipeline(state.run, options, registry())
    return estimate


def _gib(value: int) -> str:
    return f"{value / GiB:.1f} GiB"


def hover(analysis: Analysis, line: int, column: int):
    """Markdown for the setting under the cursor, or None where there is nothing to say."""
    found = setting_at(analysis, line, column)
    if found is None:
        return None
    key, setting = found
    state = next((s for s in analysis.runs if s.estimate is not None), None)
    title = f"**{key} = {_scalar(setting.value)}**"
    if state is None:
        why = next((d.message for s in analysis.runs for d in s.diagnostics
                    if d.data.get("no_estimate")), "no memory estimate for this run")
        return f"{title}\n\n{why}"
    estimate = state.estimate
    stage, now = peak(estimate)
    capacity = estimate.capacity_bytes
    rows = [f"{title}: stage {stage} peaks at {_gib(now)} of {_gib(capacity)} "
            f"({estimate.gpu_name})"]
    table = []
    for value in neighbours(key, setting.value):
        other = _estimate_with(analysis, state, key, value)
        if other is None:
            continue
        other_stage, bytes_ = peak(other)
        verdict = "fits" if bytes_ <= other.capacity_bytes else "does not fit"
        table.append(f"| {_scalar(value)} | stage {other_stage} | {_gib(bytes_)} | {verdict} |")
    if table:
        rows += ["", f"| {key} | peak at | GiB | |", "|---|---|---|---|",
                 f"| {_scalar(setting.value)} (now) | stage {stage} | {_gib(now)} | "
                 f"{'fits' if now <= capacity else 'does not fit'} |"] + table
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------------
# Code actions

Edit = fixes.Edit


@dataclass
class Action:
    title: str
    diagnostic: object
    edits: list
    preferred: bool = False


def _json(path: str, text: str) -> bool:
    return path.lower().endswith((".json", ".hjson")) or text.lstrip().startswith("{")


def _suppress_json(d, text: str):
    """Add the code to the top-level "memlint": {"disable": [...]} key (made if missing)."""
    code = json.dumps(d.code)
    match = loaders._JSON_DIRECTIVE.search(text)
    lines = text.splitlines()
    if match:
        inside = match.group(1).strip()
        if d.code.lower() in {n.strip().strip('"').lower() for n in inside.split(",")}:
            return None
        before = text[:match.end(1)]
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        new = (", " if inside else "") + code
        return Edit((line, column), (line, column), new)
    brace = text.find("{")
    if brace < 0:
        return None
    before = text[:brace + 1]
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    following = lines[line] if line < len(lines) else ""
    indent = re.match(r"\s*", following).group(0) or "  "
    return Edit((line, column), (line, column),
                f'\n{indent}"memlint": {{"disable": [{code}]}},')


def _suppress_comment(d, lines: list):
    if not d.line or d.line > len(lines):
        return None
    indent = re.match(r"\s*", lines[d.line - 1]).group(0)
    return Edit((d.line, 1), (d.line, 1), f"{indent}# memlint: disable-next-line={d.code}\n")


def _position(text: str, offset: int) -> tuple:
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


_JSON_MEMBER = re.compile(r'"memlint"\s*:\s*\{\s*"disable"\s*:\s*\[[^\]]*\]\s*\}\s*,[ \t]*\n?')


def _unsuppress(d, text: str):
    """ML011's quick fix: the unused name out of its directive, or the directive with it."""
    lines = text.splitlines()
    if not d.key or not d.line or d.line > len(lines):
        return None
    match = loaders._JSON_DIRECTIVE.search(text)
    if match and _position(text, match.start())[0] == d.line:
        names = [n for n in match.group(1).split(",") if n.strip()]
        rest = [n.strip() for n in names if n.strip().strip('"').lower() != d.key]
        member = _JSON_MEMBER.match(text, match.start())
        if not rest and member:     # the whole member, and its line if it is alone there
            start = match.start()
            line_start = text.rfind("\n", 0, start) + 1
            if not text[line_start:start].strip() and text[member.end() - 1:member.end()] == "\n":
                start = line_start
            return Edit(_position(text, start), _position(text, member.end()), "")
        return Edit(_position(text, match.start(1)), _position(text, match.end(1)),
                    ", ".join(rest))
    line = lines[d.line - 1]
    match = loaders._COMMENT_DIRECTIVE.search(line)
    if not match:
        return None
    names = [n.strip() for n in match.group(2).split(",") if n.strip()]
    rest = [n for n in names if n.lower() != d.key]
    if rest:
        kept = ",".join(rest) + match.group(2)[len(match.group(2).rstrip()):]
        return Edit((d.line, match.start(2) + 1), (d.line, match.end(2) + 1), kept)
    if line[:match.start()].strip():     # after code: the comment goes, the code stays
        return Edit((d.line, len(line[:match.start()].rstrip()) + 1), (d.line, len(line) + 1),
                    "")
    if d.line < len(lines):
        return Edit((d.line, 1), (d.line + 1, 1), "")
    return Edit((d.line, 1), (d.line, len(line) + 1), "")


def _continued_command_start(lines: list, line: int) -> int:
    """The first line of the shell command that `line` belongs to (backslash continuations)."""
    while line > 1 and lines[line - 2].rstrip().endswith("\\"):
        line -= 1
    return line


def actions(analysis: Analysis, text: str, first: int, last: int) -> list:
    """Code actions for this document's diagnostics on lines first..last."""
    lines = text.splitlines()
    out = []
    for d in analysis.diagnostics:
        if not d.line or not first <= d.line <= last:
            continue
        if d.code == "ML011":
            edit = _unsuppress(d, text)
            if edit is not None:
                out.append(Action(f"Remove the unused suppression of {d.key}", d, [edit],
                                  preferred=True))
            continue
        fix = fixes.rename(d, lines, ignored_keys=True) or fixes.deprecated(d, lines)
        if fix:
            out.append(Action(fix.title, d, fix.edits, preferred=True))
        if _json(analysis.path, text):
            edit = _suppress_json(d, text)
        elif analysis.path.endswith((".sh", ".bash", ".slurm", ".sbatch")):
            start = _continued_command_start(lines, d.line)
            edit = _suppress_comment(replace(d, line=start), lines)
        else:
            edit = _suppress_comment(d, lines)
        if edit is not None:
            scope = "in this file" if _json(analysis.path, text) else "on this line"
            out.append(Action(f"Suppress {d.code} {d.rule} {scope}", d, [edit]))
    return out


def severity_of(d) -> int:
    """LSP DiagnosticSeverity: 1 error, 2 warning, 3 information."""
    return {Severity.ERROR: 1, Severity.WARNING: 2}.get(d.severity, 3)
