"""memlint.rules."""
