"""Logits and loss: the output layer's logits, their fp32 upcast and the loss's gradients at the
start of the backward (HF's and Megatron's cross-entropy differ: Megatron's is vocab-parallel
and fused).
"""
from __future__ import annotations

import math

from memlint.facts import vocab as vocab_facts
from memlint.memory.compile import SRC_PARTITIONER
from memlint.memory.conventions import seq_per_gpu
from memlint.memory.layout_arch import decoder_seq
from memlint.memory.model import Model
from memlint.memory.params import vocab_formula
from memlint.memory.terms import Term
from memlint.records import replace

def logits_terms(model: Model, phase: str) -> list:
    """Logits and the loss (`_logits_terms`), and the logits the training loop's outputs still
    hold (`held_logits_terms`); where the framework padded the vocabulary, each term cites the
    padding (memlint/facts/vocab.py) its V went through."""
    terms = _logits_terms(model, phase) + held_logits_terms(model)
    if model.arch.vocab_unpadded:
        terms = [replace(t, source=f"{t.source}; vocabulary padding: {vocab_facts.SOURCE}")
                 for t in terms]
    return terms


def _logits_terms(model: Model, phase: str) -> list:
    """Logits and the loss.

    transformers (ForCausalLMLoss; also under DeepSpeed, which runs the model's own loss): logits
    in the compute dtype are held by the model output,
    upcast to fp32 and log-softmaxed (the fp32 log-probabilities are saved); at the start of the
    loss backward the log-probabilities, their gradient and the fp32 logits' gradient are alive
    (3 × 4 B × V per token). Megatron's vocab-parallel cross entropy (and its fused variant)
    upcasts the logits, keeps the fp32 exp-logits for backward and writes the gradient into that
    buffer in place; the compute-dtype logits live until the forward returns and the gradient is
    cast back to the compute dtype at the start of backward: (c + 4) B per logit in both phases
    (megatron/core/tensor_parallel/cross_entropy.py, megatron/core/fusions/fused_cross_entropy.py).
    """
    arch, tr, topo = model.arch, model.tr, model.topo
    # an encoder-decoder's logits are over the decoder's tokens (T5: --decoder-seq-length)
    dec = decoder_seq(arch)
    tokens = tr.micro_batch * (seq_per_gpu(dec, topo.cp) if dec else model.seq_local)
    vocab, v_text = logits_vocab(model)
    c = model.dt.compute
    if model.conv.loss == "vocab-parallel":
        return _megatron_logits_terms(model, phase, tokens, vocab, c, v_text)
    if model.conv.loss == "log-softmax" and model.conv.compiled_loss \
            and model.assume["compile.loss_saved"] == "logits":
        return [compiled_loss_term(phase, c, vocab, tokens, v_text)]
    if model.conv.loss_parallel:
        return [loss_parallel_term(phase, c, vocab, tokens, v_text)]
    if model.conv.loss == "log-softmax" and not model.conv.loss_upcast and not model.dt.autocast:
        return [_compute_dtype_loss_term(phase, c, vocab, tokens, v_text)]
    if model.conv.loss == "log-softmax":
        if phase == "backward_start":
            per, formula = 12, "log-probs + their grad + logits grad: 3 × 4 B"
        else:
            per, formula = c + 4, f"logits {c} B + fp32 log-probs 4 B"
    else:
        if phase == "backward_start":
            per, formula = c + 4, f"fp32 softmax/gradient buffer 4 B + gradient cast {c} B"
        else:
            per, formula = c + 4, f"logits {c} B + fp32 exp-logits 4 B"
    value = per * vocab * tokens
    return [Term("logits", "logits", value,
                 f"({formula}) × {v_text} × {tokens:,} tokens",
                 {"bytes_per_logit": per, "vocab_per_gpu": vocab, "tokens": tokens},
                 "transformers loss_utils.ForCausalLMLoss; Megatron cross_entropy.py"
                 + (f"; {SRC_GATHERED}" if model.conv.gathered_logits else ""))]


SRC_NO_UPCAST = ("Qwen v1 remote code modeling_qwen.py QWenLMHeadModel.forward (CrossEntropyLoss on "
                 "lm_logits[..., :-1, :].contiguous(), no .float()); torch.amp docs: cross_entropy "
                 "and log_softmax autocast to float32 only inside torch.autocast, which a "
                 "DeepSpeed engine does not enter (accelerate native_amp is off under DeepSpeed)")


