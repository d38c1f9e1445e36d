"""Accuracy of the `precise` memory model against memory measured on real training steps.

Runs memlint over every record of `../shared/calibration/records.json` (HF transformers steps) and
`fsdp2-records.json` (simulated FSDP2 ranks), maps each record to scenario keys exactly as issue 3
prescribes, and compares the measured peak of live tensor bytes with the estimate's peak stage
total minus its `runtime` component. Prints median / 90th percentile / max absolute relative
error for the total and per category, and the worst cases.

    python bench/accuracy.py [--calibration DIR] [--worst 10] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from memlint.ir import Partial, Provenance  # noqa: E402
from memlint.memory.estimate import estimate  # noqa: E402
from memlint.scenario import build, overrides_partial  # noqa: E402

DEFAULT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                           "calibration")

DTYPE = {"fp32": "fp32", "bf16": "pure-bf16", "amp_bf16": "amp-bf16"}
OPTIMIZER = {"adamw": ["optimizer=adamw"], "adamw_foreach": ["optimizer=adamw", "optimizer_impl=foreach"],
             "adamw_fused": ["optimizer=adamw", "optimizer_impl=fused"],
             "sgd_momentum": ["optimizer=sgd"], "adafactor": ["optimizer=adafactor"]}

# Record categories -> memlint components (at the peak).
HF_CATEGORIES = {"Parameter": ("weights",), "Gradient": ("gradients",),
                 "Optstate": ("optimizer",),
                 "Activation+Temp+Other": ("activations", "logits", "buffers", "vision")}
# fsdp2-records.json categories (FSDPMemTracker): Sharded Param + Buffer -> weights, Sharded and
# Unsharded Grad -> gradients, OptState -> optimizer, Activation + Temp + Inputs -> activations +
# logits, Unsharded Param + All Gather + Reduce Scatter -> buffers ("FSDP buffers" row).


def hf_settings(record: dict) -> list:
    sets = [f"micro_batch={record['batch_size']}", f"seq_len={record['seq_len']}",
            f"precision={DTYPE[record['dtype_mode']]}", f"attention={record['attn_implementation']}",
            "framework=hf", "device=cpu"]
    if record["gradient_checkpointing"]:
        sets.append("recompute=full")
    sets += OPTIMIZER[record["optimizer"]["name"]]
    lora = record.get("lora")
    if lora:
        targets = lora["target_modules"]
        sets.append(f"lora_rank={lora['r']}")
        sets.append("lora_targets=" + ("all-linear" if targets == "all-linear" else "qkvo"))
        if lora.get("lora_dropout"):
            sets.append(f"lora_dropout={lora['lora_dropout']}")
    return sets


def fsdp_settings(record: dict) -> list:
    precision = "fp32" if record["dtype_mode"] == "fp32" else "bf16"
    return [f"micro_batch={record['batch_size_per_rank']}", f"seq_len={record['seq_len']}",
            "framework=fsdp2", "fsdp=full", f"dp_shard={record['world_size']}",
            f"world_size={record['world_size']}",
            f"reshard_after_forward={str(record['reshard_after_forward']).lower()}",
            "recompute=" + ("full" if record["activation_checkpointing"] else "none"),
            f"precision={precision}", "attention=sdpa", "optimizer=adamw", "device=cpu"]


def run_one(calib_dir: str, config_file: str, sets: list):
    partial = overrides_partial(sets, model=os.path.join(calib_dir, config_file))
    scenario, diagnostics = build([partial])
    errors = [d for d in diagnostics if d.severity.label == "error"]
    if errors:
        raise SystemExit(f"bad scenario {sets}: {errors[0].message}")
    result = estimate(scenario)
    stage = result.peak_stage
    components = stage.components()
    predicted = stage.total_bytes - components.get("runtime", 0)
    return predicted, stage, components


def relative(a: float, b: float) -> float:
    return (a - b) / b if b else 0.0


def summarize(values: list) -> tuple:
    values = sorted(abs(v) for v in values)
    if not values:
        return (0.0, 0.0, 0.0)
    p90 = values[min(len(values) - 1, int(round(0.9 * (len(values) - 1))))]
    return statistics.median(values), p90, values[-1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", default=DEFAULT_DIR)
    parser.add_argument("--worst", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    calib = os.path.abspath(args.calibration)
    rows = []
    with open(os.path.join(calib, "records.json")) as handle:
        records = json.load(handle)["records"]
    for record in records:
        predicted, stage, components = run_one(calib, record["config_file"], hf_settings(record))
        measured = record["peak"]["total_bytes"]
        at_peak = record["peak"]["by_category_at_peak"]
        cats = {
            "Parameter": (components.get("weights", 0), at_peak["Parameter"] + at_peak["Buffer"]),
            "Gradient": (components.get("gradients", 0), at_peak["Gradient"]),
            "Optstate": (components.get("optimizer", 0), at_peak["Optstate"]),
            "Activation+Temp+Other": (sum(components.get(c, 0) for c in
                                          ("activations", "logits", "buffers", "vision")),
                                      at_peak["Activation"] + at_peak["Temp"] + at_peak["Other"]),
        }
        rows.append({"id": record["id"], "measured": measured, "predicted": predicted,
                     "error": relative(predicted, measured), "phase": record["peak"]["phase"],
                     "predicted_phase": stage.phase,
                     "categories": {k: (p, m) for k, (p, m) in cats.items()}})
    fsdp_path = os.path.join(calib, "fsdp2-records.json")
    if os.path.exists(fsdp_path):
        with open(fsdp_path) as handle:
            for record in json.load(handle)["records"]:
                predicted, stage, components = run_one(calib, record["config_file"],
                                                       fsdp_settings(record))
                measured = record["peak_total_bytes"]
                ident = (f"fsdp2|w{record['world_size']}|B{record['batch_size_per_rank']}|"
                         f"T{record['seq_len']}|{record['dtype_mode']}|"
                         f"{'ac' if record['activation_checkpointing'] else 'noac'}|"
                         f"{'rsa' if record['reshard_after_forward'] else 'norsa'}")
                cat = record["peak_by_category"]
                cats = {
                    "Parameter": (components.get("weights", 0),
                                  cat["Sharded Param"] + cat["Buffer"]),
                    "Gradient": (components.get("gradients", 0),
                                 cat["Sharded Grad"] + cat["Unsharded Grad"]),
                    "Optstate": (components.get("optimizer", 0), cat["OptState"]),
                    "Activation+Temp+Other": (sum(components.get(c, 0) for c in
                                                  ("activations", "logits", "vision")),
                                              cat["Activation"] + cat["Temp"] + cat["Inputs"]),
                    "FSDP buffers": (components.get("buffers", 0),
                                     cat["Unsharded Param"] + cat["All Gather"]
                                     + cat["Reduce Scatter"]),
                }
                rows.append({"id": ident, "measured": measured, "predicted": predicted,
                             "error": relative(predicted, measured), "phase": "?",
                             "predicted_phase": stage.phase,
                             "categories": {k: (p, m) for k, (p, m) in cats.items()}})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    med, p90, worst = summarize([r["error"] for r in rows])
    print(f"records: {len(rows)}")
    print(f"{'category':<24}{'median':>9}{'p90':>9}{'max':>9}")
    print(f"{'total peak':<24}{med:>9.2%}{p90:>9.2%}{worst:>9.2%}")
    for cat in list(HF_CATEGORIES) + ["FSDP buffers"]:
        errs = []
        for row in rows:
            if cat in row["categories"]:
                p, m = row["categories"][cat]
                if m > 0.01 * row["measured"]:
                    errs.append(relative(p, m))
        med, p90, worst = summarize(errs)
        print(f"{cat:<24}{med:>9.2%}{p90:>9.2%}{worst:>9.2%}")
    print(f"\nworst {args.worst} (signed error, predicted vs measured peak, phases):")
    for row in sorted(rows, key=lambda r: -abs(r["error"]))[:args.worst]:
        print(f"  {row['error']:+7.2%}  {row['id']:<58} {row['predicted_phase']}/{row['phase']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
