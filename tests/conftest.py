import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def has_memory_model() -> bool:
    try:
        import memlint.memory.estimate  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A temporary repository root (has .git) as the working directory."""
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path
