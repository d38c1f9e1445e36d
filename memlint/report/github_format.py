"""`--format github`: GitHub Actions workflow commands, one annotation per diagnostic."""
from __future__ import annotations

_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(report) -> str:
    lines = []
    for d in report.diagnostics:
        props = []
        path = report.path(d.path)
        if path and not path.startswith("<"):
            props.append(f"file={_prop(path)}")
            if d.line is not None:
                props.append(f"line={d.line}")
                if d.column is not None:
                    props.append(f"col={d.column}")
        props.append(f"title={_prop(f'{d.code} {d.rule}')}")
        lines.append(f"::{_LEVEL[d.severity.label]} {','.join(props)}::{_data(d.message)}")
    return "".join(line + "\n" for line in lines)
