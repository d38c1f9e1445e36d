"""`--format junit`: one test suite per file, one failing test case per diagnostic."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from memlint.report.text_format import diagnostic_line


def render(report) -> str:
    by_file: dict = {}
    for d in report.diagnostics:
        by_file.setdefault(report.path(d.path) or "<command line>", []).append(d)
    root = ET.Element("testsuites", name="memlint", tests=str(max(1, len(report.diagnostics))),
                      failures=str(len(report.diagnostics)))
    if not by_file:
        suite = ET.SubElement(root, "testsuite", name="memlint", tests="1", failures="0")
        ET.SubElement(suite, "testcase", name="no problems", classname="memlint")
    for path in sorted(by_file):
        items = by_file[path]
        suite = ET.SubElement(root, "testsuite", name=path, tests=str(len(items)),
                              failures=str(len(items)))
        for d in items:
            attrs = {"name": f"{d.code} {d.rule}", "classname": path}
            if d.line is not None:
                attrs["line"] = str(d.line)
            case = ET.SubElement(suite, "testcase", **attrs)
            failure = ET.SubElement(case, "failure", type=d.severity.label, message=d.message)
            failure.text = diagnostic_line(d, report)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
