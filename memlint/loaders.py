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
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from memlint.diagnostics import (DUPLICATE_KEY, PARSE_ERROR, Diagnostic, Severity, make)
from memlint.ir import Provenance

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_YAML_NODES = 50_000


@dataclass
class Document:
    path: str
    data: Any = None
    positions: dict = field(default_factory=dict)
    diagnostics: list = field(default_factory=list)
    text: str = ""

    @property
    def ok(self) -> bool:
        return not any(d.severity == Severity.ERROR and d.code == PARSE_ERROR[0]
                       for d in self.diagnostics)

    def prov(self, path: tuple, key: Optional[str] = None) -> Provenance:
        """Provenance of the key at `path`; falls back to the nearest located parent."""
        probe = tuple(path)
        while probe and probe not in self.positions:
            probe = probe[:-1]
        line, col = self.positions.get(probe, (None, None))
        label = key if key is not None else ".".join(str(p) for p in path) or None
        return Provenance(self.path, line, col, label)


def read_text(path: str, max_bytes: int = MAX_FILE_BYTES) -> tuple[Optional[str], list]:
    """Read a config file as UTF-8 text, with a size limit. Problems become diagnostics."""
    prov = Provenance(path, None, None, None)
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        return None, [make(PARSE_ERROR, Severity.ERROR, f"cannot read file: {exc.strerror}", prov)]
    if size > max_bytes:
        return None, [make(PARSE_ERROR, Severity.ERROR,
                           f"file is {size} bytes, over the {max_bytes}-byte limit for configs "
                           "(raise it with --max-file-size)", prov)]
    try:
        with open(path, "rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        return None, [make(PARSE_ERROR, Severity.ERROR, f"cannot read file: {exc.strerror}", prov)]
    return decode_bytes(raw, path)


def decode_bytes(raw: bytes, path: str) -> tuple[Optional[str], list]:
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


_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_PLAIN_RUN = re.compile(r'[^"\\\n]*')
_WHITESPACE = re.compile(r"[ \t\r\n]+")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class _JSONParser:
    def __init__(self, text: str, doc: Document, allow_comments: bool):
        self.text = text
        self.pos = 0
        self.doc = doc
        self.allow_comments = allow_comments
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
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return val
        for word, val in (("NaN", float("nan")), ("Infinity", float("inf")),
                          ("-Infinity", float("-inf"))):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return val
        match = _NUMBER.match(self.text, self.pos)
        if match and match.end() > self.pos:
            self.pos = match.end()
            token = match.group(0)
            if any(c in token for c in ".eE"):
                return float(token)
            return int(token)
        end = self.pos
        while end < len(self.text) and (self.text[end].isalnum() or self.text[end] in "_$-."):
            end += 1
        word = self.text[self.pos:end] or self.text[self.pos]
        raise _JSONError(f"unexpected {word!r} (not a JSON value: quote strings, "
                         "and replace template placeholders)", self.pos)

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
            if self.pos >= len(self.text) or self.text[self.pos] != '"':
                raise _JSONError("expected a quoted key", self.pos)
            key_at = self.pos
            key = self.string()
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
            if ch == '"' and self.line_break_separates(end):
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
            child = path + (len(result),)
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


def load_json(path: str, text: str, allow_comments: bool = True) -> Document:
    doc = Document(path=path, text=text)
    parser = _JSONParser(text, doc, allow_comments)
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
_YAML_COMPACT = re.compile(r"^[ \t]*((?:[-?:][ \t]+)*)", re.M)


def _yaml_depth_bound(text: str) -> int:
    """An upper bound on a YAML document's nesting depth, cheap to compute: every flow level
    needs its own '[' or '{', and every block level more indentation or another compact
    indicator ('- - x') on its line."""
    flow = text.count("[") + text.count("{")
    block = 0
    for match in _YAML_COMPACT.finditer(text):
        indent = len(match.group(0)) - len(match.group(1))
        block = max(block, indent + match.group(1).count("-") + match.group(1).count("?")
                    + match.group(1).count(":"))
    return flow + block + 1


def load_yaml(path: str, text: str) -> Document:
    import yaml

    doc = Document(path=path, text=text)
    loader = yaml.SafeLoader
    if _yaml_depth_bound(text) <= _C_YAML_MAX_DEPTH:
        # libyaml's parser when PyYAML has it (5-10x faster); the nodes, marks and errors are
        # the same as the pure-Python SafeLoader's, which remains the fallback
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
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
    safe = yaml.SafeLoader("")
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
    import yaml

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
        try:
            return safe.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise _YAMLError(str(exc), node.start_mark) from None
    if isinstance(node, yaml.SequenceNode):
        out = []
        for item in node.value:
            child = path + (len(out),)
            doc.positions.setdefault(child, (item.start_mark.line + 1, item.start_mark.column + 1))
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
                first = doc.positions.get(child, (None, None))
                # PyYAML's safe_load (accelerate, axolotl, Megatron's test configs) keeps the
                # later value without a word: a likely mistake, not a launch failure; memlint's
                # own files reject it
                own = str(doc.path).endswith((".memlint.yaml", ".memlint.yml"))
                doc.diagnostics.append(make(
                    DUPLICATE_KEY, Severity.ERROR if own else Severity.WARNING,
                    f"duplicate key {key!r} (first at line {first[0]}); the later value wins "
                    "silently in most YAML loaders",
                    Provenance(doc.path, line, col, ".".join(map(str, child)))))
            doc.positions[child] = (line, col)
            out[key] = _yaml_value(value_node, child, doc, safe, budget, depth + 1)
        return out
    raise _YAMLError("unsupported YAML node", node.start_mark)


# ---------------------------------------------------------------------------------------------
# TOML

_TOML_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.\-" ]+?)\s*=""")


