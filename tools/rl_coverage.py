"""Dev-only: write the coverage tables of the RL readers (memlint/facts/coverage/verl.json,
openrlhf.json, trl.json) from the keys each reader knows and the classes below.

    python tools/rl_coverage.py

verl: every key of verl v0.7.0's composed configs (memlint/facts/verl_defaults.json); OpenRLHF:
every argument of its entry points at v0.9.9 and v0.11.0 (memlint/facts/openrlhf_args.json,
v0.11.0's dotted names under their v0.9.9 names where the adapter renames them); TRL: the
GRPO/DPO/KTO/ORPO/reward arguments memlint/adapters/trl_rl.py reads. Classes: MODELED (what the
mapping reads, with the components its scenario keys change), NOT_MODELED (memory the estimate
does not count, with its direction and the framework's code), PART_OF, and neutral for the rest.
A key whose name looks memory-related (SUSPECT) must be classed explicitly: the tool refuses to
call it neutral by default.
"""
from __future__ import annotations

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
FACTS = os.path.join(ROOT, "memlint", "facts")
OUT = os.path.join(FACTS, "coverage")
ALL = ["weights", "gradients", "optimizer", "activations", "logits"]
STATES = ["weights", "gradients", "optimizer"]
SEQ = ["activations", "logits"]
ENGINE = ["weights", "activations", "buffers", "runtime"]
SUSPECT = re.compile(r"offload|dtype|micro_batch|max_token|tensor_model|tensor_parallel|pipeline|"
                     r"expert|context_parallel|sequence_parallel|ulysses|checkpointing|lora|"
                     r"tiled|fused|liger|recompute|compile|cudagraph|quant|fsdp_size|reshard|"
                     r"prefetch|zero|sleep|gpu|nodes|colocate|packing|max_len|length|"
                     r"remove_padding|dynamic|entropy|memory|enforce|ring|strategy|optim|pretrain|"
                     r"path$|attn|adam|muon|4bit|param|grad_accum|overlap|bucket|batch_size")


def cls(direction, effect, off=None, when=None, bound=None, scope=None, requires=None):
    entry = {"direction": direction, "effect": effect}
    if off is not None:
        entry["off"] = off
    if when is not None:
        entry["when"] = when
    if bound:
        entry["bound"] = bound
    if scope:
        entry["scope"] = scope
    if requires:
        entry["requires"] = requires
    return entry


# ---------------------------------------------------------------------------------------------
# verl v0.7.0

AR = "actor_rollout_ref."
V = "volcengine/verl@f9c855f7 (v0.7.0) "
VERL_MODELED = {
    AR + "actor.calculate_entropy": ["logits"],
    AR + "actor.entropy_coeff": ["logits"],
    AR + "actor.entropy_from_logits_with_chunking": ["logits"],
    AR + "actor.fsdp_config.fsdp_size": STATES + ["buffers"],
    AR + "actor.fsdp_config.model_dtype": ALL,
    AR + "actor.fsdp_config.offload_policy": STATES + ["host"],
    AR + "actor.fsdp_config.optimizer_offload": ["optimizer", "host"],
    AR + "actor.fsdp_config.param_offload": ["weights", "host"],
    AR + "actor.fsdp_config.reshard_after_forward": ["buffers"],
    AR + "actor.megatron.context_parallel_size": ALL,
    AR + "actor.megatron.expert_model_parallel_size": STATES,
    AR + "actor.megatron.expert_tensor_parallel_size": STATES,
    AR + "actor.megatron.optimizer_offload": ["optimizer", "host"],
    AR + "actor.megatron.override_transformer_config.recompute_granularity": ["activations"],
    AR + "actor.megatron.param_offload": ["weights", "host"],
    AR + "actor.megatron.pipeline_model_parallel_size": ALL,
    AR + "actor.megatron.sequence_parallel": ["activations"],
    AR + "actor.megatron.tensor_model_parallel_size": ALL,
    AR + "actor.megatron.use_distributed_optimizer": ["optimizer"],
    AR + "actor.megatron.use_remove_padding": SEQ,
    AR + "actor.megatron.virtual_pipeline_model_parallel_size": ["activations"],
    AR + "actor.optim.override_optimizer_config.optimizer_cpu_offload": ["optimizer", "host"],
    AR + "actor.ppo_max_token_len_per_gpu": SEQ,
    AR + "actor.ppo_micro_batch_size": SEQ,
    AR + "actor.ppo_micro_batch_size_per_gpu": SEQ,
    AR + "actor.ppo_mini_batch_size": ["gradients"],
    AR + "actor.strategy": ALL,
    AR + "actor.ulysses_sequence_parallel_size": SEQ,
    AR + "actor.use_dynamic_bsz": SEQ,
    AR + "actor.use_kl_loss": ["weights", "activations", "logits"],
    AR + "hybrid_engine": ENGINE,
    AR + "model.enable_activation_offload": ["activations", "host"],
    AR + "model.enable_gradient_checkpointing": ["activations"],
    AR + "model.lora_rank": STATES,
    AR + "model.override_config": ["activations"],
    AR + "model.path": ALL,
    AR + "model.target_modules": STATES,
    AR + "model.use_fused_kernels": ["logits"],
    AR + "model.use_remove_padding": SEQ,
    AR + "ref.fsdp_config.param_offload": ["weights", "host"],
    AR + "ref.fsdp_config.model_dtype": ["weights", "host"],
    AR + "ref.log_prob_micro_batch_size_per_gpu": SEQ,
    AR + "ref.megatron.param_offload": ["weights", "host"],
    AR + "rollout.checkpoint_engine.update_weights_bucket_megabytes": ["buffers"],
    AR + "rollout.data_parallel_size": ENGINE,
    AR + "rollout.dtype": ENGINE,
    AR + "rollout.enforce_eager": ["runtime"],
    AR + "rollout.engine_kwargs.sglang.kv_cache_dtype": ["buffers"],
    AR + "rollout.engine_kwargs.vllm.kv_cache_dtype": ["buffers"],
    AR + "rollout.expert_parallel_size": ENGINE,
    AR + "rollout.free_cache_engine": ENGINE + ["host"],
    AR + "rollout.gpu_memory_utilization": ENGINE,
    AR + "rollout.layered_summon": ENGINE + ["host"],
    AR + "rollout.log_prob_max_token_len_per_gpu": SEQ,
    AR + "rollout.log_prob_micro_batch_size_per_gpu": SEQ,
    AR + "rollout.log_prob_use_dynamic_bsz": SEQ,
    AR + "rollout.max_model_len": ["buffers"],
    AR + "rollout.max_num_batched_tokens": ["activations", "buffers"],
    AR + "rollout.max_num_seqs": ["activations", "buffers"],
    AR + "rollout.n": SEQ,
    AR + "rollout.name": ENGINE,
    AR + "rollout.quantization": ["weights", "buffers"],
    AR + "rollout.tensor_model_parallel_size": ENGINE,
    AR + "rollout.update_weights_bucket_megabytes": ["buffers"],
    "algorithm.adv_estimator": ALL,
    "algorithm.use_kl_in_reward": ["weights", "activations", "logits"],
    "critic.enable": ALL,
    "critic.forward_micro_batch_size_per_gpu": SEQ,
    "critic.model.enable_gradient_checkpointing": ["activations"],
    "critic.model.fsdp_config.optimizer_offload": ["optimizer", "host"],
    "critic.model.fsdp_config.param_offload": ["weights", "host"],
    "critic.model.path": ALL,
    "critic.ppo_micro_batch_size_per_gpu": SEQ,
    "data.max_prompt_length": SEQ + ["buffers"],
    "data.max_response_length": SEQ + ["buffers"],
    "data.train_batch_size": SEQ + ["buffers"],
    "reward_model.enable": ["weights", "activations"],
    "reward_model.enable_resource_pool": ["weights", "activations"],
    "reward_model.micro_batch_size_per_gpu": SEQ,
    "reward_model.model.fsdp_config.param_offload": ["weights", "host"],
    "reward_model.model.path": ["weights", "activations"],
    "reward_model.n_gpus_per_node": ["weights", "activations"],
    "reward_model.nnodes": ["weights", "activations"],
    "trainer.n_gpus_per_node": STATES + ["host"],
    "trainer.nnodes": STATES + ["host"],
}

