"""Safe fixes: text edits that `memlint check --fix` writes, `--diff` shows and the language
server offers as quick fixes.

A fix is only made where it cannot change what the author meant:
- a mistyped key (ML003) that the framework refuses at launch (an error: a key of a block
  DeepSpeed's pydantic models close, an unknown memlint.toml key), whose did-you-mean is one
  clear match: close enough that the key can only be that one (difflib ratio >= 0.85, or at most
  one edit, two for a key of 8 or more characters; under 4 characters only a character added,
  dropped or swapped). A key the framework ignores (a warning) may
  be one of another version or fork (`--data-path2` of a Megatron-DeepSpeed script,
  `parallelism_config_cp_*` of a newer accelerate): it is never renamed by --fix; the language
  server still offers the rename as a quick fix, for the author to choose;
- a deprecated DeepSpeed key (ML308) with a documented replacement that keeps the value:
  `bfloat16` -> `bf16`, `stage3_gather_fp16_weights_on_model_save` ->
  `stage3_gather_16bit_weights_on_model_save`, and `"cpu_offload": true|false` ->
  `"offload_optimizer": {"device": "cpu"|"none"}` (what DeepSpeed's own deprecation mapping
  builds, runtime/zero/config.py).

Edits are positions in the text (the key's characters, or one JSON member), so everything else
in the file (comments, order, spacing, quoting) stays as it was, in every format. Before a fix
is kept, the edited text is checked again (from a buffer, nothing written): the finding must be
gone and no new error may appear; otherwise the fix is dropped. Writing goes through
memlint.safe_write (atomic, locked, inside the repository root, no symbolic links).
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field

from memlint.diagnostics import Severity

_DID_YOU_MEAN = re.compile(r"did you mean '?([^'\s?]+)'?\?")
_WORD = re.compile(r"-{0,2}[\w.-]+")


@dataclass(frozen=True)
class Edit:
    """Replace the text between two 1-based (line, column) positions (end exclusive)."""

    start: tuple
    end: tuple
    text: str


@dataclass
class Fix:
    title: str
    diagnostic: object
    edits: list = field(default_factory=list)


def _distance(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) from a to b."""
    previous2, previous = None, list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        row = [i]
        for j, y in enumerate(b, 1):
            cost = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (x != y))
            if previous2 is not None and i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                cost = min(cost, previous2[j - 2] + 1)
            row.append(cost)
        previous2, previous = previous, row
    return previous[-1]


def clear_match(wrong: str, right: str) -> bool:
    """True when `right` is the only key `wrong` can have meant (see the module docstring)."""
    a, b = wrong.lower().lstrip("-"), right.lower().lstrip("-")
    if not a or not b or a == b and wrong == right:
        return False
    if min(len(a), len(b)) < 4:
        # a short key: one character added, dropped or two swapped (tpp, tp), never replaced
        # (ep and dp are both real keys)
        return _distance(a, b) == 1 and (len(a) != len(b) or sorted(a) == sorted(b))
    if difflib.SequenceMatcher(None, a, b).ratio() >= 0.85:
        return True
    return _distance(a, b) <= (2 if min(len(a), len(b)) >= 8 else 1)


def _token(lines: list, line: int, column: int, word: str):
    """(start, end) columns (1-based, end exclusive) of `word` on `line` nearest `column`, as a
    whole key (not part of a longer name)."""
    if not line or line > len(lines):
        return None
    text = lines[line - 1]
    pattern = re.compile(r"(?<![\w.-])" + re.escape(word) + r"(?![\w-])")
    starts = [m.start() for m in pattern.finditer(text)]
    if not starts:
        return None
    at = min(starts, key=lambda s: abs(s + 1 - (column or 1)))
    return at + 1, at + 1 + len(word)


def _word_at(lines: list, line: int, column: int):
    """The key or flag that starts at (line, column), for a finding that names no key."""
    if not line or line > len(lines) or not column:
        return None
    match = _WORD.match(lines[line - 1], column - 1)
    return match.group(0).strip(".") if match else None


def rename(d, lines: list, ignored_keys: bool = False):
    """ML003 with a clear did-you-mean: the key's characters replaced by the right name (a key
    the framework ignores, a warning, only with `ignored_keys`: the editor's quick fix)."""
    if d.code != "ML003" or (d.severity < Severity.ERROR and not ignored_keys):
        return None
    suggestion = d.data.get("suggestion") or (_DID_YOU_MEAN.search(d.message) or [None, None])[1]
    if not suggestion:
        return None
    wrong = _word_at(lines, d.line, d.column) if not d.key else (
        d.key if d.key.startswith("-") else d.key.rsplit(".", 1)[-1])
    if not wrong:
        return None
    right = suggestion if suggestion.startswith("-") else suggestion.rsplit(".", 1)[-1]
    if not clear_match(wrong, right):
        return None
    span = _token(lines, d.line, d.column, wrong)
    if span is None:
        return None
    return Fix(f"Rename {wrong} to {right}", d,
               [Edit((d.line, span[0]), (d.line, span[1]), right)])


