"""The interpretation's working state: the flags read (last one wins, as argparse), their converted
values, and helpers that set a scenario key with the flag's position as its provenance.

`Interp.collect` checks every flag (unknown -> warning with a suggestion, a switch given a value,
a value that does not convert) and `Interp.extras` keeps every flag as a `megatron.<flag>` fact.
"""
from __future__ import annotations

from memlint import keys as K
from memlint.adapters.megatron.flags import (FLAG_BY_NAME, FORK_MARKERS, KNOWN_FLAGS, MAX_HINTS,
                                             MAX_UNKNOWN_LISTED, MEGATRON_VERSION, _text,
                                             all_flags, fork_choices)
from memlint.adapters.megatron.readers import Arg, Read, describe
from memlint.diagnostics import INVALID_VALUE, UNKNOWN_KEY, UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance


def script_ends(script: str, *ends: str) -> bool:
    r"""re.search(r"(?:end1|end2)$", script) for literal ends, without compiling a pattern per
    run (start-up): `$` also matches before a final newline."""
    return (script[:-1] if script.endswith("\n") else script).endswith(ends)

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional


class Interp:
    def __init__(self, path: str, read: Read, partial: Partial, strict: bool):
        self.path = path
        self.read = read
        self.partial = partial
        self.strict = strict
        self.args: dict = {}
        self.values: dict = {}

    # helpers
    def diag(self, kind, severity, message, prov, **data) -> None:
        self.partial.diagnostics.append(make(kind, severity, message, prov, **data))

    def arg(self, flag: str) -> Optional[Arg]:
        return self.args.get(flag)

    def on(self, flag: str) -> bool:
        return flag in self.args

    def value(self, flag: str, default: Any = None) -> Any:
        """The converted value of a flag, or `default` (absent, unresolved or invalid)."""
        return self.values.get(flag, default)

    def prov(self, flag: str, key: Optional[str] = None) -> Optional[Provenance]:
        arg = self.args.get(flag)
        if arg is None:
            return None
        p = arg.prov
        return Provenance(p.file, p.line, p.column, key or flag)

    def set(self, key: str, value: Any, flag: str, label: Optional[str] = None) -> None:
        self.partial.set(key, value, self.prov(flag, label))

    def collect(self) -> None:
        seen: dict = {}
        hints = MAX_HINTS  # did-you-mean costs milliseconds each: a few per file
        unknown, first_unlisted = 0, None
        repeated, first_repeat = 0, None   # flags given again with another value
        severity = Severity.ERROR if self.strict else Severity.WARNING
        for arg in self.read.args:
            spec = FLAG_BY_NAME.get(arg.flag)
            if spec is None and arg.flag not in KNOWN_FLAGS and not arg.flag.startswith("--verl-"):
                unknown += 1
                if unknown > MAX_UNKNOWN_LISTED:  # one line for the rest: bounded output
                    first_unlisted = first_unlisted or arg
                else:
                    hints -= 1
                    hint = K.suggest(arg.flag, all_flags()) if hints >= 0 else None
                    tail = f"; did you mean {hint}?" if hint else ""
                    self.diag(UNKNOWN_KEY, severity,
                              f"unknown Megatron flag {arg.flag} (not an argument of "
                              f"{MEGATRON_VERSION}){tail}", arg.prov, key=arg.flag)
            previous = seen.get(arg.flag)
            if previous is not None and previous.values != arg.values:
                repeated += 1
                if repeated <= MAX_UNKNOWN_LISTED:
                    self.diag(INVALID_VALUE, Severity.INFO,
                              f"{arg.flag} is given twice (also at line {previous.prov.line}); "
                              f"argparse keeps the last: {' '.join(arg.values) or '(switch)'}",
                              arg.prov)
                else:
                    first_repeat = first_repeat or arg
            seen[arg.flag] = arg
            self.args[arg.flag] = arg
        if first_unlisted is not None:
            self.diag(UNKNOWN_KEY, severity,
                      f"{unknown - MAX_UNKNOWN_LISTED} more unknown Megatron flags from "
                      f"{first_unlisted.flag} on (only the first {MAX_UNKNOWN_LISTED} are listed)",
                      first_unlisted.prov, key=first_unlisted.flag)
        if first_repeat is not None:
            self.diag(INVALID_VALUE, Severity.INFO,
                      f"{repeated - MAX_UNKNOWN_LISTED} more flags given again with another value "
                      f"from {first_repeat.flag} on (only the first {MAX_UNKNOWN_LISTED} are "
                      "listed); argparse keeps the last of each", first_repeat.prov)
        fork = any(marker in self.args for marker in FORK_MARKERS)
        for flag, arg in self.args.items():
            spec = FLAG_BY_NAME.get(flag)
            if spec is None:
                continue
            if spec.nargs == 0:
                if arg.values:
                    self.diag(INVALID_VALUE, Severity.ERROR,
                              f"{flag} is a switch and takes no value; "
                              f"{' '.join(arg.values)!r} would be rejected by Megatron's parser",
                              arg.value_provs[0] if arg.value_provs else arg.prov)
                self.values[flag] = True
                continue
            if not arg.values:
                self.diag(INVALID_VALUE, Severity.ERROR, f"{flag} expects a value", arg.prov)
                continue
            if arg.unresolved:
                default = f"Megatron's default {spec.default}" if spec.default is not None \
                    else "no value (memlint's default applies)"
                if spec.target:
                    # a value only the running script knows: "no estimate", never "missing"
                    self.partial.set_extra(f"unresolved.{spec.target}", " ".join(arg.values),
                                           arg.prov)
                if arg.values == [""]:
                    # the script leaves it empty: Megatron's parser refuses a bare flag, so it
                    # is for the user to fill in before launch (a warning, not an error)
                    self.diag(UNRESOLVED, Severity.WARNING,
                              f"{flag} gets no value: {describe(arg.unresolved)}; Megatron's "
                              "parser refuses it empty, so set it before launch (assumed "
                              f"{default})", arg.prov, key=flag)
                    continue
                self.diag(UNRESOLVED, Severity.INFO,
                          f"{flag} {' '.join(arg.values)}: {describe(arg.unresolved)}; "
                          f"assumed {default}", arg.prov, key=flag)
                continue
            if spec.nargs == "+" or spec.convert is None:
                self.values[flag] = list(arg.values) if spec.nargs == "+" else arg.values[0]
                continue
            value = arg.values[0]
            if fork and _text(value) in fork_choices().get(flag, {}):
                value = fork_choices()[flag][_text(value)]  # Megatron-DeepSpeed's spelling
            try:
                self.values[flag] = spec.convert(value)
            except ValueError as exc:
                self.diag(INVALID_VALUE, Severity.ERROR, f"{flag}: {exc}", arg.prov, key=flag)

    def extras(self) -> None:
        unknown = 0
        for flag, arg in self.args.items():
            if flag.startswith("--verl-"):
                continue
            if flag not in FLAG_BY_NAME and flag not in KNOWN_FLAGS:
                unknown += 1
                if unknown > MAX_UNKNOWN_LISTED:
                    continue  # facts for the unknown flags that are listed, not for thousands
            value = self.values.get(flag)
            if value is None:
                value = True if not arg.values else (
                    arg.values[0] if len(arg.values) == 1 else list(arg.values))
            self.partial.set_extra(f"megatron.{flag.lstrip('-')}", value, self.prov(flag))
        for option, (text, prov, unresolved) in self.read.launcher.items():
            self.partial.set_extra(f"megatron.launcher.{option}", text, prov)
        for name, (text, prov) in self.read.env.items():
            self.partial.set_extra(f"env.{name}", text, prov)
        if self.read.entry is not None:
            self.partial.set_extra("megatron.entry-script", *self.read.entry)
        for name in ("bf16", "fp16"):
            if self.on(f"--{name}"):
                self.partial.set_extra(f"flags.{name}", True, self.prov(f"--{name}"))

    # the interpretation proper
