"""The DeepSpeed adapter clears valid configs with its own quick reader of the schema's keywords
(`conforms`; jsonschema costs 70 ms to import) and lets jsonschema walk the errors of the rest:
`conforms` must never call valid what jsonschema rejects."""
from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fuzz import mutate
from memlint.adapters import deepspeed
from memlint.loaders import load_json

CONFIGS = []
for name, raw in mutate.corpus():
    if name.endswith((".json", ".hjson")):
        doc = load_json(name, raw.decode("utf-8", "replace"))
        if isinstance(doc.data, dict) and deepspeed.detect(name, raw.decode("utf-8", "replace")):
            CONFIGS.append(doc.data)

VALUES = st.sampled_from([0, 1, -1, 2.5, 1e308, 10**400, float("nan"), True, False, None, "auto",
                          "x", "5e8", [], {}, [1], {"a": 1}, "cpu", "nvme", "none", 3, 1.0])


def _errors(data) -> bool:
    return any(True for _ in deepspeed.validator().iter_errors(data))


def _mutate(rng: random.Random, data, value):
    """Set one key somewhere in the config to `value`, or delete one."""
    data = json.loads(json.dumps(data))
    node = data
    for _ in range(rng.randint(0, 3)):
        children = [k for k, v in node.items() if isinstance(v, dict)]
        if not children:
            break
        node = node[rng.choice(children)]
    keys = list(node)
    if keys and rng.random() < 0.2:
        del node[rng.choice(keys)]
    elif keys and rng.random() < 0.8:
        node[rng.choice(keys)] = value
    else:
        node[rng.choice(["stage", "offload_param", "device", "enabled", "nvme_path", "zz"])] = value
    return data


def test_real_valid_configs_take_the_fast_path():
    valid = [c for c in CONFIGS if not _errors(c)]
    assert valid
    assert all(deepspeed.conforms(c) for c in valid)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, 10**6), seed=st.integers(0, 2**32 - 1), value=VALUES)
def test_fast_path_never_hides_an_error(index, seed, value):
    data = _mutate(random.Random(seed), CONFIGS[index % len(CONFIGS)], value)
    if deepspeed.conforms(data):
        assert not _errors(data), data
