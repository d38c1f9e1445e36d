"""Diagnostics: the plain, frozen findings every stage of memlint produces.

Adapters, scenario merging, rules and the CLI all report problems as `Diagnostic`s. Reporters
only format them; the CLI derives the exit code from their severities (DESIGN.md, exit codes).
"""
from __future__ import annotations

from enum import IntEnum

from memlint.ir import Provenance
from memlint.records import field, record, replace

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


class Severity(IntEnum):
    """Ordered so that `max()` gives the worst finding."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    def __str__(self) -> str:   # "error", not str() of an int ("3" on Python 3.11+)
        return self.label

    def __format__(self, spec: str) -> str:
        return format(self.label, spec)

    @classmethod
    def parse(cls, text: str) -> "Severity":
        key = text.strip().upper()
        if key in ("WARN",):
            key = "WARNING"
        if key not in cls.__members__:
            raise ValueError(f"unknown severity {text!r} (use error, warning or info)")
        return cls[key]


@record(frozen=True)
class Diagnostic:
    """One finding. `code`/`rule` name the registered rule (parse problems have reserved codes)."""

    code: str
    rule: str
    severity: Severity
    message: str
    path: Optional[str] = None
    line: Optional[int] = None
    column: Optional[int] = None
    key: Optional[str] = None
    # Extra machine-readable facts (bytes, suggestions); never needed to read the message.
    data: dict = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def at(cls, code: str, rule: str, severity: Severity, message: str,
           prov: Optional[Provenance] = None, **data) -> "Diagnostic":
        if prov is None:
            return cls(code, rule, severity, message, data=dict(data))
        return cls(code, rule, severity, message, prov.file, prov.line, prov.column, prov.key,
                   data=dict(data))

    def with_severity(self, severity: Severity) -> "Diagnostic":
        return replace(self, severity=severity)

    def sort_key(self):
        return (self.path or "", self.line or 0, self.column or 0, self.code, self.message)

    def to_dict(self) -> dict:
        return {
            "code": self.code,
            "rule": self.rule,
            "severity": self.severity.label,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
        }


# Reserved codes for problems found before any rule runs (ML0xx). They are registered in the
# rule registry too, so `memlint rules` and `memlint explain` cover them.
PARSE_ERROR = ("ML001", "parse-error")
SCHEMA_ERROR = ("ML002", "schema-violation")
UNKNOWN_KEY = ("ML003", "unknown-key")
INVALID_VALUE = ("ML004", "invalid-value")
CONFLICT = ("ML005", "conflicting-sources")
MISSING_MODEL = ("ML006", "no-model")
UNRESOLVED = ("ML007", "unresolved-value")
UNKNOWN_MODEL_TYPE = ("ML008", "unknown-model-type")
INTERNAL_ERROR = ("ML009", "internal-error")
DUPLICATE_KEY = ("ML010", "duplicate-key")
UNUSED_SUPPRESSION = ("ML011", "unused-suppression")


def make(kind: tuple, severity: Severity, message: str, prov: Optional[Provenance] = None,
         **data) -> Diagnostic:
    """Build a diagnostic of one of the reserved kinds above."""
    code, name = kind
    return Diagnostic.at(code, name, severity, message, prov, **data)


def make_internal(message: str, prov: Optional[Provenance] = None) -> Diagnostic:
    """An internal-error diagnostic that makes the run exit 2 (a rule or the model failed)."""
    return make(INTERNAL_ERROR, Severity.ERROR, message, prov, internal=True)
