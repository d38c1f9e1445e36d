"""The `compile` scenario key: read from torchtitan's [compile] enable, recorded with where it
came from, and reported as not modeled (memory/compile.py)."""
from __future__ import annotations

import os


from memlint.adapters import torchtitan
from memlint.memory.compile import NOTE
from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(ROOT, "fixtures", "shared-real", "torchtitan")
LLAMA405 = os.path.join(REAL, "torchtitan__torchtitan-models-llama3-train_configs-llama3_405b.toml")
LLAMA70 = os.path.join(ROOT, "fixtures", "adapters", "torchtitan", "good", "llama3_70b.toml")
LLAMA8B = os.path.join(ROOT, "fixtures", "hf", "Meta-Llama-3.1-8B.json")


def _load(path):
    return torchtitan.load(path, open(path, encoding="utf-8").read())


def test_torchtitan_compile_enable_is_recorded():
    partial = _load(LLAMA405)
    setting = partial.settings["compile"]
    assert setting.value is True and setting.prov.line is not None


def test_torchtitan_compile_disabled():
    partial = _load(LLAMA70)
    assert partial.settings["compile"].value is False


def test_compile_changes_no_bytes_and_says_so():
    sets = ["framework=fsdp2", "fsdp=full", "world_size=8", "seq_len=2048"]
    plain = estimate(build([overrides_partial(sets, model=LLAMA8B)])[0])
    scenario, _ = build([overrides_partial(sets + ["compile=true"], model=LLAMA8B)])
    assert scenario.training.compile is True and scenario.is_set("compile")
    compiled = estimate(scenario)
    assert compiled.peak_bytes == plain.peak_bytes
    assert NOTE in compiled.notes and NOTE not in plain.notes
