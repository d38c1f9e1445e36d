"""Interpreting Megatron's flags into scenario keys: the order of the steps, the launcher (world
size), checkpoints, and architectures memlint does not count (a warning, never a dense GPT).

The model (memlint.adapters.megatron.model) and the training flags
(memlint.adapters.megatron.training) have their own modules.
"""
from __future__ import annotations

import os
import re

from memlint import lazy_import
from memlint.adapters.megatron.context import Interp, script_ends
from memlint.adapters.megatron.flags import FLAG_BY_NAME
from memlint.adapters.megatron.hybrid_t5 import beyond_gpt, hybrid_pattern, is_t5
from memlint.adapters.megatron.model import model
from memlint.adapters.megatron.readers import describe
from memlint.adapters.megatron.training import batch, memory_flags, pipeline, precision
from memlint.diagnostics import INVALID_VALUE, UNRESOLVED, Severity
from memlint.diagnostics import UNKNOWN_MODEL_TYPE as UNSUPPORTED_MODEL
from memlint.ir import NO_ESTIMATE, Provenance
from memlint.records import replace

# start-up: the job kinds of a training script load when the file names one, the layer-pattern
# facts when it gives a hybrid pattern
entry = lazy_import.module("memlint.adapters.megatron.entry")
hp = lazy_import.module("memlint.facts.hybrid_pattern")

def mimo_script(script: str) -> bool:
    r"""re.search(r"(^|/)mimo/(train|pretrain_mimo)\.py$", script), without compiling it per run
    (start-up): `$` also matches before a final newline, `^` only at the start."""
    body = script[:-1] if script.endswith("\n") else script
    return any(body.endswith(end) and body[:-len(end)][-1:] in ("", "/")
               for end in ("mimo/train.py", "mimo/pretrain_mimo.py"))


def run(it: Interp) -> None:
    it.collect()
    it.extras()
    not_training(it)
    unsupported_architecture(it)
    p = it.partial
    first = next(iter(it.args.values()), None)
    p.set("framework", "megatron",
          Provenance(it.path, first.prov.line if first else None,
                     first.prov.column if first else None, "megatron"))
    for flag, spec in FLAG_BY_NAME.items():
        if spec.target and flag in it.values and not spec.target.startswith("model."):
            it.set(spec.target, it.values[flag], flag)
    launcher(it)
    model(it)
    pipeline(it)
    batch(it)
    precision(it)
    memory_flags(it)
    checkpoints(it)
    if "megatron.unsupported-architecture" not in it.partial.extra:
        beyond_gpt(it)


def checkpoints(it: Interp) -> None:
    """Checkpoint saving and CPU initialisation: Megatron writes a checkpoint every
    --save-interval iterations when --save is given (training.py), with the optimizer state
    unless --no-save-optim; --use-cpu-initialization builds each rank's shard on the CPU."""
    if it.on("--save") and "--save-interval" in it.values:
        it.set("checkpoint_interval", it.values["--save-interval"], "--save-interval")
    if it.on("--no-save-optim"):
        it.set("save_optimizer", False, "--no-save-optim")
    if it.on("--use-cpu-initialization"):
        it.set("model_init", "shard-cpu", "--use-cpu-initialization")


def not_training(it: Interp) -> None:
    """A launch of a job that does not train (entry.py): no memory verdict, and the model-shape
    placeholders such jobs pass for the checkpoint to replace are not judged."""
    entry_script = it.partial.extra.get("megatron.entry-script")
    what, prov = None, None
    if entry_script is not None:
        task = it.arg("--task")
        what = entry.kind(str(entry_script.value), task.values[0] if task and task.values
                          else None)
        prov = entry_script.prov
        if what:
            why = entry.reason(str(entry_script.value), what)
    if what is None and it.read.mode is not None and str(it.read.mode[0]).strip().lower() in (
            "inference", "generation"):
        what, prov = "inference", it.read.mode[1]
        why = (f"MODE: {it.read.mode[0]}: an inference test case, not training: memlint "
               "estimates the memory of training runs")
    if what is None:
        return
    it.partial.set_extra(NO_ESTIMATE, why, prov)
    for index, d in enumerate(it.partial.diagnostics):
        if (d.severity == Severity.ERROR and d.code == INVALID_VALUE[0]
                and d.message.split(":", 1)[0] in entry.SHAPE_FLAGS):
            it.partial.diagnostics[index] = replace(
                d, severity=Severity.WARNING,
                message=d.message + f" (a {what} job reads the model from its checkpoint "
                "where it can; not judged as a training run)")


