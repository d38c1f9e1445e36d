"""`--format sarif`: SARIF 2.1.0, as GitHub code scanning accepts it.

GitHub rejects or hides a result without a file location, so (memlint.engine anchors every
finding of a run to a file and line) each result carries a physical location: a relative
artifact URI (base id %SRCROOT%) and a 1-based region with at least startLine. A problem that
belongs to no file (a rule plugin that failed to load, an internal error outside any run) is not
a result but a tool execution notification of the run's invocation.

Every result's rule is declared in tool.driver.rules, with the rule's documentation as help text
and Markdown and `helpUri` pointing at its page under docs/rules/ in memlint's repository.
"""
from __future__ import annotations

import json
import os
import pathlib

from memlint import __version__
from memlint.escape import json_safe
from memlint.rules.docs import markdown_page

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _rule_entry(rule) -> dict:
    sections = rule.sections()
    summary = sections.get("summary") or rule.name
    entry = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": summary.splitlines()[0]},
        "fullDescription": {"text": sections.get("What it checks", summary)},
        "help": {"text": rule.doc, "markdown": markdown_page(rule)},
        "defaultConfiguration": {"level": _LEVEL[rule.severity.label]},
        "properties": {"tags": [rule.code[:3]]},
    }
    # no helpUri: the rule's whole page travels in `help` (code scanning shows it with the
    # alert), and memlint has no public web address a link could count on staying live
    return entry


def _location(d, report):
    path = report.path(d.path)
    if not path or path.startswith("<") or path.startswith("preset:"):
        return None
    if os.path.isabs(path):   # outside the working directory: a file: URI, never a bare path
        artifact = {"uri": pathlib.Path(path).as_uri()}
    else:
        artifact = {"uri": path, "uriBaseId": "%SRCROOT%"}
    region = {"startLine": d.line if d.line else 1}
    if d.column:
        region["startColumn"] = d.column
    return {"physicalLocation": {"artifactLocation": artifact, "region": region}}


def document(report) -> dict:
    registry = report.registry
    results, notifications, codes = [], [], []
    for d in report.diagnostics:
        location = _location(d, report)
        if location is None:
            notifications.append({"level": _LEVEL[d.severity.label],
                                  "message": {"text": f"{d.code} {d.rule}: {d.message}"},
                                  "descriptor": {"id": d.code}})
            continue
        results.append((d, location))
        if d.code not in codes:
            codes.append(d.code)
    rules, index = [], {}
    for code in sorted(codes):
        rule = registry.get(code) if registry is not None else None
        entry = _rule_entry(rule) if rule is not None else {"id": code}
        index[code] = len(rules)
        rules.append(entry)
    out = []
    for d, location in results:
        out.append({"ruleId": d.code, "ruleIndex": index[d.code], "level": _LEVEL[d.severity.label],
                    "message": {"text": d.message}, "locations": [location]})
    invocation = {"executionSuccessful": not any(d.data.get("internal")
                                                 for d in report.diagnostics)}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    run = {
        "tool": {"driver": {"name": "memlint", "version": __version__, "rules": rules}},
        "invocations": [invocation],
        "results": out,
    }
    # the verdict inputs no file gave (memory/inputs.py), per estimate, in the run's property bag
    assumed = [{"sources": [report.path(s) for s in e.sources],
                "assumed": [dict(a) for a in getattr(e, "assumed", ()) or ()]}
               for e in report.estimates if getattr(e, "assumed", ())]
    if assumed:
        run["properties"] = {"memlint": {"assumed": assumed}}
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def failure_log(message: str) -> str:
    """A SARIF log for a run that could not be done (exit 2: a usage error), so that an upload
    step after `memlint check --format sarif > memlint.sarif || true` uploads a valid file that
    says what went wrong instead of an empty one."""
    run = {"tool": {"driver": {"name": "memlint", "version": __version__, "rules": []}},
           "results": [],
           "invocations": [{"executionSuccessful": False, "toolExecutionNotifications": [
               {"level": "error", "message": {"text": message}}]}]}
    return json.dumps({"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}, sort_keys=True,
                      indent=2, ensure_ascii=False) + "\n"


def render(report) -> str:
    return json_safe(json.dumps(document(report), sort_keys=True, indent=2,
                                ensure_ascii=False)) + "\n"
