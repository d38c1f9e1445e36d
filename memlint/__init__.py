"""memlint: catch out-of-memory and launch-time errors in LLM training configs before submission."""

__version__ = "0.1.0"
