"""Regular expressions compiled on first use.

A module-level `re.compile` runs when the module is imported, whether or not the run needs the
pattern: on a one-file check the patterns of the modules it imports cost about a tenth of its CPU
time (bench/speed.py, issue 29). `lazy_re.compile(pattern, flags)` takes the same arguments and
returns a stand-in that compiles the pattern the first time it is used and from then on answers
as the compiled pattern does (`match`, `search`, `sub`, `finditer`, `pattern`, ...; each method
is looked up on the compiled pattern once and kept on the stand-in).

It is not an `re.Pattern`: give `re` functions the compiled pattern (`.compiled`), not the
stand-in.
"""
from __future__ import annotations

import re
import sys

# what the stand-in keeps of the compiled pattern once it is compiled
_KEPT = ("match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer",
         "pattern", "flags", "groups", "groupindex")


class LazyPattern:
    """A pattern compiled on first use (see the module docstring)."""

    def __init__(self, pattern, flags: int = 0):
        self._source = (pattern, flags)

    @property
    def compiled(self) -> re.Pattern:
        found = self.__dict__.get("_compiled")
        if found is None:
            found = self.__dict__["_compiled"] = re.compile(*self._source)
            for name in _KEPT:
                self.__dict__[name] = getattr(found, name)
        return found

    def __getattr__(self, name):   # only for names not kept yet: the first use
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.compiled, name)

    def __repr__(self) -> str:
        return f"lazy_re.compile({self._source[0]!r}, {self._source[1]!r})"


def compile(pattern, flags: int = 0) -> LazyPattern:  # noqa: A001 - re.compile's name, on purpose
    return LazyPattern(pattern, flags)


def import_module(name: str):
    """The module `name`, imported with the `re.compile` calls of its own modules (`name`,
    `name.*`) returning stand-ins: its import-time patterns compile on first use. Any other
    caller (another thread included) gets `re.compile` itself. A module already imported is
    returned as it is. For a module whose patterns serve only paths a run may not take (json's
    pure-Python fallbacks: the C accelerator answers instead)."""
    found = sys.modules.get(name)
    if found is not None:
        return found
    compile_now = re.compile
    prefix = name + "."

    def compile_later(pattern, flags=0):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller == name or caller.startswith(prefix):
            return LazyPattern(pattern, flags)
        return compile_now(pattern, flags)

    re.compile = compile_later
    try:
        __import__(name)
    finally:
        if re.compile is compile_later:
            re.compile = compile_now
    return sys.modules[name]
