"""Build bench/data/calibration/gpu-megatron-ci-features/ from a Megatron-LM git directory.

The Megatron-LM CI cases that exercise what issue 26 models (fine-grained activation offloading,
distributed-optimizer instances, CUDA graphs, tensor-parallel communication overlap, Muon) and
that gpu-megatron-ci does not hold: each case's `model_config.yaml` byte for byte and one record
per case, read from `golden_values_dev_dgx_h100.json` with gpu-megatron-ci's steady-state rule
(the peak of `mem-max-allocated-bytes` up to and including the first checkpoint save or the last
training iteration, whichever comes first). Every case runs on one 8-GPU DGX H100 node
(tests/test_utils/recipes/h100/*.yaml spec: nodes 1, gpus 8).

    python tools/megatron_ci_features.py GIT_DIR [--commit SHA]

Reads the git directory with `git show` only; writes the folder atomically file by file.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "data", "calibration", "gpu-megatron-ci-features")
CASES = {   # case -> (family, training script, the feature it exercises)
    "gpt3_mcore_te_tp2_pp1_resume_torch_dist_multi_dist_optimizer_instances":
        ("gpt", "pretrain_gpt.py", "--num-distributed-optimizer-instances"),
    "gpt3_mcore_te_tp2_pp1_resume_torch_dist_te_8experts2parallel_multi_dist_optimizer_instances":
        ("moe", "pretrain_gpt.py", "--num-distributed-optimizer-instances"),
    "gpt3_moe_mcore_te_tp2_pp2_ep4_etp1_fine_grained_offloading":
        ("moe", "pretrain_gpt.py", "--fine-grained-activation-offloading"),
    "gpt3_moe_mcore_te_tp2_pp2_ep4_etp1_no_mtp_no_a2a_ovlp_fine_grained_offloading":
        ("moe", "pretrain_gpt.py", "--fine-grained-activation-offloading"),
    "gpt3_mcore_te_tp2_pp2_ep4_etp1_resume_torch_dist_attn_cudagraph":
        ("moe", "pretrain_gpt.py", "--cuda-graph-impl"),
    "gpt3_moe_mcore_te_tp4_ep2_etp2_pp2_scoped_cudagraph":
        ("moe", "pretrain_gpt.py", "--cuda-graph-impl"),
    "gpt3_weekly_mcore_tp2_pp2_current_scaling_native_fp8_tp_pp_sp_tp_overlap":
        ("gpt", "pretrain_gpt.py", "--tp-comm-overlap"),
    "gpt3_moe_mcore_te_ep8_resume_torch_dist_dist_muon":
        ("moe", "pretrain_gpt.py", "--optimizer dist_muon"),
    "gpt3_moe_mcore_te_ep8_resume_torch_dist_muon":
        ("moe", "pretrain_gpt.py", "--optimizer muon"),
}
GOLDEN = "golden_values_dev_dgx_h100.json"


def show(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def last_commit(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "log", "-1", "--format=%h %cs %s",
                           commit, "--", path], check=True, capture_output=True,
                          text=True).stdout.strip()


def window(args: dict, iterations: list) -> tuple:
    """[first, last] iteration of the steady-state window (gpu-megatron-ci/README.md)."""
    last = iterations[-1]
    for flag in ("--train-iters", "--exit-interval"):
        if isinstance(args.get(flag), int):
            last = min(last, args[flag])
    interval = args.get("--save-interval")
    if args.get("--save") and isinstance(interval, int) and interval > 0:
        last = min(last, interval)
    return iterations[0], last


def record(git_dir: str, commit: str, case: str) -> tuple:
    family, script, feature = CASES[case]
    folder = f"tests/functional_tests/test_cases/{family}/{case}"
    config_text = show(git_dir, commit, f"{folder}/model_config.yaml")
    golden = json.loads(show(git_dir, commit, f"{folder}/{GOLDEN}"))
    args = yaml.safe_load(config_text)["MODEL_ARGS"]
    peaks = {int(k): int(v) for k, v in golden["mem-max-allocated-bytes"]["values"].items()
             if v == v}
    after = {int(k): int(v) for k, v in golden["mem-allocated-bytes"]["values"].items()
             if v == v}
    iterations = sorted(peaks)
    first, last = window(args, iterations)
    used = [i for i in iterations if first <= i <= last]
    config_file = f"configs/{family}__{case}.yaml"
    return config_file, config_text, {
        "case": case, "family": family, "feature": feature,
        "source": f"NVIDIA/Megatron-LM@{commit[:10]} {folder}",
        "gpu": "H100-80GB", "world_size": 8, "nodes": 1, "gpus_per_node": 8,
        "world_size_source": "tests/test_utils/recipes/h100 spec (nodes 1, gpus 8)",
        "metric": "max_allocated_last_rank",
        "measured_bytes": max(peaks[i] for i in used),
        "series_window": [first, last],
        "first_iteration_bytes": peaks[iterations[0]],
        "allocated_after_step_bytes": after.get(last),
        "training_script": script,
        "values_recorded_in": last_commit(git_dir, commit, f"{folder}/{GOLDEN}"),
        "config_file": config_file,
    }


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir")
    parser.add_argument("--commit", default="d98e8a64ddf34856e74b24714e3bedb2f5a39553")
    opts = parser.parse_args(argv)
    records = []
    for case in CASES:
        config_file, text, rec = record(opts.git_dir, opts.commit, case)
        write(os.path.join(OUT, config_file), text)
        records.append(rec)
    write(os.path.join(OUT, "records.json"), json.dumps(records, indent=1) + "\n")
    print(f"{len(records)} records written to {os.path.relpath(OUT, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