_ROLE_LAYOUT = ("the role's own layout; memlint lays it out as the actor's ({})")
_DUP = "a duplicate of {} for the new engine workers (trainer.use_legacy_worker_impl); memlint reads {}"


def _verl_not_modeled() -> dict:
    out = {}
    fsdp_sub = {
        "dtype": cls("low", "the FSDP compute dtype (mixed precision param_dtype); memlint "
                     "computes in bf16 (" + V + "workers/fsdp_workers.py)",
                     off=["bfloat16", "bf16", "float16", "fp16"]),
        "forward_prefetch": cls("low", "FSDP forward prefetch: the next unit is gathered while "
                                "one computes (torch FSDP forward_prefetch)", off=["false"]),
        "wrap_policy.min_num_params": cls("either", "FSDP units of at least this many "
                                          "parameters instead of one per decoder layer: the size "
                                          "of a gathered unit", off=["0"]),
        "entropy_checkpointing": cls("high", "the entropy recomputed in backward instead of its "
                                     "softmax kept (" + V + "workers/actor/dp_actor.py)",
                                     off=["false"]),
        "entropy_from_logits_with_chunking": cls("high", "entropy over chunks of the logits: "
                                                 "smaller temporaries (" + V
                                                 + "utils/torch_functional.py)", off=["false"]),
        "ulysses_sequence_parallel_size": cls("either", "sequence parallel size of the new "
                                              "engine workers", off=["1"]),
        "strategy": cls("either", "fsdp or fsdp2 for the new engine workers", off=["fsdp"]),
        "use_torch_compile": cls("low", "eager log-prob and entropy functions (torch.compile off):"
                                 " their temporaries are not fused (" + V
                                 + "workers/actor/dp_actor.py)", when=["false", "False"]),
        "fsdp_size": cls("either", _ROLE_LAYOUT.format("the actor's fsdp_size"), off=["-1"]),
        "model_dtype": cls("either", "the role's parameter dtype; memlint uses the actor's",
                           off=["fp32"]),
        "reshard_after_forward": cls("either", "the role's FSDP resharding; memlint uses the "
                                     "actor's", off=["true"]),
        "offload_policy": cls("high", "FSDP2 CPUOffloadPolicy for the role: its parameters on "
                              "the host", off=["false"]),
    }
    neutral_fsdp = ("forward_only", "full_determinism", "seed", "use_orig_params",
                    "optimizer_offload")
    roles = {AR + "actor.fsdp_config.": ("dtype", "forward_prefetch", "wrap_policy.min_num_params",
                                         "entropy_checkpointing",
                                         "entropy_from_logits_with_chunking",
                                         "ulysses_sequence_parallel_size", "strategy",
                                         "use_torch_compile"),
             AR + "ref.fsdp_config.": ("dtype", "forward_prefetch", "wrap_policy.min_num_params",
                                       "fsdp_size", "reshard_after_forward",
                                       "offload_policy", "ulysses_sequence_parallel_size",
                                       "strategy"),
             "critic.model.fsdp_config.": ("dtype", "forward_prefetch",
                                           "wrap_policy.min_num_params", "fsdp_size",
                                           "model_dtype", "reshard_after_forward",
                                           "offload_policy", "ulysses_sequence_parallel_size",
                                           "strategy", "use_torch_compile"),
             "reward_model.model.fsdp_config.": ("forward_prefetch", "wrap_policy.min_num_params",
                                                 "fsdp_size", "reshard_after_forward")}
    for prefix, names in roles.items():
        for name in names:
            out[prefix + name] = fsdp_sub[name]
    megatron = {
        "dtype": cls("low", "the Megatron compute dtype; memlint computes in bf16",
                     off=["bfloat16", "bf16"]),
        "grad_offload": cls("high", "gradients moved to the host between passes (" + V
                            + "workers/megatron_workers.py)", off=["false"], scope=None),
        "override_ddp_config": cls("either", "Megatron DDP settings (bucket sizes, overlap)",
                                   off=["{}"]),
        "override_mcore_model_config": cls("either", "Megatron model settings", off=["{}"]),
        "override_transformer_config.attention_backend": cls(
            "either", "the attention kernel (memlint assumes flash)", off=["flash"]),
        "override_transformer_config.recompute_method": cls(
            "either", "uniform or block recompute of recompute_num_layers layers", off=["null"]),
        "override_transformer_config.recompute_modules": cls(
            "either", "which modules selective recompute recomputes", off=['["core_attn"]',
                                                                         "core_attn"]),
        "override_transformer_config.recompute_num_layers": cls(
            "either", "how many layers are recomputed", off=["null"]),
    }
    for prefix in (AR + "actor.megatron.", AR + "ref.megatron.", "critic.megatron.",
                   "reward_model.megatron."):
        for name, entry in megatron.items():
            out[prefix + name] = entry
    layout = ("context_parallel_size", "expert_model_parallel_size",
              "expert_tensor_parallel_size", "pipeline_model_parallel_size", "sequence_parallel",
              "tensor_model_parallel_size", "virtual_pipeline_model_parallel_size",
              "use_remove_padding")
    for prefix in (AR + "ref.megatron.", "critic.megatron.", "reward_model.megatron."):
        for name in layout:
            out[prefix + name] = cls("either", _ROLE_LAYOUT.format("actor.megatron." + name))
    out[AR + "ref.megatron.override_transformer_config"] = cls(
        "either", "the reference's transformer settings (default: the actor's)")
    out["reward_model.megatron.override_transformer_config"] = cls(
        "either", "the reward model's transformer settings (default: the actor's)")
    for role in ("critic", "reward_model"):
        out[f"{role}.megatron.param_offload"] = cls(
            "high", f"the {role}'s Megatron parameters on the host between passes",
            off=["false"])
    out["critic.megatron.optimizer_offload"] = cls(
        "high", "the critic's Megatron optimizer states on the host between updates",
        off=["false"])
    out["critic.megatron.use_distributed_optimizer"] = cls(
        "either", "the critic's optimizer sharding (memlint uses the actor's)", off=["true"])
    for role, path in ((AR + "model.", "actor"), ("critic.model.", "critic")):
        out[role + "tiled_mlp.enabled"] = cls(
            "high", "the MLP computed in shards: smaller intermediate activations (" + V
            + "utils/tiled_mlp.py)", off=["false"])
        out[role + "lora.rank"] = cls(
            "high", f"LoRA on the Megatron {path} (model.lora.*): adapters only trained",
            off=["0"])
        out[role + "override_config.model_config"] = cls("either", "HF config overrides",
                                                         off=["{}"])
        out[role + "override_config.moe_config.freeze_moe_router"] = cls(
            "high", "the MoE router frozen: no gradients or states for it", off=["false"])
    out[AR + "model.use_liger"] = cls("high", "Liger kernels patched in (RMSNorm, SwiGLU, RoPE):"
                                      " fewer saved activations", off=["false"])
    out[AR + "model.exclude_modules"] = cls("either", "modules LoRA leaves out", off=["null"])
    out[AR + "actor.freeze_vision_tower"] = cls("high", "the vision tower frozen: no gradients "
                                                "or states for it", off=["false"])
    out[AR + "actor.use_fused_kernels"] = cls("either", _DUP.format(
        "model.use_fused_kernels", "model.use_fused_kernels"))
    out[AR + "actor.use_remove_padding"] = cls("either", _DUP.format(
        "model.use_remove_padding", "model.use_remove_padding"))
    out[AR + "actor.entropy_checkpointing"] = fsdp_sub["entropy_checkpointing"]
    out[AR + "actor.use_torch_compile"] = fsdp_sub["use_torch_compile"]
    for key in ("log_prob_max_token_len_per_gpu", "log_prob_use_dynamic_bsz"):
        out[AR + "ref." + key] = cls("either", "the reference pass's own token budget; memlint "
                                     "uses the rollout's log_prob settings")
    out[AR + "ref.log_prob_micro_batch_size"] = cls("either", "the global (deprecated) micro "
                                                    "batch of the reference pass", off=["null"])
    out[AR + "ref.strategy"] = cls("either", _ROLE_LAYOUT.format("actor.strategy"))
    out[AR + "ref.ulysses_sequence_parallel_size"] = cls(
        "either", _ROLE_LAYOUT.format("actor.ulysses_sequence_parallel_size"))
    out[AR + "rollout.cudagraph_capture_sizes"] = cls(
        "either", "the batch sizes vLLM captures CUDA graphs for: the graph pool's size",
        off=["null"])
    out[AR + "rollout.engine_kwargs.sglang"] = cls("either", "other SGLang engine arguments",
                                                   off=["{}"])
    out[AR + "rollout.engine_kwargs.vllm"] = cls("either", "other vLLM engine arguments",
                                                 off=["{}"])
    out[AR + "rollout.log_prob_micro_batch_size"] = cls(
        "either", "the global (deprecated) micro batch of the log-prob pass", off=["null"])
    out[AR + "rollout.pipeline_model_parallel_size"] = cls(
        "low", "the engine's pipeline parallel size (memlint's engine runs tp only here)",
        off=["1"])
    out[AR + "rollout.quantization_config_file"] = cls(
        "either", "the engine's quantization config file", off=["null"])
    out[AR + "rollout.prompt_length"] = cls("either", "the rollout's prompt length (default: "
                                            "data.max_prompt_length, which memlint reads)")
    out[AR + "rollout.response_length"] = cls("either", "the rollout's response length "
                                              "(default: data.max_response_length, which "
                                              "memlint reads)")
    for key in ("forward_max_token_len_per_gpu", "ppo_max_token_len_per_gpu", "use_dynamic_bsz",
                "ppo_mini_batch_size"):
        out["critic." + key] = cls("either", "the critic's own batching; memlint uses its "
                                   "micro batch sizes, or the actor's budget with "
                                   "use_dynamic_bsz")
    for key in ("forward_micro_batch_size", "ppo_micro_batch_size"):
        out["critic." + key] = cls("either", "the critic's global (deprecated) micro batch",
                                   off=["null"])
    out["critic.model.enable_activation_offload"] = cls(
        "high", "the critic's activations offloaded to the host", off=["false"])
    out["critic.model.lora_rank"] = cls("high", "LoRA on the critic: adapters only trained",
                                        off=["0"])
    out["critic.model.override_config"] = cls("either", "HF config overrides of the critic",
                                              off=["{}"])
    out["critic.model.use_remove_padding"] = cls("either", "the critic's padding removal "
                                                 "(memlint uses the actor's)", off=["false"])
    out["critic.strategy"] = cls("either", _ROLE_LAYOUT.format("actor.strategy"),
                                 off=["fsdp"])
    out["critic.ulysses_sequence_parallel_size"] = cls(
        "either", _ROLE_LAYOUT.format("actor.ulysses_sequence_parallel_size"), off=["1"])
    out["reward_model.forward_max_token_len_per_gpu"] = cls(
        "either", "the reward model's token budget per pass")
    out["reward_model.max_length"] = cls("either", "the reward model's input length",
                                         off=["null"])
    out["reward_model.micro_batch_size"] = cls("either", "the reward model's global "
                                               "(deprecated) micro batch", off=["null"])
    out["reward_model.model.use_fused_kernels"] = cls("either", "the reward model's fused "
                                                      "kernels (default: the actor's)")
    out["reward_model.model.use_remove_padding"] = cls("either", "the reward model's padding "
                                                       "removal", off=["false"])
    out["reward_model.model.override_config"] = cls("either", "HF config overrides of the "
                                                    "reward model", off=["{}"])
    for role in (AR + "actor.", "critic."):
        out[role + "optim.optimizer"] = cls(
            "either", "an optimizer other than AdamW: other states (memlint counts AdamW's two "
            "fp32 moments)", off=["AdamW", "adamw"])
        out[role + "optim.optimizer_impl"] = cls("either", "the optimizer's module",
                                                 off=["torch.optim"])
        out[role + "optim.override_optimizer_config"] = cls(
            "either", "Megatron optimizer overrides", off=["null", "{}"])
        out[role + "checkpoint.async_save"] = cls(
            "low", "asynchronous checkpoint saving: a host copy of the states while it writes",
            off=["false"], scope="host")
    out["critic.megatron.override_transformer_config.recompute_granularity"] = cls(
        "either", "the critic's Megatron recompute (memlint uses critic.model."
        "enable_gradient_checkpointing)", off=["null"])
    out["reward_model.rollout.name"] = cls(
        "low", "a generative reward model served by an engine of its own (reward_model.rollout,"
        " the reward loop): that engine's budget is not counted", off=["???"])
    out["reward_model.strategy"] = cls("either", _ROLE_LAYOUT.format("actor.strategy"),
                                       off=["fsdp"])
    out["reward_model.ulysses_sequence_parallel_size"] = cls(
        "either", "the reward model's sequence parallel size", off=["1"])
    out["reward_model.use_dynamic_bsz"] = cls("either", "the reward model's packed batches")
    return out


