"""Megatron's flags -> the model: GPTModel's choices (activation, norm, biases, tying, positions),
attention heads and KV groups, MLA, dropouts, the vocabulary and its pad multiple, MoE and
Megatron's LLaVA."""
from __future__ import annotations

import re

from memlint import lazy_import
from memlint.adapters.megatron import fork
from memlint.adapters.megatron.context import Interp
from memlint.adapters.megatron.flags import (DEFAULT_VOCAB, FLAG_BY_NAME, SCRIPT_TOKENIZER,
                                             TOKENIZER_VOCAB)
from memlint.diagnostics import INVALID_VALUE, UNRESOLVED, Severity

# start-up: the layer-pattern parsers load when a file gives a pattern flag
_layouts = lazy_import.module("memlint.adapters.megatron.layouts")

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


def model(it: Interp) -> None:
    v = it.value
    for flag in ("--num-layers", "--hidden-size", "--num-attention-heads",
                 "--max-position-embeddings", "--kv-channels", "--mtp-num-layers"):
        spec = FLAG_BY_NAME[flag]
        if flag in it.values:
            it.set(spec.target, it.values[flag], flag)
    hidden = v("--hidden-size")
    heads = v("--num-attention-heads")
    swiglu = it.on("--swiglu")
    rms = v("--normalization") == "RMSNorm"
    mla = it.on("--multi-latent-attention")
    moe_experts = fork.experts(it)
    # MLP width (Megatron's default when --ffn-hidden-size is absent)
    ffn = v("--ffn-hidden-size")
    if ffn is not None:
        it.set("model.intermediate_size", ffn, "--ffn-hidden-size")
    elif hidden is not None:
        ffn = int((4 * hidden * 2 / 3) / 64) * 64 if swiglu else 4 * hidden
        it.set("model.intermediate_size", ffn, "--hidden-size",
                 "ffn-hidden-size (Megatron default from --hidden-size)")
    # attention heads and KV groups
    if heads is not None and not mla:
        if it.on("--group-query-attention"):
            groups = v("--num-query-groups", 1)
            flag = "--num-query-groups" if it.on("--num-query-groups") else \
                "--group-query-attention"
            it.set("model.num_key_value_heads", groups, flag)
        else:
            # Megatron ignores --num-query-groups without --group-query-attention.
            it.set("model.num_key_value_heads", heads, "--num-attention-heads",
                     "num_key_value_heads (= heads: no --group-query-attention)")
    elif heads is not None:
        it.set("model.num_key_value_heads", heads, "--num-attention-heads")
    # family: Megatron's GPTModel with every choice written out (memory/params.py
    # "megatron_gpt"); --num-experts gives experts whatever the activation and norm.
    anchor = next((f for f in ("--swiglu", "--normalization", "--num-layers", "--hidden-size")
                   if it.on(f)), None)
    if anchor:
        it.set("model.model_type", "megatron_gpt", anchor,
                 "model_type megatron_gpt (Megatron GPTModel from its flags)")
        act = "silu" if swiglu else "relu2" if it.on("--squared-relu") else \
            "gelu_new" if it.on("--openai-gelu") else "gelu"
        it.set("model.hidden_act", act, "--swiglu" if swiglu else anchor, "hidden_act")
        it.set("model.gated_mlp", swiglu, "--swiglu" if swiglu else anchor,
                 "gated_mlp (--swiglu)" if swiglu else "gated_mlp false (no --swiglu)")
        it.set("model.norm", "rmsnorm" if rms else "layernorm",
                 "--normalization" if it.on("--normalization") else anchor,
                 "norm" + ("" if it.on("--normalization") else
                           " (Megatron default LayerNorm)"))
        bias = not it.on("--disable-bias-linear")
        bias_flag = "--disable-bias-linear" if not bias else anchor
        it.set("model.mlp_bias", bias, bias_flag, "mlp_bias (add_bias_linear)")
        it.set("model.output_bias", bias, bias_flag, "output_bias (add_bias_linear)")
        it.set("model.attention_bias", bias or it.on("--add-qkv-bias"),
                 "--add-qkv-bias" if it.on("--add-qkv-bias") else bias_flag,
                 "attention_bias")
        tied = not it.on("--untie-embeddings-and-output-weights")
        it.set("model.tie_word_embeddings", tied,
                 "--untie-embeddings-and-output-weights" if not tied else anchor,
                 "tie_word_embeddings")
        it.set("model.qk_layernorm", it.on("--qk-layernorm"),
                 "--qk-layernorm" if it.on("--qk-layernorm") else anchor, "qk_layernorm")
        it.set("model.multi_latent_attention", mla,
                 "--multi-latent-attention" if mla else anchor, "multi_latent_attention")
        position = v("--position-embedding-type", "learned_absolute")
        learned = 0
        if position == "learned_absolute":
            learned = v("--max-position-embeddings") or v("--seq-length") or 0
        flag = "--position-embedding-type" if it.on("--position-embedding-type") else \
            ("--max-position-embeddings" if it.on("--max-position-embeddings") else anchor)
        it.set("model.learned_positions", learned, flag,
                 f"learned_positions ({position}"
                 + ("" if it.on("--position-embedding-type") else ", Megatron's default")
                 + ")")
        dropouts(it, anchor)
        llava(it, anchor)
        bert_heads(it, anchor)
    vocab(it)
    moe(it, moe_experts, ffn)
    if mla:
        p_mla = {"--q-lora-rank": None, "--kv-lora-rank": 32, "--qk-head-dim": 128,
                 "--qk-pos-emb-head-dim": 64, "--v-head-dim": 128}
        for flag, default in p_mla.items():
            target = FLAG_BY_NAME[flag].target
            if flag in it.values:
                it.set(target, it.values[flag], flag)
            else:
                it.set(target, default, "--multi-latent-attention",
                         f"{target[6:]} (Megatron default {default})")


