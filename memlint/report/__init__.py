"""Reporters: pure functions from a finished `Report` (diagnostics + estimates) to text.

Formats: text (rich on a terminal, plain otherwise), json (the DESIGN.md contract), sarif (2.1.0),
github (workflow commands), junit (XML), markdown (job summaries and pull-request comments),
html (one self-contained page: inline SVG, no script). Each module exposes
`render(report) -> str`; the text
reporter also `write(report, stream)` for colour. Reporters never decide the exit code.
"""
from __future__ import annotations

import os

from memlint import lazy_import
from memlint.escape import escape_controls, one_line
from memlint.records import field, record, replace

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

__all__ = ["FORMATS", "Report", "display_path", "escape_controls", "get", "location", "one_line",
           "render"]


FORMATS = ("text", "json", "sarif", "github", "junit", "markdown", "html")

# what each of a stage's three numbers is and which log it matches (text and HTML reports)
THREE_NUMBERS = ("allocated: tensors at the peak = Megatron's max allocated; reserved: + allocator "
                 "slack = torchtitan's max reserved;",
                 "device: + CUDA context and NCCL = nvidia-smi. The OOM verdict compares device "
                 "with the GPU.")


@record
class Report:
    diagnostics: list = field(default_factory=list)
    estimates: list = field(default_factory=list)      # memlint.memory.terms.Estimate
    units: str = "GiB"
    quiet: bool = False
    explain: bool = False
    stage: Optional[int] = None
    root: Optional[str] = None                         # paths are shown relative to it
    registry: object = None                            # memlint.rules.Registry (SARIF rules)
    color: bool = False
    width: int = 100
    show_estimates: bool = True
    fail_on: object = None                             # Severity: the lowest that fails the run
    summary: object = None                             # memlint.verdicts.Summary (check)
    min_severity: object = None                        # Severity: SARIF's floor (sarif_format)

    def __post_init__(self) -> None:
        self.diagnostics = [_clean(d) for d in self.diagnostics]

    def path(self, path: Optional[str]) -> Optional[str]:
        return display_path(path, self.root)


def blocking_errors(report, estimate) -> list:
    """The error diagnostics of the files an estimate is for (or of no file): with any of them
    the run does not launch, whatever its memory, so a report never says "fits" beside them."""
    sources = {os.path.abspath(s) for s in getattr(estimate, "sources", ()) or ()
               if s and not s.startswith("<")}
    return [d for d in report.diagnostics if d.severity.label == "error"
            and not d.code.startswith("ML1")  # memory verdicts: "does not fit" says it
            and (d.path is None or os.path.abspath(d.path) in sources)]


def _clean(d):
    message, path = one_line(d.message), one_line(d.path)
    if message is d.message and path is d.path:
        return d
    return replace(d, message=message, path=path)


_DISPLAYED: dict = {}   # (path, root, working directory) -> display_path's answer


def display_path(path: Optional[str], root: Optional[str] = None) -> Optional[str]:
    """Relative to root (default: the working directory) when inside it, with forward slashes
    (a string computation, remembered: a report over many files shows each path many times)."""
    if path is None:
        return None
    key = (path, root, os.getcwd())
    found = _DISPLAYED.get(key)
    if found is not None:
        return found
    shown = one_line(path)
    if not (shown.startswith("<") or shown.startswith("preset:")):
        base = os.path.abspath(root or os.getcwd())
        absolute = os.path.abspath(shown)
        if absolute == base or absolute.startswith(base.rstrip(os.sep) + os.sep):
            shown = os.path.relpath(absolute, base).replace(os.sep, "/")
        else:
            shown = shown.replace(os.sep, "/")
    if len(_DISPLAYED) >= 100_000:
        _DISPLAYED.clear()
    _DISPLAYED[key] = shown
    return shown


def location(d, report: Report, unlocated: str = "<command line>") -> str:
    """`path:line:col` of a diagnostic as reports show it (each part only when known)."""
    where = report.path(d.path) or unlocated
    if d.line is not None:
        where += f":{d.line}"
        if d.column is not None:
            where += f":{d.column}"
    return where


def get(name: str):
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r} (use {', '.join(FORMATS)})")
    return lazy_import.imported(f"memlint.report.{name}_format")


def render(name: str, report: Report) -> str:
    return get(name).render(report)