VERL_PART_OF = {}
for _role in (AR + "model.", "critic.model."):
    for _name in ("lora.a2a_experimental", "lora.adapter_path", "lora.alpha", "lora.dropout",
                  "lora.dropout_position", "lora.dtype", "lora.exclude_modules",
                  "lora.freeze_language_model", "lora.freeze_vision_model",
                  "lora.freeze_vision_projection", "lora.lora_A_init_method",
                  "lora.lora_B_init_method", "lora.target_modules", "lora.type"):
        VERL_PART_OF[_role + _name] = _role + "lora.rank"
    VERL_PART_OF[_role + "tiled_mlp.num_shards"] = _role + "tiled_mlp.enabled"
VERL_PART_OF["critic.model.target_modules"] = "critic.model.lora_rank"

# memory-looking names that change nothing memlint could count (at v0.7.0)
VERL_NEUTRAL = {
    AR + "actor.rollout_n", AR + "ref.rollout_n", "critic.rollout_n",
    AR + "actor.megatron.use_mbridge", AR + "actor.megatron.vanilla_mbridge",
    AR + "ref.megatron.use_mbridge", AR + "ref.megatron.vanilla_mbridge",
    "critic.megatron.use_mbridge", "critic.megatron.vanilla_mbridge",
    "reward_model.megatron.use_mbridge", "reward_model.megatron.vanilla_mbridge",
    AR + "ref.megatron.use_distributed_optimizer", "reward_model.megatron.use_distributed_optimizer",
    AR + "ref.megatron.optimizer_offload", AR + "ref.megatron.grad_offload",
    AR + "ref.fsdp_config.optimizer_offload", AR + "ref.use_torch_compile",
    AR + "ref.entropy_checkpointing", AR + "ref.entropy_from_logits_with_chunking",
    AR + "ref.fsdp_config.entropy_checkpointing",
    AR + "ref.fsdp_config.entropy_from_logits_with_chunking",
    "critic.model.fsdp_config.entropy_checkpointing",
    "critic.model.fsdp_config.entropy_from_logits_with_chunking",
    AR + "model.fused_kernel_options.impl_backend", AR + "model.lora_adapter_path",
    AR + "model.lora_alpha", "critic.model.lora_alpha", AR + "model.hf_config_path",
    AR + "model.tokenizer_path", "critic.model.tokenizer_path",
    AR + "rollout.multi_stage_wake_up",   # fsdp_workers.py rollout_mode wakes weights first
    AR + "rollout.enable_chunked_prefill", AR + "rollout.enable_prefix_caching",
    AR + "rollout.calculate_log_probs", AR + "rollout.skip_tokenizer_init",
    AR + "rollout.load_format", AR + "rollout.logprobs_mode",
    "data.val_batch_size", "data.max_prompt_length_raw",
    "trainer.use_legacy_worker_impl", "trainer.device",
    AR + "actor.fsdp_config.use_orig_params", AR + "ref.fsdp_config.use_orig_params",
    "critic.model.fsdp_config.use_orig_params", AR + "ref.fsdp_config.use_torch_compile",
} | {f"{role}.megatron.{name}" for role in (AR + "actor", AR + "ref", "critic", "reward_model")
     for name in ("dist_checkpointing_prefix", "use_dist_checkpointing")}


