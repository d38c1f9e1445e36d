"""Inline suppressions that turn nothing off: ML011 (unused-suppression).

A `memlint: disable` directive (loaders.Suppressions) is used when it suppressed a finding of a
rule it names. Whether it is unused is only known for the rules that were judged in the run:
those found before the rules run (parse, schema, keys) and, where the run has a memory estimate,
every enabled rule that applies to the run's formats. A directive naming a rule that is turned
off, that does not apply, or (without an estimate) whose findings need one, is not reported: a
suppression that matters in another run must not be a warning in this one. For the same reason
a file shared by several runs of one check is judged on all of them (`drop_used`).
"""
from __future__ import annotations

import os

from memlint.diagnostics import UNUSED_SUPPRESSION, Diagnostic, Severity


def record_use(path: str, table, wanted: set, line, used: set) -> None:
    """Add (path, directive line, name) to `used` for each directive of `table` that covers
    the finding's line (or the whole file) and names one of `wanted`."""
    for directive_line, names, covers in getattr(table, "directives", ()):
        if 0 in covers or line in covers:
            for name in names & wanted:
                used.add((os.path.abspath(path), directive_line, name))


def unused(suppressions: dict, used: set, judged: set, known: set) -> list:
    """ML011 for each name of each directive that turned nothing off, where its rule (code or
    name, lower-case, or `all`) is in `judged`; names in no rule (`known`) are ML003's."""
    out = []
    for path, table in suppressions.items():
        for line, names, covers in getattr(table, "directives", ()):
            for name in sorted(names):
                if name not in known or name not in judged:
                    continue
                shown = name.upper() if name[2:].isdigit() else name
                if (os.path.abspath(path), line, name) in used:
                    continue
                where = "in this file" if 0 in covers else (
                    "on this line" if covers == (line,) else "on the lines it covers")
                out.append(Diagnostic(
                    *UNUSED_SUPPRESSION, Severity.WARNING,
                    f"unused suppression: `memlint: disable` of {shown!r} turns nothing off "
                    f"{where} (no such finding in this run); remove it", path, max(line, 1), 1, key=name))
    return out


def drop_used(diagnostics: list, used: set) -> list:
    """Without the ML011 of a directive that another run of the same check used."""
    return [d for d in diagnostics if d.code != UNUSED_SUPPRESSION[0]
            or (os.path.abspath(d.path), d.line, d.key) not in used]
