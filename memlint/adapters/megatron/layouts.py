"""Megatron's layer-pattern flags, read without eval: `--moe-layer-freq` (an int or a list
expression such as `[0]*3+[1]*58`) and `--pipeline-model-parallel-layout` (`Et*2|(tt|)*5t|tmL`)."""
from __future__ import annotations

import re

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional


MAX_PATTERN = 100_000  # layers in a --moe-layer-freq list; no model has more


def parse_layer_freq(text: str, layers: Optional[int]) -> Any:
    """`--moe-layer-freq`: an int k (every k-th layer is MoE) or a list expression such as
    `[0]*3+[1]*58` / `([1]*2+[0])*4`, read by a small parser (Megatron eval()s it; we never do).
    Returns an int, a list of 0/1, or None when unreadable."""
    text = text.strip().strip("'\"")
    if re.fullmatch(r"\d+", text):
        k = int(text)
        if k <= 0:
            return None
        return k
    tokens = re.findall(r"\d+|[\[\]()*+,]|\S", text)
    pos = [0]

    def peek() -> str:
        return tokens[pos[0]] if pos[0] < len(tokens) else ""

    def take(expected: Optional[str] = None) -> str:
        token = peek()
        if expected is not None and token != expected:
            raise ValueError(token)
        pos[0] += 1
        return token

    def atom() -> list:
        token = peek()
        if token == "[":
            take("[")
            items = []
            while peek() != "]":
                number = take()
                if not number.isdigit():
                    raise ValueError(number)
                items.append(int(number))
                if peek() == ",":
                    take(",")
            take("]")
            result = items
        elif token == "(":
            take("(")
            result = expr()
            take(")")
        else:
            raise ValueError(token)
        while peek() == "*":
            take("*")
            count = take()
            # the size is checked before the list is built: `[0]*100000*3000` is refused, not
            # built (2.3 GB)
            if not count.isdigit() or len(count) > 6 or len(result) * int(count) > MAX_PATTERN:
                raise ValueError(count)
            result = result * int(count)
        return result

    def expr() -> list:
        result = atom()
        while peek() == "+":
            take("+")
            result.extend(atom())  # in place: `a+b+c+...` stays linear
            if len(result) > MAX_PATTERN:
                raise ValueError("too long")
        return result

    try:
        pattern = expr()
        if pos[0] != len(tokens):
            return None
    except (ValueError, IndexError, RecursionError):
        return None
    return [1 if x else 0 for x in pattern]


def parse_layout(text: str) -> Optional[list]:
    """`--pipeline-model-parallel-layout` (e.g. `Et*2|(tt|)*5t|tmL`) -> stages, each a string of
    layer letters (E embedding, t transformer layer, m MTP, L loss), as Megatron unrolls it."""
    layout = text.strip().strip("'\"").replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        grown = [len(layout)]

        def unroll(match) -> str:
            count = int(match.group(2)) if len(match.group(2)) <= 6 else 10**6
            grown[0] += len(match.group(1)) * count
            if count > 10_000 or grown[0] > 1_000_000:  # checked before the text is built
                raise ValueError("repeat count too large")
            return match.group(1) * count
        try:
            layout = re.sub(pattern, unroll, layout)
        except ValueError:
            return None
        if len(layout) > 1_000_000:
            return None
    stages = layout.split("|")
    if any(set(stage) - set("EtmL") for stage in stages):
        return None
    return stages
