"""MoE routing imbalance: the named assumption `moe.routing_imbalance` (memlint/assumptions.py).

With expert parallelism each rank holds ep-th of the routed experts, and the tokens a rank's
experts receive in one micro-batch are k · tokens / ep only if the router balances them
perfectly. The busiest rank sets the peak, so memlint multiplies every routed-expert activation
(the tensors whose size is k per token: the dispatched inputs, the experts' MLP intermediates,
their outputs before the routing weights; activations.py names them "(top-k)") by
`moe.routing_imbalance` = max over ranks / mean of the tokens received.

Default 1.0 (balanced). No framework documents a typical imbalance for dropless routing: the
auxiliary load-balancing loss (Switch Transformer, Fedus et al. 2021 section 2.2; Megatron
`--moe-aux-loss-coeff`) pushes toward 1.0 without a bound, and the worst case is ep (every
token to one rank). A capacity factor C caps it: each expert takes at most C · k · tokens / E
tokens (GShard, Lepikhin et al. 2020 section 2.2; Megatron `--moe-expert-capacity-factor`, with
`--moe-pad-expert-input-to-capacity` exactly C), so set `--set moe.routing_imbalance=C` for
such a run. Without expert parallelism (ep = 1) every expert is local and the total is k · tokens
whatever the balance: the assumption has no effect there.
"""
from __future__ import annotations

from memlint.records import replace

ROUTED_MARK = "(top-"  # activations.py: routed-expert items carry "(top-k)" in their names
SOURCE = ("assumption moe.routing_imbalance (memory/moe_balance.py); GShard capacity factor, "
          "Megatron --moe-expert-capacity-factor")


def applies(ep: int, factor: float) -> bool:
    return ep > 1 and factor != 1.0


def scale_routed(items: list, factor: float) -> list:
    """The items of one MoE layer with the routed-expert ones × factor."""
    out = []
    for item in items:
        if ROUTED_MARK in item.name:
            item = replace(item, name=f"{item.name} × imbalance {factor:g}",
                           per_token=item.per_token * factor,
                           per_token_pair=item.per_token_pair * factor)
        out.append(item)
    return out
