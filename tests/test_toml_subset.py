"""memlint.toml_subset reads a TOML document exactly as tomllib does, or declines it (None).

The subset reader spares a one-file check `import tomllib` (issue 29). It may decline anything,
but what it reads must be what tomllib.loads gives, to the type and the key order, and it must
decline every document tomllib rejects. Checked on every TOML file under fixtures/ and on
generated documents that mix the subset with what lies outside it.
"""
import glob
import os
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from memlint import toml_subset
from memlint.loaders import load_toml

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REJECTED = "rejected by tomllib"


def _tomllib(text: str):
    try:
        return repr(tomllib.loads(text))
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        return REJECTED


def _agrees(text: str) -> bool:
    """True when the subset read the document (as tomllib does); False when it declined.
    repr compares the types too (1, 1.0 and True are equal in Python) and the key order."""
    ours = toml_subset.read(text)
    if ours is None:
        return False
    assert repr(ours) == _tomllib(text), text
    return True


def test_every_toml_fixture_is_read_as_tomllib_reads_it():
    paths = sorted(glob.glob(os.path.join(ROOT, "fixtures", "**", "*.toml"), recursive=True))
    assert len(paths) > 50
    read = 0
    for path in paths:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            read += _agrees(handle.read())
    # the subset is the common case: torchtitan's job files and memlint.toml are in it
    assert read > len(paths) // 2, (read, len(paths))


def test_the_files_speed_checks_are_in_the_subset():
    for name in ("adapters/torchtitan/good/llama3_70b.toml",
                 "examples/llama3-8b-h100.memlint.toml"):
        with open(os.path.join(ROOT, "fixtures", name), encoding="utf-8") as handle:
            assert _agrees(handle.read()), name


def test_what_lies_outside_is_declined():
    outside = [
        'a = "x\\ty"', "a = 1979-05-27", "a = 07:32:00", "a = 1_000", "a = 0x1F", "a = inf",
        "a = nan", "a = 1.", "a = .5", "a = 01", 'a = """x"""', "a = '''x'''", "a = {b = 1}",
        "a.b = 1", '"a" = 1', "[[a]]", '["a"]', "a = [\n1]", "a = [[1]]", "a = [1 2]",
        "a = [,]", "a = 1\na = 2", "[a]\n[a]", "a = 1\n[a]", "[a]\nb = 1\n[a.b]",
        "[a.b]\n[a]\nb = 1", "a = 1\r\n", "a = 1 x", "a =", "= 1", "[a", "[a]x", "[a.]",
        "a = \"x", "a = 'x\\'y'z", "\ufeffa = 1", "a = 1 # \x01", "a = truex", "a = +",
        "a = 1" + "0" * 200,
    ]
    for text in outside:
        assert toml_subset.read(text) is None, text


def test_what_lies_inside_is_read():
    inside = [
        "", "# c\n\n", "a = 1", "a=1", "  a = -0", "a = +5", "a = 1.5e-4", "a = 1E8", "a = -0.0",
        "a = 1e1000", "a = true\nb = false", "a = 'c:\\\\x'", 'a = "é #]"', "a = []",
        "a = [ 1, 'x', \"y\", 2.5, true, ]", "1 = 2", "[a.b]\nc = 1\n[a]\nd = 2\n[a.b.e]",
        "[ a . b ]  # c\nx = 1", "a = 1  # c", "[a-b_c]\ntrue = 1",
    ]
    for text in inside:
        assert _agrees(text), text


def test_load_toml_reads_positions_as_before(tmp_path):
    text = "# c\n[model]\nname = 'llama3'\n\n[training]\nseq_len = 8192  # x\n"
    doc = load_toml(str(tmp_path / "x.toml"), text)
    assert doc.data == tomllib.loads(text) and not doc.diagnostics
    assert doc.positions[("training", "seq_len")] == (6, 1)


_KEYS = st.sampled_from(["a", "b", "c", "a-b", "1", "true", '"q"', "a.b", "b.c", "x y", ""])
_VALUES = st.sampled_from([
    "1", "-2", "+0", "0", "01", "1.5", "1e5", "-1.5E-3", "1.", ".5", "1_0", "0x1", "inf",
    "true", "false", "True", '"s"', '"a\\"b"', "'lit'", "'a\\b'", '""', '"""m"""', "'''m'''",
    '"é"', "[]", "[1, 2]", "[1, 'x', ]", "[[1]]", "[1,,]", "[1 2]", "{a = 1}", "1979-05-27",
    "07:32:00", '"x', "[1", "x",
])
_SPACE = st.sampled_from(["", " ", "\t", "  "])
_COMMENT = st.sampled_from(["", " # c", "#", " # ]=[", " # \x7f"])


@st.composite
def _line(draw):
    kind = draw(st.sampled_from(["kv", "kv", "kv", "header", "comment", "blank", "noise"]))
    space, comment = draw(_SPACE), draw(_COMMENT)
    if kind == "kv":
        return (f"{space}{draw(_KEYS)}{draw(_SPACE)}={draw(_SPACE)}{draw(_VALUES)}"
                f"{draw(_SPACE)}{comment}")
    if kind == "header":
        path = ".".join(draw(st.lists(_KEYS, min_size=1, max_size=3)))
        brackets = draw(st.sampled_from([("[", "]"), ("[", "]"), ("[[", "]]"), ("[", "")]))
        return f"{space}{brackets[0]}{path}{brackets[1]}{comment}"
    if kind == "comment":
        return f"{space}{comment or '#'}"
    if kind == "blank":
        return space
    return draw(st.text(alphabet="ab=[]\"'#.,1 \t\r", max_size=12))


@settings(max_examples=400)
@given(st.lists(_line(), max_size=12), st.sampled_from(["\n", "\r\n"]))
def test_generated_documents_are_read_as_tomllib_reads_them_or_declined(lines, end):
    text = end.join(lines)
    ours = toml_subset.read(text)
    if ours is not None:
        assert repr(ours) == _tomllib(text), text
