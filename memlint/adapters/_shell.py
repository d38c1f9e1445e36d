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
import fnmatch
import os
import re

from memlint import lazy_re
from memlint.records import field, record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

_NAME = lazy_re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = lazy_re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
MAX_FIELDS = 100_000


class ShellError(Exception):
    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


# -- lexing ----------------------------------------------------------------------------------

_RUNS: dict = {}
_FD_REDIRECT = lazy_re.compile(r"\d+[<>]")
_REDIRECT = lazy_re.compile(r"\d*(?:<<<|<<-?|>>|<>|>\||<|>)(&\d*-?)?")
_QUOTED_RUN = lazy_re.compile(r'[^"\\$`]+')


def _following(stop: str):
    """Blanks, then a run of ordinary characters (group 1): the next plain word on the line."""
    key = ("following", stop)
    if key not in _RUNS:
        _RUNS[key] = re.compile("[ \t\r]+(%s)" % _run(stop).pattern)
    return _RUNS[key]


def _run(stop: str, special: str = "\\'\"$`"):
    """A pattern for a run of one or more characters that are neither in `stop` nor special."""
    key = (stop, special)
    if key not in _RUNS:
        _RUNS[key] = re.compile("[^%s]+" % re.escape(stop + special) if stop + special else ".+",
                                re.S)
    return _RUNS[key]

@record(slots=True)
class Seg:
    """One piece of a word. kind: lit | var | subst (command/arithmetic substitution)."""

    kind: str
    text: str = ""               # lit: the characters; var: name; subst: raw text
    origins: list = field(default_factory=list)  # lit: offset of each character (or a range)
    quoted: bool = False
    offset: int = 0              # where the piece starts in the file
    op: str = ""                 # var: "", ":-", "-", ":=", "=", ":+", "+", "len", "?" (other)
    arg: Optional[list] = None   # var: segments of the operator's word (defaults)
    index: Optional[str] = None  # var: "@", "*" or an element index
    raw: str = ""                # var/subst: the source text, kept when unresolved


@record(slots=True)
class Word:
    segs: list
    offset: int
    raw: str
    array: Optional[list] = None  # NAME=( ... ): the element words
    array_name: str = ""
    array_append: bool = False