def _toml_key_parts(raw: str) -> tuple:
    parts = []
    for part in re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', raw):
        part = part.strip()
        if part[:1] in "\"'":
            part = part[1:-1]
        parts.append(part)
    return tuple(parts)


def load_toml(path: str, text: str) -> Document:
    try:
        import tomllib  # type: ignore[import-not-found]
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]

    doc = Document(path=path, text=text)
    try:
        doc.data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"at line (\d+), column (\d+)", message)
        line, col = (int(match.group(1)), int(match.group(2))) if match else (None, None)
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", message)
        doc.diagnostics.append(make(PARSE_ERROR, Severity.ERROR, f"invalid TOML: {message}",
                                    Provenance(path, line, col, None)))
        return doc
    except RecursionError:
        doc.diagnostics.append(make(PARSE_ERROR, Severity.ERROR, "invalid TOML: nesting too deep",
                                    Provenance(path, 1, 1, None)))
        return doc
    table: tuple = ()
    in_multiline = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_multiline:
            if in_multiline in line:
                in_multiline = None
            continue
        header = _TOML_HEADER.match(line)
        if header:
            table = _toml_key_parts(header.group(1))
            doc.positions.setdefault(table, (number, line.index("[") + 1))
            continue
        key = _TOML_KEY.match(line)
        if key:
            parts = _toml_key_parts(key.group(1))
            column = len(line) - len(line.lstrip()) + 1
            doc.positions.setdefault(table + parts, (number, column))
            rest = line[key.end():]
            for quote in ('"""', "'''"):
                if rest.count(quote) == 1:
                    in_multiline = quote
    return doc


def suppressions(text: str) -> dict:
    """`# memlint: disable=ML301,name` comments: line -> set of codes/names (lower-case).

    A comment alone on its line applies to the next line too; `disable-file=` applies everywhere
    (stored under line 0).
    """
    found: dict = {}
    pattern = re.compile(r"#\s*memlint:\s*(disable(?:-file|-next-line)?)\s*=\s*([A-Za-z0-9_,\- ]+)")
    for number, line in enumerate(text.splitlines(), start=1):
        match = pattern.search(line)
        if not match:
            continue
        names = {n.strip().lower() for n in match.group(2).split(",") if n.strip()}
        kind = match.group(1)
        if kind == "disable-file":
            found.setdefault(0, set()).update(names)
            continue
        found.setdefault(number, set()).update(names)
        if kind == "disable-next-line" or line[:match.start()].strip() == "":
            found.setdefault(number + 1, set()).update(names)
    return found