def _compute_dtype_loss_term(phase: str, c: int, vocab: int, tokens: int, v_text: str) -> Term:
    """A loss on the logits in their own dtype, outside autocast (`transformers.loss_upcast`
    false, e.g. Qwen v1's remote code under a DeepSpeed engine): log_softmax saves its c-byte
    output; at the start of the backward the saved log-probs, nll's gradient and log_softmax's
    input gradient are alive (3 × c B per logit); after the forward the logits the outputs hold
    and the log-probs (2 × c B)."""
    if phase == "backward_start":
        per, what = 3 * c, f"log-probs + their grad + logits grad: 3 × {c} B"
    else:
        per, what = 2 * c, f"logits {c} B + log-probs {c} B"
    return Term("logits", "logits", per * vocab * tokens,
                f"loss in the logits' dtype: ({what}) × {v_text} × {tokens:,} tokens",
                {"bytes_per_logit": per, "vocab_per_gpu": vocab, "tokens": tokens,
                 "upcast": False}, SRC_NO_UPCAST)


SRC_GATHERED = ("pytorch/torchtitan@e7c0cae torchtitan/models/llama3/parallelize_llama.py (output "
                "ColwiseParallel output_layouts=Replicate() without loss parallel)")


def logits_vocab(model: Model) -> tuple:
    """(vocabulary entries per GPU the loss runs on, its formula text): V/tp, or the whole V when
    torchtitan gathers the tensor-parallel logits (disable_loss_parallel)."""
    arch, tp = model.arch, model.topo.tp
    if model.conv.gathered_logits:
        return arch.vocab, vocab_formula(arch, 1) + f" (gathered over tp {tp})"
    return math.ceil(arch.vocab / tp), vocab_formula(arch, tp)


def _megatron_logits_terms(model: Model, phase: str, tokens: int, vocab: int, c: int,
                           v_text: str) -> list:
    """Megatron's output layer and vocab-parallel cross entropy on the last stage.

    Each loss head (the LM head, plus one per multi-token-prediction layer, `--mtp-num-layers`,
    whose losses megatron/core/transformer/multi_token_prediction.py computes in the same forward)
    keeps its fp32 exp-logits / softmax for backward: 4 B per logit
    (megatron/core/tensor_parallel/cross_entropy.py: `.float()`, exp in place, saved). While the
    last head's loss is computed its compute-dtype logits are alive too (c B); in backward the
    fp32 gradient written into the softmax buffer is cast to c B. With
    `--cross-entropy-loss-fusion` (impl native, megatron/core/fusions/fused_cross_entropy.py) the
    jit-fused functions return new tensors where the eager path works in place, so the fp32 copy
    of the logits and the exp-logits are alive together: 4 B more per logit in the forward.
    `--defer-embedding-wgrad-compute` keeps the output layer's gradient output (c B per logit) and
    input (c B per hidden value) of up to `--wgrad-deferral-limit` micro-batches (0: all) until the
    pipeline flush (megatron/core/tensor_parallel/layers.py, grad_output_buffer and
    embedding_activation_buffer); at the peak the earlier micro-batches' ones are held.
    """
    conv = model.conv
    heads = 1 + model.mtp_layers
    fused = conv.fused_cross_entropy
    extra_fused = 4 if fused and phase != "backward_start" else 0
    per = 4 * heads + c + extra_fused
    formula = (f"{heads} loss head{'s' if heads > 1 else ''} × fp32 exp-logits 4 B + "
               + (f"logits {c} B" if phase != "backward_start" else f"gradient cast {c} B")
               + (" + fused CE fp32 copy 4 B" if extra_fused else ""))
    terms = [Term("logits", "logits", per * vocab * tokens,
                  f"({formula}) × {v_text} × {tokens:,} tokens",
                  {"bytes_per_logit": per, "vocab_per_gpu": vocab, "tokens": tokens,
                   "loss_heads": heads, "fused": fused},
                  "megatron/core/tensor_parallel/cross_entropy.py; "
                  "megatron/core/fusions/fused_cross_entropy.py")]
    if conv.deferred_wgrad:
        micro = max(1, model.microbatches or 1)
        limit = conv.wgrad_deferral_limit
        calls = micro * heads
        held = min(limit if limit > 0 else calls, calls - 1)
        if held > 0:
            hidden = model.arch.hidden
            per_mb = c * vocab * tokens + c * hidden * tokens
            terms.append(Term("logits.deferred_wgrad", "logits", held * per_mb,
                              f"{held} deferred micro-batches × (gradient output {c} B × "
                              f"{v_text} + input {c} B × d {hidden}) × {tokens:,} tokens",
                              {"held": held, "limit": limit, "microbatches": micro},
                              "megatron/core/tensor_parallel/layers.py (grad_output_buffer, "
                              "embedding_activation_buffer)"))
    return terms