def verl_table() -> dict:
    with open(os.path.join(FACTS, "verl_defaults.json"), encoding="utf-8") as handle:
        data = json.load(handle)
    keys = set()
    for config in data["configs"].values():
        keys |= set(config["keys"])
    not_modeled = _verl_not_modeled()
    part_of = dict(VERL_PART_OF)
    for key in keys:
        if key.startswith("reward_model.rollout.") and key != "reward_model.rollout.name":
            part_of[key] = "reward_model.rollout.name"
    return _table("verl", "verl.", "", f"volcengine/verl@{data['commit'][:8]} (v{data['version']})",
                  keys, VERL_MODELED, not_modeled, part_of, VERL_NEUTRAL,
                  "Memory class of every key of verl v0.7.0's composed trainer configs "
                  "(memlint/facts/verl_defaults.json), written by tools/rl_coverage.py: "
                  "'modeled' keys are read by memlint/adapters/verl_mapping.py, 'not_modeled' "
                  "ones change memory memlint does not count (direction: which way the estimate "
                  "errs), 'part_of' refine a not-modeled parent, 'neutral' keys do not change a "
                  "step's memory (schedules, losses, logging, data, checkpoint paths). The "
                  "adapter records each key a file sets as extra verl.<key>.")


# ---------------------------------------------------------------------------------------------
# OpenRLHF (v0.9.9 names; v0.11.0's dotted ones where the adapter does not rename them)