@record(slots=True)
class Command:
    words: list
    offset: int
    end: str = ""   # what ended it: "\n", ";", "&&", "||", "|", "&", "(", ")", ";;" or "" (EOF)


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
        heredoc = None    # `<<` or `<<-` just read: the next word is the delimiter
        heredocs: list = []   # (delimiter, strip leading tabs) whose bodies start at the newline
        stop = self.stop
        plain = _run(stop)
        following = _following(stop)
        while i < n:
            c = text[i]
            if c in " \t\r":
                i += 1
            elif c == "\\" and text.startswith("\n", i + 1):
                i += 2
            elif c in self.separators:
                end = text[i:i + 2] if text[i:i + 2] in ("&&", "||", ";;") else c
                if current or end == ";;":  # `;;` ends a case branch even on a line of its own
                    out.append(Command(current, start if current else i, end))
                current = []
                i += len(end)
                if end == "\n" and heredocs:
                    i = self._skip_heredocs(i, heredocs)
                    heredocs = []
            elif c == "#":
                end = text.find("\n", i)
                i = n if end < 0 else end
            elif self.shell and (c in "<>" or (c.isdigit() and _FD_REDIRECT.match(text, i, i + 3))):
                match = _REDIRECT.match(text, i)
                op = match.group(0) if match else ""
                i = match.end() if match else i + 1
                skip_next = not (match and match.group(1))
                heredoc = op.lstrip("0123456789") if op.lstrip("0123456789") in ("<<", "<<-") \
                    else None
            else:
                word_start = i
                run = plain.match(text, i)
                j = run.end() if run else i
                if j > i and (j == n or text[j] in stop) and not (j < n and text[j] == "("):
                    # a word of ordinary characters only (most of a launch script's words)
                    word = Word([Seg("lit", text[i:j], range(i, j), False, i)], i, text[i:j])
                    i = j
                    if not skip_next:
                        if not current:
                            start = word.offset
                        current.append(word)
                        i = self._plain_words(i, current, stop, following)
                        continue
                else:
                    word, i = self.word(i, stop=stop)
                if skip_next:
                    skip_next = False
                    if heredoc:
                        delimiter = re.sub(r"[\\'\"]", "", text[word_start:i])
                        heredocs.append((delimiter, heredoc == "<<-"))
                        heredoc = None
                    continue
                if not current:
                    start = word.offset
                current.append(word)
        if current:
            out.append(Command(current, start))
        return out

    def _plain_words(self, i: int, current: list, stop: str, following) -> int:
        """After a plain word: the plain words that follow it on the line, blank-separated, in
        one pass (the common shape of a launch command: `--flag value --flag value ...`). Stops
        before anything else (quotes, `$`, operators, `NAME=(`, a file-descriptor redirection),
        which the caller's loop reads."""
        text, n = self.text, self.n
        while True:
            match = following.match(text, i)
            if match is None:
                return i
            j = match.end()
            if j < n and (text[j] not in stop or text[j] == "("):
                return i  # the word goes on with a quote, `$`, ... or is `NAME=(`
            w = match.start(1)
            if text[w] == "#" or (self.shell and text[w].isdigit()
                                  and _FD_REDIRECT.match(text, w, w + 3)):
                return i  # a comment, or `2>file`
            value = match.group(1)
            current.append(Word([Seg("lit", value, range(w, j), False, w)], w, value))
            i = j

    def _skip_heredocs(self, i: int, heredocs: list) -> int:
        """Past the here-document bodies that start at `i`: each ends at a line that is its
        delimiter (with leading tabs removed for `<<-`); the body is data, never shell."""
        text = self.text
        for delimiter, strip_tabs in heredocs:
            while i < self.n:
                end = text.find("\n", i)
                end = self.n if end < 0 else end
                line = text[i:end]
                i = end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
        return min(i, self.n)

    def word(self, i: int, stop: str, end: Optional[int] = None) -> tuple:
        text = self.text
        limit = self.n if end is None else end
        start = i
        segs: list = []

        def lit(ch: str, at: int, quoted: bool) -> None:
            """Characters `ch` from offset `at` on (one or a run: runs keep lexing linear and
            cheap on long words)."""
            if segs and segs[-1].kind == "lit" and segs[-1].quoted == quoted:
                last = segs[-1]
                last.text += ch
                if not isinstance(last.origins, list):
                    last.origins = list(last.origins)
                last.origins.extend(range(at, at + len(ch)))
            else:  # a range until a second piece joins it: small for long runs
                segs.append(Seg("lit", ch, range(at, at + len(ch)), quoted, at))
        plain = _run(stop)

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
                else:
                    lit(text[i + 1:close], i + 1, True)
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
                j = plain.match(text, i, limit).end()  # a run of ordinary characters at once
                lit(text[i:j], i, False)
                i = j
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
            elif c == "\\":
                lit(c, i, True)
                i += 1
            else:
                j = _QUOTED_RUN.match(text, i, limit).end()
                lit(text[i:j], i, True)
                i = j
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

# Work is bounded by what a script can make its reader do, not only by the file's size: a variable
# doubled 40 times (`V1=$V0$V0`, ...) or an array doubled 40 times would expand to 2**40
# characters. A value longer than MAX_VALUE_CHARS, an array longer than MAX_ITEMS, or any
# expansion once EXPANSION_BUDGET characters have been expanded in one script, stays as written
# and is reported as unresolved (an opaque word), so time and memory stay linear in the script.
MAX_VALUE_CHARS = 1 << 16
MAX_ITEMS = 4096
EXPANSION_BUDGET = 1 << 21
_BLANKS = lazy_re.compile(r"[ \t\n]+|[^ \t\n]+")


