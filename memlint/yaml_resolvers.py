r"""PyYAML's implicit-tag patterns answered without compiling them where a string test is exact.

PyYAML resolves every plain scalar (keys included) by matching it against the patterns of the
tags its first character may start (yaml/resolver.py): a key starting with n, t, f, o or y tries
the bool pattern, one starting with n the null pattern too, a number the float, int and timestamp
patterns. Compiling those five costs a one-file YAML check about 10M instructions (callgrind,
issue 29), more than reading the file. `quick_table` gives a copy of a resolver table in which
each of those patterns, when its source is PyYAML 6.0's, is a `lazy_re` stand-in whose `match`
answers the resolver's question by a string test where one is exact, and by the pattern
(compiled then) otherwise:

- bool, null: a set of words (under re.X the pattern is an alternation of literal words; `$`
  also matches before a final newline);
- float: every branch holds a ".", so a scalar without one is not a float;
- int: an optional sign and ASCII digits are an int when the digits are "0", do not start with
  0, or are all octal digits (`[-+]?(?:0|[1-9][0-9_]*)`, `[-+]?0[0-7_]+`), and are not one
  otherwise (the other branches need b, x or ":"); after the sign, a scalar with a character
  no branch has (".", a second sign, a letter past f) is not an int;
- timestamp: both branches start with four digits and "-".

A match returns True, not a match object: PyYAML's resolver only tests it (`if
regexp.match(value)`). The table is memlint's loaders' own (loaders.load_yaml); PyYAML's stays
as it is. tests/test_yaml_resolvers.py compares each with its pattern.
"""
from __future__ import annotations

from memlint import lazy_re

BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"
FLOAT = "tag:yaml.org,2002:float"
INT = "tag:yaml.org,2002:int"
TIMESTAMP = "tag:yaml.org,2002:timestamp"
_INDENT = "\n                    "
#: PyYAML 6.0's sources of the patterns answered here (yaml/resolver.py), re.X | re.U
SOURCES = {
    BOOL: "^(?:yes|Yes|YES|no|No|NO" + _INDENT + "|true|True|TRUE|false|False|FALSE" + _INDENT
          + "|on|On|ON|off|Off|OFF)$",
    NULL: "^(?: ~" + _INDENT + "|null|Null|NULL" + _INDENT + "| )$",
    FLOAT: "^(?:[-+]?(?:[0-9][0-9_]*)\\.[0-9_]*(?:[eE][-+][0-9]+)?" + _INDENT
           + "|\\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?" + _INDENT
           + "|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\\.[0-9_]*" + _INDENT
           + "|[-+]?\\.(?:inf|Inf|INF)" + _INDENT + "|\\.(?:nan|NaN|NAN))$",
    INT: "^(?:[-+]?0b[0-1_]+" + _INDENT + "|[-+]?0[0-7_]+" + _INDENT
         + "|[-+]?(?:0|[1-9][0-9_]*)" + _INDENT + "|[-+]?0x[0-9a-fA-F_]+" + _INDENT
         + "|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
    TIMESTAMP: "^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]" + _INDENT
               + "|[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?" + _INDENT
               + " (?:[Tt]|[ \\t]+)[0-9][0-9]?" + _INDENT + " :[0-9][0-9] :[0-9][0-9] (?:\\.[0-9]*)?"
               + _INDENT + " (?:[ \\t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$",
}
FLAGS = 96   # re.X | re.U
_WORDS = {BOOL: frozenset("yes Yes YES no No NO true True TRUE false False FALSE on On ON off "
                          "Off OFF".split()),
          NULL: frozenset(("~", "null", "Null", "NULL", ""))}
_DIGITS = frozenset("0123456789")
_INT_CHARS = frozenset("0123456789_:bxabcdefABCDEF")   # every branch's, after the sign


def _bool_or_null(tag: str, stem: str):
    return stem in _WORDS[tag]


def _float(tag: str, stem: str):
    return ... if "." in stem else False


def _int(tag: str, stem: str):
    if "." in stem:
        return False
    digits = stem[1:] if stem[:1] in ("-", "+") else stem
    if digits and _DIGITS.issuperset(digits):
        return digits == "0" or digits[0] != "0" or "8" not in digits and "9" not in digits
    return ... if _INT_CHARS.issuperset(digits) else False


def _timestamp(tag: str, stem: str):
    return ... if stem[4:5] == "-" else False


_TESTS = {BOOL: _bool_or_null, NULL: _bool_or_null, FLOAT: _float, INT: _int,
          TIMESTAMP: _timestamp}


class QuickPattern(lazy_re.LazyPattern):
    """A resolver pattern whose `match` is a string test where one is exact (module docstring)."""

    def __init__(self, tag: str, pattern: str, flags: int):
        super().__init__(pattern, flags)
        self.__dict__["_tag"] = tag

    def match(self, string, *args):
        if args or not isinstance(string, str):
            return self.compiled.match(string, *args)
        stem = string[:-1] if string.endswith("\n") else string   # `$` before a final newline
        answer = _TESTS[self._tag](self._tag, stem)
        if answer is ...:   # no exact string test: the pattern decides
            return self.compiled.match(string) is not None
        return True if answer else None


def quick_table(table: dict) -> dict:
    """A copy of a resolver's `yaml_implicit_resolvers` with PyYAML 6.0's bool, null, float,
    int and timestamp patterns as QuickPatterns (one per pattern); anything else as it is."""
    quick: dict = {}
    out = {}
    for first, resolvers in table.items():
        row = []
        for tag, regexp in resolvers:
            if isinstance(regexp, lazy_re.LazyPattern):   # loaders._pyyaml's (not compiled)
                source, flags = regexp._source
                flags |= 32   # a str pattern is re.U
            else:
                source, flags = getattr(regexp, "pattern", None), getattr(regexp, "flags", None)
            if tag in SOURCES and source == SOURCES[tag] and flags == FLAGS:
                if tag not in quick:
                    quick[tag] = QuickPattern(tag, source, FLAGS)
                regexp = quick[tag]
            row.append((tag, regexp))
        out[first] = row
    return out
