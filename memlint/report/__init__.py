"""memlint.report."""
