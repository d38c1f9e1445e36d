"""HJSON, which DeepSpeed reads its config files with (DeepSpeedConfig: hjson.load, in
deepspeed/runtime/config.py:699 at edaa722): memlint's position-aware JSON reader takes HJSON's
quoteless keys and strings, '...' and '''...''' strings, comments and optional commas, and gives
the values hjson-py 3.1.0 gives (each expectation below is hjson.loads' output on the same text,
run once by hand: hjson is not a dependency). On real files: the Megatron-DeepSpeed templates."""
import os

from memlint.loaders import load_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE = os.path.join(ROOT, "fixtures", "real-world", "microsoft__Megatron-DeepSpeed",
                        "examples_deepspeed", "MoE", "ds_config_gpt_TEMPLATE.json")
FEATURES = os.path.join(ROOT, "tests", "data", "hjson_features.hjson")


def read(path, **options):
    with open(path, encoding="utf-8") as handle:
        return load_json(path, handle.read(), **options)


def test_hjson_values_as_hjson_py_reads_them():
    doc = read(FEATURES, hjson=True)
    assert doc.diagnostics == []
    assert doc.data == {
        "train_micro_batch_size_per_gpu": 2, "name": "some words, with a comma",
        "quoted": "single",
        "zero_optimization": {"stage": 3, "reduce_bucket_size": 5e8,
                              "offload_param": {"device": "cpu"}},
        "note": "two\nlines", "list": [1, 2, 3], "flag": True, "ratio": 0.5, "gap": 7,
        "last": "x"}
    assert doc.positions[("zero_optimization", "stage")] == (7, 5)


def test_a_templates_placeholders_are_strings_to_the_end_of_the_line():
    # hjson.loads on this file gives 'CONFIG_BATCH_SIZE,' and 'ZERO_STAGE' (hjson-py 3.1.0)
    doc = read(TEMPLATE, hjson=True)
    assert doc.data["train_batch_size"] == "CONFIG_BATCH_SIZE,"
    assert doc.data["zero_optimization"]["stage"] == "ZERO_STAGE"
    assert doc.data["gradient_clipping"] == 1.0


def test_without_hjson_the_same_file_is_a_json_error():
    doc = read(TEMPLATE, allow_comments=True)
    [error] = doc.diagnostics
    assert error.code == "ML001" and "placeholder" in error.message
