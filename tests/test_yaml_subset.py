"""memlint.yaml_subset reads a YAML document exactly as loaders' PyYAML path does, or declines it.

The subset reader spares a one-file YAML check `import yaml` (issue 29). It may decline anything,
but what it reads must be what `loaders._load_pyyaml` gives, with libyaml's loader and with the
pure-Python one: the values to the type (1, 1.0 and True are equal in Python; repr tells them
apart), the positions of every key and item in the same order, and the duplicate-key diagnostics.
It must decline every document PyYAML rejects. Checked on every YAML file under fixtures/ and on
generated documents (hypothesis, and a seeded run that also pins how many it reads), which mix
the subset with what lies outside it and with broken text.
"""
import glob
import os
import random
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlint import loaders, yaml_subset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import speed  # noqa: E402 - bench/speed.py: the files its YAML rows check


def _outcome(doc) -> tuple:
    return repr(doc.data), list(doc.positions.items()), [repr(d) for d in doc.diagnostics]


def _pyyaml(text: str, path: str, python: bool) -> tuple:
    limit = loaders._C_YAML_MAX_DEPTH
    if python:   # the pure-Python loader, which load_yaml takes for very deep or long lines
        loaders._C_YAML_MAX_DEPTH = -1
    try:
        return _outcome(loaders._load_pyyaml(path, text))
    finally:
        loaders._C_YAML_MAX_DEPTH = limit


def _agrees(text: str, path: str = "config.yaml") -> bool:
    """True when the subset read the document (as both PyYAML loaders do); False when it
    declined."""
    if yaml_subset.read(text, loaders.MAX_ITEM_POSITIONS) is None:
        return False
    ours = _outcome(loaders.load_yaml(path, text))
    assert ours == _pyyaml(text, path, python=False), text
    assert ours == _pyyaml(text, path, python=True), text
    return True


def test_every_yaml_fixture_is_read_as_pyyaml_reads_it():
    paths = sorted(glob.glob(os.path.join(ROOT, "fixtures", "**", "*.yaml"), recursive=True)
                   + glob.glob(os.path.join(ROOT, "fixtures", "**", "*.yml"), recursive=True))
    assert len(paths) > 500
    read = 0
    for path in paths:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            read += _agrees(handle.read(), path)
    # the subset is the common case: the configs of every tool memlint reads are in it
    assert read > len(paths) * 0.9, (read, len(paths))


def test_the_files_speed_checks_are_in_the_subset():
    names = [fixture for _, copies, checked in speed.FILES if checked.endswith((".yaml", ".yml"))
             for fixture, _ in copies]
    assert len(names) >= 6
    for name in names:
        with open(os.path.join(ROOT, "fixtures", name), encoding="utf-8") as handle:
            assert _agrees(handle.read()), name


INSIDE = [
    "", "# c\n\n", "---\na: 1", "--- # c\na: 1\n", "a: 1", "a:", "a:\n", "a: ~", "a: [] # c",
    "a: {}", "- a\n- b", "-\n- x", "a:\n- x\n- y\nb: 2", "a:\n  - x\n  -\n  - y",
    "- a: 1\n  b: 2\n- c", "- - x\n  - y", "-\n  a: 1", "a:\n  b:\n    c: 1\n  d: 2",
    "  a: 1\n  b: 2", "a: 'it''s'", 'a: "x\\ny \\"q\\" \\\\ \\/ \\t"', "'a': 1\n\"b\": 2",
    "a: b c  d   ", "a: b # c", "a: b#c", "a: :4096:8", "--x: 1", "a: ${X}/y", "a: [1, 2.5, x]",
    "a: [1,\n  2,\n]", "{\n  # c\n  \"a\": 1,\n  \"b\": [0.9, 0.95],\n  \"c\": {\"d\": true},\n}",
    "a: {\"b\":1}", "a: 1\na: 2", "a:\n  b: 1\na:\n  b: 2", "1: x\ntrue: y", "on: 1\ny: 2",
    "a: 1e-5\nb: 1.0e-5\nc: .5\nd: -.5\ne: 1.\nf: 012\ng: 08\nh: 1_000\ni: 0o7\nj: -0.0",
    "a: 00:03:50\nb: 1.5e5\nc: 1__0\nd: 0_9", "a: <|x|>", "hello", "a: é 中文", "x",
]
OUTSIDE = [
    "a: &x 1\nb: *x", "a: !!str 1", "a: |\n  x", "a: >\n  x", "? a\n: b", "<<: {a: 1}",
    "a: b\n  c", "a: 'b\n  c'", "a: \"\\x41\"", "a: 2020-01-01", "a: 0x1F", "a: 0b1",
    "a: 1:30", "a: .inf", "a: .nan", "a:\tb", "a: 1\r\n", "a: 1\n---\nb: 2", "%YAML 1.1\n---\na: 1",
    "a: [b: c]", "a: [http://x]", "a: {b}", "a: b: c", "a: - b", "- a\nb: 1", "a: 1\n b: 2",
    "a: [1, 2", "\ufeffa: 1", "a: \x85", "a: =", "a: [a\n b]", "a: {a: 1, b: {c: 2}", "a: 1\n...",
    "k: " + "1" * 200, "a: [1,,2]", "a" * 1100 + ": 1", "[a]: b", "a: \"x\"y",
]


