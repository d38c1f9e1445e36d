"""Ground truth for memlint.memory.params: exact parameter counts of the models transformers builds.

Dev-only. Needs torch and transformers (not memlint dependencies) and is not run by CI; the
numbers it prints are pasted as literals into tests/memory/test_params.py. Recorded with
torch 2.13.0+cpu and transformers 5.24.0:

    python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install torch==2.13.0 transformers accelerate
    /tmp/tfenv/bin/python bench/param_truth.py fixtures/hf/*.json          # totals + components
    /tmp/tfenv/bin/python bench/param_truth.py --compare fixtures/hf/*.json  # vs memlint
    /tmp/tfenv/bin/python bench/param_truth.py --compare --published        # PUBLISHED dicts

Each model is built on the meta device (no memory, no weights): `AutoModelForCausalLM`,
`AutoModelForSeq2SeqLM` for T5, or `AutoModelForImageTextToText` for the VLMs. A `quantization_config` is dropped first: memlint
counts the unquantized model (FP8 block scales are not model parameters of the bf16 model).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

COMPONENTS = {
    "embedding": ("embed_tokens.", "transformer.wte.", "transformer.wpe.", "embed_in."),
    "lm_head": ("lm_head.", "embed_out."),
    "vision": ("vision_tower.", "visual.patch_embed.", "visual.blocks."),
    "projector": ("multi_modal_projector.", "visual.merger."),
}


def build(path: str):
    import torch
    from transformers import (AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText,
                              AutoModelForSeq2SeqLM)

    with open(path, encoding="utf-8") as handle:
        raw = json.load(handle)
    raw.pop("quantization_config", None)
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as handle:
            json.dump(raw, handle)
        config = AutoConfig.from_pretrained(tmp)
    with torch.device("meta"):
        for auto in (AutoModelForCausalLM, AutoModelForSeq2SeqLM):
            try:
                return auto.from_config(config)
            except ValueError:
                pass
        return AutoModelForImageTextToText.from_config(config)


def truth(path: str) -> dict:
    model = build(path)
    out = {"total": 0, "embedding": 0, "lm_head": 0, "experts": 0, "vision": 0, "projector": 0}
    for name, param in model.named_parameters():  # tied parameters are listed once
        n = param.numel()
        out["total"] += n
        if ".experts." in name:
            out["experts"] += n
        for component, needles in COMPONENTS.items():
            if any(needle in name for needle in needles):
                out[component] += n
    out["class"] = type(model).__name__
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*")
    parser.add_argument("--published", action="store_true",
                        help="also the PUBLISHED configs of tests/memory/test_params.py")
    parser.add_argument("--compare", action="store_true", help="also run memlint and diff")
    args = parser.parse_args()
    failures = 0
    paths = list(args.configs)
    tmp = tempfile.TemporaryDirectory()
    if args.published:
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        sys.path.insert(0, os.path.join(root, "tests", "memory"))
        sys.path.insert(0, root)
        from test_params import PUBLISHED  # noqa: E402  (dev-only)
        for name, config in PUBLISHED.items():
            paths.append(os.path.join(tmp.name, f"{name}.json"))
            with open(paths[-1], "w", encoding="utf-8") as handle:
                json.dump(config, handle)
    for path in paths:
        got = truth(path)
        line = {"file": os.path.basename(path), **got}
        if args.compare:
            sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
            from memlint.memory.params import architecture, count_params
            with open(path, encoding="utf-8") as handle:
                counts = count_params(architecture(json.load(handle)))
            mine = {"total": counts.total, "embedding": counts.embedding + counts.position_embedding,
                    "lm_head": counts.lm_head, "experts": counts.experts, "vision": counts.vision,
                    "projector": counts.projector}
            diff = {k: mine[k] - got[k] for k in mine if mine[k] != got[k]}
            line["memlint_diff"] = diff
            failures += bool(diff)
        print(json.dumps(line))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
