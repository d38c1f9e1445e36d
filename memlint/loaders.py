"""Position-aware, safe loading of JSON, YAML and TOML config files.

Every loader returns a `Document`: the plain Python data, a map from key paths (tuples of keys and
list indices) to 1-based (line, column) of the key (or the list item), and diagnostics. Loaders
never raise on bad input and never execute content:
- JSON is parsed by our own small recursive-descent parser, which records positions, accepts the
  comments and trailing commas DeepSpeed's HJSON loader accepts, reports duplicate keys, and limits
  nesting depth.
- YAML goes through PyYAML's safe composer only; nodes are turned into data here, so positions are
  kept, non-standard tags (python/object, ...) are rejected, and alias expansion is bounded.
- TOML is parsed with tomllib/tomli; positions come from a line scan of `[table]` headers and
  `key =` lines (tomllib gives none).
"""
from __future__ import annotations

import bisect
import errno
import os
import re
import stat
from functools import lru_cache

from memlint import lazy_re
from memlint.diagnostics import (DUPLICATE_KEY, PARSE_ERROR, SCHEMA_ERROR, Severity, make)
from memlint.ir import Provenance
from memlint.records import field, record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_YAML_NODES = 50_000
# No count or size in a config has more digits than this; int() of a longer one costs quadratic
# time and, past 4,300 digits, raises (sys.get_int_max_str_digits).
MAX_INT_DIGITS = 4000
# Positions are kept for the first items of a list only: a diagnostic about item 2,000,000 of
# a data array points at the array (Document.prov falls back to the parent), and memory stays
# proportional to the keys, not to the data (a 2M-item array once cost 480 MB).
MAX_ITEM_POSITIONS = 1000


@record
class Document:
    path: str
    data: Any = None
    positions: dict = field(default_factory=dict)
    diagnostics: list = field(default_factory=list)
    text: str = ""
    _depth: Optional[tuple] = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return not any(d.severity == Severity.ERROR and d.code == PARSE_ERROR[0]
                       for d in self.diagnostics)

    def prov(self, path: tuple, key: Optional[str] = None) -> Provenance:
        """Provenance of the key at `path`; falls back to the nearest located parent.

        Probing starts at the document's deepest located path: a dotted key split into a path
        of 100,000 parts (a fuzzed name) must not cost a quadratic walk."""
        if self._depth is None or self._depth[0] != len(self.positions):  # parsing may add more
            self._depth = (len(self.positions), max((len(k) for k in self.positions), default=0))
        probe = tuple(path[:self._depth[1]])
        while probe and probe not in self.positions:
            probe = probe[:-1]
        line, col = self.positions.get(probe, (None, None))
        label = key if key is not None else ".".join(str(p) for p in path) or None
        return Provenance(self.path, line, col, label)


_O_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)

# Editor buffers (memlint server): the text an editor holds for a file, read instead of what is on
# disk, so that diagnostics follow the unsaved buffer. Empty outside the language server.
_BUFFERS: dict = {}


def use_buffers(texts: dict) -> dict:
    """Read these {path: text} instead of the files on disk; returns the buffers it replaced
    (give them back to restore)."""
    previous = dict(_BUFFERS)
    _BUFFERS.clear()
    _BUFFERS.update({os.path.abspath(path): text for path, text in texts.items()})
    return previous


def is_buffered(path: str) -> bool:
    """True when an editor buffer (or standard input) stands for this path."""
    return bool(_BUFFERS) and os.path.abspath(path) in _BUFFERS


def _buffer(path: str, max_bytes: int):
    text = _BUFFERS.get(os.path.abspath(path))
    if text is None:
        return None
    if len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        return None, [make(PARSE_ERROR, Severity.ERROR, f"file is over the {max_bytes}-byte "
                           "limit for configs (raise it with --max-file-size)",
                           Provenance(path, None, None, None))]
    return text, []


