"""The hardening reproducers of issues 19 and 30, each in its own process in an empty repository:
CPU time, peak RSS and exit code, and for issue 30 a check of what the output or the files hold.

    python bench/hardening.py [--only TEXT]

Targets: issue 19's cases under 1 s of CPU and 100 MB; issue 30's under 2 s and 1 GiB; every
case the exit code DESIGN.md gives (2 only where memlint cannot do its job, with a one-line
reason) and never "internal error". CPU time (user + system, from wait4) rather than wall time,
so that a loaded machine does not change the verdict; tests/fuzz/test_hardening.py (issue 19)
and tests/fuzz/test_hardening3.py (issue 30) pin the behaviour behind each number.

Issue 30, item by item (its "Found" list) -> the case names below (each begins with the item's
number; tests/fuzz/test_hardening3.py checks that this table and CASES_30 agree):

  item  what the issue found                          case
  1     log name's newline injects keys               1 file name injects keys
        a control character leaves it invalid         1 control characters in its name
        8 parallel runs lose [project]                1 8 parallel writers
        follows a symlinked pyproject.toml out        1 symlinked pyproject.toml
        writes one above the git root                 1 above the git root
        CRLF files come back LF                       1 CRLF pyproject.toml
        header inside a multi-line string             1 header in a multi-line string
        inline `assumptions = {...}`                  1 inline assumptions = {...}
        read-only target: internal error              1 read-only target
        a directory: internal error                   1 a directory as the target
        a missing folder: internal error              1 a missing folder
  2     compare log number `1.2.3`                    2 log number 1.2.3
        a 400-digit number                            2 log number of 400 digits
        a 5,000-digit rank                            2 log rank of 5,000 digits
        a 5,000-digit step                            2 log step of 5,000 digits
        `.`                                           2 log number '.'
        an unknown unit                               2 log unknown unit
        (all of them at once: exit 2, one line)       2 log with no readable line
  3     quadratic pattern, 144 KB line                3 torchtitan line of 144 KB
        quadratic pattern, 240 KB line                3 DeepSpeed line of 240 KB
        (the out-of-memory pattern, 240 KB)           3 out-of-memory line of 240 KB
  4     1M-rank log: a 3.9 MB error message           4 1M-rank log, world size 8
        1M ranks, matching world size: 7.17 GB        4 1M-rank log, its world size
  5     newline in a file name, text output           5 newline in a file name (text)
        newline in a file name, --format github       5 newline in a file name (github)
        compare prints ESC/BEL of the log's name      5 ESC and BEL in a log's name
  6     markdown passes <img>, <a>, @mentions         6 markdown: HTML and @mention
  7     pyproject.toml of 1.5 GB read uncapped        7 pyproject.toml of 1.5 GB
  8     check DIR, 1,000-deep tree: RecursionError    8 check a 1,000-deep tree
        100k non-config files: 13-15 s                8 check 100k non-config files
  9     deep config.json in the HF cache              9 deep config.json in the HF cache
        deep config.json fetched with --hub           9 deep config.json from --hub
  10    one Latin-1 byte in [tool.memlint]            10 Latin-1 byte in pyproject.toml
  11    launch line after ~64 KB of preamble          11 launch line after 64 KB
  12    DeepSpeed JSON, 120,000 unknown keys          12 DeepSpeed, 120,000 unknown keys
  13    plan --global-batch 2**50: 3.4 s              13 plan --global-batch 2**50
        plan --top 100000: 8.7 s                      13 plan --top 100000
        memlint.toml listing 20k files: 5.3 s         13 memlint.toml listing 20k files
        a 200 MB binary log: 3.2 s                    13 a 200 MB binary log
        a 4 MB TOML float: 480 MB                     13 a 4 MB TOML float

Exit 2 (memlint cannot do its job) and its one-line reason: a symlinked, read-only, directory or
missing target, or one above the git root (not written); a log with no readable memory line, a
binary log, ranks the run does not have; a pyproject.toml over the size cap or not UTF-8 (the
configuration cannot be read); a --hub config nested deeper than the JSON limit.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
MEMLINT = [sys.executable, "-m", "memlint"]
BIG = "1" * 5000
ARGS = ("--hidden-size 1024 --num-attention-heads 8 --seq-length 1024 "
        "--max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 8 "
        "--vocab-size 32000")
ISSUE_19 = (1.0, 100 * 2**20)
ISSUE_30 = (2.0, 2**30)

CASES = [
    ("1 doubled variable", {"pretrain_chain.sh": "V0=ab\n" + "".join(
        f"V{i}=$V{i - 1}$V{i - 1}\n" for i in range(1, 40))
        + "torchrun pretrain_gpt.py --num-layers 2 --tokenizer-model $V39\n"},
     ["check", "pretrain_chain.sh"], (0, 1)),
    ("1 doubled array", {"pretrain_arr.sh": "A=(x)\n" + 'A=("${A[@]}" "${A[@]}")\n' * 40
                         + "torchrun pretrain_gpt.py ${A[@]} --num-layers 2\n"},
     ["check", "pretrain_arr.sh"], (0, 1)),
    ("2 list expression *3000", {"args.txt": "--num-layers 2\n--num-experts 8\n"
                                             "--moe-layer-freq [0]*100000*3000\n"},
     ["check", "args.txt"], (0, 1)),
    ("2 list expression + x20000", {"args.txt": "--num-layers 2\n--num-experts 8\n"
                                                "--moe-layer-freq " + "+".join(["[0]*9"] * 20000)
                                                + "\n"}, ["check", "args.txt"], (0, 1)),
    ("3 30,000 unknown flags", {"train.sh": "torchrun pretrain_gpt.py --num-layers 2 " + " ".join(
        f"--unknown-flag-{i} 1" for i in range(30000)) + "\n"}, ["check", "train.sh"], (0, 1)),
    ("3 args file, 30,000 unknown flags", {"args.txt": "--num-layers 2\n" + "".join(
        f"--unknown-flag-{i} {i}\n" for i in range(30000))}, ["check", "args.txt"], (0, 1)),
    ("4 TOML line of 3,000 spaces", {"job.toml": "[job]\n" + " " * 3000 + "\n"},
     ["check", "job.toml"], (0, 1)),
    ("4 20,000-digit gpu_memory", {"memlint.toml": 'model = "llama3-8b"\ngpu_memory = "'
                                                  + "1" * 20000 + '"\n'},
     ["check", "memlint.toml"], (1,)),
    ("5 DeepSpeed 5,000-digit int", {"ds_config.json": '{"train_batch_size": %s}' % BIG},
     ["check", "ds_config.json"], (1,)),
    ("5 accelerate 5,000-digit int", {"acc.yaml": "distributed_type: MULTI_GPU\nnum_processes: "
                                                  + BIG + "\n"}, ["check", "acc.yaml"], (1,)),
    ("5 torchtitan 5,000-digit int", {"job.toml": "[parallelism]\ntensor_parallel_degree = "
                                                  + BIG + "\n"}, ["check", "job.toml"], (1,)),
    ("5 HF config 5,000-digit int", {"config.json": '{"model_type": "llama", "hidden_size": %s}'
                                                    % BIG}, ["check", "config.json"], (1,)),
    ("5 #SBATCH 5,000-digit int", {"train.sh": f"#SBATCH --nodes={BIG}\nsrun python "
                                               "pretrain_gpt.py --num-layers 2\n"},
     ["check", "train.sh"], (0, 1)),
    ("5 estimate --model 5,000-digit", {"config.json": '{"model_type": "llama", '
                                                       '"hidden_size": %s}' % BIG},
     ["estimate", "--model", "config.json"], (1,)),
    ("6 pyproject files /etc", {"pyproject.toml": '[tool.memlint]\nfiles = ["/etc/host*"]\n'},
     ["check"], (2,)),
    ("6 pyproject runs /etc", {"pyproject.toml": '[tool.memlint]\n[[tool.memlint.runs]]\n'
                                                 'files = ["/etc/hostname"]\n'}, ["check"], (2,)),
    ("6 symlink out of the root", {"@ds_config.json": "/etc/hostname"},
     ["check", "ds_config.json"], (0,)),
    ("7 FIFO (check)", {"|ds_config.json": ""}, ["check", "ds_config.json"], (1,)),
    ("7 FIFO (plan)", {"|ds_config.json": ""}, ["plan", "--model", "llama3-8b", "--gpus", "8",
                                               "ds_config.json"], (2,)),
    ("8 control characters (junit)", {"train.sh": "torchrun pretrain_gpt.py --num-layers 2 "
                                                  "--bad\x1b[31mflag 1\n"},
     ["check", "--format", "junit", "train.sh"], (0, 1)),
    ("9 --num-layers $1", {"train.sh": "torchrun --nproc_per_node 8 pretrain_gpt.py "
                                       f"--num-layers $1 {ARGS}\n"}, ["check", "train.sh"], (0,)),
    ("9 $(( 8 * 4 ))", {"train.sh": "NUM_LAYERS=$(( 8 * 4 ))\ntorchrun --nproc_per_node 8 "
                                    f"pretrain_gpt.py --num-layers $NUM_LAYERS {ARGS}\n"},
     ["check", "train.sh"], (0, 1)),
    ("10 4 MB JSON, 1.9M-item array", {"ds_config.json": '{"train_batch_size": 8, "x": ['
                                                         + ",".join(["1"] * 1900000) + "]}"},
     ["check", "ds_config.json"], (0,)),
    ("10 estimate 10,000 layers, pp 10,000", {}, ["estimate", "--model", "llama3-8b", "--set",
                                                   "model.num_hidden_layers=10000", "--set",
                                                   "pp=10000", "--set", "world_size=10000"],
     (2,)),  # deeper than memory/model.py MAX_STAGES: no estimate, so `estimate` did not its job
    ("10 estimate 10,240 layers, pp 512", {}, ["estimate", "--model", "llama3-8b", "--set",
                                               "model.num_hidden_layers=10240", "--set",
                                               "pp=512", "--set", "world_size=512"], (0, 1)),
    ("10 plan global batch 2**50", {}, ["plan", "--model", "llama3-8b", "--gpus", "8", "--set",
                                        "global_batch=1125899906842624"], (0,)),
    ("11 plan 720,720 GPUs (says why)", {}, ["plan", "--model", "llama3-8b", "--gpus", "720720",
                                             "--set", "global_batch=1024"], (1,)),
    ("11 plan 1,009 GPUs (prime)", {}, ["plan", "--model", "llama3-8b", "--gpus", "1009",
                                        "--set", "global_batch=1024"], (1,)),
    ("11 empty ds_config.json", {"ds_config.json": ""}, ["check", "ds_config.json"], (1,)),
    ("11 world_size 2**53 + 1", {}, ["estimate", "--model", "llama3-8b", "--set",
                                     "world_size=9007199254740993"], (1, 2)),
    ("11 UTF-16", {"ds_config.json": '{"train_batch_size": 8}'.encode("utf-16")},
     ["check", "ds_config.json"], (1,)),
    ("11 SARIF on a usage error", {}, ["check", "--format", "sarif", "--bogus"], (2,)),
]



# ---------------------------------------------------------------------------------------------
# Issue 30: the new surfaces (compare logs, --write-assumptions, walking, output)

LOG = os.path.join(ROOT, "fixtures", "logs", "megatron-gpt2-v100.log")
GPT2 = os.path.join(ROOT, "fixtures", "hf", "gpt2.json")
PYPROJECT = '[project]\nname = "demo"\n\n[tool.memlint]\nfail-on = "error"\n'
GOOD = ("[Rank 0] (after 10 iterations) memory (MB) | allocated: 10250.5 | max allocated: 12606.0 "
        "| reserved: 17482.0 | max reserved: 17482.0\n")
COMPARE = ["compare", "train.log", "--model", GPT2]
WRITE = COMPARE + ["--write-assumptions"]
CONTROLS = "c\x1b[31m\x07\x7f\x01.log"
HOSTILE = "a\nFORGED::error file=x.py,line=1::forged\x1b[31m\x07<img src=x>@someone.json"
DS = '{"train_batch_size": 8, "zero_optimization": {"stage": 7}}'


def _log_file(work):
    shutil.copy(LOG, os.path.join(work, "train.log"))


def _toml(work, name="pyproject.toml"):
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib
    with open(os.path.join(work, name), "rb") as handle:
        return tomllib.load(handle)


def _intact(work, out, err):
    doc = _toml(work)
    if doc.get("project") != {"name": "demo"}:
        return "[project] lost"
    if set(doc["tool"]["memlint"]) != {"fail-on", "assumptions"}:
        return f"[tool.memlint] holds {sorted(doc['tool']['memlint'])}"
    return None


def _unchanged(name, text):
    def check(work, out, err):
        with open(os.path.join(work, name), encoding="utf-8", newline="") as handle:
            return None if handle.read() == text else f"{name} changed"
    return check


def _one_line(reason):
    """One `memlint:` line that gives the reason (warnings may stand beside it: compare
    --write-assumptions warns when the measured states differ from the estimate)."""
    def check(work, out, err):
        lines = [line for line in err.splitlines() if line.startswith("memlint:")
                 and not line.startswith("memlint: warning:")]
        if len(lines) != 1 or reason not in lines[0]:
            return f"stderr: {err[-200:]!r}"
        return None
    return check


def _both(*checks):
    def check(work, out, err):
        return next((r for r in (c(work, out, err) for c in checks) if r), None)
    return check


def _crlf(work, out, err):
    with open(os.path.join(work, "pyproject.toml"), "rb") as handle:
        raw = handle.read()
    return None if raw.count(b"\n") == raw.count(b"\r\n") else "CRLF became LF"


def _no_forged(work, out, err):
    for text in (out, err):
        if re.search("[\x00-\x08\x0b-\x1f\x7f]", text):
            return "a raw control character in the output"
        if any(line.startswith("FORGED") for line in text.splitlines()):
            return "a forged line"
    return None


def _github_lines(work, out, err):
    bad = [line for line in out.splitlines()
           if not re.match(r"::(error|warning|notice) [^\n]*title=[^:\n]*::", line)]
    return f"not memlint's: {bad[0][:80]!r}" if bad else _no_forged(work, out, err)


def _markdown(work, out, err):
    text = re.sub(r"(`+)[^`]*?\1", "", out)
    found = [n for n in ("<img", "<a ", "</a>", "@someone") if n in text]
    return f"passes {found}" if found else None


def _small(limit):
    def check(work, out, err):
        size = len(out) + len(err)
        return None if size <= limit else f"{size:,} bytes of output"
    return check


def _many_ranks(work):
    with open(os.path.join(work, "train.log"), "w") as handle:
        for rank in range(1_000_000):
            handle.write(f"[Rank {rank}] (after 10 iterations) memory (MB) | allocated: 24761.0 | "
                         "max allocated: 65203.9 | reserved: 64438.0 | max reserved: 74306.0\n")


def _deep_tree(work):
    folder = work
    for _ in range(1000):
        folder = os.path.join(folder, "d")
        os.mkdir(folder)
    with open(os.path.join(folder, "ds_config.json"), "w") as handle:
        handle.write(DS)


def _many_files(work):
    os.mkdir(os.path.join(work, "data"))
    for i in range(100_000):
        with open(os.path.join(work, "data", f"f{i}.txt"), "w") as handle:
            handle.write("hello world\n")


def _hf_cache(work):
    snapshot = os.path.join(work, "hf", "models--org--deep", "snapshots", "abc")
    os.makedirs(snapshot)
    os.makedirs(os.path.join(work, "hf", "models--org--deep", "refs"))
    with open(os.path.join(work, "hf", "models--org--deep", "refs", "main"), "w") as handle:
        handle.write("abc")
    with open(os.path.join(snapshot, "config.json"), "w") as handle:
        handle.write('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")


def _sparse_pyproject(work):
    with open(os.path.join(work, "pyproject.toml"), "wb") as handle:
        handle.write(b"[tool.memlint]\n")
        handle.truncate(1_500_000_000)   # 1.5 GB, sparse: no disk used


def _twenty_thousand(work):
    os.mkdir(os.path.join(work, "d"))
    for i in range(20_000):
        with open(os.path.join(work, "d", f"f{i}.json"), "w") as handle:
            handle.write('{"train_batch_size": 8}')
    with open(os.path.join(work, "memlint.toml"), "w") as handle:
        handle.write('model = "llama3-8b"\nfiles = [' + ",".join(f'"d/f{i}.json"'
                                                        for i in range(20_000)) + "]\n")


def _binary_log(work):
    chunk = bytes(range(256)) * 4096
    with open(os.path.join(work, "train.log"), "wb") as handle:
        for _ in range(200):
            handle.write(chunk)   # 200 MiB


def _above_the_git_root(work):
    os.makedirs(os.path.join(work, "repo", ".git"))
    _log_file(os.path.join(work, "repo"))


def _read_only(work):
    os.chmod(os.path.join(work, "pyproject.toml"), 0o444)


def _symlink_out(work):
    outside = tempfile.mkdtemp(prefix="memlint-h30-outside-")
    with open(os.path.join(outside, "pyproject.toml"), "w") as handle:
        handle.write(PYPROJECT)
    os.symlink(os.path.join(outside, "pyproject.toml"), os.path.join(work, "pyproject.toml"))


def _line(text, width):
    return text * (width // len(text))


INLINE = ('[tool.memlint]\nassumptions = { "runtime.allocator_fraction" = 0.5 }\n'
          'fail-on = "error"\n[project]\nname = "demo"\n')
MULTILINE = ('[project]\nname = "demo"\ndescription = """\n[tool.memlint.assumptions]\n"""\n\n'
             '[tool.memlint]\nfail-on = "error"\n')
PREAMBLE = "".join(f"# line {i} of a long preamble, padding padding padding\n"
                   for i in range(1500))
UNKNOWN = "{" + ", ".join(f'"unknown_key_{i}": {i}' for i in range(120_000)) + "}"

# (name, files, argv, exit codes, setup, check, env): files as in issue 19's cases
CASES_30 = [
    ("1 file name injects keys", {"pyproject.toml": PYPROJECT},
     ["compare", "a\nallow-outside-root = true\n.log", "--model", GPT2, "--write-assumptions"],
     (0,), lambda w: shutil.copy(LOG, os.path.join(w, "a\nallow-outside-root = true\n.log")),
     _intact, None),
    ("1 control characters in its name", {"pyproject.toml": PYPROJECT},
     ["compare", CONTROLS, "--model", GPT2, "--write-assumptions"], (0,),
     lambda w: shutil.copy(LOG, os.path.join(w, CONTROLS)), _intact, None),
    ("1 8 parallel writers", {"pyproject.toml": PYPROJECT}, WRITE, (0,), _log_file, _intact,
     "parallel"),
    ("1 symlinked pyproject.toml", {}, WRITE, (2,), lambda w: (_log_file(w), _symlink_out(w)),
     _one_line("symbolic link"), None),
    ("1 above the git root", {"pyproject.toml": PYPROJECT}, WRITE, (2,), _above_the_git_root,
     _both(_one_line("outside the repository root"), _unchanged("pyproject.toml", PYPROJECT)),
     "repo"),
    ("1 CRLF pyproject.toml", {"pyproject.toml": PYPROJECT.replace("\n", "\r\n").encode()},
     WRITE, (0,), _log_file, _both(_intact, _crlf), None),
    ("1 header in a multi-line string", {"pyproject.toml": MULTILINE}, WRITE, (0,), _log_file,
     lambda w, o, e: None if _toml(w)["project"]["description"].startswith("[tool")
     and "assumptions" in _toml(w)["tool"]["memlint"] else "keys misplaced", None),
    ("1 inline assumptions = {...}", {"pyproject.toml": INLINE}, WRITE, (0,), _log_file,
     lambda w, o, e: None if _toml(w)["tool"]["memlint"]["assumptions"][
         "runtime.allocator_fraction"] != 0.5 and _toml(w)["project"] == {"name": "demo"}
     else "inline table not updated", None),
    ("1 read-only target", {"pyproject.toml": PYPROJECT}, WRITE, (2,),
     lambda w: (_log_file(w), _read_only(w)), _one_line("read-only"), None),
    ("1 a directory as the target", {}, WRITE + ["conf"], (2,),
     lambda w: (_log_file(w), os.mkdir(os.path.join(w, "conf"))), _one_line("is a directory"),
     None),
    ("1 a missing folder", {}, WRITE + ["no/such/pyproject.toml"], (2,), _log_file,
     _one_line("does not exist"), None),
    ("2 log number 1.2.3", {"train.log": GOOD + "[Rank 0] (after 20 iterations) memory (MB) | "
                                            "allocated: 1.2.3 | max allocated: 5\n"},
     COMPARE, (0,), None, None, None),
    ("2 log number of 400 digits", {"train.log": GOOD.replace("12606.0", "1" * 400) + GOOD},
     COMPARE, (0,), None, None, None),
    ("2 log rank of 5,000 digits", {"train.log": GOOD + GOOD.replace("Rank 0", "Rank " + BIG)},
     COMPARE, (0,), None, None, None),
    ("2 log step of 5,000 digits", {"train.log": GOOD + GOOD.replace("after 10", "after " + BIG)},
     COMPARE, (0,), None, None, None),
    ("2 log number '.'", {"train.log": GOOD + GOOD.replace("17482.0", ".")}, COMPARE, (0,), None,
     None, None),
    ("2 log unknown unit", {"train.log": GOOD + "CUDA out of memory. (GPU 0; 31.74 XB total "
                                              "capacity; 1 GiB already allocated; 1 GiB free; "
                                              "2 GiB reserved in total)\n"},
     COMPARE, (0,), None, None, None),
    ("2 log with no readable line", {"train.log": GOOD.replace("10250.5", "1.2.3")
                                     .replace("12606.0", ".").replace("17482.0", "..")},
     COMPARE, (2,), None, _one_line("none readable"), None),
    ("3 torchtitan line of 144 KB", {"train.log": GOOD + _line("step: 1 ", 144_000)
                                     + "memory: 1 GiB\n"}, COMPARE, (0,), None, None, None),
    ("3 DeepSpeed line of 240 KB", {"train.log": GOOD + "see_memory_usage] a" + " " * 240_000
                                    + "b\n"}, COMPARE, (0,), None, None, None),
    ("3 out-of-memory line of 240 KB", {"train.log": GOOD + "out of memory (GPU 0; "
                                        + "1" * 240_000 + "\n"}, COMPARE, (0,), None, None, None),
    ("4 1M-rank log, world size 8", {}, COMPARE + ["--world-size", "8"], (2,), _many_ranks,
     _both(_one_line("do not exist in the run"), _small(2000)), None),
    ("4 1M-rank log, its world size", {}, COMPARE + ["--world-size", "1000000", "--set",
                                                     "pp=4"], (0,), _many_ranks,
     _small(64 * 1024), None),
    ("5 newline in a file name (text)", {HOSTILE: DS}, ["check", HOSTILE], (1,), None,
     _no_forged, None),
    ("5 newline in a file name (github)", {HOSTILE: DS}, ["check", "--format", "github", "."],
     (1,), None, _github_lines, None),
    ("5 ESC and BEL in a log's name", {}, ["compare", "t\x1b[2J\x07.log", "--model", GPT2],
     (0,), lambda w: shutil.copy(LOG, os.path.join(w, "t\x1b[2J\x07.log")), _no_forged, None),
    ("6 markdown: HTML and @mention", {HOSTILE: DS, "b.json": '{"train_batch_size": 8, '
                                                            '"<img src=x>": 1, "@someone": 2, '
                                                            '"<a href=x>y</a>": 3}'},
     ["check", "--format", "markdown", "."], (1,), None, _markdown, None),
    ("7 pyproject.toml of 1.5 GB", {"ds_config.json": DS}, ["check", "ds_config.json"], (2,),
     _sparse_pyproject, _one_line("over the"), None),
    ("8 check a 1,000-deep tree", {}, ["check", "."], (1,), _deep_tree, None, None),
    ("8 check 100k non-config files", {}, ["check", "."], (0,), _many_files, None, None),
    ("9 deep config.json in the HF cache", {"memlint.toml": 'model = "org/deep"\n'},
     ["check", "memlint.toml"], (0,), _hf_cache, None, "hf-cache"),
    ("9 deep config.json from --hub", {}, ["estimate", "--model", "org/deep", "--hub"], (2,),
     None, _one_line("nested deeper"), "hub"),
    ("10 Latin-1 byte in pyproject.toml", {"pyproject.toml": b"[tool.memlint]\n# caf\xe9\n",
                                           "ds_config.json": DS},
     ["check", "ds_config.json"], (2,), None, _one_line("not valid UTF-8"), None),
    ("11 launch line after 64 KB", {"train.sh": PREAMBLE + "torchrun pretrain_gpt.py "
                                    "--num-layers 2 " + ARGS.replace("heads 8", "heads 7")
                                    + "\n"}, ["check", "train.sh"], (1,), None, None, None),
    ("12 DeepSpeed, 120,000 unknown keys", {"ds_config.json": UNKNOWN},
     ["check", "ds_config.json"], (0,), None, _small(64 * 1024), None),
    ("13 plan --global-batch 2**50", {}, ["plan", "--model", "llama3-70b", "--gpus", "4096",
                                          "--global-batch", str(2**50)], (0, 1), None, None, None),
    ("13 plan --top 100000", {}, ["plan", "--model", "llama3-70b", "--gpus", "4096", "--top",
                                  "100000"], (0,), None, None, None),
    ("13 memlint.toml listing 20k files", {"ds_config.json": '{"train_batch_size": 8}'},
     ["check", "ds_config.json"], (0,), _twenty_thousand, None, None),
    ("13 a 200 MB binary log", {}, COMPARE, (2,), _binary_log, _one_line("no memory lines"),
     None),
    ("13 a 4 MB TOML float", {"job.toml": "[job]\ndump_folder = 'x'\n[model]\nname = "
                                          "'llama3'\n[training]\nlr = 1." + "1" * 4_000_000
                              + "\n"}, ["check", "job.toml"], (0,), None, None, None),
]


def _write_files(work: str, files: dict) -> None:
    for name, content in files.items():
        if name.startswith("@"):
            os.symlink(content, os.path.join(work, name[1:]))
        elif name.startswith("|"):
            os.mkfifo(os.path.join(work, name[1:]))
        else:
            mode = "wb" if isinstance(content, bytes) else "w"
            with open(os.path.join(work, name), mode) as handle:
                handle.write(content)


def _environment(work: str, mode) -> dict:
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=ROOT,
               HF_HUB_CACHE=os.path.join(work, "hf") if mode == "hf-cache"
               else os.path.join(work, "empty-hf-cache"))
    env.pop("MEMLINT_HUB", None)
    # bytecode cached, as an installed package has it (pip compiles .pyc at install time):
    # with PYTHONDONTWRITEBYTECODE every run would compile memlint from source (~0.5 s)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _spawn(argv: list, cwd: str, env: dict, work: str, index: int = 0):
    out = open(os.path.join(work, f".out{index}"), "wb")
    err = open(os.path.join(work, f".err{index}"), "wb")
    with out, err:
        return subprocess.Popen(MEMLINT + argv, cwd=cwd, env=env, stdout=out, stderr=err)


def _wait(child) -> tuple:
    _, status, usage = os.wait4(child.pid, 0)
    return (usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024,
            os.waitstatus_to_exitcode(status))


def _output(work: str, index: int = 0) -> tuple:
    texts = []
    for stream in ("out", "err"):
        with open(os.path.join(work, f".{stream}{index}"), "rb") as handle:
            texts.append(handle.read(2**20).decode("utf-8", "replace"))
        os.remove(os.path.join(work, f".{stream}{index}"))
    return tuple(texts)


def _remove_tree(path: str) -> None:
    # `rm -rf`: shutil.rmtree recurses per level, and one case is 1,000 folders deep
    subprocess.run(["rm", "-rf", path], check=False)


def run(files: dict, argv: list, setup=None, check=None, mode=None) -> tuple:
    """(CPU seconds, peak RSS bytes, exit code, failed check or None) of one case."""
    work = tempfile.mkdtemp(prefix="memlint-hardening-")
    hub = None
    try:
        os.mkdir(os.path.join(work, ".git"))
        _write_files(work, files)
        if setup is not None:
            setup(work)
        env = _environment(work, mode)
        cwd = os.path.join(work, "repo") if mode == "repo" else work
        if mode == "hub":
            hub = _deep_hub()
            env["HF_ENDPOINT"] = hub.url
        if mode == "parallel":
            children = [_spawn(argv, cwd, env, work, i) for i in range(8)]
            results = [_wait(child) for child in children]
            cpu, rss = max(r[0] for r in results), max(r[1] for r in results)
            codes = {r[2] for r in results}
            code = codes.pop() if len(codes) == 1 else -1
            outputs = [_output(work, i) for i in range(8)]
            out, err = outputs[0]
        else:
            cpu, rss, code = _wait(_spawn(argv, cwd, env, work))
            out, err = _output(work)
        failed = check(work, out, err) if check is not None else None
        if failed is None and "internal error" in err:
            failed = "internal error"
        return cpu, rss, code, failed
    finally:
        if hub is not None:
            hub.__exit__(None, None, None)
        _remove_tree(work)


def _deep_hub():
    """tests/catalog/fake_hub.py serving org/deep's config.json nested 100,000 deep."""
    from catalog.fake_hub import FakeHub

    hub = FakeHub({"org/deep": {}})
    hub.repos["org/deep"] = b'{"model_type": "llama", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    return hub.__enter__()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the cases whose name holds this text")
    args = parser.parse_args(argv)
    base_cpu, base_rss, _, _ = run({}, ["--version"])
    print(f"start-up (memlint --version): {base_cpu:.2f}s CPU, {base_rss / 2**20:.0f} MiB")
    cases = [(n, f, a, c, None, None, None, ISSUE_19) for n, f, a, c in CASES]
    cases += [(*case, ISSUE_30) for case in CASES_30]
    bad = ran = 0
    current = None
    for name, files, argv_, codes, setup, check, mode, (cpu_limit, rss_limit) in cases:
        if args.only not in name:
            continue
        issue = "19" if (cpu_limit, rss_limit) == ISSUE_19 else "30"
        if issue != current:
            current = issue
            print(f"\nissue {issue} (limits {cpu_limit:.0f} s CPU, "
                  f"{rss_limit / 2**20:,.0f} MiB; * = the output or files checked)")
        cpu, rss, code, failed = run(files, argv_, setup, check, mode)
        ok = cpu <= cpu_limit and rss <= rss_limit and code in codes and failed is None
        bad += not ok
        ran += 1
        mark = "*" if check is not None else " "
        print(f"{'ok  ' if ok else 'FAIL'} {name:36s} {cpu:5.2f}s CPU {rss / 2**20:7.1f} MiB "
              f"exit {code} (expected {'/'.join(map(str, codes))}){mark}"
              + (f"  {failed}" if failed else ""))
    print(f"\n{ran - bad} of {ran} within their CPU and memory limits, with the expected exit "
          "code and output")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
