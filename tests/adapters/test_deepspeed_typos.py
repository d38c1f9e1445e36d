"""Issue 27 class 7: DeepSpeed ignores unknown top-level keys (DeepSpeedConfig reads each block by
its exact key; deepspeed/runtime/zero/config.py get_zero_config at edaa722 gives stage 0 when
"zero_optimization" is absent), so a `zero_optimisation` typo silently turns ZeRO off. memlint
warns, says what the typo disables, and estimates what DeepSpeed will do.

The typo is made in a copy of a real config: LLaMA-Factory's examples/deepspeed/ds_z3_config.json
(fixtures/real-world, SOURCES.md)."""
import os

from memlint.api import Options, check_paths
from memlint.diagnostics import Severity

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(ROOT, "fixtures", "real-world", "hiyouga__LLaMA-Factory", "examples",
                    "deepspeed", "ds_z3_config.json")
RUN = ("world_size=8", "micro_batch=1", "seq_len=2048", "precision=bf16")


def check(path, *assignments):
    return check_paths([str(path)], Options(model="llama3-8b", assignments=RUN + assignments))


def misspelt(tmp_path, old="zero_optimization", new="zero_optimisation"):
    with open(REAL, encoding="utf-8") as handle:
        text = handle.read()
    assert f'"{old}"' in text
    (tmp_path / ".git").mkdir()
    path = tmp_path / "ds_z3_config.json"
    path.write_text(text.replace(f'"{old}"', f'"{new}"'), encoding="utf-8")
    return path


def test_a_misspelt_zero_block_is_a_warning_that_says_zero_stays_off(tmp_path):
    result = check(misspelt(tmp_path))
    [typo] = [d for d in result.diagnostics if d.key == "zero_optimisation"]
    assert typo.severity == Severity.WARNING and typo.code == "ML003"
    assert "ZeRO stays off (stage 0)" in typo.message
    assert "did you mean 'zero_optimization'?" in typo.message
    assert not [d for d in result.diagnostics if d.severity == Severity.ERROR
                and d.code in ("ML002", "ML003")]


def test_the_estimate_follows_what_deepspeed_does_with_the_typo(tmp_path):
    typo = check(misspelt(tmp_path)).estimates[0]
    real_zero3 = check(REAL).estimates[0]
    real_as_zero0 = check(REAL, "zero=0").estimates[0]
    assert typo.peak_bytes == real_as_zero0.peak_bytes
    assert typo.peak_bytes > 2 * real_zero3.peak_bytes


def test_keys_deepspeed_ignores_in_the_real_file_are_warnings_without_a_lost_block():
    result = check(REAL)
    ignored = {d.key: d for d in result.diagnostics if "DeepSpeed ignores it" in d.message}
    assert set(ignored) == {"comms_config", "monitor_config"}
    assert all(d.severity == Severity.WARNING and "stays off" not in d.message
               for d in ignored.values())
