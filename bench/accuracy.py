"""Accuracy of the `precise` memory model against memory measured on real training steps.

Three sets, printed side by side:
- CPU set: every record of `bench/data/calibration/records.json` (HF transformers steps) and
  `fsdp2-records.json` (simulated FSDP2 ranks), mapped to scenario keys exactly as issue 3
  prescribes; the measured peak of live tensor bytes is compared with the estimate's peak stage
  total minus its `runtime` component, in total and per category.
- GPU set: `bench/data/calibration/gpu-megatron-ci/` (Megatron-LM CI on 8 x H100, issue 13). Each
  record's `model_config.yaml` is read by memlint's Megatron adapter (world size 8, H100-80GB, the
  record's training script naming the model family); the LAST pipeline stage's `allocated_bytes`
  (tensors at the peak, without CUDA context / NCCL / allocator slack) is compared with
  `measured_bytes` (Megatron's `mem-max-allocated-bytes` of the last rank). The stage's
  persistent part (weights, gradients, optimizer states and the workspaces that stay allocated)
  is compared with `allocated_after_step_bytes`, to tell state errors from activation errors.
  Records memlint cannot estimate are listed with the reason, and each of the worst records
  with the set settings the `not-modeled` rule names.
- GPU features set: `gpu-megatron-ci-features/` (Megatron-LM CI cases of the features issue 26
  models: activation offloading, distributed-optimizer instances, CUDA graphs, tp-comm overlap,
  Muon), row by row; checked, never fit.
- Published set: `gpu-published/manifest.json` (29 published GPU measurements of torchtitan FSDP2,
  HF Trainer + PEFT and DeepSpeed runs, issue 25). Each row's `args` are run as `memlint estimate`
  would run them (from the manifest's folder), and the peak stage is compared with the metric the
  row's source logs: `max_reserved` with `reserved_bytes` (torchtitan's `memory:` line is the
  caching allocator's reserved peak), `max_allocated` / `peak_active` with `allocated_bytes`,
  `unspecified` (most likely nvidia-smi) with `device_bytes`. Errors are reported by group, by
  metric, for the clean rows, eager and compiled torchtitan rows, and row by row with the
  estimate's components.
- vLLM start-up set: `vllm-startups/` (50 vLLM 0.19 start-ups on H100 and a vLLM 0.15-0.18
  version sweep, llm-d-planner, issue 28): the engine model's KV pool, non-KV memory and terms
  against vLLM's own log lines, the rows its constants are fit to apart from the held-out rows
  (bench/engine_startups.py).

    python bench/accuracy.py [--calibration DIR] [--worst 10] [--json]
                             [--only cpu|gpu|published|engine]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from memlint.assumptions import PROFILES  # noqa: E402
from memlint.ir import Partial, Provenance  # noqa: E402
from memlint.memory.estimate import estimate  # noqa: E402
from memlint.scenario import build, overrides_partial  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_startups import engine_rows, fitted_constants, print_engine  # noqa: E402
from published import print_published, published_rows  # noqa: E402

# The calibration sets, copied into the repository with their sources (bench/data/calibration/).
DEFAULT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "calibration")

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


GPU_DIR = "gpu-megatron-ci"
# Megatron-LM CI cases of the features issue 26 models, not in gpu-megatron-ci (checked, never fit)
FEATURES_DIR = "gpu-megatron-ci-features"
# The record's training script decides the model family (the arguments alone do not say it).
SCRIPT_FAMILY = {"pretrain_gpt.py": "gpt", "examples/bert/pretrain_bert.py": "bert",
                 "examples/t5/pretrain_t5.py": "t5", "pretrain_hybrid.py": "hybrid",
                 "pretrain_mamba.py": "hybrid", "pretrain_vlm.py": "llava"}


def gpu_features(extra: dict, scenario) -> list:
    """Feature tags of one Megatron run, from its flags (for the per-feature table)."""
    def flag(name):
        setting = extra.get("megatron." + name)
        return None if setting is None else setting.value

    par, tr = scenario.parallelism, scenario.training
    tags = ["local spec" if flag("transformer-impl") == "local" else "te spec"]
    if flag("num-experts"):
        tags.append("MoE")
    if flag("multi-latent-attention"):
        tags.append("MLA")
    if flag("fp8-format"):
        tags.append("fp8")
    if par.cp > 1:
        tags.append("CP")
    if par.sp:
        tags.append("SP")
    if flag("use-distributed-optimizer"):
        tags.append("dist-opt")
    if tr.recompute != "none":
        tags.append("recompute")
    if par.vpp > 1:
        tags.append("interleaved PP")
    elif par.pp > 1:
        tags.append("1F1B PP")
    if flag("mtp-num-layers"):
        tags.append("MTP")
    if tr.precision == "fp16":
        tags.append("fp16")
    return tags


def gpu_run(calib: str, record: dict, folder: str = GPU_DIR) -> dict:
    """One GPU record through the Megatron adapter and the memory model."""
    from memlint.adapters import megatron
    from memlint.facts.coverage import set_not_modeled
    from memlint.memory.estimate import EstimateError
    from memlint.memory.params import ConfigError

    path = os.path.join(calib, folder, record["config_file"])
    partial = megatron.load_path(path, entry=record["training_script"])
    cli = overrides_partial([f"world_size={record['world_size']}", f"gpu={record['gpu']}",
                             f"gpus_per_node={record['gpus_per_node']}"])
    scenario, diagnostics = build([partial, cli])
    row = {"id": record["case"], "family": record["family"], "measured": record["measured_bytes"],
           "after_step": record.get("allocated_after_step_bytes"),
           "feature": record.get("feature", ""),
           "not_modeled": [f.entry.key for f in set_not_modeled(scenario.extra)
                           if f.entry.scope == "gpu"]}
    errors = [d for d in diagnostics if d.severity.label == "error"]
    if errors:
        row["not_estimable"] = f"scenario error: {errors[0].message}"
        return row
    try:
        result = estimate(scenario)
    except (EstimateError, ConfigError) as exc:
        row["not_estimable"] = str(exc)
        return row
    last = result.stages[-1]
    optimizer_phase = next((p for p in last.phases if p.name == "optimizer"), None)
    persistent = sum(t.bytes for t in optimizer_phase.terms if t.component != "runtime") \
        if optimizer_phase is not None else 0
    row.update(predicted=last.allocated_bytes, phase=last.phase, persistent=persistent,
               error=relative(last.allocated_bytes, record["measured_bytes"]),
               features=gpu_features(scenario.extra, scenario),
               components=last.components())
    if row["after_step"]:
        row["state_error"] = relative(persistent, row["after_step"])
        # what the step adds on top of the persistent part: activations, logits, temporaries
        measured_act = record["measured_bytes"] - row["after_step"]
        row["activation_error"] = relative(last.allocated_bytes - persistent, measured_act) \
            if measured_act > 0 else 0.0
    return row


def gpu_rows(calib: str, folder: str = GPU_DIR) -> list:
    path = os.path.join(calib, folder, "records.json")
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        records = json.load(handle)
    return [gpu_run(calib, record, folder) for record in records]


def print_gpu_features(rows: list) -> None:
    """The feature cases, row by row, with the not-modeled settings ML107 names."""
    done = [r for r in rows if "error" in r]
    print(f"\nGPU features set (Megatron-LM CI cases of the features issue 26 models, 8 x H100; "
          f"checked, never fit): {len(done)} estimable of {len(rows)} records")
    for r in sorted(rows, key=lambda r: -abs(r.get("error", 0))):
        if "error" not in r:
            print(f"  {'-':>8}  {r['feature']:<38} {r['id'][:60]}  {r['not_estimable']}")
            continue
        flagged = ", ".join(r["not_modeled"]) or "-"
        print(f"  {r['error']:+8.2%}  state {r.get('state_error', 0):+7.2%}  {r['feature']:<38} "
              f"{r['id'][:60]}  not modeled: {flagged}")


def print_gpu(rows: list, worst: int) -> None:
    done = [r for r in rows if "error" in r]
    skipped = [r for r in rows if "not_estimable" in r]
    print(f"\nGPU set (Megatron-LM CI, 8 x H100; last stage allocated vs measured max allocated): "
          f"{len(done)} estimable of {len(rows)} records")
    header = f"{'group':<26}{'n':>4}{'median':>9}{'p90':>9}{'max':>9}{'signed med':>12}" \
             f"{'state med':>11}{'act med':>10}"
    print(header)

    def line(name, group):
        if not group:
            return
        med, p90, top = summarize([r["error"] for r in group])
        signed = statistics.median(r["error"] for r in group)
        states = [r["state_error"] for r in group if "state_error" in r]
        acts = [r["activation_error"] for r in group if "activation_error" in r]
        print(f"{name:<26}{len(group):>4}{med:>9.2%}{p90:>9.2%}{top:>9.2%}{signed:>+12.2%}"
              f"{statistics.median(states) if states else 0:>+11.2%}"
              f"{statistics.median(acts) if acts else 0:>+10.2%}")

    line("all estimable", done)
    print("per family:")
    for family in sorted({r["family"] for r in done}):
        line("  " + family, [r for r in done if r["family"] == family])
    print("per feature:")
    features = sorted({f for r in done for f in r["features"]})
    for feature in features:
        line("  " + feature, [r for r in done if feature in r["features"]])
    if skipped:
        print("not estimable:")
        for r in skipped:
            print(f"  {r['family']:<17} {r['id']:<62} {r['not_estimable']}")
    print(f"\nworst {worst} GPU records (signed error of the last stage; state = persistent part "
          f"vs allocated_after_step):")
    for r in sorted(done, key=lambda r: -abs(r["error"]))[:worst]:
        flagged = ", ".join(r["not_modeled"])
        print(f"  {r['error']:+8.2%}  state {r.get('state_error', 0):+7.2%}  "
              f"{r['family']:<17} {r['id'][:64]:<64} {r['phase']}"
              + (f"  not modeled: {flagged}" if flagged else ""))


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
    parser.add_argument("--only", choices=("cpu", "gpu", "published", "engine"))
    args = parser.parse_args(argv)
    calib = os.path.abspath(args.calibration)
    if args.only == "engine":
        return _engine(calib, args.json)
    if args.only == "published":
        rows = published_rows(calib)
        if args.json:
            print(json.dumps(rows, indent=1, default=str))
        else:
            print_published(rows)
        return 0
    if args.only == "gpu":
        rows, features = gpu_rows(calib), gpu_rows(calib, FEATURES_DIR)
        if args.json:
            print(json.dumps(rows + features, indent=1, default=str))
        else:
            print_gpu(rows, args.worst)
            print_gpu_features(features)
        return 0
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
    gpu = gpu_rows(calib) if args.only != "cpu" else []
    features = gpu_rows(calib, FEATURES_DIR) if args.only != "cpu" else []
    published = published_rows(calib) if args.only != "cpu" else []
    engine = engine_rows(calib) if args.only != "cpu" else []
    if args.json:
        print(json.dumps({"cpu": rows, "gpu": gpu, "gpu_features": features,
                          "published": published, "engine": engine}, indent=1, default=str))
        return 0
    med, p90, worst = summarize([r["error"] for r in rows])
    print(f"CPU set (transformers / FSDP2 steps on the CPU): records: {len(rows)}")
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
    if gpu:
        print_gpu(gpu, args.worst)
    if features:
        print_gpu_features(features)
    if published:
        print_published(published)
    if engine:
        print_engine(engine, fitted_constants(calib), PROFILES["precise"])
    return 0


def _engine(calib: str, as_json: bool) -> int:
    rows = engine_rows(calib)
    if as_json:
        print(json.dumps({"constants": fitted_constants(calib), "rows": rows}, indent=1))
    else:
        print_engine(rows, fitted_constants(calib), PROFILES["precise"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
