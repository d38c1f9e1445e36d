"""Start-up and throughput of the CLI, in one run:

(a) `memlint check` on one DeepSpeed JSON vs `python -c pass`: paired runs (bare python, then
    check, --runs times, alternating, so that both see the same machine load), each pinned to
    one core with `taskset` when it is there; the ratio is the median of the per-pair ratios
    (and the ratio of the fastest runs is shown too). Target: at most 4x.
(b) files per second linting all of fixtures/shared-real/ in one process (one `memlint check`
    subprocess over every file, start-up included); target over 500 files/s.
(c) `memlint estimate` on the seed M3 case (wall time, median).
Peak RSS of each child (ru_maxrss from wait4), and the heavy modules a one-file check imports.

    python bench/speed.py [--runs 9] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED_REAL = os.path.join(ROOT, "fixtures", "shared-real")
DS_CONFIG = os.path.join(ROOT, "fixtures", "adapters", "deepspeed", "good",
                         "Megatron-DeepSpeed__tests-ds_config_bf16.json")
SEED_M3 = ["--model", "seed-m3", "--set", "profile=seed", "--set", "model.total_params=428e9",
           "--set", "model.expert_params=398e9", "--set", "tp=4", "--set", "pp=4", "--set",
           "ep=8", "--set", "dp=4", "--set", "zero=2", "--set", "recompute=full", "--set",
           "micro_batch=2", "--set", "seq_len=8192"]
CONFIG_EXTENSIONS = (".json", ".yaml", ".yml", ".toml", ".sh", ".txt")
HEAVY = ("rich", "jsonschema", "yaml", "tomllib", "tomli", "importlib.metadata",
         "memlint.memory.estimate", "memlint.adapters.megatron", "memlint.adapters.torchtitan")


def memlint_command() -> list:
    script = os.path.join(os.path.dirname(sys.executable), "memlint")
    if os.path.isfile(script):
        return [script]
    found = shutil.which("memlint")
    return [found] if found else [sys.executable, "-m", "memlint"]


def child_env() -> dict:
    """The children may cache bytecode, as an installed package has it (pip compiles .pyc at
    install time); PYTHONDONTWRITEBYTECODE would make every run compile memlint from source."""
    env = dict(os.environ, NO_COLOR="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def pinned(argv: list) -> list:
    """argv run on one core (the last one this process may use) when taskset exists: the
    child's time is then not spread over cores or moved between them mid-run."""
    taskset = shutil.which("taskset")
    if not taskset or not hasattr(os, "sched_getaffinity"):
        return argv
    return [taskset, "-c", str(max(os.sched_getaffinity(0))), *argv]


def paired(first: list, second: list, cwd: str, runs: int) -> dict:
    """`runs` pairs (first, second) run back to back, pinned: the per-pair ratio second/first
    cancels most of the load the machine had at that moment."""
    run_child(pinned(first), cwd)
    run_child(pinned(second), cwd)  # warm the file cache
    a_times, b_times, ratios, rss, codes = [], [], [], 0, set()
    a_cpu, b_cpu, cpu_ratios = [], [], []
    for _ in range(runs):
        a, _, _, ac = run_child(pinned(first), cwd, cpu=True)
        b, peak, code, bc = run_child(pinned(second), cwd, cpu=True)
        a_times.append(a)
        b_times.append(b)
        ratios.append(b / a)
        a_cpu.append(ac)
        b_cpu.append(bc)
        cpu_ratios.append(bc / ac if ac else float("inf"))
        rss = max(rss, peak)
        codes.add(code)
    return {"first_s": statistics.median(a_times), "second_s": statistics.median(b_times),
            "ratio": statistics.median(ratios), "ratio_fastest": min(b_times) / min(a_times),
            "first_cpu_s": statistics.median(a_cpu), "second_cpu_s": statistics.median(b_cpu),
            "cpu_ratio": statistics.median(cpu_ratios),
            "peak_rss_bytes": rss, "exit_codes": sorted(codes),
            "pinned": pinned(["x"]) != ["x"]}


def run_child(argv: list, cwd: str, cpu: bool = False) -> tuple:
    """(wall seconds, peak RSS bytes, exit code) of one subprocess, and its CPU seconds (user +
    system, from wait4) with cpu=True: on a loaded machine the wall time of a short process is
    mostly waiting, which shrinks the ratio (issue 19: 2.2x measured under load for 6.3x)."""
    env = child_env()
    started = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if cpu:
        return wall, usage.ru_maxrss * 1024, child.returncode, usage.ru_utime + usage.ru_stime
    return wall, usage.ru_maxrss * 1024, child.returncode


