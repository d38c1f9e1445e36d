"""The scenario-key vocabulary (DESIGN.md, "Scenario keys"): one table, shared by `--set`, native
scenario files, `[tool.memlint.scenario]`, adapters and the JSON output.

Each key names the IR section and field it fills and a converter that turns what a source wrote
(a JSON number, a YAML bool, a string from the command line) into the typed value, or raises
`ValueError` with a message fit for a diagnostic.
"""
from __future__ import annotations

import math
import re

from memlint import lazy_re
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Callable, Optional


@record(frozen=True)
class Key:
    name: str
    section: str  # training | parallelism | hardware | model | assumptions | rl | engine
    field: str
    convert: Callable[[Any], Any]
    doc: str


MAX_NUMBER_CHARS = 1000  # no number in a config is written with more characters


def _number(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {_short(value)}")
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an int past float range (10**400)
            raise ValueError(f"{_short(value)} is too large") from None
    elif isinstance(value, str):
        text = value.strip().replace("_", "")
        if len(text) > MAX_NUMBER_CHARS:
            raise ValueError(f"expected a number, got {_short(value)}")
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"expected a number, got {_short(value)}") from None
    else:
        raise ValueError(f"expected a number, got {type(value).__name__} {_short(value)}")
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"expected a finite number, got {_short(value)}")
    return number


# No count, size or degree in a training config comes near 2**53 (9e15); anything above it is a
# typo or a fuzzed value, and letting it through would overflow float maths downstream.
MAX_INT = 2**53
MAX_BYTES = 2**60


_INTEGER = lazy_re.compile(r"\s*[+-]?[0-9][0-9_]*\s*")


def to_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and len(value) <= 40 and (
            (value.isascii() and value.isdigit()) or _INTEGER.fullmatch(value)):   # start-up
        number = int(value.replace("_", ""))  # exactly: float() would round 2**53 + 1
    else:
        number = _number(value)
        if number != int(number):
            raise ValueError(f"expected a whole number, got {_short(value)}")
        number = int(number)
    if abs(number) > MAX_INT:
        raise ValueError(f"{_short(value)} is too large (over 2**53)")
    return number


def _short(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**40:
        # repr() of an int over 4,300 digits raises; its size is all a message needs
        return f"a {value.bit_length()}-bit integer"
    text = repr(value[:60] if isinstance(value, str) else value)
    if len(text) <= 40:
        return text
    size = len(value) if isinstance(value, str) else len(text)
    return f"{text[:20]}...({size} characters)"


def positive_int(value: Any) -> int:
    number = to_int(value)
    if number <= 0:
        raise ValueError(f"must be a positive whole number, got {_short(value)}")
    return number


def non_negative_int(value: Any) -> int:
    number = to_int(value)
    if number < 0:
        raise ValueError(f"must not be negative, got {_short(value)}")
    return number


def non_negative_float(value: Any) -> float:
    number = _number(value)
    if number < 0:
        raise ValueError(f"must not be negative, got {_short(value)}")
    if number > MAX_INT:   # a coefficient of 1e308 overflows the byte counts it multiplies
        raise ValueError(f"{_short(value)} is too large")
    return number


def probability(value: Any) -> float:
    number = _number(value)
    if not 0.0 <= number < 1.0:
        raise ValueError(f"must be in [0, 1), got {_short(value)}")
    return number


# The spellings of a boolean the frameworks' own parsers take (distutils strtobool, used by
# HfArgumentParser string_to_bool and accelerate str_to_bool): the one vocabulary memlint reads.
_TRUE = {"true", "yes", "on", "1", "t", "y"}
_FALSE = {"false", "no", "off", "0", "f", "n"}


def parse_bool(value: Any) -> Optional[bool]:
    """A boolean as written (a bool, 0/1, or a strtobool word), else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
    return None


def to_bool(value: Any) -> bool:
    found = parse_bool(value)
    if found is None:
        raise ValueError(f"expected true or false, got {_short(value)}")
    return found


def choice(*options: str, aliases: Optional[dict] = None) -> Callable[[Any], str]:
    aliases = aliases or {}

    def convert(value: Any) -> str:
        text = str(value).strip().lower() if not isinstance(value, bool) else str(value).lower()
        text = aliases.get(text, text)
        if text not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {_short(value)}")
        return text

    convert.options = options  # type: ignore[attr-defined]
    convert.aliases = aliases  # type: ignore[attr-defined]   (memlint/schemas: the enum)
    return convert


# one way to match each number (no nested or adjacent open repeats): linear on any input
_SIZE = lazy_re.compile(
    r"\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e[+-]?[0-9]+)?)\s*([kmgt]i?b?|b)?\s*",
    re.I)
MAX_SIZE_CHARS = 64
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "ki": 1024, "kib": 1024, "m": 10**6, "mb": 10**6,
          "mi": 1024**2, "mib": 1024**2, "g": 10**9, "gb": 10**9, "gi": 1024**3, "gib": 1024**3,
          "t": 10**12, "tb": 10**12, "ti": 1024**4, "tib": 1024**4}


def to_bytes(value: Any) -> int:
    """'80GiB' -> 85899345920, '141GB' -> 141e9, 1024 -> 1024 (plain numbers are bytes)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, int) and value > MAX_BYTES:
            raise ValueError(f"{_short(value)} is too large (over 2**60 bytes)")
        number = _number(value)
        if number <= 0:
            raise ValueError(f"must be positive, got {_short(value)}")
        if number > MAX_BYTES:
            raise ValueError(f"{_short(value)} is too large (over 2**60 bytes)")
        return int(number)
    text = str(value)
    digits = text.rstrip("bBiIkKmMgGtT")
    unit = text[len(digits):].lower()
    if digits.isascii() and digits.isdigit() and unit in _UNITS and len(text) <= MAX_SIZE_CHARS:
        number = float(digits) * _UNITS[unit]   # '4MiB', '80GB': as _SIZE reads them (start-up)
    else:
        match = _SIZE.fullmatch(text) if len(text) <= MAX_SIZE_CHARS else None
        if not match:
            raise ValueError(f"expected a size like 80GiB or 141GB, got {_short(value)}")
        number = float(match.group(1)) * _UNITS[(match.group(2) or "").lower()]
    if number <= 0:
        raise ValueError(f"must be positive, got {_short(value)}")
    if not number <= MAX_BYTES:  # also inf from '1e400'
        raise ValueError(f"{_short(value)} is too large (over 2**60 bytes)")
    return int(number)


