"""A document's top-level keys, without parsing it: what positive format detection looks at.

Formats are told apart by the keys at the top of a document, never by a key that happens to be
nested somewhere inside it: nanotron nests `lr_decay_style` under `optimizer:` (a gpt-neox key at
gpt-neox's top level), picotron nests `gradient_accumulation_steps` under `"training"` (a
DeepSpeed key at DeepSpeed's top level). A detector that matched such keys at any depth read both
files in the wrong format and reported that format's errors.

`top_level_keys` reads block YAML (keys at column 0), flow YAML and JSON / HJSON (keys at brace
depth 1, with `#`, `//` and `/* */` comments and quoted strings skipped), from the first 64 KiB.
It is a tokenizer, not a parser: cheap enough for every file a directory walk offers.
"""
from __future__ import annotations

import re

from memlint import lazy_re

HEAD = 65536

# Linear: a bare key runs greedily to the first `:` (its trailing blanks are stripped later); a
# lazy key followed by `[ \t]*:` rescanned the blanks at every step (a line of 100,000 tabs after
# a key took 10 s)
_BLOCK_KEY = lazy_re.compile(
    r"""^(?:"((?:[^"\\\n]|\\.)*)"[ \t]*|'([^'\n]*)'[ \t]*|([A-Za-z_$<][^:#\n]*)):(?=[ \t]|$)""",
    re.M)
_TOKEN = lazy_re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\'\n]*\'|//[^\n]*|/\*.*?\*/|#[^\n]*|[{}\[\],:]|'
                         r'[A-Za-z_$][\w.\-$]*', re.S)
_LEADING = lazy_re.compile(
    r"\A(?:\ufeff)?(?:[ \t\r\n]+|#[^\n]*|//[^\n]*|/\*.*?\*/|---[^\n]*)*", re.S)


def _flow_keys(text: str) -> frozenset:
    keys = set()
    depth = 0
    pending = None      # a string or name seen at depth 1 right after `{` or `,`
    expect_key = False
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token[0] in "#/" and (token.startswith(("#", "//", "/*"))):
            continue
        if token in "{[":
            depth += 1
            expect_key = depth == 1 and token == "{"
            pending = None
            continue
        if token in "}]":
            depth -= 1
            if depth <= 0:
                break
            expect_key = False
            pending = None
            continue
        if depth != 1:
            continue
        if token == ",":
            expect_key, pending = True, None
        elif token == ":":
            if pending is not None:
                keys.add(pending)
            pending, expect_key = None, False
        elif expect_key:
            pending = token[1:-1] if token[0] in "\"'" else token
            expect_key = False
        else:
            pending = None
    return frozenset(keys)


# the last text asked about and its keys: detection asks once per detector, each file's text is
# one object (registry.detect_format hands every detector the same string)
_LAST: list = [None, frozenset()]


def top_level_keys(text: str) -> frozenset:
    """The keys of a YAML or JSON document's top-level mapping (none for anything else)."""
    if _LAST[0] is text:
        return _LAST[1]
    keys = _top_level_keys(text)
    _LAST[:] = [text, keys]
    return keys


def leading_end(head: str) -> int:
    """_LEADING.match(head).end() without compiling it (start-up): past a byte-order mark, then
    blanks, `#` / `//` comments and `---` lines to the line's end, `/* */` comments while each
    has its end. Every alternative starts with its own character and consumes one at least."""
    i = 1 if head.startswith("\ufeff") else 0
    size = len(head)
    while i < size:
        char = head[i]
        if char in " \t\r\n":
            i += 1
        elif char == "#" or head.startswith(("//", "---"), i):
            end = head.find("\n", i)
            i = size if end < 0 else end
        elif head.startswith("/*", i):
            end = head.find("*/", i + 2)
            if end < 0:
                break
            i = end + 2
        else:
            break
    return i


def _top_level_keys(text: str) -> frozenset:
    head = text[:HEAD]
    body = head[leading_end(head):]
    if body.startswith("{"):
        return _flow_keys(body)
    keys = set()
    for match in _BLOCK_KEY.finditer(head):
        key = next(g for g in match.groups() if g is not None)
        keys.add(key.strip())
    return frozenset(keys)
