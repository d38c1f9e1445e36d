"""One resolved context per run (memory/context.py): topology, architecture, parameter counts,
dtypes and the pipeline schedule are computed once, by `Resolved`, and shared by the memory
model, the Estimate and every rule.

The resolvers are spied on in every memlint module that holds them (a `from ... import` copy
included), so a rule or a command calling one itself is seen, with the module it called from.
"""
import os
import sys

import pytest
from helpers import scenario

import memlint
from memlint.engine import lint
from memlint.ir import ModelSpec
from memlint.memory import params, stages, states, topology
from memlint.memory.context import Resolved, resolve_context
from memlint.memory.estimate import estimate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEEPSPEED = os.path.join(ROOT, "fixtures", "adapters", "deepspeed", "good")
MEGATRON = os.path.join(ROOT, "fixtures", "adapters", "megatron", "good")

RESOLVERS = ((topology, "resolve"), (params, "architecture"), (params, "count_params"),
             (states, "dtypes"), (stages, "stage_plans"))

#: (files, scenario keys): real configs (fixtures/adapters/*/SOURCES.md) with a model, so the
#: run has an estimate and the memory, topology, DeepSpeed, Megatron and strategy rules run; the
#: ZeRO-3 one makes the strategy rules re-estimate variants (ML604 zero=2, ML605 offload off).
RUNS = (
    ([os.path.join(DEEPSPEED, "transformers__tests-deepspeed-ds_config_zero3.json")],
     {"model": "llama3-8b", "world_size": 8, "gpu": "H100-80GB"}, {"ML604", "ML605"}),
    ([os.path.join(MEGATRON, "mixtral_8x7b.sh")], {}, set()),
    ([os.path.join(DEEPSPEED, "axolotl__deepspeed_configs-zero3_bf16_cpuoffload_all.json")],
     {"model": "llama3-70b", "world_size": 8, "gpu": "H100-80GB"}, {"ML101"}),
)


@pytest.fixture
def spied(monkeypatch):
    """Every call of a resolver: (resolver, calling module, the Resolved that called it)."""
    calls = []
    for module, name in RESOLVERS:
        original = getattr(module, name)

        def spy(*args, _original=original, _name=name, **kwargs):
            caller = sys._getframe(1)
            calls.append((_name, caller.f_globals.get("__name__"), caller.f_locals.get("self")))
            return _original(*args, **kwargs)

        for loaded in list(sys.modules.values()):
            if getattr(loaded, "__name__", "").startswith("memlint") \
                    and getattr(loaded, name, None) is original:
                monkeypatch.setattr(loaded, name, spy)
    return calls


@pytest.mark.parametrize("files,keys,codes", RUNS, ids=["zero3", "megatron", "zero3-70b"])
def test_each_part_is_resolved_once_per_run(spied, files, keys, codes):
    result = memlint.check(files, **keys)
    [est] = result.estimates
    assert codes <= {d.code for d in result.diagnostics}   # the rules that re-estimate ran
    assert isinstance(est.context, Resolved) and est.context.scenario is est.scenario
    # nobody but the resolved context calls a resolver (no rule, no command, no memory module)
    assert {module for _name, module, _owner in spied} == {"memlint.memory.context"}
    # the run's own context computed each part once
    mine = [name for name, _module, owner in spied if owner is est.context]
    assert sorted(mine) == sorted(name for _module, name in RESOLVERS)
    # variants a rule estimates share the run's architecture and counts
    assert [name for name, _m, _o in spied].count("architecture") == 1
    assert [name for name, _m, _o in spied].count("count_params") == 1


def test_the_engine_hands_every_rule_the_estimate_context(monkeypatch):
    [files, keys, _codes] = RUNS[0]
    result = memlint.check(files, **keys)
    [est] = result.estimates
    seen = []
    from memlint.engine import default_registry

    def spy(rule):
        check = rule.check

        def record(ctx):
            seen.append(ctx.resolved)
            return check(ctx)
        return record

    # what each rule is handed (the rules without options share one Context)
    for rule in default_registry():
        monkeypatch.setattr(rule, "check", spy(rule))
    lint(est.scenario, est)
    assert len(seen) > 10 and all(r is est.context for r in seen)


MIXTRAL = ModelSpec(config={"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
                        "num_hidden_layers": 32, "num_attention_heads": 32,
                        "num_key_value_heads": 8, "num_local_experts": 8,
                        "num_experts_per_tok": 2, "vocab_size": 32000}, name="mixtral-8x7b")


def test_a_scenario_without_model_or_world_size_resolves_without_raising():
    resolved = resolve_context(scenario())
    assert resolved.architecture is None and resolved.counts is None
    assert resolved.schedule is None and resolved.error("architecture") is None
    assert resolved.topology.world is None and resolved.topology.dp == 1
    assert resolved.dtypes is not None and resolved.problems == ()


def test_an_unreadable_model_is_a_problem_not_an_exception():
    resolved = resolve_context(scenario(model=ModelSpec(config={"model_type": "llama"})))
    assert resolved.architecture is None and resolved.counts is None
    assert resolved.schedule is None
    [(message, keys)] = resolved.problems
    assert keys[0].startswith("model.") and message == str(resolved.error("architecture"))
    with pytest.raises(params.ConfigError):
        resolved.require("architecture")


def test_the_estimate_is_built_from_the_given_context():
    scen = scenario(model=MIXTRAL, parallelism={"world_size": 16, "pp": 4, "ep": 2})
    resolved = resolve_context(scen)
    est = estimate(scen, resolved)
    assert est.context is resolved
    assert [p.layers for p in resolved.schedule.plans] == [tuple(range(i * 8, i * 8 + 8))
                                                           for i in range(4)]
    assert resolved.topology.dp == 4 and resolved.counts.total == est.params["total"]
    again = estimate(scen)
    assert again.context is not resolved and again.stages == est.stages


def test_a_variant_shares_the_model_but_not_the_layout():
    scen = scenario(model=MIXTRAL, parallelism={"world_size": 16})
    resolved = resolve_context(scen)
    variant = resolved.varied(scenario(model=MIXTRAL, parallelism={"world_size": 16, "tp": 2}))
    assert variant.architecture is resolved.architecture
    assert variant.counts is resolved.counts
    assert (resolved.topology.dp, variant.topology.dp) == (16, 8)
    other = resolved.varied(scenario(model=ModelSpec(config=dict(MIXTRAL.config)),
                                     parallelism={"world_size": 16}))
    assert other.architecture is not resolved.architecture   # another model: read again
