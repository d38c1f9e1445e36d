"""The JSON Schemas memlint publishes (memlint/schemas/, `memlint schema NAME`): valid Draft
2020-12, current with what builds them, and true to the corpus: every real DeepSpeed file that
DeepSpeed accepts validates, the ones its pydantic models refuse do not; every memlint.toml and
[tool.memlint] memlint reads validates; the SchemaStore fileMatch patterns match real files."""
import fnmatch
import glob
import json
import os
import re
import sys

import jsonschema
import pytest

from memlint.cli import main
from memlint.loaders import load_json
from memlint.schemas import NAMES, build, path_of, render

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fixtures", "real-world")
with open(os.path.join(CORPUS, "verdicts.json"), encoding="utf-8") as _handle:
    VERDICTS = json.load(_handle)["files"]
DEEPSPEED = {path: v for path, v in VERDICTS.items() if v["format"] == "deepspeed"}


def _validator(name: str):
    return jsonschema.Draft202012Validator(build(name))


def _hjson(path: str):
    with open(path, encoding="utf-8") as handle:
        return load_json(path, handle.read(), hjson=True).data   # as DeepSpeed reads it


@pytest.mark.parametrize("name", [n for n in NAMES if n != "catalog"])
def test_each_schema_is_valid_and_its_file_is_current(name):
    jsonschema.Draft202012Validator.check_schema(build(name))
    with open(path_of(name), encoding="utf-8") as handle:
        assert handle.read() == render(name), f"run `python -m memlint.schemas` ({name})"


def test_memlint_schema_prints_each_schema(capsys):
    for name in NAMES:
        assert main(["schema", name]) == 0
        assert json.loads(capsys.readouterr().out) == build(name)
    assert main(["schema", "deepspeeed"]) == 2
    assert "did you mean 'deepspeed'" in capsys.readouterr().err


def test_every_deepspeed_file_deepspeed_accepts_validates():
    validator = _validator("deepspeed")
    valid = [p for p, v in DEEPSPEED.items() if v["verdict"] == "valid"]
    assert len(valid) >= 110
    rejected = {}
    for rel in valid:
        errors = list(validator.iter_errors(_hjson(os.path.join(CORPUS, rel))))
        if errors:
            rejected[rel] = [e.message[:120] for e in errors]
    assert rejected == {}


def test_the_files_deepspeed_refuses_are_rejected():
    # each refused for a key its pydantic ZeRO / precision model forbids (verdicts.json)
    validator = _validator("deepspeed")
    refused = [p for p, v in DEEPSPEED.items() if v["verdict"] == "invalid"]
    assert len(refused) >= 10
    for rel in refused:
        errors = list(validator.iter_errors(_hjson(os.path.join(CORPUS, rel))))
        assert errors, rel
        found = [e for error in errors for e in [error, *error.context]]
        assert any(e.validator == "additionalProperties" for e in found), rel


def _keys(schema: dict):
    """(dotted path, property schema) of every key of the DeepSpeed schema."""
    defs = schema["$defs"]

    def block(node):
        if "$ref" in node:
            return block(defs[node["$ref"].rsplit("/", 1)[-1]])
        if "properties" in node:
            return node
        return next((b for b in map(block, node.get("anyOf", ())) if b is not None), None)

    def walk(node, path):
        found = block(node)
        for key, prop in (found or {}).get("properties", {}).items():
            yield path + (key,), prop
            yield from walk(prop, path + (key,))
    return list(walk(schema, ()))


def test_every_deepspeed_key_has_a_description_and_the_sources_default():
    schema = build("deepspeed")
    keys = dict(_keys(schema))
    assert len(keys) > 230
    assert all(prop.get("description") for prop in keys.values())
    zero = ("zero_optimization",)
    assert keys[zero + ("stage",)]["default"] == 0
    assert keys[zero + ("reduce_bucket_size",)]["default"] == 500_000_000
    assert keys[zero + ("stage3_prefetch_bucket_size",)]["default"] == 50_000_000   # the alias
    assert keys[zero + ("offload_param", "buffer_count")]["default"] == 5
    assert keys[("aio", "block_size")]["default"] == 1_048_576       # swap_tensor/constants.py
    assert keys[("zero_allow_untested_optimizer",)]["default"] is False   # runtime/constants.py
    cpu_offload = keys[zero + ("cpu_offload",)]
    assert cpu_offload["deprecated"] is True and "offload_optimizer" in cpu_offload[
        "deprecationMessage"]
    assert "x-unknown-keys" not in json.dumps(schema)


