"""Dev-only: write memlint/facts/coverage/nemo_rl.json, the memory class of every key of the
NeMo-RL corpus configs (fixtures/real-world/NVIDIA-NeMo__RL, composed with their parents).

    python tools/nemo_rl_coverage.py

MODELED: what memlint/adapters/nemo_rl_mapping.py reads, with the components its scenario keys
change; NOT_MODELED: memory the estimate does not count (direction, NeMo-RL v0.7.0's code);
PART_OF: sub-keys of a not-modeled block; every other key neutral, except that a key whose name
looks memory-related (SUSPECT) must be classed by hand: the tool refuses to call it neutral.
"""
from __future__ import annotations

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rl_coverage import cls  # noqa: E402 - the verl/OpenRLHF/TRL tables' entry writer
OUT = os.path.join(ROOT, "memlint", "facts", "coverage", "nemo_rl.json")
CORPUS = os.path.join(ROOT, "fixtures", "real-world", "NVIDIA-NeMo__RL")
ALL = ["weights", "gradients", "optimizer", "activations", "logits"]
STATES = ["weights", "gradients", "optimizer"]
SEQ = ["activations", "logits"]
ENGINE = ["weights", "activations", "buffers", "runtime"]
S = "NVIDIA-NeMo/RL@81aa43dd (v0.7.0) "
P, D, G = "policy.", "policy.dtensor_cfg.", "policy.generation."
V = G + "vllm_cfg."
SUSPECT = re.compile(r"offload|dtype|micro|batch_size|mb_tokens|tensor_parallel|pipeline|expert|"
                     r"context_parallel|sequence_parallel|checkpointing|lora|fused|compile|cuda|"
                     r"quant|gpu|nodes|coloc|packing|max_model_len|sequence_length|dynamic_batch|"
                     r"entropy|memory|enforce|precision|_v2|backend|replicate|draft|chunk|fp8|"
                     r"reward_model|model_name|kv_cache")

MODELED = {
    "cluster.gpus_per_node": STATES + ["host"], "cluster.num_nodes": STATES + ["host"],
    P + "model_name": ALL + ["no-estimate"], P + "precision": ALL,
    P + "max_total_sequence_length": SEQ, P + "train_micro_batch_size": SEQ,
    P + "train_global_batch_size": ["gradients", "activations"],
    P + "logprob_batch_size": SEQ, P + "offload_optimizer_for_logprob": ["optimizer", "host"],
    P + "sequence_packing.enabled": SEQ, P + "sequence_packing.train_mb_tokens": SEQ,
    P + "sequence_packing.logprob_mb_tokens": SEQ,
    P + "dynamic_batching.enabled": SEQ, P + "dynamic_batching.train_mb_tokens": SEQ,
    P + "dynamic_batching.logprob_mb_tokens": SEQ,
    D + "enabled": ALL, D + "_v2": ["buffers", "host"], D + "tensor_parallel_size": ALL,
    D + "context_parallel_size": SEQ, D + "sequence_parallel": SEQ,
    D + "activation_checkpointing": ["activations"], D + "cpu_offload": STATES + ["host"],
    D + "dp_replicate_size": STATES, D + "lora_cfg.enabled": STATES,
    D + "lora_cfg.dim": STATES, D + "lora_cfg.match_all_linear": STATES,
    D + "lora_cfg.target_modules": STATES,
    P + "megatron_cfg.enabled": ALL, P + "megatron_cfg.tensor_model_parallel_size": ALL,
    P + "megatron_cfg.pipeline_model_parallel_size": ALL,
    P + "megatron_cfg.context_parallel_size": SEQ,
    P + "megatron_cfg.expert_model_parallel_size": STATES,
    G + "backend": ENGINE, G + "colocated.enabled": STATES + ENGINE + ["host"],
    G + "colocated.resources.gpus_per_node": ENGINE, G + "colocated.resources.num_nodes": ENGINE,
    V + "tensor_parallel_size": ENGINE, V + "pipeline_parallel_size": ENGINE,
    V + "expert_parallel_size": ENGINE, V + "max_model_len": ENGINE,
    V + "gpu_memory_utilization": ENGINE, V + "enforce_eager": ENGINE, V + "precision": ENGINE,
    V + "kv_cache_dtype": ENGINE,
    **{f"{a}.{k}": SEQ for a in ("grpo", "ppo", "distillation")
       for k in ("num_generations_per_prompt", "num_prompts_per_step")},
    G + "max_new_tokens": SEQ + ENGINE,
    "grpo.adv_estimator.name": ["weights", "logits"],
    "loss_fn.reference_policy_kl_penalty": ["weights", "activations", "logits", "host"],
    "dpo.reference_policy_kl_penalty": ["weights", "activations", "logits", "host"],
}


