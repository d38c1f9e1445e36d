"""memlint's speed in CPU time, as a hook and CI pay it (issue 29), in one run:

1. Start-up: `memlint check FILE` on one real file of each format memlint reads, and
   `memlint --version`, each paired with a bare `python -c pass` run just before it. The pairs
   are interleaved (every round runs every case, in a rotated order) so that each ratio compares
   two processes that saw the same machine. Time is the child's CPU time (user + system from
   wait4), not wall time: on a loaded machine a short process mostly waits, and waiting would
   shrink the ratio. The ratio of a case is the median of its per-pair ratios.
2. Throughput: `memlint check fixtures` (the repository's whole corpus, one process, start-up
   included), files per CPU second.
3. plan: `memlint plan` (the whole command, start-up included) for Llama-3.1-405B and a
   1T-parameter DeepSeek-V3-shaped MoE with 384 experts on 16,384 GPUs, Mixtral 8x7B on 1,024.

Every child runs pinned to one core, in a throw-away virtual environment whose path holds this
checkout and the current environment's site-packages, started through the console script pip
writes (CONSOLE_SCRIPT): as an installed `memlint` starts, without the import hook that an
editable install adds to every interpreter (it imports pathlib and re in the bare interpreter
too, which would flatter the ratio). The bare interpreter is the same environment's.

    python bench/speed.py [--pairs 15] [--only NAME] [--out bench/results/speed.json]

Prints a table (measure, goal, verdict) and writes the numbers as JSON (--out) for CI to keep.
Exit 0 whatever the verdicts: a benchmark reports, CI decides.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import site
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = "fixtures"
DEFAULT_OUT = os.path.join(HERE, "results", "speed.json")

# One real file per format (their sources: the SOURCES.md of each fixture folder), checked alone
# in a repository of its own under the name it has in its project: (name, [(fixture, name in
# the repository), ...], the file checked). A case whose fixture this checkout lacks is skipped.
# Goal: <= 3x the bare start.
FILES = [
    ("DeepSpeed JSON", [("adapters/deepspeed/good/Megatron-DeepSpeed__tests-ds_config_bf16.json",
                         "ds_config.json")], "ds_config.json"),
    ("torchtitan TOML", [("adapters/torchtitan/good/llama3_70b.toml", "llama3_70b.toml")],
     "llama3_70b.toml"),
    ("torchtitan config_registry.py", [("adapters/torchtitan/good/llama3/config_registry.py",
                                        "config_registry.py")], "config_registry.py"),
    ("Megatron launch script", [("adapters/megatron/good/llama3_8b.sh", "train_llama3_8b.sh")],
     "train_llama3_8b.sh"),
    ("Megatron argument file", [("shared-real/megatron-args/llama3_8b_h100_fp8.txt",
                                 "llama3_8b_h100_fp8.txt")], "llama3_8b_h100_fp8.txt"),
    ("Megatron YAML", [("megatron-ci/gpt3_mcore_tp1_pp2.yaml", "model_config.yaml")],
     "model_config.yaml"),
    ("axolotl YAML", [("real-world/axolotl-ai-cloud__axolotl/examples/llama-3/lora-8b.yml",
                       "lora-8b.yml")], "lora-8b.yml"),
    ("accelerate YAML", [("adapters/accelerate/good/fsdp1.yaml", "fsdp1.yaml")], "fsdp1.yaml"),
    ("gpt-neox YAML", [("real-world/EleutherAI__gpt-neox/configs/125M.yml", "125M.yml")],
     "125M.yml"),
    ("LLaMA-Factory YAML",
     [("real-world/hiyouga__LLaMA-Factory/examples/train_lora/llama3_lora_sft.yaml",
       "llama3_lora_sft.yaml")], "llama3_lora_sft.yaml"),
    ("HF Trainer / TRL recipe",
     [("real-world/huggingface__alignment-handbook/recipes/smollm2/sft/config.yaml",
       "config.yaml")], "config.yaml"),
    ("HF config.json", [("hf/Meta-Llama-3.1-8B.json", "config.json")], "config.json"),
    ("memlint.toml (estimate)", [("examples/llama3-8b-h100.memlint.toml",
                                  "examples/llama3-8b-h100.memlint.toml"),
                                 ("hf/Meta-Llama-3.1-8B.json", "hf/Meta-Llama-3.1-8B.json")],
     "examples/llama3-8b-h100.memlint.toml"),
]
FILE_GOAL = 3.0
VERSION_GOAL = 1.5
FILES_PER_S_GOAL = 1000.0

PLANS = [
    ("plan Llama-3.1-405B on 16,384 GPUs",
     ["--model", "llama3.1-405b", "--gpus", "16384", "--gpu", "H100", "--seq-len", "8192",
      "--global-batch", "2048"], 0.5),
    # DeepSeek-V3's architecture with 384 routed experts (Kimi K2's count): 1.04T parameters
    ("plan 1T MoE (DeepSeek-V3 shape, 384 experts) on 16,384 GPUs",
     ["--model", "deepseek-ai/DeepSeek-V3", "--set", "model.n_routed_experts=384", "--gpus",
      "16384", "--gpu", "H100", "--seq-len", "4096", "--global-batch", "16384"], 1.0),
    ("plan Mixtral 8x7B on 1,024 GPUs",
     ["--model", "mixtral-8x7b", "--gpus", "1024", "--gpu", "H100", "--seq-len", "4096",
      "--global-batch", "1024"], 1.0),
]


# ---------------------------------------------------------------------------------------------
# The environment the children run in

#: The `memlint` console script as pip 26 writes it (pip/_internal/operations/install/wheel.py,
#: PipScriptMaker: "doesn't import `re` module, allowing scripts to load faster"; uv's does not
#: either). Older pips wrote distlib's template, whose `import re` alone costs about half a bare
#: interpreter start.
CONSOLE_SCRIPT = """import sys
from memlint.cli import main
if __name__ == '__main__':
    sys.argv[0] = sys.argv[0].removesuffix('.exe')
    sys.exit(main())
