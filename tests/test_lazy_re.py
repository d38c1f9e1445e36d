"""memlint.lazy_re: a pattern compiled on first use answers as the compiled pattern does."""
import re

from memlint import lazy_re


def test_compiled_on_first_use_then_kept():
    pattern = lazy_re.compile(r"(?P<key>[a-z]+)\s*=\s*(\d+)", re.I)
    assert "_compiled" not in pattern.__dict__
    assert pattern.match("Tp = 2").group("key", 2) == ("Tp", "2")
    assert isinstance(pattern.compiled, re.Pattern) and "search" in pattern.__dict__
    assert pattern.pattern == r"(?P<key>[a-z]+)\s*=\s*(\d+)" and pattern.flags & re.I
    assert pattern.groupindex == {"key": 1} and pattern.groups == 2
    assert [m.group(2) for m in pattern.finditer("a=1 b = 22")] == ["1", "22"]
    assert pattern.sub("x", "a=1;b=2") == "x;x" and pattern.split("a=1,b=2") == [
        "", "a", "1", ",", "b", "2", ""]


def test_a_method_it_does_not_keep_still_answers():
    pattern = lazy_re.compile("a+")
    assert pattern.scanner("aaa").match().group() == "aaa"


def test_a_bad_pattern_fails_when_used():
    pattern = lazy_re.compile("(")
    try:
        pattern.match("x")
    except re.error:
        return
    raise AssertionError("an invalid pattern must raise re.error on use")
