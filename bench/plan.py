"""Planner speed: median wall time of `search_plans` and candidates examined, on one core.

    python bench/plan.py [--repeat 5]

Cases: Llama-3.1-405B (preset llama3.1-405b) on 16,384 H100-80GB at T=8192, global batch 2048
(Llama 3's 16M-token batch); the seed's 428B M3 MoE (preset seed-m3 with the article's totals,
profile=seed) on 512 H100-80GB at T=8192, global batch 32; and the same M3 under the precise
profile. Target: under 1 s each, top 10.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from memlint.planner import search_plans  # noqa: E402
from memlint.scenario import build, overrides_partial  # noqa: E402

M3 = ["model.total_params=428e9", "model.expert_params=398e9", "seq_len=8192", "global_batch=32",
      "gpu=H100-80GB"]
CASES = [
    ("llama3.1-405b on 16384 H100 (precise)", "llama3.1-405b",
     ["seq_len=8192", "global_batch=2048", "gpu=H100-80GB"], 16384),
    ("seed-m3 428B MoE on 512 H100 (seed)", "seed-m3", M3 + ["profile=seed"], 512),
    ("seed-m3 428B MoE on 512 H100 (precise)", "seed-m3", M3, 512),
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        cores = "1 core (pinned)"
    except (AttributeError, OSError):
        cores = "unpinned"
    print(f"planner benchmark, {cores}, top {args.top}, median of {args.repeat}")
    worst = 0.0
    for label, model, sets, gpus in CASES:
        scenario, _ = build([overrides_partial(sets, model=model)])
        times, result = [], None
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = search_plans(scenario, gpus, 8, args.top)
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        worst = max(worst, median)
        s = result.stats
        best = result.plans[0] if result.plans else None
        print(f"{label}: median {median * 1000:.0f} ms (min {min(times) * 1000:.0f}); "
              f"examined {s.examined:,}, cut by states bound {s.pruned_states:,}, by activation "
              f"bound {s.pruned_bound:,}, by rules {s.pruned_rules:,}; estimate() calls "
              f"{s.estimated}, fitting {s.fitting}"
              + (f"; best {best.label()} {' '.join(best.assignments())}" if best else ""))
    print(f"target < 1 s each: {'met' if worst < 1 else 'MISSED'} (worst {worst * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
