"""The memory model: pure functions from a Scenario to an Estimate of per-GPU bytes (no I/O)."""
