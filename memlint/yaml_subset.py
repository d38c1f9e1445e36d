"""YAML documents written in the plain subset most config files use, read without PyYAML.

PyYAML is most of a one-file YAML check's start-up budget: `import yaml` is about 30 million
instructions (callgrind, issue 29; its `__init__` imports every module, and its C extension
imports `yaml` too, so it cannot be imported in part) and composing a small config with
positions, then building its values, about 8 million more, where a whole DeepSpeed JSON check
takes 89 million above the bare interpreter. The configs that training tools read (axolotl,
LLaMA-Factory, accelerate, TRL and HF Trainer recipes, Megatron's test configs, gpt-neox's JSON-
like files) use a small part of YAML:

- block mappings and block sequences (indentless ones under a key too), each key on one line;
- one-line plain scalars, one-line single-quoted scalars, one-line double-quoted scalars with
  the escapes `\\\\ \\" \\/ \\n \\t \\r`;
- flow sequences and mappings (`[0.9, 0.95]`, `{}`, gpt-neox's whole-file `{ "key": value, }`),
  over several lines too, of those scalars;
- comments, blank lines, and one `---` line before the document.

`read(text, ...)` returns what loaders' PyYAML path (`loaders._load_pyyaml`) gives for such a
document: the values as PyYAML's SafeLoader resolves plain scalars (YAML 1.1: `yes`/`on` are
booleans, `1e-5` is a string, `1.0e-5` a float, `012` octal, `1_000` an int), the 1-based (line,
column) of every key and of every list item (the first loaders.MAX_ITEM_POSITIONS of a list), as
PyYAML's marks give them, and the duplicate keys in the order that path reports them. It returns
None for anything else, which the PyYAML path then reads as before: anchors, aliases, tags, block
scalars, complex and merge keys, multi-line plain or quoted scalars, other escapes, timestamps,
`0x`/`0b`/`.inf`/`.nan`/sexagesimal numbers, `:` or `#` inside a plain scalar in a flow
collection, tabs, CR line ends, control and BOM characters, several documents, directives,
nesting near loaders' bounds, and every document PyYAML rejects (no error comes from here).
tests/test_yaml_subset.py checks that the two agree on every YAML file of the repository's
fixtures (with both of PyYAML's loaders) and on generated documents (hypothesis).
"""
from __future__ import annotations

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

# the bounds of loaders' PyYAML path, met from further off: a document near them goes there
MAX_DEPTH = 48                 # loaders.MAX_DEPTH is 64
MAX_NODES = 40_000             # loaders.MAX_YAML_NODES is 50,000
_LONGEST_KEY = 1000            # PyYAML and libyaml refuse a simple key over 1,024 characters
_LONGEST_NUMBER = 100          # int() of a long number: loaders' MAX_INT_DIGITS check decides

_BOOL = {"yes": True, "Yes": True, "YES": True, "no": False, "No": False, "NO": False,
         "true": True, "True": True, "TRUE": True, "false": False, "False": False,
         "FALSE": False, "on": True, "On": True, "ON": True, "off": False, "Off": False,
         "OFF": False}
_NULL = frozenset(("~", "null", "Null", "NULL"))
_NUMERIC_START = frozenset("-+0123456789.")
_DIGITS = frozenset("0123456789")
_OCTAL_CHARS = frozenset("01234567_")
_INT_CHARS = frozenset("0123456789_")
# a plain scalar may not start with these (PyYAML's check_plain); '-', '?', ':' may when a
# non-blank follows (in a block; in a flow only '-' is read here)
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
_FLOW_STOP = frozenset(",[]{}:?#")
_ESCAPES = {"\\": "\\", '"': '"', "/": "/", "n": "\n", "t": "\t", "r": "\r"}
# characters outside the subset anywhere in the document: tab, CR, the other C0 and C1 controls
# (PyYAML's reader refuses most; NEL is a YAML line break), DEL, BOM, U+2028/9 (line breaks)
_REFUSED = frozenset([chr(c) for c in range(32) if c != 10] + [chr(c) for c in range(127, 160)]
                     + ["\ufeff", "\ufffe", "\uffff", "\u2028", "\u2029"])


class _Outside(Exception):
    """The document is not in the subset (or not YAML)."""


