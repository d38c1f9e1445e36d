"""Hub ids resolve without downloading weights: HF cache, then the bundled catalog, then (only
when allowed) the Hub, each step named; an id that resolves nowhere is a warning and no verdict.

The catalog test checks every entry against its published parameter count (`params`, from the
model card or the Hub's count; `params_tolerance` where memlint reads the family through the
generic keys, with the reason in `note`).
"""
from __future__ import annotations

import json
import os

import pytest

from memlint.catalog import hub
from memlint.memory.params import architecture, count_params
from memlint.scenario import build, overrides_partial

from catalog.fake_hub import COMMIT, FakeHub

ENTRIES = hub.entries()
TINY = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 1000, "tie_word_embeddings": False}


def test_catalog_is_large_and_ids_are_unique():
    assert len(ENTRIES) >= 80
    keys = [k.lower() for e in ENTRIES for k in [e["id"]] + e.get("aliases", [])]
    assert len(keys) == len(set(keys))
    families = {e["config"]["model_type"] for e in ENTRIES}
    for family in ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                   "qwen2_vl", "qwen2_5_vl", "gemma", "gemma2", "gemma3", "phi3", "deepseek_v2",
                   "deepseek_v3", "gpt_oss", "olmo2", "olmoe", "llama4", "glm4", "internlm2"):
        assert family in families


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_catalog_entry_matches_published_parameter_count(entry):
    total = count_params(architecture(entry["config"])).total
    tolerance = entry.get("params_tolerance", 0.0)
    assert abs(total - entry["params"]) <= tolerance * entry["params"], (total, entry["params"])
    if tolerance > 0.001:
        assert entry.get("note") or entry.get("params_source")  # the deviation is explained


def _model(name, **kw):
    scenario, diags = build([overrides_partial(["micro_batch=1"], model=name)], **kw)
    return scenario, diags


def test_catalog_resolves_by_id_alias_and_instruct_suffix():
    for name, expected in (("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B"),
                           ("meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B"),
                           ("QWEN/qwen2.5-7b-instruct", "Qwen/Qwen2.5-7B"),
                           ("Qwen/Qwen2.5-Coder-1.5B-Instruct", None)):
        entry, how = hub.catalog_lookup(name)
        assert (entry["id"] if entry else None) == expected, (name, how)
    entry, how = hub.catalog_lookup("google/gemma-2-9b-it")
    assert entry["id"] == "google/gemma-2-9b"
    entry, how = hub.catalog_lookup("Qwen/Qwen3-14B-Base")
    assert entry["id"] == "Qwen/Qwen3-14B"


def test_hub_id_through_the_pipeline_uses_the_catalog_and_says_so():
    scenario, diags = _model("mistralai/Mistral-7B-Instruct-v0.3")
    assert scenario.model.config["vocab_size"] == 32768
    assert scenario.model.config["hidden_size"] == 4096
    notes = [d for d in diags if d.code == "ML007"]
    assert len(notes) == 1 and "bundled catalog" in notes[0].message
    assert "not in the Hugging Face cache" in notes[0].message
    assert notes[0].severity.label == "info"


def _fake_cache(root, repo_id, config, commit="abc123", ref="main"):
    repo = root / ("models--" + repo_id.replace("/", "--"))
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text(json.dumps(config))
    if ref:
        (repo / "refs").mkdir()
        (repo / "refs" / ref).write_text(commit)
    return repo


