"""`--format junit`: one test suite per file, one test case per diagnostic.

As JUnit readers (CI test tabs) expect: a finding at or above `--fail-on` is a `<failure>`; memlint
failing itself (an internal error) is an `<error>`; a finding below `--fail-on` (an info note by
default) is a passing test case whose message is kept in `<system-out>`. The counts on the suites
match, so a run that exits 0 shows no failed tests.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from memlint.diagnostics import Severity
from memlint.report.text_format import diagnostic_line


def _kind(d, fail_on) -> str:
    if d.data.get("internal") and d.severity == Severity.ERROR:
        return "error"
    return "failure" if d.severity >= fail_on else "passed"


def render(report) -> str:
    fail_on = report.fail_on if report.fail_on is not None else Severity.ERROR
    by_file: dict = {}
    for d in report.diagnostics:
        by_file.setdefault(report.path(d.path) or "<command line>", []).append(d)
    kinds = [_kind(d, fail_on) for d in report.diagnostics]
    root = ET.Element("testsuites", name="memlint", tests=str(max(1, len(report.diagnostics))),
                      failures=str(kinds.count("failure")), errors=str(kinds.count("error")))
    if not by_file:
        suite = ET.SubElement(root, "testsuite", name="memlint", tests="1", failures="0",
                              errors="0")
        ET.SubElement(suite, "testcase", name="no problems", classname="memlint")
    for path in sorted(by_file):
        items = by_file[path]
        suite_kinds = [_kind(d, fail_on) for d in items]
        suite = ET.SubElement(root, "testsuite", name=path, tests=str(len(items)),
                              failures=str(suite_kinds.count("failure")),
                              errors=str(suite_kinds.count("error")))
        for d, kind in zip(items, suite_kinds):
            attrs = {"name": f"{d.code} {d.rule}", "classname": path}
            if d.line is not None:
                attrs["line"] = str(d.line)
            case = ET.SubElement(suite, "testcase", **attrs)
            if kind == "passed":
                ET.SubElement(case, "system-out").text = diagnostic_line(d, report)
                continue
            element = ET.SubElement(case, kind, type=d.severity.label, message=d.message)
            element.text = diagnostic_line(d, report)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
