"""Vocabulary padding (Megatron-LM and gpt-neox): the embedding and output layer are built for a
vocabulary padded up to a multiple of `make_vocab_size_divisible_by` × the tensor-parallel size,
so that every tensor-parallel rank holds an equal slice of whole 128-row blocks.

Adapters record the raw vocabulary (`model.vocab_size`) and the framework's multiple
(`model.vocab_pad_multiple`); the memory model pads with the run's tp when it estimates, so
`--set tp=1` over a tp=8 script, or a plan that changes tp, gets the padding of its own tp.
"""
from __future__ import annotations

SOURCE = ("Megatron-LM megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding "
          "(multiple = make_vocab_size_divisible_by × tensor_model_parallel_size); gpt-neox "
          "megatron/tokenizer/tokenizer.py _vocab_size_with_padding (× model_parallel_size)")


def padded_vocab(vocab: int, multiple: int, tp: int) -> int:
    """`vocab` rounded up to a multiple of multiple·tp (the frameworks' while-loop, closed form)."""
    unit = max(1, int(multiple)) * max(1, int(tp))
    return -(-int(vocab) // unit) * unit


def padding_formula(vocab: int, multiple: int, tp: int) -> str:
    """How the padded vocabulary was reached, for a term's formula."""
    unit = max(1, int(multiple)) * max(1, int(tp))
    return f"ceil(V {int(vocab):,} / ({int(multiple)}·tp {int(tp)}))·{unit}"
