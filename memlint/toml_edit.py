"""Set keys of one table of a TOML document, keeping everything else of it as it was.

    new = toml_edit.set_values(old, ("tool", "memlint", "assumptions"), {"a.b": 0.1}, "why")

The document is edited with tomlkit, which parses TOML completely and writes it back with its
comments, order, spacing and quoting: a `[header]` inside a multi-line string stays a string, an
inline `assumptions = {...}` is updated inline, dotted keys stay dotted, CRLF line ends stay
CRLF (safe_write.keep_line_endings). Keys and values are written by tomlkit, so they are quoted
and escaped as TOML needs; the comment is made one printable line first. The result is parsed
again (tomllib) and must equal the old document with only those keys set, or nothing is written.
"""
from __future__ import annotations

import copy
import math
from typing import Optional

try:
    import tomllib  # type: ignore[import-not-found]
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

from memlint.escape import one_line
from memlint.safe_write import WriteError, keep_line_endings

MAX_EDIT_BYTES = 1024 * 1024   # a pyproject.toml is kilobytes; tomlkit is slow on megabytes


def _check_value(key: str, value) -> None:
    if isinstance(value, bool) or isinstance(value, int) or isinstance(value, str):
        return
    if isinstance(value, float) and math.isfinite(value):
        return
    raise WriteError(f"{key} = {value!r} cannot be written to TOML; not written")


def _table(container, names: tuple, where: str):
    """The table at `names` below `container`, created (as [a.b.c] headers) where absent."""
    # start-up: tomlkit loads only when a file is edited
    import tomlkit
    from tomlkit.items import AoT

    for depth, name in enumerate(names):
        if name not in container:
            last = depth == len(names) - 1
            container[name] = tomlkit.table(is_super_table=not last)
        item = container[name]
        if isinstance(item, AoT) or not hasattr(item, "keys"):
            raise WriteError(f"{where}: [{'.'.join(names[:depth + 1])}] is not a table; "
                             "not written")
        container = item
    return container


def set_values(text: Optional[str], table: tuple, values: dict, comment: str = "",
               where: str = "<toml>") -> str:
    """`text` (None: a new document) with `values` set in the table at `table`."""
    # start-up: tomlkit loads only when a file is edited
    import tomlkit
    from tomlkit.exceptions import ParseError
    from tomlkit.items import InlineTable

    text = text or ""
    if len(text) > MAX_EDIT_BYTES:
        raise WriteError(f"{where} is over {MAX_EDIT_BYTES} bytes; not edited")
    for key, value in values.items():
        _check_value(key, value)
    try:
        before = tomllib.loads(text)
        document = tomlkit.parse(text)
    except (tomllib.TOMLDecodeError, ParseError, ValueError) as exc:
        raise WriteError(f"{where} is not valid TOML ({one_line(str(exc))}); not edited") from None
    target = _table(document, table, where)
    note = one_line(comment) if comment else ""
    for key, value in values.items():
        target[key] = value
        if note and not isinstance(target, InlineTable):   # an inline table holds no comment
            target[key].comment(note)
    out = keep_line_endings(text, document.as_string())
    _verify(out, before, table, values, where)
    return out


def _verify(out: str, before: dict, table: tuple, values: dict, where: str) -> None:
    expected = copy.deepcopy(before)
    node = expected
    for name in table:
        node = node.setdefault(name, {})
    node.update(values)
    try:
        after = tomllib.loads(out)
    except ValueError as exc:
        raise WriteError(f"{where}: the edited document would not be valid TOML "
                         f"({one_line(str(exc))}); not written") from None
    if after != expected:
        raise WriteError(f"{where}: the edit would change more than [{'.'.join(table)}]; "
                         "not written")
