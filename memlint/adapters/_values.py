"""Argument values as the trainers' parsers read them (HfArgumentParser, TRL, the RL trainers'
argparse): a boolean flag and a whole number. Shared by adapters/trainer_args.py and the RL
readers built on it."""
from __future__ import annotations

from memlint.keys import MAX_INT, parse_bool

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional


def to_bool(value: Any) -> Optional[bool]:
    """HfArgumentParser's string_to_bool (yes/no, true/false, t/f, y/n, 1/0); a bare flag
    (`--bf16`) is True. None: not a bool."""
    if value is None or value == "":
        return True
    return parse_bool(value)


def to_int(value: Any) -> Optional[int]:
    """A whole number up to keys.MAX_INT (2**53; larger is a typo or fuzz), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) <= MAX_INT else None
    try:
        number = float(str(value).strip())
    except (ValueError, OverflowError):
        return None
    if not number.is_integer() or abs(number) > MAX_INT:
        return None
    return int(number)
