"""Steps of the tag-driven release (.github/workflows/release.yml), runnable by hand and by tests.

    python .github/scripts/release.py check-tag v0.2.0
        the tag is `v` + memlint.__version__ and CHANGELOG.md has that version's section, no
        longer marked "(unreleased)": a tag pushed before the release commit fails here, before
        anything is built.
    python .github/scripts/release.py project-urls https://github.com/OWNER/REPO
        writes [project.urls] into pyproject.toml: memlint's address is the repository the release
        is built from (github.server_url/github.repository), so the package metadata and SARIF's
        informationUri never name an address that memlint does not have.

Standard library only (the workflow runs it before installing anything). Exit 1 with one line on
stderr when a check fails.
"""
from __future__ import annotations

import ast
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def version(root: str = ROOT) -> str:
    """memlint.__version__, read from the source without importing it."""
    with open(os.path.join(root, "memlint", "__init__.py"), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__"
                                                for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit("release: memlint/__init__.py has no __version__")


def check_tag(tag: str, root: str = ROOT) -> list:
    """What is wrong with releasing `tag` from `root` (empty: nothing)."""
    problems = []
    wanted = f"v{version(root)}"
    if tag != wanted:
        problems.append(f"tag {tag} does not match memlint.__version__ (expected {wanted})")
    with open(os.path.join(root, "CHANGELOG.md"), encoding="utf-8") as handle:
        changelog = handle.read()
    heading = re.search(rf"^## {re.escape(version(root))}\b(.*)$", changelog, re.M)
    if heading is None:
        problems.append(f"CHANGELOG.md has no section '## {version(root)}'")
    elif "unreleased" in heading.group(1).lower():
        problems.append(f"CHANGELOG.md still marks {version(root)} as unreleased (give it the "
                        "release date in the release commit)")
    return problems


def project_urls(base: str, root: str = ROOT) -> str:
    """pyproject.toml's text with [project.urls] for the repository at `base` appended."""
    if not re.fullmatch(r"https://[A-Za-z0-9.-]+(:[0-9]+)?/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+",
                        base):
        raise SystemExit(f"release: {base!r} is not a repository address (https://host/owner/"
                         "name)")
    path = os.path.join(root, "pyproject.toml")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if re.search(r"^\[project\.urls\]", text, re.M):
        raise SystemExit("release: pyproject.toml already has [project.urls]")
    tag = f"v{version(root)}"
    urls = {"Homepage": base, "Source": base, "Issues": f"{base}/issues",
            "Changelog": f"{base}/blob/{tag}/CHANGELOG.md",
            "Documentation": f"{base}/blob/{tag}/README.md"}
    lines = ["", "[project.urls]"] + [f'{key} = "{value}"' for key, value in urls.items()]
    return text.rstrip("\n") + "\n" + "\n".join(lines) + "\n"


def main(argv: list) -> int:
    if len(argv) != 2 or argv[0] not in ("check-tag", "project-urls"):
        sys.stderr.write(__doc__)
        return 2
    if argv[0] == "check-tag":
        problems = check_tag(argv[1])
        for problem in problems:
            sys.stderr.write(f"release: {problem}\n")
        return 1 if problems else 0
    text = project_urls(argv[1])
    with open(os.path.join(ROOT, "pyproject.toml"), "w", encoding="utf-8") as handle:
        handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
