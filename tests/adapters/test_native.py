"""The native scenario adapter and the adapter registry (detection, references, root)."""
import os

from memlint.adapters import native
from memlint.adapters.registry import detect_format, load_file, load_with_references


def test_detect():
    assert native.detect("x/memlint.toml", "")
    assert native.detect("run.memlint.toml", "")
    assert native.detect("a.yaml", "memlint:\n  tp: 2\n")
    assert native.detect("a.yml", "scenario:\n  tp: 2\n")
    assert not native.detect("a.yaml", "compute_environment: LOCAL_MACHINE\n")
    assert native.detect("pyproject.toml", "[tool.memlint.scenario]\ntp = 2\n")
    assert not native.detect("pyproject.toml", "[tool.memlint]\nselect = []\n")
    assert not native.detect("ds.json", "{}")


def test_toml_keys_positions_and_model_table(repo):
    path = repo / "memlint.toml"
    path.write_text('# a run\ntp = 2  # memlint: disable=ML603\n\n[model]\npreset = "llama3-8b"\n'
                    'num_hidden_layers = 16\n[activations]\nc_act = 30\n')
    partial = load_file(str(path))
    assert partial.fmt == "native" and partial.diagnostics == []
    settings = {k: (s.value, s.prov.line) for k, s in partial.settings.items()}
    assert settings == {"tp": (2, 2), "model": ("llama3-8b", 5),
                        "model.num_hidden_layers": (16, 6), "activations.c_act": (30, 8)}
    assert partial.suppressions == {2: {"ml603"}}


def test_scenario_table_yaml_and_pyproject(repo):
    yaml_path = repo / "run.yaml"
    yaml_path.write_text("scenario:\n  tp: 4\n  micro_batch: 2\nother: 1\n")
    partial = load_file(str(yaml_path))
    assert {k: (s.value, s.prov.line, s.prov.column) for k, s in partial.settings.items()} == {
        "tp": (4, 2, 3), "micro_batch": (2, 3, 3)}
    py = repo / "pyproject.toml"
    py.write_text('[project]\nname = "x"\n\n[tool.memlint.scenario]\ngpu = "H200"\n')
    partial = load_file(str(py))
    assert partial.settings["gpu"].value == "H200" and partial.settings["gpu"].prov.line == 5


def test_bad_files_are_diagnostics(repo):
    bad = repo / "memlint.toml"
    bad.write_text("tp = [\n")
    assert [d.code for d in load_file(str(bad)).diagnostics] == ["ML001"]
    empty = repo / "x.memlint.yaml"
    empty.write_text("- 1\n- 2\n")
    assert [d.code for d in load_file(str(empty)).diagnostics] == ["ML001"]
    unknown = repo / "notes.txt"
    unknown.write_text("hello")
    [d] = load_file(str(unknown)).diagnostics
    assert d.code == "ML001" and "cannot tell which config format" in d.message
    binary = repo / "memlint.toml"
    binary.write_bytes(b"\x00\x01")
    assert [d.code for d in load_file(str(binary)).diagnostics] == ["ML001"]
    big = repo / "big.memlint.toml"
    big.write_text("# " + "x" * 100)
    [d] = load_file(str(big), max_bytes=10).diagnostics
    assert "limit" in d.message


def test_references_first_then_referrer(repo):
    (repo / "configs").mkdir()
    (repo / "configs" / "base.memlint.toml").write_text("tp = 2\nmicro_batch = 1\n")
    (repo / "memlint.toml").write_text('files = ["configs/base.memlint.toml"]\nmicro_batch = 4\n')
    partials = load_with_references(str(repo / "memlint.toml"))
    assert [os.path.basename(p.source) for p in partials] == ["base.memlint.toml", "memlint.toml"]


def test_references_outside_root_missing_and_cycles(repo, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "o.memlint.toml"
    outside.write_text("tp = 8\n")
    (repo / "memlint.toml").write_text(f'files = ["{outside}", "missing.json", "b.memlint.toml"]\n')
    (repo / "b.memlint.toml").write_text('files = ["memlint.toml"]\npp = 2\n')
    partials = load_with_references(str(repo / "memlint.toml"))
    assert [os.path.basename(p.source) for p in partials] == ["b.memlint.toml", "memlint.toml"]
    messages = [(d.code, d.line, d.message) for d in partials[-1].diagnostics]
    assert messages[0][0] == "ML004" and "outside the repository root" in messages[0][2]
    assert messages[1][0] == "ML001" and "does not exist" in messages[1][2]
    allowed = load_with_references(str(repo / "memlint.toml"), allow_outside_root=True)
    assert "o.memlint.toml" in [os.path.basename(p.source) for p in allowed]


def test_detection_order_prefers_native():
    module = detect_format("memlint.toml", "tp = 1\n")
    assert module is native
