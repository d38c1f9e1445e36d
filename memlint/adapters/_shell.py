"""A static reader for bash launch scripts: words with positions, variables, arrays, no execution.

Python's `shlex` knows POSIX quoting but neither reports where a token starts (its `lineno` is the
line it has reached *after* the token) nor expands variables, and expansion has to happen between
the quotes (`"${ARGS[@]}"` keeps elements apart, `$OPTS` unquoted is split on blanks, single
quotes expand nothing). So this module scans the text itself, following the quoting rules of
POSIX shell as `shlex` (posix=True) does, and keeps for every character the offset it came from.
A flag that reaches Megatron through an array or a string variable therefore still points at the
line where the script wrote it.

Nothing is executed or sourced: `$(...)`, backticks, `$((...))`, positional parameters and
variables the script never sets stay as written and are reported as *unresolved* to the caller.
Conditionals (`if [ "$X" == y ]`) are decided when both sides are known; otherwise the first
branch is assumed and reported.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Optional

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
MAX_FIELDS = 100_000


class ShellError(Exception):
    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


# -- lexing ----------------------------------------------------------------------------------

@dataclass
class Seg:
    """One piece of a word. kind: lit | var | subst (command/arithmetic substitution)."""

    kind: str
    text: str = ""               # lit: the characters; var: name; subst: raw text
    origins: list = field(default_factory=list)  # lit: offset of each character
    quoted: bool = False
    offset: int = 0              # where the piece starts in the file
    op: str = ""                 # var: "", ":-", "-", ":=", "=", ":+", "+", "len", "?" (other)
    arg: Optional[list] = None   # var: segments of the operator's word (defaults)
    index: Optional[str] = None  # var: "@", "*" or an element index
    raw: str = ""                # var/subst: the source text, kept when unresolved


@dataclass
class Word:
    segs: list
    offset: int
    raw: str
    array: Optional[list] = None  # NAME=( ... ): the element words
    array_name: str = ""
    array_append: bool = False


@dataclass
class Command:
    words: list
    offset: int


class _Lexer:
    def __init__(self, text: str, shell: bool = True):
        self.text = text
        self.n = len(text)
        # argument files are not shell: parentheses (`--moe-layer-freq ([1]*2+[0])*2`) and
        # `&`, `|`, `;`, `<`, `>` are ordinary characters there
        self.separators = "\n;&|()" if shell else "\n"
        self.stop = " \t\r\n;&|<>()" if shell else " \t\r\n"
        self.shell = shell

    def commands(self) -> list:
        text, n = self.text, self.n
        out: list = []
        current: list = []
        start = 0
        i = 0
        skip_next = False
        while i < n:
            c = text[i]
            if c in " \t\r":
                i += 1
            elif c == "\\" and text.startswith("\n", i + 1):
                i += 2
            elif c in self.separators:
                if current:
                    out.append(Command(current, start))
                current = []
                i += 2 if text[i:i + 2] in ("&&", "||", ";;") else 1
            elif c == "#":
                end = text.find("\n", i)
                i = n if end < 0 else end
            elif self.shell and (c in "<>" or (c.isdigit() and re.match(r"\d+[<>]", text[i:i + 3]))):
                match = re.match(r"\d*(?:<<<|<<-?|>>|<>|>\||<|>)(&\d*-?)?", text[i:])
                i += match.end() if match else 1
                skip_next = not (match and match.group(1))
            else:
                word, i = self.word(i, stop=self.stop)
                if skip_next:
                    skip_next = False
                    continue
                if not current:
                    start = word.offset
                current.append(word)
        if current:
            out.append(Command(current, start))
        return out

    def word(self, i: int, stop: str, end: Optional[int] = None) -> tuple:
        text = self.text
        limit = self.n if end is None else end
        start = i
        segs: list = []

        def lit(ch: str, at: int, quoted: bool) -> None:
            if segs and segs[-1].kind == "lit" and segs[-1].quoted == quoted:
                segs[-1].text += ch
                segs[-1].origins.append(at)
            else:
                segs.append(Seg("lit", ch, [at], quoted, at))

        while i < limit:
            c = text[i]
            if c in stop:
                if c == "(" and end is None and self.shell:
                    match = _ASSIGN.match(self._plain(segs))
                    if match and match.end() == len(self._plain(segs)) and self._all_plain(segs):
                        elements, i = self.array(i + 1)
                        word = Word(segs, start, text[start:i], array=elements,
                                    array_name=match.group(1), array_append=bool(match.group(2)))
                        return word, i
                break
            if c == "\\":
                if i + 1 < limit and text[i + 1] == "\n":
                    i += 2
                    continue
                if i + 1 < limit:
                    lit(text[i + 1], i + 1, True)
                i += 2
            elif c == "'":
                close = text.find("'", i + 1, limit)
                if close < 0:
                    raise ShellError("unterminated single quote", i)
                if close == i + 1:
                    segs.append(Seg("lit", "", [], True, i))
                for k in range(i + 1, close):
                    lit(text[k], k, True)
                i = close + 1
            elif c == '"':
                i = self.double_quoted(i + 1, segs, lit, limit)
            elif c == "$":
                i = self.dollar(i, segs, lit, False, limit)
            elif c == "`":
                close = self._backtick_end(i, limit)
                segs.append(Seg("subst", raw=text[i:close], offset=i))
                i = close
            else:
                lit(c, i, False)
                i += 1
        return Word(segs, start, text[start:i]), i

    @staticmethod
    def _plain(segs: list) -> str:
        return "".join(s.text for s in segs if s.kind == "lit")

    @staticmethod
    def _all_plain(segs: list) -> bool:
        return all(s.kind == "lit" and not s.quoted for s in segs)

    def array(self, i: int) -> tuple:
        """Elements of `NAME=( ... )` up to the matching `)`; comments and newlines allowed."""
        text, n = self.text, self.n
        elements: list = []
        while i < n:
            c = text[i]
            if c in " \t\r\n":
                i += 1
            elif c == "\\" and text.startswith("\n", i + 1):
                i += 2
            elif c == "#":
                end = text.find("\n", i)
                i = n if end < 0 else end
            elif c == ")":
                return elements, i + 1
            else:
                word, j = self.word(i, stop=" \t\r\n)")
                if j == i:  # a character no word can hold; step over it
                    j = i + 1
                elements.append(word)
                i = j
        raise ShellError("unterminated array: no closing ')'", i)

    def double_quoted(self, i: int, segs: list, lit, limit: int) -> int:
        text = self.text
        opened = i - 1
        empty = True
        while i < limit:
            c = text[i]
            if c == '"':
                if empty:
                    segs.append(Seg("lit", "", [], True, opened))
                return i + 1
            empty = False
            if c == "\\" and i + 1 < limit and text[i + 1] in '$`"\\\n':
                if text[i + 1] != "\n":
                    lit(text[i + 1], i + 1, True)
                i += 2
            elif c == "$":
                i = self.dollar(i, segs, lit, True, limit)
            elif c == "`":
                close = self._backtick_end(i, limit)
                segs.append(Seg("subst", raw=text[i:close], offset=i, quoted=True))
                i = close
            else:
                lit(c, i, True)
                i += 1
        raise ShellError("unterminated double quote", opened)

    def _backtick_end(self, i: int, limit: int) -> int:
        k = i + 1
        while k < limit:
            if self.text[k] == "\\":
                k += 2
                continue
            if self.text[k] == "`":
                return k + 1
            k += 1
        raise ShellError("unterminated backquote", i)

    def _matching(self, i: int, open_ch: str, close_ch: str, limit: int) -> int:
        """Offset just past the `close_ch` matching the `open_ch` at i (quotes respected)."""
        text = self.text
        depth = 0
        k = i
        while k < limit:
            c = text[k]
            if c == "\\":
                k += 2
                continue
            if c == "'" and open_ch != "{":
                close = text.find("'", k + 1, limit)
                k = limit if close < 0 else close + 1
                continue
            if c == open_ch:
                depth += 1
            elif c == close_ch:
                depth -= 1
                if depth == 0:
                    return k + 1
            k += 1
        raise ShellError(f"no closing {close_ch!r}", i)

    def dollar(self, i: int, segs: list, lit, quoted: bool, limit: int) -> int:
        text = self.text
        nxt = text[i + 1] if i + 1 < limit else ""
        if nxt == "(":
            close = self._matching(i + 1, "(", ")", limit)
            segs.append(Seg("subst", raw=text[i:close], offset=i, quoted=quoted))
            return close
        if nxt == "{":
            close = self._matching(i + 1, "{", "}", limit)
            segs.append(self.braced(i, close, quoted))
            return close
        match = _NAME.match(text, i + 1, limit)
        if match:
            segs.append(Seg("var", match.group(0), quoted=quoted, offset=i, raw=text[i:match.end()]))
            return match.end()
        if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
            segs.append(Seg("var", nxt, quoted=quoted, offset=i, raw=text[i:i + 2]))
            return i + 2
        lit("$", i, quoted)
        return i + 1

    def braced(self, i: int, close: int, quoted: bool) -> Seg:
        text = self.text
        inner_start, inner_end = i + 2, close - 1
        inner = text[inner_start:inner_end]
        raw = text[i:close]
        if inner.startswith("#") and len(inner) > 1:
            return Seg("var", inner[1:], quoted=quoted, offset=i, op="len", raw=raw)
        match = re.match(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!])(?:\[([^\]]*)\])?", inner)
        if not match:
            return Seg("var", inner, quoted=quoted, offset=i, op="?", raw=raw)
        name, index = match.group(1), match.group(2)
        rest = inner[match.end():]
        seg = Seg("var", name, quoted=quoted, offset=i, index=index, raw=raw)
        if not rest:
            return seg
        op = re.match(r":?[-=+?]", rest)
        if not op:
            seg.op = "?"
            return seg
        seg.op = op.group(0)
        arg_start = inner_start + match.end() + op.end()
        word, _ = self.word(arg_start, stop="", end=inner_end)
        seg.arg = word.segs
        return seg


# -- expansion -------------------------------------------------------------------------------

@dataclass
class Value:
    """A variable's value: characters with their source offsets, or an array of such."""

    text: str = ""
    origins: list = field(default_factory=list)
    unresolved: tuple = ()
    items: Optional[list] = None  # arrays: list of Field