def test_what_lies_inside_is_read():
    for text in INSIDE:
        assert _agrees(text), text


def test_what_lies_outside_is_declined():
    for text in OUTSIDE:
        assert yaml_subset.read(text, loaders.MAX_ITEM_POSITIONS) is None, text


def test_long_lists_keep_the_positions_of_their_first_items_only():
    block = "a:\n" + "".join(f"- {i}\n" for i in range(1200))
    flow = "a: [" + ", ".join(str(i) for i in range(1200)) + "]"
    for text in (block, flow):
        assert _agrees(text)
        positions = loaders.load_yaml("config.yaml", text).positions
        assert ("a", loaders.MAX_ITEM_POSITIONS - 1) in positions
        assert ("a", loaders.MAX_ITEM_POSITIONS) not in positions


def test_duplicate_keys_are_reported_as_pyyaml_path_reports_them():
    for path in ("config.yaml", "run.memlint.yaml"):
        doc = loaders.load_yaml(path, "a: 1\nb:\n  c: 1\n  c: 2\na: 3\n")
        assert doc.data == {"a": 3, "b": {"c": 2}}
        assert [(d.code, d.line, d.column, d.key) for d in doc.diagnostics] == [
            ("ML010", 4, 3, "b.c"), ("ML010", 5, 1, "a")]
        assert _agrees(doc.text, path)


# ---- generated documents

KEYS = ["a", "b", "k", "1", "true", "on", "y", "null", "--num-layers", "a b", "1.0", "x:y", "-k",
        "?k", "é", "<<", "'q'", '"d"', "[l]", "&a", "a #c", "''", '""', '"a: b"', "'x''y'", "a:b"]
SCALARS = [
    "a", "foo bar", "x:y", "http://h:80/p", "${VAR}", "${a:${b}}", ":4096:8", "-x", "--flag", "?q",
    "a#b", "1", "-1", "+1", "0", "-0", "012", "08", "0o7", "0x1F", "0b101", "1_000", "1e-5",
    "1.0e-5", "1.5e5", "1.", ".5", "-.5", "+.5", "1.0", "-0.0", "3.14", "1:30", "1:30.5",
    "00:03:50", ".inf", "-.inf", ".nan", "yes", "No", "ON", "off", "y", "n", "true", "False",
    "TRUE", "null", "Null", "~", "2020-01-01", "2020-1-1 10:00:00", "<<", "=", "<|eot|>",
    "a b  c", "é", "中文", "a,b", "[x", "{y", "a]", "9,50,1", "1__0", "0_", "0_9", "1_.5", "._5",
    "1.5_e-3", "1.e+5", "1.5E-3", "1e", "'", '"', "a'b", 'a"b', "!tag", "&a", "*a", "|", ">",
    "@x", "`x", "%x", "#c", "a #c", "a: b", "- a", "-", "?", ":", "1_000.5", "0.1_0", "6.0e-5",
    "", " ", "a\\b", "\\n", "1.2.3", "./out", "~/x", "-1.5e-3", "+0.0", "0.", "9" * 30, "😀", "a😀b",
]
MARKS = " :-#'\"[]{},\n\t?&*!|>"


def _scalar(rnd: random.Random, flow: bool) -> str:
    text = rnd.choice(SCALARS)
    style = rnd.random()
    if style < 0.6:
        return text
    if style < 0.8:
        return "'" + text.replace("'", "''") + "'"
    body = text.replace("\\", "\\\\").replace('"', '\\"')
    if rnd.random() < 0.2:
        body += rnd.choice(["\\n", "\\t", "\\/", "\\x41", "\\u00e9", "\\0", "\\ "])
    return '"' + body + '"'


def _tree(rnd: random.Random, depth: int):
    roll = rnd.random()
    if depth >= 4 or roll < 0.45:
        return ("scalar",)
    size = rnd.choice([0, 1, 1, 2, 2, 3, 4])
    if roll < 0.75:
        return ("map", [(rnd.choice(KEYS), _tree(rnd, depth + 1)) for _ in range(size)])
    return ("seq", [_tree(rnd, depth + 1) for _ in range(size)])