def read_text(path: str, max_bytes: int = MAX_FILE_BYTES,
              regular: bool = False) -> tuple[Optional[str], list]:
    """Read a config file as text, with a size limit. Problems become diagnostics.

    Only a regular file is opened: a FIFO, a device or a socket given as a config would block
    the read forever or stream without end. The file is opened non-blocking and checked again
    through its descriptor, so a file swapped for a FIFO after the first check is refused too.
    `regular`: the caller's directory listing says it is a regular file (_read_listed)."""
    if _BUFFERS:
        held = _buffer(path, max_bytes)
        if held is not None:
            return held
    if regular:
        return _read_listed(path, max_bytes)
    prov = Provenance(path, None, None, None)
    try:
        info = os.stat(path)
    except OSError as exc:
        return None, [make(PARSE_ERROR, Severity.ERROR, f"cannot read file: {_why(exc)}",
                           prov)]
    if not stat.S_ISREG(info.st_mode):
        return None, [make(PARSE_ERROR, Severity.ERROR, f"not a regular file "
                           f"({_kind(info)}); not read", prov)]
    if info.st_size > max_bytes:
        return None, [make(PARSE_ERROR, Severity.ERROR,
                           f"file is {info.st_size} bytes, over the {max_bytes}-byte limit "
                           "for configs (raise it with --max-file-size)", prov)]
    try:
        fd = os.open(path, _O_READ)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None, [make(PARSE_ERROR, Severity.ERROR,
                                   "not a regular file; not read", prov)]
            if info.st_size > max_bytes:
                return None, [make(PARSE_ERROR, Severity.ERROR,
                                   f"file is {info.st_size} bytes, over the {max_bytes}-byte "
                                   "limit for configs (raise it with --max-file-size)", prov)]
            # the size it has, plus one byte to see it grow: a read of max_bytes + 1 allocates
            # that much for every file (100,000 small files cost 5 s of CPU that way)
            raw = _read_fd(fd, min(info.st_size, max_bytes) + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        return None, [make(PARSE_ERROR, Severity.ERROR, f"cannot read file: {_why(exc)}", prov)]
    if len(raw) > max_bytes:
        return None, [make(PARSE_ERROR, Severity.ERROR,
                           f"file is over the {max_bytes}-byte limit for configs (raise it with "
                           "--max-file-size)", prov)]
    return decode_bytes(raw, path)


_O_LISTED = _O_READ | getattr(os, "O_NOFOLLOW", 0)
_FIRST_READ = 64 * 1024


def _read_listed(path: str, max_bytes: int) -> tuple[Optional[str], list]:
    """read_text of a file a directory listing called regular (a walk reads 100,000 of them): no
    stat and no fstat, so three system calls. Opened without following a link (one swapped in
    since the listing fails) and non-blocking; read 64 KiB at a time up to the limit."""
    try:
        fd = os.open(path, _O_LISTED)
        try:
            raw = os.read(fd, min(_FIRST_READ, max_bytes + 1))
            if len(raw) == _FIRST_READ:
                parts = [raw]
                have = len(raw)
                while have <= max_bytes:
                    part = os.read(fd, min(8 * _FIRST_READ, max_bytes + 1 - have))
                    if not part:
                        break
                    parts.append(part)
                    have += len(part)
                raw = b"".join(parts)
        finally:
            os.close(fd)
    except OSError as exc:
        return None, [make(PARSE_ERROR, Severity.ERROR, f"cannot read file: {_why(exc)}",
                           Provenance(path, None, None, None))]
    if len(raw) > max_bytes:
        return None, [make(PARSE_ERROR, Severity.ERROR,
                           f"file is over the {max_bytes}-byte limit for configs (raise it with "
                           "--max-file-size)", Provenance(path, None, None, None))]
    return decode_bytes(raw, path)


def _read_fd(fd: int, size: int) -> bytes:
    """Up to `size` bytes of the open file whose stat size was size - 1: one read when it returns
    that much (a regular file at its end), more reads only after a short one."""
    first = os.read(fd, size)
    if len(first) >= size - 1 or not first:
        return first
    parts, have = [first], len(first)
    while have < size:
        part = os.read(fd, size - have)
        if not part:
            break
        parts.append(part)
        have += len(part)
    return b"".join(parts)


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link loop"
    return exc.strerror or str(exc)


def _kind(info: os.stat_result) -> str:
    mode = info.st_mode
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "a special file"


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def decode_bytes(raw: bytes, path: str) -> tuple[Optional[str], list]:
    if raw.startswith(_UTF16_BOMS) or (len(raw) >= 2 and b"\x00" in raw[:2] and _utf16(raw)):
        # UTF-16 text, not binary: but json.load / yaml / tomllib as the frameworks call them
        # read UTF-8, so the framework would fail on this file too
        return None, [make(PARSE_ERROR, Severity.ERROR,
                           "file is UTF-16 text; frameworks read configs as UTF-8 (save it as "
                           "UTF-8)", Provenance(path, 1, 1, None))]
    if b"\x00" in raw:
        return None, [make(PARSE_ERROR, Severity.ERROR, "binary file (contains NUL bytes)",
                           Provenance(path, 1, 1, None))]
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, col = _line_col(raw[:exc.start].decode("utf-8", "replace"), None)
        return None, [make(PARSE_ERROR, Severity.ERROR,
                           f"file is not valid UTF-8 (byte 0x{raw[exc.start]:02x})",
                           Provenance(path, line, col, None))]
    return text, []


def _utf16(raw: bytes) -> bool:
    """Text in UTF-16 without a BOM: every other byte NUL over the first few hundred bytes."""
    head = raw[:512]
    if len(head) % 2:
        head = head[:-1]
    try:
        text = head.decode("utf-16-le" if head[1:2] == b"\x00" else "utf-16-be")
    except UnicodeDecodeError:
        return False
    return bool(text) and all(ch.isprintable() or ch in "\r\n\t" for ch in text)


def _line_col(text: str, offset: Optional[int]) -> tuple[int, int]:
    if offset is None:
        offset = len(text)
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


# ---------------------------------------------------------------------------------------------
# JSON (with the comments and trailing commas that DeepSpeed's hjson-based loader tolerates)


class _JSONError(Exception):
    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


_NUMBER = lazy_re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_START = frozenset("-0123456789")
# numbers each followed by a comma (and blanks): the body of a numeric data array
# integers, commas and blanks (no '+', '_', '.', exponents: those are read one by one)
_INT_SPAN = lazy_re.compile(r"[0-9, \t\r\n-]{1,1000000}")
_LEADING_ZERO = lazy_re.compile(r"(?<![0-9])0[0-9]")
_PLAIN_RUN = lazy_re.compile(r'[^"\\\n]*')
_WHITESPACE = lazy_re.compile(r"[ \t\r\n]+")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


# HJSON's quoteless forms (hjson-py 3.1, which DeepSpeedConfig loads files with): a key runs to
# its ':'; a value that is not a number, true, false or null followed by the end of the line (or
# a ',', ']', '}' or comment) is a string running to the end of the line, blanks trimmed.
_HJSON_KEY = lazy_re.compile(r"[^,:\[\]{}\s]+")
_HJSON_LINE = lazy_re.compile(r"[^\n]*")
_HJSON_END = lazy_re.compile(r"[ \t]*(?:$|\n|\r|,|\]|\}|#|//|/\*)")
_HJSON_STRUCTURAL = frozenset(",:[]{}")


class _JSONParser:
    def __init__(self, text: str, doc: Document, allow_comments: bool, hjson: bool = False):
        self.text = text
        self.pos = 0
        self.doc = doc
        self.allow_comments = allow_comments or hjson
        self.hjson = hjson
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def where(self, offset: int) -> tuple[int, int]:
        index = bisect.bisect_right(self.line_starts, offset) - 1
        return index + 1, offset - self.line_starts[index] + 1

    def skip(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            ch = text[self.pos]
            if ch in " \t\r\n":
                self.pos = _WHITESPACE.match(text, self.pos).end()
            elif self.allow_comments and ch == "#":
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end
            elif self.allow_comments and text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end
            elif self.allow_comments and text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise _JSONError("unterminated /* comment", self.pos)
                self.pos = end + 2
            else:
                return

    def parse(self) -> Any:
        self.skip()
        value = self.value((), 0)
        self.skip()
        if self.pos < len(self.text):
            raise _JSONError(f"unexpected {self.text[self.pos]!r} after the JSON value", self.pos)
        return value

    def line_break_separates(self, end: int) -> bool:
        """HJSON (what DeepSpeed's config loader reads: hjson.load in runtime/config.py): a
        comma is optional at the end of a line, so a line break alone separates two members."""
        return self.allow_comments and "\n" in self.text[end:self.pos]

    def value(self, path: tuple, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise _JSONError(f"nesting deeper than {MAX_DEPTH} levels", self.pos)
        if self.pos >= len(self.text):
            raise _JSONError("unexpected end of file", self.pos)
        ch = self.text[self.pos]
        if ch == "{":
            return self.obj(path, depth)
        if ch == "[":
            return self.array(path, depth)
        if ch == '"':
            return self.string()
        if self.hjson and ch == "'":
            return self.quoted_hjson()
        if self.hjson:
            return self.quoteless()
        if ch in _NUMBER_START:
            number = self.number()
            if number is not None:
                return number
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return val
        for word, val in (("NaN", float("nan")), ("Infinity", float("inf")),
                          ("-Infinity", float("-inf"))):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return val
        end = self.pos
        while end < len(self.text) and (self.text[end].isalnum() or self.text[end] in "_$-."):
            end += 1
        word = self.text[self.pos:end] or self.text[self.pos]
        raise _JSONError(f"unexpected {word!r} (not a JSON value: quote strings, "
                         "and replace template placeholders)", self.pos)

    def quoteless(self) -> Any:
        """An HJSON value without quotes: a number or literal that ends where the line (or the
        member) ends, else a string running to the end of the line."""
        start = self.pos
        if self.text[start] in _HJSON_STRUCTURAL:
            raise _JSONError(f"unexpected {self.text[start]!r} where a value belongs", start)
        candidates = []
        if self.text[start] in _NUMBER_START:
            match = _NUMBER.match(self.text, start)
            if match and match.end() > start:
                candidates.append(match.end())
        for word in ("true", "false", "null"):
            if self.text.startswith(word, start):
                candidates.append(start + len(word))
        for end in candidates:
            if _HJSON_END.match(self.text, end):
                if self.text[start] in _NUMBER_START:
                    return self.number()
                self.pos = end
                return {"true": True, "false": False, "null": None}[self.text[start:end]]
        line = _HJSON_LINE.match(self.text, start).group(0)
        self.pos = start + len(line.rstrip())
        return line.strip()

    def quoted_hjson(self) -> str:
        """HJSON's '...' and '''multiline''' strings."""
        start = self.pos
        if self.text.startswith("'''", start):
            end = self.text.find("'''", start + 3)
            if end < 0:
                raise _JSONError("unterminated ''' string", start)
            self.pos = end + 3
            # hjson-py: the indentation of the opening quotes is removed from every line, the
            # blanks and line break after them and the last line break are dropped
            indent = start - self.text.rfind("\n", 0, start) - 1
            body = self.text[start + 3:end]
            first = body.split("\n", 1)
            body = first[1] if len(first) > 1 and not first[0].strip() else body
            lines = [re.sub(r"^[ \t]{0,%d}" % indent, "", line) for line in body.split("\n")]
            if lines and not lines[-1].strip():
                lines.pop()
            return "\n".join(lines)
        end = self.text.find("'", start + 1)
        newline = self.text.find("\n", start + 1)
        if end < 0 or (0 <= newline < end):
            raise _JSONError("unterminated string", start)
        self.pos = end + 1
        return self.text[start + 1:end]

    def key(self) -> str:
        """An object key: quoted, or (HJSON) quoteless up to its ':'."""
        ch = self.text[self.pos] if self.pos < len(self.text) else ""
        if ch == '"':
            return self.string()
        if self.hjson and ch == "'":
            return self.quoted_hjson()
        if self.hjson and ch:
            match = _HJSON_KEY.match(self.text, self.pos)
            if match:
                self.pos = match.end()
                return match.group(0)
        raise _JSONError("expected a quoted key", self.pos)

    def number(self) -> Any:
        match = _NUMBER.match(self.text, self.pos)
        if not match or match.end() == self.pos:
            return None
        self.pos = match.end()
        token = match.group(0)
        if any(c in token for c in ".eE"):
            return float(token)
        if len(token) > MAX_INT_DIGITS:
            # int() refuses these (Python's 4,300-digit limit), and no config value needs one
            raise _JSONError(f"a {len(token)}-digit integer is too large for a config value",
                             match.start())
        return int(token)

    def numbers(self, result: list) -> bool:
        """A run of plain integers in an array (`1, 2, 3, ...`: data, not settings), converted
        at C speed: a 2M-item array costs seconds item by item. False (nothing consumed) when
        the run is anything else; the items are then read one by one, with positions."""
        match = _INT_SPAN.match(self.text, self.pos)
        span = match.group(0) if match else ""
        cut = span.rfind(",")
        if cut <= 0 or _LEADING_ZERO.search(span, 0, cut):
            return False
        try:
            values = list(map(int, span[:cut].split(",")))  # int() strips the blanks
        except ValueError:  # '-', '', '1 2', over 4,300 digits: item by item
            return False
        result.extend(values)
        self.pos += cut + 1
        return True

    def string(self) -> str:
        start = self.pos
        self.pos += 1
        out = []
        text, n = self.text, len(self.text)
        while True:
            chunk = _PLAIN_RUN.match(text, self.pos)  # the run up to a quote, escape or newline
            if chunk.end() > self.pos:
                out.append(chunk.group())
                self.pos = chunk.end()
            if self.pos >= n:
                raise _JSONError("unterminated string", start)
            ch = text[self.pos]
            if ch == '"':
                self.pos += 1
                return "".join(out)
            if ch == "\\":
                if self.pos + 1 >= n:
                    raise _JSONError("unterminated string", start)
                esc = text[self.pos + 1]
                if esc == "u":
                    digits = text[self.pos + 2:self.pos + 6]
                    if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                        raise _JSONError("bad \\u escape", self.pos)
                    out.append(chr(int(digits, 16)))
                    self.pos += 6
                    continue
                if esc not in _ESCAPES:
                    raise _JSONError(f"bad escape \\{esc}", self.pos)
                out.append(_ESCAPES[esc])
                self.pos += 2
                continue
            if ch == "\n":
                raise _JSONError("newline inside a string", self.pos)
            out.append(ch)
            self.pos += 1

    def obj(self, path: tuple, depth: int) -> dict:
        self.pos += 1
        result: dict = {}
        self.skip()
        if self.pos < len(self.text) and self.text[self.pos] == "}":
            self.pos += 1
            return result
        while True:
            self.skip()
            if self.pos < len(self.text) and self.text[self.pos] == "}" and self.allow_comments:
                self.pos += 1  # trailing comma
                return result
            key_at = self.pos
            key = self.key()
            line, col = self.where(key_at)
            child = path + (key,)
            if key in result:
                first = self.doc.positions.get(child, (None, None))
                self.doc.diagnostics.append(make(
                    DUPLICATE_KEY, Severity.ERROR,
                    f"duplicate key {key!r} (first at line {first[0]}); the loader would reject it",
                    Provenance(self.doc.path, line, col, ".".join(map(str, child)))))
            self.doc.positions[child] = (line, col)
            self.skip()
            if self.pos >= len(self.text) or self.text[self.pos] != ":":
                raise _JSONError(f"expected ':' after key {key!r}", self.pos)
            self.pos += 1
            self.skip()
            result[key] = self.value(child, depth + 1)
            end = self.pos
            self.skip()
            if self.pos >= len(self.text):
                raise _JSONError("unexpected end of file inside an object", self.pos)
            ch = self.text[self.pos]
            if ch == ",":
                self.pos += 1
                continue
            if (ch == '"' or (self.hjson and ch not in "}")) and self.line_break_separates(end):
                continue
            if ch == "}":
                self.pos += 1
                return result
            raise _JSONError(f"expected ',' or '}}', found {ch!r}", self.pos)

    def array(self, path: tuple, depth: int) -> list:
        self.pos += 1
        result: list = []
        self.skip()
        if self.pos < len(self.text) and self.text[self.pos] == "]":
            self.pos += 1
            return result
        while True:
            self.skip()
            if self.pos < len(self.text) and self.text[self.pos] == "]" and self.allow_comments:
                self.pos += 1
                return result
            index = len(result)
            if index >= MAX_ITEM_POSITIONS and self.text[self.pos] in _NUMBER_START \
                    and self.numbers(result):
                continue  # then the last item (or a trailing comma) as usual
            index = len(result)
            child = path + (index,)
            if index < MAX_ITEM_POSITIONS:
                self.doc.positions[child] = self.where(self.pos)
            result.append(self.value(child, depth + 1))
            end = self.pos
            self.skip()
            if self.pos >= len(self.text):
                raise _JSONError("unexpected end of file inside an array", self.pos)
            ch = self.text[self.pos]
            if ch == ",":
                self.pos += 1
                continue
            if ch != "]" and self.line_break_separates(end):
                continue
            if ch == "]":
                self.pos += 1
                return result
            raise _JSONError(f"expected ',' or ']', found {ch!r}", self.pos)


def load_json(path: str, text: str, allow_comments: bool = True, hjson: bool = False
              ) -> Document:
    """JSON with positions; `allow_comments`: `#`, `//`, `/* */`, trailing commas and line
    breaks between members; `hjson`: also HJSON's quoteless keys and strings, '...' and
    '''...''' strings (what DeepSpeedConfig reads a config file with: hjson.load in
    deepspeed/runtime/config.py at edaa722)."""
    doc = Document(path=path, text=text)
    parser = _JSONParser(text, doc, allow_comments, hjson)
    try:
        doc.data = parser.parse()
    except _JSONError as exc:
        line, col = parser.where(min(exc.offset, len(text)))
        doc.data = None
        doc.diagnostics.append(make(PARSE_ERROR, Severity.ERROR, f"invalid JSON: {exc}",
                                    Provenance(path, line, col, None)))
    except RecursionError:
        doc.data = None
        doc.diagnostics.append(make(PARSE_ERROR, Severity.ERROR, "invalid JSON: nesting too deep",
                                    Provenance(path, 1, 1, None)))
    return doc


# ---------------------------------------------------------------------------------------------
# YAML (safe composition only; values built here so that positions survive)

_YAML_TAGS = {
    "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq", "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary",
    "tag:yaml.org,2002:omap", "tag:yaml.org,2002:set", "tag:yaml.org,2002:merge",
    "tag:yaml.org,2002:value",
}


class _YAMLError(Exception):
    def __init__(self, message: str, mark=None):
        super().__init__(message)
        self.mark = mark


# libyaml composes nested nodes recursively in C: a document nested tens of thousands of levels
# deep ("[[[[..." or "- - - - ...") overflows the C stack and kills the process. Deeper documents
# than this bound go through the pure-Python loader, whose recursion ends in a RecursionError.
_C_YAML_MAX_DEPTH = 1000
_YAML_COMPACT = lazy_re.compile(r"^[ \t]*((?:[-?:][ \t]+)*)", re.M)


def _yaml_depth_bound(text: str) -> int:
    """An upper bound on a YAML document's nesting depth (tight enough to tell whether libyaml
    can take the document), cheap to compute: every flow level needs its own '[' or '{', and
    every block level more indentation or another compact indicator ('- - x') on its line."""
    flow = text.count("[") + text.count("{")
    # for speed: a block level takes at least one character of its line (an indent blank, or an
    # indicator with its blank), so the longest line bounds them, and decides most documents
    quick = flow + len(max(text.split("\n"), key=len)) + 1
    if quick <= _C_YAML_MAX_DEPTH:
        return quick
    block = 0
    for match in _YAML_COMPACT.finditer(text):
        indent = len(match.group(0)) - len(match.group(1))
        block = max(block, indent + match.group(1).count("-") + match.group(1).count("?")
                    + match.group(1).count(":"))
    return flow + block + 1


_YAML_FLOW = lazy_re.compile(
    r"""[\[\]{}\n#]|(?:(?<=[\s\[{,:-])|^)(?:'[^'\n]*'|"(?:[^"\\\n]|\\.)*")""",
    re.M)


def _yaml_flow_depth(text: str) -> int:
    """The deepest nesting of flow collections ([...] and {...}), quoted scalars and comments
    skipped: linear, and only asked when the cheap bound is too high for libyaml."""
    depth = deepest = 0
    comment = False
    for match in _YAML_FLOW.finditer(text):
        token = match.group(0)
        if token == "\n":
            comment = False
        elif comment or token[0] in "'\"":
            continue
        elif token == "#":
            comment = True
        elif token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(0, depth - 1)
    return deepest



def _pyyaml():
    """PyYAML, imported on the first YAML file, without compiling its patterns up front
    (lazy_re.import_module). PyYAML's modules compile ten regular expressions when imported: the
    reader's class of printable characters (a large Unicode class, about a third of `import
    yaml`), the resolver's implicit-tag patterns and the constructor's timestamp. memlint composes
    with libyaml (CSafeLoader), which never runs the Python reader, and resolves plain scalars by
    yaml_resolvers' string tests; PyYAML calls only `match` and `search` on its patterns
    (reader.py, resolver.py, constructor.py at 6.0), which the stand-ins answer as compiled
    patterns do. About 60 million instructions less (callgrind) on a one-file YAML check."""
    return lazy_re.import_module("yaml")


_YAML_LOADERS: list = []


def _yaml_loaders(yaml) -> list:
    """[SafeLoader, CSafeLoader (or SafeLoader without libyaml)]: PyYAML's, with memlint's own
    copy of the implicit-tag table whose patterns answer by string tests (yaml_resolvers)."""
    if not _YAML_LOADERS:
        # start-up: loaded with PyYAML, on the first YAML file
        from memlint.yaml_resolvers import quick_table
        table = {"yaml_implicit_resolvers": quick_table(yaml.SafeLoader.yaml_implicit_resolvers)}
        python = type("SafeLoader", (yaml.SafeLoader,), table)
        libyaml = getattr(yaml, "CSafeLoader", None)
        _YAML_LOADERS.extend((python, python if libyaml is None else
                              type("CSafeLoader", (libyaml,), table)))
    return _YAML_LOADERS


def load_yaml(path: str, text: str) -> Document:
    """YAML with positions. A document in the plain subset that configs use is read without
    PyYAML (memlint/yaml_subset.py: the same data, positions and diagnostics; no import of
    PyYAML, issue 29); everything else, invalid documents included, by PyYAML (_load_pyyaml)."""
    # start-up: the subset reader loads when a YAML file is read
    from memlint import yaml_subset

    read = yaml_subset.read(text, MAX_ITEM_POSITIONS)
    if read is None:
        return _load_pyyaml(path, text)
    doc = Document(path=path, text=text)
    doc.data, doc.positions, duplicates = read
    for key, child, where, first in duplicates:
        _duplicate_yaml_key(doc, key, child, where, first)
    return doc


def _duplicate_yaml_key(doc: Document, key, child: tuple, where: tuple, first: tuple) -> None:
    """The diagnostic of a duplicate key at `where` (line, column), first at `first`."""
    # PyYAML's safe_load (accelerate, axolotl, Megatron's test configs) keeps the later value
    # without a word: a likely mistake, not a launch failure; memlint's own files reject it
    own = str(doc.path).endswith((".memlint.yaml", ".memlint.yml"))
    doc.diagnostics.append(make(
        DUPLICATE_KEY, Severity.ERROR if own else Severity.WARNING,
        f"duplicate key {key!r} (first at line {first[0]}); the later value wins "
        "silently in most YAML loaders",
        Provenance(doc.path, where[0], where[1], ".".join(map(str, child)))))


def _load_pyyaml(path: str, text: str) -> Document:
    """load_yaml by PyYAML's safe composer (libyaml's when the document is not too deep)."""
    yaml = _pyyaml()
    doc = Document(path=path, text=text)
    python_loader, c_loader = _yaml_loaders(yaml)
    loader = python_loader
    bound = _yaml_depth_bound(text)
    if bound > _C_YAML_MAX_DEPTH and _yaml_flow_depth(text) > MAX_DEPTH:
        # refused before composing: the pure-Python composer costs O(size x depth) on such a
        # document (a second for 8 KB), and a document nested this deep is refused anyway
        doc.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                    f"invalid YAML: nesting deeper than {MAX_DEPTH} levels",
                                    Provenance(path, 1, 1, None)))
        return doc
    if bound <= _C_YAML_MAX_DEPTH:
        # libyaml's parser when PyYAML has it (5-10x faster); the nodes, marks and errors are
        # the same as the pure-Python SafeLoader's, which remains the fallback
        loader = c_loader
    try:
        nodes = list(yaml.compose_all(text, Loader=loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        message = exc.problem or str(exc)
        doc.diagnostics.append(make(PARSE_ERROR, Severity.ERROR, f"invalid YAML: {message}",
                                    Provenance(path, line, col, None)))
        return doc
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        doc.diagnostics.append(make(PARSE_ERROR, Severity.ERROR, f"invalid YAML: {exc}",
                                    Provenance(path, 1, 1, None)))
        return doc
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        doc.data = None
        return doc
    if len(nodes) > 1:
        doc.diagnostics.append(make(PARSE_ERROR, Severity.WARNING,
                                    "several YAML documents; only the first is read",
                                    Provenance(path, nodes[1].start_mark.line + 1, 1, None)))
    budget = [MAX_YAML_NODES]
    # a constructor alone builds the scalars (a SafeLoader's Python reader would compile the
    # printable-character pattern for an empty string)
    safe = yaml.constructor.SafeConstructor()
    try:
        _expanded_size(nodes[0], {}, 0)  # an alias bomb is refused before anything is built
        doc.data = _yaml_value(nodes[0], (), doc, safe, budget, 0)
    except _YAMLError as exc:
        mark = exc.mark
        doc.data = None
        doc.diagnostics.append(make(PARSE_ERROR, Severity.ERROR, f"invalid YAML: {exc}",
                                    Provenance(path, mark.line + 1 if mark else None,
                                               mark.column + 1 if mark else None, None)))
    return doc


def load_yaml_mapping(path: str, text: str, what: str, diagnostics: list,
                      code=SCHEMA_ERROR) -> Optional[Document]:
    """`load_yaml` for a format whose document must be a mapping: the Document, or None when it
    does not parse or is not a mapping (`diagnostics` gets the parse problems and, for a
    non-mapping, a `code` error at 1:1 naming `what`, e.g. "a gpt-neox config")."""
    return _mapping(load_yaml(path, text), path, f"{what} must be a mapping", diagnostics, code)


def load_json_mapping(path: str, text: str, what: str, diagnostics: list,
                      allow_comments: bool = False, code=PARSE_ERROR,
                      hjson: bool = False) -> Optional[Document]:
    """`load_json` for a format whose document must be an object (see load_yaml_mapping)."""
    return _mapping(load_json(path, text, allow_comments=allow_comments, hjson=hjson), path,
                    f"{what} must be a JSON object", diagnostics, code)


def _mapping(doc: Document, path: str, message: str, diagnostics: list,
             code) -> Optional[Document]:
    diagnostics.extend(doc.diagnostics)
    if doc.data is None:
        return None
    if not isinstance(doc.data, dict):
        diagnostics.append(make(code, Severity.ERROR, message, Provenance(path, 1, 1, None)))
        return None
    return doc


def _expanded_size(node, memo: dict, depth: int) -> int:
    """How many values `node` becomes once aliases are expanded, counted on the node graph (each
    distinct node once), so a billion-laughs document is measured in microseconds."""
    known = memo.get(id(node))
    if known is not None:
        return known
    if depth > MAX_DEPTH:
        raise _YAMLError(f"nesting deeper than {MAX_DEPTH} levels", node.start_mark)
    memo[id(node)] = MAX_YAML_NODES + 1  # a cycle (not composable by PyYAML, but be safe)
    size = 1
    if isinstance(node.value, list):
        for item in node.value:
            for child in item if isinstance(item, tuple) else (item,):
                size += _expanded_size(child, memo, depth + 1)
                if size > MAX_YAML_NODES:
                    raise _YAMLError(f"more than {MAX_YAML_NODES} values after alias expansion "
                                     "(an alias bomb?)", node.start_mark)
    memo[id(node)] = size
    return size


def _yaml_value(node, path: tuple, doc: Document, safe, budget: list, depth: int) -> Any:
    yaml = _pyyaml()
    budget[0] -= 1
    if budget[0] < 0:
        raise _YAMLError(f"more than {MAX_YAML_NODES} values after alias expansion "
                         "(an alias bomb?)", node.start_mark)
    if depth > MAX_DEPTH:
        raise _YAMLError(f"nesting deeper than {MAX_DEPTH} levels", node.start_mark)
    if node.tag not in _YAML_TAGS:
        raise _YAMLError(f"tag {node.tag!r} is not allowed (only plain YAML data is read)",
                         node.start_mark)
    if isinstance(node, yaml.ScalarNode):
        if node.tag == "tag:yaml.org,2002:int" and len(node.value) > MAX_INT_DIGITS:
            raise _YAMLError(f"a {len(node.value)}-character integer is too large for a config "
                             "value", node.start_mark)
        try:
            return safe.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise _YAMLError(str(exc), node.start_mark) from None
        except (ValueError, OverflowError) as exc:
            raise _YAMLError(f"unreadable value: {exc}", node.start_mark) from None
    if isinstance(node, yaml.SequenceNode):
        out = []
        for item in node.value:
            child = path + (len(out),)
            if len(out) < MAX_ITEM_POSITIONS:
                doc.positions.setdefault(child, (item.start_mark.line + 1,
                                                 item.start_mark.column + 1))
            out.append(_yaml_value(item, child, doc, safe, budget, depth + 1))
        return out
    if isinstance(node, yaml.MappingNode):
        out: dict = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merged = _yaml_value(value_node, path, doc, safe, budget, depth + 1)
                for item in merged if isinstance(merged, list) else [merged]:
                    if isinstance(item, dict):
                        for k, v in item.items():
                            out.setdefault(k, v)
                continue
            key = _yaml_value(key_node, path, doc, safe, budget, depth + 1)
            if isinstance(key, (list, dict)):
                raise _YAMLError("a mapping key must be a plain value", key_node.start_mark)
            child = path + (key,)
            line, col = key_node.start_mark.line + 1, key_node.start_mark.column + 1
            if key in out:
                _duplicate_yaml_key(doc, key, child, (line, col),
                                    doc.positions.get(child, (None, None)))
            doc.positions[child] = (line, col)
            out[key] = _yaml_value(value_node, child, doc, safe, budget, depth + 1)
        return out
    raise _YAMLError("unsupported YAML node", node.start_mark)


# ---------------------------------------------------------------------------------------------
# TOML

# Linear-time patterns (each piece can match a character in one way only): a line of 3,000
# spaces once took 12 s in a pattern with two adjacent space-matching repeats.
_TOML_HEADER = lazy_re.compile(r"[ \t]*\[\[?([^\]\n]*)\]\]?[ \t]*(?:#.*)?")
_TOML_PART = r"""(?:"[^"\n]*"|'[^'\n]*'|[A-Za-z0-9_\-]+)"""
_TOML_KEY = lazy_re.compile(r"[ \t]*(%s(?:[ \t]*\.[ \t]*%s)*)[ \t]*=" % (_TOML_PART, _TOML_PART))


def _toml_header(line: str) -> Optional[str]:
    """_TOML_HEADER.fullmatch(line).group(1) of a line (no "\\n"), or None; without compiling it
    (start-up): the name runs to the first `]`, after `[` or `[[`."""
    rest = line.lstrip(" \t")
    if not rest.startswith("["):
        return None
    body = rest[2:] if rest.startswith("[[") else rest[1:]
    end = body.find("]")
    if end < 0:
        return None
    tail = body[end + 1:]
    tail = (tail[1:] if tail.startswith("]") else tail).lstrip(" \t")
    return body[:end] if not tail or tail.startswith("#") else None


_TOML_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _toml_key(line: str) -> Optional[tuple]:
    """(group(1), end()) of _TOML_KEY.match(line) (a line without "\\n"), or None. A key of bare
    parts is read without the pattern (start-up); a quoted one by it."""
    rest = line.lstrip(" \t")
    equals = rest.find("=")
    if equals < 0:
        return None
    key = rest[:equals].rstrip(" \t")
    if '"' in key or "'" in key:
        found = _TOML_KEY.match(line)
        return (found.group(1), found.end()) if found else None
    if not all(part.strip(" \t") and _TOML_BARE.issuperset(part.strip(" \t"))
               for part in key.split(".")):
        return None
    return key, len(line) - len(rest) + equals + 1


def _toml_key_parts(raw: str) -> tuple:
    if '"' not in raw and "'" not in raw:
        # no quoted part: the pattern's runs of [^.]+ are the pieces between dots (start-up: the
        # pattern compiles for a quoted key only)
        return tuple(part.strip() for part in raw.split(".") if part.strip())
    parts = []
    for part in re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', raw):
        part = part.strip()
        if not part:  # the blanks beside a dot (`a . b`)
            continue
        if part[:1] in "\"'":
            part = part[1:-1]
        parts.append(part)
    return tuple(parts)


MAX_NUMBER_CHARS = 1000
_LONG_NUMBER = lazy_re.compile(r"[0-9][0-9_.eE+-]{%d,}" % MAX_NUMBER_CHARS)


def load_toml(path: str, text: str) -> Document:
    doc = Document(path=path, text=text)
    long = None
    # a match is a run of MAX_NUMBER_CHARS + 1 characters within a line (start-up: a file whose
    # lines are all shorter compiles no pattern)
    if len(text) > MAX_NUMBER_CHARS and any(len(line) > MAX_NUMBER_CHARS
                                            for line in text.split("\n")):
        long = next((m for m in _LONG_NUMBER.finditer(text)
                     if any(c in m.group(0) for c in ".eE")), None)   # integers: tomllib's limit
    if long:
        # tomllib reads it, but float() of 4 MB of digits took 480 MB (issue 30); no config
        # value has a thousand digits (integers that long fail tomllib itself: below)
        line, col = _line_col(text, long.start())
        doc.diagnostics.append(make(PARSE_ERROR, Severity.WARNING,
                                    f"a number of {long.end() - long.start():,} characters; "
                                    f"file not read (memlint reads no float over "
                                    f"{MAX_NUMBER_CHARS:,} characters)",
                                    Provenance(path, line, col, None)))
        return doc
    # a plain document is read without tomllib; what toml_subset declines (invalid documents
    # included), tomllib reads
    # start-up: toml_subset loads only when a TOML file is read
    from memlint import toml_subset

    doc.data = toml_subset.read(text)
    if doc.data is None:
        _load_toml_data(doc, path, text)
    if doc.data is None:
        return doc
    table: tuple = ()
    in_multiline = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_multiline:
            if in_multiline in line:
                in_multiline = None
            continue
        header = _toml_header(line)
        if header is not None:
            table = _toml_key_parts(header.strip())
            doc.positions.setdefault(table, (number, line.index("[") + 1))
            continue
        key = _toml_key(line)
        if key is not None:
            parts = _toml_key_parts(key[0])
            column = len(line) - len(line.lstrip()) + 1
            doc.positions.setdefault(table + parts, (number, column))
            rest = line[key[1]:]
            for quote in ('"""', "'''"):
                if rest.count(quote) == 1:
                    in_multiline = quote
    return doc


def _load_toml_data(doc: Document, path: str, text: str) -> None:
    """`doc.data` as tomllib reads the text, or the parse error in `doc.diagnostics`."""
    try:
        # start-up: the TOML parser loads only when a TOML file outside toml_subset is read
        import tomllib  # type: ignore[import-not-found]
    except ModuleNotFoundError:  # Python < 3.11
        # start-up: the TOML parser loads only when a TOML file outside toml_subset is read
        import tomli as tomllib  # type: ignore[no-redef]

    try:
        doc.data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"at line (\d+), column (\d+)", message)
        line, col = (int(match.group(1)), int(match.group(2))) if match else (None, None)
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", message)
        doc.diagnostics.append(make(PARSE_ERROR, Severity.ERROR, f"invalid TOML: {message}",
                                    Provenance(path, line, col, None)))
    except RecursionError:
        doc.diagnostics.append(make(PARSE_ERROR, Severity.ERROR, "invalid TOML: nesting too deep",
                                    Provenance(path, 1, 1, None)))
    except ValueError:  # tomllib's int() of an integer over Python's 4,300-digit limit
        long = re.search(r"[0-9_]{%d,}" % MAX_INT_DIGITS, text)
        line, col = _line_col(text, long.start()) if long else (None, None)
        doc.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                    "invalid TOML: an integer too large for a config value",
                                    Provenance(path, line, col, None)))