O = "OpenRLHF/OpenRLHF (v0.9.9/v0.11.0) "
OPENRLHF_MODELED = {
    "actor_num_gpus_per_node": STATES + ["host"], "actor_num_nodes": STATES + ["host"],
    "adam_offload": ["optimizer", "host"], "advantage_estimator": ALL,
    "attn_implementation": ["activations"], "flash_attn": ["activations"],
    "beta": ["weights", "activations", "logits"], "bf16": ALL, "param_dtype": ALL + ENGINE,
    "colocate_actor_ref": ["weights", "activations"], "colocate_all_models": ENGINE,
    "colocate_critic_reward": ["weights", "activations"],
    "critic_pretrain": ALL, "deepspeed_enable_sleep": STATES + ["host"],
    "ds_tensor_parallel_size": ALL, "enforce_eager": ["runtime"], "entropy_loss_coef": ["logits"],
    "generate_max_len": SEQ + ["buffers"], "max_new_tokens": SEQ + ["buffers"],
    "gradient_checkpointing": ["activations"], "init_kl_coef": ["weights", "activations"],
    "use_kl_loss": ["weights", "activations"], "lora_rank": STATES, "target_modules": STATES,
    "max_len": SEQ, "micro_rollout_batch_size": SEQ, "micro_train_batch_size": SEQ,
    "n_samples_per_prompt": SEQ, "packing_samples": SEQ, "pretrain": ALL,
    "prompt_max_len": SEQ + ["buffers"], "ref_num_gpus_per_node": ["weights"],
    "ref_num_nodes": ["weights"], "ref_offload": ["weights", "host"],
    "ref_reward_offload": ["weights", "host"], "remote_rm_url": ["weights", "activations"],
    "reward_num_gpus_per_node": ["weights"], "reward_num_nodes": ["weights"],
    "reward_pretrain": ["weights", "activations"], "ring_attn_size": SEQ,
    "rollout_batch_size": SEQ + ["buffers"], "rollout_max_tokens_per_gpu": SEQ,
    "target_modules ": STATES, "train_batch_size": ["gradients"],
    "train_max_tokens_per_gpu": SEQ, "use_dynamic_batch": SEQ,
    "vllm_enable_sleep": ENGINE + ["host"], "vllm_gpu_memory_utilization": ENGINE,
    "vllm_num_engines": ENGINE, "vllm_tensor_parallel_size": ENGINE, "zero_stage": STATES,
    "critic_num_gpus_per_node": STATES,
    "max_new_tokens": SEQ + ["buffers"],
    "critic_num_nodes": STATES,
}
OPENRLHF_NOT_MODELED = {
    "actor_init_on_gpu": cls("low", "the actor built on the GPU before DeepSpeed shards it "
                             "(a whole copy at start-up)", off=["false"]),
    "grad_accum_dtype": cls("either", "DeepSpeed's gradient accumulation dtype "
                            "(data_types.grad_accum_dtype)", off=["null", "None"]),
    "overlap_comm": cls("low", "DeepSpeed overlap_comm: larger communication buckets",
                        off=["false"]),
    "zpg": cls("either", "ZeRO++ hierarchical partition size (zero_hpz_partition_size)",
               off=["1"]),
    "deepcompile": cls("either", "DeepSpeed's compiler (deepcompile)", off=["false"]),
    "use_liger_kernel": cls("high", "Liger kernels: fused cross-entropy and fewer saved "
                            "activations", off=["false"]),
    "ring_head_stride": cls("either", "ring attention head stride", off=["1"]),
    "vllm_sync_backend": cls("either", "the weight-sync backend (nccl or gloo)",
                             off=["nccl"]),
    "vllm_generate_batch_size": cls("either", "prompts sent to the engines at once"),
    "enable_prefix_caching": cls("either", "vLLM prefix caching", off=["false"]),
    "freeze_visual_encoder": cls("high", "the vision encoder frozen: no gradients or states",
                                 off=["false"]),
    "compute_fp32_loss": cls("low", "the DPO loss in fp32: fp32 logits", off=["false"]),
    "enable_ema": cls("low", "an EMA copy of the actor", off=["false"]),
    "save_value_network": cls("either", "the value network saved with the checkpoint",
                              off=["false"], scope="host"),
    "experts_implementation": cls("either", "the MoE experts' kernel"),
    "optim": cls("either", "Muon instead of AdamW: one moment (memlint counts AdamW)",
                 off=["adam", "adamw", "AdamW"]),
    "partial_rollout": cls("either", "rollouts carried across steps", off=["false"]),
    "async_train": cls("either", "asynchronous training: rollouts overlap updates",
                       off=["false"]),
    "async_queue_size": cls("either", "rollouts queued for asynchronous training"),
    "max_ckpt_mem": cls("either", "checkpoints kept on disk", scope="host"),
    "use_ds_universal_ckpt": cls("either", "DeepSpeed universal checkpoints", off=["false"],
                                 scope="host"),
    "value_head_prefix": None,
    "ref_pretrain": cls("either", "a reference model other than the policy: memlint counts a "
                        "copy of the policy"),
    "ref.model_name_or_path": cls("either", "a reference model other than the policy: memlint "
                                  "counts a copy of the policy"),
    "load_in_4bit": cls("high", "the base model loaded in 4 bits (QLoRA): memlint counts it in "
                        "16 bits", off=["false"]),
    "dynamic_filtering": cls("either", "prompts whose samples all score alike are dropped and "
                             "more are generated", off=["false"]),
    "experts_implementation": cls("either", "the MoE experts' kernel"),
}
OPENRLHF_PART_OF: dict = {}
OPENRLHF_NEUTRAL = {"value_head_prefix", "max_ckpt_num", "disable_ds_ckpt", "save_hf_ckpt",
                    "ckpt_path", "load_checkpoint", "save_path", "save_steps",
                    "gradient_checkpointing_use_reentrant", "vllm_sync_with_ray",
                    "max_samples", "train_split", "eval_split", "prompt_split", "dataset_split",
                    "micro_batch_size", "train.micro_batch_size", "rollout.micro_batch_size",
                    "vllm_is_truncated_threshold", "vllm_is_correction_type",
                    "enable_vllm_is_correction", "dynamic_filtering_reward_range",
                    "overlong_buffer_len", "disable_fast_tokenizer", "max_epochs",
                    "eval_n_samples_per_prompt", "rollout.vllm_generate_batch_size",
                    "full_determinism", "ipo", "margin_loss", "nll_loss_coef",
                    "pretrain_mode", "ptx_coef", "aux_loss_coef", "label_smoothing",
                    "model.pretrain_mode_enable", "adam_betas",
                    "gradient_checkpointing_use_reentrant", "lora_alpha", "lora_dropout"}


