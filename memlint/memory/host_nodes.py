"""Host RAM and NVMe per node: which ranks (of which pipeline stages) each node holds, and the sum
of their host terms (memory/host.py) in training and at start-up, against the node's capacity.
Identical nodes are grouped; beyond MAX_NODES_ENUMERATED nodes the result is an upper bound.
"""
from __future__ import annotations

import math

from memlint.memory.context import context_of
from memlint.memory.host import (capacity, default_model_init, rank_startup_terms,
                                 rank_training_terms)
from memlint.memory.terms import Term
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


# Above this many nodes the node kinds are bounded instead of enumerated.
MAX_NODES_ENUMERATED = 4096


@record(frozen=True)
class HostPhase:
    name: str             # "training" | "startup"
    terms: tuple

    @property
    def total(self) -> int:
        return sum(t.bytes for t in self.terms)


@record(frozen=True)
class NodeEstimate:
    """One kind of node: `nodes` nodes hold the same ranks (`ranks`: (stage, count) pairs)."""

    node: int                       # index of the first node of this kind
    nodes: int
    ranks: tuple
    phase: str                      # the phase of the peak
    terms: tuple                    # host RAM terms at the peak; they add up to total_bytes
    phases: tuple
    nvme_terms: tuple
    capacity_bytes: Optional[int]
    nvme_capacity_bytes: Optional[int]
    capacity_source: str = ""
    bounded: bool = False           # too many nodes to enumerate: an upper bound

    @property
    def total_bytes(self) -> int:
        return sum(t.bytes for t in self.terms)

    @property
    def nvme_bytes(self) -> int:
        return sum(t.bytes for t in self.nvme_terms)

    def to_dict(self) -> dict:
        return {"node": self.node, "nodes": self.nodes,
                "ranks": [{"stage": s, "ranks": n} for s, n in self.ranks],
                "phase": self.phase, "total_bytes": self.total_bytes,
                "capacity_bytes": self.capacity_bytes, "capacity_source": self.capacity_source,
                "phases": {p.name: p.total for p in self.phases},
                "terms": [t.to_dict() for t in self.terms],
                "nvme_bytes": self.nvme_bytes, "nvme_capacity_bytes": self.nvme_capacity_bytes,
                "nvme_terms": [t.to_dict() for t in self.nvme_terms], "bounded": self.bounded}


def _node_kinds(world: int, pp: int, per_node: int, first_apart: bool = False) -> tuple:
    """((first node, count, ((stage, ranks), ...)), ...) and whether it is a bound.
    `first_apart`: node 0 is a kind of its own (it alone holds rank 0's start-up copy)."""
    per_node = max(1, min(per_node, world))
    nodes = math.ceil(world / per_node)
    stage_size = max(1, world // max(1, pp))
    if nodes > MAX_NODES_ENUMERATED:
        return ((0, nodes, ((-1, per_node),)),), True
    kinds: dict = {}
    for node in range(nodes):
        first, last = node * per_node, min(world, (node + 1) * per_node)
        counts: dict = {}
        for stage in range(first // stage_size, min(pp - 1, (last - 1) // stage_size) + 1):
            lo, hi = max(first, stage * stage_size), min(last, (stage + 1) * stage_size)
            if stage == pp - 1:
                hi = last
            if hi > lo:
                counts[stage] = hi - lo
        key = (first_apart and node == 0, tuple(sorted(counts.items())))
        if key in kinds:
            kinds[key][1] += 1
        else:
            kinds[key] = [node, 1]
    return tuple((v[0], v[1], k[1]) for k, v in kinds.items()), False


def _scaled(term: Term, ranks: int) -> Term:
    if ranks == 1:
        return term
    return Term(term.name, term.component, term.bytes * ranks, f"{ranks} ranks × ({term.formula})",
                dict(term.inputs, ranks=ranks), term.source)


def _sum_terms(parts) -> tuple:
    """Add same-named terms of several stages on one node."""
    out: dict = {}
    for term in parts:
        if term.name in out:
            prev = out[term.name]
            out[term.name] = Term(term.name, term.component, prev.bytes + term.bytes,
                                  f"{prev.formula} + {term.formula}", prev.inputs, prev.source)
        else:
            out[term.name] = term
    return tuple(out.values())


def node_estimates(scenario, estimate) -> tuple:
    """Host RAM and NVMe per kind of node, the worst node first. Empty on the CPU device."""
    if scenario.hardware.device == "cpu" or not estimate.stages:
        return ()
    context = context_of(scenario, estimate)
    topo, dt, conv = context.topology, context.dtypes, context.conventions
    host_cap, nvme_cap, per_node, source = capacity(scenario)
    pp = len(estimate.stages)
    world = topo.world or per_node * pp
    init, _ = default_model_init(scenario, estimate)
    kinds, bounded = _node_kinds(world, pp, per_node, first_apart=init == "rank0-cpu")
    by_stage = {}
    for stage in estimate.stages:
        ram, nvme = rank_training_terms(scenario, stage, topo, dt, conv)
        by_stage[stage.stage] = (ram, nvme, rank_startup_terms(scenario, estimate, stage, dt))
    out = []
    for first, count, ranks in kinds:
        if bounded:   # every rank as the stage with the most host bytes: an upper bound
            worst = max(by_stage, key=lambda s: sum(t.bytes for t in by_stage[s][0] + by_stage[s][2]))
            ranks = ((worst, ranks[0][1]),)
        training, nvme, startup = [], [], []
        for stage, n in ranks:
            ram_t, nvme_t, start_t = by_stage[stage]
            training += [_scaled(t, n) for t in ram_t]
            nvme += [_scaled(t, n) for t in nvme_t]
            if init == "rank0-cpu":
                if first == 0 and stage == ranks[0][0]:
                    total = int(estimate.params.get("total", 0))
                    startup.append(Term("host.model_load", "weights", total * dt.param,
                                        f"whole model {total:,} params × {dt.param} B, rank 0 only",
                                        {"params": total, "model_init": init},
                                        "accelerate cpu_ram_efficient_loading: rank 0 loads the "
                                        "weights, the other ranks start on the meta device"))
            else:
                startup += [_scaled(t, n) for t in start_t]
        phases = (HostPhase("training", _sum_terms(training)),
                  HostPhase("startup", _sum_terms(startup)))
        peak = max(phases, key=lambda p: p.total)
        out.append(NodeEstimate(node=first, nodes=count, ranks=tuple(ranks), phase=peak.name,
                                terms=peak.terms, phases=phases, nvme_terms=_sum_terms(nvme),
                                capacity_bytes=host_cap, nvme_capacity_bytes=nvme_cap,
                                capacity_source=source, bounded=bounded))
    out.sort(key=lambda n: (-n.total_bytes, -n.nvme_bytes, n.node))
    return tuple(out)
