"""Reading Megatron argv from launch scripts and argument files: every flag becomes an `Arg`
(flag, values, the position of each), launcher options and memory-relevant environment beside it.

Nothing is executed or sourced: scripts go through memlint.adapters._shell's reader. A value only
the running script knows (`$(...)`, a variable never set) is kept with what could not be known.
"""
from __future__ import annotations

import re

from memlint import lazy_import, lazy_re
from memlint.adapters.megatron.flags import (FLAG_BY_NAME, KNOWN_FLAGS, MAX_UNKNOWN_LISTED,
                                             MEMORY_ENV)
from memlint.diagnostics import INVALID_VALUE, PARSE_ERROR, UNRESOLVED, Severity, make
from memlint.ir import Provenance
from memlint.records import field, record

# start-up: the shell reader loads only when a launch script or an argument file is read
_shell = lazy_import.module("memlint.adapters._shell")

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


@record(slots=True)
class Arg:
    flag: str
    values: list
    prov: Provenance                 # the flag's own position
    value_provs: list = field(default_factory=list)
    unresolved: tuple = ()           # what could not be known in the values


@record
class Read:
    args: list = field(default_factory=list)
    launcher: dict = field(default_factory=dict)   # option -> (value text, prov, unresolved)
    diagnostics: list = field(default_factory=list)
    references: list = field(default_factory=list)
    yaml_style: bool = False
    kind: str = "args"
    env: dict = field(default_factory=dict)        # memory-relevant environment: name -> (text, prov)
    entry: Optional[tuple] = None                  # the training script launched: (path, prov)
    mode: Optional[tuple] = None                   # a test case's MODE (e.g. inference): (text, prov)
    anchor: Optional[Provenance] = None   # the launch command (where the run is defined)


_NUMBER = lazy_re.compile(r"^-?[0-9][0-9_]*(\.[0-9]*)?([eE][+-]?[0-9]+)?$")


def _is_flag(text: str) -> bool:
    if text.startswith("--"):
        return True  # (no number starts with two dashes: the common case without the pattern)
    return text.startswith("-") and len(text) > 1 and not _NUMBER.match(text)


def split_argv(words: list, read: Read) -> None:
    """Group argv words (text, prov, unresolved) into Args; `--flag=value` is split."""
    i = 0
    n = len(words)
    strays, first_stray, stray_known = 0, None, False
    while i < n:
        text, prov, unresolved = words[i]
        if not _is_flag(text):
            strays += 1
            if strays > MAX_UNKNOWN_LISTED:  # one line for the rest: bounded output
                first_stray = first_stray or (text, prov)
                stray_known = stray_known or not unresolved
            elif unresolved:
                read.diagnostics.append(make(
                    UNRESOLVED, Severity.INFO,
                    f"{describe(unresolved)}: the words it expands to are unknown; flags it may "
                    "hold are not read", prov))
            else:
                read.diagnostics.append(make(
                    INVALID_VALUE, Severity.WARNING,
                    f"stray argument {text!r} follows no flag that takes a value; Megatron's "
                    "parser would reject it ('unrecognized arguments')", prov))
            i += 1
            continue
        flag, values, provs, unres = text, [], [], list(unresolved)
        if "=" in text and text.startswith("--"):
            flag, inline = text.split("=", 1)
            values.append(inline)
            provs.append(prov)
        spec = FLAG_BY_NAME.get(flag)
        j = i + 1
        want = spec.nargs if spec is not None else "*"
        while j < n:
            if want == 0 or (want == 1 and values):
                break
            nxt, nprov, nunres = words[j]
            if nxt[:2] == "--" or _is_flag(nxt):
                break
            values.append(nxt)
            provs.append(nprov)
            unres.extend(nunres)
            j += 1
        read.args.append(Arg(flag, values, prov, provs, tuple(unres)))
        i = j
    if first_stray is not None:
        read.diagnostics.append(make(
            INVALID_VALUE if stray_known else UNRESOLVED,
            Severity.WARNING if stray_known else Severity.INFO,
            f"{strays - MAX_UNKNOWN_LISTED} more words that follow no flag taking a value, from "
            f"{first_stray[0][:80]!r} on (only the first {MAX_UNKNOWN_LISTED} are listed)",
            first_stray[1]))


def describe(unresolved: tuple) -> str:
    return ", ".join(dict.fromkeys(unresolved))


# -- argument files --------------------------------------------------------------------------

_LAUNCHER_LINE = lazy_re.compile(r"^\s*#\s*launcher:\s*(.*)$", re.I)


def _launcher_start(line: str) -> Optional[int]:
    """Where the body of a `# launcher: ...` line starts, or None for another line:
    _LAUNCHER_LINE.match(line).start(1) (\\s is str.isspace, which strip() removes), compiled
    only for a line whose word is not ASCII (start-up: re.I beyond ASCII)."""
    rest = line.lstrip()
    if not rest.startswith("#"):
        return None
    after = rest[1:].lstrip()
    word = after[:9]
    if not word.isascii():
        header = _LAUNCHER_LINE.match(line)
        return header.start(1) if header else None
    if word.lower() != "launcher:":
        return None
    return len(line) - len(after[9:].lstrip())