def test_unknown_keys_fail_where_deepspeed_fails_and_pass_where_it_ignores_them():
    validator = _validator("deepspeed")
    assert validator.is_valid({"_comment": "x", "comms_config": {}, "train_batch_size": 8})
    assert validator.is_valid({"aio": {"thread_count": 4}})           # get_scalar_param block
    assert not validator.is_valid({"zero_optimization": {"stage": 3, "stage3_prefetch": 1}})
    assert not validator.is_valid({"zero_optimization": {"stage": 7}})
    assert not validator.is_valid({"bf16": {"enabled": True, "loss_scale": 0}})
    assert validator.is_valid({"zero_optimization": {"stage": "auto"}, "bf16": {"enabled": "auto"}})


def _memlint_tomls() -> list:
    out = []
    for path in glob.glob(os.path.join(ROOT, "fixtures", "**", "*memlint.toml"), recursive=True):
        if os.sep + "bad" + os.sep in path:   # rule fixtures that memlint must refuse
            continue
        out.append(path)
    return out


def test_every_memlint_toml_memlint_reads_validates():
    validator = _validator("memlint")
    files = _memlint_tomls()
    assert len(files) >= 10
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    [example] = [b for b in re.findall(r"```toml\n(.*?)```", readme, re.S) if "memlint.toml" in b]
    documents = [tomllib.loads(example)] + [tomllib.load(open(p, "rb")) for p in files]
    for path, doc in zip(["README.md"] + files, documents):
        errors = [e.message for e in validator.iter_errors(doc)]
        assert errors == [], path


def test_the_memlint_schema_knows_the_keys_and_their_types():
    validator = _validator("memlint")
    assert validator.is_valid({"model": {"preset": "llama3-8b", "num_hidden_layers": 4},
                               "runtime": {"allocator_fraction": 0.05},
                               "scenario": {"zero": 3, "offload_optimizer": "cpu"},
                               "gpu_memory": "141GB", "tp": 8})
    assert validator.is_valid({"model": "llama3-8b", "model.hidden_size": 4096,
                               "runtime.allocator_fraction": 0.05,
                               "megatron.transformer-impl": "local"})
    for bad in ({"tpp": 2}, {"zero": 5}, {"tp": 0}, {"recompute": "sometimes"},
                {"files": "ds_config.json"}, {"gpu_memory": "lots"}):
        assert not validator.is_valid(bad), bad


PYPROJECT = """[project]
name = "trainer"

[tool.memlint]
select = ["ML1", "ML301"]
ignore = "ML107"
fail-on = "warning"
exclude = ["vendor/"]

[tool.memlint.per-file-ignores]
"legacy/*.json" = ["ML003"]

[tool.memlint.severity]
ML102 = "error"

[[tool.memlint.runs]]
name = "a"
files = ["a.json"]
set = ["seq_len=4096"]

[tool.memlint.scenario]
model = "llama3-8b"
world_size = 8

[tool.memlint.assumptions]
"runtime.allocator_fraction" = 0.05
"""


def test_tool_memlint_schema_accepts_what_memlint_reads(tmp_path):
    from memlint.config import load_config

    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    config = load_config(str(tmp_path / "pyproject.toml"))   # memlint reads it
    assert config.fail_on.label == "warning" and config.runs
    table = tomllib.loads(PYPROJECT)["tool"]["memlint"]
    validator = _validator("tool-memlint")
    assert [e.message for e in validator.iter_errors(table)] == []
    for bad in ({"fail_onn": "error"}, {"fail-on": "fatal"}, {"runs": [{"name": "x"}]},
                {"scenario": {"tpp": 2}}):
        assert not validator.is_valid(bad), bad


def test_the_catalog_entries_match_real_files_and_no_others():
    entries = {e["name"]: e for e in build("catalog")["schemas"]}
    deepspeed = entries["DeepSpeed config"]["fileMatch"]
    names = {rel: os.path.basename(rel) for rel in DEEPSPEED}

    def matches(rel):
        return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(names[rel], p) for p in deepspeed)
    matched = [rel for rel in DEEPSPEED if matches(rel)]
    assert len(matched) >= 0.6 * len(DEEPSPEED)
    for pattern in deepspeed:   # each pattern earns its place
        assert any(fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(names[rel], pattern)
                   for rel in DEEPSPEED), pattern
    others = [rel for rel, v in VERDICTS.items() if rel.endswith(".json")
              and not v["format"].startswith(("deepspeed", "gpt-neox-deepspeed"))]
    for rel in others + ["config.json", "package.json", "tsconfig.json", "tokenizer_config.json"]:
        base = os.path.basename(rel)
        assert not any(fnmatch.fnmatch(base, p) for p in deepspeed if "/" not in p), rel
    assert entries["memlint"]["fileMatch"] == ["memlint.toml", "*.memlint.toml"]
    for entry in entries.values():
        assert entry["url"].startswith("https://json.schemastore.org/")
