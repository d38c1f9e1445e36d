"""Detection without the adapters (adapters/detection.py, registry.DETECTORS; issue 29).

Each built-in adapter's test lives in adapters/detection.py so that telling a file's format
imports only the adapter that reads it (tests/test_startup.py pins what a one-file check loads).
The adapter re-exports the same function as its `detect`, so that the adapter contract and the
registry's table cannot drift apart.
"""
from __future__ import annotations

import importlib

import pytest

from memlint.adapters import detection, registry


@pytest.mark.parametrize("name", registry.BUILTIN_ADAPTERS + registry.FALLBACK_ADAPTERS)
def test_every_built_in_adapter_is_detected_by_its_own_test(name):
    assert name in registry.DETECTORS, (
        f"{name} has no test in registry.DETECTORS: put its detect() in adapters/detection.py "
        "(re-exported by the adapter as `detect`), or every check of a file it may claim "
        "imports it")
    module = importlib.import_module(name)
    assert module.detect is registry.DETECTORS[name]
    assert registry.DETECTORS[name].__module__ == detection.__name__


def test_a_claimed_file_imports_its_adapter_and_a_declined_one_none(monkeypatch):
    imported = []
    monkeypatch.setattr(registry, "_CACHE", {})   # as in a fresh process: nothing imported yet
    monkeypatch.setattr(registry, "_MODULES", {})
    original = registry._import

    def spy(name, builtin, problems):
        imported.append(name)
        return original(name, builtin, problems)

    monkeypatch.setattr(registry, "_import", spy)
    text = '{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}\n'
    module = registry.detect_format("ds_config.json", text)
    assert module.FORMAT == "deepspeed"
    # ms-swift and the HF Trainer come first in detection order and decline the file: their
    # adapters are not imported
    assert imported == ["memlint.adapters.deepspeed"]
    imported.clear()
    assert registry.detect_format("notes.yaml", "title: a note\n") is None
    assert imported == []


def test_a_broken_test_does_not_claim_the_file(monkeypatch):
    def broken(path, text):
        raise RuntimeError("detector bug")

    monkeypatch.setattr(registry, "_CACHE", {})
    monkeypatch.setitem(registry.DETECTORS, "memlint.adapters.native", broken)
    assert registry.detect_format("run.memlint.yaml", "memlint:\n  gpu: H100\n") is None
