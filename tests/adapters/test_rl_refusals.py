"""Settings verl and OpenRLHF refuse at start-up (contradicting settings), each an error citing the
framework's own check; the corpus's real scripts (tests/corpus) raise none of them."""
from __future__ import annotations

import pytest

from memlint.adapters.registry import load_file

VERL = ("python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct "
        "trainer.n_gpus_per_node=8 trainer.nnodes=1 {}\n")
OPENRLHF = ("python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen2.5-7B-Instruct "
            "--actor_num_nodes 1 --actor_num_gpus_per_node 8 --colocate_all_models "
            "--vllm_num_engines {} --vllm_tensor_parallel_size {}\n")


def _errors(tmp_path, text: str) -> list:
    path = tmp_path / "run.sh"
    path.write_text(text)
    return [d.message for d in load_file(str(path)).diagnostics
            if d.code == "ML004" and d.severity.name == "ERROR"]


@pytest.mark.parametrize("overrides,cited", [
    ("data.train_batch_size=100 actor_rollout_ref.rollout.n=5 "
     "actor_rollout_ref.actor.ppo_mini_batch_size=64 "
     "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "utils/config.py:109-113"),
    ("data.train_batch_size=64 actor_rollout_ref.actor.ppo_mini_batch_size=128 "
     "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "actor.py:201-205"),
    ("data.train_batch_size=128 actor_rollout_ref.actor.ppo_mini_batch_size=64 "
     "actor_rollout_ref.actor.ppo_micro_batch_size=16 "
     "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "actor.py:177-182"),
    ("data.train_batch_size=128 actor_rollout_ref.actor.strategy=megatron "
     "actor_rollout_ref.actor.ppo_mini_batch_size=64 "
     "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3 "
     "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "utils/config.py:95-100"),
])
def test_verl_start_up_checks(tmp_path, overrides, cited):
    errors = _errors(tmp_path, VERL.format(overrides))
    assert len(errors) == 1 and cited in errors[0], errors


def test_verl_dynamic_batches_skip_the_batch_checks(tmp_path):
    overrides = ("data.train_batch_size=100 actor_rollout_ref.rollout.n=5 "
                 "actor_rollout_ref.actor.use_dynamic_bsz=True")
    assert _errors(tmp_path, VERL.format(overrides)) == []


@pytest.mark.parametrize("engines,tp,refused", [(4, 2, False), (8, 1, False), (2, 2, True)])
def test_openrlhf_colocated_engines_must_cover_the_actor_gpus(tmp_path, engines, tp, refused):
    errors = _errors(tmp_path, OPENRLHF.format(engines, tp))
    assert bool(errors) is refused
    if refused:
        assert "cli/train_ppo_ray.py:53-61" in errors[0]
