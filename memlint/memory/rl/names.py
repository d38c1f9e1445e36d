"""Names the RL model's modules and rules share: which phases are length-independent, which
algorithms are preference training, and whether a scenario is an RL run (`is_rl`)."""

# phases whose size does not depend on the generated lengths (the engine's budget is fixed)
LENGTH_INDEPENDENT = ("weight_sync", "rollout")
PREFERENCE = ("dpo", "kto", "orpo", "simpo", "ipo", "cpo", "reward")


def is_rl(scenario) -> bool:
    """Whether the scenario describes an RL run: an inference engine in the loop, a critic, a
    reference or reward model, paired samples or a preference algorithm."""
    rl = scenario.rl
    return (scenario.engine.name != "none" or rl.critic or rl.reference != "none"
            or bool(rl.reward_model) or rl.paired or (rl.algorithm or "") in PREFERENCE)
