"""`loop.held_logits`: the logits a training loop's `outputs` still holds through the backward and
the optimizer step (memory/logits.py held_logits_terms). The HF Trainer drops them (compute_loss
returns the loss only); a loop that keeps `outputs = model(**batch)` (DeepSpeed-Chat's step 1)
holds them in the dtype the model returns: fp32 where transformers' LlamaForCausalLM upcasts them
in its forward (transformers@0022728), else the compute dtype."""
from __future__ import annotations

from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

BASE = ["zero=3", "world_size=8", "precision=bf16", "micro_batch=2", "seq_len=2048",
        "recompute=full"]
NAME = "logits.loop_outputs"


def _estimate(*sets):
    scenario, diagnostics = build([overrides_partial(list(sets), model="llama3-8b")])
    assert not [d for d in diagnostics if d.severity.label == "error"]
    return estimate(scenario)


def _phases(est):
    return {p.name: {t.name: t for t in p.terms} for p in est.stages[0].phases}


def test_held_logits_are_counted_in_every_phase_in_their_dtype():
    vocab, tokens = 128256, 2 * 2048
    fp32 = _phases(_estimate("framework=deepspeed", *BASE, "loop.held_logits=fp32"))
    for phase in ("forward_end", "backward_start", "backward_recompute", "optimizer"):
        term = fp32[phase][NAME]
        assert term.bytes == 4 * vocab * tokens, phase
        assert term.component == "logits"
        assert "modeling_llama.py" in term.source and "DeepSpeed-Chat" in term.source
    compute = _phases(_estimate("framework=deepspeed", *BASE, "loop.held_logits=compute"))
    assert compute["backward_start"][NAME].bytes == 2 * vocab * tokens
    for sets in (("framework=deepspeed", *BASE), ("framework=deepspeed", *BASE,
                                                   "loop.held_logits=none")):
        assert all(NAME not in terms for terms in _phases(_estimate(*sets)).values()), sets


def test_the_held_logits_raise_the_peak_by_their_bytes():
    without = _estimate("framework=deepspeed", *BASE, "loop.held_logits=none")
    held = _estimate("framework=deepspeed", *BASE, "loop.held_logits=fp32")
    peak = held.stages[0]
    assert peak.phase == without.stages[0].phase
    assert peak.allocated_bytes - without.stages[0].allocated_bytes == peak.term(NAME).bytes


def test_the_default_is_printed_where_memlint_cannot_see_the_loop():
    """framework=deepspeed: the user's own loop, so the default (none, the HF Trainer's) is an
    assumption the estimate names; a given value, the HF Trainer and Megatron's loss need none."""
    def assumed(*sets):
        return {a["key"]: a for a in _estimate(*sets).assumed}

    entry = assumed("framework=deepspeed", *BASE)["loop.held_logits"]
    assert entry["value"].startswith("none")
    assert "compute_loss" in entry["source"]
    for sets in (("framework=deepspeed", *BASE, "loop.held_logits=none"),
                 ("framework=hf", *BASE), ("framework=megatron", "world_size=8",
                                           "micro_batch=1", "seq_len=2048")):
        assert "loop.held_logits" not in assumed(*sets), sets


def test_a_bad_value_is_a_diagnostic_not_a_traceback():
    scenario, diagnostics = build([overrides_partial(
        ["framework=deepspeed", *BASE, "loop.held_logits=maybe"], model="llama3-8b")])
    assert any("loop.held_logits" in d.message for d in diagnostics)


def test_explain_prints_the_new_deepspeed_terms_with_their_sources(capsys):
    """--explain shows each new term with its formula, inputs and source, and the assumed loop."""
    from memlint.cli import main

    common = ["estimate", "--model", "llama3-8b", "--explain", "--set", "framework=deepspeed",
              "--set", "world_size=8", "--set", "micro_batch=1", "--set", "seq_len=2048",
              "--set", "recompute=full"]
    main(common + ["--set", "zero=2", "--set", "grad_accum=4", "--set", "loop.held_logits=fp32"])
    out = capsys.readouterr().out
    for name, source in (("logits.loop_outputs", "modeling_llama.py"),
                         ("gradients.zero2_accumulation", "stage_1_and_2.py")):
        block = out[out.index(f"  {name} ["):]
        block = block[:block.index("\n      = ")]
        assert "formula:" in block and "inputs:" in block and source in block, name
    main(common + ["--set", "zero=3"])
    out = capsys.readouterr().out
    block = out[out.index("  buffers.zero3_gathered_parameters ["):]
    assert "max_reuse_distance" in block[:2000]
    assert "partitioned_param_coordinator.py" in block[:2000]
    assert "loop.held_logits = none" in out
