"""What each RL framework does by convention that changes memory: one frozen record per framework.

The phase model (memory/rl/phases.py) reads only these records and the scenario's `rl.*` /
`engine.*` keys, never an adapter's spelling of a flag. Each field names the code it follows.
"""
from __future__ import annotations

from memlint.records import record

VERL = "volcengine/verl@f9c855f7 (v0.7.0)"
OPENRLHF = "OpenRLHF/OpenRLHF@3c3be62"
TRL = "huggingface/trl@f2cd5771"
EASYR1 = "hiyouga/EasyR1@b44b311b"
NEMO_RL = "NVIDIA-NeMo/RL@81aa43dd (v0.7.0)"


@record(frozen=True)
class RLConventions:
    name: str
    # bytes per logit element [tokens, vocab] alive at the peak of an update micro-batch's
    # backward, and of a no-grad log-prob pass; `entropy_*`: what computing the entropy adds
    update_logit_bytes: int
    pass_logit_bytes: int
    entropy_update_bytes: int
    entropy_pass_bytes: int
    logits_source: str
    # logits over the whole sequence (prompt + response) or the response only
    logits_over_prompt: bool
    # the trainer's processes per GPU when roles share GPUs: 1 (one fused worker) or one per role
    one_process_per_gpu: bool
    placement_source: str
    # the reference model's parameters live on the host whatever the config says
    reference_on_host: bool = False
    reference_source: str = ""
    # the old log-probs of the rollout are computed with the entropy (verl fsdp_workers.py
    # compute_log_prob: calculate_entropy=not is_lora)
    old_logprob_entropy: bool = False
    # an offloaded actor is back on the GPU while the engine's weights wake for the sync
    sync_loads_offloaded: bool = True
    # the reference is a host copy of the policy's parameter shards, copied into the policy's
    # own model for its pass: on the GPU its pass is the policy's; on the host one shard per rank
    reference_swapped_in: bool = False
    # the policy's log-prob pass runs with the whole model gathered (FSDP2 unshard) on each GPU
    logprob_unsharded: bool = False


