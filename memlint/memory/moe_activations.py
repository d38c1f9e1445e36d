"""Megatron-Core MoE layers: the tensors the routed experts save, and what the token dispatcher
keeps between steps. Read at NVIDIA/Megatron-LM@d98e8a64 (megatron/core/transformer/moe/).

Tokens. A rank holds its micro-batch's tokens split by sequence parallelism (N/rep of N). The
expert-tensor-parallel group (etp ranks) shares each expert, and both dispatchers hand every rank
of it the tokens of the whole group: the all-to-all one gathers them over that group after the
expert-parallel all-to-all (MoEAlltoAllTokenDispatcher.dispatch_postprocess), the all-gather one
gathers every token of the etp·ep group and keeps those of its local experts
(MoEAllGatherTokenDispatcher.token_dispatch / dispatch_postprocess). With k experts per token
and balanced routing a rank's experts therefore receive N/rep · k · etp tokens, each 1/etp of the
expert's width: per token of the micro-batch, the expert inputs are k·etp/rep copies of a hidden
vector and each intermediate k/rep copies of the full expert width.

Saved per routed token (experts.py TEGroupedMLP.forward, mlp.py MLP.forward for SequentialMLP):
fc1's input, fc1's output, fc2's input, and the routing weight (the router dtype). The routing
weights multiply the activation's output: the fused weighted SwiGLU (`weighted_bias_swiglu_impl`)
keeps only its input; otherwise the activation runs first and the multiply keeps its output (for
a GLU also the gate's activation output beside the product). The experts' output is not saved:
unpermute scatters it without weights (moe_utils.py).

Between steps each MoE layer's dispatcher keeps the routing state of its last forward
(attributes set in the forward, never cleared), and the all-gather dispatcher gathers into
Megatron's global memory buffer (`use_global_buffer=True`, megatron/core/utils.py
GlobalMemoryBuffer: one buffer per name and dtype, kept and grown to the largest request).
"""
from __future__ import annotations

from memlint.memory.terms import Item

INDEX_BYTES = 8    # torch.argsort indices (int64), the unfused permutation's map


def routed_items(sh, c: int, g: int, rep: int, etp: int, dispatch) -> list:
    """Per-token items of the routed experts of one MoE layer (module docstring)."""
    k = sh.top_k
    copies = k * etp / rep        # routed token copies a rank holds, per token
    width = k / rep               # full-width expert intermediates, per token
    items = [
        Item("router logits and probabilities (fp32)", 8 * sh.experts / rep),
        Item(f"routed tokens: top-{k} copies of the input", g * sh.d * copies),
        Item(f"experts fc1 output (top-{k})", c * (2 if sh.gated else 1) * sh.moe_ffn * width),
    ]
    fused = sh.gated and dispatch.fused_activation
    if not fused:
        kept = (2 if sh.gated else 1) * sh.moe_ffn
        name = "gate activation and GLU product" if sh.gated else "activation output"
        items.append(Item(f"experts {name}, kept by the routing-weight multiply (top-{k})",
                          c * kept * width))
    items.append(Item(f"experts fc2 input (top-{k})", g * sh.moe_ffn * width))
    items.append(Item(f"routing weights of the routed tokens (top-{k})",
                      dispatch.router_bytes * copies))
    return items


def dispatcher_state_bytes(tokens: int, sh, rep: int, etp: int, ep: int, dispatch) -> tuple:
    """(bytes, formula) one MoE layer's dispatcher keeps between steps for a micro-batch of
    `tokens` tokens (before sequence parallelism)."""
    local = -(-tokens // rep)
    routed = local * sh.top_k * etp
    index = 0 if dispatch.permute_fused else INDEX_BYTES * routed
    if dispatch.dispatcher == "allgather":
        gathered = local * etp * ep
        local_experts = max(1, sh.experts // max(1, ep))
        value = gathered * local_experts + dispatch.router_bytes * routed + index
        return value, (f"local map {gathered:,} tokens × {local_experts} local experts × 1 B + "
                       f"routing weights {routed:,} × {dispatch.router_bytes} B"
                       + (f" + index map {routed:,} × {INDEX_BYTES} B" if index else ""))
    # alltoall / flex: the probabilities and routing map of the local tokens, and the map
    value = local * sh.experts * (dispatch.router_bytes + 1) + (
        INDEX_BYTES * local * sh.top_k if not dispatch.permute_fused else 0)
    return value, (f"probabilities {local:,} tokens × {sh.experts} experts × "
                   f"{dispatch.router_bytes} B + routing map × 1 B"
                   + (f" + index map {local * sh.top_k:,} × {INDEX_BYTES} B"
                      if not dispatch.permute_fused else ""))


def gathered_tokens_bytes(tokens: int, d: int, c: int, rep: int, etp: int, ep: int) -> int:
    """The all-gather dispatcher's gathered hidden states in the global memory buffer: every
    token of the etp·ep group, d wide, in the compute dtype (0 when nothing is gathered)."""
    if etp * ep <= 1:
        return 0
    return -(-tokens // rep) * etp * ep * d * c
