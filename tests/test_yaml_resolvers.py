"""memlint.yaml_resolvers: memlint's loaders resolve every plain scalar as PyYAML's do, without
compiling the implicit-tag patterns where a string test is exact."""
import re

import yaml
from hypothesis import given, settings, strategies as st

from memlint import loaders, yaml_resolvers

PIECES = ["0", "1", "7", "8", "9", "_", ".", "-", "+", ":", "e", "E", "x", "b", "a", "f", " ",
          "\t", "\n", "T", "Z", "inf", "nan", "NaN", ".inf", "2024-01-02", "12:30:00", "true",
          "True", "no", "NO", "on", "Off", "y", "null", "Null", "~", "<<", "=", "\u0661"]
scalars = st.lists(st.sampled_from(PIECES), max_size=8).map("".join)


def _plain(loader) -> yaml.resolver.BaseResolver:
    return loader.__new__(loader)   # resolve() reads class tables only (no path resolvers)


def test_the_table_is_pyyaml_60s_and_all_five_are_answered():
    quick = yaml_resolvers.quick_table(yaml.SafeLoader.yaml_implicit_resolvers)
    kinds = {tag for row in quick.values() for tag, rx in row
             if isinstance(rx, yaml_resolvers.QuickPattern)}
    assert kinds == set(yaml_resolvers.SOURCES), "PyYAML's patterns changed: update SOURCES"
    assert yaml.SafeLoader.yaml_implicit_resolvers is not quick   # PyYAML's own stays


@settings(max_examples=1500, deadline=None)
@given(scalars)
def test_every_scalar_resolves_as_pyyaml_resolves_it(value):
    python, c = loaders._yaml_loaders(yaml)
    expected = _plain(yaml.SafeLoader).resolve(yaml.ScalarNode, value, (True, False))
    for loader in (python, c):
        assert _plain(loader).resolve(yaml.ScalarNode, value, (True, False)) == expected, value


@settings(max_examples=600, deadline=None)
@given(scalars)
def test_each_quick_pattern_answers_as_its_pattern(value):
    for tag, source in yaml_resolvers.SOURCES.items():
        quick = yaml_resolvers.QuickPattern(tag, source, re.X)
        assert bool(quick.match(value)) == bool(re.match(source, value, re.X)), (tag, value)


def test_a_typical_file_compiles_none_of_them():
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    table = yaml_resolvers.quick_table(base.yaml_implicit_resolvers)
    c = type("CSafeLoader", (base,), {"yaml_implicit_resolvers": table})
    text = "num_layers: 32\nfp16: true\nlr: 1e-4\nname: null\nseed: 1234\nx: -3\nflag: off\n"
    yaml.compose(text, Loader=c)
    for row in c.yaml_implicit_resolvers.values():
        for tag, rx in row:
            if isinstance(rx, yaml_resolvers.QuickPattern):
                assert "_compiled" not in rx.__dict__, tag
