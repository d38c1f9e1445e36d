"""The values a memory verdict rests on, and where each came from (issue 14, "no silent defaults").

An OOM or fit verdict depends on seven inputs besides the model: seq_len, micro_batch, world_size,
recompute, precision, the GPU and, for Hugging Face trainers, the sharding: their recipes (TRL,
open-instruct, LLaMA-Factory and axolotl YAML) leave ZeRO / FSDP to whatever DeepSpeed or
accelerate config is given at launch, so a file that names none is only unsharded by default. `verdict_inputs(scenario, topo)` names, for each, the value the
estimate used and its source: `file:line` when a config file gave it, `--set KEY` / `--model`
from the command line, a framework's own default as its adapter recorded it (e.g. "axolotl default
512"), or `default` when nothing gave it and memlint's own default applied. `assumed()` keeps the
ones no file gave; reporters print them and the memory rules say when a verdict rests on one.
"""
from __future__ import annotations


TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


VERDICT_KEYS = ("seq_len", "micro_batch", "world_size", "recompute", "precision", "gpu", "sharding")
DEFAULT = "default"


def source_of(prov) -> Optional[str]:
    """'default', '--set KEY', '<framework> default ...', or None when a file gave the value."""
    if prov is None:
        return DEFAULT
    key = prov.key or ""
    if prov.file is None:
        return key or "command line"
    if "default" in key:
        return f"{key} in {prov.file}"
    if prov.line is None and prov.file.startswith("preset:"):
        return prov.file
    return None


#: What shards an HF trainer's run: a DeepSpeed config, or FSDP settings (accelerate, Trainer --fsdp).
_SHARDING_KEYS = ("zero", "fsdp", "dp_shard")


def _gpu_prov(scenario):
    for key in ("gpu", "gpu_memory"):
        prov = scenario.where(key)
        if prov is not None:
            return prov
    return None


def verdict_inputs(scenario, topo, conv) -> list:
    """[(key, value, source or None, prov)] for every verdict key, in VERDICT_KEYS order (`conv`:
    the run's Conventions, memory/conventions.py)."""
    tr, par, hw = scenario.training, scenario.parallelism, scenario.hardware
    out = []
    for key in VERDICT_KEYS:
        if key == "gpu":
            prov = _gpu_prov(scenario)
            value = hw.gpu
        elif key == "world_size":
            prov = scenario.where("world_size") or scenario.where("dp")
            value = par.world_size or topo.world
            if prov is not None and conv.world_size_assumed:
                out.append((key, value, f"assumed by the launcher reader ({prov.describe()})",
                            prov))
                continue
        elif key == "sharding":
            if conv.states_own_sharding:
                continue   # Megatron, torchtitan and DeepSpeed configs state their own sharding
            prov = next((p for p in (scenario.where(k) for k in _SHARDING_KEYS) if p), None)
            if prov is None:
                prov = conv.deepspeed_config
            value = (f"zero {par.zero}" if par.zero else f"fsdp {par.fsdp}"
                     if par.fsdp != "none" else "none")
        else:
            prov = scenario.where(key)
            value = getattr(tr, key)
        out.append((key, value, source_of(prov), prov))
    return out


def assumed(scenario, topo, conv) -> tuple:
    """The verdict inputs no file gave: ({"key", "value", "source"}, ...) for the JSON output."""
    return tuple({"key": key, "value": value, "source": source}
                 for key, value, source, _prov in verdict_inputs(scenario, topo, conv)
                 if source is not None)
