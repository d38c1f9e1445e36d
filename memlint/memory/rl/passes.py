"""No-grad passes of RL (old and reference log-probs, critic values, reward scores) and the logits
of an RL update, as Terms.

A log-prob pass runs the model forward under `torch.no_grad()` on one micro-batch: nothing is
saved for backward, so what is alive at its peak is the model's resident weights, the FSDP units
gathered for the layer running (the root unit, holding the embedding and LM head, stays gathered
through the forward), one layer's transient activations (the same live set as an inference
engine's forward, memory/rl/engine.py forward_peak), and the logits of the micro-batch with the
framework's log-prob and entropy temporaries (memory/rl/conventions.py). A critic or reward model
ends in a value head: its output is one number per token.
"""
from __future__ import annotations

from memlint.memory.conventions import seq_per_gpu
from memlint.memory.rl.frameworks import RLConventions
from memlint.memory.rl.engine import EngineShape, forward_peak
from memlint.memory.terms import Term

CHUNK_ROWS = 2048   # verl entropy_from_logits_with_chunking chunk_size (utils/torch_functional.py)
FSDP_SOURCE = ("FSDP: a wrapped unit's parameters are all-gathered in the compute dtype while it "
               "runs; the root unit (embedding, final norm, LM head) for the whole forward")


def gathered_terms(role: str, shape: EngineShape, compute_bytes: int, shard: int) -> list:
    """The FSDP units unsharded during a forward: one decoder layer and the root unit."""
    if shard <= 1:
        return []
    dense = shape.params - shape.expert_params
    per_layer = (dense - _root_params(shape)) // max(1, shape.layers) + (
        shape.expert_params // max(1, shape.layers))
    root = _root_params(shape)
    return [Term(f"{role}.gathered_units", "buffers", (per_layer + root) * compute_bytes,
                 f"(one layer {per_layer:,} + root unit {root:,}) params × {compute_bytes} B",
                 {"layer_params": per_layer, "root_params": root, "shard": shard},
                 FSDP_SOURCE)]


def unsharded_terms(role: str, shape: EngineShape, compute_bytes: int, shard: int,
                    source: str) -> list:
    """The whole model gathered on each GPU for a pass (FSDP2 unshard of every unit at once)."""
    if shard <= 1:
        return []
    return [Term(f"{role}.unsharded_model", "buffers", shape.params * compute_bytes,
                 f"{shape.params:,} params × {compute_bytes} B (every unit gathered)",
                 {"params": shape.params, "shard": shard}, source)]


def _root_params(shape: EngineShape) -> int:
    # embedding and an untied LM head, vocab x hidden each; tied: one table
    return 2 * shape.vocab * shape.hidden if shape.params > 2 * shape.vocab * shape.hidden \
        else shape.vocab * shape.hidden


def forward_terms(role: str, shape: EngineShape, tokens: int, tp: int, cp: int = 1) -> list:
    nbytes, formula = forward_peak(shape, seq_per_gpu(tokens, cp), tp)
    return [Term(f"{role}.forward", "activations", nbytes,
                 f"one layer's live set, no autograd: {formula}",
                 {"tokens": tokens, "cp": cp},
                 "a decoder layer's forward without saved tensors: residual stream, layer input "
                 "and output, the MLP's gate/up output beside its activation")]


def logits_terms(role: str, conv: RLConventions, vocab: int, tokens: int, entropy: bool,
                 chunking: bool, update: bool, tp: int = 1) -> list:
    """The logits of `tokens` tokens and what the framework's log-prob / entropy code adds."""
    per = conv.update_logit_bytes if update else conv.pass_logit_bytes
    shard_vocab = -(-vocab // max(1, tp))
    terms = [Term(f"{role}.logits", "logits", tokens * shard_vocab * per,
                  f"{tokens:,} tokens × vocab {shard_vocab:,} × {per} B "
                  f"({'update: kept for backward' if update else 'log-prob pass'})",
                  {"tokens": tokens, "vocab": shard_vocab, "bytes_per_element": per},
                  conv.logits_source)]
    if entropy:
        if chunking:
            rows = min(tokens, CHUNK_ROWS)
            terms.append(Term(f"{role}.entropy", "logits", rows * shard_vocab * 12,
                              f"chunk of {rows:,} rows × vocab {shard_vocab:,} × (fp32 copy + "
                              "softmax + product) 12 B",
                              {"rows": rows}, "verl utils/torch_functional.py "
                              "entropy_from_logits_with_chunking (chunk_size 2048)"))
        else:
            extra = conv.entropy_update_bytes if update else conv.entropy_pass_bytes
            terms.append(Term(f"{role}.entropy", "logits", tokens * shard_vocab * extra,
                              f"{tokens:,} tokens × vocab {shard_vocab:,} × {extra} B "
                              "(softmax, softmax × logits)", {"tokens": tokens},
                              conv.logits_source))
    return terms


def value_terms(role: str, tokens: int) -> list:
    return [Term(f"{role}.values", "logits", tokens * 4, f"{tokens:,} tokens × 1 × 4 B",
                 {"tokens": tokens}, "a value head (d -> 1) per token, fp32")]
