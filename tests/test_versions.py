"""keys.version_numbers / version_text: the one reader of release versions (the deepspeed.version
key, the ZeRO-3 linear wrapper's version gate in memory/conventions.py, the engine version the RL
rules compare with vLLM 0.7)."""
import pytest

from memlint.keys import version_numbers, version_text
from memlint.memory import conventions
from memlint.rules import rl


@pytest.mark.parametrize("text, numbers", [
    ("0.8.5", (0, 8, 5)), ("0.14", (0, 14)), ("1", (1,)), ("v0.14.2", (0, 14, 2)),
    ("0.8.5.post1", (0, 8, 5)), ("0.6.3rc1", (0, 6, 3)), ("2.4.0+cu121", (2, 4, 0)),
    (" 0.19.4 ", (0, 19, 4)), ("1.2.3.4.5", (1, 2, 3, 4)), (0.14, (0, 14)), (1, (1,)),
])
def test_version_numbers(text, numbers):
    assert version_numbers(text) == numbers


@pytest.mark.parametrize("text", [None, "", "latest", "main", "x0.8", True, False, "v"])
def test_no_version(text):
    assert version_numbers(text) is None


@pytest.mark.parametrize("value, text", [("0.14.2", "0.14.2"), ("v0.14.2", "0.14.2"),
                                         (0.14, "0.14"), (" 1.2 ", "1.2")])
def test_version_text_keeps_the_numbers(value, text):
    assert version_text(value) == text
    assert version_numbers(text) == version_numbers(value)


@pytest.mark.parametrize("value", ["0.8.5.post1", "latest", "", True, "1.2.3.4.5", "0.8rc1"])
def test_version_text_refuses_what_is_not_a_release(value):
    with pytest.raises(ValueError):
        version_text(value)


def test_the_rl_rules_read_major_and_minor():
    assert rl._version("0.6.3") == (0, 6) and rl._version("0.10.1.post2") == (0, 10)
    assert rl._version("1") is None and rl._version(None) is None and rl._version("") is None
    assert rl._version("0.6.3") < (0, 7) <= rl._version("0.7")


def test_the_zero3_wrapper_gate_compares_numbers_not_text():
    class Keys(dict):
        pass

    class Training:
        model_init = "cpu"

    class Parallelism:
        zero = 3

    def gate(version):
        return conventions._zero3_saved_weights(Keys({"deepspeed.version": version}), Training,
                                                Parallelism, conventions.DEEPSPEED, True)

    assert "0.14.2 < 0.19.4" in gate("0.14.2")
    assert gate("0.9")   # "0.9" > "0.19" as text; as numbers it is older
    assert gate("0.19.4") is None and gate("0.20") is None
