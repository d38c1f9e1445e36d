"""Bytes of optimizer moments, including block-quantized 8-bit and 4-bit states and paged states.

Scenario keys (memlint/keys.py): `optimizer_state_dtype` (fp32, bf16, fp16, fp8, int8, int4),
`optimizer_state_block` (elements per fp32 scale), `optimizer_paged` (bitsandbytes Paged*).

What the libraries allocate per moment of a parameter with n elements (read at
bitsandbytes-foundation/bitsandbytes@95f9af3 and pytorch/ao@36027d8):
- bitsandbytes 8-bit optimizers (`Adam8bit`, `AdamW8bit`, `PagedAdamW8bit`, ...;
  `bitsandbytes/optim/optimizer.py` `Optimizer2State.init_state`): `state1`/`state2` as uint8
  tensors shaped like the parameter, plus `absmax1`/`absmax2`, one float32 per block of
  `blocksize = 256` elements: n + 4·ceil(n / 256) bytes per moment. The 256-entry quantization maps
  (`qmap1`/`qmap2`) are shared by all parameters (2 KiB in all, not counted). A parameter with fewer
  than `min_8bit_size = 4096` elements keeps fp32 states (norm vectors of models with d < 4096);
  those are under 0.01 % of a transformer's parameters and are counted at the 8-bit rate.
- torchao `AdamW8bit` (`torchao/optim/adam.py`, block_size=256; `subclass_8bit.py`
  `OptimState8bit.zeros`: uint8 codes shaped like the parameter, float32 scale per block) gives
  the same n + 4·ceil(n / 256). torchao `AdamW4bit` (block_size=128; `subclass_4bit.py`: two 4-bit
  codes packed per uint8, float32 scale per block): ceil(n / 2) + 4·ceil(n / 128). torchao quantizes
  only parameters with at least 4096 elements and n divisible by the block size (`_new_buffer`);
  the rest keep plain states (again norms and biases, counted at the quantized rate).
- Paged optimizers (bitsandbytes `is_paged=True`): `get_state_buffer` allocates every state of a
  parameter with at least 1e5 elements through `F.get_paged` (CUDA unified memory,
  cudaMallocManaged), which the driver migrates to host memory under GPU memory pressure. Such
  states cannot cause an out-of-memory error, so memlint reports them as host memory
  (`host.optimizer_paged`) and keeps them out of the GPU verdict.
Quantized states are updated by fused kernels (bitsandbytes `optimizer_update_8bit_blockwise`,
torchao's compiled `single_param_adam`), so no step temporaries are counted for them.
"""
from __future__ import annotations

import math

BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}

# The library defaults for the elements that share one fp32 scale.
DEFAULT_BLOCK = {"int8": 256, "int4": 128}
SCALE_BYTES = 4  # float32 absmax / scale per block (bitsandbytes absmax1/2, torchao scale)
SOURCE = ("bitsandbytes@95f9af3 optim/optimizer.py Optimizer2State.init_state (uint8 state, fp32 absmax "
          "per 256); pytorch/ao@36027d8 torchao/optim/adam.py, subclass_8bit.py, subclass_4bit.py")
PAGED_SOURCE = ("bitsandbytes@95f9af3 optim/optimizer.py get_state_buffer: F.get_paged (CUDA unified "
                "memory, evicted to host under pressure)")


def default_block(state_dtype: str) -> int:
    """Elements per fp32 scale for a state dtype when the user gives none (0: no scales)."""
    return DEFAULT_BLOCK.get(state_dtype, 0)


def moment_bytes(elements: int, moments: float, bits: int, block: int) -> int:
    """Bytes of `moments` optimizer moments over `elements` parameters.

    moments × (ceil(elements × bits / 8) + SCALE_BYTES × ceil(elements / block)), the second part
    only for block-quantized states (block > 0). Fractional `moments` (Muon's mix) round once.
    """
    elements = int(elements)
    codes = math.ceil(elements * bits / 8)
    scales = SCALE_BYTES * math.ceil(elements / block) if block > 0 else 0
    return int(round(moments * (codes + scales)))


def bytes_per_element(bits: int, block: int) -> float:
    """Average bytes per moment element: bits / 8 + 4 / block (for lower bounds and formulas)."""
    return bits / 8 + (SCALE_BYTES / block if block > 0 else 0.0)


def formula_width(bits: int, block: int) -> str:
    """How one moment element's bytes read in a formula: '4 B' or '(1 B + 4 B / 256)'."""
    if block <= 0:
        return f"{bits / 8:g} B"
    return f"({bits / 8:g} B + {SCALE_BYTES} B / block {block})"
