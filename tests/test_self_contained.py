"""The repository holds what it needs (issue 31): no file points outside it at the team's shared
data folder, and the data the suite and `bench/accuracy.py` read is in the tree (a clone and the
sdist carry it: MANIFEST.in)."""
from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_DIRS = {".git", ".venv", "venv", "build", "dist", "__pycache__", ".hypothesis",
             ".pytest_cache", "node_modules"}
TEXT = (".py", ".md", ".toml", ".json", ".yaml", ".yml", ".txt", ".sh", ".cfg", ".in", ".ini")
# the shared folder beside the checkout, as a relative path, an absolute one, or joined in code
OUTSIDE = re.compile(r"\.\./shared\b|/work/shared\b|['\"]\.\.['\"],\s*['\"]shared['\"]"
                     r"|dirname\(ROOT\),\s*['\"]shared['\"]|parents\[3\]\s*/\s*['\"]shared")
THIS = os.path.abspath(__file__)

# What the tests and benchmarks read, in the repository.
DATA = ["docs/DESIGN.md", "docs/STYLE.md", "docs/seeds.md",
        "bench/data/calibration/records.json", "bench/data/calibration/fsdp2-records.json",
        "bench/data/calibration/gpu-megatron-ci/records.json",
        "bench/data/calibration/gpu-megatron-ci-features/records.json",
        "bench/data/calibration/gpu-published/manifest.json",
        "bench/data/calibration/models/llama/config.json",
        "fixtures/shared-real/SOURCES.md", "tests/data/sarif-schema-2.1.0.json"]


def _text_files():
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for name in names:
            if name.endswith(TEXT) or name == "run":
                yield os.path.join(folder, name)


def test_no_file_refers_to_the_shared_folder_outside_the_repository():
    hits = []
    for path in _text_files():
        if path == THIS:
            continue
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if OUTSIDE.search(line):
                    hits.append(f"{os.path.relpath(path, ROOT)}:{number}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


def test_the_data_is_in_the_repository():
    missing = [p for p in DATA if not os.path.isfile(os.path.join(ROOT, p))]
    assert not missing


def test_the_sdist_carries_the_data():
    with open(os.path.join(ROOT, "MANIFEST.in"), encoding="utf-8") as handle:
        grafted = {line.split()[1] for line in handle if line.startswith("graft ")}
    assert {"tests", "fixtures", "bench", "docs"} <= grafted
