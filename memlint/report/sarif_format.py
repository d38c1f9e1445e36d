"""`--format sarif`: SARIF 2.1.0, as GitHub code scanning accepts it.

GitHub rejects or hides a result without a file location, so (memlint.engine anchors every
finding of a run to a file and line) each result carries a physical location: a relative
artifact URI (base id %SRCROOT%) and a 1-based region with at least startLine. A problem that
belongs to no file (a rule plugin that failed to load, an internal error outside any run) is not
a result but a tool execution notification of the run's invocation.

Every result's rule is declared in tool.driver.rules, with the rule's documentation as help text
and Markdown (no `helpUri`: the page travels with the alert).

Code scanning turns every result into an alert, notes included (76% of the results on memlint's
fixtures are notes), so results below a severity floor are left out: `report.min_severity`
(`--sarif-min-severity`), by default warning, or `--fail-on`'s level where it is lower, so that a
finding which fails the check always reaches code scanning. The driver's `semanticVersion` is
memlint's version; `informationUri` is the installed distribution's home page (a released
wheel's Project-URL) and absent where it has none.
"""
from __future__ import annotations

import json
import os
import pathlib

from memlint import DISTRIBUTION, __version__
from memlint.diagnostics import Severity
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


def floor(report) -> Severity:
    """The lowest severity a result needs to be in the log (see the module's docstring)."""
    if report.min_severity is not None:
        return report.min_severity
    fail_on = report.fail_on if report.fail_on is not None else Severity.ERROR
    return min(fail_on, Severity.WARNING)


def information_uri() -> str | None:
    """The distribution's home page from its metadata (Project-URL Homepage, or Source)."""
    try:
        # start-up: only a SARIF report reads the installed distribution's metadata
        from importlib import metadata

        urls = metadata.metadata(DISTRIBUTION).get_all("Project-URL") or []
    except Exception:  # noqa: BLE001 - no metadata (a source checkout): no link
        return None
    found = dict(u.split(",", 1) for u in urls if "," in u)
    found = {k.strip().lower(): v.strip() for k, v in found.items()}
    uri = found.get("homepage") or found.get("source")
    return uri if uri and uri.startswith("https://") else None


def _driver(rules: list) -> dict:
    driver = {"name": "memlint", "version": __version__, "semanticVersion": __version__,
              "rules": rules}
    uri = information_uri()
    if uri:
        driver["informationUri"] = uri
    return driver


def document(report) -> dict:
    registry = report.registry
    results, notifications, codes = [], [], []
    lowest = floor(report)
    for d in report.diagnostics:
        location = _location(d, report)
        if location is not None and d.severity < lowest:
            continue
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
        "tool": {"driver": _driver(rules)},
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
    run = {"tool": {"driver": _driver([])},
           "results": [],
           "invocations": [{"executionSuccessful": False, "toolExecutionNotifications": [
               {"level": "error", "message": {"text": message}}]}]}
    return json.dumps({"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}, sort_keys=True,
                      indent=2, ensure_ascii=False) + "\n"


def render(report) -> str:
    return json_safe(json.dumps(document(report), sort_keys=True, indent=2,
                                ensure_ascii=False)) + "\n"
