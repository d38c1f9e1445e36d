"""Framework conventions live in one typed record (memory/conventions.py, issue 31).

The memory model reads `Conventions` only: no module of memlint/memory/ but conventions.py
compares a framework's name, reads `.framework`, reads `Scenario.extra` or the raw convention keys,
or spells a key the way an adapter records it (`"megatron.transformer-impl"`, `f"deepspeed.{key}"`).
The keys the record is built from are declared in memlint/keys.py, so `--set` reaches them.
"""
from __future__ import annotations

import ast
import os

import pytest
import source_trees

from memlint import keys as K
from memlint.memory.context import resolve_context
from memlint.memory.conventions import Conventions
from memlint.memory.estimate import estimate
from memlint.memory.model import Model
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEMORY = os.path.join(ROOT, "memlint", "memory")
HOME = os.path.join(MEMORY, "conventions.py")
FRAMEWORKS = {"megatron", "deepspeed", "fsdp2", "hf"}
# how adapters namespace what they record (Partial.extra): an adapter's own spelling
ADAPTER_PREFIXES = ("megatron.", "deepspeed.", "env.", "torchtitan.", "accelerate.", "axolotl.",
                    "hf_trainer.", "llamafactory.", "gpt_neox.", "flags.", "verl.", "world_size.")


def _memory_modules():
    for folder, _dirs, names in os.walk(MEMORY):
        for name in sorted(names):
            path = os.path.join(folder, name)
            if name.endswith(".py") and path != HOME:
                yield path


