"""Megatron models beyond GPTModel: hybrids (pretrain_hybrid.py / pretrain_mamba.py,
`--hybrid-layer-pattern`) and T5 (pretrain_t5.py, `--encoder-num-layers` / `--decoder-num-layers`),
written as model keys the memory model reads (memory/megatron_hybrid.py, memory/t5_model.py).

Runs after the GPT flags (`model`) and the batch flags (`batch`): the GPT keys (width, heads,
groups, MLP, norm, biases, tying, positions, dropouts, vocabulary) stay as they are and these add
or change what the other models build (NVIDIA/Megatron-LM@d98e8a64dd):
- hybrid (megatron/training/arguments.py, "Hybrid layer pattern" block): `--hybrid-override-pattern`
  is forwarded to `--hybrid-layer-pattern`; num_layers is the pattern's length; its '|' segments
  are the pipeline stages, and more segments than pp give the virtual stages
  (virtual_pipeline_model_parallel_size = segments / pp); Mamba mixer shape from
  `--mamba-state-dim` (128), `--mamba-head-dim` (64), `--mamba-num-groups` (8),
  `--mamba-num-heads` (hidden·2 / head dim), TransformerConfig's defaults;
- T5 (arguments.py: `--encoder-num-layers` is num_layers when `--num-layers` is not given, the
  sequence length is `--encoder-seq-length`; examples/t5/pretrain_t5.py builds the decoder from
  config.num_layers too); the decoder's length `--decoder-seq-length`; relative position buckets
  with `--position-embedding-type relative` (default 32); the BertWordPieceCase tokenizer adds
  100 `<extra_id_i>` tokens (megatron/core/tokenizers/utils/build_tokenizer.py).
"""
from __future__ import annotations

import re

from memlint import lazy_import
from memlint.adapters.megatron.context import Interp

# start-up: the layer-pattern facts load when a file gives a hybrid pattern
hp = lazy_import.module("memlint.facts.hybrid_pattern")


def is_t5(it: Interp) -> bool:
    entry = it.partial.extra.get("megatron.entry-script")
    script = str(entry.value) if entry is not None else ""
    if re.search(r"pretrain_t5\.py$", script):
        return True
    return (it.on("--encoder-num-layers") and it.on("--decoder-num-layers")
            and not re.search(r"pretrain_vlm\.py$", script))


def hybrid_pattern(it: Interp):
    """(pattern, flag) of a hybrid model, or (None, None)."""
    for flag in ("--hybrid-layer-pattern", "--hybrid-override-pattern"):
        arg = it.arg(flag)
        if arg is not None and arg.values and isinstance(arg.values[0], str):
            return arg.values[0].strip().strip("'\""), flag
    return None, None


def _int(it: Interp, flag: str):
    arg = it.arg(flag)
    if arg is None or not arg.values:
        return None
    try:
        value = int(str(arg.values[0]).strip().strip("'\""))
    except ValueError:
        return None
    return value if value > 0 else None


def hybrid(it: Interp, pattern: str, flag: str) -> None:
    main = hp.main_pattern(pattern)
    segments = hp.segments(pattern)
    it.set("model.model_type", "megatron_hybrid", flag,
           "model_type megatron_hybrid (Megatron HybridModel from its flags)")
    it.set("model.hybrid_layer_pattern", pattern, flag)
    it.set("model.num_hidden_layers", len(main.replace("|", "")), flag,
           "num_hidden_layers (the hybrid pattern's length)")
    for name, key, default in (("--mamba-state-dim", "mamba_state_dim", 128),
                               ("--mamba-head-dim", "mamba_head_dim", 64),
                               ("--mamba-num-groups", "mamba_num_groups", 8)):
        value = _int(it, name)
        it.set(f"model.{key}", value or default, name if value else flag,
               key + ("" if value else f" (Megatron default {default})"))
    heads = _int(it, "--mamba-num-heads")
    if heads:
        it.set("model.mamba_num_heads", heads, "--mamba-num-heads")
    pp = it.value("--pipeline-model-parallel-size", 1) or 1
    if len(segments) > 1:
        it.partial.set_extra("megatron.pipeline-layout-stages", ["t" * len(s) for s in segments],
                             it.prov(flag, "pipeline stages (the pattern's '|' segments)"))
        if len(segments) % pp == 0 and len(segments) > pp:
            it.set("vpp", len(segments) // pp, flag,
                   "vpp (the pattern's segments / pipeline-model-parallel-size)")


def t5(it: Interp) -> None:
    anchor = "--encoder-num-layers" if it.on("--encoder-num-layers") else "--num-layers"
    if not it.on(anchor):
        return
    it.set("model.model_type", "megatron_t5", anchor,
           "model_type megatron_t5 (Megatron T5Model from its flags)")
    layers = _int(it, "--num-layers") or _int(it, "--encoder-num-layers")
    if layers:
        it.set("model.num_hidden_layers", layers, anchor)
        # pretrain_t5.py builds the decoder from config.num_layers (= the encoder's layers when
        # --num-layers is absent); --decoder-num-layers does not size it
        it.set("model.num_decoder_layers", layers, anchor,
               "num_decoder_layers (pretrain_t5.py: config.num_layers)")
    encoder = _int(it, "--encoder-seq-length") or _int(it, "--seq-length")
    if encoder:
        it.set("seq_len", encoder, "--encoder-seq-length" if it.on("--encoder-seq-length")
               else "--seq-length", "seq_len (the encoder's: --encoder-seq-length)")
    decoder = _int(it, "--decoder-seq-length")
    if decoder:
        it.set("model.decoder_seq_length", decoder, "--decoder-seq-length")
    position = it.value("--position-embedding-type", "learned_absolute")
    if position == "relative":
        buckets = _int(it, "--relative-attention-num-buckets") or 32
        it.set("model.relative_attention_num_buckets", buckets,
               "--relative-attention-num-buckets" if it.on("--relative-attention-num-buckets")
               else "--position-embedding-type")
    tokenizer = it.arg("--tokenizer-type")
    if tokenizer is not None and tokenizer.values and \
            str(tokenizer.values[0]).strip("'\"") == "BertWordPieceCase" and \
            "--vocab-size" not in it.values:
        setting = it.partial.settings.get("model.vocab_size")
        raw = setting.value if setting is not None else None
        if isinstance(raw, int) and not isinstance(raw, bool):
            it.set("model.vocab_size", raw + 100, "--tokenizer-type",
                   f"vocab_size {raw} + 100 <extra_id_i> tokens (BertWordPieceCase, "
                   "build_tokenizer.py; before padding)")


def beyond_gpt(it: Interp) -> None:
    """Hybrid and T5 model keys (module docstring); GPT models are left as they are."""
    pattern, flag = hybrid_pattern(it)
    if pattern is not None:
        hybrid(it, pattern, flag)
    elif is_t5(it):
        t5(it)