@record(slots=True)
class Value:
    """A variable's value: characters with their source offsets, or an array of such.

    `opaque` lists (start, end) spans of the text that are one unresolved substitution: they are
    never split into words (what `$(...)` prints is unknown, so it stays one word)."""

    text: str = ""
    origins: list = field(default_factory=list)
    unresolved: tuple = ()
    items: Optional[list] = None  # arrays: list of Field
    opaque: tuple = ()

    def size(self) -> int:
        if self.items is None:
            return len(self.text)
        return sum(len(f.text) + 1 for f in self.items)


@record(slots=True)
class Field:
    """One word after expansion: its text, each character's offset, and what it could not know."""

    text: str
    origins: list
    offset: int                  # where the word (not the characters) starts
    unresolved: tuple = ()
    opaque: tuple = ()

    @property
    def origin(self) -> int:
        return self.origins[0] if self.origins else self.offset


@record(slots=True)
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


class _Builder:
    """The fields of one word as expansion produces them."""

    def __init__(self, offset: int):
        self.offset = offset
        self.out: list = []
        self.reset()

    def reset(self) -> None:
        self.text: list = []
        self.origins: list = []
        self.unresolved: list = []
        self.opaque: list = []
        self.size = 0
        self.touched = False

    def flush(self, force: bool = False) -> None:
        if self.size or force or self.touched:
            self.out.append(Field("".join(self.text), self.origins, self.offset,
                                  tuple(dict.fromkeys(self.unresolved)), tuple(self.opaque)))
        self.reset()

    def append(self, text: str, origins: list, opaque: bool = False) -> None:
        if not text:
            return
        if opaque:
            self.opaque.append((self.size, self.size + len(text)))
        self.text.append(text)
        self.origins.extend(origins if len(origins) == len(text)
                            else _pad(origins, len(text), self.offset))
        self.size += len(text)

    def split(self, text: str, origins: list, opaque: tuple = (), unresolved: tuple = ()
              ) -> None:
        """Unquoted expansion: blanks outside the opaque spans separate words; `unresolved`
        goes with the words that hold an opaque span."""
        origins = origins if len(origins) == len(text) else _pad(origins, len(text), self.offset)
        pos = 0
        for start, end in sorted(opaque) + [(len(text), len(text))]:
            for match in _BLANKS.finditer(text, pos, max(pos, start)):
                if match.group(0)[0] in " \t\n":
                    if self.size:
                        self.flush()
                else:
                    self.append(match.group(0), origins[match.start():match.end()])
            if end > start:
                self.append(text[start:end], origins[start:end], opaque=True)
                self.unresolved.extend(unresolved)
            pos = max(pos, end)


def _pad(origins: list, size: int, offset: int) -> list:
    return (list(origins) + [origins[-1] if origins else offset] * size)[:size]