def openrlhf_table() -> dict:
    from memlint.adapters.openrlhf_mapping import RENAMES

    with open(os.path.join(FACTS, "openrlhf_args.json"), encoding="utf-8") as handle:
        data = json.load(handle)
    keys = set()
    for version in data["versions"].values():
        for args in version["entry_points"].values():
            keys |= {RENAMES.get(name, name) for name in args}
    not_modeled = {k: v for k, v in OPENRLHF_NOT_MODELED.items() if v is not None}
    # v0.11.0 dotted names the adapter does not rename take the class of their v0.9.9 twin
    modeled, neutral = dict(OPENRLHF_MODELED), set(OPENRLHF_NEUTRAL)
    part_of = dict(OPENRLHF_PART_OF)
    for key in sorted(keys):
        if "." not in key:
            continue
        twin = key.rsplit(".", 1)[-1]
        for table in (modeled, not_modeled, part_of):
            if twin in table and key not in table:
                table[key] = table[twin]
        if twin in neutral:
            neutral.add(key)
    modeled.pop("target_modules ", None)
    return _table("openrlhf", "openrlhf.", "", "OpenRLHF/OpenRLHF v0.9.9 and v0.11.0",
                  keys, modeled, not_modeled, part_of, neutral,
                  "Memory class of every argument of OpenRLHF's train_ppo_ray / train_sft / "
                  "train_dpo / train_rm entry points at v0.9.9 and v0.11.0 "
                  "(memlint/facts/openrlhf_args.json; v0.11.0's dotted names under the v0.9.9 "
                  "names memlint/adapters/openrlhf_mapping.py RENAMES maps them to), written by "
                  "tools/rl_coverage.py. The adapter records each argument a script sets as "
                  "extra openrlhf.<name>.")


# ---------------------------------------------------------------------------------------------
# TRL (the RL and preference arguments memlint/adapters/trl_rl.py reads)

