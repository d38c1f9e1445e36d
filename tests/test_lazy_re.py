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


def test_import_module_makes_only_its_own_patterns_lazy():
    import subprocess
    import sys
    probe = ("import re, sys\nfrom memlint import lazy_re\n"
             "textwrap = lazy_re.import_module('textwrap')\n"
             "kind = type(textwrap.TextWrapper.wordsep_re).__name__\n"
             "text = textwrap.fill('memlint reads configs before a job starts, ' * 4, width=30)\n"
             "print(kind, re.compile is lazy_re.re.compile and not hasattr(re.compile, '__wrapped__'),\n"
             "      lazy_re.import_module('textwrap') is textwrap, type(re.compile('a')).__name__)\n"
             "print(repr(text))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    import textwrap
    assert out[0].split() == ["LazyPattern", "True", "True", "Pattern"]
    assert out[1] == repr(textwrap.fill("memlint reads configs before a job starts, " * 4, width=30))
