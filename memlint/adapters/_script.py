"""A launch script read statically for the RL and engine readers (verl, OpenRLHF, vllm serve).

`parse(path, text, partial)` parses the script with the shared shell reader (adapters/_shell.py,
never executed); a script it cannot read becomes a parse error on `partial` and None. It returns
the script and a `prov(offset, key)` that turns an offset into the script into a Provenance.
"""
from __future__ import annotations

import re

from memlint.diagnostics import PARSE_ERROR, Severity, make
from memlint.ir import Partial, Provenance

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


def parse(path: str, text: str, partial: Partial) -> Optional[tuple]:
    # start-up: the shell reader loads only for a script
    from memlint.adapters import _shell

    try:
        script = _shell.parse(text)
    except _shell.ShellError as exc:
        line, col = _shell.Script(text, [], [0] + [m.end() for m in re.finditer("\n", text)]
                                  ).where(exc.offset)
        partial.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                        f"cannot read the script: {exc}",
                                        Provenance(path, line, col, None)))
        return None

    def prov(offset: int, key: Optional[str] = None) -> Provenance:
        line, col = script.where(offset)
        return Provenance(path, line, col, key)

    return script, prov