def median_run(argv: list, cwd: str, runs: int) -> tuple:
    walls, rss, codes = [], 0, set()
    run_child(argv, cwd)  # warm the file cache
    for _ in range(runs):
        wall, peak, code = run_child(argv, cwd)
        walls.append(wall)
        rss = max(rss, peak)
        codes.add(code)
    return statistics.median(walls), rss, sorted(codes)


def imported_modules(argv: list, cwd: str) -> list:
    probe = ("import sys, runpy; sys.argv = ['memlint'] + sys.argv[1:]\n"
             "try:\n    runpy.run_module('memlint', run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             f"print('\\n'.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", probe, *argv], cwd=cwd, capture_output=True,
                            text=True, env=child_env())
    return [line for line in result.stderr.splitlines() if line in HEAVY]


def real_files() -> list:
    files = []
    for folder, _dirs, names in sorted(os.walk(SHARED_REAL)):
        files += [os.path.join(folder, n) for n in sorted(names) if n.endswith(CONFIG_EXTENSIONS)]
    return files


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="subprocess runs per measurement")
    parser.add_argument("--json", action="store_true", help="also print the numbers as JSON")
    args = parser.parse_args(argv)
    memlint = memlint_command()
    work = tempfile.mkdtemp(prefix="memlint-speed-")
    os.mkdir(os.path.join(work, ".git"))
    shutil.copy(DS_CONFIG, os.path.join(work, "ds_config.json"))
    results: dict = {"python": sys.version.split()[0], "memlint": memlint, "runs": args.runs}

    pair = paired([sys.executable, "-c", "pass"], memlint + ["check", "ds_config.json"], work,
                  args.runs)
    bare, one, ratio = pair["first_s"], pair["second_s"], pair["ratio"]
    one_rss, one_codes = pair["peak_rss_bytes"], pair["exit_codes"]
    results["a"] = {"python_c_pass_s": bare, "check_one_json_s": one, "ratio": ratio,
                    "ratio_fastest": pair["ratio_fastest"], "pinned": pair["pinned"],
                    "exit_codes": one_codes, "peak_rss_bytes": one_rss,
                    "heavy_imports": imported_modules(["check", "ds_config.json"], work)}
    cpu_ratio = pair["cpu_ratio"]
    results["a"].update(python_c_pass_cpu_s=pair["first_cpu_s"],
                        check_one_json_cpu_s=pair["second_cpu_s"], cpu_ratio=cpu_ratio)
    print(f"(a) {args.runs} pairs{' pinned to one core' if pair['pinned'] else ''}: python -c "
          f"pass {bare * 1000:.1f} ms; memlint check ds_config.json {one * 1000:.1f} ms "
          f"(exit {one_codes}); ratio {ratio:.2f}x (median of pairs; fastest runs "
          f"{pair['ratio_fastest']:.2f}x)")
    print(f"    CPU time (user + system): python -c pass {pair['first_cpu_s'] * 1000:.1f} ms; "
          f"check {pair['second_cpu_s'] * 1000:.1f} ms; ratio {cpu_ratio:.2f}x (median of "
          f"pairs) (target <= 4x, on the larger of the two ratios) "
          f"{'OK' if max(ratio, cpu_ratio) <= 4 else 'MISSED'}")
    print(f"    peak RSS {one_rss / 2**20:.1f} MiB; "
          f"heavy modules imported: {', '.join(results['a']['heavy_imports']) or 'none'}")

    files = real_files()
    if files:
        runs = max(3, args.runs // 3)
        wall, rss, codes = median_run(memlint + ["check",
                                                 "--allow-outside-root", *files], work, runs)
        rate = len(files) / wall
        results["b"] = {"files": len(files), "wall_s": wall, "files_per_s": rate,
                        "exit_codes": codes, "peak_rss_bytes": rss}
        print(f"(b) {len(files)} files of fixtures/shared-real in one process: {wall:.3f} s, "
              f"{rate:.0f} files/s (target > 500) {'OK' if rate > 500 else 'MISSED'}; "
              f"peak RSS {rss / 2**20:.1f} MiB")
    else:
        print("(b) skipped: fixtures/shared-real is empty")

    wall, rss, codes = median_run(memlint + ["estimate", *SEED_M3], work, args.runs)
    results["c"] = {"wall_s": wall, "exit_codes": codes, "peak_rss_bytes": rss}
    print(f"(c) memlint estimate (seed M3): {wall * 1000:.1f} ms (exit {codes}); "
          f"peak RSS {rss / 2**20:.1f} MiB")
    peak = max(r.get("peak_rss_bytes", 0) for r in results.values() if isinstance(r, dict))
    print(f"peak RSS over all runs: {peak / 2**20:.1f} MiB")
    if args.json:
        print(json.dumps(results, indent=2, sort_keys=True))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
