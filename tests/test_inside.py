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


def test_realpath_of_a_relative_path_is_os_realpaths(tmp_path, monkeypatch):
    """loaders.realpath caches a relative path under the working directory joined to it: the
    same answer as os.path.realpath, links resolved before `..`, loops included."""
    import itertools

    from memlint import loaders

    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "x" / "y").mkdir(parents=True)
    os.symlink("a/b", tmp_path / "lb")
    os.symlink("../x", tmp_path / "a" / "lx")
    os.symlink("loop2", tmp_path / "loop1")
    os.symlink("loop1", tmp_path / "loop2")
    monkeypatch.chdir(tmp_path)
    parts = ["a", "b", "..", ".", "lb", "lx", "y", "loop1", "nope", ""]
    for size in (1, 2, 3):
        for combo in itertools.product(parts, repeat=size):
            for path in ("/".join(combo), "./" + "/".join(combo), "/".join(combo) + "/"):
                loaders._absolute_realpath.cache_clear()
                assert loaders.realpath(path) == os.path.realpath(path), path
    monkeypatch.chdir(tmp_path / "a" / "lx")   # a working directory reached through a link
    for path in ("..", "../..", "y/..", "."):
        loaders._absolute_realpath.cache_clear()
        assert loaders.realpath(path) == os.path.realpath(path), path