def read_args_file(path: str, text: str) -> Read:
    read = Read()
    words: list = []
    for number, line in enumerate(text.splitlines(), start=1):
        start = _launcher_start(line)
        if start is not None:
            body = line[start:]
            cut = body.find("(")
            body = body if cut < 0 else body[:cut]
            _launcher_words(_line_words(path, body, number, start), read, whole=True)
            continue
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        words.extend(_line_words(path, line, number, 0, read))
    split_argv(words, read)
    return read


_SPECIAL = lazy_re.compile(r"[\\'\"$`#]")
_SPECIAL_CHARS = "\\'\"$`#"


def _line_words(path: str, line: str, number: int, col0: int, read: Optional[Read] = None,
                ) -> list:
    """Words of one line (POSIX quoting, `#` comments), without variable expansion."""
    if not any(char in line for char in _SPECIAL_CHARS):   # _SPECIAL.search(line), uncompiled
        # no quote, escape, `$`, backquote or comment: the words are what blanks separate (most
        # lines of an argument file; the shell reader per line cost ~25 us each)
        # the runs of [^ \t\r\n], without compiling a pattern: the blanks as spaces (same
        # offsets), split
        out, at = [], 0
        for word in line.replace("\t", " ").replace("\r", " ").replace("\n", " ").split(" "):
            if word:
                out.append((word, Provenance(path, number, col0 + at + 1, None), ()))
            at += len(word) + 1
        return out
    try:
        script = _shell.parse(line, shell=False)
    except _shell.ShellError as exc:
        if read is not None:
            read.diagnostics.append(make(PARSE_ERROR, Severity.ERROR, f"{exc}",
                                         Provenance(path, number, col0 + exc.offset + 1, None)))
        return []
    expander = _shell.Expander()
    out = []
    for command in script.commands:
        for word in command.words:
            for f in expander.fields(word):
                unresolved = dollar_refs(f.text) if any(s.kind != "lit" for s in word.segs) \
                    else ()
                out.append((f.text, Provenance(path, number, col0 + f.origin + 1, None),
                            unresolved))
    return out


def dollar_refs(text: str) -> tuple:
    if "$" not in text:   # start-up: each reference starts with one; the pattern compiles when one may
        return ()
    return tuple(f"{m.group(0)} (not set in this file)"
                 for m in re.finditer(r"\$\{[^}]*\}|\$[A-Za-z_0-9]+|\$\([^)]*\)", text))


# -- scripts ---------------------------------------------------------------------------------

_SBATCH = lazy_re.compile(r"^[ \t]*#SBATCH[ \t]+(.*)$", re.M)
_LAUNCHERS = {"torchrun", "deepspeed", "srun", "mpirun", "python", "python3", "uv", "exec",
              "time", "nohup", "env", "numactl", "accelerate"}


# commands that print their words rather than run them
_PRINTS = frozenset(("echo", "printf", "cat", "tee", "logger"))


def read_script(path: str, text: str) -> Read:
    read = Read()
    try:
        script = _shell.parse(text)
    except _shell.ShellError as exc:
        line, col = _shell.Script(text, [], [0] + [m.end() for m in re.finditer("\n", text)]
                                  ).where(exc.offset)
        read.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                     f"cannot read the script: {exc}",
                                     Provenance(path, line, col, None)))
        return read

    def prov(offset: int, key: Optional[str] = None) -> Provenance:
        line, col = script.where(offset)
        return Provenance(path, line, col, key)

    env = _sbatch_env(text, script)
    interpreter = _shell.Interpreter(env)
    interpreter.keep_empty = True  # `--save $CKPT` with CKPT=<placeholder>: unresolved, not missing
    best, score = None, 0
    for command in interpreter.run(script):
        texts = [f.text for f in command.fields]
        if texts and texts[0] in _PRINTS:
            continue  # `echo $CMD` shows the command; the launch is elsewhere
        entry = _entry_index(texts)
        if entry is None:
            continue
        after = texts[entry + 1:]
        # The launch is the command with the most Megatron flags: a data-preparation
        # `python tools/x.py --input ...` before it is a helper, not the training run.
        known = sum(1 for t in after if t.split("=", 1)[0] in KNOWN_FLAGS)
        flags = sum(1 for t in after if t.startswith("--"))
        if flags and (best is None or known > score):
            best, score = (command, entry), known
    for offset, message in interpreter.notes:
        read.diagnostics.append(make(UNRESOLVED, Severity.INFO, message, prov(offset)))
    for name in MEMORY_ENV:
        value = interpreter.env.get(name)
        if value is not None and getattr(value, "text", None) and not value.unresolved:
            read.env[name] = (value.text, prov(value.origins[0] if value.origins else 0, name))
    if best is None:
        read.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            "no Megatron launch command found (a command running a .py entry point with --flags); "
            "nothing was read from this script", Provenance(path, 1, 1, None)))
        return read
    command, entry = best
    offset = command.offset
    # positions only for the launch command's words (Provenance objects are the cost per word)
    fields = [(f.text, prov(f.origin), f.unresolved) for f in command.fields]
    read.entry = (module_path(fields[entry][0]), fields[entry][1])
    read.anchor = prov(offset, "launch command")
    _launcher_words(fields[:entry], read, whole=False)
    if any(t == "srun" for t, _, _ in fields[:entry]) and not (
            {"nproc_per_node", "ntasks"} & set(read.launcher)):
        # one process per srun task: the allocation's #SBATCH counts give the world size
        for option, var in (("nodes", "SLURM_NNODES"),
                            ("ntasks_per_node", "SLURM_NTASKS_PER_NODE"),
                            ("ntasks", "SLURM_NTASKS")):
            value = env.get(var)
            if value is not None and option not in read.launcher:
                read.launcher[option] = (value.text, prov(value.origins[0], f"#SBATCH ({var})"),
                                         ())
    split_argv(fields[entry + 1:], read)
    return read


