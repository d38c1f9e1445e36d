"""bench/qwen_cells.py: Qwen's published memory table, every cell against memlint (issue 25).

The table (bench/data/calibration/gpu-published/qwen-readme-cells.json) is copied from QwenLM/Qwen
README @e8e1596; the calibration rows are 10 of its cells, so each row's measured number must be
the table's cell at the row's model, method and length (per GPU for the 4-GPU 72B line)."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import qwen_cells  # noqa: E402

FOLDER = os.path.join(ROOT, "bench", "data", "calibration", "gpu-published")


def _load(name):
    with open(os.path.join(FOLDER, name)) as handle:
        return json.load(handle)


def test_rows_are_cells_of_the_table():
    table = _load(qwen_cells.CELLS)
    cells = {(c["model"], c["method"]): c for c in table["cells"]}
    rows = [r for r in _load("manifest.json") if r["group"] == "qwen-hf-peft"]
    assert len(rows) == 10
    for row in rows:
        parts = row["id"].split("-")   # qwen-<model>-<method>-T<length>
        model, method, length = parts[1], "-".join(parts[2:-1]), int(parts[-1][1:])
        cell = cells[(model, method)]
        gb = cell["gb"][table["lengths"].index(length)] / cell.get("gpus", 1)
        assert abs(gb - row["measured_gib"]) < 0.01, row["id"]


def test_cell_args_swap_model_and_length_only():
    template = ["cfg.json", "--model", "configs/models/qwen-7b/config.json", "--set",
                "seq_len=256", "--set", "lora_rank=64"]
    assert qwen_cells.cell_args(template, "14b", 4096) == [
        "cfg.json", "--model", "configs/models/qwen-14b/config.json", "--set", "seq_len=4096",
        "--set", "lora_rank=64"]


def test_every_template_is_a_manifest_row():
    ids = {r["id"] for r in _load("manifest.json")}
    assert set(qwen_cells.TEMPLATES.values()) <= ids
