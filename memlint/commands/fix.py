"""`memlint check --fix` and `--diff`: the safe fixes of memlint/fixes.py for the files checked.

For each file with a fixable finding: its text is read, the fixes are made and verified (the
edited text is checked again from a buffer; a fix that leaves its finding, or adds an error, is
dropped), then either written through memlint.safe_write (atomic, locked, inside the repository
root unless --allow-outside-root, never through a symbolic link; a file that changed since it
was read is left alone) or, with --diff, shown as a unified diff and not written.
"""
from __future__ import annotations

import os

from memlint import fixes, safe_write
from memlint.document import analyze
from memlint.loaders import read_text


def _by_file(diagnostics: list) -> dict:
    out: dict = {}
    for d in diagnostics:
        if d.path and d.line and not d.path.startswith("<") and os.path.isfile(d.path):
            out.setdefault(os.path.abspath(d.path), []).append(d)
    return out


ROUNDS = 3   # a fix can reveal another (a renamed block's own typo): fix again, up to this often


def plan(diagnostics: list, options) -> list:
    """[(path, old text, new text, fixes kept)] for every file a fix changes."""
    out = []

    def check(path, text):
        return analyze(path, {path: text}, options).diagnostics
    for path, found in sorted(_by_file(diagnostics).items()):
        text, problems = read_text(path, options.max_bytes)
        if text is None or problems:
            continue
        new, made = text, []
        for _round in range(ROUNDS):
            wanted = fixes.candidates(found, new)
            if not wanted:
                break
            new, kept = fixes.verified(path, new, wanted, check)
            if not kept:
                break
            made += kept
            found = check(path, new)
        if made and new != text:
            out.append((path, text, new, made))
    return out


class Changed(safe_write.WriteError):
    pass


def write(changes: list, allow_outside_root: bool) -> int:
    """Write each file's fixed text; returns the number of fixes written. A file that cannot be
    written safely is left alone and named (one WriteError after the others are written)."""
    root = safe_write.write_root(os.getcwd())
    count, refused = 0, []
    for path, old, new, kept in changes:
        def change(current, old=old, new=new, path=path):
            if current != old:
                raise Changed(f"{shown(path)} changed while memlint fixed it; not written")
            return new
        try:
            safe_write.edit(path, change, root, allow_outside_root=allow_outside_root)
        except safe_write.WriteError as exc:
            refused.append(str(exc))
            continue
        count += len(kept)
    if refused:
        raise safe_write.WriteError(f"--fix wrote {count} fix(es); not fixed: "
                                    + "; ".join(refused))
    return count


def shown(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def diffs(changes: list) -> str:
    return "".join(fixes.diff(shown(path), old, new) for path, old, new, _kept in changes)