def unsupported_architecture(it: Interp) -> None:
    """Models whose memory memlint does not count: a warning and no estimate, never an
    invalid-config error and never a silent dense GPT. Hybrids and T5 are counted
    (adapters/megatron/hybrid_t5.py) except: hybrid layer symbols other than M * - E (G Gated
    DeltaNet, D DSA, + MLA), MTP layers in the pattern ('/'), a hybrid script or
    `--is-hybrid-model` without a pattern (the deprecated ratio flags), and T5 with pp > 1
    (examples/t5/pretrain_t5.py raises "Pipeline parallelism is not supported for T5.")."""
    entry = it.partial.extra.get("megatron.entry-script")
    script = str(entry.value) if entry is not None else ""
    reason, flag = None, None
    pattern, pattern_flag = hybrid_pattern(it)
    if mimo_script(script):
        flag = "--model-provider" if it.on("--model-provider") else None
        reason = _mimo(it)
    elif pattern is not None:
        odd = hp.uncounted(pattern)
        if odd:
            reason, flag = (f"a hybrid with {', '.join(repr(c) for c in odd)} layers "
                            f"({pattern_flag})"), pattern_flag
        elif "/" in pattern:
            reason, flag = f"a hybrid with MTP layers ({pattern_flag} after '/')", pattern_flag
    elif it.on("--is-hybrid-model") or script_ends(script, "pretrain_hybrid.py",
                                                   "pretrain_mamba.py"):
        flag = "--is-hybrid-model" if it.on("--is-hybrid-model") else None
        reason = (f"a Mamba hybrid without --hybrid-layer-pattern "
                  f"({flag or os.path.basename(script)})")
    elif is_t5(it) and (it.value("--pipeline-model-parallel-size", 1) or 1) > 1:
        flag = "--pipeline-model-parallel-size"
        reason = ("T5 with pipeline parallelism (examples/t5/pretrain_t5.py raises "
                  "\"Pipeline parallelism is not supported for T5.\")")
    if reason is None:
        return
    prov = it.prov(flag) if flag else (entry.prov if entry is not None else
                                         Provenance(it.path, 1, 1, None))
    it.partial.set_extra("megatron.unsupported-architecture", reason, prov)
    it.diag(UNSUPPORTED_MODEL, Severity.WARNING,
              f"no estimate for this architecture: {reason} is not counted by memlint's "
              "memory model yet; memory checks are skipped (the other checks still run)",
              prov)


# examples/mimo/model_providers at d98e8a6 that freeze towers in Python: llava_vlm.py and
# llava_avlm.py set requires_grad = False on the encoders and the language model ("freeze vision
# encoder and LLM parameters"); video_llava_vlm is llava_vlm with video input (train.py)
_MIMO_FROZEN = {"llava_vlm": "the CLIP encoder and the language model",
                "video_llava_vlm": "the CLIP encoder and the language model",
                "llava_avlm": "the vision and audio encoders and the language model"}


def _mimo(it: Interp) -> str:
    """Megatron's MIMO example (examples/mimo/train.py, pretrain_mimo.py) builds its model in Python from
    --model-provider: the encoders, the language model's config and which parts are frozen are
    code memlint does not run, so the flags' language model would be counted alone, as if all of
    it trained."""
    found = it.arg("--model-provider")
    name = found.values[0] if found is not None and found.values else "mock"
    frozen = _MIMO_FROZEN.get(name)
    return (f"a MIMO model built in Python by examples/mimo/model_providers for "
            f"--model-provider {name} (Megatron-LM d98e8a6: encoders beside the language "
            "model" + (f"; it freezes {frozen} with requires_grad = False" if frozen else "")
            + "), which memlint does not run")


def launcher(it: Interp) -> None:
    facts: dict = {}
    for option, (text, prov, unresolved) in it.read.launcher.items():
        # start-up: ASCII digits (most counts) fully match without compiling the pattern
        if unresolved or not (text.isascii() and text.isdigit() and len(text) <= 18
                              or re.fullmatch(r"\s*\d{1,18}\s*", text)):
            default = {"nnodes": "1 node", "nodes": "1 node"}.get(option)
            it.diag(UNRESOLVED, Severity.INFO,
                      f"launcher {prov.key} {text}: "
                      f"{describe(unresolved) if unresolved else 'not a plain number'}; "
                      + (f"assumed {default}" if default else "world size left unknown"),
                      prov)
            continue
        facts[option] = (int(text), prov)
    nproc = facts.get("nproc_per_node")
    nodes = facts.get("nnodes") or facts.get("nodes")
    unresolved_nodes = ("nnodes" in it.read.launcher or "nodes" in it.read.launcher) \
        and nodes is None
    world = None
    if nproc is not None:
        world = nproc[0] * (nodes[0] if nodes else 1)
        prov = nproc[1]
        it.partial.set("gpus_per_node", nproc[0], prov)
    elif "ntasks" in facts:
        world, prov = facts["ntasks"]
    elif "ntasks_per_node" in facts and nodes:
        world, prov = facts["ntasks_per_node"][0] * nodes[0], facts["ntasks_per_node"][1]
    if world is None and it.read.kind != "yaml":
        it.diag(UNRESOLVED, Severity.INFO,
                  "world size unknown: no launcher option gives the number of GPUs "
                  "(--nproc_per_node x --nnodes, srun --ntasks); checks that need it are "
                  "skipped (give `--set world_size=N`)", Provenance(it.path, 1, 1, None))
    if world is not None:
        label = "world size: launcher " + (prov.key or "")
        if unresolved_nodes:
            label += " (1 node assumed)"
        it.partial.set("world_size", world,
                         Provenance(prov.file, prov.line, prov.column, label))
