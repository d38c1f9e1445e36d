"""OpenRLHF launch scripts: `openrlhf.cli.train_ppo_ray` and its siblings, read statically.

An OpenRLHF run is `ray job submit ... -- python3 -m openrlhf.cli.train_ppo_ray --flag value ...`
(RL on Ray: actor, critic, reference and reward models as Ray actors, vLLM engines beside them),
or `deepspeed --module openrlhf.cli.train_{sft,dpo,rm,kto}` / `torchrun -m ...` (DeepSpeed
training; the scripts often keep the arguments in a `read -r -d '' VAR <<EOF` block). The command
line is read with the static shell reader (never executed), its arguments against the argparse
definitions of the entry point at a pinned OpenRLHF tag (memlint/facts/openrlhf_args.json, read
with `ast` by tools/openrlhf_args.py: v0.9.9 for the underscore spellings, v0.11.0 for the dotted
ones it introduced), and the arguments are mapped onto scenario keys by
memlint/adapters/openrlhf_mapping.py.
"""
from __future__ import annotations

import re

from memlint import lazy_re
from memlint.adapters.detection import OPENRLHF_ENTRY as _ENTRY
from memlint.adapters.detection import openrlhf as detect  # noqa: F401 - the adapter's detect()
from memlint.diagnostics import UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance
from memlint.loaders import suppressions

FORMAT = "openrlhf"
# the scripts of OpenRLHF's first versions (openrlhf/cli/train_*.py run by path, `--pretrain`)
_SCRIPT = lazy_re.compile(r"(?:^|/)(train_(?:sft|dpo|rm|kto|ppo|ppo_ray|prm|kd))\.py$")
_HEREDOC = lazy_re.compile(
    r"^[ \t]*read\s+(?:-\w+\s+(?:''|\"\")?\s*)*([A-Za-z_]\w*)\s*<<-?\s*['\"]?(\w+)['\"]?"
    r"[ \t]*\n(.*?)\n[ \t]*\2[ \t]*$", re.S | re.M)


def _heredoc_env(text: str) -> dict:
    """`read -r -d '' VAR <<EOF ... EOF`: VAR holds the block's text (its offsets kept), which
    the script later expands (`deepspeed --module $training_commands`)."""
    # start-up: the shell reader loads only for a script
    from memlint.adapters import _shell

    env = {}
    for match in _HEREDOC.finditer(text):
        body, start = match.group(3), match.start(3)
        body = body.replace("\\\n", "  ")  # line continuations inside the block
        unresolved = ("a variable inside the block",) if "$" in body else ()
        env[match.group(1)] = _shell.Value(body, [start + k for k in range(len(body))],
                                          unresolved)
    return env


def load(path: str, text: str) -> Partial:
    # start-up: the shell reader loads only for a script
    from memlint.adapters import _script, _shell

    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    parsed = _script.parse(path, text, partial)
    if parsed is None:
        return partial
    script, prov = parsed

    interpreter = _shell.Interpreter(_heredoc_env(text))
    found = None
    for command in interpreter.run(script):
        texts = [f.text for f in command.fields]
        for index, word in enumerate(texts):
            match = _ENTRY.fullmatch(word) if word.startswith("openrlhf.") else _SCRIPT.search(word)
            if match is not None and ("--pretrain" in texts or word.startswith("openrlhf.")):
                found = (command, index, match.group(1))
                break
        if found is not None:
            break
    for offset, message in interpreter.notes:
        partial.diagnostics.append(make(UNRESOLVED, Severity.INFO, message, prov(offset)))
    if found is None:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO, "no OpenRLHF launch found (python3 -m "
            "openrlhf.cli.train_* --flags); nothing was read from this script",
            Provenance(path, 1, 1, None)))
        return partial
    command, index, entry = found
    partial.anchor = prov(command.offset, "launch command")
    items = _argv(command.fields[index + 1:], prov)
    launcher = [(f.text, prov(f.origin, f.text), f.unresolved) for f in command.fields[:index]]
    # start-up: the mapping loads only for an OpenRLHF script
    from memlint.adapters import openrlhf_mapping

    openrlhf_mapping.apply(entry, items, launcher, partial, partial.anchor)
    return partial


def _argv(fields: list, prov) -> dict:
    """`--name value`, `--name=value`, bare `--flag` -> {name: (value, prov, unresolved)}; the
    last of a repeated name wins (argparse)."""
    items: dict = {}
    i = 0
    while i < len(fields):
        text = fields[i].text
        if not text.startswith("--"):
            i += 1
            continue
        name, value, unresolved = text[2:], None, tuple(fields[i].unresolved)
        where = prov(fields[i].origin, text.split("=")[0])
        if "=" in name:
            name, value = name.split("=", 1)
        elif i + 1 < len(fields) and not fields[i + 1].text.startswith("--"):
            value = fields[i + 1].text
            unresolved += tuple(fields[i + 1].unresolved)
            values = [value]
            # nargs=2 arguments (--adam_betas 0.9 0.95) take the words up to the next flag
            while i + 2 < len(fields) and not fields[i + 2].text.startswith("-") and \
                    re.fullmatch(r"-?[0-9.eE+-]+", fields[i + 2].text or "x"):
                values.append(fields[i + 2].text)
                i += 1
            value = values[0] if len(values) == 1 else values
            i += 1
        items[name] = (value, where, unresolved)
        i += 1
    return items
