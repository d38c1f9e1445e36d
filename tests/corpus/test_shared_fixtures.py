"""Every file of fixtures/shared-real (the team's first real configs, SOURCES.md beside them)
reads without a crash or a false error.

Each file is checked alone, as `memlint check FILE` would. The few that their framework refuses at
the pinned commit are listed with the error codes expected and the framework line that refuses
them; every other file must exit 0 with no error-level diagnostic.
"""
from __future__ import annotations

import contextlib
import io
import json
import os


from memlint.cli import main

INTERNAL = "ML009"  # internal-error: a crash caught by the pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(ROOT, "fixtures", "shared-real")

# file -> (error codes, why the framework refuses it)
INVALID = {
    "deepspeed-invalid/DeepSpeedExamples__compression-bert-config-ds_config_TEMPLATE.json":
        (["ML002", "ML002"], "a template with BATCH_SIZE_PER_GPU placeholders: DeepSpeedConfig's "
                             "hjson.load reads them as strings, which the batch assertion and "
                             "the pydantic models refuse"),
    "deepspeed-invalid/DeepSpeedExamples__training-data_efficiency-gpt_finetuning-finetune-"
    "ds_config_gpt2_TEMPLATE.json":
        (["ML002", "ML002"], "a template with GB_SIZE placeholders: strings where DeepSpeed "
                             "needs numbers (runtime/config.py _batch_assertion)"),
    "accelerate/accelerate__tests-test_configs-invalid_keys.yaml":
        (["ML003", "ML003"], "accelerate's own test of a refused file: BaseConfig.from_yaml_file "
                             "raises 'had unknown keys'"),
    "deepspeed/DeepSpeedExamples__megatron-Megatron-LM-v1.1.5-ZeRO3-examples-"
    "ds_zero_stage_infinity_config.json":
        (["ML003"], "stage3_param_persitence_threshold (a typo): DeepSpeedZeroConfig forbids "
                    "extra keys (runtime/config_utils.py)"),
    "megatron/Megatron-LM__examples-gpt3-gpt_config.yaml":
        (["ML406"], "step_batch_size_schedule with global_batch_size: yaml_arguments.py raises "
                    "'Cannot specify both' (Megatron-LM d98e8a6)"),
    "megatron-args/gpt3_175b_distributed.txt":
        (["ML406", "ML201"], "--step-batch-size-schedule with --global-batch-size (arguments.py "
                             "raises), and 8 GPUs for tp 8 x pp 16 (SOURCES.md notes it)"),
}


def _files() -> list:
    out = []
    for directory, _dirs, names in os.walk(SHARED):
        out.extend(os.path.relpath(os.path.join(directory, name), SHARED)
                   for name in names if not name.endswith(".md"))
    return sorted(out)


FILES = _files()


def test_every_listed_invalid_file_exists():
    assert set(INVALID) <= set(FILES)


def _errors(name: str) -> tuple:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["check", os.path.join(SHARED, name), "--format", "json"])
    diagnostics = json.loads(out.getvalue())["diagnostics"]
    internal = [d for d in diagnostics if d["code"] == INTERNAL]
    return code, sorted(d["code"] for d in diagnostics if d["severity"] == "error"), internal


def test_shared_real_configs_have_no_false_error():
    """One test over all files (a parametrized test per file costs more than the checks)."""
    wrong = []
    for name in FILES:
        code, found, internal = _errors(name)
        expected = sorted(INVALID.get(name, ([], ""))[0])
        if internal or found != expected or code != (1 if expected else 0):
            wrong.append(f"{name}: exit {code}, errors {found}, expected {expected}"
                         + (f", internal error {internal[0]['message']}" if internal else ""))
    assert not wrong, "\n".join(wrong)
