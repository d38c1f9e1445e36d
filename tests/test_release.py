"""The release: a tag vX.Y.Z drives .github/workflows/release.yml (check, test, build, publish
with trusted publishing); the LICENSE ships; the metadata names the Pythons it supports and, at
release, the repository it is built from (.github/scripts/release.py)."""
import importlib.util
import os
import re
import shutil
import sys

import yaml

from memlint import __version__

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "release", os.path.join(ROOT, ".github", "scripts", "release.py"))
release = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(release)


def _pyproject() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        return tomllib.load(handle)


def test_the_license_text_ships_and_matches_the_declared_license():
    project = _pyproject()["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as handle:
        text = handle.read()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_classifiers_name_each_python_from_the_minimum_up():
    project = _pyproject()["project"]
    minimum = re.fullmatch(r">=3\.(\d+)", project["requires-python"]).group(1)
    named = sorted(int(c.rsplit(".", 1)[1]) for c in project["classifiers"]
                   if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    assert named[0] == int(minimum) and named == list(range(named[0], named[-1] + 1))
    assert "Programming Language :: Python :: 3 :: Only" in project["classifiers"]
    with open(os.path.join(ROOT, ".github", "workflows", "release.yml"), encoding="utf-8") as h:
        workflow = yaml.safe_load(h)
    tested = workflow["jobs"]["test"]["strategy"]["matrix"]["python"]
    assert [int(v.split(".")[1]) for v in tested] == named   # each classifier is tested


def test_the_tag_must_match_the_version_and_a_dated_changelog(tmp_path):
    for name in ("CHANGELOG.md", "memlint/__init__.py"):
        os.makedirs(tmp_path / os.path.dirname(name), exist_ok=True)
        shutil.copy(os.path.join(ROOT, name), tmp_path / name)
    changelog = tmp_path / "CHANGELOG.md"
    text = changelog.read_text()
    assert release.version(str(tmp_path)) == __version__
    wrong = release.check_tag("v9.9.9", str(tmp_path))
    assert any("does not match" in p for p in wrong)
    dated = re.sub(rf"^## {re.escape(__version__)}.*$", f"## {__version__} (2026-12-24)", text,
                   count=1, flags=re.M)
    changelog.write_text(dated)
    assert release.check_tag(f"v{__version__}", str(tmp_path)) == []
    changelog.write_text(dated.replace("(2026-12-24)", "(unreleased)"))
    assert any("unreleased" in p for p in release.check_tag(f"v{__version__}", str(tmp_path)))


def test_project_urls_name_the_repository_the_release_is_built_from(tmp_path):
    for name in ("pyproject.toml", "memlint/__init__.py"):
        os.makedirs(tmp_path / os.path.dirname(name), exist_ok=True)
        shutil.copy(os.path.join(ROOT, name), tmp_path / name)
    assert "urls" not in _pyproject()["project"]   # the checkout names no address
    text = release.project_urls("https://github.com/acme/memlint", str(tmp_path))
    urls = tomllib.loads(text)["project"]["urls"]
    assert urls["Source"] == "https://github.com/acme/memlint"
    assert urls["Changelog"].endswith(f"/blob/v{__version__}/CHANGELOG.md")
    assert tomllib.loads(text)["project"]["name"] == "memlint-llm"   # the rest is untouched
    for bad in ("http://github.com/a/b", "https://github.com/a", "https://x/a/b; rm -rf /"):
        try:
            release.project_urls(bad, str(tmp_path))
        except SystemExit:
            continue
        raise AssertionError(bad)


def test_the_release_workflow_is_tag_driven_and_publishes_with_trusted_publishing():
    with open(os.path.join(ROOT, ".github", "workflows", "release.yml"), encoding="utf-8") as h:
        workflow = yaml.safe_load(h)
    triggers = workflow[True] if True in workflow else workflow["on"]   # YAML 1.1: on -> True
    assert triggers == {"push": {"tags": ["v[0-9]+.[0-9]+.[0-9]+"]}}
    assert workflow["permissions"] == {"contents": "read"}
    jobs = workflow["jobs"]
    assert jobs["test"]["needs"] == "check" and jobs["build"]["needs"] == "test"
    assert jobs["publish"]["needs"] == "build"
    build = "\n".join(s.get("run", "") for s in jobs["build"]["steps"])
    assert "release.py project-urls" in build and "twine check --strict" in build
    assert "python -m build" in build
    publish = jobs["publish"]
    assert publish["permissions"] == {"id-token": "write"}   # OIDC, and nothing else
    assert publish["environment"]["name"] == "pypi"
    assert any(s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")
               for s in publish["steps"])
    assert not any("password" in (s.get("with") or {}) for s in publish["steps"])
    check = "\n".join(s.get("run", "") for s in jobs["check"]["steps"])
    assert 'release.py check-tag "$GITHUB_REF_NAME"' in check