def to_str(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {_short(value)}")
    return value.strip()


#: Module names a PEFT `modules_to_save` list gives for the word embedding and the output layer
#: (Llama/Mistral/Qwen, GPT-2, GPT-NeoX, Megatron-style names).
EMBEDDING_MODULES = ("embed_tokens", "wte", "word_embeddings", "embed_in", "tok_embeddings")
OUTPUT_MODULES = ("lm_head", "embed_out", "output")


def module_names(value: Any) -> str:
    """PEFT `modules_to_save` (a list, or a comma-separated string on a command line) as the
    roles memlint counts: "embedding", "output", and other names kept as written, comma-joined
    in a fixed order; "" for none."""
    if value is None or value is False or value == "":
        return ""
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
    elif isinstance(value, (list, tuple)):
        items = [str(part).strip() if isinstance(part, (str, int)) else _bad_module(part)
                 for part in value]
    else:
        raise ValueError(f"expected a list of module names, got {_short(value)}")
    roles = []
    for item in items:
        if not item or item.lower() in ("none", "null"):
            continue
        last = item.split(".")[-1]
        role = ("embedding" if last in EMBEDDING_MODULES + ("embedding",)
                else "output" if last in OUTPUT_MODULES else item)
        if role not in roles:
            roles.append(role)
    order = {"embedding": 0, "output": 1}
    return ",".join(sorted(roles, key=lambda r: (order.get(r, 2), r)))


def _bad_module(part: Any) -> str:
    raise ValueError(f"expected a module name, got {_short(part)}")


_LAYER_SPEC = lazy_re.compile(r"\s*(last|first|expanded)\s*:\s*([0-9]{1,16})\s*")


def layer_spec(value: Any) -> str:
    """Which decoder layers a partial fine-tune trains: "last:N", "first:N" (LLaMA-Factory's
    freeze_trainable_layers N and -N) or "expanded:N" (LLaMA-Pro: every (L/N)-th layer)."""
    match = _LAYER_SPEC.fullmatch(str(value)) if isinstance(value, str) else None
    if not match or not 1 <= int(match.group(2)) <= MAX_INT:
        raise ValueError(f"expected last:N, first:N or expanded:N, got {_short(value)}")
    return f"{match.group(1)}:{int(match.group(2))}"


def fraction(value: Any) -> float:
    """A share in (0, 1]."""
    number = _number(value)
    if not 0.0 < number <= 1.0:
        raise ValueError(f"must be in (0, 1], got {_short(value)}")
    return number


def sleep_level(value: Any) -> int:
    level = to_int(value)
    if level not in (0, 1, 2):
        raise ValueError(f"sleep level must be 0, 1 or 2, got {_short(value)}")
    return level


def optional_positive_int(value: Any) -> Optional[int]:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "auto")):
        return None
    return positive_int(value)


def shard_degree(value: Any) -> Optional[int]:
    """torchtitan's data_parallel_shard_degree: -1 means 'fill the remaining GPUs'."""
    if to_int(value) == -1:
        return -1
    return optional_positive_int(value)


def zero_stage(value: Any) -> int:
    stage = to_int(value)
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {_short(value)}")
    return stage


PRECISIONS = ("bf16", "fp16", "pure-bf16", "amp-bf16", "fp32", "fp8")
DTYPES = ("fp32", "bf16", "fp16", "fp8")
_DTYPE_ALIASES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
                  "float": "fp32"}
_dtype = choice(*DTYPES, aliases=_DTYPE_ALIASES)


def dtype_name(text) -> Optional[str]:
    """A framework's dtype spelling ("bfloat16", "float16", "half", "bf16", ...) as memlint's
    dtype (DTYPES), None when it is none of them."""
    name = str(text).strip().lower()
    name = _DTYPE_ALIASES.get(name, name)
    return name if name in DTYPES else None
# Optimizer moments may also be block-quantized integers (bitsandbytes 8-bit optimizers, torchao
# AdamW8bit / AdamW4bit): 8-bit or 4-bit codes plus an fp32 scale per block
# (`optimizer_state_block`). memlint/memory/optimizer_quant.py has the byte counts and sources.
STATE_DTYPES = DTYPES + ("int8", "int4")
_state_dtype = choice(*STATE_DTYPES, aliases={**_DTYPE_ALIASES, "8bit": "int8", "8-bit": "int8",
                                              "uint8": "int8", "4bit": "int4", "4-bit": "int4"})

