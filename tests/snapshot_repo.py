"""This checkout as a git repository of its own, tagged as a release, for the tests that use memlint
the way the README tells a user to: from a clone at a tag (pip's git URL, pre-commit's `repo:`,
the Action's source tree).

The snapshot holds the files git would commit (tracked, and untracked ones it does not ignore), so
a change under test is in it before it is committed.
"""
from __future__ import annotations

import os
import shutil
import subprocess

from memlint import __version__

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = f"v{__version__}"
GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t", NO_COLOR="1")
GIT_ENV.pop("PYTHONPATH", None)


def git(cwd, *args, check=True, env=None):
    return subprocess.run(["git", *args], cwd=cwd, check=check, capture_output=True, text=True,
                          env=env or GIT_ENV)


def snapshot(dest) -> tuple:
    """A repository at `dest` with this checkout's files, committed once and tagged TAG:
    (path, commit)."""
    dest = str(dest)
    listed = git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").stdout
    for rel in filter(None, listed.split("\0")):
        source = os.path.join(ROOT, rel)
        if os.path.isfile(source) and not os.path.islink(source):
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copy2(source, os.path.join(dest, rel))
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "snapshot")
    git(dest, "tag", TAG)
    return dest, git(dest, "rev-parse", "HEAD").stdout.strip()