"""


def site_dirs() -> list:
    """The current environment's site-packages (where yaml, rich, jsonschema are installed)."""
    dirs = [d for d in site.getsitepackages() if os.path.isdir(d)]
    return dirs + ([site.getusersitepackages()] if site.ENABLE_USER_SITE
                   and os.path.isdir(site.getusersitepackages()) else [])


def make_env(work: str) -> tuple:
    """(python, memlint command) of a throw-away venv that sees this checkout and the current
    site-packages as plain path entries (no .pth hooks run), or the current ones if no venv can
    be made."""
    venv = os.path.join(work, "venv")
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True,
                       capture_output=True, timeout=120)
    except (subprocess.SubprocessError, OSError):
        return sys.executable, [sys.executable, "-m", "memlint"], "current interpreter"
    python = os.path.join(venv, "bin", "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True,
                             check=True).stdout.strip()
    with open(os.path.join(purelib, "memlint_bench.pth"), "w") as handle:
        handle.write("\n".join([ROOT, *site_dirs()]) + "\n")
    script = os.path.join(venv, "bin", "memlint")
    with open(script, "w") as handle:   # the console script pip writes (PipScriptMaker)
        handle.write(f"#!{python}\n{CONSOLE_SCRIPT}")
    os.chmod(script, 0o755)
    return python, [python, script], "throw-away venv"


def child_env(work: str) -> dict:
    """Bytecode may be cached (an installed package has it); colour off; an empty Hugging Face
    cache, so that a Hub id resolves from memlint's catalog whatever this machine holds."""
    env = dict(os.environ, NO_COLOR="1", HF_HOME=os.path.join(work, "hf-home"),
               HF_HUB_OFFLINE="1")
    for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "HF_HUB_CACHE", "MEMLINT_HUB",
                 "COLUMNS"):
        env.pop(name, None)
    return env


