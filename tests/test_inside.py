"""loaders.inside: the one containment check; its realpath cache keys absolute paths only, so a
relative path means the working directory of the moment (an API user may chdir between runs)."""
import os

from memlint.loaders import inside


def test_a_relative_path_follows_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x.json").write_text("{}")
    monkeypatch.chdir(tmp_path / "a")
    assert inside("x.json", str(tmp_path / "a"))
    monkeypatch.chdir(tmp_path / "b")
    assert not inside("x.json", str(tmp_path / "a")) and inside("x.json", str(tmp_path / "b"))
    assert inside(str(tmp_path / "a" / "x.json"), str(tmp_path))


def test_symbolic_links_are_resolved(tmp_path):
    (tmp_path / "root").mkdir()
    outside = tmp_path / "secret.json"
    outside.write_text("{}")
    os.symlink(outside, tmp_path / "root" / "link.json")
    assert not inside(str(tmp_path / "root" / "link.json"), str(tmp_path / "root"))
