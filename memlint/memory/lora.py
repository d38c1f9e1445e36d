"""LoRA and QLoRA: the frozen base's bytes per parameter (quantized bases), QLoRA's
dequantization buffer, and the LoRA adapters' saved activations in fused layers.

Each function returns `Term`s (or activation items) with formula, inputs and source.
"""
from __future__ import annotations

from memlint.memory.model import Model
from memlint.memory.stages import StagePlan
from memlint.memory.terms import Item, Term
from memlint.records import replace


def frozen_bytes_per_param(base_quant: str, param_bytes: int, seed_states: bool) -> float:
    """Bytes per frozen base parameter.

    nf4 (bitsandbytes, blocksize 64 with double quantization): 0.5 B + an 8-bit absmax per 64
    weights + an fp32 scale per 256 absmax blocks = 0.5 + 1/64 + 4/16384 B (Dettmers et al. 2023,
    QLoRA section 3). The seed article counts 0.5 (seed 000 CH 9.4). int8 (LLM.int8): 1 B + an fp32
    scale per row, ~1 B. gptq: `GPTQ_BYTES`.
    """
    if base_quant == "nf4":
        return 0.5 if seed_states else 0.5 + 1 / 64 + 4 / (64 * 256)
    if base_quant == "int8":
        return 1.0
    if base_quant == "gptq":
        return GPTQ_BYTES
    return float(param_bytes)


# GPTQ 4-bit (auto-gptq QuantLinear buffers): qweight packs 8 weights per int32 (0.5 B); per group
# of 128 input rows each output column has an fp16 scale and a 4-bit packed zero (2.5 B / 128).
# g_idx (4 B per input row) and fp16 biases, < 0.1% of the weights, are not counted.
GPTQ_GROUP = 128
GPTQ_BYTES = 0.5 + 2.5 / GPTQ_GROUP
SRC_GPTQ = ("AutoGPTQ auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py QuantLinear (AutoGPTQ/AutoGPTQ"
            "@179776b: qweight int32 [in/8, out], qzeros int32 [in/group, out/8], scales fp16 "
            "[in/group, out]; forward at >= kernel_switch_threshold 128 rows unpacks the weight "
            "(bitwise_right_shift -> int32, .to(int8)), then scales * (weight - zeros) in fp16 and "
            "torch.matmul(x.half(), weight), which saves that fp16 weight when x needs a grad); "
            "auto-gptq BaseQuantizeConfig group_size 128")


UNQUANTIZED_SOURCE = ("transformers integrations/bitsandbytes.py replace_with_bnb_linear (only "
                      "nn.Linear becomes Linear4bit/Linear8bitLt) and get_keys_to_not_convert "
                      "(the output layer is skipped); a GPTQ checkpoint quantizes the linear "
                      "layers of the transformer blocks only (optimum GPTQQuantizer "
                      "block_name_to_quantize)")
SAVED_SOURCE = ("peft utils/other.py ModulesToSaveWrapper: a trainable deep copy of each module "
                "in modules_to_save beside the frozen original")


def saved_copy_dtypes(model: Model):
    """The dtypes of PEFT's modules_to_save copies' gradients and optimizer moments: the copies
    are deep copies of the loaded modules (peft utils/other.py ModulesToSaveWrapper
    `copy.deepcopy(self.original_module)`), so a model loaded in bf16 trains them in bf16; a
    gradient has its parameter's dtype (the autograd engine casts each incoming gradient to it,
    torch/csrc/autograd/engine.cpp validate_outputs) and torch's Adam/AdamW creates its moments
    with `torch.zeros_like(p)`. So under a torch optimizer without fp32 master weights (the HF
    Trainer) their gradients and moments take the loaded width (`param_dtype`); `model.dt`
    (returned as is) otherwise."""
    dt = model.dt
    if model.conv.in_place_optimizer or dt.master or dt.state_bits or dt.param >= dt.grad:
        return dt
    return replace(dt, grad=dt.param, state=dt.param)


