"""Names the RL model's modules and rules share: which phases are length-independent, which
algorithms are preference training."""

# phases whose size does not depend on the generated lengths (the engine's budget is fixed)
LENGTH_INDEPENDENT = ("weight_sync", "rollout")
PREFERENCE = ("dpo", "kto", "orpo", "simpo", "ipo", "cpo", "reward")