_COMMENT_DIRECTIVE = lazy_re.compile(
    r"#\s*memlint:\s*(disable(?:-file|-next-line)?)\s*=\s*([A-Za-z0-9_,\- ]+)")
# JSON has no comments: `"memlint": {"disable": ["ML302", "unknown-key"]}` at the top level
# (DeepSpeed and HF config.json ignore top-level keys they do not know) disables for the file.
_JSON_DIRECTIVE = lazy_re.compile(r'"memlint"\s*:\s*\{\s*"disable"\s*:\s*\[([^\]]*)\]')


class Suppressions(dict):
    """line -> set of the codes/names (lower-case) turned off there (0: the whole file), and
    `directives`: each directive as (its line, its names, the table lines it covers), so that
    the engine can tell one that turned nothing off (ML011)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.directives: list = []

    def add(self, line: int, names: set, covers: tuple) -> None:
        self.directives.append((line, frozenset(names), covers))
        for covered in covers:
            self.setdefault(covered, set()).update(names)


def suppressions(text: str) -> Suppressions:
    """`# memlint: disable=ML301,name` comments: line -> set of codes/names (lower-case).

    A comment alone on its line applies to the next line too, and to the lines a backslash
    continues it onto (a shell command, as ShellCheck's directives do); `disable-file=` applies
    everywhere (stored under line 0), as does a JSON file's top-level
    `"memlint": {"disable": [...]}`.
    """
    found = Suppressions()
    if '"memlint"' in text:
        match = _JSON_DIRECTIVE.search(text)
        if match:
            names = {n.strip().strip('"').lower() for n in match.group(1).split(",")}
            if names - {""}:
                found.add(text.count("\n", 0, match.start()) + 1, names - {""}, (0,))
    if "memlint:" not in text:
        return found
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        match = _COMMENT_DIRECTIVE.search(line)
        if not match:
            continue
        names = {n.strip().lower() for n in match.group(2).split(",") if n.strip()}
        kind = match.group(1)
        if kind == "disable-file":
            found.add(number, names, (0,))
            continue
        covers = [number]
        if kind == "disable-next-line" or line[:match.start()].strip() == "":
            covers.append(number + 1)
            while covers[-1] <= len(lines) and lines[covers[-1] - 1].rstrip().endswith("\\"):
                covers.append(covers[-1] + 1)
        found.add(number, names, tuple(covers))
    return found


# What a reader says of a referenced name holding a NUL byte, which `inside` calls not inside: no
# file system has such a name, so it is not "outside the repository root" either.
NUL_PATH = "is not a valid path: it contains a NUL byte"


def inside(path: str, root: str) -> bool:
    """Whether `path`, symbolic links resolved, is `root` or lies below it (the one
    containment check every reader of a referenced file uses). A name holding a NUL byte is
    no path at all (os.path.realpath raises on it): not inside."""
    if "\x00" in path or "\x00" in root:
        return False
    real, base = realpath(path), realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def realpath(path: str) -> str:
    """os.path.realpath, once per path and run (a directory check asks for the root once per
    file, and for each file three times); a relative path is taken below the working directory
    of the moment. os.getcwd() is the physical directory, and realpath resolves a path's
    components left to right, links before `..`, so that join gives realpath's own answer."""
    return _absolute_realpath(path if os.path.isabs(path) else os.path.join(os.getcwd(), path))


@lru_cache(maxsize=16384)
def _absolute_realpath(path: str) -> str:
    """The editor's server clears this between checks (memlint/document.py)."""
    return os.path.realpath(path)


def repo_root(path: str) -> str:
    """The nearest directory at or above `path` holding .git or pyproject.toml (else its dir)."""
    start = os.path.abspath(path)
    return _root_of(start if os.path.isdir(start) else os.path.dirname(start))


@lru_cache(maxsize=256)
def _root_of(current: str) -> str:
    """repo_root of a directory; cached, as find_pyproject is, for the life of one run."""
    probe = current
    while True:
        if os.path.exists(os.path.join(probe, ".git")) or os.path.isfile(
                os.path.join(probe, "pyproject.toml")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return current
        probe = parent
