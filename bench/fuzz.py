"""Long fuzz run: mutated real configs and generated logs, pyproject tables and directory trees
through the real CLI, in-process, under a time limit each.

    python bench/fuzz.py --count 100000 --jobs 2 --seed 1

Inputs: real configs from fixtures/, the shared real configs of fixtures/shared-real/ last,
mutated (tests/fuzz/mutate.py has the mutators and the oracle: exit 0/1/2 as DESIGN.md says,
a tenth of the checks with --fix, --diff, --require-estimate, --statistics or --skip-unknown,
parseable JSON, no internal error or ML009, no traceback, positions on parse problems, no input
over the per-input time limit), and a share (--generated) of whole cases from
tests/fuzz/generators.py: training logs for `compare` (with --write-assumptions), [tool.memlint]
tables beside a config, directory trees for `check DIR`, each with its own oracle (escaped
output, the pyproject.toml left valid). --count N runs exactly N inputs, however long that
takes; --time T (without --count) runs until T seconds have passed; neither: --time 600. Prints
inputs run, time, rate and failures (grouped by message, with a reproducer written under --out,
by default a new folder each run), also when stopped (Ctrl-C, SIGTERM) before the end; an input
the harness could not build (a MemoryError under the memory limit) is a harness failure, listed
apart with its seed. Exit 1 if memlint failed on any input, else 2 if the harness failed.
"""
from __future__ import annotations

import argparse
import collections
import itertools
import multiprocessing
import os
import random
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]  # this file is fuzz.py
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

from fuzz import generators, mutate  # noqa: E402

_CORPUS: list = []
_WORKDIR = None


_MEMORY = 100 * 2**20  # bytes one input may add to the process (issue 19: under 100 MB)


def _init(include_shared: bool) -> None:
    global _CORPUS, _WORKDIR
    _CORPUS = mutate.corpus(include_shared)
    _WORKDIR = tempfile.mkdtemp(prefix="memlint-fuzz-")
    from memlint import cli  # imported before the limit: modules are not inputs

    cli._fewer_collections()  # as `memlint` run from a shell does (cli.main with argv None)

    _limit_memory()


def _limit_memory() -> None:
    """Cap the address space at what the worker uses now plus _MEMORY (RLIMIT_AS): an input
    that needs more fails inside memlint (MemoryError: an internal error, reported) instead of
    taking the machine. Peak RSS growth per input is also measured (_work)."""
    try:
        import resource

        with open("/proc/self/statm") as handle:
            size = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (size + _MEMORY + 64 * 2**20,) * 2)
    except (ImportError, OSError, ValueError):
        pass  # no /proc or no RLIMIT_AS here: only the RSS measurement remains


_GENERATED = 0.3   # share of inputs that are generated cases (logs, pyproject tables, trees)


def _case(seed: int):
    """The input of `seed`: a generators.Case, or (name, raw, args, fmt, command)."""
    rng = random.Random(seed)
    if rng.random() < _GENERATED:
        return rng.choice(generators.GENERATORS)(rng, _CORPUS)
    name, raw = rng.choice(_CORPUS)
    if rng.random() < 0.9:
        name, raw = mutate.mutate(rng, name, raw)
    args = mutate.extra_args(rng, name)
    fmt = rng.choice(("json", "json", "json", "text", "sarif"))
    command = "estimate" if rng.random() < 0.1 and "--model" in args else "check"
    if command == "check" and rng.random() < 0.1:
        args.append(rng.choice(mutate.CHECK_FLAGS))
    return name, raw, args, fmt, command


def _rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


HARNESS = "harness"   # the first word of a failure of the harness itself, not of memlint


def _work(seed: int) -> tuple:
    """(seed, failure, CPU seconds, bytes the peak RSS grew by) of one input. An input that
    cannot be built under the memory limit is the harness's failure, reported with its seed."""
    try:
        case = _case(seed)
    except MemoryError:
        return seed, f"{HARNESS}: MemoryError while building the input", 0.0, 0
    before = _rss()
    started = time.process_time()
    if isinstance(case, generators.Case):
        failure = generators.run_case(case, _LIMIT, _WORKDIR)
    else:
        name, raw, args, fmt, command = case
        failure = mutate.run_one(name, raw, args, fmt=fmt, time_limit=_LIMIT, workdir=_WORKDIR,
                                 command=command)
    elapsed = time.process_time() - started
    grown = _rss() - before
    if failure is None and elapsed > _LIMIT_OK:
        failure = f"slow: {elapsed:.2f}s of CPU time (over {_LIMIT_OK}s)"
    if failure is None and grown > _MEMORY:
        failure = f"memory: peak RSS grew {grown / 2**20:.0f} MiB (over {_MEMORY // 2**20} MiB)"
    return seed, failure, elapsed, grown


_STOPPED = []


def _interrupt(_signum, _frame):
    _STOPPED.append(True)   # memlint's own KeyboardInterrupt handler may swallow the raise
    raise KeyboardInterrupt


def _kind(seed: int) -> str:
    """Which generator or mutated corpus input `seed` is (cheap: the first draws of _case)."""
    rng = random.Random(seed)
    if rng.random() < _GENERATED:
        return rng.choice(generators.GENERATORS).__name__.replace("_case", "")
    return "mutated"


_LIMIT = 5.0
_LIMIT_OK = 1.0  # an input over this much CPU time is a failure too (issue 19)