def read(text: str, item_positions: int) -> Optional[tuple]:
    """(data, positions, duplicates) as loaders.load_yaml's PyYAML path gives them, or None when
    the document is outside the subset. duplicates: (key, key path, (line, column), the first
    one's (line, column)) of each duplicate key, in the order that path reports them.
    `item_positions`: positions are kept for the first that many items of a list
    (loaders.MAX_ITEM_POSITIONS)."""
    if not _REFUSED.isdisjoint(text):
        return None
    if not text.isascii() and any("\ud800" <= ch <= "\udfff" for ch in set(text)):
        return None   # lone surrogates (an editor buffer): not text PyYAML reads
    try:
        return _Reader(text, item_positions).document()
    except _Outside:
        return None


class _Reader:
    def __init__(self, text: str, item_positions: int):
        self.item_positions = item_positions
        self.lines = lines = text.split("\n")
        # each line's indent, or -1 for a blank or comment line
        indents = []
        for line in lines:
            content = line.lstrip(" ")
            indents.append(-1 if not content or content[0] == "#" else len(line) - len(content))
            if line[:1] in ("-", ".", "%") and (line.startswith(("---", "...", "%"))):
                if line[:1] == "%" or len(line) == 3 or line[3] == " ":
                    indents[-1] = -2   # a directive or a document marker
        self.indents = indents
        self.positions: dict = {}
        self.duplicates: list = []
        self.nodes = 0
        self.line = 0   # the first line not read yet (block context)

    # ---- document

    def document(self) -> tuple:
        first = self._next(0)
        if first is not None and self.indents[first] == -2:
            marker = self.lines[first]
            rest = marker[3:].lstrip(" ")
            if not marker.startswith("---") or rest and not (rest[0] == "#" and
                                                              marker[3] == " "):
                raise _Outside   # a directive, `...`, or content after `---`
            first = self._next(first + 1)
        if first is None:
            return None, {}, []
        if self.indents[first] < 0:
            raise _Outside
        col = self.indents[first]
        value = self._block_node(first, col, (), 0, inline=False)
        if self._next(self.line) is not None:
            raise _Outside   # more after the document's node (a second document, bad indent)
        return value, self.positions, self.duplicates

    def _next(self, index: int) -> Optional[int]:
        """The first line at or after `index` with content (a marker counts as content)."""
        indents = self.indents
        while index < len(indents):
            if indents[index] != -1:
                return index
            index += 1
        return None

    def _count(self, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES or depth > MAX_DEPTH:
            raise _Outside

    # ---- block context

    def _block_node(self, index: int, col: int, path: tuple, depth: int, inline: bool):
        """The node whose content starts at column `col` of line `index`; `inline`: after
        `key: ` on the same line (no block collection may start there). Leaves self.line at the
        line after it; the collection holding it checks the indentation of what follows (a line
        indented deeper after a scalar would go on with it: PyYAML's scan_plain)."""
        line = self.lines[index]
        char = line[col]
        if char == "-" and (col + 1 == len(line) or line[col + 1] == " "):
            if inline:
                raise _Outside
            return self._sequence(index, col, path, depth, indentless=False)
        if char in "[{":
            value, end_index, end = self._flow(index, col, path, depth)
            self._end_of_line(self.lines[end_index], end)
            self.line = end_index + 1
            return value
        if char in "'\"":
            value, end = self._quoted(line, col)
            after = _skip(line, end)
            if after < len(line) and line[after] == ":" and (after + 1 == len(line)
                                                              or line[after + 1] == " "):
                if inline:
                    raise _Outside
                return self._mapping(index, col, path, depth)
            self._end_of_line(line, end)
            self.line = index + 1
            self._count(depth)
            return value
        if char in _INDICATORS and (char not in "-?:" or col + 1 == len(line)
                                    or line[col + 1] == " "):
            raise _Outside   # anchors, aliases, tags, block scalars, complex keys, ...
        end, kind = _plain_end(line, col)
        if kind == ":":
            if inline:
                raise _Outside
            return self._mapping(index, col, path, depth)
        self.line = index + 1
        self._count(depth)
        return _resolve(line[col:end].rstrip(" "))

    def _end_of_line(self, line: str, pos: int) -> None:
        """Only blanks, then a comment, may follow a quoted scalar or a flow collection."""
        after = _skip(line, pos)
        if after < len(line) and (line[after] != "#" or after == pos):
            raise _Outside

    def _key(self, index: int, col: int) -> tuple:
        """The key at column `col` of line `index` and the position after its ':'."""
        line = self.lines[index]
        char = line[col]
        if char in "'\"":
            key, end = self._quoted(line, col)
            end = _skip(line, end)
        else:
            if char in _INDICATORS and (char not in "-?:" or col + 1 == len(line)
                                        or line[col + 1] == " "):
                raise _Outside
            end, kind = _plain_end(line, col)
            if kind != ":":
                raise _Outside
            key = _resolve(line[col:end].rstrip(" "))   # declines a merge key (<<)
        if end >= len(line) or line[end] != ":" or (end + 1 < len(line) and line[end + 1] != " "):
            raise _Outside
        if end - col > _LONGEST_KEY:
            raise _Outside
        return key, end + 1

    def _mapping(self, index: int, col: int, path: tuple, depth: int) -> dict:
        self._count(depth)
        out: dict = {}
        positions = self.positions
        lines, indents = self.lines, self.indents
        while True:
            key, after = self._key(index, col)
            self._count(depth + 1)
            child = path + (key,)
            where = (index + 1, col + 1)
            if key in out:
                self.duplicates.append((key, child, where, positions.get(child, (None, None))))
            positions[child] = where
            line = lines[index]
            pos = _skip(line, after)
            if pos < len(line) and line[pos] != "#":
                value = self._block_node(index, pos, child, depth + 1, inline=True)
            else:   # the value is on the lines below, or empty
                below = self._next(index + 1)
                if below is not None and indents[below] > col:
                    value = self._block_node(below, indents[below], child, depth + 1,
                                             inline=False)
                elif below is not None and indents[below] == col and _entry(lines[below], col):
                    value = self._sequence(below, col, child, depth + 1, indentless=True)
                else:
                    self._count(depth + 1)
                    value = None
                    self.line = index + 1
            out[key] = value
            index = self._next(self.line)
            if index is None or 0 <= indents[index] < col:
                return out
            if indents[index] != col or _entry(lines[index], col):
                raise _Outside

    def _sequence(self, index: int, col: int, path: tuple, depth: int,
                  indentless: bool) -> list:
        self._count(depth)
        out: list = []
        positions = self.positions
        lines, indents = self.lines, self.indents
        while True:
            line = lines[index]
            pos = _skip(line, col + 1)
            child = path + (len(out),)
            if pos < len(line) and line[pos] != "#":
                if len(out) < self.item_positions:
                    positions.setdefault(child, (index + 1, pos + 1))
                value = self._block_node(index, pos, child, depth + 1, inline=False)
            else:
                below = self._next(index + 1)
                if below is not None and indents[below] > col:
                    if len(out) < self.item_positions:
                        positions.setdefault(child, (below + 1, indents[below] + 1))
                    value = self._block_node(below, indents[below], child, depth + 1,
                                             inline=False)
                else:   # an empty item: PyYAML marks it just after its '-'
                    if len(out) < self.item_positions:
                        positions.setdefault(child, (index + 1, col + 2))
                    self._count(depth + 1)
                    value = None
                    self.line = index + 1
            out.append(value)
            index = self._next(self.line)
            if index is None or 0 <= indents[index] < col:
                return out
            if indents[index] == col and _entry(lines[index], col):
                continue
            if indentless and indents[index] == col:
                return out
            raise _Outside

    # ---- scalars

    def _quoted(self, line: str, col: int) -> tuple:
        """A one-line quoted scalar at `col`: its value and the position after it."""
        quote = line[col]
        if quote == "'":
            pos = col + 1
            while True:
                end = line.find("'", pos)
                if end < 0:
                    raise _Outside   # runs onto the next line
                if line.startswith("''", end):
                    pos = end + 2
                    continue
                return line[col + 1:end].replace("''", "'"), end + 1
        parts = []
        pos = col + 1
        while True:
            end = line.find('"', pos)
            if end < 0:
                raise _Outside
            slash = line.find("\\", pos, end)
            if slash < 0:
                parts.append(line[pos:end])
                return "".join(parts), end + 1
            parts.append(line[pos:slash])
            escaped = _ESCAPES.get(line[slash + 1:slash + 2])
            if escaped is None:
                raise _Outside   # other escapes (\x, \u, \0, a line continuation, ...)
            parts.append(escaped)
            pos = slash + 2

    # ---- flow context

    def _flow(self, index: int, col: int, path: tuple, depth: int) -> tuple:
        """The flow collection starting at column `col` of line `index`: (value, its last line,
        the position after its closing bracket). PyYAML and libyaml ask no indentation of its
        lines (the scanner's indentation is not checked in a flow context)."""
        self.at = (index, col + 1)
        value = self._flow_collection(self.lines[index][col], path, depth)
        return value, self.at[0], self.at[1]

    def _skip_flow(self) -> tuple:
        """The next position with content in a flow collection (blanks, line ends and comments
        skipped): (line index, position)."""
        index, pos = self.at
        lines, indents = self.lines, self.indents
        line = lines[index]
        pos = _skip(line, pos)
        if pos < len(line):
            if line[pos] != "#":
                self.at = (index, pos)
                return index, pos
            if pos > 0 and line[pos - 1] != " ":   # a '#' right after a token
                raise _Outside
        while True:   # the next line with content (not a blank or comment line)
            index += 1
            if index >= len(lines) or indents[index] == -2:
                raise _Outside   # the end of the document inside a flow collection
            if indents[index] >= 0:
                self.at = (index, indents[index])
                return self.at

    def _flow_collection(self, opening: str, path: tuple, depth: int):
        self._count(depth)
        closing = "]" if opening == "[" else "}"
        out = [] if opening == "[" else {}
        positions = self.positions
        while True:
            index, pos = self._skip_flow()
            line = self.lines[index]
            if line[pos] == closing:
                self.at = (index, pos + 1)
                return out
            if opening == "[":
                child = path + (len(out),)
                if len(out) < self.item_positions:
                    positions.setdefault(child, (index + 1, pos + 1))
                out.append(self._flow_node(index, pos, child, depth + 1))
            else:
                key, after = self._flow_scalar(index, pos, depth + 1, key=True)
                if after >= len(line) or line[after] != ":":
                    raise _Outside   # a key without a value, or its ':' on another line
                if after + 1 < len(line) and line[after + 1] != " " and line[pos] not in "'\"":
                    raise _Outside
                child = path + (key,)
                where = (index + 1, pos + 1)
                if key in out:
                    self.duplicates.append((key, child, where,
                                            positions.get(child, (None, None))))
                positions[child] = where
                self.at = (index, after + 1)
                index, pos = self._skip_flow()
                if self.lines[index][pos] in ",}":
                    raise _Outside   # an empty value
                out[key] = self._flow_node(index, pos, child, depth + 1)
            index, pos = self._skip_flow()
            char = self.lines[index][pos]
            if char == ",":
                self.at = (index, pos + 1)
                continue
            if char != closing:
                raise _Outside
            self.at = (index, pos + 1)
            return out

    def _flow_node(self, index: int, pos: int, path: tuple, depth: int):
        char = self.lines[index][pos]
        if char in "[{":
            self.at = (index, pos + 1)
            return self._flow_collection(char, path, depth)
        value, end = self._flow_scalar(index, pos, depth, key=False)
        self.at = (index, end)
        return value

    def _flow_scalar(self, index: int, pos: int, depth: int, key: bool) -> tuple:
        """A scalar in a flow collection: its value and the position after it (a key: the
        position of the blanks and ':' after it)."""
        self._count(depth)
        line = self.lines[index]
        char = line[pos]
        if char in "'\"":
            value, end = self._quoted(line, pos)
            return value, (_skip(line, end) if key else end)
        if char in _INDICATORS and (char != "-" or pos + 1 == len(line)
                                    or line[pos + 1] in " ,[]{}"):
            raise _Outside
        end = pos
        size = len(line)
        while end < size:
            char = line[end]
            if char in _FLOW_STOP:
                if char in ",]}" or char == "#" and line[end - 1] == " ":
                    break
                if char == ":" and key and (end + 1 == size or line[end + 1] == " "):
                    break
                raise _Outside   # ':', '?', '[', '{', '#' in a plain scalar: left to PyYAML
            end += 1
        text = line[pos:end].rstrip(" ")
        if len(text) > _LONGEST_KEY:
            raise _Outside
        if key:
            if end == size or line[end] != ":":
                raise _Outside
        elif end == size or line[end] == "#":
            # a plain scalar goes on over a line break: only a ',' or a closing bracket may
            # come next for it to end here
            self.at = (index, end)
            at_index, at_pos = self._skip_flow()
            if self.lines[at_index][at_pos] not in ",]}":
                raise _Outside
        return _resolve(text), end


def _skip(line: str, pos: int) -> int:
    """The first position at or after `pos` that is not a blank."""
    if pos < len(line) and line[pos] == " ":
        return len(line) - len(line[pos:].lstrip(" "))
    return pos


def _entry(line: str, col: int) -> bool:
    """A block sequence entry (`- ` or a lone `-`) at `col`."""
    return line[col] == "-" and (col + 1 == len(line) or line[col + 1] == " ")


def _plain_end(line: str, col: int) -> tuple:
    """Where a one-line plain scalar from `col` ends in a block, and why: (position, ":") at a
    ': ' or a final ':' (a key), (position, "#") at a ' #' (a comment), (len, "") at the end."""
    colon = line.find(":", col)
    while colon >= 0 and colon + 1 < len(line) and line[colon + 1] != " ":
        colon = line.find(":", colon + 1)
    hash_ = line.find(" #", col)
    if hash_ >= 0 and (colon < 0 or hash_ < colon):
        return hash_, "#"
    if colon >= 0:
        return colon, ":"
    return len(line), ""


def _resolve(text: str):
    """A plain scalar's value as PyYAML's SafeLoader resolves and constructs it (resolver.py,
    constructor.py at 6.0); _Outside for the forms left to PyYAML."""
    if not text:
        return None
    first = text[0]
    if first in "yYnNtTfFoO":
        found = _BOOL.get(text)
        if found is not None:
            return found
    if first in "~nN" and text in _NULL:
        return None
    if first in "<=" and text in ("<<", "="):
        raise _Outside   # merge keys and the value tag
    if first not in _NUMERIC_START:
        return text
    if len(text) > _LONGEST_NUMBER:
        raise _Outside
    if first in _DIGITS and text[4:5] == "-" and _DIGITS.issuperset(text[:4]):
        raise _Outside   # a timestamp's start
    if "." in text:
        return _float(text)
    return _int(text)


def _float(text: str):
    r"""A scalar holding a '.': a float of PyYAML's first two forms (`[-+]?[0-9][0-9_]*\.[0-9_]*`
    and `\.[0-9][0-9_]*`, each with an optional `[eE][-+][0-9]+`) constructed as PyYAML does, a
    string when no float form matches; sexagesimal forms and .inf/.nan are left to PyYAML."""
    signed = text[0] in "+-"
    body = text[1:] if signed else text
    if body in (".inf", ".Inf", ".INF") or text in (".nan", ".NaN", ".NAN"):
        raise _Outside
    if ":" in body:
        if body[:1] in _DIGITS:
            raise _Outside   # perhaps sexagesimal (`1:30.5`)
        return text
    whole, _, rest = body.partition(".")
    fraction, exponent = rest, ""
    for at, char in enumerate(rest):
        if char not in _INT_CHARS:
            fraction, exponent = rest[:at], rest[at:]
            break
    if whole:
        if whole[0] not in _DIGITS or not _INT_CHARS.issuperset(whole):
            return text
    elif signed or fraction[:1] not in _DIGITS:
        return text
    if exponent and (exponent[0] not in "eE" or exponent[1:2] not in ("-", "+")
                     or len(exponent) < 3 or not _DIGITS.issuperset(exponent[2:])):
        return text
    return (-1 if text[0] == "-" else 1) * float(body.replace("_", "").lower())


def _int(text: str):
    """A scalar without a '.': an int of PyYAML's decimal or octal form constructed as PyYAML
    does, a string when no int form matches; 0b, 0x and sexagesimal forms are left to PyYAML."""
    sign = 1
    stem = text
    if stem[0] in "+-":
        sign = -1 if stem[0] == "-" else 1
        stem = stem[1:]
    if not stem or stem[0] not in _DIGITS:
        return text
    if _INT_CHARS.issuperset(stem):
        if stem[0] != "0":   # [1-9][0-9_]*
            return sign * int(stem.replace("_", ""))
        if stem == "0":
            return 0
        if _OCTAL_CHARS.issuperset(stem):   # 0[0-7_]+
            value = stem.replace("_", "")
            return 0 if value == "0" else sign * int(value, 8)
        return text   # 08, 0_9: no int form
    if ":" in stem and stem[0] != "0":
        raise _Outside   # perhaps sexagesimal (`1:30`)
    if stem[:2] in ("0b", "0x"):
        raise _Outside
    return text