class Expander:
    """Expands words against the variables a script has set so far."""

    def __init__(self, env: Optional[dict] = None):
        self.env: dict = dict(env or {})
        self.spent = 0  # characters expanded so far (EXPANSION_BUDGET)

    def value_of(self, seg: Seg) -> Optional[Value]:
        value = self.env.get(seg.text)
        if value is None:
            return None
        if value.items is not None:
            if seg.index in ("@", "*"):
                return value
            position = 0 if seg.index is None else seg.index
            if str(position).isdigit() and len(str(position)) < 9 \
                    and int(position) < len(value.items):
                item = value.items[int(position)]
                return Value(item.text, item.origins, item.unresolved, opaque=item.opaque)
            return Value()
        return value

    def fields(self, word: Word, split: bool = True) -> list:
        """Bash word expansion: variables, then field splitting of unquoted results."""
        segs = word.segs
        if len(segs) == 1 and segs[0].kind == "lit":
            # nothing to expand (the lexer already split at blanks): one field, or none for an
            # empty unquoted word; the common case, kept cheap
            if segs[0].text or segs[0].quoted:
                return [Field(segs[0].text, segs[0].origins, word.offset)]
            return []
        if all(s.kind == "lit" for s in segs):
            text = "".join(s.text for s in segs)
            origins = [o for s in segs for o in s.origins]
            if text or any(s.quoted for s in segs):
                return [Field(text, origins, word.offset)]
            return []
        b = _Builder(word.offset)

        def add(text: str, origins: list, quoted: bool, unresolved: tuple = (),
                literal: bool = False, opaque: tuple = ()) -> None:
            if quoted or literal or not split or not opaque:
                b.unresolved.extend(unresolved)
            if quoted or literal or not split:
                b.append(text, origins, opaque=literal and bool(unresolved))
                if opaque and not (literal and unresolved):
                    base = b.size - len(text)
                    b.opaque.extend((base + s, base + e) for s, e in opaque)
                if quoted:
                    b.touched = True
                return
            # what could not be known belongs to the words made of the unknown spans, not to
            # whichever word the re-split string starts with
            b.split(text, origins, opaque, unresolved)

        for kind, payload in self._segments(word.segs):
            if kind == "lit":
                add(payload.text, payload.origins, payload.quoted, literal=True)
            elif kind == "raw":
                s, reason = payload
                add(s.raw, [s.offset] * len(s.raw), s.quoted, (reason,), literal=True)
            else:
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
                            b.flush(force=s.quoted)
                        add(item.text, item.origins or [item.offset] * len(item.text),
                            s.quoted, item.unresolved, opaque=item.opaque)
                        if s.quoted:
                            b.touched = True
                else:
                    add(value.text, value.origins or [s.offset] * len(value.text), s.quoted,
                        value.unresolved, opaque=value.opaque)
            if len(b.out) > MAX_ITEMS:
                break
        b.flush()
        return b.out

    def _segments(self, segs: list):
        """Resolve each segment: ('lit', Seg) | ('value', (Seg, Value)) | ('raw', (Seg, why))."""
        for seg in segs:
            if seg.kind == "lit":
                yield "lit", seg
            elif seg.kind == "subst":
                if seg.raw.startswith("$((") and seg.raw.endswith("))"):
                    number = self.arithmetic(seg.raw[3:-2])
                    if number is not None:
                        text = str(number)
                        yield "value", (seg, Value(text, [seg.offset] * len(text)))
                        continue
                    yield "raw", (seg, f"{seg.raw} (arithmetic over values not known "
                                       "statically)")
                    continue
                yield "raw", (seg, f"{seg.raw} (command substitution, not run)")
            else:
                for kind, payload in self._variable(seg):
                    if kind == "value":
                        payload = self._admit(*payload)
                        kind = "value" if isinstance(payload[1], Value) else "raw"
                    yield kind, payload

    def _admit(self, seg: Seg, value: Value) -> tuple:
        """(seg, value) within the limits, else (seg, why) to keep the reference as written."""
        size = value.size()
        if size > MAX_VALUE_CHARS or (value.items is not None and len(value.items) > MAX_ITEMS):
            return seg, f"{seg.raw} (expands to over {MAX_VALUE_CHARS} characters; not expanded)"
        if self.spent + size > EXPANSION_BUDGET:
            return seg, (f"{seg.raw} (the script expands over {EXPANSION_BUDGET} characters in "
                         "all; not expanded)")
        self.spent += size
        return seg, value

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
        return Value(first.text, first.origins, first.unresolved, opaque=first.opaque)

    # -- $(( ... )) ---------------------------------------------------------------------------

    def arithmetic(self, expression: str) -> Optional[int]:
        """The value of `$(( expression ))` over integer literals and variables the script set to
        integers; None when any operand is unknown or the expression is beyond this reader
        (assignments, comparisons, nested substitutions). Bash's 64-bit range is kept: a result
        outside it is unknown rather than wrapped."""
        if len(expression) > 1000:
            return None
        tokens: list = []
        for match in _ARITH_TOKEN.finditer(expression):
            number, name, braced, dollar, op, bad = match.groups()
            if bad:
                return None
            if number is not None:
                tokens.append(_arith_int(number))
            elif op is not None:
                tokens.append(op)
            else:
                value = self.env.get(name or braced or dollar)
                if value is None or value.items is not None or value.unresolved:
                    return None
                tokens.append(_arith_int(value.text.strip()))
            if tokens[-1] is None:
                return None
        try:
            result, rest = _arith_sum(tokens, 0)
        except (ValueError, IndexError, ZeroDivisionError, RecursionError, OverflowError):
            return None
        if rest != len(tokens) or abs(result) >= 2**63:
            return None
        return result

    def assign(self, word: Word) -> None:
        """Run `NAME=value`, `NAME+=value`, `NAME=(...)`, `NAME+=(...)` against the variables."""
        name, append, prefix = assignment(word)
        current = self.env.get(name)
        if word.array is not None:
            items = self.array_value(word)
            if append and current is not None:
                base = current.items if current.items is not None else (
                    [Field(current.text, current.origins, word.offset, current.unresolved,
                           current.opaque)] if current.text else [])
                items = list(base) + items
            self.env[name] = self._bounded(name, Value(items=items), word)
            return
        value = self.assign_value(word, prefix)
        if append and current is not None:
            if current.items is not None:
                items = current.items + [Field(value.text, value.origins, word.offset,
                                               value.unresolved, value.opaque)]
                self.env[name] = self._bounded(name, Value(items=items), word)
                return
            shift = len(current.text)
            value = Value(current.text + value.text, [*current.origins, *value.origins],
                          current.unresolved + value.unresolved,
                          opaque=current.opaque + tuple((a + shift, b + shift)
                                                        for a, b in value.opaque))
        self.env[name] = self._bounded(name, value, word)

    def _bounded(self, name: str, value: Value, word: Word) -> Value:
        """A value over the limits becomes one opaque, unresolved word (and stays small)."""
        if value.size() <= MAX_VALUE_CHARS and (value.items is None
                                                or len(value.items) <= MAX_ITEMS):
            return value
        why = f"${name} (its value grows over {MAX_VALUE_CHARS} characters; not expanded)"
        text = f"${name}"
        return Value(text, [word.offset] * len(text), (why,), opaque=((0, len(text)),))

    def assign_value(self, word: Word, start_index: int) -> Value:
        """The value of `NAME=value` (no field splitting), from segment text after the '='."""
        segs = _after_equals(word.segs, start_index)
        found = self.fields(Word(segs, word.offset, word.raw), split=False)
        if not found:
            return Value()
        return Value(found[0].text, found[0].origins, found[0].unresolved,
                     opaque=found[0].opaque)

    def array_value(self, word: Word) -> list:
        items: list = []
        for element in word.array or []:
            items.extend(self.fields(element))
            if len(items) > MAX_ITEMS:
                break
        return items