def unquantized_params(model: Model, plan: StagePlan) -> int:
    """Parameters of a bitsandbytes-quantized base that stay in the loaded dtype, per GPU of
    this stage: bitsandbytes replaces nn.Linear modules only, and transformers keeps the output
    layer out of the conversion, so the word embedding, learned positions, the LM head and every
    norm are not quantized."""
    counts = model.counts
    whole = sum(counts.layers[i].norms for i in plan.layers)
    split = 0
    if plan.first:
        split += counts.embedding
        whole += counts.position_embedding
    if plan.last:
        whole += counts.final_norm
        split += counts.lm_head or (counts.embedding if model.par.pp > 1 else 0)
    return whole + -(-split // model.topo.tp)


def dequant_terms(model: Model, plan: StagePlan, phase: str = "") -> list:
    """QLoRA dequantizes one linear at a time to the compute dtype: the largest linear's
    weight in bf16 (seed 000 CH 9.4: 2·d² per layer for a d×d projection). A GPTQ base goes
    through auto-gptq's torch path instead (`gptq_dequant_terms`)."""
    if model.tr.base_quant == "none" or not plan.layers:
        return []
    if model.tr.base_quant == "gptq":
        return gptq_dequant_terms(model, plan, phase)
    arch = model.arch
    if model.seed_states:
        size = arch.hidden * arch.hidden
        formula = f"2 B × d² = 2 × {arch.hidden}²"
    else:
        size = model.largest_linear()
        formula = f"2 B × largest linear {size:,} elements"
    return [Term("buffers.dequantized_weight", "buffers", 2 * size, formula,
                 {"elements": size}, "Dettmers et al. 2023 (QLoRA); bitsandbytes dequantizes per matmul")]


def _quantized_linears(model: Model, index: int) -> list:
    """The quantized linear weights of one decoder layer, elements per GPU (attention's
    projections, the MLP or the routed experts)."""
    layer = model.counts.layers[index]
    return [layer.attention, layer.mlp + layer.shared_experts + layer.experts]


def gptq_dequant_terms(model: Model, plan: StagePlan, phase: str) -> list:
    """auto-gptq's QuantLinear at >= 128 rows (`SRC_GPTQ`): each call unpacks its weight to
    int32 and int8 (4 + 1 B per element alive together, the largest linear) and multiplies by
    the fp16 weight it rebuilt, which matmul saves for the input gradient: under recompute the
    recomputed layer's linears (backward_recompute), without it every layer's (2 B each)."""
    largest = model.largest_linear()
    terms = [Term("buffers.dequantized_weight", "buffers", 5 * largest,
                  f"GPTQ unpack: (int32 4 B + int8 1 B) × largest linear {largest:,} elements",
                  {"elements": largest, "group_size": GPTQ_GROUP}, SRC_GPTQ)]
    if model.tr.recompute == "none":
        saved_layers = list(plan.layers) if phase in ("forward_end", "backward_start") else []
    else:
        saved_layers = plan.layers[-1:] if phase == "backward_recompute" else []
    saved = sum(sum(_quantized_linears(model, i)) for i in saved_layers) // model.topo.tp
    if saved:
        terms.append(Term("activations.gptq_dequantized_weights", "activations", 2 * saved,
                          f"{len(saved_layers)} layer(s) × their GPTQ linears' fp16 weights "
                          f"saved by matmul: {saved:,} elements × 2 B",
                          {"layers": len(saved_layers), "elements": saved}, SRC_GPTQ))
    return terms


def lora_activation_items(model: Model, sh) -> list:
    """LoRA adapters save their input (shared with the base linear), the rank-r intermediate and,
    with dropout, the dropped copy of the input (peft `lora.Linear.forward`)."""
    rank = model.tr.lora_rank
    c = model.dt.compute
    arch = model.arch
    attention = 2 if arch.fused_qkv else 4        # one adapter per nn.Linear (fused qkv: one)
    mlp = (2 if arch.fused_gate_up else 3) if sh.gated else 2
    targets = attention if model.tr.lora_targets == "qkvo" else attention + mlp
    items = [Item(f"LoRA rank-{rank} intermediates ({targets} targets)", c * rank * targets)]
    if model.tr.lora_dropout > 0:
        mask = 1 if model.scenario.hardware.device == "cuda" else c
        items.append(Item("LoRA dropout copies of the inputs", (c + mask) * sh.d * targets))
    return items


# The adapters' dtype depends on peft's version: v0.5.0 creates them as fp32 nn.Linear and moves
# them by device only (tuners/lora.py update_layer `self.to(self.weight.device)`); v0.6.0-v0.11
# cast them to the base weight's dtype (tuners/lora/layer.py update_layer `self.to(weight.device,
# dtype=weight.dtype)`, bf16 over a bf16 base); v0.12 casts them up to fp32 again.
ADAPTER_SOURCE = ("peft mapping_func.py get_peft_model(autocast_adapter_dtype=True) -> "
                  "tuners_utils.py _cast_adapter_dtype: bf16/fp16 adapter weights cast to fp32 "
                  "(peft >= 0.12; peft 0.5 creates them fp32 too; 0.6-0.11 keep the base's dtype)")


def adapter_bytes_per_param(model: Model):
    """PEFT's LoRA weights under the HF Trainer's autocast over a low-precision base (bf16/fp16
    with param_dtype bf16/fp16): fp32, 4 B (peft casts the adapters up); None: the run's dtypes
    (fp32 params under autocast are 4 B already; pure-bf16 keeps everything in bf16)."""
    tr = model.tr
    if (model.conv.fp32_adapters and tr.precision in ("bf16", "fp16") and not model.seed_states
            and model.dt.param < 4):
        return 4
    return None
