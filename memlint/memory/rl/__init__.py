"""RL post-training on GPUs shared by its roles: the peak is a maximum over the phases of a step.

`is_rl(scenario)` says whether the scenario describes an RL run (an inference engine in the loop,
a critic, a reference or reward model); `rl_estimate(scenario)` builds the run (memory/rl/plan.py:
roles, engine, tokens per pass) and returns an Estimate whose stages are the actor's pipeline
stages, each with every phase of the step (memory/rl/phases.py) and the host RAM the offloaded
roles take per rank. The terms come from memory/rl/engine.py (the rollout engine),
memory/rl/passes.py (no-grad passes, RL logits) and memlint's training model (the updates).
"""
from __future__ import annotations

from memlint.memory.rl.names import LENGTH_INDEPENDENT, PREFERENCE, is_rl

__all__ = ["LENGTH_INDEPENDENT", "PREFERENCE", "is_rl", "rl_estimate"]


def rl_estimate(scenario, context=None):
    """The RLEstimate of `scenario` (memory/rl/step.py)."""
    # start-up: the RL model and the training model it wraps load only for an RL estimate
    from memlint.memory.rl.step import rl_estimate as estimate

    return estimate(scenario, context)
