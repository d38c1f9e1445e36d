"""Input mutators and the one-input oracle shared by tests/fuzz and bench/fuzz.py.

A mutator takes (random.Random, name, raw bytes) and returns (name, bytes): real configs from
fixtures/ (fixtures/shared-real/ among them) truncated, with bytes flipped, keys deleted or duplicated,
values of the wrong type, huge or special numbers, negative sizes, zero divisors, deep nesting,
non-UTF-8, empty and binary files. `run_one` lints one input through the real CLI entry point in
this process, under a time limit, and returns what went wrong (None when the contract held:
exit 0/1/2 as DESIGN.md says, parseable output, no internal error, positions on file problems).
"""
from __future__ import annotations

import io
import json
import os
import random
import re
import signal
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from typing import Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED_REAL = os.path.join(ROOT, "fixtures", "shared-real")
FIXTURES = os.path.join(ROOT, "fixtures")

CONFIG_EXTENSIONS = (".json", ".hjson", ".yaml", ".yml", ".toml", ".sh", ".txt")


def corpus(include_shared: bool = True) -> list:
    """[(file name, bytes)] of every config under fixtures/, the shared real configs
    (fixtures/shared-real/) last, as when they lived outside the repository."""
    roots = [FIXTURES] + ([SHARED_REAL] if include_shared else [])
    out = []
    for root in roots:
        for folder, _dirs, files in sorted(os.walk(root)):
            if root == FIXTURES and _inside(folder, SHARED_REAL):
                continue
            for name in sorted(files):
                if not name.endswith(CONFIG_EXTENSIONS) or name.startswith("_expect"):
                    continue
                with open(os.path.join(folder, name), "rb") as handle:
                    out.append((name, handle.read()))
    return out


def _inside(folder: str, root: str) -> bool:
    return folder == root or folder.startswith(root + os.sep)


# ---------------------------------------------------------------------------------------------
# Mutators (each bounded: the output is at most a few times the input, or a fixed size)

SPECIAL_NUMBERS = ("1e308", "-1e308", "1e309", "10" + "0" * 400, "-" + "9" * 400, "NaN",
                   "Infinity", "-Infinity", ".nan", ".inf", "-.inf", "nan", "inf", "0", "-0",
                   "-1", "-4096", "0.0", "1e-320", "2.5", "0.5", "-0.5", "9223372036854775808",
                   "18446744073709551616", "1e30", "3", "7", "1000000007", "1_000", "0x10",
                   "true", "false", "null", '"auto"', '""', '"x"', "[]", "{}", "[0]", '{"a": 1}',
                   "~", "yes", "'1'", '"-1"', '"1e400"')
_NUMBER = re.compile(rb"(?<![A-Za-z_0-9.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![A-Za-z_0-9])")
_KEYLIKE = re.compile(rb"^[ \t]*(?:\"[^\"\n]+\"|[A-Za-z_][\w.\-]*|--[\w\-]+)\s*[:=]?", re.M)


def truncate(rng, name, raw):
    return name, raw[:rng.randrange(len(raw) + 1)] if raw else raw


def flip_bytes(rng, name, raw):
    data = bytearray(raw)
    for _ in range(rng.randint(1, 8)):
        if not data:
            break
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    return name, bytes(data)


def random_bytes(rng, name, raw):
    data = bytearray(raw)
    for _ in range(rng.randint(1, 6)):
        i = rng.randrange(len(data) + 1)
        data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
    return name, bytes(data)


def _lines(raw):
    return raw.splitlines(keepends=True)


def delete_lines(rng, name, raw):
    lines = _lines(raw)
    for _ in range(rng.randint(1, 4)):
        if lines:
            del lines[rng.randrange(len(lines))]
    return name, b"".join(lines)


def duplicate_lines(rng, name, raw):
    lines = _lines(raw)
    for _ in range(rng.randint(1, 3)):
        if lines:
            i = rng.randrange(len(lines))
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
    return name, b"".join(lines)


def duplicate_key(rng, name, raw):
    lines = _lines(raw)
    keyed = [i for i, line in enumerate(lines) if _KEYLIKE.match(line)]
    if keyed:
        i = rng.choice(keyed)
        lines.insert(i + 1, lines[i])
    return name, b"".join(lines)


def replace_number(rng, name, raw):
    matches = list(_NUMBER.finditer(raw))
    if not matches:
        return name, raw
    chosen = sorted(rng.sample(matches, min(len(matches), rng.randint(1, 3))),
                    key=lambda m: -m.start())
    data = raw
    for match in chosen:
        data = data[:match.start()] + rng.choice(SPECIAL_NUMBERS).encode() + data[match.end():]
    return name, data


