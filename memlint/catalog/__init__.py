"""memlint.catalog."""