def bert_heads(it: Interp, anchor: str) -> None:
    """examples/bert/pretrain_bert.py builds BertModel: the masked-LM head always, the pooler,
    binary head and 2 token-type embeddings unless --bert-no-binary-head (bert_binary_head,
    default True; megatron/core/models/bert/bert_model.py)."""
    entry = it.partial.extra.get("megatron.entry-script")
    if entry is None or not re.search(r"pretrain_bert\.py$", str(entry.value)):
        return
    binary = not it.on("--bert-no-binary-head")
    flag = "--bert-no-binary-head" if not binary else anchor
    it.set("model.bert_heads", "lm+binary" if binary else "lm", flag,
           "bert_heads " + ("lm+binary (pretrain_bert.py: masked-LM head, pooler, binary head)"
                            if binary else "lm (--bert-no-binary-head)"))


def llava(it: Interp, anchor: str) -> None:
    """Megatron's LLaVA (pretrain_vlm.py): a CLIP ViT of --encoder-num-layers (default
    --num-layers) layers over --img-h x --img-w images cut in --patch-dim patches; its image
    tokens (plus the class token unless --disable-vision-class-token) precede the
    --dataloader-seq-length (default --seq-length) text tokens in the language model."""
    entry = it.partial.extra.get("megatron.entry-script")
    script = str(entry.value) if entry is not None else ""
    if not re.search(r"pretrain_vlm\.py$", script):
        return  # other multimodal scripts (examples/multimodal) build other vision models
    v = it.value
    try:
        layers = int(it.arg("--encoder-num-layers").values[0]) if it.on(
            "--encoder-num-layers") else v("--num-layers")
        height = int(it.arg("--img-h").values[0]) if it.on("--img-h") else 336
        width = int(it.arg("--img-w").values[0]) if it.on("--img-w") else 336
        patch = int(it.arg("--patch-dim").values[0]) if it.on("--patch-dim") else 14
    except (ValueError, IndexError, AttributeError):
        return
    if not layers or patch <= 0:
        return
    flag = "--img-h" if it.on("--img-h") else anchor
    it.set("model.vision_num_layers", layers,
             "--encoder-num-layers" if it.on("--encoder-num-layers") else flag,
             "vision_num_layers (LLaVA ViT: --encoder-num-layers, default --num-layers)")
    it.set("model.vision_img_h", height, flag, "vision_img_h (--img-h)")
    it.set("model.vision_img_w", width, flag, "vision_img_w (--img-w)")
    it.set("model.vision_patch_dim", patch, flag, "vision_patch_dim (--patch-dim)")
    class_token = not it.on("--disable-vision-class-token")
    it.set("model.vision_class_token", class_token, flag, "vision_class_token")
    tokens = (height // patch) * (width // patch) + (1 if class_token else 0)
    it.set("images_per_sample", 1, flag, "images_per_sample 1 (pretrain_vlm.py)")
    it.set("tokens_per_image", tokens, flag,
             f"tokens_per_image {tokens} ((img-h/patch)·(img-w/patch)"
             + (" + class token)" if class_token else ")"))
    text = it.arg("--dataloader-seq-length")
    text_tokens = v("--seq-length")
    if text is not None and text.values:
        try:
            text_tokens = int(text.values[0])
            it.set("seq_len", text_tokens, "--dataloader-seq-length",
                     "seq_len (text tokens: --dataloader-seq-length)")
        except ValueError:
            pass
    # LLaVAModel's share_embeddings_and_output_weights defaults to False and pretrain_vlm.py
    # does not pass it: the language model has its own output layer
    it.set("model.tie_word_embeddings", False, flag,
           "tie_word_embeddings False (LLaVAModel default; pretrain_vlm.py passes none)")
    if v("--position-embedding-type", "learned_absolute") == "learned_absolute" \
            and isinstance(text_tokens, int):
        positions = _llava_language_positions(it, text_tokens + tokens)
        it.set("model.learned_positions", positions, flag,
               f"learned_positions {positions} (LLaVA's language_max_sequence_length: text + "
               "image tokens + SP/CP padding, pretrain_vlm.py)")


def _llava_language_positions(it: Interp, decoder: int) -> int:
    """pretrain_vlm.py: the language model's learned positions are its
    language_max_sequence_length, the decoder sequence (text + image tokens) padded for SP / CP
    (megatron/core/models/multimodal/context_parallel.py get_padding), times the micro batch in
    the THD layout (cp > 1 with --use-packed-sequence or padding); --max-position-embeddings
    does not size them."""
    v = it.value
    tp, cp = v("--tensor-model-parallel-size", 1) or 1, v("--context-parallel-size", 1) or 1
    sp = it.on("--sequence-parallel")
    # model_provider calls get_padding without its FP8 arguments: no FP8 padding here
    factor = tp * cp * 2 if sp and cp > 1 else cp * 2 if cp > 1 else tp if sp else 1
    padding = -decoder % factor
    positions = decoder + padding
    if cp > 1 and (it.on("--use-packed-sequence") or padding > 0):
        positions *= v("--micro-batch-size", 1) or 1
    return positions


def dropouts(it: Interp, anchor: str) -> None:
    """Megatron's dropout probabilities, its own defaults when absent (TransformerConfig
    hidden_dropout = attention_dropout = 0.1, megatron/core/transformer/transformer_config.py);
    the embedding dropout uses hidden_dropout (LanguageModelEmbedding)."""
    for flag, key in (("--hidden-dropout", "hidden_dropout"),
                      ("--attention-dropout", "attention_dropout")):
        given = flag in it.values
        value = it.values[flag] if given else FLAG_BY_NAME[flag].default
        it.set(f"model.{key}", value, flag if given else anchor,
                 key + ("" if given else f" (Megatron default {value})"))
        if key == "hidden_dropout":
            it.set("model.embedding_dropout", value, flag if given else anchor,
                     "embedding_dropout (= hidden_dropout, LanguageModelEmbedding)")


def vocab(it: Interp) -> None:
    v = it.value
    multiple = v("--make-vocab-size-divisible-by", 128)
    if it.on("--pad-vocab-size-to") and "--pad-vocab-size-to" in it.values:
        padded = v("--pad-vocab-size-to")
        it.set("model.vocab_size", padded, "--pad-vocab-size-to")
        return
    raw, flag, note = None, None, None
    if "--vocab-size" in it.values:
        raw, flag = v("--vocab-size"), "--vocab-size"
    else:
        for candidate in ("--tokenizer-model", "--tokenizer-name-or-path", "--tokenizer-type"):
            arg = it.arg(candidate)
            text = arg.values[0] if arg is not None and arg.values else None
            if not isinstance(text, str):  # the literal part helps: ${DATA}/nemotron_2_256k
                continue
            for pattern, size, why in TOKENIZER_VOCAB:
                if pattern.search(text):
                    raw, flag, note = size, candidate, why
                    break
            if raw is not None:
                break
    anchor = flag or next((f for f in ("--tokenizer-type", "--tokenizer-model",
                                       "--num-layers", "--hidden-size") if it.on(f)), None)
    if anchor is None:
        return
    entry = it.partial.extra.get("megatron.entry-script")
    if raw is None and not it.on("--tokenizer-type") and entry is not None:
        for script, tokenizer in SCRIPT_TOKENIZER:
            if script.search(str(entry.value)):
                for pattern, size, why in TOKENIZER_VOCAB:
                    if pattern.search(tokenizer):
                        raw = size
                        it.diag(UNRESOLVED, Severity.INFO,
                                  f"vocabulary size taken as {size}: {entry.value} defaults "
                                  f"to --tokenizer-type {tokenizer} ({why})",
                                  it.prov(anchor))
                        break
                break
    if raw is None:
        raw = DEFAULT_VOCAB
        it.diag(UNRESOLVED, Severity.INFO,
                  "vocabulary size unknown (no --vocab-size and no tokenizer memlint "
                  f"recognises); assumed {DEFAULT_VOCAB} (GPT-2 BPE) before padding; give "
                  "--vocab-size or `--set model.vocab_size=N`", it.prov(anchor))
    elif note:
        it.diag(UNRESOLVED, Severity.INFO,
                  f"vocabulary size taken as {raw} from {flag} {it.arg(flag).values[0]} "
                  f"({note})",
                  it.prov(flag))
    # the raw vocabulary and Megatron's multiple; the memory model pads with the run's tp
    # (memlint/facts/vocab.py), so `--set tp=N` gets the padding of its own tp
    it.partial.set("model.vocab_size", raw, it.prov(anchor, "vocab_size (before padding)"))
    given = "--make-vocab-size-divisible-by" in it.values
    it.set("model.vocab_pad_multiple", multiple,
           "--make-vocab-size-divisible-by" if given else anchor,
           "vocab_pad_multiple" + ("" if given else
                                   f" (Megatron default --make-vocab-size-divisible-by "
                                   f"{multiple}; padded to a multiple of {multiple}·tp)"))


def moe(it: Interp, experts: Optional[int], ffn: Optional[int]) -> None:
    if not experts:
        return
    v = it.value
    it.set("model.num_local_experts", experts, "--num-experts")
    if fork.is_fork(it):  # Megatron-DeepSpeed: its own top-k, interval and ep flags
        it.set("model.moe_intermediate_size", ffn, "--num-experts", "moe_intermediate_size")
        fork.apply(it, v("--num-layers"))
        return
    topk = v("--moe-router-topk", 2)
    it.set("model.num_experts_per_tok", topk,
             "--moe-router-topk" if it.on("--moe-router-topk") else "--num-experts",
             "num_experts_per_tok" + ("" if it.on("--moe-router-topk") else
                                      " (Megatron default 2)"))
    expert_ffn = v("--moe-ffn-hidden-size", ffn)
    if expert_ffn is not None:
        it.set("model.moe_intermediate_size", expert_ffn,
                 "--moe-ffn-hidden-size" if it.on("--moe-ffn-hidden-size") else
                 "--num-experts", "moe_intermediate_size")
    shared = v("--moe-shared-expert-intermediate-size")
    if shared:
        it.set("model.shared_expert_intermediate_size", shared,
                 "--moe-shared-expert-intermediate-size")
        if it.on("--moe-shared-expert-gate"):
            it.set("model.shared_expert_gate", True, "--moe-shared-expert-gate")
    freq = v("--moe-layer-freq")
    layers = v("--num-layers")
    if freq is not None:
        pattern = _layouts.parse_layer_freq(freq, layers)
        flag = "--moe-layer-freq"
        if pattern is None:
            it.diag(INVALID_VALUE, Severity.WARNING,
                      f"--moe-layer-freq {freq!r} is neither a whole number nor a list "
                      "expression like [0]*3+[1]*58; every layer assumed MoE",
                      it.prov(flag))
            return
        if isinstance(pattern, int):
            it.set("model.moe_layer_freq", pattern, flag)
            it.set("model.first_k_dense_replace", 0, flag)
            return
        it.partial.set_extra("megatron.moe-layer-pattern", pattern, it.prov(flag))
        if layers is not None and len(pattern) != layers:
            it.diag(INVALID_VALUE, Severity.ERROR,
                      f"--moe-layer-freq lists {len(pattern)} layers but --num-layers is "
                      f"{layers}; Megatron asserts they match", it.prov(flag))
            return
        k = next((i for i, x in enumerate(pattern) if x), len(pattern))
        if all(pattern[k:]):
            it.set("model.first_k_dense_replace", k, flag)
            it.set("model.moe_layer_freq", 1, flag)
        else:
            it.set("model.mlp_only_layers", [i for i, x in enumerate(pattern) if not x],
                     flag)
