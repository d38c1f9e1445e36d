import os
import sys

import pytest
from hypothesis import HealthCheck, settings

# Python's bytecode cache, for the suite and the memlint processes it starts: with
# PYTHONDONTWRITEBYTECODE in the environment every run recompiled memlint and re-rewrote the asserts
# of every test module (collection alone took 9 s of CPU instead of 3), and every CLI subprocess
# compiled memlint from source again. The caches are __pycache__ folders, which git ignores.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# Every hypothesis test is deterministic and free of wall-clock limits: the same examples in every
# run (derandomize, no example database carried between runs) and no per-example deadline or
# too-slow health check, which a loaded 2-core CI machine trips without a defect (hypothesis's
# default deadline is 200 ms an example). A test's own @settings override the rest of this profile.
settings.register_profile("memlint", derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("memlint")

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


@pytest.fixture(autouse=True)
def _no_hf_cache(tmp_path_factory, monkeypatch):
    """Hub ids resolve through the user's Hugging Face cache first: point it at an empty folder
    so that a developer's own cache never changes a test's result (tests that need a cache lay
    out a fake one and point HF_HUB_CACHE at it), and keep the opt-in Hub off."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path_factory.getbasetemp() / "empty-hf-cache"))
    monkeypatch.delenv("MEMLINT_HUB", raising=False)


@pytest.fixture(autouse=True)
def _no_forced_color(monkeypatch):
    """rich colours a pipe under FORCE_COLOR (or TTY_COMPATIBLE), which CI services often set:
    `memlint plan` prints through rich, so its captured text would carry escape codes. The
    tests that want colour ask for it."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