def test_fake_hf_cache_wins_over_the_catalog_and_honours_refs_main(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    repo = _fake_cache(cache, "meta-llama/Llama-3.1-8B", dict(TINY, hidden_size=96))
    # an older snapshot that refs/main does not point at
    (repo / "snapshots" / "old").mkdir()
    (repo / "snapshots" / "old" / "config.json").write_text(json.dumps(dict(TINY, hidden_size=32)))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    scenario, diags = _model("meta-llama/Llama-3.1-8B")
    assert scenario.model.config["hidden_size"] == 96
    note = next(d for d in diags if d.code == "ML007")
    assert "Hugging Face cache" in note.message and "abc123" in note.message
    assert scenario.where("model.hidden_size").file.endswith(
        os.path.join("snapshots", "abc123", "config.json"))


def test_hf_home_and_default_cache_locations(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    _fake_cache(tmp_path / "hf" / "hub", "acme/tiny", TINY)
    assert hub.resolve("acme/tiny").origin == "cache"
    monkeypatch.delenv("HF_HOME")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    _fake_cache(tmp_path / "home" / ".cache" / "huggingface" / "hub", "acme/other", TINY)
    assert hub.resolve("acme/other").origin == "cache"


def test_single_snapshot_without_refs_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    _fake_cache(tmp_path, "acme/tiny", TINY, ref=None)
    assert hub.resolve("acme/tiny").config["hidden_size"] == 64


def test_malformed_cache_entry_falls_back_and_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    repo = _fake_cache(tmp_path, "Qwen/Qwen3-8B", TINY)
    (repo / "snapshots" / "abc123" / "config.json").write_text("{not json")
    found = hub.resolve("Qwen/Qwen3-8B")
    assert found.origin == "catalog"
    assert any("malformed cache entry" in s for s in found.steps)
    _fake_cache(tmp_path, "acme/broken", TINY)
    (tmp_path / "models--acme--broken" / "snapshots" / "abc123" / "config.json").write_text("[1]")
    scenario, diags = _model("acme/broken")
    assert not scenario.model.config
    assert any(d.code == "ML006" and d.severity.label == "warning" for d in diags)


def test_unresolved_id_is_a_warning_with_advice_and_no_verdict(repo):
    from memlint.cli import main

    (repo / "run.memlint.toml").write_text('model = "acme/unknown-13b"\nworld_size = 1\n')
    code = main(["check", "run.memlint.toml", "--format", "json", "--gpu", "A100-40GB"])
    assert code == 0
    scenario, diags = _model("acme/unknown-13b")
    warning = next(d for d in diags if d.code == "ML006")
    assert warning.severity.label == "warning"
    assert "huggingface-cli download acme/unknown-13b config.json" in warning.message
    assert "--hub" in warning.message and "--model PATH" in warning.message


def test_no_network_by_default(tmp_path, monkeypatch):
    with FakeHub({"acme/tiny": TINY}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
        found = hub.resolve("acme/tiny")
        assert found.config is None and server.requests == []
        assert any("not asked" in s for s in found.steps)


def _check_with_hub(tmp_path, server, model, *extra_args, **env):
    """`memlint check --hub` in a fresh process whose environment names the loopback Hub before
    huggingface_hub is imported (it reads HF_ENDPOINT once, at import), so that nothing it sends
    can leave the machine."""
    import subprocess
    import sys

    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / ".git").mkdir(exist_ok=True)
    (run / "run.memlint.toml").write_text(f'model = "{model}"\nworld_size = 1\n')
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    # huggingface_hub gives a request 10 s by default: a loaded machine can take longer to answer
    environ.update(HF_ENDPOINT=server.url, HF_HOME=str(tmp_path / "hf-home"),
                   HF_HUB_CACHE=str(tmp_path / "hf-home" / "hub"), HF_HUB_DISABLE_TELEMETRY="1",
                   HF_HUB_ETAG_TIMEOUT="120", HF_HUB_DOWNLOAD_TIMEOUT="120", **env)
    done = subprocess.run([sys.executable, "-m", "memlint", "check", "run.memlint.toml",
                           "--format", "json", "--gpu", "H100-80GB", *extra_args],
                          cwd=run, env=environ, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def _resolve_requests(server) -> set:
    return {path for _, path, _ in server.requests if "/resolve/" in path}


def test_loopback_hub_fetches_config_json_only_with_token(tmp_path):
    pytest.importorskip("huggingface_hub")
    with FakeHub({"acme/tiny-7b": TINY}, token="hf_test") as server:
        out = _check_with_hub(tmp_path, server, "acme/tiny-7b", "--hub", HF_TOKEN="hf_test")
        assert out["estimates"] and out["estimates"][0]["params"]["total"] == count_params(
            architecture(TINY)).total
        notes = [d for d in out["diagnostics"] if d["code"] == "ML007"]
        assert any("the Hugging Face Hub" in d["message"] for d in notes)
        # config.json and nothing else from the repository; every request carried the token
        # (huggingface_hub itself may also ask its endpoint for /api/agent-harnesses)
        assert _resolve_requests(server) == {"/acme/tiny-7b/resolve/main/config.json"}
        assert all(auth == "Bearer hf_test" for _, path, auth in server.requests
                   if "/resolve/" in path)
        cached = tmp_path / "hf-home" / "hub" / "models--acme--tiny-7b"
        assert (cached / "refs" / "main").read_text() == COMMIT
        # saved where step 1 looks: resolving again reads the cache and asks the Hub nothing
        server.requests.clear()
        found = hub.resolve("acme/tiny-7b", env={"HF_HUB_CACHE": str(tmp_path / "hf-home" / "hub")})
        assert found.origin == "cache" and server.requests == []


def test_loopback_hub_errors_are_warnings_and_no_verdict(tmp_path):
    pytest.importorskip("huggingface_hub")
    with FakeHub({"acme/tiny": TINY}, token="right") as server:
        out = _check_with_hub(tmp_path, server, "acme/tiny", "--hub", HF_TOKEN="wrong")
        warning = next(d for d in out["diagnostics"] if d["code"] == "ML006")
        assert warning["severity"] == "warning" and "401" in warning["message"]
        assert not out["estimates"]
        out = _check_with_hub(tmp_path, server, "acme/missing", "--hub", HF_TOKEN="right")
        assert any(d["code"] == "ML006" and "404" in d["message"] for d in out["diagnostics"])
        assert not out["estimates"]


def test_offline_mode_stops_the_hub(tmp_path, monkeypatch):
    with FakeHub({"acme/tiny": TINY}) as server:
        env = {"HF_ENDPOINT": server.url, "HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"}
        found = hub.resolve("acme/tiny", hub=True, env=env)
        assert found.config is None and any("offline" in s for s in found.steps)
        assert server.requests == []


def test_memlint_hub_setting_turns_the_hub_on(tmp_path):
    pytest.importorskip("huggingface_hub")
    with FakeHub({"acme/tiny": TINY}) as server:
        out = _check_with_hub(tmp_path, server, "acme/tiny", MEMLINT_HUB="1")
        assert out["estimates"]
        assert _resolve_requests(server) == {"/acme/tiny/resolve/main/config.json"}


def test_paths_and_presets_are_not_hub_ids():
    assert not hub.looks_like_hub_id("configs/model.json")
    assert not hub.looks_like_hub_id("../x/y")
    assert not hub.looks_like_hub_id("/abs/path")
    assert hub.looks_like_hub_id("gpt2") and hub.looks_like_hub_id("Qwen/Qwen2.5-7B")
