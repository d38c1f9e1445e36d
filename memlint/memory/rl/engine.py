"""An inference engine on one GPU: vLLM's budget and what fills it (or SGLang's share).

vLLM (vllm-project/vllm v0.12.0, 4fd9d6a85, read from its PyPI wheel) takes a fixed budget at
start-up and sizes its KV cache from what is left of it:
- the budget: `requested = total_memory x gpu_memory_utilization`
  (vllm/v1/worker/gpu_worker.py:233), and the engine refuses to start when less than that is free
  (gpu_worker.py:237, "Free memory on device ... is less than desired GPU memory utilization");
- inside it, the weights of its tensor/pipeline shard, the peak of a profile run (one forward of
  `max_num_batched_tokens` tokens, then the sampler on `max_num_seqs` requests:
  gpu_model_runner.py profile_run / _dummy_sampler_run, which sets top-k and top-p so that the
  sampler sorts the full vocabulary: sample/ops/topk_topp_sampler.py:258), and memory outside
  PyTorch (NCCL, custom all-reduce buffers, cuBLAS) that the profile run grew; the rest is the KV
  pool: `available = requested - non_kv_cache_memory` (gpu_worker.py:341);
- CUDA graphs are captured after the pool is allocated, outside the budget, unless
  `enforce_eager` (gpu_model_runner.py capture_model);
- the pool holds `pool // page_bytes` blocks of 16 tokens; a request of `max_model_len` tokens must
  fit or the engine refuses to start (v1/core/kv_cache_utils.py:687 "No available memory for the
  cache blocks", :708 "To serve at least one request with the models's max seq len ..."), and
  it logs "Maximum concurrency for N tokens per request: Cx" (kv_cache_utils.py:1292).
- KV bytes per token and layer: `2 x kv_heads_per_rank x head_dim x bytes(kv dtype)` with
  `kv_heads_per_rank = max(1, kv_heads // tp)` (config/model.py:1337, kv_cache_interface.py:71);
  MLA stores `kv_lora_rank + qk_rope_head_dim` once per token (kv_cache_interface.py:167).

SGLang's `--mem-fraction-static` is a fraction of the memory free when it starts, not of the
total (verl docs/perf/perf_tuning.rst): its budget is computed the same way from what the caller
says is free. The measured constants (memory outside PyTorch, the CUDA-graph pool) are named
assumptions (`engine.*` in memlint/assumptions.py), each with the measurements it rests on.
"""
from __future__ import annotations

from memlint.assumptions import assumed
from memlint.memory.terms import Term
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

SOURCE = "vllm-project/vllm v0.12.0 (4fd9d6a85)"
BLOCK_TOKENS = 16                      # vLLM's default block size on CUDA (config/cache.py)
VOCAB_PADDING = 64                     # vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE
SAMPLER_BYTES_PER_LOGIT = 4 + 4 + 8    # fp32 logits, sorted fp32 values, int64 sort indices
MOE_CHUNK_TOKENS = 16 * 1024           # VLLM_FUSED_MOE_CHUNK_SIZE (vllm/envs.py:58)
# vLLM's gpu_memory_utilization (config/cache.py:49) and SGLang's usual mem_fraction_static
DEFAULT_UTILIZATION = 0.9
_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "auto": None, "fp8_e4m3": 1,
                "fp8_e5m2": 1}
_QUANT_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fbgemm_fp8": 1, "awq": 0.5, "awq_marlin": 0.5,
                "gptq": 0.5, "gptq_marlin": 0.5, "int4": 0.5, "w4a16": 0.5, "w8a8": 1,
                "int8": 1, "bitsandbytes": 0.5, "torchao": 1, "modelopt": 1, "mxfp4": 0.5,
                "compressed-tensors": None}


