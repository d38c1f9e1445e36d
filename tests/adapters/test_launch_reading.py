"""Issue 27 class 8: launch scripts memlint misread last round, on real files (fixtures/real-world,
SOURCES.md):

- bigscience's tr13 BLOOM-176B fine-tuning: the launch is built in strings and run through
  `srun ... bash -c "$LAUNCHER --node_rank \\$SLURM_PROCID $CMD"`; the world size is
  #SBATCH --nodes (36) x GPUS_PER_NODE (8); pp 72 over 70 layers is valid there
  (--pp-partition-method 'type:transformer|embedding': the two embeddings are units of the split);
- Megatron-DeepSpeed's examples/pretrain_gpt.sh: `--save $CHECKPOINT_PATH` after
  `CHECKPOINT_PATH=<Specify path>` is a value to fill in, not a missing one;
- Megatron-DeepSpeed's universal_checkpointing run_bf16.sh: `--zero-stage=${ZERO_STAGE}` where
  `ZERO_STAGE=$2` is unresolved, not "expected a number".
"""
import os

from memlint.api import Options, check_paths
from memlint.diagnostics import Severity

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(ROOT, "fixtures", "real-world")
BLOOM_FT = os.path.join(REAL, "bigscience-workshop__bigscience", "train", "tr13-mtf",
                        "tr13-176B-mtf-xp3zz.slurm")
MDS = os.path.join(REAL, "microsoft__Megatron-DeepSpeed")


def check(path, *assignments):
    return check_paths([path], Options(assignments=assignments))


def errors(result):
    return [d for d in result.diagnostics if d.severity == Severity.ERROR]


def test_srun_bash_c_launch_and_the_slurm_world_size():
    result = check(BLOOM_FT)
    assert not errors(result)
    [estimate] = result.estimates
    topology = estimate.context.topology
    assert topology.world == 36 * 8 and topology.pp == 72 and topology.tp == 1
    assert estimate.context.architecture.layers == 70


def test_embedding_stages_count_in_megatron_deepspeeds_pipeline_split():
    [estimate] = check(BLOOM_FT).estimates
    stages = sorted(estimate.stages, key=lambda s: s.stage)
    assert len(stages) == 72
    assert stages[0].layers == 0 and stages[-1].layers == 0  # the embedding, the tied head
    assert all(s.layers == 1 for s in stages[1:-1])
    # the first stage holds the 250,880 x 14,336 embedding (BLOOM's padded vocabulary)
    assert stages[0].total_bytes > stages[1].total_bytes


def test_a_flag_an_empty_variable_leaves_without_a_value_is_unresolved():
    result = check(os.path.join(MDS, "examples", "pretrain_gpt.sh"))
    assert not errors(result)
    [save] = [d for d in result.diagnostics if d.message.startswith("--save gets no value")]
    assert save.severity == Severity.WARNING and save.code == "ML007"
    assert "$CHECKPOINT_PATH" in save.message


def test_an_unresolved_value_inside_an_options_string_stays_unresolved():
    path = os.path.join(MDS, "examples_deepspeed", "universal_checkpointing", "megatron_gpt",
                        "run_bf16.sh")
    result = check(path)
    assert not errors(result)
    [zero] = [d for d in result.diagnostics if d.message.startswith("--zero-stage")]
    assert zero.severity == Severity.INFO and "$2" in zero.message