_ARITH_TOKEN = lazy_re.compile(
    r"\s*(?:([0-9]+)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)"
    r"|([A-Za-z_][A-Za-z0-9_]*)|(\*\*|[-+*/%()])|(\S))")


def _arith_int(text: str) -> Optional[int]:
    if re.fullmatch(r"-?[0-9]{1,19}", text):
        return int(text, 10) if not (len(text.lstrip("-")) > 1 and text.lstrip("-")[0] == "0") \
            else None  # 010 is octal in bash: not guessed
    return None


def _arith_sum(tokens: list, i: int, depth: int = 0) -> tuple:
    value, i = _arith_product(tokens, i, depth)
    while i < len(tokens) and tokens[i] in ("+", "-"):
        right, j = _arith_product(tokens, i + 1, depth)
        value = value + right if tokens[i] == "+" else value - right
        i = j
    return value, i


def _arith_product(tokens: list, i: int, depth: int) -> tuple:
    value, i = _arith_power(tokens, i, depth)
    while i < len(tokens) and tokens[i] in ("*", "/", "%"):
        right, j = _arith_power(tokens, i + 1, depth)
        if tokens[i] == "*":
            value = value * right
        else:
            quotient = abs(value) // abs(right)  # ZeroDivisionError: unknown, as bash fails
            quotient = quotient if (value >= 0) == (right > 0) else -quotient
            value = quotient if tokens[i] == "/" else value - right * quotient
        if abs(value) >= 2**63:
            raise OverflowError
        i = j
    return value, i


