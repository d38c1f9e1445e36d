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


def test_compile_changes_the_loss_and_says_so():
    """torchtitan's compile.components default ["model", "loss"]: the compiled loss keeps the
    bf16 logits (2 B) and writes their bf16 gradient (2 B) where the eager loss holds three fp32
    buffers (12 B) at the start of the backward (memory/compile.py, logits.compiled_loss_term);
    with compile_loss=false the loss is eager as before."""
    sets = ["framework=fsdp2", "fsdp=full", "world_size=8", "seq_len=2048"]
    plain = estimate(build([overrides_partial(sets, model=LLAMA8B)])[0])
    scenario, _ = build([overrides_partial(sets + ["compile=true"], model=LLAMA8B)])
    assert scenario.training.compile is True and scenario.is_set("compile")
    compiled = estimate(scenario)
    eager_logits = plain.stages[0].term("logits")
    vocab, tokens = 128256, 2048
    assert eager_logits.bytes == 12 * vocab * tokens
    phase = next(p for p in compiled.stages[0].phases if p.name == "backward_start")
    logits = next(t for t in phase.terms if t.name == "logits")
    assert logits.bytes == 4 * vocab * tokens and "compiled loss" in logits.formula
    assert NOTE in compiled.notes and NOTE not in plain.notes
    assert {"key": "compile.loss_saved", "value": "logits"}.items() <= \
        next(a for a in compiled.assumed if a["key"] == "compile.loss_saved").items()
    model_only, _ = build([overrides_partial(sets + ["compile=true", "compile_loss=false"],
                                             model=LLAMA8B)])
    eager_loss = estimate(model_only)
    assert eager_loss.stages[0].term("logits").bytes == eager_logits.bytes
    assert not [a for a in eager_loss.assumed if a["key"] == "compile.loss_saved"]
    # the loss alone (torchtitan compile.components = ["loss"]): the compiled loss's terms,
    # the blocks' eager ones, and no compile note about blocks
    loss_only = estimate(build([overrides_partial(sets + ["compile_loss=true"],
                                                  model=LLAMA8B)])[0])
    phase = next(p for p in loss_only.stages[0].phases if p.name == "backward_start")
    assert next(t for t in phase.terms if t.name == "logits").bytes == 4 * vocab * tokens
    assert NOTE not in loss_only.notes
    assert [a["key"] for a in loss_only.assumed if a["key"].startswith("compile.")] == \
        ["compile.loss_saved"]