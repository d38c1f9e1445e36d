"""loaders._pyyaml: PyYAML imported with its import-time patterns compiled on first use (start-up,
issue 29) reads every document as PyYAML imported plainly does, and leaves `re` as it found it."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Documents that reach each of PyYAML's patterns: the resolver's implicit tags (bool, float, int,
# merge, null, timestamp, value, yaml), the constructor's timestamp, and the Python reader's
# printable-character check (an error, and a non-ASCII document that passes it).
DOCUMENTS = [
    "a: yes\nb: No\nc: on\nd: 1.5e-3\ne: 5e-5\nf: .inf\ng: -.NaN\nh: 0x1F\ni: 0o17\nj: 1_000\n"
    "k: 0b101\nl: 1:30\nm: ~\nn: null\no: 2024-01-02\np: 2001-12-14t21:59:43.10-05:00\n",
    "q: =\n",
    "base: &b {x: 1, y: [1, 2]}\nchild:\n  <<: *b\n  y: 3\n",
    "text: \"caf\\u00e9 \\U0001F600\"\nplain: naïve\n",
    "bad: \"\x07\"\n",
    "- [a, b, {c: d}]\n- !!str 12\n- !!float 3\n- !!binary aGk=\n",
]
PROBE = """
import json, re, sys
sys.path.insert(0, {root!r})
compile_before = re.compile
if {lazy}:
    from memlint.loaders import _pyyaml
    yaml = _pyyaml()
    assert re.compile is compile_before, "re.compile not restored"
    # PyYAML's own patterns are stand-ins, and the big one is not compiled by the import
    assert type(yaml.reader.Reader.NON_PRINTABLE).__name__ == "LazyPattern"
    assert "_compiled" not in yaml.reader.Reader.NON_PRINTABLE.__dict__
    assert isinstance(re.compile("x"), re.Pattern)
else:
    import yaml
out = []
for text in json.loads(sys.argv[1]):
    for loader in (yaml.SafeLoader, yaml.CSafeLoader):
        try:
            out.append(repr(yaml.load(text, Loader=loader)))
        except yaml.YAMLError as exc:
            out.append(type(exc).__name__ + ": " + str(exc))
print(json.dumps(out))
"""


def _read(lazy: bool) -> list:
    result = subprocess.run([sys.executable, "-c", PROBE.format(root=ROOT, lazy=lazy),
                             json.dumps(DOCUMENTS)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_lazily_imported_pyyaml_reads_every_document_as_plain_pyyaml():
    lazy, plain = _read(True), _read(False)
    assert lazy == plain
    assert any(answer.startswith("ReaderError") for answer in plain)   # the reader's pattern ran
    assert "datetime.date(2024, 1, 2)" in plain[0]                      # the timestamp's


def test_a_yaml_file_is_read_through_it(tmp_path):
    from memlint.loaders import load_yaml

    doc = load_yaml(str(tmp_path / "x.yaml"), DOCUMENTS[0])
    assert doc.data["a"] is True and doc.data["e"] == "5e-5" and doc.data["m"] is None
    assert doc.positions[("d",)] == (4, 1)
