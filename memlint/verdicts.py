"""Which checked files got a memory verdict, and why the others did not: the line every check
ends with, so that "no estimate" is never mistaken for a pass (issue 27).

A file has a memory verdict when some run it belongs to got an estimate. A run without one says
why through its diagnostics: each "no memory estimate" finding carries `data["no_estimate"]`, one
of REASONS. `--require-estimate` turns any file without a verdict into a failure.
"""
from __future__ import annotations

import os

from memlint.records import field, record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Iterable, Optional

# Why a run has no memory verdict, most specific first (a run with several reasons is counted
# under the first).
FORMAT_NOT_READ = "format not read"
NOT_TRAINING = "not a training run"
CONFIG_ERROR = "config error"
MODEL_NOT_RESOLVED = "model not resolved"
ARCHITECTURE = "architecture not counted"
NOT_MODELED = "training setup not modeled"
RUNTIME_VALUE = "a value known only when the script runs"
WORLD_UNKNOWN = "world size not given (ZeRO/FSDP shard over it)"
MODEL_ONLY = "a model, not a training run"
NO_MODEL = "no model"
REASONS = (FORMAT_NOT_READ, NOT_TRAINING, CONFIG_ERROR, MODEL_NOT_RESOLVED, ARCHITECTURE,
           NOT_MODELED, RUNTIME_VALUE, WORLD_UNKNOWN, MODEL_ONLY, NO_MODEL)
OTHER = "no estimate"


def run_reason(diagnostics: Iterable, estimate, all_unknown: bool = False) -> Optional[str]:
    """Why a run has no memory verdict (None: it has one)."""
    if estimate is not None:
        return None
    found = set()
    for d in diagnostics:
        reason = d.data.get("no_estimate")
        if reason is None and d.data.get("unknown_format"):
            neighbour = d.data.get("neighbour")
            reason = f"{FORMAT_NOT_READ}: {neighbour}" if neighbour else FORMAT_NOT_READ
        if reason is None and d.code == "ML001" and d.severity.label == "error":
            reason = CONFIG_ERROR
        if reason is not None:
            found.add(reason)
    if not found:
        return FORMAT_NOT_READ if all_unknown else OTHER
    return min(found, key=lambda r: (_rank(r), r))


@record
class Summary:
    """Files checked, by memory verdict (path -> reason, None: has a verdict)."""

    files: dict = field(default_factory=dict)

    def add(self, paths: Iterable[str], reason: Optional[str]) -> None:
        for path in paths:
            if path is None or path.startswith("<"):
                continue
            key = os.path.normpath(path)
            if reason is None:
                self.files[key] = None          # a verdict in any of its runs counts
            elif key not in self.files:
                self.files[key] = reason

    @property
    def without(self) -> dict:
        return {p: r for p, r in self.files.items() if r is not None}

    def by_reason(self) -> dict:
        out: dict = {}
        for path, reason in sorted(self.without.items()):
            out.setdefault(reason, []).append(path)
        return dict(sorted(out.items(), key=lambda item: (_rank(item[0]), item[0])))

    def line(self) -> str:
        """One line: how many files, how many with a verdict, the others by reason."""
        total = len(self.files)
        missing = self.by_reason()
        count = sum(len(v) for v in missing.values())
        noun = "file" if total == 1 else "files"
        if not total:
            return "memlint: no files checked."
        if not count:
            return f"memlint: {total} {noun} checked, each with a memory verdict."
        parts = ", ".join(f"{len(paths)} {reason}" for reason, paths in missing.items())
        return (f"memlint: {total} {noun} checked, {total - count} with a memory verdict, "
                f"{count} without ({parts}).")

    def to_dict(self) -> dict:
        missing = self.by_reason()
        return {"files": len(self.files),
                "with_verdict": len(self.files) - sum(len(v) for v in missing.values()),
                "without_verdict": missing}


def _rank(reason: str) -> int:
    base = reason.split(":", 1)[0]
    return REASONS.index(base) if base in REASONS else len(REASONS)


def is_unread_format(reason: Optional[str]) -> bool:
    return reason is not None and reason.split(":", 1)[0] == FORMAT_NOT_READ
