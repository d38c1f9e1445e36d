"""TOML documents written in the plain subset most config files use, read without tomllib.

`import tomllib` is more than a third of a one-file check's start-up budget: it imports typing,
datetime and string and compiles its patterns, about 43 million instructions (callgrind, issue
29), where a whole DeepSpeed JSON check takes 91 million above the bare interpreter. Most TOML
configs (torchtitan's job files, memlint.toml) use a small part of TOML:

- `[a.b]` table headers of bare keys, each table defined once;
- `key = value` lines with one bare key, each key once;
- values: basic strings without escapes, literal strings, decimal integers, decimal floats,
  booleans, and one-line arrays of those;
- blank lines and comments.

`read(text)` returns what `tomllib.loads(text)` returns for such a document, and None for
anything else: every other construct (escapes, dates, multi-line strings or arrays, inline
tables, dotted keys, arrays of tables, `0x`/`1_000`/`inf` numbers, CR line ends) and every
document TOML rejects. tomllib then reads it and reports the error, so no error comes from here.
tests/test_toml_subset.py checks that the two agree on every TOML file of the repository's
fixtures and on generated documents (hypothesis).
"""
from __future__ import annotations

from memlint import lazy_re

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

_WS = " \t"
_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
# tomllib's ASCII_CTRL less tab and newline: not allowed anywhere in a TOML document outside
# multi-line strings (which this subset does not read); "\r" is here too (CR line ends)
_CONTROL = frozenset(chr(c) for c in range(32) if c not in (9, 10)) | {"\x7f"}
# TOML's decimal numbers without underscores (tomllib's RE_NUMBER, dec branch): a float has a
# fraction, an exponent or both
_NUMBER = lazy_re.compile(r"[+-]?(?:0|[1-9][0-9]*)((?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)")
_LONGEST_NUMBER = 100   # longer numbers go to tomllib (its limits, its messages)
_ENDS_TOKEN = frozenset(_WS + ",]#")


class _Outside(Exception):
    """The document is not in the subset (or not TOML)."""


def read(text: str) -> Optional[dict]:
    """The document as tomllib.loads gives it, or None when it is outside the subset."""
    if not _CONTROL.isdisjoint(text):
        return None
    try:
        return _document(text)
    except _Outside:
        return None


def _document(text: str) -> dict:
    root: dict = {}
    table = root
    headers: set = set()
    for line in text.split("\n"):
        start = _skip(line, 0)
        if start == len(line) or line[start] == "#":
            continue
        if line[start] == "[":
            path, end = _header(line, start)
            if path in headers:
                raise _Outside   # a table defined twice
            headers.add(path)
            table = _table(root, path)
        else:
            key, end = _key(line, start)
            if key in table:
                raise _Outside   # a key defined twice
            value, end = _value(line, _skip(line, end + 1), nested=False)
            table[key] = value
        _end_of_line(line, end)
    return root


def _skip(line: str, pos: int) -> int:
    while pos < len(line) and line[pos] in _WS:
        pos += 1
    return pos


def _end_of_line(line: str, pos: int) -> None:
    pos = _skip(line, pos)
    if pos < len(line) and line[pos] != "#":
        raise _Outside


def _bare(line: str, pos: int) -> int:
    end = pos
    while end < len(line) and line[end] in _BARE:
        end += 1
    if end == pos:
        raise _Outside   # a quoted key, or no key
    return end


def _header(line: str, start: int) -> tuple:
    """`[a.b]`: the key path and the position after `]` (arrays of tables are outside)."""
    if line.startswith("[[", start):
        raise _Outside
    parts = []
    pos = start + 1
    while True:
        pos = _skip(line, pos)
        end = _bare(line, pos)
        parts.append(line[pos:end])
        pos = _skip(line, end)
        if pos < len(line) and line[pos] == ".":
            pos += 1
            continue
        if pos < len(line) and line[pos] == "]":
            return tuple(parts), pos + 1
        raise _Outside


def _table(root: dict, path: tuple) -> dict:
    table = root
    for part in path:
        found = table.setdefault(part, {})
        if not isinstance(found, dict):
            raise _Outside   # a header through a key that holds a value
        table = found
    return table


def _key(line: str, start: int) -> tuple:
    """`key =`: the key and the position of `=` (dotted and quoted keys are outside)."""
    end = _bare(line, start)
    equals = _skip(line, end)
    if equals >= len(line) or line[equals] != "=":
        raise _Outside
    return line[start:end], equals


def _value(line: str, pos: int, nested: bool) -> tuple:
    if pos >= len(line):
        raise _Outside
    char = line[pos]
    if char in "\"'":
        end = line.find(char, pos + 1)
        if end < 0:
            raise _Outside
        body = line[pos + 1:end]
        if char == '"' and "\\" in body:
            raise _Outside   # escapes: tomllib reads them
        if end + 1 < len(line) and line[end + 1] not in _ENDS_TOKEN:
            raise _Outside   # a multi-line string, or text after the string
        return body, end + 1
    if char == "[":
        if nested:
            raise _Outside
        return _array(line, pos + 1)
    end = pos
    while end < len(line) and line[end] not in _ENDS_TOKEN:
        end += 1
    token = line[pos:end]
    if token == "true":
        return True, end
    if token == "false":
        return False, end
    number = _NUMBER.fullmatch(token) if len(token) <= _LONGEST_NUMBER else None
    if number is None:
        raise _Outside   # dates, times, inf/nan, 0x/0o/0b, underscores, inline tables, ...
    return (float(token) if number.group(1) else int(token)), end


def _array(line: str, pos: int) -> tuple:
    """A one-line array of plain values, from after its `[`: the list and the position after `]`."""
    items = []
    while True:
        pos = _skip(line, pos)
        if pos < len(line) and line[pos] == "]":
            return items, pos + 1
        value, pos = _value(line, pos, nested=True)
        items.append(value)
        pos = _skip(line, pos)
        if pos < len(line) and line[pos] == ",":
            pos += 1
            continue
        if pos < len(line) and line[pos] == "]":
            return items, pos + 1
        raise _Outside