def _arith_power(tokens: list, i: int, depth: int) -> tuple:
    base, i = _arith_unary(tokens, i, depth)
    if i < len(tokens) and tokens[i] == "**":
        exponent, i = _arith_power(tokens, i + 1, depth + 1)
        if exponent < 0 or exponent > 64 or (abs(base) > 1 and exponent > 63):
            raise OverflowError
        base = base ** exponent
        if abs(base) >= 2**63:
            raise OverflowError
    return base, i


def _arith_unary(tokens: list, i: int, depth: int) -> tuple:
    if depth > 50:
        raise RecursionError
    token = tokens[i]
    if token in ("+", "-"):
        value, i = _arith_unary(tokens, i + 1, depth + 1)
        return (value if token == "+" else -value), i
    if token == "(":
        value, i = _arith_sum(tokens, i + 1, depth + 1)
        if i >= len(tokens) or tokens[i] != ")":
            raise ValueError("no ')'")
        return value, i + 1
    if isinstance(token, int):
        return token, i + 1
    raise ValueError(token)


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


# -- running a script statically ---------------------------------------------------------------

@record(slots=True)
class Simple:
    """A simple command as the shell would run it: its words after expansion (each with the
    file offsets of its characters) and where it starts. Assignments, `export`, `if`/`case`
    and `sh -c` are taken care of by the Interpreter; a caller sees only these."""

    fields: list
    offset: int


_KEYWORDS = ("then", "do", "else", "{", "}", "done", "esac", "fi", "elif", "if", "while",
             "until", "case")
_SHELLS = ("sh", "bash", "dash", "zsh", "ksh")
MAX_NESTED_SHELLS = 4
MAX_PATTERN_CHARS = 256


def plain(word: Word) -> str:
    """The word's text when it is all literal, else its source text."""
    if all(s.kind == "lit" for s in word.segs):
        return "".join(s.text for s in word.segs)
    return word.raw