def replace_all_numbers(rng, name, raw):
    """Every number the same special value: zero divisors and huge sizes everywhere at once."""
    value = rng.choice(("0", "-1", "1e308", "10" + "0" * 400, "NaN", "Infinity", "1", "3"))
    return name, _NUMBER.sub(value.encode(), raw)


def wrong_type(rng, name, raw):
    """A value after a key becomes another type."""
    lines = _lines(raw)
    keyed = [i for i, line in enumerate(lines) if re.search(rb"[:=]\s*\S", line)]
    if not keyed:
        return name, raw
    i = rng.choice(keyed)
    line = lines[i]
    match = re.search(rb"([:=]\s*)([^,\n\r#]+)", line)
    if match:
        new = rng.choice((b'"str"', b"[1, 2]", b"{}", b"true", b"null", b"[]", b'"1e400"',
                          b'"-2"', b"1.5", b"{\"a\": {\"b\": 1}}", b"'8'"))
        line = line[:match.start(2)] + new + line[match.end(2):]
        lines[i] = line
    return name, b"".join(lines)


def deep_nesting(rng, name, raw):
    depth = rng.choice((70, 200, 1000, 5000))
    lower = name.lower()
    if lower.endswith((".json", ".hjson")):
        blob = b"[" * depth + b"1" + b"]" * depth
        return name, raw.replace(b"{", b'{"deep": ' + blob + b", ", 1) if b"{" in raw else blob
    if lower.endswith((".yaml", ".yml")):
        return name, raw + b"\ndeep: " + b"[" * depth + b"1" + b"]" * depth + b"\n"
    if lower.endswith(".toml"):
        return name, raw + b"\ndeep = " + b"[" * depth + b"1" + b"]" * depth + b"\n"
    return name, raw + b"\n--deep " + b"$(" * depth + b"\n"


def non_utf8(rng, name, raw):
    i = rng.randrange(len(raw) + 1)
    return name, raw[:i] + rng.choice((b"\xff\xfe", b"\xc3", b"\x80", b"\xed\xa0\x80")) + raw[i:]


def empty(rng, name, raw):
    return name, rng.choice((b"", b"\n", b" ", b"{}", b"[]", b"null", b"---\n", b"#", b"\xef\xbb\xbf"))


def binary(rng, name, raw):
    return name, bytes(rng.randrange(256) for _ in range(rng.randint(1, 512)))


