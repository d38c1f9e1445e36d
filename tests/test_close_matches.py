"""memlint.keys.close_matches / suggest give difflib.get_close_matches' answer (cutoff 0.6) while
aligning only the candidates whose bound can still win (memlint/keys.py)."""
import difflib
import random

from memlint import keys
from memlint.adapters.megatron import context
from memlint.catalog import hub


def _typo(rnd: random.Random, word: str) -> str:
    letters = list(word)
    for _ in range(rnd.randint(0, 8)):
        at = rnd.randint(0, len(letters))
        kind = rnd.randint(0, 2)
        if kind == 0:
            letters.insert(at, rnd.choice("abcdefghijklmnopqrstuvwxyz_-.0123456789/"))
        elif letters:
            letters[min(at, len(letters) - 1):min(at, len(letters) - 1) + (kind == 1)] = (
                [] if kind == 1 else [rnd.choice("aeiou-_")])
    return "".join(letters)


def test_the_answers_are_difflib_s():
    flags = list(context.all_flags())
    ids = [entry["id"].lower() for entry in hub.entries()]
    rnd = random.Random(29)
    for round_ in range(80):
        pool = flags if round_ % 2 else ids
        name = _typo(rnd, rnd.choice(pool))
        candidates = rnd.sample(pool, min(len(pool), rnd.choice([5, 50, 200])))
        candidates += candidates[:2]   # duplicates, as difflib takes them
        for n in (1, 3):
            assert keys.close_matches(name, candidates, n) == difflib.get_close_matches(
                name, candidates, n=n, cutoff=0.6), (name, n)
        expected = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
        if 0 < len(name) <= keys.MAX_SUGGEST_CHARS:
            assert keys.suggest(name, tuple(candidates)) == (expected[0] if expected else None)


def test_corner_cases():
    assert keys.close_matches("", ["", "a"]) == difflib.get_close_matches("", ["", "a"])
    assert keys.close_matches("abc", []) == []
    assert keys.suggest("", ("a",)) is None
    assert hub.close_matches("lama-3.1-8b", n=2) == hub.close_matches("LAMA-3.1-8B", n=2)


def test_a_fixed_table_gives_difflib_s_answers():
    """A tuple of candidates (a fixed table such as Megatron's flags) is bounded through its
    characters as bits, made once per table: the same answers as difflib and as a list, with
    duplicates and characters no candidate has."""
    flags = context.all_flags()
    assert isinstance(flags, tuple)
    rnd = random.Random(31)
    for round_ in range(30):
        name = _typo(rnd, rnd.choice(flags)) + ("é" if round_ % 7 == 0 else "")
        table = flags if round_ % 3 else tuple(rnd.sample(flags, 40)) + flags[:3]
        for n in (1, 3):
            expected = difflib.get_close_matches(name, list(table), n=n, cutoff=0.6)
            assert keys.close_matches(name, table, n) == expected, (name, n)
            assert keys.close_matches(name, list(table), n) == expected, (name, n)