class Interpreter:
    """Walks a script as bash would, without running anything: variables and arrays are set,
    `export`/`declare` assign, `unset` unsets, `if`/`elif`/`else` and `case` take the branch the
    known values choose (the first one, reported, when a value is unknown), and `sh -c STRING` /
    `bash -c STRING` (also behind `srun ...`) runs STRING the same way. Every other command is
    yielded as a `Simple` for the caller (an adapter) to interpret. What could not be decided is
    in `notes`: (offset, message)."""

    def __init__(self, env: Optional[dict] = None):
        self.expander = Expander(env)
        self.keep_empty = False   # see _fields
        self.notes: list = []
        self.assigned_at: dict = {}   # variable -> offset of its last assignment

    @property
    def env(self) -> dict:
        return self.expander.env

    def run(self, script: Script, origin=None, prefix: tuple = (), depth: int = 0):
        """Yield the script's simple commands. `origin` maps the script's offsets to the file's
        (for `sh -c` strings); `prefix` is prepended to every command (`srun ... bash -c`)."""
        where = origin or (lambda offset: offset)
        frames: list = []
        for command in script.commands:
            words = list(command.words)
            top = frames[-1] if frames else None
            if top is not None and top["kind"] == "case":
                if top["state"] == "pattern":
                    if not words:
                        continue
                    if plain(words[0]) == "esac":
                        frames.pop()
                        continue
                    self._pattern(top, words, command, frames)
                    continue
                if words and plain(words[0]) == "esac":
                    frames.pop()
                    continue
                if command.end == ";;":
                    top["state"] = "pattern"  # this command is the branch's last one
            while words and plain(words[0]) in _KEYWORDS:
                keyword = plain(words[0])
                if keyword in ("if", "elif"):
                    decided = self._condition(words[1:], command, where)
                    if keyword == "if":
                        frames.append({"kind": "if", "active": _active(frames) and decided,
                                       "taken": decided})
                    elif frames and frames[-1]["kind"] == "if":
                        take = not frames[-1]["taken"] and decided
                        frames[-1]["active"] = _active(frames[:-1]) and take
                        frames[-1]["taken"] = frames[-1]["taken"] or take
                    words = []
                    break
                if keyword == "case":
                    self._case(words[1:], command, frames, where)
                    words = []
                    break
                if keyword in ("while", "until"):
                    words = []
                    break
                if keyword == "else" and frames and frames[-1]["kind"] == "if":
                    frames[-1]["active"] = _active(frames[:-1]) and not frames[-1]["taken"]
                    frames[-1]["taken"] = True
                elif keyword == "fi" and frames and frames[-1]["kind"] == "if":
                    frames.pop()
                elif keyword == "esac" and frames and frames[-1]["kind"] == "case":
                    frames.pop()
                words = words[1:]
            if not words or not _active(frames):
                continue
            yield from self._simple(words, command, origin, prefix, depth)

    # a simple command
    def _simple(self, words: list, command: Command, origin, prefix: tuple, depth: int):
        where = origin or (lambda offset: offset)
        head = plain(words[0])
        if head in ("export", "declare", "local", "readonly", "typeset"):
            for word in words[1:]:
                if not plain(word).startswith("-") and assignment(word) is not None:
                    self._assign(word, where)
            return
        if head == "unset":
            for word in words[1:]:
                self.env.pop(plain(word), None)
            return
        if head in ("source", "."):
            target = words[1].raw if len(words) > 1 else ""
            self.notes.append((where(command.offset),
                               f"`{words[0].raw} {target}` is not read (scripts are never "
                               "sourced); variables it sets count as unset"))
            return
        rest = []
        for index, word in enumerate(words):
            if assignment(word) is None:
                rest = words[index:]
                break
            self._assign(word, where)
        if not rest:
            return
        fields = [f for word in rest for f in self._fields(word)]
        if origin is not None:
            fields = [_moved(f, origin) for f in fields]
        if not fields:
            return
        shell = _shell_string(fields)
        if shell is not None and depth < MAX_NESTED_SHELLS:
            index, string = shell
            try:
                inner = parse(string.text)
            except ShellError as exc:
                self.notes.append((string.origin, f"the {fields[index].text} -c string cannot "
                                                  f"be read: {exc}"))
            else:
                saved = dict(self.env)  # a child shell: its assignments do not come back
                yield from self.run(
                    inner, _Remap(string.origins, string.origin),
                    tuple(prefix) + tuple(fields[:index]), depth + 1)
                self.expander.env = saved
                return
        yield Simple(list(prefix) + fields, where(command.offset))

    def _fields(self, word: Word) -> list:
        """The word's fields; with `keep_empty`, a word that only variables the script set to
        nothing made vanish stays as one empty, unresolved field, so that `--save $CKPT` after
        `CKPT=<Specify path>` reads as a value still to be filled in, not as a missing one."""
        found = self.expander.fields(word)
        if found or not self.keep_empty:
            return found
        empty = [s.raw for s in word.segs if s.kind == "var" and not s.quoted
                 and self.expander.value_of(s) is not None]
        if not empty or any(s.kind == "lit" and s.text for s in word.segs):
            return found
        return [Field("", [], word.offset, (f"{', '.join(empty)} (empty where the script sets "
                                            "it: a value still to be filled in)",))]

    def _assign(self, word: Word, where) -> None:
        self.expander.assign(word)
        name = assignment(word)[0]
        self.assigned_at[name] = where(word.offset)

    # conditions
    def _condition(self, words: list, command: Command, where) -> bool:
        texts, unresolved = [], []
        for word in words:
            for f in self.expander.fields(word):
                texts.append(f.text)
                unresolved.extend(f.unresolved)
        negate = bool(texts) and texts[0] == "!"
        if negate:
            texts = texts[1:]
        if texts and texts[0] in ("[", "[[", "test"):
            texts = [t for t in texts[1:] if t not in ("]", "]]")]
        result = None if unresolved else _test(texts)
        if result is None:
            source = " ".join(w.raw for w in words)
            why = f" ({', '.join(dict.fromkeys(unresolved))})" if unresolved else ""
            self.notes.append((where(command.offset),
                               f"condition `{source[:200]}` cannot be decided without running "
                               f"the script{why}; assumed true (the first branch is read)"))
            return True
        return result != negate

    def _case(self, words: list, command: Command, frames: list, where) -> None:
        value = None
        if words:
            found = self.expander.fields(words[0], split=False)
            if found and not found[0].unresolved:
                value = found[0].text
            elif found:
                self.notes.append((where(command.offset),
                                   f"case {words[0].raw} cannot be decided without running the "
                                   f"script ({', '.join(found[0].unresolved)}); the first "
                                   "branch is read"))
        frame = {"kind": "case", "value": value, "state": "pattern", "active": False,
                 "taken": False, "parent": _active(frames), "patterns": []}
        frames.append(frame)
        rest = words[2:] if len(words) > 1 and plain(words[1]) == "in" else []
        if rest:
            self._pattern(frame, rest, command, frames)

    def _pattern(self, frame: dict, words: list, command: Command, frames: list) -> None:
        frame["patterns"].extend(words)
        if command.end == "|":
            return
        patterns = [f.text for w in frame["patterns"] for f in self.expander.fields(w, False)]
        frame["patterns"] = []
        value = frame["value"]
        if value is None:
            matched = True  # undecidable: the first branch, as for `if`
        else:
            matched = any(len(p) <= MAX_PATTERN_CHARS and fnmatch.fnmatchcase(value, p)
                          for p in patterns)
        take = matched and not frame["taken"]
        frame["active"] = frame["parent"] and take
        frame["taken"] = frame["taken"] or take
        frame["state"] = "body"