_KEYS = [
    # model
    Key("model", "model", "name", to_str, "path to an HF config.json or a preset name"),
    Key("model.total_params", "model", "total_params", positive_int,
        "override the total parameter count (when only totals are known)"),
    Key("model.expert_params", "model", "expert_params", non_negative_int,
        "override the routed-expert parameter count (part of model.total_params)"),
    Key("model.vocab_pad_multiple", "model", "vocab_pad_multiple", positive_int,
        "the framework pads model.vocab_size to a multiple of this × tp (Megatron "
        "--make-vocab-size-divisible-by, gpt-neox make_vocab_size_divisible_by)"),
    # training
    Key("framework", "training", "framework", choice("megatron", "deepspeed", "fsdp2", "hf"),
        "whose conventions apply (dtypes, loss, buffers)"),
    Key("micro_batch", "training", "micro_batch", positive_int, "micro batch per GPU"),
    Key("global_batch", "training", "global_batch", positive_int, "global batch (samples)"),
    Key("grad_accum", "training", "grad_accum", positive_int, "gradient accumulation steps"),
    Key("seq_len", "training", "seq_len", positive_int, "sequence length in tokens"),
    Key("precision", "training", "precision",
        choice(*PRECISIONS, aliases={"mixed": "bf16", "bfloat16": "bf16", "float16": "fp16",
                                     "float32": "fp32", "amp_bf16": "amp-bf16",
                                     "pure_bf16": "pure-bf16"}),
        "bf16/fp16 mixed precision with fp32 master weights, pure-bf16, amp-bf16, fp32, fp8"),
    Key("param_dtype", "training", "param_dtype", _dtype, "dtype of the working parameters"),
    Key("grad_dtype", "training", "grad_dtype", _dtype, "dtype of the kept gradients"),
    Key("master_weights", "training", "master_weights", to_bool,
        "whether the optimizer keeps an fp32 master copy"),
    Key("optimizer_state_dtype", "training", "optimizer_state_dtype", _state_dtype,
        "dtype of optimizer moments: fp32, bf16, fp16, fp8, or block-quantized int8 / int4 "
        "(bitsandbytes 8-bit, torchao AdamW8bit / AdamW4bit)"),
    Key("optimizer_state_block", "training", "optimizer_state_block", optional_positive_int,
        "elements per fp32 scale of block-quantized optimizer moments (default: int8 256 as "
        "bitsandbytes and torchao AdamW8bit, int4 128 as torchao AdamW4bit; fp8 none)"),
    Key("optimizer_paged", "training", "optimizer_paged", to_bool,
        "paged optimizer states (bitsandbytes Paged*: CUDA unified memory the driver evicts to "
        "the host under pressure; counted as host memory)"),
    Key("fp8_params", "training", "fp8_params", to_bool,
        "precision=fp8 with FP8 parameters (Transformer Engine fp8_model_init / "
        "quantized_model_init, Megatron --fp8-param-gather): linear weights stored in FP8, no "
        "high-precision copy; default false: bf16 weights plus FP8 copies (memory/fp8.py)"),
    Key("optimizer", "training", "optimizer",
        choice("adamw", "adam", "muon", "adafactor", "sgd", "fp8_adam",
               aliases={"fp8-adam": "fp8_adam", "sgd_momentum": "sgd"}),
        "optimizer"),
    Key("optimizer_impl", "training", "optimizer_impl",
        choice("for-loop", "foreach", "fused", aliases={"forloop": "for-loop", "loop": "for-loop"}),
        "PyTorch optimizer implementation (default: the device's default)"),
    Key("compile", "training", "compile", to_bool,
        "torch.compile of the model (torchtitan compile.enable / training.compile, HF "
        "torch_compile): fused cross-entropy when the loss is compiled too, fused SwiGLU "
        "temporaries; saved activations stay eager PyTorch's (memory/compile.py)"),
    Key("compile_loss", "training", "compile_loss", to_bool,
        "whether the loss is compiled (with compile=true the default is true: torchtitan's "
        "compile.components = [\"model\", \"loss\"], HF torch_compile compiles the forward "
        "with its loss); false: an eager loss beside compiled blocks; true with compile=false: "
        "the loss alone, torchtitan's components = [\"loss\"] (memory/compile.py)"),
    Key("attention", "training", "attention", choice("flash", "sdpa", "eager"),
        "attention kernel: flash (no T x T scores), sdpa, eager (materialized scores)"),
    Key("recompute", "training", "recompute", choice("none", "selective", "full"),
        "activation recomputation"),
    Key("recompute_every", "training", "recompute_every", positive_int,
        "selective recompute: keep a full activation set every K layers"),
    Key("train_base", "training", "train_base", to_bool,
        "whether the base model's weights are trained (false: frozen, e.g. Megatron --freeze-LM)"),
    Key("trainable_layers", "training", "trainable_layers", layer_spec,
        "with train_base false, the decoder layers still trained (partial / freeze fine-tuning): "
        "last:N, first:N, expanded:N (LLaMA-Pro)"),
    Key("frozen_dtype", "training", "frozen_dtype", _dtype,
        "dtype of frozen weights when it differs from the trained ones (LLaMA-Factory upcasts "
        "only the trainable parameters to fp32)"),
    Key("lora_rank", "training", "lora_rank", non_negative_int, "LoRA rank (0: no LoRA)"),
    Key("lora_targets", "training", "lora_targets",
        choice("qkvo", "all-linear", "all-linear+experts",
               aliases={"all_linear": "all-linear", "all": "all-linear"}),
        "LoRA target modules: qkvo (attention), all-linear (PEFT's: every linear but the output "
        "layer; MoE routed experts are fused parameters it does not wrap), all-linear+experts"),
    Key("lora_dropout", "training", "lora_dropout", probability, "LoRA dropout probability"),
    Key("lora_modules_to_save", "training", "lora_modules_to_save", module_names,
        "modules trained in full beside the LoRA adapters (PEFT modules_to_save: embed_tokens, "
        "lm_head)"),
    Key("base_quant", "training", "base_quant",
        choice("none", "int8", "nf4", "gptq", aliases={"4bit": "nf4", "8bit": "int8",
                                                      "gptq4": "gptq"}),
        "quantization of the frozen base (QLoRA: nf4; gptq: a 4-bit GPTQ checkpoint, group size "
        "128, run through auto-gptq's QuantLinear)"),
    Key("images_per_sample", "training", "images_per_sample", non_negative_int,
        "images per sample (VLMs)"),
    Key("tokens_per_image", "training", "tokens_per_image", non_negative_int,
        "visual tokens per image (VLMs; default from the vision config)"),
    Key("model_init", "training", "model_init",
        choice("meta", "gpu", "zero-init", "cpu", "rank0-cpu", "shard-cpu",
               aliases={"zero_init": "zero-init", "rank0_cpu": "rank0-cpu",
                        "shard_cpu": "shard-cpu"}),
        "how each rank builds the model at start-up: meta (torchtitan), gpu (Megatron), zero-init "
        "(DeepSpeed ZeRO-3), cpu (every rank loads the whole model on the CPU), rank0-cpu (one "
        "rank loads it, accelerate cpu_ram_efficient_loading), shard-cpu (Megatron "
        "--use-cpu-initialization)"),
    Key("train_steps", "training", "train_steps", positive_int, "training steps (iterations)"),
    Key("checkpoint_interval", "training", "checkpoint_interval", positive_int,
        "steps between checkpoint saves"),
    Key("checkpoint_keep", "training", "checkpoint_keep", non_negative_int,
        "checkpoints kept on disk (0: every one is kept)"),
    Key("save_optimizer", "training", "save_optimizer", to_bool,
        "whether checkpoints include the optimizer state"),
    # parallelism
    Key("world_size", "parallelism", "world_size", positive_int, "total number of GPUs"),
    Key("tp", "parallelism", "tp", positive_int, "tensor parallel size"),
    Key("pp", "parallelism", "pp", positive_int, "pipeline parallel size"),
    Key("vpp", "parallelism", "vpp", positive_int, "virtual pipeline stages per rank"),
    Key("dp", "parallelism", "dp", positive_int, "data parallel size"),
    Key("cp", "parallelism", "cp", positive_int, "context parallel size"),
    Key("ep", "parallelism", "ep", positive_int, "expert parallel size"),
    Key("etp", "parallelism", "etp", positive_int, "expert tensor parallel size (default: tp)"),
    Key("sp", "parallelism", "sp", to_bool, "sequence parallelism"),
    Key("zero", "parallelism", "zero", zero_stage, "ZeRO stage 0-3"),
    Key("fsdp", "parallelism", "fsdp", choice("none", "full", "hybrid", "shard_grad_op"),
        "FSDP sharding: none, full, hybrid (HSDP), shard_grad_op"),
    Key("dp_shard", "parallelism", "dp_shard", shard_degree, "FSDP shard group size (-1: fill)"),
    Key("dp_replicate", "parallelism", "dp_replicate", positive_int, "HSDP replicate degree"),
    Key("reshard_after_forward", "parallelism", "reshard_after_forward", to_bool,
        "FSDP: free unsharded params after forward"),
    Key("offload_optimizer", "parallelism", "offload_optimizer", choice("none", "cpu", "nvme"),
        "optimizer state offload"),
    Key("offload_params", "parallelism", "offload_params", choice("none", "cpu", "nvme"),
        "parameter offload"),
    Key("offload_experts", "parallelism", "offload_experts", choice("none", "cpu"),
        "routed experts on the host: their weights in host memory and their MLPs run on the "
        "CPU, only the attention, router, shared experts and dense layers on the GPU "
        "(KTransformers' AMX MoE backend, LLaMA-Factory use_kt)"),
    Key("offload_activations", "parallelism", "offload_activations", to_bool,
        "activation offload to CPU: saved layer activations go to host memory, one layer stays "
        "in transit (torchtune/axolotl OffloadActivations, Megatron --cpu-offloading)"),
    Key("offload_activations_layers", "parallelism", "offload_activations_layers",
        optional_positive_int,
        "layers per stage whose activations are offloaded (Megatron "
        "--cpu-offloading-num-layers; default: all)"),
    Key("first_stage_layers", "parallelism", "first_stage_layers", non_negative_int,
        "layers on the first pipeline stage (uneven split)"),
    Key("last_stage_layers", "parallelism", "last_stage_layers", non_negative_int,
        "layers on the last pipeline stage (uneven split)"),
    # hardware
    Key("gpu", "hardware", "gpu", to_str, "GPU name (H100-80GB, H200, A100-40GB, B200, MI300X, ...)"),
    Key("gpu_memory", "hardware", "gpu_memory", to_bytes,
        "GPU memory: 80GiB (binary, 2**30), 141GB (decimal, 10**9) or bytes"),
    Key("gpus_per_node", "hardware", "gpus_per_node", positive_int, "GPUs per node"),
    Key("device", "hardware", "device", choice("cuda", "cpu"),
        "where PyTorch runs (its defaults differ on cpu)"),
    Key("node", "hardware", "node", to_str,
        "node type for host RAM and NVMe capacity (dgx-h100, p5.48xlarge, ...; memlint nodes)"),
    Key("host_memory", "hardware", "host_memory", to_bytes, "host RAM per node (2TiB, 1.5TB)"),
    Key("nvme_capacity", "hardware", "nvme_capacity", to_bytes,
        "NVMe capacity per node for ZeRO-Infinity offload"),
    Key("disk", "hardware", "disk", to_bytes, "free space where checkpoints are saved"),
    # RL post-training and preference training (issue 28; ir.RL)
    Key("rl.algorithm", "rl", "algorithm", to_str,
        "the RL / preference algorithm (grpo, ppo, rloo, reinforce++, dpo, kto, orpo, simpo, "
        "reward, ...): which models the run holds"),
    Key("rl.framework", "rl", "framework",
        choice("verl", "openrlhf", "trl", "easyr1", "nemo-rl", "nemo-rl-v1", "nemo-rl-megatron",
               "llamafactory", "axolotl",
               aliases={"nemo_rl": "nemo-rl", "llama-factory": "llamafactory"}),
        "the RL / preference framework whose conventions apply (memory/rl/conventions.py)"),
    Key("rl.placement", "rl", "placement", choice("hybrid", "colocated", "separate"),
        "where the roles sit: hybrid (trainer and rollout engine in one process per GPU), "
        "colocated (several processes share each GPU), separate (each role on its own GPUs)"),
    Key("rl.reference", "rl", "reference", choice("none", "model", "adapter", "precomputed"),
        "the reference policy: none, a frozen copy of the model, the base with the LoRA adapter "
        "disabled (no second copy), or log-probabilities precomputed before training"),
    Key("rl.reference_model", "rl", "reference_model", to_str,
        "the reference model when it is not the policy's (name or config.json path)"),
    Key("rl.reference_offload", "rl", "reference_offload", to_bool,
        "reference parameters kept on the host and gathered unit by unit for its pass"),
    Key("rl.reference_dtype", "rl", "reference_dtype",
        choice("fp32", "bf16", "fp16", aliases={"float32": "fp32", "bfloat16": "bf16",
                                                "float16": "fp16"}),
        "the frozen reference's parameter dtype (default: the policy's parameter dtype)"),
    Key("rl.reference_micro_batch", "rl", "reference_micro_batch", positive_int,
        "sequences per GPU in a reference log-prob pass"),
    Key("rl.critic", "rl", "critic", to_bool, "a value model trained beside the policy (PPO)"),
    Key("rl.critic_model", "rl", "critic_model", to_str,
        "the critic's base model when it is not the policy's"),
    Key("rl.critic_micro_batch", "rl", "critic_micro_batch", positive_int,
        "sequences per GPU in a critic update micro-batch"),
    Key("rl.critic_forward_micro_batch", "rl", "critic_forward_micro_batch", positive_int,
        "sequences per GPU in a critic value pass"),
    Key("rl.critic_recompute", "rl", "critic_recompute", to_bool,
        "activation checkpointing in the critic update"),
    Key("rl.critic_param_offload", "rl", "critic_param_offload", to_bool,
        "critic parameters on the host between its passes"),
    Key("rl.critic_optimizer_offload", "rl", "critic_optimizer_offload", to_bool,
        "critic optimizer states on the host between its updates"),
    Key("rl.reward_model", "rl", "reward_model", to_str,
        "a learned reward model (name or config.json path) scored after each rollout"),
    Key("rl.reward_micro_batch", "rl", "reward_micro_batch", positive_int,
        "sequences per GPU in a reward-model pass"),
    Key("rl.reward_offload", "rl", "reward_offload", to_bool,
        "reward-model parameters on the host between its passes"),
    Key("rl.actor_param_offload", "rl", "actor_param_offload", to_bool,
        "policy parameters (and gradients) moved to the host between its passes and back for "
        "each (verl param_offload; not ZeRO-Offload: see offload_params)"),
    Key("rl.actor_optimizer_offload", "rl", "actor_optimizer_offload", to_bool,
        "policy optimizer states moved to the host outside the update and back for it (verl "
        "optimizer_offload; the step still runs on the GPU, unlike offload_optimizer=cpu)"),
    Key("rl.actor_gpus", "rl", "actor_gpus", positive_int,
        "GPUs of the policy's trainer when roles do not share GPUs"),
    Key("rl.critic_gpus", "rl", "critic_gpus", positive_int, "GPUs of the critic (separate)"),
    Key("rl.reference_gpus", "rl", "reference_gpus", positive_int,
        "GPUs of the reference model (separate)"),
    Key("rl.reward_gpus", "rl", "reward_gpus", positive_int,
        "GPUs of the reward model (separate)"),
    Key("rl.prompt_len", "rl", "prompt_len", positive_int, "prompt tokens of a rollout sample"),
    Key("rl.response_len", "rl", "response_len", positive_int,
        "generated tokens of a rollout sample (at most)"),
    Key("rl.samples_per_prompt", "rl", "samples_per_prompt", positive_int,
        "responses generated per prompt (GRPO group size, verl rollout.n, TRL num_generations)"),
    Key("rl.prompts_per_step", "rl", "prompts_per_step", positive_int,
        "prompts rolled out per training step, over all GPUs"),
    Key("rl.logprob_micro_batch", "rl", "logprob_micro_batch", positive_int,
        "sequences per GPU in a policy log-prob pass"),
    Key("rl.logprob_tokens", "rl", "logprob_tokens", positive_int,
        "dynamic batching: tokens per GPU in a log-prob pass"),
    Key("rl.update_tokens", "rl", "update_tokens", positive_int,
        "dynamic batching: tokens per GPU in an update micro-batch"),
    Key("rl.update_sequences", "rl", "update_sequences", positive_int,
        "sequences per GPU in one optimizer step (the PPO mini-batch): with dynamic batching a "
        "micro-batch holds at most their tokens"),
    Key("rl.entropy", "rl", "entropy", to_bool, "entropy computed from the logits"),
    Key("rl.entropy_chunking", "rl", "entropy_chunking", to_bool,
        "entropy computed chunk by chunk (verl entropy_from_logits_with_chunking)"),
    Key("rl.padding_free", "rl", "padding_free", to_bool,
        "micro-batches hold only the real tokens (verl use_remove_padding, OpenRLHF "
        "--packing_samples, TRL padding_free): their size depends on the generated lengths"),
    Key("rl.paired", "rl", "paired", to_bool,
        "chosen and rejected sequences concatenated into one forward (DPO, ORPO, SimPO, reward)"),
    Key("rl.sync_bucket", "rl", "sync_bucket", to_bytes,
        "bytes of one bucket of the trainer-to-engine weight sync"),
    # the inference engine, as a rollout worker or a server (issue 28; ir.Engine)
    Key("engine.name", "engine", "name", choice("none", "vllm", "sglang", "hf", "trtllm"),
        "the inference engine: none, vllm, sglang, hf (transformers generate), trtllm"),
    Key("engine.tp", "engine", "tp", positive_int, "the engine's tensor parallel size"),
    Key("engine.pp", "engine", "pp", positive_int, "the engine's pipeline parallel size"),
    Key("engine.dp", "engine", "dp", positive_int, "the engine's data parallel size"),
    Key("engine.ep", "engine", "ep", positive_int, "the engine's expert parallel size"),
    Key("engine.instances", "engine", "instances", positive_int,
        "engine instances in the run (OpenRLHF --vllm_num_engines)"),
    Key("engine.gpus", "engine", "gpus", positive_int,
        "GPUs the engines own when they do not share the trainer's"),
    Key("engine.gpu_memory_utilization", "engine", "gpu_memory_utilization", fraction,
        "the engine's share of GPU memory (vLLM: of the total; SGLang --mem-fraction-static: "
        "of what is free when it starts)"),
    Key("engine.max_num_batched_tokens", "engine", "max_num_batched_tokens", positive_int,
        "tokens per engine step (the profile run's batch)"),
    Key("engine.max_num_seqs", "engine", "max_num_seqs", positive_int,
        "sequences the engine schedules at once"),
    Key("engine.max_model_len", "engine", "max_model_len", positive_int,
        "the longest request (prompt + output) the engine accepts"),
    Key("engine.enforce_eager", "engine", "enforce_eager", to_bool,
        "no CUDA graphs (no graph memory pool)"),
    Key("engine.kv_cache_dtype", "engine", "kv_cache_dtype",
        choice("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bf16", "fp16", "fp32",
               aliases={"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}),
        "the KV cache dtype (auto: the model's)"),
    Key("engine.quantization", "engine", "quantization", to_str,
        "weight quantization of the engine's copy (fp8, awq, gptq, ...)"),
    Key("engine.dtype", "engine", "dtype", _dtype, "the engine's weight dtype"),
    Key("engine.sleep_level", "engine", "sleep_level", sleep_level,
        "between rollouts: 0 the engine stays awake; 1 weights to host RAM and the KV cache "
        "freed; 2 both freed (vLLM sleep mode)"),
    Key("engine.version", "engine", "version", to_str, "the engine's version (e.g. 0.8.5)"),
    # assumptions
    Key("profile", "assumptions", "profile", choice("precise", "seed"),
        "memory model profile: precise (measured reality) or seed (the articles)"),
]



def size_or_auto(value: Any):
    """A DeepSpeed buffer size: a number of elements (1e8, "5e8"; DeepSpeed reads it as int) or
    "auto" (the HF Trainer fills it in from the model's hidden size)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return int(_number(value))


# a release version's numbers: up to four, dotted, after an optional "v" (the one version
# reader: version_text checks a key's value with it, version_numbers compares versions)
_RELEASE = lazy_re.compile(r"v?(\d+(?:\.\d+){0,3})")


def version_text(value: Any) -> str:
    """A release version, as its dotted numbers ("0.14.2"; a number 0.14 is read as written)."""
    text = str(value).strip()
    match = None if isinstance(value, bool) else _RELEASE.fullmatch(text)
    if match is None:
        raise ValueError(f"expected a version like 0.14.2, got {_short(value)}")
    return match.group(1)


def version_numbers(value: Any) -> Optional[tuple]:
    """The release numbers a version starts with, to compare versions: "0.8.5" -> (0, 8, 5);
    "v0.14.2", "0.8.5.post1", "0.6.3rc1", "2.4.0+cu121" are read as their numbers. None when
    no version is given or it does not start with a number."""
    if value is None or isinstance(value, bool):
        return None
    match = _RELEASE.match(str(value).strip())
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def env_value(value: Any) -> str:
    """An environment variable's value, as written."""
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {_short(value)}")
    return value


def word_list(value: Any) -> tuple:
    """Names written as a list or as one space- or comma-separated string (Megatron
    `--recompute-modules core_attn mlp`), in the order given."""
    if isinstance(value, (list, tuple)):
        text = " ".join(str(v) for v in value)
    elif isinstance(value, str):
        text = value
    else:
        raise ValueError(f"expected a list of names, got {_short(value)}")
    return tuple(re.findall(r"[a-z][a-z0-9_]*", text))


def layout_stages(value: Any) -> tuple:
    """Megatron `--pipeline-model-parallel-layout` as its virtual pipeline stages, each a string
    of layer letters (E embedding, t transformer layer, m MTP, L loss): a list as the Megatron
    adapter records it (repeats unrolled), or the unrolled text ("Et|tt|tL")."""
    stages = value.split("|") if isinstance(value, str) else value
    if (isinstance(stages, (list, tuple)) and stages
            and all(isinstance(s, str) and not set(s) - set("EtmL") for s in stages)):
        return tuple(stages)
    raise ValueError(f"expected a pipeline layout like 'Et|tt|tL' (repeats written out), got "
                     f"{_short(value)}")


# Framework settings a framework's conventions rest on (memory/conventions.py builds the
# `Conventions` record from them; the memory model reads only that record). Each is spelled as the
# framework spells it, under its namespace, which is also the name the framework's adapter records
# it under (`Partial.extra`): a value a config gives reaches the record through the adapter, and
# `--set KEY=VALUE` (or a memlint.toml) sets or overrides it. A value an adapter recorded that
# does not convert is left out (its format's own rules report it); one given with --set is an
# error. Section "conventions": `Scenario.convention_keys[name]`.
def _convention(name: str, convert: Callable[[Any], Any], doc: str) -> Key:
    return Key(name, "conventions", name, convert, doc)


M = "megatron."
D = "deepspeed."
_CONVENTION_KEYS = [
    _convention(M + "transformer-impl",
                choice("local", "transformer_engine", "inference_optimized"),
        "Megatron-LM --transformer-impl: transformer_engine (default: TE layers, TE workspaces, "
        "head_dim % 8 for its fused attention) or local (Megatron's own layers)"),
    _convention(M + "moe-grouped-gemm", to_bool,
        "Megatron-LM --moe-grouped-gemm: TE grouped GEMMs for the experts (4 more cuBLAS "
        "workspaces)"),
    _convention(M + "recompute-modules", word_list,
        "Megatron-LM --recompute-modules under selective recompute (default core_attn)"),
    _convention(M + "microbatch-group-size-per-virtual-pipeline-stage", positive_int,
        "Megatron-LM interleaved schedule: micro-batches per virtual stage group (default pp)"),
    _convention(M + "overlap-moe-expert-parallel-comm", to_bool,
        "Megatron-LM: overlap MoE expert-parallel communication (one more warm-up forward)"),
    _convention(M + "pipeline-layout-stages", layout_stages,
        "Megatron-LM --pipeline-model-parallel-layout, as its stages ('Et|tt|tL')"),
    _convention(M + "account-for-embedding-in-pipeline-split", to_bool,
        "Megatron-LM: the embedding counts as one layer of the pipeline split"),
    _convention(M + "deepspeed", to_bool,
        "Megatron-DeepSpeed's --deepspeed: DeepSpeed's engine, and with pipeline parallelism its "
        "PipelineModule partitions the layers (deepspeed/runtime/pipe/module.py)"),
    _convention(M + "untie-embeddings-and-output-weights", to_bool,
        "Megatron: an output layer of its own (with Megatron-DeepSpeed's PipelineModule, no "
        "tied EmbeddingPipe at the end)"),
    _convention(M + "pp-partition-method", to_str,
        "bigscience Megatron-DeepSpeed --pp-partition-method: DeepSpeed's PipelineModule "
        "partition method ('type:transformer|embedding' counts the embedding layers as units)"),
    _convention(M + "account-for-loss-in-pipeline-split", to_bool,
        "Megatron-LM: the loss counts as one layer of the pipeline split"),
    _convention(M + "cross-entropy-loss-fusion", to_bool,
        "Megatron-LM fused cross entropy (an fp32 copy of the logits beside the exp-logits)"),
    _convention(M + "defer-embedding-wgrad-compute", to_bool,
        "Megatron-LM: the output layer's weight gradient waits for the pipeline flush"),
    _convention(M + "wgrad-deferral-limit", non_negative_int,
        "Megatron-LM: micro-batches whose output-layer gradients are deferred (0: all)"),
    _convention(M + "attention-softmax-in-fp32", to_bool,
        "Megatron-LM: unfused attention softmax in fp32"),
    _convention(M + "apply-query-key-layer-scaling", to_bool,
        "Megatron-LM: query-key layer scaling (its unfused softmax runs in fp32)"),
    _convention(M + "num-distributed-optimizer-instances", positive_int,
        "Megatron-LM distributed-optimizer instances: each shards the optimizer over dp·cp / N "
        "ranks (the expert states over expert-dp / N); the instances all-reduce gradients"),
    _convention(M + "fine-grained-activation-offloading", to_bool,
        "Megatron-LM fine-grained activation offloading: the saved tensors of --offload-modules "
        "go to pinned host memory"),
    _convention(M + "offload-modules", word_list,
        "Megatron-LM modules whose saved tensors are offloaded (attn_norm, qkv_linear, "
        "core_attn, attn_proj, mlp_norm, expert_fc1, moe_act)"),
    _convention(M + "min-offloaded-tensor-size", non_negative_int,
        "Megatron-LM: tensors of fewer elements stay on the GPU (default 1048576)"),
    _convention(M + "activation-offload-fraction", fraction,
        "Megatron-LM: the fraction of eligible offload groups offloaded (default 1.0)"),
    _convention(M + "moe-token-dispatcher-type", choice("allgather", "alltoall", "flex"),
        "Megatron-LM MoE token dispatcher (default allgather): what the experts' tokens are "
        "gathered into and what each MoE layer keeps between steps"),
    _convention(M + "moe-router-dtype", choice("fp32", "fp64"),
        "Megatron-LM MoE router dtype: the routing weights the experts keep (default: the "
        "compute dtype)"),
    _convention(M + "moe-permute-fusion", to_bool,
        "Megatron-LM: Transformer Engine's fused token permutation (no int64 index map kept)"),
    _convention(M + "no-bias-swiglu-fusion", to_bool,
        "Megatron-LM: no fused (weighted) SwiGLU: the activation's intermediates are saved"),
    _convention(M + "use-te-activation-func", to_bool,
        "Megatron-LM: Transformer Engine's activation modules (the routing weights are then "
        "applied after them, keeping their output)"),
    _convention(M + "tp-comm-overlap", to_bool,
        "Megatron-LM --tp-comm-overlap: Transformer Engine's userbuffers, device memory outside "
        "PyTorch's allocator (memory/userbuffers.py)"),
    _convention(M + "first-last-layers-bf16", to_bool,
        "Megatron-LM --first-last-layers-bf16: bf16 layers beside FP8 ones (a second, "
        "unquantized set of userbuffers under --tp-comm-overlap)"),
    _convention(M + "deterministic-mode", to_bool,
        "Megatron-LM --deterministic-mode: torch's deterministic algorithms, so Transformer "
        "Engine's attention runs deterministically (cuDNN's dP workspace on Hopper)"),
    _convention(M + "attention-backend", choice("flash", "fused", "unfused", "local", "auto"),
        "Megatron-LM --attention-backend (default auto: Transformer Engine picks, FusedAttention "
        "first on Hopper and later)"),
    _convention(M + "use-packed-sequence", to_bool,
        "Megatron-LM pretrain_vlm.py --use-packed-sequence: under context parallelism the "
        "language model attends over THD (packed) tensors"),
    _convention("env.NVTE_ALLOW_NONDETERMINISTIC_ALGO", env_value,
        "the environment's NVTE_ALLOW_NONDETERMINISTIC_ALGO: 0 makes Transformer Engine's "
        "attention deterministic (cuDNN's dP workspace on Hopper)"),
    _convention(M + "entry-script", to_str,
        "the Megatron training script (recorded by the adapter): which get_batch builds the "
        "batch (pretrain_gpt.py / pretrain_hybrid.py: the dataloader's attention mask)"),
    _convention(M + "no-create-attention-mask-in-dataloader", to_bool,
        "Megatron-LM: the GPT dataloader builds no B x 1 x T x T attention mask (default: it "
        "does, megatron/core/datasets/gpt_dataset.py)"),
    _convention(M + "unsupported-architecture", to_str,
        "why the Megatron run's architecture gets no estimate (recorded by the adapter)"),
    _convention("gpt_neox.unsupported-architecture", to_str,
        "why the gpt-neox run's architecture gets no estimate (recorded by the adapter)"),
    _convention(D + "config", to_str,
        "the run's DeepSpeed config file: DeepSpeed runs the training (recorded by the adapter "
        "that read it, also under the HF Trainer and accelerate)"),
    _convention(D + "reduce_bucket_size", size_or_auto,
        "DeepSpeed ZeRO reduce_bucket_size (elements, or auto)"),
    _convention(D + "contiguous_gradients", to_bool,
        "DeepSpeed ZeRO contiguous_gradients"),
    _convention(D + "overlap_comm", to_bool,
        "DeepSpeed ZeRO overlap_comm"),
    _convention(D + "stage3_max_live_parameters", size_or_auto,
        "DeepSpeed ZeRO-3 stage3_max_live_parameters"),
    _convention(D + "stage3_max_reuse_distance", size_or_auto,
        "DeepSpeed ZeRO-3 stage3_max_reuse_distance: a released module keeps its gathered "
        "parameters when the trace uses them again within this many elements"),
    _convention(D + "stage3_prefetch_bucket_size", size_or_auto,
        "DeepSpeed ZeRO-3 stage3_prefetch_bucket_size (elements, or auto)"),
    _convention(D + "stage3_param_persistence_threshold", size_or_auto,
        "DeepSpeed ZeRO-3 stage3_param_persistence_threshold (elements, or auto)"),
    _convention(D + "stage3_gather_16bit_weights_on_model_save", to_bool,
        "DeepSpeed ZeRO-3: save consolidated 16-bit weights with each checkpoint"),
    _convention(D + "memory_efficient_linear", to_bool,
        "DeepSpeed ZeRO-3 memory_efficient_linear (default true): linear layers that do not keep "
        "their gathered weight for the backward"),
    _convention(D + "version", version_text,
        "the DeepSpeed version the run uses (e.g. 0.14.2; default: the version memlint's DeepSpeed "
        "facts are read at, v0.19.6): before 0.19.4 a model built outside zero.Init keeps "
        "standard linear layers under ZeRO-3"),
    _convention(D + "sub_group_size", non_negative_int,
        "DeepSpeed ZeRO sub_group_size (elements per optimizer sub-group)"),
    _convention(D + "offload_optimizer.pin_memory", to_bool,
        "DeepSpeed offload_optimizer.pin_memory"),
    _convention(D + "offload_optimizer.buffer_count", non_negative_int,
        "DeepSpeed offload_optimizer.buffer_count (NVMe swap buffers)"),
    _convention(D + "offload_param.pin_memory", to_bool,
        "DeepSpeed offload_param.pin_memory"),
    _convention(D + "offload_param.buffer_count", non_negative_int,
        "DeepSpeed offload_param.buffer_count (NVMe swap buffers)"),
    _convention(D + "offload_param.buffer_size", non_negative_int,
        "DeepSpeed offload_param.buffer_size (elements per swap buffer)"),
    _convention(D + "offload_param.max_in_cpu", non_negative_int,
        "DeepSpeed offload_param.max_in_cpu (parameters cached in RAM)"),
    _convention("gpt_neox.config", to_str,
        "the run's gpt-neox config (recorded by its adapter): Megatron-style vocab-parallel "
        "cross entropy on DeepSpeed, not transformers' loss"),
    _convention("accelerate.distributed_type", to_str,
        "accelerate's distributed_type (MULTI_GPU, FSDP, DEEPSPEED, NO, ...): the launcher config "
        "states the run's sharding, none for data-parallel DDP (recorded by the accelerate "
        "adapter)"),
    _convention("accelerate.fsdp_version", positive_int,
        "accelerate's fsdp_config.fsdp_version: 1 FullyShardedDataParallel (the default), 2 "
        "fully_shard (recorded by the accelerate adapter)"),
    _convention("transformers.loss_upcast", to_bool,
        "the model's causal-LM loss upcasts the logits to fp32 (default true: transformers' own "
        "classes, ForCausalLMLoss / logits.float()); false for remote modeling code that runs "
        "CrossEntropyLoss on the logits as they are (Qwen v1 modeling_qwen.py). Under "
        "torch.autocast cross_entropy runs in fp32 either way"),
    _convention("loop.held_logits", choice("none", "fp32", "compute"),
        "the logits the training loop still holds through the backward and the optimizer step: "
        "none (the HF Trainer: compute_loss returns the loss only, the outputs die before the "
        "backward), fp32 (a loop that keeps `outputs = model(**batch)` of a transformers model "
        "whose forward upcasts the logits it returns, e.g. LlamaForCausalLM at transformers "
        "0022728: `logits = logits.float()`), compute (the model returns them in the compute "
        "dtype). Default none; under framework=deepspeed (the user's own loop) it is printed "
        "as an assumption"),
    _convention("torch.version", version_text,
        "the PyTorch version the run uses (e.g. 2.0; default: a current one, 2.1 or later): "
        "before 2.1 torch's foreach Adam/AdamW step keeps two temporaries of the size of all "
        "its parameters (pytorch/pytorch#97712, #104898), before 2.0 the for-loop step is "
        "the CUDA default"),
    _convention("torchtitan.disable_loss_parallel", to_bool,
        "torchtitan disable_loss_parallel ([parallelism], [training] before 2025): under tensor "
        "parallelism the output layer's logits are gathered to the full vocabulary on every rank "
        "and the loss runs on them (recorded by the torchtitan adapter)"),
    _convention("loop.frees_logits", to_bool,
        "the training loop drops its logits before backward (torchtitan train.py `del pred`), "
        "so the layers' backward runs after the loss's backward freed them (recorded by the "
        "torchtitan adapter)"),
    _convention("float8.switch", choice("enable_float8_linear", "converters"),
        "how a torchtitan file turns torchao float8 linears on: [float8] enable_float8_linear "
        "(torchtitan 2024-07-17..2025-02-15) or model.converters (from 2025-02-15); dates the "
        "op-level SAC list (recorded by the torchtitan adapter)"),
    _convention("fsdp.allgather_dtype_bytes", positive_int,
        "bytes per linear weight FSDP all-gathers: 1 with torchao's float8 all-gather "
        "(torchtitan enable_fsdp_float8_all_gather; recorded by the torchtitan adapter)"),
    _convention("env.CUBLAS_WORKSPACE_CONFIG", env_value,
        "the environment's CUBLAS_WORKSPACE_CONFIG (:SIZE_KiB:COUNT pairs): PyTorch's cuBLAS "
        "workspace"),
    _convention("env.CUBLASLT_WORKSPACE_SIZE", env_value,
        "the environment's CUBLASLT_WORKSPACE_SIZE (KiB): PyTorch's cuBLASLt workspace"),
    _convention("world_size.assumed", to_bool,
        "the world size is the launcher reader's assumption, not a value a file gave"),
]
CONVENTION_KEYS: dict = {key.name: key for key in _CONVENTION_KEYS}

KEYS: dict = {key.name: key for key in _KEYS + _CONVENTION_KEYS}


def is_model_key(name: str) -> bool:
    """`model.<hf_key>` overrides any HF config key (besides the count overrides above)."""
    return name.startswith("model.") and name not in KEYS


MAX_SUGGEST_CHARS = 80
# Per file and block, the first MAX_UNKNOWN_LISTED unknown keys get a diagnostic of their own (and
# a did-you-mean), the rest one summary line (Megatron flags: adapters/megatron/flags.py).
MAX_UNKNOWN_LISTED = 100


def suggest(name: str, candidates) -> Optional[str]:
    """The closest known name, for did-you-mean messages: difflib's answer
    (`get_close_matches(name, candidates, n=1, cutoff=0.6)`, see close_matches). A name longer
    than any flag gets no suggestion (callers also cap how many they ask for per file)."""
    size = len(name)
    if not size or size > MAX_SUGGEST_CHARS:
        return None
    if isinstance(candidates, tuple):   # a fixed table: the same unknown name, the same answer
        key = (name, candidates)
        if key not in _SUGGESTED:
            if len(_SUGGESTED) >= 10_000:
                _SUGGESTED.clear()
            _SUGGESTED[key] = next(iter(close_matches(name, candidates, 1)), None)
        return _SUGGESTED[key]
    return next(iter(close_matches(name, candidates, 1)), None)


def close_matches(name: str, candidates, n: int = 3) -> list:
    """`difflib.get_close_matches(name, candidates, n, cutoff=0.6)`, found without running
    difflib on every candidate.

    difflib's ratio is 2*M/(len(a)+len(b)) with M the characters of its matching blocks, so two
    bounds of it need no alignment: M is at most the shorter length (its real_quick_ratio) and at
    most the characters the two have in common, counted with multiplicity (its quick_ratio). A
    candidate whose bound is under the cutoff is dropped, as difflib drops it; the rest are
    aligned best bound first, and the search stops once the n best ratios found exceed every
    bound left (a tie still goes to the larger string, as difflib's nlargest orders them)."""
    if isinstance(candidates, tuple):   # a fixed table: the same name, the same answer
        key = (name, candidates, n)
        found = _MATCHED.get(key)
        if found is None:
            if len(_MATCHED) >= 10_000:
                _MATCHED.clear()
            found = _MATCHED[key] = tuple(_close_matches(name, candidates, n))
        return list(found)
    return _close_matches(name, candidates, n)


def _close_matches(name: str, candidates, n: int) -> list:
    size = len(name)
    if n <= 0 or not size:
        # difflib: n must be > 0; an empty name matches only an empty candidate (ratio 1)
        import difflib  # start-up: only these corner cases need difflib itself

        return difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.6)
    chars = set(name)
    own = size - len(chars)   # the name's repeated characters
    bounded = []   # (bound from the characters the two share at all, candidate)
    if isinstance(candidates, tuple):
        # a fixed table (Megatron's 1,452 flags): the same bound, from each candidate's
        # characters as bits, made once per table
        bits, rows = _table(candidates)
        mask = 0
        for ch in chars:
            mask |= bits.get(ch, 0)
        for length, theirs, repeats, c in rows:
            total = size + length
            if 0.6 * total > 2 * min(size, length):
                continue
            both = (mask & theirs).bit_count()
            shared = min(own + both, repeats + both)
            if 0.6 * total <= 2 * shared:
                bounded.append((2.0 * shared / total, c))
    else:
        for c in candidates:
            total = size + len(c)
            if 0.6 * total > 2 * min(size, len(c)):
                continue
            other = _CHARSETS.get(c)
            if other is None:
                other = _CHARSETS[c] = frozenset(c)
            # each distinct character one string lacks is one that cannot match
            both = len(chars & other)
            shared = min(own + both, len(c) - len(other) + both)
            if 0.6 * total <= 2 * shared:
                bounded.append((2.0 * shared / total, c))
    if not bounded:
        return []
    # start-up: difflib loads only when a did-you-mean has a candidate to align
    import difflib

    bounded.sort(reverse=True)
    counts = _counts(name)
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(name)
    best: list = []   # the n best (ratio, candidate), best first
    for bound, c in bounded:
        if len(best) == n and bound < best[-1][0]:
            break      # sorted: no candidate left can reach the n-th best ratio
        theirs = _counts(c)
        common = 2.0 * sum(min(k, theirs.get(ch, 0)) for ch, k in counts.items()) / (size + len(c))
        if common < 0.6 or (len(best) == n and common < best[-1][0]):
            continue
        matcher.set_seq1(c)
        found = (matcher.ratio(), c)
        if found[0] >= 0.6 and (len(best) < n or found > best[-1]):
            best.append(found)
            best.sort(reverse=True)
            del best[n:]
    return [c for _, c in best]


def _table(candidates: tuple) -> tuple:
    """(bit of each character, [(length, its characters' bits, its repeated characters,
    candidate), ...]) of a fixed candidate table, made once per process."""
    found = _TABLES.get(candidates)
    if found is None:
        bits: dict = {}
        rows = []
        for c in candidates:
            theirs = 0
            for ch in set(c):
                bit = bits.get(ch)
                if bit is None:
                    bit = bits[ch] = 1 << len(bits)
                theirs |= bit
            rows.append((len(c), theirs, len(c) - len(set(c)), c))
        if len(_TABLES) >= 64:
            _TABLES.clear()
        found = _TABLES[candidates] = (bits, rows)
    return found


def _counts(text: str) -> dict:
    """How often each character occurs in `text` (cached: candidate lists are fixed tables)."""
    found = _COUNTS.get(text)
    if found is None:
        found = {}
        for ch in text:
            found[ch] = found.get(ch, 0) + 1
        if len(_COUNTS) < 100_000:
            _COUNTS[text] = found
    return found


_CHARSETS: dict = {}  # candidate -> its characters (the candidate lists are fixed tables)
_COUNTS: dict = {}    # candidate -> its character counts
_TABLES: dict = {}    # a tuple of candidates -> _table's bits and rows
_SUGGESTED: dict = {}  # (name, a tuple of candidates) -> suggest's answer, per process
_MATCHED: dict = {}    # (name, a tuple of candidates, n) -> close_matches' answer
