"""docs/DESIGN.md's Layout names only what exists: every file and folder its tree lists (the names
before each description, globs allowed) is in the repository where the tree puts it."""
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = 24   # the names column; the description starts after it (or after two spaces)


def _layout() -> list:
    with open(os.path.join(ROOT, "docs", "DESIGN.md"), encoding="utf-8") as handle:
        text = handle.read()
    block = re.search(r"^## Layout\n```\n(.*?)^```", text, re.S | re.M)
    assert block, "DESIGN.md has no Layout tree"
    return block.group(1).splitlines()


def listed_paths() -> list:
    """(line, path) for every name of the tree, the folders above it joined in."""
    out, folders = [], {}
    for line in _layout():
        if not line.strip() or line[:NAMES].strip() == "":
            continue   # a description's continuation line
        depth = (len(line) - len(line.lstrip())) // 2
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        parent = folders.get(depth - 1, "") if depth else ""
        for name in re.split(r",\s*|\s+", names):
            if not name or name.startswith("(") or name == "...":
                continue
            path = os.path.join(parent, name)
            out.append((line.strip(), path))
            if name.endswith("/"):
                folders[depth] = path
    return out


def test_every_path_the_layout_names_exists():
    paths = listed_paths()
    assert len(paths) > 60   # the tree was read, folders joined in
    assert os.path.join("memlint", "adapters", "megatron/") in [path for _, path in paths]
    missing = [f"{path} ({line[:60]})" for line, path in paths
               if not glob.glob(os.path.join(ROOT, path.rstrip("/")))]
    assert not missing, "docs/DESIGN.md's Layout names what is not there:\n" + "\n".join(missing)
