"""Text lines for host RAM, NVMe and checkpoints, beside the GPU stage table (text and --explain).

Shown only where there is something to say: a node that holds host bytes, a capacity the user
gave, or a disk to check checkpoints against.
"""
from __future__ import annotations

from memlint.units import fmt


def _ranks(node) -> str:
    parts = [f"{n} x stage {s}" if s >= 0 else f"{n} ranks" for s, n in node.ranks]
    return ", ".join(parts)


def _shown(estimate) -> bool:
    host = getattr(estimate, "host", ()) or ()
    ckpt = getattr(estimate, "checkpoint", None)
    return (any(n.total_bytes or n.nvme_bytes or n.capacity_bytes for n in host)
            or (ckpt is not None and ckpt.disk_bytes is not None))


def summary_lines(estimate, units: str) -> list:
    """One line per kind of node, then one for checkpoints when a disk is given."""
    if not _shown(estimate):
        return []
    lines = []
    for node in estimate.host:
        cap = (f" of {fmt(node.capacity_bytes, units, 2)} "
               f"({node.total_bytes / node.capacity_bytes:.0%})" if node.capacity_bytes else
               " (host RAM not given: --host-memory or --node)")
        many = f" x{node.nodes} nodes" if node.nodes > 1 else ""
        nvme = ""
        if node.nvme_bytes:
            nvme = f"; NVMe {fmt(node.nvme_bytes, units, 2)}" + (
                f" of {fmt(node.nvme_capacity_bytes, units, 2)}" if node.nvme_capacity_bytes else "")
        lines.append(f"host node {node.node}{many} ({_ranks(node)}): "
                     f"{fmt(node.total_bytes, units, 2)}{cap} at {node.phase}{nvme}")
    ckpt = estimate.checkpoint
    if ckpt is not None and ckpt.disk_bytes is not None:
        kept = "? (" + ckpt.kept_source + ")" if ckpt.kept is None else f"{ckpt.kept}"
        total = "" if ckpt.total_bytes is None else f" = {fmt(ckpt.total_bytes, units, 2)}"
        lines.append(f"checkpoints: {fmt(ckpt.bytes_each, units, 2)} each x {kept}{total} "
                     f"of {fmt(ckpt.disk_bytes, units, 2)} disk")
    return lines


def explain_lines(estimate, units: str) -> list:
    """The derivation of each node's host total and of one checkpoint."""
    if not _shown(estimate):
        return []
    lines = []
    for node in estimate.host:
        lines.append(f"Host node {node.node} ({_ranks(node)}; {node.nodes} node(s) like it), "
                     f"peak in phase {node.phase!r}:")
        for term in node.terms:
            lines.append(f"  {term.name} [{term.component}] = {term.bytes:,} B "
                         f"({fmt(term.bytes, units, 3)})")
            lines.append(f"      formula: {term.formula}")
            if term.source:
                lines.append(f"      source:  {term.source}")
        lines.append(f"  total = {node.total_bytes:,} B ({fmt(node.total_bytes, units, 3)})"
                     + (f"; capacity {node.capacity_bytes:,} B from {node.capacity_source}"
                        if node.capacity_bytes else ""))
        for phase in node.phases:
            lines.append(f"  phase {phase.name}: {phase.total:,} B")
        for term in node.nvme_terms:
            lines.append(f"  NVMe: {term.name} = {term.bytes:,} B = {term.formula}")
        lines.append("")
    ckpt = estimate.checkpoint
    if ckpt is not None:
        lines.append(f"Checkpoint ({ckpt.kept if ckpt.kept is not None else '?'} kept: "
                     f"{ckpt.kept_source}):")
        for term in ckpt.terms:
            lines.append(f"  {term.name} = {term.bytes:,} B = {term.formula} [{term.source}]")
        lines.append("")
    return lines