@dataclass
class Field:
    """One word after expansion: its text, each character's offset, and what it could not know."""

    text: str
    origins: list
    offset: int                  # where the word (not the characters) starts
    unresolved: tuple = ()

    @property
    def origin(self) -> int:
        return self.origins[0] if self.origins else self.offset


@dataclass
class Script:
    text: str
    commands: list
    line_starts: list

    def where(self, offset: int) -> tuple:
        index = bisect.bisect_right(self.line_starts, offset) - 1
        return index + 1, offset - self.line_starts[index] + 1


def parse(text: str, shell: bool = True) -> Script:
    """Lex a script into commands. Raises ShellError (with an offset) on broken quoting.

    shell=False reads a plain argument list (quotes and comments only, no operators)."""
    lexer = _Lexer(text, shell)
    commands = lexer.commands()
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    return Script(text, commands, starts)


class Expander:
    """Expands words against the variables a script has set so far."""

    def __init__(self, env: Optional[dict] = None):
        self.env: dict = dict(env or {})

    def value_of(self, seg: Seg) -> Optional[Value]:
        value = self.env.get(seg.text)
        if value is None:
            return None
        if value.items is not None:
            if seg.index in ("@", "*"):
                return value
            position = 0 if seg.index is None else seg.index
            if str(position).isdigit() and int(position) < len(value.items):
                item = value.items[int(position)]
                return Value(item.text, item.origins, item.unresolved)
            return Value()
        return value

    def fields(self, word: Word, split: bool = True) -> list:
        """Bash word expansion: variables, then field splitting of unquoted results."""
        out: list = []
        cur_text: list = []
        cur_orig: list = []
        cur_unres: list = []
        state = {"touched": False}

        def flush(force: bool = False) -> None:
            if cur_text or force or state["touched"]:
                out.append(Field("".join(cur_text), list(cur_orig), word.offset,
                                 tuple(dict.fromkeys(cur_unres))))
            cur_text.clear()
            cur_orig.clear()
            cur_unres.clear()
            state["touched"] = False

        def add(text: str, origins: list, quoted: bool, unresolved: tuple = (),
                literal: bool = False) -> None:
            cur_unres.extend(unresolved)
            if quoted or literal or not split:
                cur_text.append(text)
                cur_orig.extend(origins)
                if quoted:
                    state["touched"] = True
                return
            for k, ch in enumerate(text):
                if ch in " \t\n":
                    if cur_text and "".join(cur_text):
                        flush()
                    continue
                cur_text.append(ch)
                cur_orig.append(origins[k] if k < len(origins) else word.offset)

        for seg in self._segments(word.segs):
            kind, payload = seg
            if kind == "lit":
                s = payload
                add(s.text, s.origins, s.quoted, literal=True)
            elif kind == "raw":
                s, reason = payload
                add(s.raw, [s.offset] * len(s.raw), s.quoted, (reason,), literal=True)
            elif kind == "value":
                s, value = payload
                if value.items is not None:
                    items = value.items
                    if s.quoted and s.index == "*":
                        joined = " ".join(f.text for f in items)
                        origins: list = []
                        for k, f in enumerate(items):
                            origins.extend(f.origins or [f.offset] * len(f.text))
                            if k < len(items) - 1:
                                origins.append(f.offset)
                        add(joined, origins, True,
                            tuple(u for f in items for u in f.unresolved))
                        continue
                    for k, item in enumerate(items):
                        if k > 0:
                            flush(force=s.quoted)
                        add(item.text, item.origins or [item.offset] * len(item.text),
                            s.quoted, item.unresolved)
                        if s.quoted:
                            state["touched"] = True
                else:
                    add(value.text, value.origins or [s.offset] * len(value.text), s.quoted,
                        value.unresolved)
            if len(out) > MAX_FIELDS:
                break
        flush()
        return out

    def _segments(self, segs: list):
        """Resolve each segment: ('lit', Seg) | ('value', (Seg, Value)) | ('raw', (Seg, why))."""
        for seg in segs:
            if seg.kind == "lit":
                yield "lit", seg
            elif seg.kind == "subst":
                kind = "arithmetic" if seg.raw.startswith("$((") else "command substitution"
                yield "raw", (seg, f"{seg.raw} ({kind}, not run)")
            else:
                yield from self._variable(seg)

    def _variable(self, seg: Seg):
        if seg.op in ("len", "?"):
            yield "raw", (seg, f"{seg.raw} (expansion not supported statically)")
            return
        value = self.value_of(seg)
        is_set = value is not None
        non_empty = is_set and (bool(value.items) if value.items is not None else bool(value.text))
        op = seg.op
        if op in (":-", "-", ":=", "="):
            use_default = not non_empty if op.startswith(":") else not is_set
            if use_default:
                default = self._expand_arg(seg)
                if op in (":=", "="):
                    self.env[seg.text] = default
                yield "value", (seg, default)
                return
        elif op in (":+", "+"):
            use_alt = non_empty if op.startswith(":") else is_set
            yield "value", (seg, self._expand_arg(seg) if use_alt else Value())
            return
        if value is None:
            if seg.text.isdigit() or seg.text in "@*#?$!-":
                why = f"{seg.raw} (a positional or special parameter)"
            else:
                why = f"{seg.raw} (not set in the script)"
            yield "raw", (seg, why)
            return
        yield "value", (seg, value)

    def _expand_arg(self, seg: Seg) -> Value:
        fake = Word(seg.arg or [], seg.offset, seg.raw)
        found = self.fields(fake, split=False)
        if not found:
            return Value()
        first = found[0]
        return Value(first.text, first.origins, first.unresolved)

    def assign_value(self, word: Word, start_index: int) -> Value:
        """The value of `NAME=value` (no field splitting), from segment text after the '='."""
        segs = _after_equals(word.segs, start_index)
        found = self.fields(Word(segs, word.offset, word.raw), split=False)
        if not found:
            return Value()
        return Value(found[0].text, found[0].origins, found[0].unresolved)

    def array_value(self, word: Word) -> list:
        items: list = []
        for element in word.array or []:
            items.extend(self.fields(element))
        return items


def _after_equals(segs: list, count: int) -> list:
    """Drop the first `count` characters (the `NAME=` prefix, all literal) from the segments."""
    out: list = []
    remaining = count
    for seg in segs:
        if remaining <= 0:
            out.append(seg)
            continue
        if seg.kind != "lit":
            out.append(seg)
            remaining = 0
            continue
        if len(seg.text) <= remaining:
            remaining -= len(seg.text)
            continue
        out.append(Seg("lit", seg.text[remaining:], seg.origins[remaining:], seg.quoted,
                       seg.origins[remaining] if remaining < len(seg.origins) else seg.offset))
        remaining = 0
    return out


def assignment(word: Word) -> Optional[tuple]:
    """`NAME=...` / `NAME+=...` at the start of a word (unquoted): (name, append, prefix_len)."""
    if word.array is not None:
        return word.array_name, word.array_append, 0
    prefix = ""
    for seg in word.segs:
        if seg.kind != "lit" or seg.quoted:
            break
        prefix += seg.text
        if "=" in seg.text:
            break
    match = _ASSIGN.match(prefix)
    if not match:
        return None
    return match.group(1), bool(match.group(2)), match.end()
