"""The published GPU set of bench/accuracy.py: `gpu-published/manifest.json` (issue 25).

Each row is a published per-GPU memory measurement of a torchtitan FSDP2, HF Trainer + PEFT or
DeepSpeed run whose whole configuration is public. Its `args` are the `memlint estimate`
arguments of the run (paths relative to the manifest's folder); the peak stage of the estimate
is compared with the metric the row's source logs (README of the set):
- `max_reserved` (torchtitan's `memory: X GiB`, the caching allocator's `reserved_bytes.all.peak`)
  with `reserved_bytes`;
- `max_allocated` / `peak_active` (`torch.cuda.max_memory_allocated()`) with `allocated_bytes`;
- `unspecified` (a README that does not say how it read memory; most likely nvidia-smi) with
  `device_bytes`.
"""
from __future__ import annotations

import contextlib
import json
import os
import statistics

PUBLISHED_DIR = "gpu-published"
GiB = 2**30

# metric of the row's source -> the estimate's number compared with it
METRIC_FIELD = {"max_reserved": "reserved_bytes", "max_allocated": "allocated_bytes",
                "peak_active": "allocated_bytes", "unspecified": "device_bytes"}


# the engine that runs the step (scenario key `framework`), as the README's accuracy section
# names the families: a Qwen Q-LoRA row is a DeepSpeed run, whoever published it
FRAMEWORK_FAMILY = {"fsdp2": "torchtitan / FSDP2", "hf": "HF Trainer", "deepspeed": "DeepSpeed",
                    "megatron": "Megatron-LM"}


@contextlib.contextmanager
def _cwd(path: str):
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def estimate_args(args: list):
    """The Estimate (and diagnostics) of one `memlint estimate ARGS` command line, run in the
    current directory, through the CLI's own parser and the library pipeline."""
    from memlint.api import estimate_paths
    from memlint.cli import build_parser, options_from

    parsed = build_parser().parse_args(["estimate", *args, "--allow-outside-root"])
    result = estimate_paths(list(parsed.paths), options_from(parsed))
    return (result.estimates[0] if result.estimates else None), result.diagnostics


def _tags(row: dict) -> list:
    tags = [row["group"], "metric " + row["metric"]]
    if row.get("clean"):
        tags.append("clean")
    if row["group"] == "torchtitan":
        tags.append("torchtitan compiled" if row.get("compile") else "torchtitan eager")
    return tags


def published_run(folder: str, row: dict) -> dict:
    """One manifest row through memlint: the compared number, its error and the components."""
    out = {"id": row["id"], "group": row["group"], "metric": row["metric"],
           "compile": bool(row.get("compile")), "clean": bool(row.get("clean")),
           "measured": int(round(row["measured_gib"] * GiB)), "tags": _tags(row)}
    with _cwd(folder):
        estimate, diagnostics = estimate_args(list(row["args"]))
    if estimate is None:
        errors = [d.message for d in diagnostics if d.severity.label == "error"]
        out["not_estimable"] = errors[0] if errors else "no estimate"
        return out
    stage = max(estimate.stages, key=lambda s: s.total_bytes)
    field = METRIC_FIELD[row["metric"]]
    predicted = getattr(stage, field)
    out.update(predicted=predicted, field=field, phase=stage.phase,
               error=(predicted - out["measured"]) / out["measured"],
               allocated=stage.allocated_bytes, reserved=stage.reserved_bytes,
               device=stage.device_bytes, components=stage.components(),
               terms=[t.name for t in stage.terms if t.bytes],
               framework=FRAMEWORK_FAMILY.get(estimate.scenario.training.framework,
                                              estimate.scenario.training.framework),
               assumed=[a.get("key") if isinstance(a, dict) else str(a)
                        for a in getattr(estimate, "assumed", ())])
    return out


def published_rows(calib: str) -> list:
    folder = os.path.join(calib, PUBLISHED_DIR)
    path = os.path.join(folder, "manifest.json")
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        manifest = json.load(handle)
    return [published_run(folder, row) for row in manifest]


def summarize(values: list) -> tuple:
    """(median, p90, max) of |values| (p90: nearest rank, as the other sets)."""
    values = sorted(abs(v) for v in values)
    if not values:
        return (0.0, 0.0, 0.0)
    p90 = values[min(len(values) - 1, int(round(0.9 * (len(values) - 1))))]
    return statistics.median(values), p90, values[-1]


def print_published(rows: list, worst: int = 0) -> None:
    done = [r for r in rows if "error" in r]
    print(f"\nPublished GPU set (torchtitan FSDP2, HF + PEFT, DeepSpeed; peak stage vs the metric "
          f"each source logs): {len(done)} estimable of {len(rows)} rows")
    print(f"{'group':<28}{'n':>4}{'median':>9}{'p90':>9}{'max':>9}{'signed med':>12}")

    def line(name, group):
        if not group:
            return
        med, p90, top = summarize([r["error"] for r in group])
        signed = statistics.median(r["error"] for r in group)
        print(f"{name:<28}{len(group):>4}{med:>9.2%}{p90:>9.2%}{top:>9.2%}{signed:>+12.2%}")

    line("all estimable", done)
    print("per group:")
    for group in sorted({r["group"] for r in done}):
        line("  " + group, [r for r in done if r["group"] == group])
    print("per framework (the engine that runs the step):")
    for family in sorted({r["framework"] for r in done}):
        line("  " + family, [r for r in done if r["framework"] == family])
    print("per metric (compared with):")
    for metric in sorted({r["metric"] for r in done}):
        line(f"  {metric} ({METRIC_FIELD[metric].split('_')[0]})",
             [r for r in done if r["metric"] == metric])
    print("subsets:")
    for tag in ("clean", "torchtitan eager", "torchtitan compiled"):
        line("  " + tag, [r for r in done if tag in r["tags"]])
    for r in rows:
        if "not_estimable" in r:
            print(f"  not estimable: {r['id']}: {r['not_estimable']}")
    print("\nrows (signed error; GiB: measured, allocated / reserved / device; phase; "
          "components; * = the allocator's idle blocks are not modeled for the run's engine, "
          "reserved = allocated beside the loss's: assumption runtime.allocator):")
    ordered = sorted(done, key=lambda r: -abs(r["error"]))
    for r in ordered[:worst] if worst else ordered:
        comp = " ".join(f"{k[:3]} {v / GiB:.1f}" for k, v in r["components"].items() if v)
        star = "*" if "runtime.allocator" in r["assumed"] else " "
        print(f"  {r['error']:+7.2%}{star}{r['id']:<28} {r['metric'][:5]:<6}"
              f"{r['measured'] / GiB:6.1f} | {r['allocated'] / GiB:5.1f} / "
              f"{r['reserved'] / GiB:5.1f} / {r['device'] / GiB:5.1f}  {r['phase']:<18} {comp}")
