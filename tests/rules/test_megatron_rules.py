"""Megatron rules: each assertion or trap fires on a bad script and not on a good one."""
from __future__ import annotations

import pytest

from memlint.rules import megatron as R
from _megatron_helpers import check_metadata, fires_and_stays_silent, run, where

L64 = "# launcher: torchrun --nproc_per_node 8 --nnodes 8\n"

CASES = [
    (R.QueryGroupsIgnored(), "--num-layers 2 --num-attention-heads 32 --num-query-groups 8\n",
     "--num-layers 2 --num-attention-heads 32 --group-query-attention --num-query-groups 8\n"),
    (R.SequenceParallelWithoutTp(), "--tensor-model-parallel-size 1 --sequence-parallel\n",
     "--tensor-model-parallel-size 1\n"),
    (R.MoeTensorParallelNeedsSp(), "--tensor-model-parallel-size 2 --expert-model-parallel-size 2"
     " --num-experts 4\n",
     "--tensor-model-parallel-size 2 --expert-model-parallel-size 2 --num-experts 4 "
     "--sequence-parallel\n"),
    (R.RecomputeSettings(), "--recompute-granularity full --recompute-method uniform\n",
     "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1\n"),
    (R.RecomputeSettings(), "--recompute-granularity full --recompute-num-layers 1\n",
     "--recompute-granularity full --recompute-method block --recompute-num-layers 1\n"),
    (R.RecomputeSettings(), "--recompute-granularity selective --recompute-method uniform\n",
     "--recompute-granularity selective\n"),
    (R.RecomputeSettings(), "--recompute-granularity selective --recompute-num-layers 2\n",
     "--recompute-activations\n"),
    (R.RecomputeSettings(), "--recompute-method block\n", "--num-layers 4\n"),
    (R.RecomputeSettings(), "--recompute-granularity full --recompute-method uniform "
     "--recompute-num-layers 1 --distribute-saved-activations\n",
     "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 "
     "--distribute-saved-activations --tensor-model-parallel-size 2\n"),
    (R.InterleavedSchedule(), L64 + "--pipeline-model-parallel-size 4 "
     "--num-virtual-stages-per-pipeline-rank 2 --num-layers 32 --micro-batch-size 1 "
     "--global-batch-size 96\n",
     L64 + "--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
     "--num-layers 32 --micro-batch-size 1 --global-batch-size 128\n"),
    # d98e8a6: p2p overlap is on unless --no-overlap-p2p-communication (then pp > 2 is needed)
    (R.InterleavedSchedule(), "--pipeline-model-parallel-size 2 "
     "--num-virtual-stages-per-pipeline-rank 2 --num-layers 8 --no-overlap-p2p-communication\n",
     "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 --num-layers 8\n"),
    # micro-batch group per virtual stage: within [pp, m], remainder 0 or >= pp (schedules.py)
    (R.InterleavedSchedule(), L64 + "--pipeline-model-parallel-size 4 "
     "--num-virtual-stages-per-pipeline-rank 2 --num-layers 32 --micro-batch-size 1 "
     "--global-batch-size 160 --microbatch-group-size-per-virtual-pipeline-stage 7\n",
     L64 + "--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
     "--num-layers 32 --micro-batch-size 1 --global-batch-size 160 "
     "--microbatch-group-size-per-virtual-pipeline-stage 5\n"),
    (R.InterleavedSchedule(), "--pipeline-model-parallel-size 4 --num-layers 32 "
     "--num-layers-per-virtual-pipeline-stage 3\n",
     "--pipeline-model-parallel-size 4 --num-layers 32 --num-layers-per-virtual-pipeline-stage 4\n"),
    (R.InterleavedSchedule(), "--pipeline-model-parallel-size 4 --num-layers 32 "
     "--num-layers-per-virtual-pipeline-stage 4 --num-virtual-stages-per-pipeline-rank 2\n",
     "--pipeline-model-parallel-size 4 --num-layers 32 --num-virtual-stages-per-pipeline-rank 2\n"),
    (R.InterleavedSchedule(), "--pipeline-model-parallel-size 4 --num-layers 32 "
     "--num-layers-per-virtual-pipeline-stage 2 --decoder-first-pipeline-num-layers 8\n",
     "--pipeline-model-parallel-size 4 --num-layers 32 --num-virtual-stages-per-pipeline-rank 2 "
     "--decoder-first-pipeline-num-layers 8\n"),
    (R.BatchScheduleConflict(), "--global-batch-size 1536 --step-batch-size-schedule '0:16 1B:1536'\n",
     "--step-batch-size-schedule '0:16 1B:1536'\n"),
    (R.MlaWithGqa(), "--multi-latent-attention --group-query-attention\n",
     "--multi-latent-attention\n"),
    (R.SeqLengthExceedsPositions(), "--seq-length 8192 --max-position-embeddings 4096\n",
     "--seq-length 4096 --max-position-embeddings 4096\n"),
    (R.SeqLengthExceedsPositions(), "--seq-length 256 --decoder-seq-length 8192 "
     "--max-position-embeddings 4096\n",
     "--seq-length 256 --decoder-seq-length 4096 --max-position-embeddings 4096\n"),
    (R.OverlapParamGatherRequirements(), "--overlap-param-gather --overlap-grad-reduce\n",
     "--overlap-param-gather --overlap-grad-reduce --use-distributed-optimizer\n"),
    (R.OverlapParamGatherRequirements(), "--overlap-param-gather --use-distributed-optimizer\n",
     "--overlap-param-gather --use-megatron-fsdp --overlap-grad-reduce\n"),
    (R.CpuOffloadingConflicts(), "--cpu-offloading --cpu-offloading-num-layers 2 --num-layers 8 "
     "--pipeline-model-parallel-size 2\n",
     "--cpu-offloading --cpu-offloading-num-layers 2 --num-layers 8\n"),
    (R.CpuOffloadingConflicts(), "--cpu-offloading-num-layers 8 --num-layers 8\n",
     "--cpu-offloading-num-layers 7 --num-layers 8\n"),
]


@pytest.mark.parametrize("rule,bad,good", CASES,
                         ids=[f"{c[0].code}-{i}" for i, c in enumerate(CASES)])
def test_fires_and_stays_silent(rule, bad, good):
    fires_and_stays_silent(rule, bad, good)


def test_rule_metadata():
    check_metadata(R.RULES, "ML4")
    assert all(rule.formats == ("megatron",) for rule in R.RULES)


def test_query_groups_finding_points_at_flag_line():
    text = "--num-layers 32\n--hidden-size 4096\n--num-attention-heads 32\n--num-query-groups 8\n"
    sc, findings = run(R.QueryGroupsIgnored(), text)
    assert where(sc, findings[0]).line == 4
    assert "805M" in findings[0].message
