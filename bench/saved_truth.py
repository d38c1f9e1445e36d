"""Ground truth for memlint.memory.layout_activations / mixer_activations on transformers' torch
paths: the bytes autograd saves per token in each decoder layer of a small hybrid model run on
the CPU (train mode, no kernels: transformers falls back to its torch implementations).

Dev-only. Needs torch and transformers (not memlint dependencies) and is not run by CI; the
numbers it prints are pasted as literals into tests/memory/test_hybrid_activations.py. Recorded
with torch 2.13.0+cpu and transformers 5.24.0 (the venv of bench/param_truth.py):

    /tmp/tfenv/bin/python bench/saved_truth.py fixtures/hf/tiny/*.json --dtype bf16 --seq 256

A layer's saved bytes are the distinct storages `torch.autograd.graph.saved_tensors_hooks` sees
while that layer's forward runs (a forward pre-hook / hook pair marks it), parameters excluded
(a weight's transpose saved by a linear is the weight's storage); per token = bytes / (B·T).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile


def build(config: dict, dtype):
    from transformers import AutoConfig, AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as handle:
            json.dump(config, handle)
        auto = AutoConfig.from_pretrained(tmp)
    auto._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(auto).to(dtype)
    model.train()
    return model


def saved_per_layer(config: dict, dtype_name: str, batch: int, seq: int) -> dict:
    import torch

    torch.manual_seed(0)
    model = build(config, getattr(torch, {"bf16": "bfloat16", "fp32": "float32"}[dtype_name]))
    inner = getattr(model, "model", None) or getattr(model, "backbone")
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    current = [None]
    seen: dict = collections.defaultdict(dict)

    def pack(tensor):
        storage = tensor.untyped_storage()
        if current[0] is not None and storage.data_ptr() not in params:
            seen[current[0]][storage.data_ptr()] = storage.nbytes()
        return tensor

    for i, layer in enumerate(inner.layers):
        layer.register_forward_pre_hook(lambda module, args, i=i: current.__setitem__(0, i))
        layer.register_forward_hook(lambda module, args, out: current.__setitem__(0, None))
    ids = torch.randint(0, config["vocab_size"], (batch, seq))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(input_ids=ids)
    return {i: round(sum(s.values()) / (batch * seq), 2) for i, s in sorted(seen.items())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="bf16")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=256)
    args = parser.parse_args()
    for path in args.configs:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
        layers = saved_per_layer(config, args.dtype, args.batch, args.seq)
        print(json.dumps({"file": os.path.basename(path), "dtype": args.dtype,
                          "seq": args.seq, "per_layer": layers}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
