"""The vision encoder of a VLM: its weights, gradients and optimizer states, and its saved
activations (HF towers as a whole; Megatron LLaVA's CLIP ViT is in memory/stage_activations.py).
"""
from __future__ import annotations

from memlint.memory.model import Model
from memlint.memory.states import MOMENTS
from memlint.memory.states import ceil_div as _ceil_div
from memlint.memory.terms import Term

VISION_SOURCE = ("ViT (Dosovitskiy et al. 2021) + projector (Liu et al. 2023, LLaVA) on the "
                 "first stage, trained and sharded like the language model")


def vision_state_terms(params: int, dt, optimizer: str, shard: int, zero: int, fsdp: str,
                       lora: bool) -> list:
    """ViT + projector on stage 0, replicated across TP (seed 000 CH 8.3-8.4): weights, and when
    trained, gradients and optimizer states (sharded by ZeRO/FSDP like the rest)."""
    terms = []
    w_shard = shard if (zero >= 3 or fsdp in ("full", "hybrid")) else 1
    terms.append(Term("vision.weights", "vision", _ceil_div(params, w_shard) * dt.param,
                      f"vision params {params:,} × {dt.param} B" + (f" / shard {w_shard}" if w_shard > 1 else ""),
                      {"params": params, "shard": w_shard}, VISION_SOURCE))
    if lora:
        return terms
    g_shard = shard if (zero >= 2 or fsdp != "none") else 1
    o_shard = shard if (zero >= 1 or fsdp != "none") else 1
    terms.append(Term("vision.gradients", "vision", _ceil_div(params, g_shard) * dt.grad,
                      f"vision params {params:,} × {dt.grad} B" + (f" / shard {g_shard}" if g_shard > 1 else ""),
                      {"params": params, "shard": g_shard}, VISION_SOURCE))
    count = _ceil_div(params, o_shard)
    moments = MOMENTS[optimizer]
    per = dt.master + moments * dt.state_element_bytes
    terms.append(Term("vision.optimizer", "vision",
                      count * dt.master + dt.moment_bytes(count, moments),
                      f"vision params {params:,} × ({dt.master} B master + {moments} × "
                      f"{dt.moment_width()})" + (f" / shard {o_shard}" if o_shard > 1 else ""),
                      {"params": params, "shard": o_shard, "bytes_per_param": per},
                      VISION_SOURCE))
    return terms


def vision_activation_terms(model: Model, inflight: float) -> list:
    """ViT activations: C_act · L_vit · B · N_img · d_vit (seed 000 CH 8.3), N_img the visual
    tokens of all images of a sample."""
    vision = model.arch.vision
    tokens = model.tr.micro_batch * model.tr.images_per_sample * model.visual_tokens_per_image()
    c_act = model.assume["activations.c_act"]
    if model.tr.recompute == "full":
        c_act = model.assume["activations.c_act_full_recompute"]
    value = int(round(c_act * vision.layers * tokens * vision.hidden * inflight))
    return [Term("vision.activations", "vision", value,
                 f"{c_act:g} × L_vit {vision.layers} × B·N_img {tokens:,} × d_vit {vision.hidden}"
                 + (f" × {inflight:g} in flight" if inflight != 1 else ""),
                 {"layers": vision.layers, "tokens": tokens, "hidden": vision.hidden},
                 "seed profile: C_act on the ViT's shapes (Korthikanti et al. 2022)")]
