"""memlint/escape.py: a printable string is returned as it is without running the pattern (start-up:
the pattern compiles only for a string that may need it), which is exact only if every character
the patterns escape is unprintable."""
import sys

import pytest

from memlint import escape


@pytest.mark.slow
def test_every_escaped_character_is_unprintable():
    for pattern in (escape._CONTROL.compiled, escape._CONTROL_OR_NEWLINE.compiled):
        escaped = pattern.findall("".join(map(chr, range(sys.maxunicode + 1))))
        assert escaped and not [c for c in escaped if c.isprintable()]


def test_escapes_as_before():
    assert escape.escape_controls("a\x1b[31mb\tc\n") == "a\\x1b[31mb\tc\n"
    assert escape.one_line("a\nb\u2028c\u202e") == "a\\x0ab\\u2028c\\u202e"
    assert escape.one_line("plain ünïcode text") == "plain ünïcode text"
    assert escape.one_line(None) is None
