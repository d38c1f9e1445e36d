"""Text from the user's files made safe to print: control characters escaped.

Config content (flag names, keys, file names, a log's name) reaches messages, reports and the
files memlint writes, so every output escapes the characters that must not reach a terminal or a
report raw: C0 controls but tab (ESC starts terminal escape sequences, BEL rings), DEL, C1
controls (0x9b is a one-byte CSI), the bidirectional overrides that reorder displayed text, the
line/paragraph separators, lone surrogates (a file name that is not UTF-8) and the
non-characters XML 1.0 forbids. Newline and carriage return are escaped too wherever one line is
meant (a path, a diagnostic's message, an exit-2 reason, a TOML comment): a file name holding a
newline must not forge a second diagnostic line or a GitHub `::error` workflow command.
"""
from __future__ import annotations

import re

from memlint import lazy_re

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

_CONTROL = lazy_re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e"
                           "\u2066-\u2069\ud800-\udfff\ufffe\uffff]")
_CONTROL_OR_NEWLINE = lazy_re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e"
                                      "\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


def _escape(match: re.Match) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: Optional[str], newlines: bool = False) -> Optional[str]:
    """'a\x1b[31mb' -> 'a\\x1b[31mb': printable, and valid in XML, JSON and a terminal; with
    `newlines`, '\\n' and '\\r' become '\\x0a' and '\\x0d' as well (one line)."""
    if text is None or text.isprintable():
        return text   # every character the patterns match is unprintable (start-up: no compile)
    pattern = _CONTROL_OR_NEWLINE if newlines else _CONTROL
    if not pattern.search(text):
        return text
    return pattern.sub(_escape, text)


def one_line(text: Optional[str]) -> Optional[str]:
    """escape_controls(text, newlines=True)."""
    return escape_controls(text, newlines=True)


# Characters json.dumps(ensure_ascii=False) writes raw that must not reach a terminal or an
# editor as they are (DEL, the C1 controls: 0x9b is a one-byte CSI; the separators and the
# bidirectional controls that break or reorder displayed lines): written as JSON escapes
# instead, which decode to the same string.
_JSON_RAW = {code: f"\\u{code:04x}" for code in
             (*range(0x7f, 0xa0), 0x2028, 0x2029, *range(0x202a, 0x202f), *range(0x2066, 0x206a))}


def json_safe(text: str) -> str:
    """JSON text with DEL, C1 controls, line separators and bidirectional controls as \\uXXXX
    escapes."""
    return text.translate(_JSON_RAW)