def splice(rng, name, raw):
    """Half of the file replaced by a shuffled copy of its own lines."""
    lines = _lines(raw)
    rng.shuffle(lines)
    return name, b"".join(lines[:max(1, len(lines) // 2)]) + raw[len(raw) // 2:]


def yaml_specials(rng, name, raw):
    if not name.lower().endswith((".yaml", ".yml")):
        return replace_number(rng, name, raw)
    tail = rng.choice((b"\nx: !!python/object/apply:os.system ['true']\n",
                       b"\n<<: *missing\n", b"\nanchor: &a [1, 2]\nref: *a\n",
                       b"\n? [1, 2]\n: v\n", b"\nk: !!binary AAAA\n", b"\nt: 2024-01-01\n",
                       b"\n%TAG ! tag:x,2000:\n", b"\n--- \n- 1\n", b"\n<<: [1, 2]\n",
                       b"\nk: !!omap [{a: 1}]\n", b"\nk: !!set {a, b}\n"))
    return name, raw + tail


def shell_specials(rng, name, raw):
    if not name.lower().endswith((".sh", ".txt")):
        return wrong_type(rng, name, raw)
    tail = rng.choice((b"\n--num-layers $((1/0)) \\\n", b'\n--hidden-size "${H:-}" \\\n',
                       b"\nA=$(touch x)\n--seq-length ${A} \\\n", b"\n--tensor-model-parallel-size 0 \\\n",
                       b"\n--micro-batch-size -3 \\\n", b"\n--hidden-size 1e400 \\\n",
                       b"\n--num-attention-heads 0 --hidden-size 7 \\\n", b"\n\\\n\\\n",
                       b"\nX=${X:-${X:-${X:-1}}}\n", b"\n'unterminated \\\n", b"\n--ffn-hidden-size\n",
                       b"\n<<EOF\n--hidden-size 4\nEOF\n"))
    return name, raw + tail


def doubling(rng, name, raw):
    """A variable or an array doubled 20-60 times (2**60 characters if expanded naively)."""
    rounds = rng.choice((20, 40, 60))
    if rng.random() < 0.5:
        body = "V0=ab\n" + "".join(f"V{i}=$V{i - 1}$V{i - 1}\n" for i in range(1, rounds))
        use = f"--tokenizer-model $V{rounds - 1}"
    else:
        body = "A=(x)\n" + 'A=("${A[@]}" "${A[@]}")\n' * rounds
        use = "${A[@]}"
    if not name.lower().endswith((".sh", ".txt")):
        name = "pretrain_fuzz.sh"
    text = body + f"torchrun pretrain_gpt.py {use} --num-layers 2\n"
    return name, text.encode() + (raw[:2048] if rng.random() < 0.3 else b"")


def huge_multiplier(rng, name, raw):
    """List expressions and layouts whose results are too large to build."""
    value = rng.choice(("[0]*100000*3000", "[1]*99999*99999", "([0]*1000+[1])*100000",
                        "+".join(["[0]*9"] * 20000), "(" * 3000 + "[1]" + ")" * 3000,
                        "[" + "1," * 50000 + "1]"))
    flag = "--moe-layer-freq"
    if rng.random() < 0.3:
        flag, value = "--pipeline-model-parallel-layout", rng.choice(
            ("t*9999|" * 500, "(tt|)*9999" * 200, "E" + "t*99999999"))
    text = f"--num-layers 2\n--num-experts 8\n{flag} {value}\n"
    return rng.choice(("args.txt", "train.args", name if name.endswith(".txt") else "a.txt")), \
        text.encode()


def long_run(rng, name, raw):
    """A run of one character (spaces, digits, newlines, quotes, brackets ...) in a real file."""
    char = rng.choice((b" ", b"\t", b"\n", b"1", b"9", b"-", b"=", b'"', b"'", b"[", b"{", b"#",
                       b"$", b"\\", b"a", b".", b"*", b"\r\n"))
    run = char * rng.choice((3000, 20000, 100000))
    i = rng.randrange(len(raw) + 1)
    if rng.random() < 0.3:  # as a value: `gpu_memory = "111...1"`, `--num-layers 999...9`
        match = _NUMBER.search(raw)
        if match:
            return name, raw[:match.start()] + run + raw[match.end():]
    return name, raw[:i] + run + raw[i:]


def many_flags(rng, name, raw):
    """Thousands of unknown (or repeated) flags in a launch script or an args file (issue 19:
    a did-you-mean each took 3.9 ms)."""
    count = rng.choice((1000, 5000, 30000))
    if rng.random() < 0.5:
        words = " ".join(f"--unknown-flag-{i} {i}" for i in range(count))
    else:
        words = " ".join(f"--num-layerz{i % 7} 1 --num-layers {i}" for i in range(count // 2))
    if rng.random() < 0.5:
        return "pretrain_flags.sh", f"torchrun pretrain_gpt.py {words}\n".encode()
    # an argument file is read as Megatron's when it has a Megatron flag (--num-layers)
    return "flags.txt", b"--num-layers 2\n" + words.replace(" --", "\n--").encode() + b"\n"


# Special files: run_one makes the path one of these instead of a regular file with the bytes.
SPECIAL_KINDS = ("fifo", "directory", "symlink-loop", "symlink-outside", "dev-zero", "broken-link")


def special_file(rng, name, raw):
    return f"{rng.choice(SPECIAL_KINDS)}:{os.path.basename(name)}", raw


MUTATORS: tuple = (truncate, flip_bytes, random_bytes, delete_lines, duplicate_lines,
                   duplicate_key, replace_number, replace_number, replace_number,
                   replace_all_numbers, wrong_type, wrong_type, deep_nesting, non_utf8, empty,
                   binary, splice, yaml_specials, shell_specials, doubling, huge_multiplier,
                   long_run, special_file, many_flags)


MAX_INPUT = 256 * 1024   # bytes of one mutated input


def mutate(rng: random.Random, name: str, raw: bytes, rounds: Optional[int] = None) -> tuple:
    """`rounds` mutators (1-3 when not given) applied in turn; the input is cut back to
    MAX_INPUT after each round, so that no round is handed more (a mutator may multiply its
    input: duplicate_lines on a one-line file)."""
    for _ in range(rounds if rounds is not None else rng.choice((1, 1, 1, 2, 3))):
        mutator: Callable = rng.choice(MUTATORS)
        kind, _, plain = name.rpartition(":")
        name, raw = mutator(rng, plain, raw)
        raw = raw[:MAX_INPUT]
        if kind and ":" not in name:
            name = f"{kind}:{name}"  # a special file stays special
    return name, raw


def _place(path: str, kind: str, raw: bytes) -> None:
    """Make `path` the special file `kind` (see SPECIAL_KINDS), or a regular file with raw."""
    if kind == "fifo" and hasattr(os, "mkfifo"):
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "symlink-loop":
        os.symlink(os.path.basename(path), path)
    elif kind == "symlink-outside":
        os.symlink(os.path.abspath(__file__), path)  # this file: outside the input's root
    elif kind == "dev-zero" and os.path.exists("/dev/zero"):
        os.symlink("/dev/zero", path)
    elif kind == "broken-link":
        os.symlink(path + ".missing", path)
    else:
        with open(path, "wb") as handle:
            handle.write(raw)


def _remove(path: str) -> None:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        else:
            os.remove(path)
    except OSError:
        pass


# Command-line extras: a model for files that have none, weird --set values.
MODELS = ("llama3-8b", "mixtral-8x7b", "seed-m3", "llama3-70b")
SET_KEYS = ("tp", "pp", "vpp", "dp", "cp", "ep", "etp", "zero", "micro_batch", "global_batch",
            "grad_accum", "seq_len", "world_size", "gpus_per_node", "recompute", "precision",
            "lora_rank", "model.hidden_size", "model.num_hidden_layers", "model.vocab_size",
            "model.num_attention_heads", "model.num_key_value_heads", "model.intermediate_size",
            "model.num_local_experts", "model.num_experts_per_tok", "model.total_params",
            "gpu_memory", "offload_optimizer", "fsdp", "dp_shard", "dp_replicate", "sp",
            "images_per_sample", "tokens_per_image", "recompute_every", "attention", "optimizer")
SET_VALUES = ("0", "-1", "1", "2", "3", "7", "1e308", "10" + "0" * 400, "nan", "inf", "-inf",
              "1.5", "abc", "", "[]", "{}", "true", "null", "auto", "2**70", "1e-300", "8")


# check's flags that change what it does with a file (--fix writes it through the safe writer;
# --diff prints a unified diff instead of the report)
CHECK_FLAGS = ("--fix", "--diff", "--require-estimate", "--statistics", "--skip-unknown")


def extra_args(rng: random.Random, name: str) -> list:
    args = []
    roll = rng.random()
    if roll < 0.35:
        args += ["--model", rng.choice(MODELS)]
    if rng.random() < 0.3:
        for _ in range(rng.randint(1, 3)):
            args += ["--set", f"{rng.choice(SET_KEYS)}={rng.choice(SET_VALUES)}"]
    return args


# ---------------------------------------------------------------------------------------------
# The oracle


class Timeout(BaseException):
    """Raised by the alarm. A BaseException, so that no `except Exception` in memlint (the
    adapters' and the CLI's catch-alls) can turn a slow input into an "internal error": the
    time limit is the harness's verdict, never the product's."""


def _alarm(_signum, _frame):
    raise Timeout()


# The time limit is CPU time (ITIMER_PROF), which other processes on a loaded machine do not
# consume: a verdict that holds under load (CI has 2 busy cores). A wall-clock alarm of
# HANG_FACTOR times the limit still catches an input that blocks without computing.
HANG_FACTOR = 20


def run_one(name: str, raw: bytes, args: list = (), fmt: str = "json", time_limit: float = 5.0,
            workdir: Optional[str] = None, command: str = "check") -> Optional[str]:
    """Lint one input in-process; the failure as one line, or None when the contract held."""
    own = workdir is None
    directory = tempfile.mkdtemp(prefix="memlint-fuzz-") if own else workdir
    try:
        if not os.path.isdir(os.path.join(directory, ".git")):
            os.makedirs(os.path.join(directory, ".git"), exist_ok=True)
        kind, _, plain = name.rpartition(":")
        path = os.path.join(directory, os.path.basename(plain) or "input")
        _remove(path)
        _place(path, kind, raw)
        cwd = os.getcwd()
        os.chdir(directory)   # its repository root: --fix writes only inside the root
        try:
            result = invoke([command, "--format", fmt, "--no-color", *args, path], time_limit)
        finally:
            os.chdir(cwd)
        if isinstance(result, str):
            return result
        code, out, err = result
        # a directory or a link to nothing is "missing file": exit 2 is the contract there
        usage = kind in ("directory", "symlink-loop", "broken-link")
        return check_result(code, out, err, "diff" if "--diff" in args else fmt, path, command,
                            usage)
    finally:
        if own:
            import shutil

            shutil.rmtree(directory, ignore_errors=True)
        else:
            _remove(path)


def invoke(argv: list, time_limit: float = 5.0):
    """(exit code, stdout, stderr) of `memlint ARGV` run in this process under the time limit,
    or the failure as one line (a timeout, an exception escaping main)."""
    from memlint import cli

    out, err = io.StringIO(), io.StringIO()
    use_alarm = hasattr(signal, "setitimer") and _main_thread()
    if use_alarm:
        previous = signal.signal(signal.SIGALRM, _alarm)
        previous_prof = signal.signal(signal.SIGPROF, _alarm)
        signal.setitimer(signal.ITIMER_PROF, time_limit)
        signal.setitimer(signal.ITIMER_REAL, time_limit * HANG_FACTOR)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = cli.main(argv)
    except Timeout:
        return f"timeout after {time_limit}s of CPU time"
    except KeyboardInterrupt:   # the run stopped (bench/fuzz.py: Ctrl-C, SIGTERM), not a failure
        raise
    except BaseException as exc:  # noqa: BLE001 - anything escaping main is the failure
        return f"escaped main: {type(exc).__name__}: {exc}"
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGALRM, previous)
            signal.signal(signal.SIGPROF, previous_prof)
    return code, out.getvalue(), err.getvalue()


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def broken(code, stdout: str, stderr: str, codes: tuple = (0, 1, 2)) -> Optional[str]:
    """The contract every command keeps: an exit code of `codes`, no traceback, no internal
    error."""
    if code not in codes:
        return f"exit code {code!r}"
    if "Traceback" in stdout or "Traceback" in stderr:
        return "traceback printed"
    if "internal error" in stderr:
        return "internal error: " + stderr.strip().splitlines()[-1][:300]
    return None


def check_result(code, stdout: str, stderr: str, fmt: str, path: str,
                 command: str = "check", usage: bool = False) -> Optional[str]:
    failure = broken(code, stdout, stderr)
    if failure is not None:
        return failure
    if code == 2:
        lines = [line for line in stderr.splitlines() if line.strip()]
        if not lines:
            return "exit 2 without a message"
        if command == "check" and not usage and not (
                os.path.basename(path) == "pyproject.toml"
                and lines[-1].startswith("memlint: error:")):
            return "exit 2 on a file check: " + lines[-1][:300]
        return None
    if fmt == "diff":   # --diff: a unified diff of the fixes on stdout, or nothing
        if stdout and not stdout.startswith("--- a/"):
            return f"--diff output is not a unified diff: {stdout[:120]!r}"
        return None
    if fmt != "json":
        return None
    try:
        report = json.loads(stdout)
    except ValueError as exc:
        return f"output is not JSON: {exc}"
    for d in report.get("diagnostics", ()):
        if d.get("code") == "ML009":
            return "ML009: " + d.get("message", "")[:300]
        if d.get("code") in ("ML001", "ML010") and not d.get("path"):
            return f"{d.get('code')} without a path: {d.get('message', '')[:200]}"
        if d.get("line") is not None and (not isinstance(d["line"], int) or d["line"] < 1):
            return f"bad line {d['line']!r}"
    for estimate in report.get("estimates", ()):
        for stage in estimate.get("stages", ()):
            if not isinstance(stage.get("total_bytes"), int) or stage["total_bytes"] < 0:
                return f"stage total {stage.get('total_bytes')!r}"
    return None


def reproducer(name: str, raw: bytes, args: list, directory: str) -> str:
    """Write a failing input to `directory`; returns its path."""
    os.makedirs(directory, exist_ok=True)
    import hashlib

    digest = hashlib.sha1(raw + repr(args).encode()).hexdigest()[:10]
    target = os.path.join(directory, f"{digest}-{os.path.basename(name)}")
    with open(target, "wb") as handle:
        handle.write(raw)
    with open(target + ".args", "w", encoding="utf-8") as handle:
        handle.write(json.dumps(args) + "\n")
    return target


if __name__ == "__main__":  # pragma: no cover - quick manual run: python mutate.py FILE [ARGS]
    with open(sys.argv[1], "rb") as f:
        print(run_one(os.path.basename(sys.argv[1]), f.read(), sys.argv[2:]) or "ok")
