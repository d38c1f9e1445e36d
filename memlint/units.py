"""Byte counts for people: the one place where integers become GiB or GB (reporters, messages)."""
from __future__ import annotations

UNITS = {"GiB": 1024**3, "GB": 10**9}


def fmt(nbytes: int, units: str = "GiB", digits: int = 1) -> str:
    """12884901888 -> '12.0 GiB'. Small values keep two significant decimals."""
    value = nbytes / UNITS[units]
    if value and abs(value) < 0.1:
        return f"{value:.3f} {units}"
    return f"{value:.{digits}f} {units}"


def value(nbytes: int, units: str = "GiB") -> float:
    return nbytes / UNITS[units]
