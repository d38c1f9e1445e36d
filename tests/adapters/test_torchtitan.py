"""torchtitan adapter: real TOMLs, registry files read statically, launch scripts."""
from __future__ import annotations

import glob
import os

import pytest

from memlint.adapters import torchtitan
from memlint.catalog import torchtitan as catalog
from memlint.diagnostics import Severity
from memlint.scenario import build

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(ROOT, "fixtures", "shared-real")
FIX = os.path.join(ROOT, "fixtures", "adapters", "torchtitan")
REAL_FILES = sorted(glob.glob(os.path.join(REAL, "torchtitan", "*.toml")))


def _load(path, **kw):
    return torchtitan.load(path, open(path, encoding="utf-8").read(), **kw)


def _values(partial):
    return {k: s.value for k, s in partial.settings.items()}


@pytest.mark.parametrize("path", REAL_FILES, ids=os.path.basename)
def test_every_real_toml_loads(path):
    text = open(path, encoding="utf-8").read()
    assert torchtitan.detect(path, text)
    partial = torchtitan.load(path, text)
    assert not [d for d in partial.diagnostics if d.severity == Severity.ERROR]
    scenario, diagnostics = build([partial])
    assert scenario.training.framework == "fsdp2"
    assert not [d for d in diagnostics if d.severity == Severity.ERROR], diagnostics


def test_llama3_70b_values_and_lines():
    path = os.path.join(REAL, "torchtitan",
                        "torchtitan__torchtitan-models-llama3-train_configs-llama3_70b.toml")
    partial = _load(path)
    values = _values(partial)
    assert values["micro_batch"] == 8 and values["seq_len"] == 8192
    assert values["tp"] == 8 and values["sp"] is True and values["dp_shard"] == -1
    assert values["recompute"] == "full" and values["fsdp"] == "full"
    assert values["reshard_after_forward"] is True and values["model"] == "torchtitan:llama3/70b"
    text = open(path).read().splitlines()
    for key, needle in (("micro_batch", "local_batch_size"), ("tp", "tensor_parallel_degree"),
                        ("recompute", "mode ="), ("model", "flavor")):
        line = partial.settings[key].prov.line
        assert needle in text[line - 1], (key, line)
    assert partial.extra["torchtitan.parallelism.tensor_parallel_degree"].value == 8
    assert partial.extra["recompute.scope"].value == "inside-unit"
    # torchtitan defaults are marked as such
    assert "torchtitan default" in partial.settings["optimizer_impl"].prov.key


def test_old_schema_degrees_under_training_and_experimental():
    path = os.path.join(REAL, "torchtitan", "torchtitan__train_configs-llama3_405b.toml")
    partial = _load(path)
    values = _values(partial)
    assert values["micro_batch"] == 2 and values["tp"] == 8 and values["pp"] == 1
    assert values["recompute"] == "full"
    assert partial.extra["fsdp.allgather_dtype_bytes"].value == 1  # float8 all-gather


def test_selective_every_n_and_unknown_flavor():
    path = os.path.join(REAL, "torchtitan",
                        "torchtitan__torchtitan-experiments-vlm-train_configs-debug_model.toml")
    partial = _load(path)
    assert _values(partial)["recompute_every"] == 2
    assert any(d.code == "ML007" and "vlm" in d.message for d in partial.diagnostics)


def test_flavor_widths_match_published_configs():
    assert catalog.lookup("llama3", "8B")["intermediate_size"] == 14336
    assert catalog.lookup("llama3", "70B")["intermediate_size"] == 28672
    assert catalog.lookup("llama3", "405B")["intermediate_size"] == 53248
    scout = catalog.lookup("llama4", "17bx16e")
    assert scout["intermediate_size"] == 8192 and scout["intermediate_size_mlp"] == 16384


def test_registry_read_statically_with_derived_config():
    path = os.path.join(FIX, "good", "llama3", "config_registry.py")
    partial = _load(path)  # three configs, none selected: info only
    assert not partial.settings
    assert any("defines 3 configs" in d.message for d in partial.diagnostics)
    partial = _load(path, select="llama3_70b_long")
    values = _values(partial)
    assert values["seq_len"] == 32768 and values["cp"] == 4 and values["tp"] == 8
    assert values["micro_batch"] == 8 and values["recompute"] == "full"
    assert values["model"] == "torchtitan:llama3/70b"  # from the package directory
    line = partial.settings["seq_len"].prov.line
    assert "32768" in open(path).read().splitlines()[line - 1]


def test_registry_non_literal_is_unresolved_info():
    path = os.path.join(FIX, "good", "llama3", "config_registry.py")
    partial = _load(path, select="llama3_70b_tuned")
    infos = [d for d in partial.diagnostics if d.code == "ML007"]
    assert any("compute_batch()" in d.message for d in infos)
    assert _values(partial)["micro_batch"] == 8


