"""accelerate adapter (and the axolotl reader): real configs, accelerate's own refusals."""
from __future__ import annotations

import glob
import os

import pytest

from memlint.adapters import accelerate, axolotl, torchtitan
from memlint.diagnostics import Severity
from memlint.scenario import build

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(ROOT, "fixtures", "shared-real")
FIX = os.path.join(ROOT, "fixtures", "adapters", "accelerate")
YAMLS = sorted(glob.glob(os.path.join(REAL, "*", "*.y*ml")))
ACCELERATE = [p for p in YAMLS if accelerate.detect(p, open(p, errors="replace").read())]
DELIBERATE = {"accelerate__tests-test_configs-invalid_keys.yaml"}  # SOURCES.md: known mistake


def _load(path):
    return accelerate.load(path, open(path, encoding="utf-8").read())


def _values(partial):
    return {k: s.value for k, s in partial.settings.items()}


def test_detection_over_all_real_yaml():
    for path in YAMLS:
        text = open(path, errors="replace").read()
        category = os.path.basename(os.path.dirname(path))
        expected = category == "accelerate" or (category == "fsdp"
                                                and "distributed_type:" in text)
        assert accelerate.detect(path, text) == expected, path
        assert axolotl.detect(path, text) == (category == "axolotl"), path
        assert not torchtitan.detect(path, text), path


@pytest.mark.parametrize("path", ACCELERATE, ids=os.path.basename)
def test_every_real_accelerate_yaml_loads(path):
    partial = _load(path)
    errors = [d for d in partial.diagnostics if d.severity == Severity.ERROR]
    if os.path.basename(path) in DELIBERATE:
        assert {d.line for d in errors} == {14, 15}
    else:
        assert not errors, errors
    scenario, diagnostics = build([partial])
    assert not [d for d in diagnostics if d.severity == Severity.ERROR
                and os.path.basename(path) not in DELIBERATE]


@pytest.mark.parametrize("path", [p for p in YAMLS if "/axolotl/" in p], ids=os.path.basename)
def test_every_real_axolotl_yaml_loads(path):
    partial = axolotl.load(path, open(path, encoding="utf-8").read())
    assert not [d for d in partial.diagnostics if d.severity == Severity.ERROR]
    build([partial])


def test_tp_hsdp_values_and_lines():
    path = os.path.join(FIX, "good", "tp_hsdp.yaml")
    partial = _load(path)
    values = _values(partial)
    assert values == {**values, "framework": "fsdp2", "world_size": 8, "precision": "bf16",
                      "reshard_after_forward": True, "fsdp": "hybrid", "dp_replicate": 2,
                      "dp_shard": 2, "tp": 2, "cp": 1}
    lines = open(path).read().splitlines()
    for key, needle in (("world_size", "num_processes"), ("tp", "tp_size"),
                        ("reshard_after_forward", "fsdp_reshard_after_forward")):
        prov = partial.settings[key].prov
        assert needle in lines[prov.line - 1] and prov.column >= 1
    assert partial.extra["accelerate.fsdp_version"].value == 2


def test_fsdp1_reshard_key_is_not_read():
    partial = _load(os.path.join(FIX, "good", "fsdp1.yaml"))
    assert _values(partial)["fsdp"] == "full"
    assert any(d.code == "ML007" and "FSDP_SHARDING_STRATEGY" in d.message
               for d in partial.diagnostics)
    assert not [d for d in partial.diagnostics if d.severity >= Severity.WARNING]


def test_fsdp2_refusals_with_positions():
    partial = _load(os.path.join(FIX, "bad", "fsdp2-rejected.yaml"))
    found = {(d.code, d.severity.label, d.line) for d in partial.diagnostics}
    assert ("ML004", "error", 6) in found    # reshard_after_forward not a bool under FSDP2
    assert ("ML007", "warning", 7) in found  # forward_prefetch ignored under FSDP2
    assert ("ML004", "error", 8) in found    # unknown auto-wrap policy
    assert ("ML004", "error", 10) in found   # efficient loading without sync_module_states
    assert ("ML003", "error", 14) in found   # unknown top-level key
    assert "reshard_after_forward" not in partial.settings


def test_deepspeed_file_and_inline_keys():
    partial = _load(os.path.join(FIX, "bad", "deepspeed-file-and-inline.yaml"))
    errors = {(d.line, d.key) for d in partial.diagnostics if d.severity == Severity.ERROR}
    assert (6, "deepspeed_config.zero_stage") in errors
    assert (7, "deepspeed_config.gradient_accumulation_steps") in errors
    assert partial.references == [os.path.join(FIX, "bad", "ds_zero3.json")]
    assert _values(partial)["zero"] == 3 and _values(partial)["framework"] == "deepspeed"


