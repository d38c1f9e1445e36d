"""Whole inputs for the fuzz oracle beyond one mutated config (issue 30): training logs of every
style memlint reads (Megatron, torchtitan, DeepSpeed, HF, out-of-memory, verl, vLLM) for
`memlint compare` against a preset or a real verl / vLLM run (with --write-assumptions into a
pyproject.toml), `[tool.memlint]` tables of a
pyproject.toml beside a config, and directory trees for `memlint check DIR`.

A generator takes (random.Random, corpus) and returns a Case: the files to lay out in a fresh
folder (a repository root), the command line to run there, and what the output must hold beyond
mutate.check_result's contract: no raw control character in any output, no line that a file
name forged (names carry "\\nFORGED" and "::error" tails), `--format github` lines that are all
memlint's own, Markdown with no HTML or @mention from the inputs, and a pyproject.toml that
--write-assumptions leaves valid with everything but [tool.memlint.assumptions] unchanged.
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Optional

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

from fuzz import mutate

PRESETS = ("llama3-8b", "llama3-70b", "mixtral-8x7b", "gpt2")
# File-name tails that must never reach an output raw (each generator puts one in some names)
HOSTILE_NAMES = ("\nFORGED::error file=x,line=1::forged", "\x1b[31mred\x07", "\r\nFORGED",
                 "<img src=x onerror=alert(1)>", "@someone", "\u202egnp", "`|`*x*|", "\x7f\x9b2J")
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e]")
_CODE_SPAN = re.compile(r"(`+)[^`]*?\1")


@dataclass
class Case:
    kind: str
    files: list                      # [(relative path, bytes | None for a folder | "->target")]
    argv: list
    fmt: str = "json"
    command: str = "check"
    pyproject: Optional[bytes] = None  # its text before a --write-assumptions run
    notes: dict = field(default_factory=dict)


def _name(rng: random.Random, base: str) -> str:
    if rng.random() < 0.25:
        stem, dot, ext = base.rpartition(".")
        return f"{stem}{rng.choice(HOSTILE_NAMES)}{dot}{ext}"
    return base


# ---------------------------------------------------------------------------------------------
# Logs

NUMBERS = ("1.5", "24761.02978515625", "0", "65203.9", "1.2.3", ".", "1" * 400, "-5", "1e5",
           "nan", "", "1,024.5", "7", "0.0001", "99999999999999999999999", "3" * 41, "12.")
COUNTS = ("0", "1", "7", "10", "1" * 13, "1" * 5000, "-1", "00", "18446744073709551616")
UNITS = ("GiB", "MiB", "KiB", "B", "GB", "MB", "TiB", "XB", "gib", "", "GiB" * 50)


def _n(rng):
    return rng.choice(NUMBERS) if rng.random() < 0.3 else f"{rng.uniform(0, 90000):.3f}"


def _rank(rng, ranks):
    return rng.choice(COUNTS) if rng.random() < 0.05 else str(rng.randrange(ranks))


def _log_line(rng, ranks: int) -> str:
    r, n = _rank(rng, ranks), lambda: _n(rng)
    step = rng.choice(COUNTS) if rng.random() < 0.05 else str(rng.randint(1, 1000))
    style = rng.randrange(15)
    if style == 0:
        return (f"[Rank {r}] (after {step} iterations) memory (MB) | allocated: {n()} | "
                f"max allocated: {n()} | reserved: {n()} | max reserved: {n()}")
    if style == 1:
        return f"after {step} iterations memory (MB) | allocated: {n()} | max allocated: {n()}"
    if style == 2:
        return (f"[rank{r}]:[titan] step: {step}  loss: 2.1  memory: {n()}GiB({n()}%)  "
                "tps: 3,012")
    if style == 3:
        return f"{{'memory/max_active(GiB)': {n()}, 'memory/max_reserved(GiB)': {n()}}}"
    if style == 4:
        return f"[INFO] [utils.py:781:see_memory_usage] {rng.choice(('before forward', ''))}"
    if style == 5:
        return (f"[INFO] [utils.py:782:see_memory_usage] MA {n()} GB         Max_MA {n()} GB   "
                f"      CA {n()} GB         Max_CA {n()} GB ")
    if style == 6:
        key = rng.choice(("before_init_mem_gpu", "init_mem_gpu_alloc_delta",
                          "train_mem_gpu_alloc_delta", "train_mem_gpu_peaked_delta"))
        return f"  {key} = {rng.choice(('', '-'))}{n()}{rng.choice(('MB', ''))}"
    if style == 7:
        u = lambda: rng.choice(UNITS)  # noqa: E731
        return (f"[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB."
                f" GPU {r} has a total capacity of {n()} {u()} of which {n()} {u()} is free. "
                f"Process 1 has {n()} {u()} memory in use. Of the allocated memory {n()} {u()} "
                f"is allocated by PyTorch, and {n()} {u()} is reserved by PyTorch but unallocated.")
    if style == 8:
        u = lambda: rng.choice(UNITS)  # noqa: E731
        return (f"RuntimeError: CUDA out of memory. (GPU {r}; {n()} {u()} total capacity; {n()} "
                f"{u()} already allocated; {n()} {u()} free; {n()} {u()} reserved in total)")
    if style == 9:   # a long line of a repeated memory-line fragment: the patterns stay linear
        fragment = rng.choice(("step: 1 ", "see_memory_usage] a" + " " * 50, "(GPU 0; 1",
                               "GPU 0 has a total capacity of 1 GiB of which 1 GiB is free. ",
                               "memory (MB) after 1 ", "[Rank 1", "_mem_gpu '"))
        return fragment * rng.randint(100, 4000)
    if style == 10:
        return "".join(chr(rng.randrange(0, 0x3000)) for _ in range(rng.randint(1, 80)))
    if style == 11:   # verl's step metrics: console, its file logger's JSON, numpy reprs
        return rng.choice((
            f"(TaskRunner pid=1) step:{step} - actor/entropy_loss:0.4 - perf/max_memory_allocated"
            f"_gb:{n()} - perf/max_memory_reserved_gb:{n()} - perf/cpu_memory_used_gb:{n()}",
            f'{{"step": {step}, "data": {{"perf/max_memory_allocated_gb": {n()}, '
            f'"perf/max_memory_reserved_gb": {n()}}}}}',
            f"step:{step} - actor/perf/max_memory_allocated_gb: np.float64({n()})"))
    if style == 12:   # verl's log_gpu_memory_usage
        return (f"(WorkerDict pid={r}) After update_actor, memory allocated (GB): {n()}, memory "
                f"reserved (GB): {n()}, max memory allocated (GB): {n()}, device memory "
                f"used/total (GB): {n()}/{n()}")
    if style == 13:   # vLLM's start-up lines
        return rng.choice((
            f"(EngineCore pid={r}) INFO Model loading took {n()} GiB memory and 7.0 seconds",
            f"(EngineCore pid={r}) INFO Available KV cache memory: {n()} GiB",
            f"(EngineCore pid={r}) INFO GPU KV cache size: {rng.choice(COUNTS)} tokens",
            f"INFO Graph capturing finished in {n()} secs, took {n()} GiB",
            f"INFO CuMemAllocator: sleep freed {n()} GiB memory in total"))
    return rng.choice(("iteration 10/100 | loss 2.3", "Epoch 1: 50%|#####     | 5/10\r",
                       "", "\t", "NCCL INFO Channel 00/32"))


LOGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "fixtures", "logs")
RL_RUNS = ("verl-qwen2.5-0.5b-ppo.sh", "verl-qwen2-7b-ppo-tp2.sh", "verl-qwen2-7b-ppo-offload.sh",
           "vllm-llama3.1-8b-h100.sh")   # the runs of the real RL logs beside them


def log_case(rng: random.Random, corpus: list) -> Case:
    ranks = rng.choice((1, 1, 2, 8, 64, 3000))
    lines = [_log_line(rng, ranks) for _ in range(rng.randint(1, 60))]
    if ranks == 3000:
        lines += [f"[Rank {i}] (after 10 iterations) memory (MB) | allocated: 1.5 | max "
                  f"allocated: {i % 97 + 2}.5 | reserved: 300 | max reserved: 400"
                  for i in range(ranks)]
        rng.shuffle(lines)
    text = "\n".join(lines).encode("utf-8", "surrogateescape")
    if rng.random() < 0.05:
        text += bytes(rng.randrange(256) for _ in range(rng.randint(1, 4096)))
    name = _name(rng, "train.log")
    files = [(name, text)]
    if rng.random() < 0.2:   # an RL run (verl, vLLM serve): compare reads its engine lines
        run = rng.choice(RL_RUNS)
        with open(os.path.join(LOGS, run), "rb") as handle:
            files.append((run, handle.read()))
        argv = ["compare", name, run]
    else:
        argv = ["compare", name, "--model", rng.choice(PRESETS)]
    if rng.random() < 0.6:
        argv += ["--world-size", str(rng.choice((1, 2, 8, 64, 4096, 1000000)))]
    if rng.random() < 0.3:
        argv += ["--set", f"pp={rng.choice((1, 2, 4))}"]
    fmt = rng.choice(("json", "text"))
    pyproject = None
    if rng.random() < 0.4:
        argv.append("--write-assumptions")
        if rng.random() < 0.5:
            pyproject = _pyproject_text(rng, []).encode("utf-8", "surrogateescape")
            if rng.random() < 0.3:
                pyproject = pyproject.replace(b"\n", b"\r\n")
            files.append(("pyproject.toml", pyproject))
    return Case("log", files, argv + ["--format", fmt], fmt, "compare", pyproject)


# ---------------------------------------------------------------------------------------------
# pyproject.toml [tool.memlint]

_STRINGS = ("ML1", "ML101", "exceeds-gpu-memory", "", "*", "ML", "nope", "\x1b[31m", "a\\nb",
            "ML9999", "low-memory-headroom", "@team", "<b>x</b>")
_GLOBS = ("*.json", "**/*", "/etc/host*", "../*", "missing.json", "[", "configs/**/*.yaml", ".",
          "*", "ds_config.json", "a/../../b", "~/x")


def _toml_string(rng) -> str:
    return json.dumps(rng.choice(_STRINGS))   # JSON's escapes are TOML's basic-string escapes


def _toml_value(rng, depth: int = 0) -> str:
    roll = rng.randrange(10)
    if roll == 0 and depth < 3:
        return "[" + ", ".join(_toml_value(rng, depth + 1) for _ in range(rng.randint(0, 4))) + "]"
    if roll == 1 and depth < 3:
        return "{" + ", ".join(f"k{i} = {_toml_value(rng, depth + 1)}"
                               for i in range(rng.randint(0, 3))) + "}"
    if roll == 2:
        return rng.choice(("true", "false"))
    if roll in (3, 4):
        return rng.choice(("0", "-1", "0.15", "1e308", "inf", "nan", "8", "1" * 30, "3.5"))
    if roll == 5:
        return '"' + rng.choice(_GLOBS) + '"'
    return _toml_string(rng)


def _list(rng, pool) -> str:
    return "[" + ", ".join(f'"{rng.choice(pool)}"' for _ in range(rng.randint(0, 5))) + "]"


def _pyproject_text(rng: random.Random, names: list) -> str:
    pool = list(_GLOBS) + names
    lines = ['[project]\nname = "demo"\n', "[tool.memlint]"]
    for key in rng.sample(("select", "ignore", "extend-select", "fail-on", "files", "exclude",
                           "allow-outside-root", "bogus", "fail_on"), rng.randint(0, 4)):
        if key in ("files", "exclude"):
            value = _list(rng, pool) if rng.random() < 0.8 else _toml_value(rng)
        elif key in ("select", "ignore", "extend-select"):
            value = ("[" + ", ".join(_toml_string(rng) for _ in range(rng.randint(0, 4))) + "]"
                     if rng.random() < 0.8 else _toml_value(rng))
        elif key == "fail-on":
            value = rng.choice(('"error"', '"warning"', '"info"', '"fatal"', "1"))
        else:
            value = _toml_value(rng)
        lines.append(f"{key} = {value}")
    for table in rng.sample(("per-file-ignores", "severity", "options.low-memory-headroom",
                             "scenario", "assumptions"), rng.randint(0, 3)):
        lines.append(f"\n[tool.memlint.{table}]")
        for key in rng.sample(("margin", '"*.json"', "world_size", "seq_len", "gpu",
                               '"runtime.allocator_fraction"', '"runtime.cuda_context_bytes"',
                               "low-memory-headroom", "ML101", "model", '"units"'),
                              rng.randint(0, 4)):
            lines.append(f"{key} = {_toml_value(rng)}")
    for _ in range(rng.choice((0, 0, 1, 2))):
        lines.append("\n[[tool.memlint.runs]]")
        lines.append(f"files = {_list(rng, pool)}")
        if rng.random() < 0.5:
            lines.append(f'set = ["{rng.choice(mutate.SET_KEYS)}={rng.choice(mutate.SET_VALUES)}"]')
        if rng.random() < 0.3:
            lines.append(f'model = "{rng.choice(PRESETS)}"')
    text = "\n".join(lines) + "\n"
    roll = rng.random()
    if roll < 0.05:
        text = text.replace("demo", "d\udce9mo")         # one Latin-1 byte once written
    elif roll < 0.08:
        text += "x = 1." + "1" * rng.randint(1000, 20000) + "\n"
    elif roll < 0.11:
        text = text[:rng.randrange(len(text) + 1)]
    elif roll < 0.14:
        text += "deep = " + "[" * 200 + "]" * 200 + "\n"
    return text


def pyproject_case(rng: random.Random, corpus: list) -> Case:
    name, raw = rng.choice(corpus)
    if rng.random() < 0.3:
        name, raw = mutate.mutate(rng, name, raw, rounds=1)
    name = _name(rng, os.path.basename(name.rpartition(":")[2]) or "config.json")
    text = _pyproject_text(rng, [name]).encode("utf-8", "surrogateescape")
    files = [("pyproject.toml", text), (name, raw)]
    fmt = rng.choice(("json", "text", "github", "markdown", "sarif"))
    command = rng.choice(("check", "check", "estimate"))
    paths = rng.choice(([], [name], ["."])) if command == "check" else [name]
    extra = ["--model", rng.choice(PRESETS)] if rng.random() < 0.3 else []
    if command == "estimate" and fmt not in ("json", "text", "markdown"):
        fmt = "json"
    return Case("pyproject", files, [command, "--format", fmt, *extra, *paths], fmt, command)


# ---------------------------------------------------------------------------------------------
# Directory trees

_FOLDERS = ("configs", "a", "b", "node_modules", ".hidden", "venv", "build", "x.egg-info",
            "deep", "runs")


def tree_case(rng: random.Random, corpus: list) -> Case:
    folders = [""]
    files: list = []
    for _ in range(rng.randint(0, 8)):
        parent = rng.choice(folders)
        folders.append(os.path.join(parent, rng.choice(_FOLDERS) + str(rng.randrange(3))))
    if rng.random() < 0.1:   # a deep chain
        chain = ""
        for _ in range(rng.randint(20, 60)):
            chain = os.path.join(chain, "d")
            folders.append(chain)
    for folder in folders[1:]:
        files.append((folder, None))
    names = []
    for _ in range(rng.randint(1, 14)):
        folder = rng.choice(folders)
        roll = rng.random()
        if roll < 0.55:
            name, raw = rng.choice(corpus)
            if rng.random() < 0.3:
                name, raw = mutate.mutate(rng, name, raw, rounds=1)
            name = os.path.basename(name.rpartition(":")[2]) or "config.json"
        elif roll < 0.75:
            name = rng.choice(("notes.txt", "data.json", "README.md", "run.sh", "x.yaml",
                               "blob.dat", "empty.toml"))
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
        elif roll < 0.85:
            name, raw = "memlint.toml", (f'model = "{rng.choice(PRESETS)}"\nfiles = '
                                         f'{_list(rng, list(_GLOBS) + names)}\n').encode()
        else:
            target = rng.choice(("/etc/hostname", "..", ".", "missing", "loop"))
            name, raw = rng.choice(("link.json", "link.sh", "loop")), f"->{target}"
        name = _name(rng, name)
        names.append(name)
        files.append((os.path.join(folder, name), raw))
    if rng.random() < 0.3:
        files.append(("pyproject.toml", _pyproject_text(rng, names).encode("utf-8",
                                                                            "surrogateescape")))
    fmt = rng.choice(("json", "text", "github", "markdown", "junit"))
    top = rng.choice(folders)
    extra = ["--skip-unknown"] if rng.random() < 0.3 else []
    return Case("tree", files, ["check", "--format", fmt, *extra, top or "."], fmt, "check")


GENERATORS = (log_case, pyproject_case, tree_case)


# ---------------------------------------------------------------------------------------------
# Running one case and its oracle


def _lay_out(folder: str, files: list) -> None:
    for relative, raw in files:
        path = os.path.join(folder, relative)
        os.makedirs(os.path.dirname(path) or folder, exist_ok=True)
        if raw is None:
            os.makedirs(path, exist_ok=True)
        elif isinstance(raw, str) and raw.startswith("->"):
            target = raw[2:]
            if not os.path.lexists(path):
                os.symlink(os.path.basename(path) if target == "loop" else target, path)
        elif not os.path.isdir(path):
            with open(path, "wb") as handle:
                handle.write(raw)


def run_case(case: Case, time_limit: float = 5.0, workdir: Optional[str] = None) -> Optional[str]:
    """Lay out the case in a fresh repository folder, run it there; the failure or None."""
    base = workdir or tempfile.gettempdir()
    folder = tempfile.mkdtemp(prefix="case-", dir=base)
    cwd = os.getcwd()
    try:
        os.mkdir(os.path.join(folder, ".git"))
        try:
            _lay_out(folder, case.files)
        except (OSError, UnicodeEncodeError, ValueError):
            return None   # a name this file system refuses: not an input memlint can be given
        os.chdir(folder)
        result = mutate.invoke([case.argv[0], "--no-color", *case.argv[1:]], time_limit)
        if isinstance(result, str):
            return result
        return check_case(case, *result)
    finally:
        os.chdir(cwd)
        shutil.rmtree(folder, ignore_errors=True)


def check_case(case: Case, code, out: str, err: str) -> Optional[str]:
    if case.command == "compare":
        failure = _compare_contract(case, code, out, err)
    else:   # exit 2 only as a configuration error ("memlint: error: pyproject.toml: ...")
        failure = mutate.check_result(code, out, err, case.fmt, "pyproject.toml", case.command,
                                      usage=False)
    return failure or _output_contract(case, out, err)


def _compare_contract(case: Case, code, out: str, err: str) -> Optional[str]:
    failure = mutate.broken(code, out, err, codes=(0, 2))
    if failure is not None:
        return "compare " + failure
    if code == 2:
        # warnings may come with it (compare --write-assumptions names settings it cannot see)
        lines = [line for line in err.splitlines() if line.startswith("memlint: error:")]
        if len(lines) != 1:
            return "compare exit 2 without one error line: " + err[-300:]
    if code == 0 and case.fmt == "json" and "--write-assumptions" not in case.argv:
        import json

        try:
            json.loads(out)
        except ValueError as exc:
            return f"compare output is not JSON: {exc}"
    if "--write-assumptions" in case.argv:
        return _pyproject_after(case, code)
    return None


def _pyproject_after(case: Case, code) -> Optional[str]:
    try:
        with open("pyproject.toml", "rb") as handle:
            after = handle.read()
    except OSError:
        return None if code == 2 or case.pyproject is None else "pyproject.toml vanished"
    if code == 2 or case.pyproject is None:
        if case.pyproject is not None and after != case.pyproject:
            return "pyproject.toml changed by a refused write"
        return None
    try:
        before = tomllib.loads(case.pyproject.decode("utf-8"))
        now = tomllib.loads(after.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError) as exc:
        return f"pyproject.toml written though unreadable before or after: {exc}"
    if _without_assumptions(now) != _without_assumptions(before):
        return "--write-assumptions changed more than [tool.memlint.assumptions]"
    if b"\r\n" in case.pyproject and after.count(b"\n") != after.count(b"\r\n"):
        return "--write-assumptions turned CRLF into LF"
    return None


def _without_assumptions(doc: dict) -> dict:
    """The document but [tool.memlint.assumptions], and [tool.memlint] / [tool] where only
    that table made them (a write into a file that had no [tool.memlint] adds both)."""
    tool = doc.get("tool", {})
    tool.get("memlint", {}).pop("assumptions", None)
    if tool.get("memlint") == {}:
        del tool["memlint"]
    if doc.get("tool") == {}:
        del doc["tool"]
    return doc


def _output_contract(case: Case, out: str, err: str) -> Optional[str]:
    for stream, text in (("stdout", out), ("stderr", err)):
        found = _RAW_CONTROL.search(text)
        if found:
            return f"raw control character {found.group(0)!r} on {stream}"
        if any(line.startswith("FORGED") for line in text.splitlines()):
            return f"a file name forged a line on {stream}"
    if case.fmt == "github":
        for line in out.splitlines():
            if not re.match(r"::(error|warning|notice) [^\n]*title=[^:\n]*::", line):
                return f"github line memlint did not write: {line[:120]!r}"
    if case.fmt == "markdown":
        text = _CODE_SPAN.sub("", out)   # inside a code span nothing is HTML or a mention
        for needle in ("<img", "@someone", "<b>"):
            if needle in text:
                return f"markdown passes {needle!r} through"
    return None


def reproducer(case: Case, directory: str, seed: int) -> str:
    """Write a failing case's files and command line under `directory`; returns its folder."""
    folder = os.path.join(directory, f"{case.kind}-{seed}")
    os.makedirs(folder, exist_ok=True)
    try:
        _lay_out(folder, case.files)
    except (OSError, UnicodeEncodeError, ValueError):
        pass
    with open(os.path.join(folder, "ARGV.json"), "w", encoding="utf-8") as handle:
        handle.write(json.dumps(case.argv, ensure_ascii=True) + "\n")
    return folder
