"""The fast paths of a bulk `check DIR` (issue 29) give what the slow paths give, on real files.

Each fast path is turned off here (monkeypatched back to the computation it spares) and the whole
JSON report of `memlint check --format json` on real folders of the corpus must be the same byte
for byte: RL roles that reuse the run's architecture and counts, saved bytes per token computed
once per stage, a directory walk's detection kept for loading, a document's top-level keys
computed once per text, the [tool.memlint] settings made once per pyproject.toml.
"""
from __future__ import annotations

import contextlib
import io
import os

import pytest

from memlint import api
from memlint.adapters import _toplevel, registry
from memlint.cli import main
from memlint.memory import stage_activations
from memlint.memory.rl import roles

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# RL pairs (verl, OpenRLHF with a critic, EasyR1), verl's tuning recipes, Megatron-LM CI runs
# with pipeline stages, HF Trainer / LLaMA-Factory YAML, DeepSpeed JSON
FOLDERS = ["fixtures/rl-pairs", "fixtures/real-world/volcengine__verl/examples/tuning",
           "fixtures/megatron-ci", "fixtures/real-world/hiyouga__LLaMA-Factory/examples/train_lora",
           "fixtures/adapters/deepspeed/good", "fixtures/rules/ML011-unused-suppression"]


def _report(*argv) -> str:
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(["check", *argv, "--format", "json"])
    finally:
        os.chdir(cwd)
    return out.getvalue()


def _slow(monkeypatch) -> None:
    """Every fast path of this file off."""
    trained = roles.trained_role

    def without_context(*args, context=None, **kwargs):
        return trained(*args, **kwargs)

    monkeypatch.setattr("memlint.memory.rl.plan.trained_role", without_context)

    def every_time(model, plan, recompute, per_layer=None):
        layers: list = []
        total, seen = stage_activations._layer_bytes_per_token(model, plan, layers)
        if per_layer is not None:
            per_layer.extend(layers)
        return total, seen

    monkeypatch.setattr(stage_activations, "layer_bytes_per_token", every_time)
    monkeypatch.setattr(registry, "_detected", registry.detect_format)
    monkeypatch.setattr(_toplevel, "top_level_keys", _toplevel._top_level_keys)
    monkeypatch.setattr(api, "_configs_by_folder",
                        lambda options: lambda path: api.lint_config(options, path))


@pytest.mark.parametrize("folder", FOLDERS)
def test_fast_paths_report_what_the_slow_paths_report(folder, monkeypatch):
    assert os.path.isdir(os.path.join(ROOT, folder))
    fast = _report(folder)
    with monkeypatch.context() as patch:
        _slow(patch)
        slow = _report(folder)
    assert fast == slow
    assert '"estimates"' in fast


def test_top_level_keys_once_per_text():
    texts = []
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, folder)):
            for name in sorted(names):
                with open(os.path.join(dirpath, name), encoding="utf-8") as handle:
                    texts.append(handle.read())
    assert len(texts) > 20
    for text in texts + texts[::-1]:
        assert _toplevel.top_level_keys(text) == _toplevel._top_level_keys(text)
        assert _toplevel.top_level_keys(text) == _toplevel._top_level_keys(text)


def test_detection_kept_only_for_the_same_text(tmp_path, monkeypatch):
    path = str(tmp_path / "train.yaml")
    text = "base_model: meta-llama/Llama-3.1-8B\nmicro_batch_size: 1\nsequence_len: 2048\n"
    other = "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nnum_processes: 8\n"
    registry.forget_detected()
    module = registry.detect_remembered(path, text)
    assert module is not None and module is registry.detect_format(path, text)
    # the file changed after the walk: detected again, on its new text
    assert registry._detected(path, other) is registry.detect_format(path, other) is not module
    assert path not in registry._DETECTED
    registry.detect_remembered(path, text)
    with monkeypatch.context() as patch:
        patch.setattr(registry, "detect_format", None)   # the same text: not detected again
        assert registry._detected(path, text) is module
    registry.forget_detected()


def test_project_settings_once_per_pyproject(tmp_path):
    """A folder's pyproject.toml [tool.memlint] governs each file in it, as lint_config reads it."""
    (tmp_path / "pyproject.toml").write_text('[tool.memlint]\nignore = ["ML603"]\n')
    (tmp_path / "sub").mkdir()
    options = api.Options()
    config_of = api._configs_by_folder(options)
    for path in (tmp_path / "a.json", tmp_path / "sub" / "b.yaml", tmp_path / "sub"):
        assert config_of(str(path)) == api.lint_config(options, str(path))
    # one pyproject.toml governs both folders: one LintConfig
    assert config_of(str(tmp_path / "a.json")) is config_of(str(tmp_path / "sub" / "c.json"))
    assert config_of(str(tmp_path / "a.json")).ignore == ("ML603",)