def test_registry_is_never_executed(tmp_path):
    marker = tmp_path / "executed"
    path = tmp_path / "config_registry.py"
    path.write_text(
        "import torchtitan\nopen(%r, 'w').write('x')\n"
        "def cfg() -> Trainer.Config:\n"
        "    return Trainer.Config(training=TrainingConfig(seq_len=__import__('os').getpid()))\n"
        % str(marker))
    partial = torchtitan.load(str(path), path.read_text())
    assert not marker.exists()
    assert partial.settings["seq_len"].value == 2048  # torchtitan default, not the pid
    assert any(d.code == "ML007" and "seq_len" in d.message for d in partial.diagnostics)


def test_launch_script_overrides_config_file(tmp_path):
    (tmp_path / "job.toml").write_text("[training]\nlocal_batch_size = 4\nseq_len = 4096\n"
                                       "[parallelism]\ntensor_parallel_degree = 2\n")
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\nNGPU=4 CONFIG_FILE=./job.toml ./run_train.sh \\\n"
                      "  --parallelism.tensor_parallel_degree 4 --training.seq_len=8192\n")
    partial = torchtitan.load(str(script), script.read_text())
    values = _values(partial)
    assert values["world_size"] == 4 and values["gpus_per_node"] == 4
    assert values["tp"] == 4 and values["seq_len"] == 8192 and values["micro_batch"] == 4
    assert partial.settings["tp"].prov.file == str(script)
    assert partial.settings["tp"].prov.line == 3
    assert partial.settings["micro_batch"].prov.file.endswith("job.toml")
    assert str(tmp_path / "job.toml") in partial.references


def test_script_unresolved_variable(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node=8 -m torchtitan.train "
                      "--parallelism.tensor_parallel_degree $TP\n")
    partial = torchtitan.load(str(script), script.read_text())
    assert "tp" not in partial.settings
    assert any(d.code == "ML007" and "$TP" in d.message for d in partial.diagnostics)


def test_bad_values_are_diagnostics_with_positions():
    partial = _load(os.path.join(FIX, "bad", "bad_values.toml"))
    found = {(d.code, d.line) for d in partial.diagnostics}
    assert ("ML004", 7) in found   # local_batch_size = 0
    assert ("ML004", 11) in found  # data_parallel_shard_degree = -2
    assert ("ML004", 12) in found  # fsdp_reshard_after_forward = "sometimes"


def test_syntax_error_is_a_diagnostic():
    partial = _load(os.path.join(FIX, "bad", "broken.toml"))
    errors = [d for d in partial.diagnostics if d.code == "ML001"]
    assert errors and errors[0].line == 3


def test_detect_rejects_pyproject():
    assert not torchtitan.detect("pyproject.toml", "[project]\nname='x'\n[tool.memlint]\n")


# Issue 27 class 5: torchtitan's own config_registry.py at b5bcd76 (fixtures/real-world,
# SOURCES.md), the format since early 2026: `model_spec = model_registry("8B")` bound to a name
# first, token slots per microbatch (TrainingConfig in torchtitan/config/configs.py) in place of
# local_batch_size / seq_len, and activation-checkpointing policies as classes
# (torchtitan/distributed/activation_checkpoint.py).
REGISTRY = os.path.join(ROOT, "fixtures", "real-world", "pytorch__torchtitan", "torchtitan",
                        "models", "llama3", "config_registry.py")


def test_real_registry_model_registry_through_a_local_name():
    partial = _load(REGISTRY, select="llama3_8b")
    got = _values(partial)
    assert got["model"] == "torchtitan:llama3/8b"   # was "model_registry('8B') is not a literal"
    assert not [d for d in partial.diagnostics if "not a literal" in d.message]


def test_real_registry_token_slots_are_the_microbatch():
    # llama3_8b: num_tokens_per_microbatch_per_dp_rank = 1 * 8192, max_context_length = 8192
    got = _values(_load(REGISTRY, select="llama3_8b"))
    assert (got["micro_batch"], got["seq_len"]) == (1, 8192)
    # llama3_70b: 8 * 8192 token slots in rows of 8192, tensor parallel 8
    got = _values(_load(REGISTRY, select="llama3_70b"))
    assert (got["micro_batch"], got["seq_len"], got["tp"]) == (8, 8192, 8)


def test_real_registry_activation_checkpointing_policies():
    # llama3_8b passes SelectiveAC.Config() (per-op SAC, no layer interval); llama3_70b FullAC
    partial = _load(REGISTRY, select="llama3_8b")
    assert _values(partial)["recompute"] == "selective"
    assert "recompute_every" not in partial.settings
    assert _values(_load(REGISTRY, select="llama3_70b"))["recompute"] == "full"


def test_real_registry_alone_names_why_it_has_no_verdict(capsys):
    from memlint.cli import main
    assert main(["check", REGISTRY]) == 0
    out = capsys.readouterr().out
    assert "defines 14 configs" in out
    assert "(1 a value known only when the script runs)" in out
