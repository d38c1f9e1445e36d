"""Dev-only: copy files byte for byte from a git directory at a commit into fixtures/real-world.

    python tools/collect_corpus.py GIT_DIR OWNER/REPO COMMIT LICENCE PATH...

Each file lands at fixtures/real-world/<owner>__<repo>/<path>; a row per file is appended to
fixtures/real-world/SOURCES.md (file, repository, path, commit, licence) unless it is there.
Verdicts are written by hand in verdicts.json (what the framework does with the file, and why).
"""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fixtures", "real-world")


def main(git_dir: str, repo: str, commit: str, licence: str, paths: list) -> None:
    full = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", f"{commit}^{{commit}}"],
                          check=True, capture_output=True, text=True).stdout.strip()
    sources = os.path.join(CORPUS, "SOURCES.md")
    with open(sources, encoding="utf-8") as handle:
        known = handle.read()
    rows = []
    for path in paths:
        data = subprocess.run(["git", "--git-dir", git_dir, "show", f"{full}:{path}"],
                              check=True, capture_output=True).stdout
        name = f"{repo.replace('/', '__')}/{path}"
        target = os.path.join(CORPUS, name)
        if f"`{name}`" in known:
            continue  # in the corpus already, at the commit its row names: never overwritten
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(data)
        if f"`{name}`" not in known:
            rows.append(f"| `{name}` | {repo} | `{path}` | {full} | {licence} |\n")
    with open(sources, "a", encoding="utf-8") as handle:
        handle.writelines(rows)
    print(f"{len(paths)} files, {len(rows)} new rows")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