@record(frozen=True)
class EngineShape:
    """What the engine model needs of a model: dimensions and parameter counts."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    params: int               # every parameter
    expert_params: int = 0    # of which routed experts
    moe_top_k: int = 0
    expert_ffn: int = 0
    mla_latent: int = 0       # MLA: kv_lora_rank + qk_rope_head_dim, 0 without MLA
    sliding_window: int = 0   # window of the sliding-window layers (0: none)
    sliding_layers: int = 0   # how many of the layers use it
    max_position: int = 0     # the model's max_position_embeddings (vLLM's max_model_len default)
    dtype_bytes: int = 2      # the checkpoint's weight dtype
    # a checkpoint saved quantized (its config.json's quantization_config, which vLLM applies
    # without a --quantization flag: config/model.py _verify_quantization): bytes per weight of
    # its linear layers, and its quant_method; the embedding and lm_head stay in dtype_bytes
    quant_bytes: float = 0.0
    quant_method: str = ""
    embedding_params: int = 0  # embedding + untied lm_head
    dense_layers: int = 0      # MoE models: decoder layers with a dense MLP instead of experts
    shared_ffn: int = 0        # MoE models: the shared experts' width


@record(frozen=True)
class EngineSettings:
    name: str = "vllm"
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    utilization: Optional[float] = None
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 1024
    max_model_len: Optional[int] = None
    enforce_eager: bool = False
    kv_dtype: Optional[str] = None
    quantization: Optional[str] = None
    dtype: Optional[str] = None


@record(frozen=True)
class EngineBudget:
    """One engine GPU: the budget's terms (they add up to `requested`), what lies outside it, and
    what the KV pool holds."""

    requested: int
    inside: tuple           # Terms inside the budget; the last is the KV pool
    outside: tuple          # Terms outside it (CUDA graphs)
    kv_bytes_per_token: int
    pool_tokens: int
    max_model_len: int
    refusal: Optional[str]  # vLLM's own start-up refusal, when it would refuse

    @property
    def kv_pool(self) -> int:
        return self.inside[-1].bytes

    @property
    def concurrency(self) -> float:
        """Requests of max_model_len tokens the pool holds at once (vLLM's log line)."""
        return self.pool_tokens / self.max_model_len if self.max_model_len else 0.0

    @property
    def weights(self) -> int:
        return self.inside[0].bytes


def kv_bytes_per_token(shape: EngineShape, tp: int, pp: int, kv_dtype_bytes: int) -> int:
    """KV cache bytes one token takes on one engine GPU (its pipeline stage's layers)."""
    layers = -(-shape.layers // pp)
    if shape.mla_latent:
        return layers * shape.mla_latent * kv_dtype_bytes
    heads = max(1, shape.kv_heads // tp)
    return layers * 2 * heads * shape.head_dim * kv_dtype_bytes


def weight_bytes(shape: EngineShape, settings: EngineSettings) -> tuple:
    """(bytes, formula) of the engine's copy of the weights on one GPU."""
    per, quantized = _weight_dtype_bytes(shape, settings)
    # quantization methods leave the vocabulary embedding and the lm_head in the model's dtype
    embed = shape.embedding_params if quantized else 0
    embed_bytes = _unquantized_bytes(shape, settings)
    dense = shape.params - shape.expert_params - embed
    expert_split = settings.tp * (settings.dp if settings.ep > 1 else 1)
    shard = settings.tp * settings.pp
    total = int(dense * per / shard + shape.expert_params * per / (expert_split * settings.pp)
                + embed * embed_bytes / shard)
    formula = (f"(dense {dense:,} / (tp {settings.tp} · pp {settings.pp})"
               + (f" + experts {shape.expert_params:,} / {expert_split * settings.pp}"
                  if shape.expert_params else "") + f") × {per:g} B"
               + (f" ({quantized}) + embedding and lm_head {embed:,} / {shard} × {embed_bytes} B"
                  if embed else ""))
    return total, formula


def _weight_dtype_bytes(shape: EngineShape, settings: EngineSettings) -> tuple:
    """(bytes per linear weight, the quantization method or "")."""
    if settings.quantization:
        found = _QUANT_BYTES.get(settings.quantization.lower())
        if found is not None:
            return found, settings.quantization.lower()
    if shape.quant_bytes and (not settings.quantization
                              or settings.quantization.lower() == shape.quant_method):
        return shape.quant_bytes, shape.quant_method
    return _unquantized_bytes(shape, settings), ""


def _unquantized_bytes(shape: EngineShape, settings: EngineSettings) -> int:
    if settings.dtype:
        return _DTYPE_BYTES.get(settings.dtype) or shape.dtype_bytes
    return shape.dtype_bytes


def forward_peak(shape: EngineShape, tokens: int, tp: int) -> tuple:
    """(bytes, formula) of the largest live set of one decoder layer's forward over `tokens`
    tokens without autograd: the residual stream, the layer input and output, and the MLP's
    gate/up output beside its activation. Routed experts run in chunks of at most
    VLLM_FUSED_MOE_CHUNK_SIZE tokens (16384, vllm/envs.py:58), each holding
    `cache13 = M × top_k × max(N, K)` and `cache2 = M × top_k × N / 2` with N = 2 × expert ffn /
    tp and K = d (model_executor/layers/fused_moe/fused_moe.py:1762-1805)."""
    width = shape.hidden
    stream = tokens * 3 * width * 2
    if shape.moe_top_k and shape.expert_ffn:
        chunk = min(tokens, MOE_CHUNK_TOKENS)
        n = 2 * shape.expert_ffn // tp
        routed = chunk * shape.moe_top_k * (max(n, width) + n // 2) * 2
        dense_ffn = max(shape.ffn if shape.dense_layers else 0, shape.shared_ffn)
        dense = tokens * 3 * dense_ffn // tp * 2
        what = (f"max(experts {chunk:,} tokens × top-{shape.moe_top_k} × (max(2 × expert ffn "
                f"{shape.expert_ffn:,} / tp {tp}, d) + expert ffn / tp) × 2 B"
                + (f", dense MLP {tokens:,} × 3 × ffn {dense_ffn:,} / tp × 2 B" if dense else "")
                + ")")
        return (stream + max(routed, dense),
                f"{tokens:,} tokens × 3 × d {width:,} × 2 B + {what}")
    inner = 3 * shape.ffn // tp
    what = f"3 × ffn {shape.ffn:,} / tp {tp}"
    per_token = (3 * width + inner) * 2
    return tokens * per_token, f"{tokens:,} tokens × (3 × d {width:,} + {what}) × 2 B"


def sampler_peak(shape: EngineShape, requests: int) -> tuple:
    vocab = _padded_vocab(shape.vocab)
    return (requests * vocab * SAMPLER_BYTES_PER_LOGIT,
            f"{requests:,} requests × vocab {vocab:,} × {SAMPLER_BYTES_PER_LOGIT} B (fp32 logits, "
            "sorted values, int64 indices: top-k/top-p sort)")


def _padded_vocab(vocab: int) -> int:
    return -(-vocab // VOCAB_PADDING) * VOCAB_PADDING


def budget(shape: EngineShape, settings: EngineSettings, total_memory: int, assumptions,
           free_memory: Optional[int] = None) -> EngineBudget:
    """The engine's budget on one GPU of `total_memory` bytes. `free_memory`: what is free when
    it starts (SGLang's fraction applies to it; vLLM compares it with its budget)."""
    util = settings.utilization or DEFAULT_UTILIZATION
    base = free_memory if settings.name == "sglang" and free_memory is not None else total_memory
    requested = int(base * util)
    weights, weights_formula = weight_bytes(shape, settings)
    inside = [Term("engine.weights", "weights", weights, weights_formula,
                   {"params": shape.params, "tp": settings.tp, "pp": settings.pp},
                   f"{SOURCE} model loading: the engine's shard of the weights")]
    tokens = settings.max_num_batched_tokens
    requests = min(settings.max_num_seqs, tokens)
    forward, forward_formula = forward_peak(shape, tokens, settings.tp)
    sampler, sampler_formula = sampler_peak(shape, requests)
    # the sampler runs on the last pipeline stage: the GPU that peaks highest
    peak = max(forward, sampler)
    inside.append(Term(
        "engine.activation_peak", "activations", peak,
        f"max(forward {forward_formula}, sampler {sampler_formula})",
        {"max_num_batched_tokens": tokens, "requests": requests, "forward": forward,
         "sampler": sampler},
        f"{SOURCE} gpu_model_runner.py profile_run: torch peak increase of the profile run"))
    non_torch = int(assumed(assumptions, "engine.non_torch_tp_bytes") if settings.tp > 1
                    else assumed(assumptions, "engine.non_torch_bytes"))
    inside.append(Term("engine.non_torch", "runtime", non_torch,
                       "NCCL / custom all-reduce / cuBLAS memory the profile run adds (assumption "
                       + ("engine.non_torch_tp_bytes, tp > 1)" if settings.tp > 1
                          else "engine.non_torch_bytes)"), {"tp": settings.tp},
                       "vLLM 0.19 start-ups on H100 (bench/data/calibration/vllm-startups, fit "
                       "rows): 0.25 GiB at tp 1, 2.10 GiB at tp >= 2"))
    used = sum(t.bytes for t in inside)
    pool = requested - used
    # kv_cache_dtype "auto": the model's dtype as the engine loads it (config/cache.py)
    kv_dtype = _DTYPE_BYTES.get(settings.kv_dtype or "auto") or _DTYPE_BYTES.get(
        settings.dtype or "auto") or shape.dtype_bytes
    per_token = kv_bytes_per_token(shape, settings.tp, settings.pp, kv_dtype)
    page = per_token * BLOCK_TOKENS
    pool_tokens = max(0, pool) // page * BLOCK_TOKENS if page else 0
    inside.append(Term(
        "engine.kv_cache", "buffers", max(0, pool),
        f"budget {requested:,} (= {util:g} × {base:,}) − weights − activation peak − non-torch"
        f" = {pool_tokens:,} tokens × {per_token:,} B",
        {"utilization": util, "tokens": pool_tokens, "bytes_per_token": per_token,
         "kv_dtype_bytes": kv_dtype},
        f"{SOURCE} gpu_worker.py:341 available_kv_cache_memory = requested − non_kv"))
    outside = []
    if not settings.enforce_eager and settings.name in ("vllm", "sglang", "trtllm"):
        outside.append(Term(
            "engine.cuda_graphs", "runtime", int(assumed(assumptions, "engine.cuda_graph_bytes")),
            "CUDA-graph pool captured after the KV cache (assumption engine.cuda_graph_bytes)",
            {}, "vLLM 0.19 start-ups on H100 (bench/data/calibration/vllm-startups, fit rows): "
                "'Graph capturing finished ... took' 0.87 GiB; not freed by sleep mode"))
    max_len = settings.max_model_len or shape.max_position or 0
    refusal = _refusal(pool, per_token, max_len, util, requested, free_memory)
    return EngineBudget(requested, tuple(inside), tuple(outside), per_token, pool_tokens,
                        max_len, refusal)


def _refusal(pool: int, per_token: int, max_len: int, util: float, requested: int,
             free_memory: Optional[int]) -> Optional[str]:
    gib = 1024**3
    if free_memory is not None and free_memory < requested:
        return (f"free memory on the device when the engine starts ({free_memory / gib:.2f} "
                f"GiB) is less than the budget it asks for ({util:g}, {requested / gib:.2f} "
                f"GiB): vLLM refuses to start ({SOURCE} vllm/v1/worker/gpu_worker.py:237)")
    if pool <= 0:
        return (f"no memory is left for the KV cache ({pool / gib:.2f} GiB after weights, "
                f"activation peak and non-torch memory): vLLM refuses to start "
                f"({SOURCE} vllm/v1/core/kv_cache_utils.py:687)")
    needed = -(-max_len // BLOCK_TOKENS) * BLOCK_TOKENS * per_token
    if max_len and needed > pool:
        fits = pool // (per_token * BLOCK_TOKENS) * BLOCK_TOKENS if per_token else 0
        return (f"one request of max_model_len {max_len:,} tokens needs {needed / gib:.2f} GiB "
                f"of KV cache, more than the {pool / gib:.2f} GiB pool (it holds {fits:,} "
                f"tokens): vLLM refuses to start ({SOURCE} vllm/v1/core/kv_cache_utils.py:708)")
    return None