FALSE = ["false", "False"]
NOT_MODELED = {
    P + "megatron_cfg.enabled": cls("either", "the Megatron policy worker "
                                    "(models/policy/workers/megatron_policy_worker.py): memlint "
                                    "has not read its refit, reference and log-prob phases; the "
                                    "phases use generic RL conventions", when=["true", "True"]),
    D + "expert_parallel_size": cls("either", "Automodel expert parallelism of the policy "
                                    "(memlint shards the experts like the dense layers)",
                                    off=["1"]),
    D + "custom_parallel_plan": cls("either", "a custom TP plan", off=["None", "null"]),
    D + "clear_cache_every_n_steps": cls("low", "empty_cache every n steps (fragmentation)",
                                         off=["None", "null"]),
    D + "env_vars.PYTORCH_CUDA_ALLOC_CONF": cls("either", "the allocator's settings "
                                                "(expandable_segments: less fragmentation)"),
    D + "lora_cfg.exclude_modules": cls("either", "modules left without an adapter",
                                        off=["[]", ""]),
    P + "logprob_chunk_size": cls("high", "log-probs computed over chunks of the sequence "
                                  "(automodel/train.py:820): smaller logits temporaries",
                                  off=["None", "null"]),
    P + "draft.enabled": cls("low", "an Eagle draft model trained beside the policy",
                             when=["true", "True"]),
    P + "reward_model_cfg.enabled": cls("high", "the policy is a reward model "
                                        "(a value head, no LM-head logits)", when=["true", "True"]),
    P + "router_replay.enabled": cls("low", "MoE routing decisions kept for replay",
                                     when=["true", "True"]),
    P + "generation_batch_size": cls("either", "the HF generation backend's batch",
                                     off=["32"]),
    "value.model_name": cls("low", "PPO's value model (its own worker group) is not counted"),
    "teacher.model_name": cls("low", "distillation's teacher model (its own worker group) is "
                              "not counted"),
    V + "async_engine": cls("either", "the async vLLM engine", off=FALSE),
    V + "num_first_layers_in_bf16": cls("low", "first layers kept in bf16 under fp8 rollouts",
                                        off=["0"]),
    V + "num_last_layers_in_bf16": cls("low", "last layers kept in bf16 under fp8 rollouts",
                                       off=["0"]),
    V + "use_deep_gemm": cls("either", "DeepGEMM kernels (fp8)", off=FALSE),
    V + "quantization": cls("high", "a quantized rollout engine", off=["None", "null"]),
    "grpo.async_grpo.enabled": cls("low", "asynchronous GRPO: rollouts in flight during the "
                                   "update (engine and trainer awake together)",
                                   when=["true", "True"]),
    "grpo.use_dynamic_sampling": cls("low", "up to dynamic_sampling_max_gen_batches generation "
                                     "batches per step", when=["true", "True"]),
    "grpo.batch_multiplier": cls("low", "more prompts generated per step", off=["1"]),
    "data_plane.enabled": cls("low", "the TransferQueue data plane's storage (host)",
                              when=["true", "True"], scope="host"),
    G + "sglang_cfg.mem_fraction_static": cls("either", "SGLang's share of the GPU "
                                              "(memlint takes the engine's defaults)",
                                              requires={G + "backend": ["vllm", "megatron"]}),
    G + "mcore_generation_config.buffer_size_gb": cls("either", "the Megatron generation "
                                                      "engine's buffer",
                                                      requires={G + "backend": ["vllm", "sglang"]}),
}
PART_OF = {}
# memory-looking names that change no memory of the training step (validation batches run
# between steps; LoRA's scaling, dropout and init; length rounding of packed batches) or that
# NeMo-RL v0.7.0 never reads (policy.activation_checkpointing_enabled: no use in nemo_rl/)
NEUTRAL_OK = {
    "data_plane.backend", "distillation.val_batch_size", "dpo.val_global_batch_size",
    "dpo.val_micro_batch_size", "grpo.async_grpo.recompute_kv_cache_after_weight_updates",
    "grpo.val_batch_size", "policy.activation_checkpointing_enabled",
    D + "lora_cfg.alpha", D + "lora_cfg.dropout", D + "lora_cfg.dropout_position",
    D + "lora_cfg.lora_A_init", D + "lora_cfg.use_triton",
    P + "dynamic_batching.sequence_length_round",
    V + "distributed_executor_backend", P + "make_sequence_length_divisible_by",
    P + "sequence_packing.algorithm", P + "sequence_packing.sequence_length_round",
    "ppo.val_batch_size", "rm.val_global_batch_size", "rm.val_micro_batch_size",
    "sft.val_global_batch_size", "sft.val_micro_batch_size"}
