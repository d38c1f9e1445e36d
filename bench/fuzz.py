"""Long fuzz run: mutated real configs through the real CLI, in-process, under a time limit each.

    python bench/fuzz.py --count 100000 --time 600 --jobs 2 --seed 1 --out /tmp/memlint-fuzz

Inputs come from fixtures/ and ../shared/fixtures-real/ (tests/fuzz/mutate.py has the mutators
and the oracle: exit 0/1/2 as DESIGN.md says, parseable JSON, no internal error or ML009, no
traceback, positions on parse problems, no input over the per-input time limit). Stops at
--count inputs or --time seconds, whichever comes first; prints inputs run, time, rate and
failures (grouped by message, with a reproducer written under --out). Exit 1 if any failed.
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]  # this file is fuzz.py
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

from fuzz import mutate  # noqa: E402

_CORPUS: list = []
_WORKDIR = None


def _init(include_shared: bool) -> None:
    global _CORPUS, _WORKDIR
    import tempfile

    _CORPUS = mutate.corpus(include_shared)
    _WORKDIR = tempfile.mkdtemp(prefix="memlint-fuzz-")


def _case(seed: int) -> tuple:
    rng = random.Random(seed)
    name, raw = rng.choice(_CORPUS)
    if rng.random() < 0.9:
        name, raw = mutate.mutate(rng, name, raw)
    args = mutate.extra_args(rng, name)
    fmt = rng.choice(("json", "json", "json", "text", "sarif"))
    command = "estimate" if rng.random() < 0.1 and "--model" in args else "check"
    return name, raw, args, fmt, command


def _work(seed: int) -> tuple:
    name, raw, args, fmt, command = _case(seed)
    started = time.perf_counter()
    failure = mutate.run_one(name, raw, args, fmt=fmt, time_limit=_LIMIT, workdir=_WORKDIR,
                             command=command)
    return seed, failure, time.perf_counter() - started


_LIMIT = 5.0


def main(argv=None) -> int:
    global _LIMIT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000, help="inputs to run")
    parser.add_argument("--time", type=float, default=600.0, help="stop after this many seconds")
    parser.add_argument("--seed", type=int, default=0, help="first seed (input i uses seed+i)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--limit", type=float, default=5.0, help="seconds allowed per input")
    parser.add_argument("--out", default=os.path.join("/tmp", "memlint-fuzz-failures"),
                        help="where reproducers of failures are written")
    parser.add_argument("--no-shared", action="store_true",
                        help="only fixtures/, not ../shared/fixtures-real/")
    args = parser.parse_args(argv)
    _LIMIT = args.limit
    include_shared = not args.no_shared

    started = time.perf_counter()
    seeds = range(args.seed, args.seed + args.count)
    failures: dict = collections.OrderedDict()
    ran, slowest = 0, (0.0, None)
    deadline = started + args.time
    if args.jobs > 1:
        pool = multiprocessing.Pool(args.jobs, initializer=_init, initargs=(include_shared,))
        results = pool.imap_unordered(_work, seeds, chunksize=64)
    else:
        _init(include_shared)
        pool, results = None, map(_work, seeds)
    try:
        for seed, failure, elapsed in results:
            ran += 1
            if elapsed > slowest[0]:
                slowest = (elapsed, seed)
            if failure is not None:
                key = failure.split(":", 2)[:2]
                failures.setdefault(":".join(key), []).append((seed, failure))
            if time.perf_counter() > deadline:
                break
    finally:
        if pool is not None:
            pool.terminate()
    total = time.perf_counter() - started
    if not _CORPUS:
        _init(include_shared)
    print(f"corpus: {len(_CORPUS)} real configs; per-input limit {args.limit}s; jobs {args.jobs}")
    print(f"inputs run: {ran}  time: {total:.1f}s  rate: {ran / total:.0f} inputs/s  "
          f"slowest: {slowest[0]:.2f}s (seed {slowest[1]})")
    count = sum(len(v) for v in failures.values())
    print(f"failures: {count} ({len(failures)} distinct)")
    for key, items in failures.items():
        seed, message = items[0]
        name, raw, extra, fmt, command = _case(seed)
        where = mutate.reproducer(name, raw, [command, "--format", fmt, *extra], args.out)
        print(f"  {len(items):5d}x  {message[:200]}\n         seed {seed}: {where}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