def _strings(node):
    """The string constants a node spells, including the literal parts of f-strings."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.JoinedStr):
        for part in node.values:
            yield from _strings(part)


def _problems(path: str, source=None) -> list:
    tree = source_trees.tree(path) if source is None else ast.parse(source, path)
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))
                  and n.body and isinstance(n.body[0], ast.Expr)}
    out = []
    for node in ast.walk(tree):
        where = f"{os.path.relpath(path, ROOT)}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Attribute) and node.attr in ("extra", "framework",
                                                              "convention_keys"):
            out.append(f"{where}: reads .{node.attr}")
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                values = [s for e in (side.elts if isinstance(side, (ast.Tuple, ast.List,
                                                                     ast.Set)) else [side])
                          for s in _strings(e)]
                if FRAMEWORKS & set(values):
                    out.append(f"{where}: compares with a framework name")
        if isinstance(node, ast.Dict) and FRAMEWORKS & {
                s for k in node.keys if k is not None for s in _strings(k)}:
            out.append(f"{where}: a table keyed by framework")
        if id(node) not in docstrings and isinstance(node, (ast.Constant, ast.JoinedStr)):
            for text in _strings(node):
                if text.startswith(ADAPTER_PREFIXES) and " " not in text:
                    out.append(f"{where}: an adapter's spelling {text!r}")
    return out


def test_the_memory_model_reads_no_adapter_spelling_and_no_framework_name():
    problems = [p for path in _memory_modules() for p in _problems(path)]
    assert not problems, "\n".join(problems)


def test_the_check_finds_what_it_looks_for():
    """The checker catches each kind of violation (a test that cannot fail proves nothing)."""
    source = ("def f(model, tr, key):\n"
              "    a = model.scenario.extra.get('megatron.transformer-impl')\n"
              "    b = tr.framework\n"
              "    c = x in ('hf', 'fsdp2')\n"
              "    d = {'megatron': 1}\n"
              "    e = f'deepspeed.{key}'\n")
    tree_problems = _problems(os.path.join(MEMORY, "probe.py"), source)
    kinds = " ".join(tree_problems)
    for expected in ("reads .extra", "reads .framework", "compares with a framework name",
                     "a table keyed by framework", "'megatron.transformer-impl'",
                     "'deepspeed.'"):
        assert expected in kinds, (expected, tree_problems)


def scenario_of(*sets, model="llama3-8b"):
    scenario, diagnostics = build([overrides_partial(list(sets), model=model)])
    errors = [d for d in diagnostics if d.severity.label == "error"]
    return scenario, diagnostics, errors


def test_built_once_on_the_resolved_context_and_shared_by_the_model():
    scenario, _, errors = scenario_of("world_size=8")
    assert not errors
    context = resolve_context(scenario)
    record = context.conventions
    assert isinstance(record, Conventions) and context.conventions is record
    assert Model(scenario, context).conv is record
    with pytest.raises(AttributeError):
        record.uses_deepspeed = True  # frozen


# One valid value per declared convention key, as a user would write it after --set.
SAMPLES = {
    "megatron.transformer-impl": "local", "megatron.recompute-modules": "core_attn mlp",
    "megatron.microbatch-group-size-per-virtual-pipeline-stage": "2",
    "megatron.pipeline-layout-stages": "Et|tt|tL", "megatron.wgrad-deferral-limit": "2",
    "megatron.unsupported-architecture": "a T5 encoder-decoder",
    "deepspeed.config": "ds_config.json", "deepspeed.reduce_bucket_size": "5e8",
    "deepspeed.version": "0.14.2", "torch.version": "2.0",
    "deepspeed.stage3_max_live_parameters": "auto",
    "deepspeed.stage3_max_reuse_distance": "1e9", "deepspeed.stage3_prefetch_bucket_size": "5e7",
    "loop.held_logits": "fp32",
    "deepspeed.stage3_param_persistence_threshold": "1e5", "deepspeed.sub_group_size": "1e9",
    "deepspeed.offload_optimizer.buffer_count": "4", "deepspeed.offload_param.buffer_count": "5",
    "deepspeed.offload_param.buffer_size": "1e8", "deepspeed.offload_param.max_in_cpu": "1e9",
    "env.CUBLAS_WORKSPACE_CONFIG": ":4096:8", "env.CUBLASLT_WORKSPACE_SIZE": "1024",
    "gpt_neox.config": "neox.yml", "accelerate.fsdp_version": "2",
    "fsdp.allgather_dtype_bytes": "1",
    "megatron.moe-token-dispatcher-type": "alltoall", "megatron.moe-router-dtype": "fp32",
    "megatron.num-distributed-optimizer-instances": "2",
    "megatron.offload-modules": "core_attn expert_fc1", "megatron.min-offloaded-tensor-size": "1048576",
    "megatron.activation-offload-fraction": "0.5",
    "megatron.attention-backend": "fused", "env.NVTE_ALLOW_NONDETERMINISTIC_ALGO": "0",
    "float8.switch": "converters",
}


@pytest.mark.parametrize("name", sorted(K.CONVENTION_KEYS))
def test_every_convention_key_is_reachable_with_set(name):
    value = SAMPLES.get(name, "true")
    scenario, diagnostics, errors = scenario_of(f"{name}={value}")
    assert not errors, [d.message for d in errors]
    assert name in scenario.convention_keys
    assert scenario.where(name).key == f"--set {name}"


def test_a_bad_set_value_is_an_error_and_a_bad_recorded_one_is_left_out():
    _, _, errors = scenario_of("megatron.transformer-impl=fast")
    assert [d.code for d in errors] == ["ML004"]  # invalid-value, with the key
    assert "megatron.transformer-impl" in errors[0].message
    from memlint.ir import Partial, Provenance

    recorded = Partial(source="ds.json", fmt="deepspeed")
    recorded.set_extra("deepspeed.reduce_bucket_size", "lots", Provenance("ds.json", 3, 5, "x"))
    recorded.set_extra("deepspeed.overlap_comm", False, Provenance("ds.json", 4, 5, "y"))
    scenario, diagnostics = build([recorded, overrides_partial([], model="llama3-8b")])
    assert not [d for d in diagnostics if d.severity.label == "error"]
    assert "deepspeed.reduce_bucket_size" not in scenario.convention_keys
    zero = resolve_context(scenario).conventions.zero
    assert zero.reduce_bucket_size is None and zero.overlap_comm is False


def _terms(scenario) -> set:
    """Names of the terms of every phase of every stage."""
    return {t.name for stage in estimate(scenario).stages for phase in stage.phases
            for t in phase.terms}


def test_set_transformer_impl_local_reaches_the_memory_model():
    """`--set megatron.transformer-impl=local` (refused as an unknown key before): the local
    spec has no Transformer Engine workspace, and the record says so."""
    base = ("framework=megatron", "world_size=8", "tp=2")
    te, _, errors = scenario_of(*base)
    local, _, local_errors = scenario_of(*base, "megatron.transformer-impl=local")
    assert not errors and not local_errors
    assert resolve_context(te).conventions.te_spec
    conv = resolve_context(local).conventions
    assert conv.local_spec and not conv.te_spec and conv.flash_head_dim_multiple == 0
    assert "buffers.te_workspace" in _terms(te)
    assert "buffers.te_workspace" not in _terms(local)


def test_uses_deepspeed_is_decided_in_one_place():
    """DeepSpeed in use: framework deepspeed, or a DeepSpeed config in the run (an HF Trainer or
    accelerate run that hands one over); the ZeRO buffers and the FSDP sharding follow it."""
    hf, _, _ = scenario_of("framework=hf", "world_size=8", "zero=3")
    with_config, _, _ = scenario_of("framework=hf", "world_size=8", "zero=3",
                                    "deepspeed.config=ds_config.json")
    assert not resolve_context(hf).conventions.uses_deepspeed
    assert resolve_context(hf).conventions.fsdp_sharded
    conv = resolve_context(with_config).conventions
    assert conv.uses_deepspeed and not conv.fsdp_sharded
    assert conv.deepspeed_config.key == "--set deepspeed.config"
    assert "buffers.zero_reduce_bucket" in _terms(with_config)
    assert not any(t.startswith("buffers.fsdp.") for t in _terms(with_config))
    assert any(t.startswith("buffers.fsdp.") for t in _terms(hf))


def test_eager_transformers_modules_are_decided_in_one_place():
    """DeepSpeed runs the module it is given: transformers' for an HF config, gpt-neox's own."""
    for sets, eager in ((("framework=hf",), True), (("framework=fsdp2", "tp=1"), True),
                        (("framework=fsdp2", "tp=2", "world_size=8"), False),
                        (("framework=megatron",), False), (("framework=deepspeed",), True),
                        (("framework=deepspeed", "gpt_neox.config=neox.yml"), False)):
        scenario, _, errors = scenario_of(*sets)
        assert not errors
        assert resolve_context(scenario).conventions.eager_modules is eager, sets


def test_the_per_gpu_sequence_length_counts_image_tokens_and_cp():
    scenario, _, errors = scenario_of("seq_len=4096", "cp=4", "world_size=8",
                                      "images_per_sample=2", "tokens_per_image=576")
    assert not errors
    conv = resolve_context(scenario).conventions
    assert conv.seq == 4096 + 2 * 576 and conv.seq_local == -(-(4096 + 1152) // 4)