CONVENTIONS = {
    "verl": RLConventions(
        "verl", update_logit_bytes=2, pass_logit_bytes=2, entropy_update_bytes=4,
        entropy_pass_bytes=4,
        logits_source=(f"{VERL} workers/actor/dp_actor.py _forward_micro_batch: bf16 logits "
                       "[tokens, vocab] divided in place, log-probs by flash-attn's cross_entropy_loss"
                       " with inplace_backward (utils/torch_functional.py logprobs_from_logits); "
                       "entropy_from_logits: softmax and softmax x logits, [tokens, vocab] each"),
        logits_over_prompt=True, one_process_per_gpu=True,
        placement_source=(f"{VERL} trainer/main_ppo.py: every role in the global resource pool, "
                          "fused into one worker process per GPU (create_colocated_worker_cls); "
                          "the vLLM engine runs inside it (vllm_rollout.py vLLMAsyncRollout)"),
        reference_on_host=True, old_logprob_entropy=True,
        # rollout_mode takes the state dict, offloads the model, then wakes the engine's weights
        # and sends one full tensor at a time (fsdp_workers.py; verl PR #2977)
        sync_loads_offloaded=False,
        reference_source=(f"{VERL} workers/fsdp_workers.py _build_model_optimizer: the reference "
                          "policy is wrapped with CPUOffload(offload_params=True) (FSDP) / "
                          "CPUOffloadPolicy (FSDP2)")),
    "openrlhf": RLConventions(
        "openrlhf", update_logit_bytes=10, pass_logit_bytes=6, entropy_update_bytes=8,
        entropy_pass_bytes=8,
        logits_source=(f"{OPENRLHF} openrlhf/models/actor.py forward: logits cast to fp32 "
                       "(4 B, the bf16 output freed), log_probs_from_logits with flash-attn's "
                       "cross_entropy_loss (models/utils.py); backward: the fp32 gradient and its "
                       "bf16 cast (4 + 2 B)"),
        logits_over_prompt=True, one_process_per_gpu=False,
        placement_source=(f"{OPENRLHF} openrlhf/cli/train_ppo_ray.py: one Ray actor per role "
                          "and GPU (actor, critic, reference, reward), vLLM engines in their own "
                          "processes; colocated roles share a placement group")),
    "trl": RLConventions(
        "trl", update_logit_bytes=6, pass_logit_bytes=2, entropy_update_bytes=4,
        entropy_pass_bytes=4,
        logits_source=(f"{TRL} trainer/grpo_trainer.py _get_per_token_logps_and_entropies: logits "
                       "of the completion tokens only (logits_to_keep), divided in place; "
                       "selective_log_softmax (trainer/utils.py) row by row, whose bf16 "
                       "log_softmax outputs autograd keeps (2 + 2 B), their gradient in backward"),
        logits_over_prompt=False, one_process_per_gpu=True,
        placement_source=(f"{TRL} trainer/grpo_trainer.py: vllm_mode colocate runs vLLM in the "
                          "training process; server mode on GPUs of its own (trl vllm-serve)")),
    "easyr1": RLConventions(
        "easyr1", update_logit_bytes=2, pass_logit_bytes=2, entropy_update_bytes=4,
        entropy_pass_bytes=4,
        logits_source=(f"{EASYR1} workers/actor/dp_actor.py _forward_micro_batch: bf16 logits "
                       "[tokens, vocab] divided in place, log-probs by flash-attn's "
                       "cross_entropy_loss with inplace_backward (utils/torch_functional.py "
                       "log_probs_from_logits_flash_attn); no entropy in the log-prob pass"),
        logits_over_prompt=True, one_process_per_gpu=True,
        placement_source=(f"{EASYR1} trainer/main.py: every role in one resource pool, fused "
                          "into one worker process per GPU; vLLM runs inside it "
                          "(workers/rollout/vllm_rollout_spmd.py, external_launcher)"),
        old_logprob_entropy=False,
        # load_vllm_and_sync_weights: the engine's weights wake, then the offloaded actor comes
        # back to the GPU for the sync (workers/sharding_manager/fsdp_vllm.py)
        sync_loads_offloaded=True,
        reference_source=(f"{EASYR1} workers/fsdp_workers.py: the reference in bf16 "
                          "(torch_dtype None) with its own fsdp / offload settings")),
}
_NEMO_LOGITS = (f"{NEMO_RL} models/automodel/train.py:829 / dtensor_policy_worker.py:1239: "
                "logits.to(torch.float32), the bf16 output beside its fp32 copy (4 + 2 B); "
                "backward: the fp32 gradient and its bf16 cast (as OpenRLHF's)")
_NEMO_PLACEMENT = (f"{NEMO_RL} algorithms/grpo.py setup: the vLLM workers are Ray actors of "
                   "their own, sharing each GPU with a policy worker (colocated.enabled)")
_NEMO_REFERENCE = (f"{NEMO_RL} automodel/setup.py:413 setup_reference_model_state / "
                   "dtensor_policy_worker.py:458-459: the reference is the policy's state dict "
                   "copied to pinned host memory; use_reference_model copies it into the model "
                   "for the reference pass (the policy's own state saved to the host meanwhile)")
for _name, _unsharded in (("nemo-rl", False), ("nemo-rl-v1", True)):
    CONVENTIONS[_name] = RLConventions(
        _name, update_logit_bytes=10, pass_logit_bytes=6, entropy_update_bytes=4,
        entropy_pass_bytes=4, logits_source=_NEMO_LOGITS, logits_over_prompt=True,
        one_process_per_gpu=False, placement_source=_NEMO_PLACEMENT,
        # the refit sends the weights with the model on the GPU, then offloads it
        # (grpo.py refit_policy_generation; offload_before_refit / offload_after_refit)
        sync_loads_offloaded=True, reference_source=_NEMO_REFERENCE, reference_swapped_in=True,
        # v1: get_logprobs runs under unshard_fsdp2_model (dtensor_policy_worker.py:1028); the
        # Automodel (_v2) worker's get_logprobs runs under torch.no_grad() only
        # (dtensor_policy_worker_v2.py:612)
        logprob_unsharded=_unsharded)
GENERIC = RLConventions(
    "generic", update_logit_bytes=6, pass_logit_bytes=2, entropy_update_bytes=4,
    entropy_pass_bytes=4, logits_source="bf16 logits and their log-softmax (no framework named)",
    logits_over_prompt=True, one_process_per_gpu=True,
    placement_source="one process per GPU (no framework named)")


def conventions(framework) -> RLConventions:
    return CONVENTIONS.get(framework or "", GENERIC)
