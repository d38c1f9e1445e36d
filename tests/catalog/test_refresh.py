"""Issue 27 class 5: tools/refresh_catalog.py refreshes the bundled catalog from the Hub and records
each entry's source; an id memlint would miscount is refused. Driven against a loopback Hub
(catalog/fake_hub.py), never the network. Also: a project's own models in [tool.memlint.models]."""
from __future__ import annotations

import importlib.util
import io
import json
import os
import shutil

import pytest

from memlint.api import Options, check_paths
from memlint.catalog import hub
from memlint.memory.params import architecture, count_params

from catalog.fake_hub import COMMIT, FakeHub

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = importlib.util.spec_from_file_location("refresh_catalog",
                                              os.path.join(ROOT, "tools", "refresh_catalog.py"))
refresh_catalog = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(refresh_catalog)

TINY = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 1000, "tie_word_embeddings": False, "bos_token_id": 1,
        "transformers_version": "4.57.0", "torch_dtype": "bfloat16"}
TOTAL = count_params(architecture(TINY)).total


@pytest.fixture
def catalog(tmp_path):
    path = tmp_path / "hub_models.json"
    shutil.copyfile(hub.CATALOG_FILE, path)
    return path


def test_refresh_adds_an_entry_with_its_source(catalog):
    with FakeHub({"acme/tiny": TINY}, params={"acme/tiny": TOTAL}) as server:
        out = io.StringIO()
        refused = refresh_catalog.refresh(["acme/tiny"], server.url, None, True, str(catalog),
                                          out=out)
    assert refused == 0 and "added    acme/tiny" in out.getvalue()
    entry = next(m for m in json.loads(catalog.read_text())["models"] if m["id"] == "acme/tiny")
    assert entry["params"] == TOTAL
    assert entry["source"]["revision"] == COMMIT
    assert entry["source"]["config"] == f"{server.url}/acme/tiny/resolve/{COMMIT}/config.json"
    assert "safetensors.total" in entry["source"]["params"]
    # the architecture keys are kept, token ids and the writer's version are not
    assert entry["config"]["hidden_size"] == 64 and entry["config"]["torch_dtype"] == "bfloat16"
    assert "bos_token_id" not in entry["config"] and "transformers_version" not in entry["config"]


def test_refresh_refuses_what_memlint_would_miscount(catalog):
    before = catalog.read_text()
    unknown = dict(TINY, model_type="acme_novel")
    with FakeHub({"acme/tiny": TINY, "acme/novel": unknown},
                 params={"acme/tiny": TOTAL * 2, "acme/novel": TOTAL}) as server:
        out = io.StringIO()
        refused = refresh_catalog.refresh(["acme/tiny", "acme/novel", "acme/missing"], server.url,
                                          None, True, str(catalog), out=out)
    assert refused == 3
    text = out.getvalue()
    assert "100.00% off" in text or "50.00% off" in text        # count disagrees
    assert "acme_novel" in text                                  # model type not counted
    assert "HTTP 404" in text                                    # no such repository
    assert json.loads(catalog.read_text()) == json.loads(before)  # nothing else changed


def test_refresh_keeps_aliases_of_an_existing_entry(catalog):
    data = json.loads(catalog.read_text())
    data["models"].append({"id": "acme/tiny", "aliases": ["acme/tiny-copy"], "params": TOTAL,
                           "config": {k: v for k, v in TINY.items() if k != "bos_token_id"}})
    catalog.write_text(json.dumps(data))
    with FakeHub({"acme/tiny": TINY}, params={"acme/tiny": TOTAL}) as server:
        refresh_catalog.refresh(["acme/tiny"], server.url, None, True, str(catalog),
                                out=io.StringIO())
    entry = next(m for m in json.loads(catalog.read_text())["models"] if m["id"] == "acme/tiny")
    assert entry["aliases"] == ["acme/tiny-copy"] and entry["source"]["revision"] == COMMIT


def test_every_catalog_entry_added_by_the_refresh_names_its_source():
    for entry in hub.entries():
        if "source" in entry:
            assert entry["source"].get("config") and entry["source"].get("params"), entry["id"]


def test_project_models_resolve_before_the_catalog(tmp_path):
    (tmp_path / "models" / "m").mkdir(parents=True)
    (tmp_path / "models" / "m" / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "pyproject.toml").write_text(
        '[tool.memlint]\n[tool.memlint.models]\n"acme/llm" = "models/m"\n'
        '"meta-llama/Llama-3.1-8B" = { model_type = "llama", hidden_size = 64, '
        'intermediate_size = 128, num_hidden_layers = 2, num_attention_heads = 4, '
        'num_key_value_heads = 2, vocab_size = 1000 }\n')
    ds = tmp_path / "ds_config.json"
    ds.write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}')
    for name in ("acme/llm", "meta-llama/Llama-3.1-8B"):
        result = check_paths([str(ds)], Options(model=name, assignments=("world_size=8",)))
        [estimate] = result.estimates
        assert estimate.params["total"] < 10 ** 6        # the project's tiny model, not Meta's 8B
        [note] = [d for d in result.diagnostics if d.data.get("origin") == "project"]
        assert "[tool.memlint.models]" in note.message


@pytest.mark.parametrize("name, family", [
    ("Qwen/Qwen3-VL-8B-Instruct", "qwen3_vl"), ("Qwen/Qwen3-VL-30B-A3B-Thinking", "qwen3_vl_moe"),
    ("Qwen/Qwen3.5-27B", "qwen3_5"), ("Qwen/Qwen3-Next-80B-A3B-Instruct", "qwen3_next"),
    ("ibm-granite/granite-4.0-h-tiny", "granitemoehybrid"), ("LiquidAI/LFM2-2.6B", "lfm2"),
    ("HuggingFaceTB/SmolLM3-3B", "smollm3"), ("bigcode/starcoder2-15b", "starcoder2")])
def test_current_models_resolve_from_the_catalog(name, family):
    entry, _how = hub.catalog_lookup(name)
    assert entry is not None and entry["config"]["model_type"] == family
    assert entry["source"]["config"] and entry["source"]["params"]


def test_a_current_model_not_in_the_catalog_gets_a_named_reason(tmp_path):
    run = tmp_path / "sft.yaml"   # a LLaMA-Factory config naming a model memlint cannot count
    run.write_text("model_name_or_path: zai-org/GLM-4.7\nstage: sft\ndo_train: true\n"
                   "finetuning_type: lora\ndataset: alpaca_en_demo\ntemplate: glm4\n"
                   "output_dir: out\nper_device_train_batch_size: 1\n")
    result = check_paths([str(run)], Options(assignments=("world_size=1",)))
    assert not result.estimates
    assert set(result.summary.without.values()) == {"model not resolved"}