TRL_MODELED = {
    "use_vllm": ENGINE, "vllm_mode": ENGINE, "vllm_gpu_memory_utilization": ENGINE,
    "vllm_tensor_parallel_size": ENGINE, "vllm_max_model_length": ["buffers"],
    "vllm_enable_sleep_mode": ENGINE + ["host"], "num_generations": SEQ,
    "max_completion_length": SEQ + ["buffers"], "max_prompt_length": SEQ + ["buffers"],
    "steps_per_generation": SEQ, "beta": ["weights", "activations", "logits"],
    "precompute_ref_log_probs": ["weights", "activations", "logits"],
    "reference_free": ["weights", "activations", "logits"], "loss_type": ["weights", "logits"],
    "padding_free": SEQ,
}
TRL_NOT_MODELED = {
    "ds3_gather_for_generation": cls("low", "ZeRO-3 gathers the whole policy on every GPU to "
                                     "generate (trl/trainer/grpo_trainer.py "
                                     "unwrap_model_for_generation): a full copy while it "
                                     "generates", when=["true", "True"]),
    "vllm_model_impl": cls("either", "vLLM's model implementation (vllm or transformers)",
                           off=["vllm"]),
    "vllm_kv_cache_dtype": cls("either", "the KV cache dtype of the colocated engine",
                               off=["auto"]),
    "use_liger_loss": cls("high", "Liger's fused linear GRPO loss: no full logits",
                          off=["false"]),
    "generation_batch_size": cls("either", "sequences generated per step (memlint reads "
                                 "steps_per_generation)"),
    "sync_ref_model": cls("either", "the reference refreshed from the policy", off=["false"]),
    "ref_model_mixup_alpha": None,
    "vllm_enable_sleep_mode ": None,
}


def trl_table() -> dict:
    keys = set(TRL_MODELED) | {k for k, v in TRL_NOT_MODELED.items() if v is not None}
    not_modeled = {k: v for k, v in TRL_NOT_MODELED.items() if v is not None}
    return _table("trl", "trl.", "", "huggingface/trl@f2cd5771", keys, TRL_MODELED, not_modeled,
                  {}, set(), "Memory class of the GRPO / RLOO / DPO / KTO / ORPO / CPO / reward "
                  "arguments memlint/adapters/trl_rl.py reads (TRL at the commit named), written "
                  "by tools/rl_coverage.py; the TrainingArguments the HF Trainer reader reads are "
                  "classed there.")


# ---------------------------------------------------------------------------------------------
# EasyR1 (hiyouga/EasyR1@b44b311b)

E = "worker."
EASYR1_MODELED = {
    "algorithm.adv_estimator": ALL, "algorithm.disable_kl": ["weights", "activations", "logits"],
    "data.max_prompt_length": SEQ + ["buffers"], "data.max_response_length": SEQ + ["buffers"],
    "data.rollout_batch_size": SEQ + ["buffers"], "trainer.n_gpus_per_node": STATES + ["host"],
    "trainer.nnodes": STATES + ["host"], E + "hybrid_engine": ENGINE,
    E + "actor.dynamic_batching": SEQ, E + "actor.fsdp.enable_cpu_offload": STATES + ["host"],
    E + "actor.fsdp.enable_full_shard": STATES, E + "actor.fsdp.fsdp_size": STATES,
    E + "actor.fsdp.torch_dtype": ALL, E + "actor.global_batch_size": ["gradients"],
    E + "actor.micro_batch_size_per_device_for_experience": SEQ,
    E + "actor.micro_batch_size_per_device_for_update": SEQ,
    E + "actor.model.enable_gradient_checkpointing": ["activations"],
    E + "actor.model.lora.rank": STATES, E + "actor.model.lora.target_modules": STATES,
    E + "actor.model.model_path": ALL, E + "actor.offload.offload_optimizer": ["optimizer", "host"],
    E + "actor.offload.offload_params": ["weights", "host"], E + "actor.padding_free": SEQ,
    E + "actor.strategy": ALL, E + "actor.ulysses_size": SEQ,
    E + "critic.micro_batch_size_per_device_for_experience": SEQ,
    E + "critic.micro_batch_size_per_device_for_update": SEQ,
    E + "critic.model.enable_gradient_checkpointing": ["activations"],
    E + "critic.model.model_path": ALL, E + "critic.offload.offload_optimizer": ["optimizer", "host"],
    E + "critic.offload.offload_params": ["weights", "host"],
    E + "ref.fsdp.enable_cpu_offload": ["weights", "host"],
    E + "ref.offload.offload_params": ["weights", "host"], E + "ref.fsdp.torch_dtype": ["weights"],
    E + "rollout.dtype": ENGINE, E + "rollout.enforce_eager": ["runtime"],
    E + "rollout.gpu_memory_utilization": ENGINE, E + "rollout.max_model_len": ["buffers"],
    E + "rollout.max_num_batched_tokens": ["activations", "buffers"], E + "rollout.n": SEQ,
    E + "rollout.name": ENGINE, E + "rollout.tensor_parallel_size": ENGINE,
}
_ER = "hiyouga/EasyR1@b44b311b "
DEFAULTS_E1: dict = {}


def _easyr1_not_modeled() -> dict:
    global DEFAULTS_E1
    with open(os.path.join(FACTS, "easyr1_defaults.json"), encoding="utf-8") as handle:
        DEFAULTS_E1 = {k: v[0] for k, v in json.load(handle)["keys"].items()}
    out = {}
    for role in ("actor", "critic", "ref"):
        f = f"{E}{role}.fsdp."
        out[f + "mp_param_dtype"] = cls("low", "FSDP mixed precision's compute dtype (memlint "
                                        "computes in bf16)", off=["bf16", "bfloat16"])
        out[f + "mp_reduce_dtype"] = cls("either", "the gradient reduction dtype", off=["fp32"])
        out[f + "mp_buffer_dtype"] = cls("either", "the buffers' dtype", off=["fp32"])
        out[f + "enable_rank0_init"] = cls("low", "rank 0 loads the weights and broadcasts them "
                                           "(host RAM at start-up)", off=["true"], scope="host")
    for key in ("critic.fsdp.enable_cpu_offload", "critic.fsdp.enable_full_shard",
                "critic.fsdp.fsdp_size", "critic.fsdp.torch_dtype", "critic.padding_free",
                "critic.dynamic_batching", "critic.ulysses_size", "critic.global_batch_size",
                "critic.strategy", "ref.fsdp.enable_full_shard", "ref.fsdp.fsdp_size",
                "ref.strategy"):
        default = DEFAULTS_E1.get(E + key)
        out[E + key] = cls("either", "the role's own layout or batching; memlint uses the actor's",
                           off=None if default is None else [str(default).lower(), str(default)])
    out[E + "ref.offload.offload_optimizer"] = None
    for role in ("actor", "critic"):
        out[f"{E}{role}.optim.strategy"] = cls(
            "high", "adamw_bf16: bf16 Adam moments (memlint counts fp32)", off=["adamw"])
        out[f"{E}{role}.model.freeze_vision_tower"] = cls(
            "high", "the vision tower frozen: no gradients or states for it", off=["false"])
        out[f"{E}{role}.model.override_config"] = cls("either", "HF config overrides",
                                                      off=["{}"])
    out[E + "critic.model.lora.rank"] = cls("high", "LoRA on the critic", off=["0"])
    out[E + "actor.use_torch_compile"] = cls("low", "eager log-prob functions (torch.compile "
                                             "off)", when=["false", "False"])
    out[E + "rollout.limit_images"] = cls("either", "images per prompt the engine accepts "
                                          "(its encoder cache)", off=["0"])
    out[E + "rollout.enable_chunked_prefill"] = cls("either", "chunked prefill (vLLM V0 only)",
                                                    off=["false"])
    out["data.mini_rollout_batch_size"] = cls("either", "prompts generated per rollout call "
                                              "(default: the whole rollout batch)",
                                              off=["null", "None"])
    return {k: v for k, v in out.items() if v is not None}


