"""Every cell of Qwen's published LoRA / Q-LoRA memory table against memlint (issue 25; an
independent check, never a fit): `python bench/qwen_cells.py`.

The calibration rows (`gpu-published/manifest.json`, group qwen-hf-peft) are 10 of these
cells. This prints all 48 of the single-GPU LoRA and Q-LoRA lines and of the 72B lines
(`gpu-published/qwen-readme-cells.json`, copied from QwenLM/Qwen README @e8e1596), each run with
the arguments of the manifest row of its method (`TEMPLATES`: the same script, DeepSpeed config,
precision and versions) at the cell's model and length: measured GiB (the README's "GB", per GPU),
memlint's device number (the row's metric, `unspecified`: nvidia-smi) and their difference.
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from published import GiB, PUBLISHED_DIR, _cwd, estimate_args  # noqa: E402

CALIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "calibration")
CELLS = "qwen-readme-cells.json"
# method -> the manifest row whose arguments run it (its model path replaced by the cell's)
TEMPLATES = {"lora": "qwen-7b-lora-T256", "qlora": "qwen-7b-qlora-T256",
             "lora-zero3": "qwen-72b-lora-zero3-T256"}


def cell_args(template: list, model: str, seq_len: int) -> list:
    """The template row's arguments at another model size and sequence length."""
    out = []
    for arg in template:
        if arg.startswith("configs/models/qwen-") and arg.endswith("/config.json"):
            arg = f"configs/models/qwen-{model}/config.json"
        elif arg.startswith("seq_len="):
            arg = f"seq_len={seq_len}"
        out.append(arg)
    return out


def cell_rows(calib: str = CALIB) -> list:
    folder = os.path.join(calib, PUBLISHED_DIR)
    with open(os.path.join(folder, "manifest.json")) as handle:
        manifest = {row["id"]: row for row in json.load(handle)}
    with open(os.path.join(folder, CELLS)) as handle:
        table = json.load(handle)
    rows = []
    for line in table["cells"]:
        template = manifest[TEMPLATES[line["method"]]]["args"]
        for seq_len, gb in zip(table["lengths"], line["gb"]):
            with _cwd(folder):
                estimate, _ = estimate_args(cell_args(template, line["model"], seq_len))
            stage = max(estimate.stages, key=lambda s: s.total_bytes)
            measured = gb / line.get("gpus", 1)
            rows.append({"model": line["model"], "method": line["method"], "seq_len": seq_len,
                         "measured_gib": measured, "device_gib": stage.device_bytes / GiB,
                         "allocated_gib": stage.allocated_bytes / GiB, "phase": stage.phase})
    return rows


def main() -> None:
    rows = cell_rows()
    lengths = sorted({r["seq_len"] for r in rows})
    print("Qwen README cells (GiB per GPU): measured - memlint device (memlint device), by length")
    print(f"{'model':<6}{'method':<12}" + "".join(f"{n:>15}" for n in lengths))
    for key in dict.fromkeys((r["model"], r["method"]) for r in rows):
        line = {r["seq_len"]: r for r in rows if (r["model"], r["method"]) == key}
        print(f"{key[0]:<6}{key[1]:<12}" + "".join(
            f"{line[n]['measured_gib'] - line[n]['device_gib']:>+7.2f} ({line[n]['device_gib']:>5.1f})"
            for n in lengths))


if __name__ == "__main__":
    main()
