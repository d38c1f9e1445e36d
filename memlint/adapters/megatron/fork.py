"""Megatron-DeepSpeed's MoE flags, which differ from Megatron-LM's flags of the same name.

A run is read as Megatron-DeepSpeed when it passes `--deepspeed` / `--deepspeed_config`
(flags.FORK_MARKERS). There (microsoft/Megatron-DeepSpeed megatron/arguments.py at f4157be):
- `--num-experts` takes a list (`nargs='+'`, default `[1]`): one expert count per MoE layer, or one
  for all of them; 1 means a dense MLP. Megatron-LM's `--num-experts` is one integer.
- `--expert-interval` (default 2): layer number n (1-based) is an MoE layer when
  n % expert_interval == 0 (megatron/model/transformer.py get_num_experts_per_layer), so by
  default every second layer.
- `--topk` (default 1) is the router's top-k; Megatron-LM's `--moe-router-topk` (default 2) is not
  read there.
- `--moe-expert-parallel-size` (default 1) is DeepSpeed MoE's expert-parallel size.

`experts(it)` gives the expert count model.py counts with, and `apply(it, ffn)` sets the MoE keys
for a fork run (the layers that stay dense, top-k, the expert MLP width, ep).
"""
from __future__ import annotations

import functools
import json
import os

from memlint import keys as K
from memlint.adapters.megatron.context import Interp
from memlint.adapters.megatron.flags import FORK_MARKERS
from memlint.diagnostics import INVALID_VALUE, Severity

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

DEFAULT_INTERVAL = 2
DEFAULT_TOPK = 1
SOURCE = "microsoft/Megatron-DeepSpeed megatron/arguments.py at f4157be"


@functools.lru_cache(maxsize=1)
def fork_only_flags() -> frozenset:
    """Flags only the DeepSpeed forks define (megatron_flags.json `megatron_deepspeed`)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "megatron_flags.json")
    try:
        with open(path, encoding="utf-8") as handle:
            return frozenset(json.load(handle)["megatron_deepspeed"]["flags"])
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()


def is_fork(it: Interp) -> bool:
    """A Megatron-DeepSpeed run: it passes --deepspeed / --deepspeed_config, or a flag only the
    forks have (tools/generate_samples_gpt.py under the `deepspeed` launcher with --mlp-type)."""
    if any(marker in it.args for marker in FORK_MARKERS):
        return True
    return bool(fork_only_flags().intersection(it.args))


def _ints(it: Interp, flag: str) -> Optional[list]:
    """The flag's values as whole numbers; None when absent, unresolved or not numbers."""
    arg = it.arg(flag)
    if arg is None or arg.unresolved or not arg.values:
        return None
    try:
        return [K.non_negative_int(K.to_int(v.strip().replace("_", ""))) for v in arg.values]
    except ValueError:
        it.diag(INVALID_VALUE, Severity.ERROR,
                f"{flag}: expected whole numbers, got {' '.join(arg.values)!r}; argparse "
                "(type=int) refuses it", arg.prov)
        return None


def _one(it: Interp, flag: str, default: int) -> int:
    values = _ints(it, flag)
    return values[-1] if values else default


def experts(it: Interp) -> Optional[int]:
    """The routed-expert count of the run's MoE layers (None: a dense model)."""
    values = _ints(it, "--num-experts")
    if not values:
        return None
    if not is_fork(it):
        if len(values) > 1:
            it.diag(INVALID_VALUE, Severity.WARNING,
                    f"--num-experts {' '.join(map(str, values))}: Megatron-LM takes one number "
                    "(a list is Megatron-DeepSpeed's, with --deepspeed); argparse would reject "
                    "the rest", it.prov("--num-experts"))
        return values[0] or None
    moe = [n for n in values if n > 1]
    if not moe:
        return None
    if len(set(moe)) > 1 or len(moe) < len(values):
        it.diag(INVALID_VALUE, Severity.WARNING,
                f"--num-experts {' '.join(map(str, values))}: different expert counts per MoE "
                f"layer are not modeled; every MoE layer is counted with {max(moe)} experts "
                "(the estimate errs high)", it.prov("--num-experts"))
    return max(moe)


_MAX_LAYERS = 100_000


def apply(it: Interp, layers: Optional[int]) -> None:
    """A fork run's MoE layout: dense layers between the MoE ones, --topk, ep."""
    interval = _one(it, "--expert-interval", DEFAULT_INTERVAL)
    flag = "--expert-interval" if it.on("--expert-interval") else "--num-experts"
    label = "MoE every --expert-interval layers" + (
        "" if it.on("--expert-interval") else f" (Megatron-DeepSpeed default {DEFAULT_INTERVAL})")
    if interval <= 0:
        it.diag(INVALID_VALUE, Severity.ERROR,
                f"--expert-interval {interval}: the layer count is divided by it "
                f"(get_num_experts_per_layer, {SOURCE})", it.prov("--expert-interval"))
        return
    # past the memory model's MAX_LAYERS (memory/architecture.py) there is no estimate to lay
    # out, and a list of a billion layer indices is gigabytes (fuzz seed 8089988)
    if layers is not None and layers <= _MAX_LAYERS:
        dense = [i for i in range(layers) if (i + 1) % interval != 0]
        it.set("model.mlp_only_layers", dense, flag, label)
        if len(dense) == layers:
            it.diag(INVALID_VALUE, Severity.WARNING,
                    f"--expert-interval {interval} is larger than the {layers} layers: no layer "
                    "gets experts", it.prov(flag))
    topk = _one(it, "--topk", DEFAULT_TOPK)
    it.set("model.num_experts_per_tok", topk, "--topk" if it.on("--topk") else "--num-experts",
           "num_experts_per_tok" + ("" if it.on("--topk") else
                                    f" (Megatron-DeepSpeed --topk default {DEFAULT_TOPK})"))
    ep = _one(it, "--moe-expert-parallel-size", 1)
    if it.on("--moe-expert-parallel-size"):
        it.set("ep", ep, "--moe-expert-parallel-size")