def _sbatch_env(text: str, script) -> dict:
    """`#SBATCH --nodes=N` etc. become the SLURM_* variables srun would see."""
    env: dict = {}
    if "#SBATCH" not in text:   # start-up: what each match holds; the pattern is not compiled
        return env
    for match in _SBATCH.finditer(text):
        body = match.group(1).split("#")[0]
        start = match.start(1)
        for opt in re.finditer(r"(--[a-z-]+|-[A-Za-z])(?:[= ]([^\s]+))?", body):
            name, value = opt.group(1), opt.group(2)
            if value is None:
                continue
            offset = start + opt.start(2)
            names = {"--nodes": ("SLURM_NNODES", "SLURM_JOB_NUM_NODES"), "-N": ("SLURM_NNODES",
                     "SLURM_JOB_NUM_NODES"), "--ntasks-per-node": ("SLURM_NTASKS_PER_NODE",),
                     "--ntasks": ("SLURM_NTASKS",), "-n": ("SLURM_NTASKS",),
                     "--gpus-per-node": ("SLURM_GPUS_PER_NODE", "SLURM_GPUS_ON_NODE")
                     }.get(name, ())
            typed = re.fullmatch(r"(?:[A-Za-z0-9_-]+:)?(\d{1,9})", value)  # `--gpus-per-node=h100:8`
            if typed and (typed.start(1) == 0 or name == "--gpus-per-node"):
                value, offset = typed.group(1), offset + typed.start(1)
                for var in names:
                    env[var] = _shell.Value(value, [offset + k for k in range(len(value))])
    return env


def _entry_index(texts: list) -> Optional[int]:
    """The word that names the entry point: a .py path, or the module after `-m` (`python -m
    torch.distributed.run ... -m examples.mimo.pretrain_mimo`; the launcher modules are not
    one)."""
    for index, text in enumerate(texts):
        if text.endswith(".py") and not text.startswith("-"):
            return index
        if text == "-m" and index + 1 < len(texts) and _MODULE.fullmatch(texts[index + 1]) \
                and not texts[index + 1].startswith(_LAUNCHER_MODULES):
            return index + 1
    return None


_MODULE = lazy_re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_LAUNCHER_MODULES = ("torch.distributed.", "torch.backends", "debugpy", "deepspeed.launcher")


def module_path(text: str) -> str:
    """`examples.mimo.pretrain_mimo` -> `examples/mimo/pretrain_mimo.py` (what `-m` runs)."""
    return text if text.endswith(".py") else text.replace(".", "/") + ".py"


_LAUNCH_OPTIONS = {
    "--nproc_per_node": "nproc_per_node", "--nproc-per-node": "nproc_per_node",
    "--num_gpus": "nproc_per_node", "--num-gpus": "nproc_per_node",
    "--nnodes": "nnodes", "--num_nodes": "nnodes", "--num-nodes": "nnodes",
    "-N": "nodes", "--nodes": "nodes", "-n": "ntasks", "--ntasks": "ntasks",
    "--ntasks-per-node": "ntasks_per_node", "--gpus-per-node": "gpus_per_node",
}


def _launcher_words(words: list, read: Read, whole: bool) -> None:
    i = 0
    while i < len(words):
        text, prov, unresolved = words[i]
        name, value, vunres = text, None, unresolved
        if "=" in text and text.startswith("-"):
            name, value = text.split("=", 1)
        elif i + 1 < len(words) and text in _LAUNCH_OPTIONS:
            value, vunres = words[i + 1][0], words[i + 1][2]
            i += 1
        option = _LAUNCH_OPTIONS.get(name)
        if option is not None and value is not None:
            read.launcher[option] = (value, Provenance(prov.file, prov.line, prov.column, name),
                                     tuple(vunres))
        i += 1


# -- YAML ------------------------------------------------------------------------------------