def compiled_loss_term(phase: str, c: int, vocab: int, tokens: int, v_text: str) -> Term:
    """A compiled cross-entropy (memory/compile.py, assumption compile.loss_saved=logits): the
    forward keeps the compute-dtype logits (the partitioner's cut, with per-row statistics of a
    few bytes per token, not counted); the fused backward writes their gradient in the same dtype
    beside them: c B per logit after the forward, 2c B at the start of the backward."""
    per = 2 * c if phase == "backward_start" else c
    what = (f"saved logits {c} B + their gradient {c} B" if phase == "backward_start"
            else f"saved logits {c} B")
    return Term("logits", "logits", per * vocab * tokens,
                f"compiled loss: ({what}) × {v_text} × {tokens:,} tokens",
                {"bytes_per_logit": per, "vocab_per_gpu": vocab, "tokens": tokens,
                 "compiled": True},
                f"{SRC_PARTITIONER}; torchtitan components/loss.py build_cross_entropy_loss")


SRC_LOSS_PARALLEL = ("pytorch/pytorch torch/distributed/tensor/parallel/loss.py @02eef6b "
                     "(_log_softmax: shifted = x - max, result = shifted - logsumexp; "
                     "_nll_loss_and_log_softmax_backward: zeros_like(x), "
                     "(grad_input + exp(x)) * grad_output); torchtitan loss_parallel with tp > 1 "
                     "(training.disable_loss_parallel = false by default)")


def loss_parallel_term(phase: str, c: int, vocab: int, tokens: int, v_text: str) -> Term:
    """torchtitan under tensor parallelism computes the loss on vocab-sharded logits with
    DTensor's loss_parallel, whose fused nll + log-softmax backward holds, at its peak, the saved
    fp32 log-probabilities, `zeros_like(x)`, `grad_input + exp(x)` and its product with the
    gradient (exp(x) freed by then, or alive in place of the product): 4 × 4 B per logit. After
    the forward the fp32 log-probabilities are kept beside the compute-dtype logits (c + 4 B)."""
    if phase == "backward_start":
        per, what = 16, "saved log-probs + zeros_like + (grad + exp) + product: 4 × 4 B"
    else:
        per, what = c + 4, f"logits {c} B + fp32 log-probs 4 B"
    return Term("logits", "logits", per * vocab * tokens,
                f"loss parallel: ({what}) × {v_text} × {tokens:,} tokens",
                {"bytes_per_logit": per, "vocab_per_gpu": vocab, "tokens": tokens,
                 "loss_parallel": True}, SRC_LOSS_PARALLEL)


SRC_TRAINER_DROPS = ("transformers Trainer.training_step: `loss = self.compute_loss(model, inputs)`, "
                     "whose compute_loss returns `(loss, outputs) if return_outputs else loss` "
                     "(the outputs die before the backward)")
SRC_LOOP_KEEPS = ("a loop such as deepspeedai/DeepSpeedExamples@3f10211 DeepSpeed-Chat "
                  "training/step1_supervised_finetuning/main.py (`outputs = model(**batch, "
                  "use_cache=False)`; `loss = outputs.loss`; `model.backward(loss)`; "
                  "`model.step()`) keeps `outputs` until the next forward returns; "
                  "huggingface/transformers@0022728 models/llama/modeling_llama.py "
                  "LlamaForCausalLM.forward returns `logits = logits.float()` in CausalLMOutputWithPast")


def held_logits_terms(model: Model) -> list:
    """The logits a training loop still holds through the backward and the optimizer step
    (`loop.held_logits`): a loop that keeps `outputs = model(**batch)` (DeepSpeed-Chat's
    step 1) keeps the returned logits alive until the next forward returns, so they sit beside
    the loss backward, the step and the next forward. Their dtype is the one the model returns:
    fp32 where its forward upcasts them (transformers' LlamaForCausalLM before the loss moved
    into `loss_function`), else the compute dtype. The HF Trainer drops them (`none`)."""
    held = model.conv.held_logits
    if held == "none" or model.conv.loss != "log-softmax":
        return []
    arch, tr, topo = model.arch, model.tr, model.topo
    dec = decoder_seq(arch)
    tokens = tr.micro_batch * (seq_per_gpu(dec, topo.cp) if dec else model.seq_local)
    vocab, v_text = logits_vocab(model)
    per = 4 if held == "fp32" else model.dt.compute
    return [Term("logits.loop_outputs", "logits", per * vocab * tokens,
                 f"logits the loop's outputs hold ({held}) {per} B × {v_text} × {tokens:,} tokens",
                 {"held_logits": held, "bytes_per_logit": per, "vocab_per_gpu": vocab,
                  "tokens": tokens}, SRC_LOOP_KEEPS)]


def held_logits_assumed(model: Model) -> tuple:
    """The estimate's `assumed` entry when memlint cannot see the loop (framework deepspeed over
    transformers' loss) and no `loop.held_logits` was given: the default, none."""
    if not model.conv.held_logits_assumed:
        return ()
    return ({"key": "loop.held_logits",
             "value": "none (the loop drops the model's outputs before the backward, as the HF "
                      "Trainer does; a loop that keeps `outputs` holds the logits: set fp32 or "
                      "compute)",
             "source": SRC_TRAINER_DROPS},)