def _flow(rnd: random.Random, node, indent: int) -> str:
    def gap() -> str:
        if rnd.random() < 0.15:
            return (" # c" if rnd.random() < 0.3 else "") + "\n" + " " * rnd.randint(0, indent + 3)
        return " " * rnd.choice([0, 1, 1, 2])

    if node[0] == "scalar":
        return _scalar(rnd, flow=True)
    if node[0] == "seq":
        items = [_flow(rnd, child, indent) for child in node[1]]
        opening, closing = "[", "]"
    else:
        items = [f"{rnd.choice(KEYS)}:{rnd.choice([' ', ' ', '  ', ''])}{_flow(rnd, child, indent)}"
                 for _, child in node[1]]
        opening, closing = "{", "}"
    body = ("," + gap()).join(items)
    trailing = "," if items and rnd.random() < 0.2 else ""
    return opening + gap() + body + trailing + gap() + closing


def _block(rnd: random.Random, node, indent: int) -> list:
    """Lines of `node` as a block collection at `indent` (a scalar or a flow collection as a
    one-line value)."""
    lines = []
    step = rnd.choice([1, 2, 2, 2, 3, 4])
    pad = " " * indent
    entries = node[1] if node[0] != "scalar" else []
    if node[0] == "scalar" or not entries or rnd.random() < 0.15:
        return [pad + (_flow(rnd, node, indent) if node[0] != "scalar" else _scalar(rnd, False))]
    for entry in entries:
        if rnd.random() < 0.1:
            lines.append(" " * rnd.randint(0, indent + 4) + rnd.choice(["# c", "", "#"]))
        if node[0] == "map":
            key, child = entry
            head = pad + key + ":"
        else:
            child = entry
            head = pad + "-"
        simple = child[0] == "scalar" or not child[1] or rnd.random() < 0.2
        if simple:
            value = _flow(rnd, child, indent) if child[0] != "scalar" else _scalar(rnd, False)
            line = head + rnd.choice([" ", " ", "  "]) + value
            if rnd.random() < 0.1:
                line = head + ("" if rnd.random() < 0.5 else " ")   # an empty value
            if rnd.random() < 0.15:
                line += rnd.choice([" # c", "  #c", "#c", " ", "   "])
            lines.append(line)
        elif node[0] == "seq" and rnd.random() < 0.5:
            inner = _block(rnd, child, indent + 2)   # compact: `- key: value` / `- - x`
            lines.append(head + " " + inner[0][indent + 2:])
            lines.extend(inner[1:])
        else:
            lines.append(head + (" # c" if rnd.random() < 0.1 else ""))
            indentless = node[0] == "map" and child[0] == "seq" and rnd.random() < 0.4
            lines.extend(_block(rnd, child, indent if indentless else indent + step))
    return lines


def generated(rnd: random.Random) -> str:
    node = ("map" if rnd.random() < 0.7 else "seq", [])
    tree = _tree(rnd, 0)
    if tree[0] != "scalar":
        node = tree
    if rnd.random() < 0.15:
        text = _flow(rnd, node, 0)
    else:
        text = "\n".join(_block(rnd, node, rnd.choice([0, 0, 0, 1, 2])))
    if rnd.random() < 0.1:
        text = "---\n" + text
    if rnd.random() < 0.3:
        text = "# head\n\n" + text + "\n"
    for _ in range(rnd.choice([0, 0, 0, 1, 2])):   # broken or odd text
        at = rnd.randint(0, len(text))
        if rnd.random() < 0.5 and text:
            text = text[:at] + text[at + 1:]
        else:
            text = text[:at] + rnd.choice(MARKS) + text[at:]
    return text


@settings(max_examples=600, deadline=None)
@given(st.randoms(use_true_random=False))
def test_generated_documents_agree_with_pyyaml(rnd):
    _agrees(generated(rnd))


def test_a_seeded_run_reads_most_generated_documents():
    rnd = random.Random(29)
    read = sum(_agrees(generated(rnd)) for _ in range(800))
    assert read > 300, read   # not a test of declining alone


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet="0123456789_.:+-eEbxo inINfaTtZ", min_size=1, max_size=14))
def test_plain_scalars_resolve_as_pyyaml_resolves_them(text):
    _agrees("k: " + text)
    _agrees("- " + text)
    _agrees(text + ": v")


@settings(max_examples=800, deadline=None)
@given(st.text(alphabet=" \n-:#'\"[]{},ab1.\\", max_size=30))
def test_broken_text_is_declined_or_agrees(text):
    _agrees(text)


@pytest.mark.parametrize("name", ["yaml", "yaml.constructor"])
def test_reading_the_subset_imports_no_pyyaml(tmp_path, name):
    code = ("import sys\nfrom memlint.loaders import load_yaml\n"
            "load_yaml('a.yaml', 'a: [1, 2]\\nb:\\n  - c: d\\n')\n"
            f"print({name!r} in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=ROOT), check=True)
    assert out.stdout.strip() == "False"