NEUTRAL_HINT = ("val_", "seed", "lr", "log", "metric", "checkpoint", "name", "path", "port",
                "temperature", "top_")


def corpus_keys() -> set:
    from memlint.adapters import nemo_rl

    keys = set()
    for folder, _dirs, names in os.walk(CORPUS):
        for name in sorted(names):
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as handle:
                partial = nemo_rl.load(path, handle.read())
            keys |= {k[len("nemo_rl."):] for k in partial.extra if k.startswith("nemo_rl.")}
    return keys


def main() -> None:
    from memlint.adapters.nemo_rl_mapping import OPEN

    keys = corpus_keys() | set(MODELED) | set(NOT_MODELED)
    neutral, part_of, suspect = [], dict(PART_OF), []
    blocks = {P + "megatron_cfg.": P + "megatron_cfg.enabled", "value.": "value.model_name",
              "teacher.": "teacher.model_name",
              G + "sglang_cfg.": G + "sglang_cfg.mem_fraction_static",
              G + "mcore_generation_config.": G + "mcore_generation_config.buffer_size_gb",
              P + "draft.": P + "draft.enabled",
              P + "reward_model_cfg.": P + "reward_model_cfg.enabled"}
    for key in sorted(keys):
        if key in MODELED or key in NOT_MODELED:
            continue
        parent = next((v for k, v in blocks.items() if key.startswith(k)), None)
        if parent is not None:
            part_of[key] = parent
        elif key.startswith(OPEN) or key in NEUTRAL_OK or not SUSPECT.search(key):
            neutral.append(key)
        else:
            suspect.append(key)
    data = {"_about": "Memory class of every key of NeMo-RL v0.7.0's corpus configs, written by "
                      "tools/nemo_rl_coverage.py; memlint/adapters/nemo_rl_mapping.py reads the "
                      "modeled ones and records each composed key as extra nemo_rl.<key>.",
            "framework": "nemo_rl", "namespace": "nemo_rl.", "key_prefix": "", "source": S.strip(),
            "modeled": {k: MODELED[k] for k in sorted(MODELED)},
            "not_modeled": {k: NOT_MODELED[k] for k in sorted(NOT_MODELED)},
            "part_of": dict(sorted(part_of.items())), "neutral": neutral}
    if suspect:
        raise SystemExit("class these by hand (MODELED, NOT_MODELED or NEUTRAL_OK): "
                         + ", ".join(suspect))
    with open(OUT + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, ensure_ascii=False)
        handle.write("\n")
    os.replace(OUT + ".tmp", OUT)
    print(f"{OUT}: {len(MODELED)} modeled, {len(NOT_MODELED)} not modeled, {len(part_of)} part "
          f"of, {len(neutral)} neutral")


if __name__ == "__main__":
    main()
