"""Start-up fast paths that answer as the patterns they stand in front of (memlint/runs.py
run_file_name, memlint/rules is_code / is_name, memlint/keys.py to_bytes): each compared with its
pattern on the names and values around the boundary, and on every character."""
import sys

import pytest

from memlint import keys, rules, runs

NAMES = ["memlint.toml", "MEMLINT.TOML", "a.memlint.yaml", "a.memlint.yml", "a.Memlint.YML",
         ".memlint.toml", "x.memlint.tomlx", "memlint.toml\n", "ds_config.json", "toml", "yml",
         "a.memlint.json", "memlint.yaml", "x.memlint.yaml\n", "", "pyproject.toml"]


@pytest.mark.parametrize("name", NAMES)
def test_run_file_name_is_the_pattern(name):
    assert runs.run_file_name(name) == bool(runs.RUN_FILE_NAMES.match(name))


CODES = ["ML101", "ML10", "ML1011", "ml101", "ML10a", "ML101\n", "ML101\n\n", "ML\u0661\u0662\u0663",
         "ML¹²³", "", "XML101", " ML101"]
RULE_NAMES = ["exceeds-gpu-memory", "a", "a1-b2", "-a", "a-", "a--b", "1a", "A-b", "a_b", "a-b\n",
              "a-b\n\n", "", "é", "a-b-c-d", "a1"]


@pytest.mark.parametrize("code", CODES)
def test_is_code_is_the_pattern(code):
    assert rules.is_code(code) == bool(rules.CODE_RE.match(code))


@pytest.mark.parametrize("name", RULE_NAMES)
def test_is_name_is_the_pattern(name):
    assert rules.is_name(name) == bool(rules.NAME_RE.match(name))


def test_every_character_that_could_matter_alone_and_after_a_letter():
    """ASCII, every character Python calls a digit (\\d is [Nd]) or a cased letter: the others
    are in no class either test accepts."""
    odd = [c for c in map(chr, range(128, sys.maxunicode + 1))
           if c.isdigit() or c.isdecimal() or c.lower() != c.upper()]
    for c in [chr(i) for i in range(128)] + odd:
        for text in (c, "a" + c, "ab-" + c, "ML10" + c):
            assert rules.is_name(text) == bool(rules.NAME_RE.match(text)), repr(text)
            assert rules.is_code(text) == bool(rules.CODE_RE.match(text)), repr(text)


SIZES = ["4MiB", "80GB", "1024", "4mib", "4MIB", "10k", "1t", "2Ti", "3b", "4bk", "4ib", "4 MiB",
         " 4MiB", "4.5GiB", "1e3", "0", "0MiB", "٣MiB", "4KiB", "4\u212aiB", "", "MiB", "4MiBs",
         "9" * 70, "12345678901234567890GiB"]


@pytest.mark.parametrize("text", SIZES)
def test_to_bytes_reads_a_size_as_the_pattern_does(text):
    def by_pattern(value):
        match = keys._SIZE.fullmatch(value) if len(value) <= keys.MAX_SIZE_CHARS else None
        if not match:
            raise ValueError("no size")
        number = float(match.group(1)) * keys._UNITS[(match.group(2) or "").lower()]
        if number <= 0 or not number <= keys.MAX_BYTES:
            raise ValueError("out of range")
        return int(number)

    try:
        expected = by_pattern(text)
    except ValueError:
        with pytest.raises(ValueError):
            keys.to_bytes(text)
    else:
        assert keys.to_bytes(text) == expected
