"""The divisors of a whole number, at a cost independent of its size.

The planner's options are divisors: of the GPU count (tp, pp, cp), of the heads and experts, and
of the per-replica batch (micro batches). Trial division up to the square root made `plan` grow
with the square root of the global batch (2**50 took 90 s, issue 19). Factoring first (trial
division by small primes, then Miller-Rabin and Pollard's rho, Brent's variant) costs about
n**(1/4) steps at worst: a few thousand for the 2**53 that every count is limited to
(memlint.keys.MAX_INT), and nothing for the smooth numbers real configurations use.
"""
from __future__ import annotations

import math

_SMALL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47)
# Miller-Rabin with the first 12 primes as bases is exact below 3.3e24 (Sorenson and Webster
# 2015), far above 2**53.
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
_MR_LIMIT = 3_317_044_064_679_887_385_961_981


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in _SMALL_PRIMES:
        if n % p == 0:
            return n == p
    if n >= _MR_LIMIT:
        raise ValueError(f"{n} is beyond the exact primality test")
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _rho(n: int) -> int:
    """A non-trivial factor of the odd composite n (Brent's cycle finding; deterministic: the
    constants are tried in order)."""
    for c in range(1, n):
        y, r, q, g = 2, 1, 1, 1
        x = ys = y
        while g == 1:
            x = y
            for _ in range(r):
                y = (y * y + c) % n
            k = 0
            while k < r and g == 1:
                ys = y
                for _ in range(min(128, r - k)):
                    y = (y * y + c) % n
                    q = q * abs(x - y) % n
                g = math.gcd(q, n)
                k += 128
            r *= 2
        if g == n:
            g = 1
            while g == 1:
                ys = (ys * ys + c) % n
                g = math.gcd(abs(x - ys), n)
        if g != n:
            return g
    raise ArithmeticError(f"no factor of {n} found")  # unreachable for composite n


def factorize(n: int) -> dict:
    """{prime: exponent} of n >= 1."""
    if n < 1:
        raise ValueError("only positive numbers have this factorisation")
    out: dict = {}
    for p in _SMALL_PRIMES:
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
    stack = [n] if n > 1 else []
    while stack:
        m = stack.pop()
        if is_prime(m):
            out[m] = out.get(m, 0) + 1
            continue
        f = _rho(m)
        stack.extend((f, m // f))
    return dict(sorted(out.items()))


def divisors(n: int) -> list:
    """Every divisor of n >= 1, ascending."""
    found = [1]
    for p, e in factorize(n).items():
        found = [d * p ** k for d in found for k in range(e + 1)]
    return sorted(found)