# ML308: the deprecated DeepSpeed keys whose replacement keeps the value (the key only)
_RENAMED = {"bfloat16": "bf16",
            "zero_optimization.stage3_gather_fp16_weights_on_model_save":
                "stage3_gather_16bit_weights_on_model_save"}
_CPU_OFFLOAD = re.compile(r'"cpu_offload"(\s*:\s*)(true|false)\b')


def deprecated(d, lines: list):
    """ML308 where DeepSpeed documents a replacement that keeps the value."""
    if d.code != "ML308" or not d.key or not d.key.startswith("deepspeed.deprecated."):
        return None
    dotted = d.key[len("deepspeed.deprecated."):]
    old = dotted.rsplit(".", 1)[-1]
    if dotted in _RENAMED:
        span = _token(lines, d.line, d.column, old)
        if span is None:
            return None
        new = _RENAMED[dotted]
        return Fix(f"Replace deprecated {old} with {new}", d,
                   [Edit((d.line, span[0]), (d.line, span[1]), new)])
    if dotted == "zero_optimization.cpu_offload" and d.line and d.line <= len(lines):
        match = _CPU_OFFLOAD.search(lines[d.line - 1])
        if match is None:
            return None
        device = "cpu" if match.group(2) == "true" else "none"
        text = f'"offload_optimizer"{match.group(1)}{{"device": "{device}"}}'
        return Fix("Replace deprecated cpu_offload with offload_optimizer", d,
                   [Edit((d.line, match.start() + 1), (d.line, match.end() + 1), text)])
    return None


def candidates(diagnostics: list, text: str) -> list:
    """Every fix these diagnostics (of one file, whose text is `text`) allow, one per place."""
    lines = text.splitlines()
    out, places = [], set()
    for d in diagnostics:
        fix = rename(d, lines) or deprecated(d, lines)
        if fix is None:
            continue
        place = tuple((e.start, e.end) for e in fix.edits)
        if place not in places:
            places.add(place)
            out.append(fix)
    return out


def _offsets(text: str) -> list:
    starts, at = [0], 0
    for line in text.splitlines(keepends=True):
        at += len(line)
        starts.append(at)
    return starts


def apply(text: str, edits: list) -> str:
    """`text` with the (non-overlapping) edits made, last first so positions stay valid."""
    starts = _offsets(text)

    def offset(position):
        line, column = position
        return starts[line - 1] + column - 1
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[:offset(edit.start)] + edit.text + text[offset(edit.end):]
    return text


def _identity(d) -> tuple:
    return (d.code, d.key)


# Errors a fix must never bring: the file no longer parses, a key is now given twice, a value
# conflicts with another source. (A fix may reveal other findings: `zero_optimisation` renamed,
# DeepSpeed reads the block, and a typo inside it becomes a finding of its own.)
BROKEN = ("ML001", "ML002", "ML005", "ML010")


def verified(path: str, text: str, fixes: list, check) -> tuple:
    """(new text, fixes kept): each fix kept only when the file checked with it (`check(path,
    text) -> diagnostics`) no longer has its finding, and neither breaks the file (BROKEN) nor
    adds an error on a line it edited."""
    before = {(d.code, d.message) for d in check(path, text) if d.severity >= Severity.ERROR}
    kept = []
    for fix in fixes:
        trial = apply(text, [e for f in kept + [fix] for e in f.edits])
        after = check(path, trial)
        lines = {line for e in fix.edits for line in range(e.start[0], e.end[0] + 1)}
        still = _identity(fix.diagnostic) in {_identity(d) for d in after}
        worse = [d for d in after if d.severity >= Severity.ERROR
                 and (d.code, d.message) not in before
                 and (d.code in BROKEN or d.line in lines)]
        if not still and not worse:
            kept.append(fix)
    return apply(text, [e for f in kept for e in f.edits]), kept


def diff(path: str, old: str, new: str) -> str:
    """A unified diff of one file's fixes (as `git diff` shows it)."""
    name = path.replace(os.sep, "/")
    return "".join(difflib.unified_diff(old.splitlines(keepends=True),
                                        new.splitlines(keepends=True),
                                        f"a/{name}", f"b/{name}"))