def _active(frames: list) -> bool:
    return all(f["active"] for f in frames)


class _Remap:
    """An `sh -c` string's offsets -> the file's: its characters' origins, and the string's own
    origin for an offset past them."""

    __slots__ = ("mapped", "default")

    def __init__(self, mapped: list, default: int):
        self.mapped, self.default = mapped, default

    def __call__(self, offset: int) -> int:
        return self.mapped[offset] if 0 <= offset < len(self.mapped) else self.default

    def many(self, offsets) -> list:
        """[self(o) for o in offsets], in one comprehension (a field's every character)."""
        mapped, size, default = self.mapped, len(self.mapped), self.default
        return [mapped[o] if 0 <= o < size else default for o in offsets]


def _moved(f: Field, where) -> Field:
    if where is None:
        return f
    origins = where.many(f.origins) if isinstance(where, _Remap) else [where(o) for o in f.origins]
    return Field(f.text, origins, where(f.offset), f.unresolved, f.opaque)


def _shell_string(fields: list) -> Optional[tuple]:
    """(index of the shell word, the string field) of `sh -c STRING` anywhere in the command
    (after `srun ...`, `env`, `exec`, ...). A STRING with parts the script cannot know
    (`$(scontrol ...)`, a variable set elsewhere) is read too: those parts were kept as their
    source text, so reading the string again marks them unresolved once more (bigscience's
    `srun ... bash -c "$LAUNCHER ... $CMD"`)."""
    for index in range(len(fields) - 2):
        text = fields[index].text
        if not text.endswith(_SHELLS):
            continue  # (most words: no path to split)
        name = os.path.basename(text)
        option = fields[index + 1].text
        if name in _SHELLS and option.startswith("-") and not option.startswith("--") \
                and "c" in option[1:]:
            return index, fields[index + 2]
    return None


def _test(t: list) -> Optional[bool]:
    """`[ ... ]` / `test ...` over known words; None when this reader cannot tell."""
    if len(t) == 2 and t[0] in ("-z", "-n"):
        return (t[1] == "") == (t[0] == "-z")
    if len(t) == 1:
        return t[0] != ""
    if len(t) == 3:
        a, op, b = t
        if op in ("==", "=", "!="):
            if any(ch in b for ch in "*?["):
                return None
            return (a == b) == (op != "!=")
        numeric = {"-eq": "==", "-ne": "!=", "-lt": "<", "-le": "<=", "-gt": ">", "-ge": ">="}
        if op in numeric:
            x, y = _arith_int(a.strip()), _arith_int(b.strip())
            if x is None or y is None:
                return None
            return {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y,
                    ">=": x >= y}[numeric[op]]
    return None
