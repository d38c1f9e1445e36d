"""One document checked as `memlint check PATH` checks it, from text an editor (or a fix) holds
instead of the files on disk.

`analyze(path, buffers)` runs the check of every run the file belongs to (run discovery: the
memlint.toml above it, [tool.memlint] runs, the files its run names), reading the {path: text}
buffers instead of those files (loaders.use_buffers). The result keeps the runs' parsed files, so
a caller can re-estimate with one value changed (`--set key=value` over the same partials)
without reading or parsing anything again. Used by the language server (memlint/lsp) and by
`check --fix` to verify a fix before it is written.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from memlint import loaders
from memlint.api import Options, lint_config, run_pipeline, validate
from memlint.rules import registry
from memlint.runs import Planner
from memlint.suppressions import drop_used


@dataclass
class RunState:
    """One run the document belongs to: its parsed files and what the check found."""

    run: object
    diagnostics: list
    estimate: object


@dataclass
class Analysis:
    path: str
    options: Options
    runs: list = field(default_factory=list)
    diagnostics: list = field(default_factory=list)   # of this document only
    elsewhere: dict = field(default_factory=dict)     # path -> the run's findings in its other files
    error: str = ""                                    # memlint could not check it (why)

    @property
    def estimate(self):
        return next((r.estimate for r in self.runs if r.estimate is not None), None)


def _clear_caches() -> None:
    """What one check caches about the file system (configs above a file, repository roots)."""
    # start-up: these modules are loaded by the check anyway; imported here for their caches
    from memlint import config
    from memlint.adapters import registry as adapters

    config.find_pyproject.cache_clear()
    loaders._root_of.cache_clear()
    loaders._absolute_realpath.cache_clear()
    adapters._real_folder.cache_clear()


def analyze(path: str, buffers: dict, options: Options = None) -> Analysis:
    """Check `path` (and every run it belongs to) with the editor's buffers."""
    options = options or Options()
    path = os.path.abspath(path)
    result = Analysis(path, options)
    previous = loaders.use_buffers(buffers)
    try:
        _clear_caches()
        reg = registry()
        planner = Planner(options.max_bytes, options.allow_outside_root,
                          config_of=lambda p: lint_config(options, p))
        seen, used = set(), set()
        for run in planner.plan([path]):
            validate(run.config, reg)
            found, estimate = run_pipeline(run, options, reg, used)
            result.runs.append(RunState(run, found, estimate))
            for d in found:
                identity = (d.code, d.message, d.path, d.line, d.column)
                if not d.path or identity in seen:
                    continue
                seen.add(identity)
                where = os.path.abspath(d.path)
                if where == path:
                    result.diagnostics.append(d)
                elif os.path.isfile(where):
                    result.elsewhere.setdefault(where, []).append(d)
        result.diagnostics = drop_used(result.diagnostics, used)
        result.elsewhere = {where: drop_used(found, used)
                            for where, found in result.elsewhere.items()}
    except Exception as exc:  # noqa: BLE001 - the editor gets one message, never a crash
        result.error = f"{type(exc).__name__}: {exc}" if not str(exc).startswith(
            path) else str(exc)
    finally:
        loaders.use_buffers(previous)
    return result
