"""estimate(scenario) -> Estimate: the per-GPU memory of one run, per pipeline stage, term by term.

A training run is one training step (memory/training.py `training_estimate`: the phases of a
step, the terms of each, the peak); an RL or preference run is a maximum over the phases of its
step (memory/rl), each a training or pass estimate of a role. `EstimateError` and
`UnsupportedModel` are re-exported from memory/model.py.
"""
from __future__ import annotations

from memlint.memory.model import EstimateError, UnsupportedModel
from memlint.memory.result import Estimate
from memlint.memory.rl import is_rl, rl_estimate
from memlint.memory.training import training_estimate

__all__ = ["Estimate", "EstimateError", "UnsupportedModel", "estimate", "training_estimate"]


def estimate(scenario, context=None) -> Estimate:
    """The Estimate of `scenario`; `context`: its resolved context (memory/context.py) when the
    caller already has one, so that nothing is resolved twice."""
    if is_rl(scenario):
        return rl_estimate(scenario, context)
    return training_estimate(scenario, context)
