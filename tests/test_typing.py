"""The public API is typed for its users (issue 31): `mypy --strict --disallow-any-expr` on a user's
script that calls memlint.check, estimate, plan, fit and compare (tests/typing/user_script.py)
finds no error and no expression of type Any: the lazy facade in memlint/__init__.py shows the
type checker the API's names, the result records (memlint/records.py, PEP 681
`dataclass_transform`) their typed fields, and the API functions their return types."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "typing", "user_script.py")

pytestmark = pytest.mark.slow   # a type checker's run (seconds; CI runs it)


def mypy(path: str, cache: str) -> tuple:
    pytest.importorskip("mypy", reason="mypy is a test extra: pip install '.[test]'")
    env = dict(os.environ, MYPYPATH=ROOT)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--disallow-any-expr",
         "--follow-imports=silent", "--no-error-summary", "--cache-dir", cache, path],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


def test_the_api_shows_no_any_to_a_strict_user_script(tmp_path):
    code, out = mypy(SCRIPT, str(tmp_path / "cache"))
    assert code == 0 and not out.strip(), out


def test_the_check_catches_an_any(tmp_path):
    """The same run reports an Any where the API does give one (a Diagnostic's free-form data)."""
    probe = tmp_path / "probe.py"
    probe.write_text("import memlint\n\n"
                     "print(memlint.check([]).diagnostics[0].data)\n", encoding="utf-8")
    code, out = mypy(str(probe), str(tmp_path / "cache"))
    assert code == 1 and "Any" in out, out