EASYR1_NEUTRAL = {E + "actor.model.lora.alpha", E + "actor.model.lora.exclude_modules",
                  E + "critic.model.lora.alpha", E + "critic.model.lora.exclude_modules",
                  E + "critic.model.lora.target_modules", E + "ref.offload.offload_optimizer",
                  E + "actor.fsdp.use_orig_params", E + "critic.fsdp.use_orig_params",
                  E + "ref.fsdp.use_orig_params", E + "actor.model.tokenizer_path",
                  E + "critic.model.tokenizer_path", E + "rollout.disable_log_stats",
                  "data.filter_overlong_prompts", "data.filter_overlong_prompts_workers",
                  "data.min_pixels", "data.val_batch_size", "trainer.max_try_make_batch",
                  "trainer.save_model_only", "trainer.val_generations_to_log",
                  "algorithm.online_filtering", "data.max_pixels"}


def easyr1_table() -> dict:
    with open(os.path.join(FACTS, "easyr1_defaults.json"), encoding="utf-8") as handle:
        data = json.load(handle)
    return _table("easyr1", "easyr1.", "", f"hiyouga/EasyR1@{data['commit'][:8]}",
                  set(data["keys"]), EASYR1_MODELED, _easyr1_not_modeled(), {}, EASYR1_NEUTRAL,
                  "Memory class of every field of EasyR1's PPOConfig "
                  "(memlint/facts/easyr1_defaults.json), written by tools/rl_coverage.py; "
                  "memlint/adapters/easyr1_mapping.py reads the modeled ones and records each "
                  "key a file sets as extra easyr1.<key>.")


# ---------------------------------------------------------------------------------------------

def _table(framework, namespace, key_prefix, source, keys, modeled, not_modeled, part_of,
           neutral, about) -> dict:
    modeled = {k: v for k, v in modeled.items() if k in keys}
    not_modeled = {k: v for k, v in not_modeled.items() if k in keys and k not in modeled}
    part_of = {k: v for k, v in part_of.items() if k in keys and v in not_modeled}
    rest = keys - set(modeled) - set(not_modeled) - set(part_of)
    suspects = sorted(k for k in rest - set(neutral) if SUSPECT.search(k.rsplit(".", 1)[-1])
                      and not _plainly_neutral(k))
    if suspects:
        raise SystemExit(f"{framework}: class these explicitly (modeled, not modeled or "
                         f"VERL/OPENRLHF_NEUTRAL): {suspects}")
    return {"_about": about, "framework": framework, "namespace": namespace,
            "key_prefix": key_prefix, "source": source,
            "modeled": dict(sorted(modeled.items())),
            "not_modeled": dict(sorted(not_modeled.items())),
            "part_of": dict(sorted(part_of.items())), "neutral": sorted(rest)}


_NEUTRAL_PARTS = re.compile(r"(^|\.)(profiler|global_profiler|checkpoint|trainer|data|logger|"
                            r"wandb|eval|ckpt|prometheus|multi_turn|agent|val_kwargs|"
                            r"sandbox_fusion|reward_manager|custom_reward_function|ray_kwargs|"
                            r"policy_loss|kl_ctrl|rollout_correction|pf_ppo|algo|"
                            r"router_replay|trace|layer_name_map|lora_adapter|skip)(\.|$)")


def _plainly_neutral(key: str) -> bool:
    """Keys under sections that never hold memory settings (profilers, logging, data, losses)."""
    head = key.rsplit(".", 1)[0] if "." in key else ""
    if re.search(r"\boptim\.(lr|betas|clip_grad|min_lr|num_cycles|warmup|weight_decay|"
                 r"total_training|use_checkpoint|_target_|lr_)", key):
        return True
    if key.endswith(("_seed", ".seed", "learning_rate", "_lr", ".lr", "lr_scheduler",
                     "lr_warmup_ratio", "min_lr_ratio", "_path", "_dir", "_key", "_split")):
        return True
    return bool(_NEUTRAL_PARTS.search(head + ".")) and not key.endswith("async_save")


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    for name, build in (("verl", verl_table), ("openrlhf", openrlhf_table), ("trl", trl_table),
                        ("easyr1", easyr1_table)):
        table = build()
        with open(os.path.join(OUT, f"{name}.json"), "w", encoding="utf-8") as handle:
            json.dump(table, handle, indent=1, sort_keys=False)
            handle.write("\n")
        print(name, {k: len(v) for k, v in table.items() if isinstance(v, (dict, list))})


if __name__ == "__main__":
    main()