def test_reference_outside_repository_is_not_followed(tmp_path):
    (tmp_path / ".git").mkdir()
    sub = tmp_path / "configs"
    sub.mkdir()
    path = sub / "acc.yaml"
    path.write_text("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                    "  deepspeed_config_file: ../../outside.json\n")
    partial = accelerate.load(str(path), path.read_text())
    # recorded, so that --allow-outside-root can follow it; load_with_references refuses it
    assert partial.references == [str(tmp_path.parent / "outside.json")]
    from memlint.adapters.registry import load_with_references

    loaded = load_with_references(str(path))
    assert [p.source for p in loaded] == [str(path)]
    assert any("outside the repository root" in d.message for d in loaded[-1].diagnostics)
    path.write_text("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                    "  deepspeed_config_file: ../ds/z3.json\n")
    partial = accelerate.load(str(path), path.read_text())
    assert partial.references == [str(tmp_path / "ds" / "z3.json")]


def test_numeric_sharding_strategy_and_offload(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("distributed_type: FSDP\nnum_processes: 16\nnum_machines: 2\n"
                    "fsdp_config:\n  fsdp_sharding_strategy: 4\n  fsdp_offload_params: true\n")
    values = _values(accelerate.load(str(path), path.read_text()))
    assert values["fsdp"] == "hybrid" and values["gpus_per_node"] == 8
    assert values["offload_params"] == "cpu" and values["offload_optimizer"] == "cpu"


def test_both_precisions_set_flags(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\nfp16: true\n"
                    "mixed_precision: bf16\n")
    partial = accelerate.load(str(path), path.read_text())
    assert partial.extra["flags.fp16"].value is True and partial.extra["flags.bf16"].value
    assert _values(partial)["precision"] == "amp-bf16"
    path.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: bf16\n")
    assert "flags.fp16" not in accelerate.load(str(path), path.read_text()).extra


def test_garbage_never_raises(tmp_path):
    for text in ("distributed_type: [\n", "- a\n- b\n", "distributed_type: FSDP\nfsdp_config: 3\n",
                 "distributed_type: !!python/object:os.system x\n", ""):
        path = tmp_path / "x.yaml"
        path.write_text(text)
        accelerate.load(str(path), text)
        axolotl.load(str(path), text)


def test_suppressions_are_collected(tmp_path):
    path = tmp_path / "a.yaml"
    text = "distributed_type: FSDP  # memlint: disable=ML505\nnum_processes: 8\n"
    path.write_text(text)
    assert accelerate.load(str(path), text).suppressions == {1: {"ml505"}}


def test_sequence_parallel_size_counts_in_the_world_and_applies_to_deepspeed():
    """trl's ALST/Ulysses config (fixtures/adapters/SOURCES.md): DeepSpeed ZeRO-3 on 4 GPUs with
    parallelism_config_sp_size 2 and dp_shard_size 2. accelerate's ParallelismConfig.total_size
    multiplies sp in (parallelism_config.py) and utils/launch.py exports the parallelism config
    for DeepSpeed launches too. Before: a false ML502 (2 of 4 GPUs) and a warning that the
    config only works under FSDP2."""
    from memlint.engine import lint
    from memlint.memory.estimate import estimate
    from memlint.scenario import overrides_partial

    path = os.path.join(FIX, "good", "alst_ulysses_4gpu-sp.yaml")
    partial = _load(path)
    values = _values(partial)
    assert values["cp"] == 2 and values["world_size"] == 4 and values["framework"] == "deepspeed"
    assert "dp_shard" not in values  # ZeRO shards over DeepSpeed's own group, not this axis
    line = open(path).read().splitlines()[partial.settings["cp"].prov.line - 1]
    assert "parallelism_config_sp_size" in line
    assert not [d for d in partial.diagnostics if "parallelism_config" in d.message]
    scenario, pre = build([partial, overrides_partial(["model=llama3-8b"])])
    found = lint(scenario, estimate(scenario), pre=pre, formats=("accelerate",))
    assert not [d for d in found if d.code == "ML502" or d.severity == Severity.ERROR], found


def test_context_and_sequence_parallel_together_are_refused(tmp_path):
    path = tmp_path / "a.yaml"
    text = ("distributed_type: DEEPSPEED\nnum_processes: 8\nparallelism_config:\n"
            "  parallelism_config_cp_size: 2\n  parallelism_config_sp_size: 2\n")
    path.write_text(text)
    partial = accelerate.load(str(path), text)
    [error] = [d for d in partial.diagnostics if d.severity == Severity.ERROR]
    assert "refuses context and sequence parallelism together" in error.message
    assert error.line == 5


def test_yaml_no_distributed_type_and_sagemaker_types(tmp_path):
    """accelerate tests/test_configs/0_30_0_sagemaker.yaml writes `distributed_type: NO`, which
    YAML 1.1 reads as false: accelerate keeps it (only strings are converted) and launches no
    distributed backend. SageMaker configs take SageMakerDistributedType values."""
    path = tmp_path / "a.yaml"
    text = ("compute_environment: AMAZON_SAGEMAKER\ndistributed_type: NO\nmixed_precision: fp16\n"
            "ec2_instance_type: MY_TYPE\niam_role_name: MY_ROLE\n")
    path.write_text(text)
    partial = accelerate.load(str(path), text)
    assert not [d for d in partial.diagnostics if d.severity == Severity.ERROR]
    text = text.replace("distributed_type: NO", "distributed_type: DATA_PARALLEL")
    assert not [d for d in accelerate.load(str(path), text).diagnostics
                if d.severity == Severity.ERROR]
    text = text.replace("DATA_PARALLEL", "FSDP2")
    assert [d.line for d in accelerate.load(str(path), text).diagnostics
            if d.severity == Severity.ERROR] == [2]