def main(argv=None) -> int:
    global _LIMIT, _LIMIT_OK, _GENERATED
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int,
                        help="inputs to run, all of them (then --time is not a limit)")
    parser.add_argument("--time", type=float,
                        help="without --count: run until this many seconds have passed "
                        "(default 600)")
    parser.add_argument("--progress", type=int, default=10_000,
                        help="print a progress line every this many inputs and each new "
                        "distinct failure as it happens (0: neither)")
    parser.add_argument("--generated", type=float, default=_GENERATED,
                        help=f"share of generated cases (default {_GENERATED})")
    parser.add_argument("--seed", type=int, default=0, help="first seed (input i uses seed+i)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--limit", type=float, default=5.0,
                        help="CPU seconds after which an input is stopped")
    parser.add_argument("--slow", type=float, default=1.0,
                        help="CPU seconds over which a finished input counts as a failure")
    parser.add_argument("--out", help="where reproducers of failures are written (default: a "
                        "new folder under the temporary directory, printed at the end)")
    parser.add_argument("--no-shared", action="store_true",
                        help="only fixtures/, not fixtures/shared-real/")
    args = parser.parse_args(argv)
    _LIMIT, _LIMIT_OK = args.limit, args.slow
    _GENERATED = args.generated
    include_shared = not args.no_shared
    if args.count is not None and args.time is not None:
        print(f"note: --count {args.count} is run in full; --time {args.time} is not a limit")
    deadline_s = None if args.count is not None else (args.time if args.time is not None
                                                        else 600.0)

    started = time.perf_counter()
    seeds = (range(args.seed, args.seed + args.count) if args.count is not None
             else itertools.count(args.seed))
    failures: dict = collections.OrderedDict()
    ran, slowest, biggest = 0, (0.0, None), (0, None)
    kinds: collections.Counter = collections.Counter()
    deadline = None if deadline_s is None else started + deadline_s
    if args.jobs > 1:
        pool = multiprocessing.Pool(args.jobs, initializer=_init, initargs=(include_shared,))
        results = pool.imap_unordered(_work, seeds, chunksize=64)
    else:
        _init(include_shared)
        pool, results = None, map(_work, seeds)
    interrupted = False
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        for seed, failure, elapsed, grown in results:
            if _STOPPED:   # this input was cut short by the stop: not a result
                interrupted = True
                break
            ran += 1
            if elapsed > slowest[0]:
                slowest = (elapsed, seed)
            if grown > biggest[0]:
                biggest = (grown, seed)
            if failure is not None:
                key = ":".join(failure.split(":", 2)[:2])
                if key not in failures and args.progress:
                    print(f"  new failure (seed {seed}): {failure[:200]}", flush=True)
                failures.setdefault(key, []).append((seed, failure))
            kinds[_kind(seed)] += 1
            if args.progress and ran % args.progress == 0:
                found = sum(len(v) for v in failures.values())
                print(f"  ... {ran:,} inputs, {found} failures, "
                      f"{time.perf_counter() - started:.0f}s", flush=True)
            if deadline is not None and time.perf_counter() > deadline:
                break
    except KeyboardInterrupt:   # Ctrl-C or SIGTERM: the summary of the inputs run so far
        interrupted = True
    finally:
        if pool is not None:
            pool.terminate()
    total = time.perf_counter() - started
    if not _CORPUS:
        _init(include_shared)
    print(f"corpus: {len(_CORPUS)} real configs; per-input limit {args.limit}s; jobs {args.jobs}")
    if interrupted:
        print(f"interrupted: {ran:,} of {args.count or 'the'} inputs asked for")
    print(f"inputs run: {ran}  time: {total:.1f}s  rate: {ran / total:.0f} inputs/s  "
          f"slowest: {slowest[0]:.2f}s CPU (seed {slowest[1]})  largest peak-RSS growth: "
          f"{biggest[0] / 2**20:.1f} MiB (seed {biggest[1]})")
    print(f"limits: {args.slow}s CPU and {_MEMORY // 2**20} MiB per input (address space capped "
          f"at start-up + {_MEMORY // 2**20} MiB + 64 MiB); mutators: "
          f"{', '.join(sorted({m.__name__ for m in mutate.MUTATORS}))}; generated cases: "
          f"{', '.join(g.__name__ for g in generators.GENERATORS)}")
    print("inputs by kind: " + ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items())))
    harness = {key: items for key, items in failures.items() if key.startswith(HARNESS + ":")}
    failures = {key: items for key, items in failures.items() if key not in harness}
    count = sum(len(v) for v in failures.values())
    print(f"failures: {count} ({len(failures)} distinct)")
    out = args.out
    if failures and out is None:
        out = tempfile.mkdtemp(prefix="memlint-fuzz-failures-")
    for key, items in failures.items():
        seed, message = items[0]
        case = _case(seed)
        if isinstance(case, generators.Case):
            where = generators.reproducer(case, out, seed)
        else:
            name, raw, extra, fmt, command = case
            where = mutate.reproducer(name, raw, [command, "--format", fmt, *extra], out)
        print(f"  {len(items):5d}x  {message[:200]}\n         seed {seed}: {where}")
    if failures:
        print(f"reproducers: {out}")
    for items in harness.values():   # no reproducer: memlint never saw these inputs
        seeds = ", ".join(str(seed) for seed, _ in items[:20])
        print(f"harness failures: {len(items)}  {items[0][1][:200]}\n         seeds: {seeds}"
              f"{' ...' if len(items) > 20 else ''} (rerun one: --seed SEED --count 1 --jobs 1)")
    return 1 if failures else 2 if harness else 0


if __name__ == "__main__":
    sys.exit(main())
