"""`--format json`: exactly the DESIGN.md output contract, sorted keys, integer byte counts."""
from __future__ import annotations

import json

from memlint import __version__
from memlint.escape import json_safe
from memlint.report import phases

PARAM_KEYS = ("total", "trainable", "embedding", "lm_head", "experts", "vision")


def _int(value) -> int:
    return int(value or 0)


def estimate_dict(estimate, report) -> dict:
    out = _estimate_dict(estimate, report)
    if phases.shows_phases(estimate):
        # an RL step: every phase of each stage with its terms (report/phases.py)
        for stage, entry in zip(sorted(estimate.stages, key=lambda s: s.stage), out["stages"]):
            entry["phases"] = phases.json_phases(stage, _int(estimate.capacity_bytes))
    return out


def _estimate_dict(estimate, report) -> dict:
    return {
        "sources": [report.path(s) for s in estimate.sources],
        "profile": estimate.profile,
        "params": {key: _int(estimate.params.get(key)) for key in PARAM_KEYS},
        "gpu": {"name": estimate.gpu_name, "capacity_bytes": _int(estimate.capacity_bytes)},
        "assumed": [{"key": a["key"], "value": a["value"], "source": a["source"]}
                    for a in getattr(estimate, "assumed", ()) or ()],
        "stages": [{
            "stage": stage.stage,
            "phase": stage.phase,
            "components": {k: _int(v) for k, v in stage.components().items()},
            "total_bytes": _int(stage.total_bytes),
            # the three numbers users compare with their logs (docs/DESIGN.md, --explain)
            "allocated_bytes": _int(stage.allocated_bytes),
            "reserved_bytes": _int(stage.reserved_bytes),
            "device_bytes": _int(stage.device_bytes),
            "terms": [{"name": t.name, "component": t.component, "bytes": _int(t.bytes),
                       "formula": t.formula} for t in stage.terms],
        } for stage in sorted(estimate.stages, key=lambda s: s.stage)],
        "peak_bytes": _int(estimate.peak_bytes),
        "host": [node.to_dict() for node in getattr(estimate, "host", ()) or ()],
        "checkpoint": (estimate.checkpoint.to_dict()
                       if getattr(estimate, "checkpoint", None) is not None else None),
    }


def diagnostic_dict(diagnostic, report) -> dict:
    out = diagnostic.to_dict()
    out["path"] = report.path(diagnostic.path)
    return out


def summary_dict(report) -> dict:
    """Files checked, how many got a memory verdict, the others by reason (display paths)."""
    out = report.summary.to_dict()
    out["without_verdict"] = {reason: [report.path(p) for p in paths]
                              for reason, paths in out["without_verdict"].items()}
    return out


def document(report) -> dict:
    out = {"memlint_version": __version__,
           "estimates": [estimate_dict(e, report) for e in report.estimates],
           "diagnostics": [diagnostic_dict(d, report) for d in report.diagnostics]}
    if report.summary is not None:
        out["summary"] = summary_dict(report)
    return out


def render(report) -> str:
    return json_safe(json.dumps(document(report), sort_keys=True, indent=2,
                                ensure_ascii=False)) + "\n"