CORE = max(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def _pin() -> None:
    if CORE is not None:
        os.sched_setaffinity(0, {CORE})


def run_child(argv: list, cwd: str, env: dict) -> dict:
    """One child: its CPU seconds (user + system, wait4), wall seconds, peak RSS, exit code."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, preexec_fn=_pin)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    return {"cpu": usage.ru_utime + usage.ru_stime, "wall": wall,
            "rss": usage.ru_maxrss * 1024, "code": child.returncode}


# ---------------------------------------------------------------------------------------------
# Measures


def start_up_cases(memlint: list, work: str) -> list:
    """(name, argv, cwd, goal) of each one-file check, each file in a repository of its own."""
    cases = [("memlint --version", memlint + ["--version"], work, VERSION_GOAL)]
    for index, (name, copies, checked) in enumerate(FILES):
        if not all(os.path.isfile(os.path.join(ROOT, CORPUS, f)) for f, _ in copies):
            print(f"skipped check {name}: {CORPUS}/{copies[0][0]} is not in this checkout")
            continue
        repo = os.path.join(work, f"repo{index:02d}")
        os.makedirs(os.path.join(repo, ".git"))
        for fixture, filename in copies:
            target = os.path.join(repo, filename)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy(os.path.join(ROOT, CORPUS, fixture), target)
        cases.append((f"check {name}", memlint + ["check", checked], repo, FILE_GOAL))
    return cases


def paired_rounds(cases: list, python: str, pairs: int, env: dict, work: str) -> dict:
    """For each case, `pairs` (bare, case) CPU-time pairs; every round runs every case once,
    the order rotated each round."""
    bare = [python, "-c", "pass"]
    samples = {name: [] for name, *_ in cases}
    for name, argv, cwd, _goal in cases:   # warm the file cache and the bytecode
        run_child(bare, cwd, env)
        run_child(argv, cwd, env)
    for round_ in range(pairs):
        shift = round_ % len(cases)
        for name, argv, cwd, _goal in cases[shift:] + cases[:shift]:
            first = run_child(bare, cwd, env)
            second = run_child(argv, cwd, env)
            samples[name].append((first, second))
    return samples


def summarize_pairs(name: str, goal: float, pairs: list) -> dict:
    ratios = sorted(b["cpu"] / a["cpu"] for a, b in pairs if a["cpu"] > 0)
    bare = statistics.median(a["cpu"] for a, _ in pairs)
    own = statistics.median(b["cpu"] for _, b in pairs)
    ratio = statistics.median(ratios) if ratios else float("inf")
    quarter = max(1, len(ratios) // 4)
    return {"name": name, "kind": "ratio", "value": ratio, "goal": goal, "ok": ratio <= goal,
            "bare_cpu_s": bare, "cpu_s": own, "pairs": len(pairs),
            "ratio_q1": ratios[quarter - 1] if ratios else None,
            "ratio_q3": ratios[-quarter] if ratios else None,
            "wall_s": statistics.median(b["wall"] for _, b in pairs),
            "peak_rss_bytes": max(b["rss"] for _, b in pairs),
            "exit_codes": sorted({b["code"] for _, b in pairs})}


def corpus_files() -> int:
    """How many files `memlint check fixtures` reads (its own directory walk)."""
    sys.path.insert(0, ROOT)
    from memlint.runs import expand  # noqa: E402 - the checkout's memlint, after the path

    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        return len(expand([CORPUS], 4 * 2**20))
    finally:
        os.chdir(cwd)


def throughput(memlint: list, python: str, runs: int, env: dict) -> dict:
    count = corpus_files()
    samples = []
    run_child(memlint + ["check", CORPUS], ROOT, env)   # warm
    for _ in range(runs):
        bare = run_child([python, "-c", "pass"], ROOT, env)
        samples.append((bare, run_child(memlint + ["check", CORPUS], ROOT, env)))
    cpu = statistics.median(b["cpu"] for _, b in samples)
    rate = count / cpu
    return {"name": f"check {CORPUS}/ ({count} files)", "kind": "files_per_s", "value": rate,
            "goal": FILES_PER_S_GOAL, "ok": rate >= FILES_PER_S_GOAL, "files": count,
            "cpu_s": cpu, "bare_cpu_s": statistics.median(a["cpu"] for a, _ in samples),
            "runs": runs, "wall_s": statistics.median(b["wall"] for _, b in samples),
            "peak_rss_bytes": max(b["rss"] for _, b in samples),
            "exit_codes": sorted({b["code"] for _, b in samples})}


def plan_times(memlint: list, runs: int, env: dict, work: str) -> list:
    rows = []
    for name, argv, goal in PLANS:
        command = memlint + ["plan", *argv]
        run_child(command, work, env)   # warm
        samples = [run_child(command, work, env) for _ in range(runs)]
        cpu = statistics.median(s["cpu"] for s in samples)
        rows.append({"name": name, "kind": "seconds", "value": cpu, "goal": goal,
                     "ok": cpu <= goal, "cpu_s": cpu, "runs": runs,
                     "cpu_min_s": min(s["cpu"] for s in samples),
                     "wall_s": statistics.median(s["wall"] for s in samples),
                     "peak_rss_bytes": max(s["rss"] for s in samples),
                     "exit_codes": sorted({s["code"] for s in samples})})
    return rows


# ---------------------------------------------------------------------------------------------
# Report


def shown(row: dict) -> tuple:
    if row["kind"] == "ratio":
        spread = (f" ({row['ratio_q1']:.2f}-{row['ratio_q3']:.2f})"
                  if row.get("ratio_q1") is not None else "")
        return f"{row['value']:.2f}x{spread}", f"<= {row['goal']:g}x"
    if row["kind"] == "files_per_s":
        return f"{row['value']:,.0f} files/s", f">= {row['goal']:,.0f} files/s"
    return f"{row['value']:.2f} s", f"<= {row['goal']:g} s"


def table(rows: list) -> str:
    cells = [("measure", "CPU time", "goal", "", "cpu ms", "exit")]
    for row in rows:
        value, goal = shown(row)
        cells.append((row["name"], value, goal, "ok" if row["ok"] else "MISSED",
                      f"{row['cpu_s'] * 1000:.0f}", ",".join(map(str, row["exit_codes"]))))
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(cell, widths)) + " |" for cell in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def machine() -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    return {"python": sys.version.split()[0], "platform": platform.platform(),
            "cpus": os.cpu_count(), "pinned_core": CORE, "load_average": os.getloadavg(),
            "commit": commit}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15, help="pairs per one-file case")
    parser.add_argument("--runs", type=int, default=5, help="runs of each bulk and plan case")
    parser.add_argument("--only", choices=("start-up", "throughput", "plan"), action="append",
                        help="only these parts (repeatable)")
    parser.add_argument("--out", default=DEFAULT_OUT, help="JSON result (default %(default)s)")
    args = parser.parse_args(argv)
    parts = set(args.only or ("start-up", "throughput", "plan"))
    work = tempfile.mkdtemp(prefix="memlint-speed-")
    try:
        python, memlint, how = make_env(work)
        env = child_env(work)
        info = dict(machine(), environment=how)
        rows = []
        if "start-up" in parts:
            cases = start_up_cases(memlint, work)
            samples = paired_rounds(cases, python, args.pairs, env, work)
            rows += [summarize_pairs(name, goal, samples[name]) for name, *_, goal in cases]
        if "throughput" in parts:
            rows.append(throughput(memlint, python, args.runs, env))
        if "plan" in parts:
            rows += plan_times(memlint, args.runs, env, work)
        info["load_average_after"] = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bare = [r["bare_cpu_s"] for r in rows if "bare_cpu_s" in r]
    print(f"memlint speed, CPU time (user + system) of each child, pinned to core {CORE}; "
          f"python {info['python']}, {info['environment']}; load average "
          f"{info['load_average'][0]:.2f} -> {info['load_average_after'][0]:.2f}"
          + (f"; bare `python -c pass` {statistics.median(bare) * 1000:.1f} ms" if bare else ""))
    print(table(rows))
    missed = [r["name"] for r in rows if not r["ok"]]
    print(f"{len(rows) - len(missed)} of {len(rows)} at their goal"
          + (f"; missed: {', '.join(missed)}" if missed else ""))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as handle:
        json.dump({"machine": info, "rows": rows, "all_ok": not missed}, handle, indent=1)
        handle.write("\n")
    print(f"wrote {os.path.relpath(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
