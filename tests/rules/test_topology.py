"""Topology rules: each assertion fires on a bad layout and stays silent on a good one."""
from __future__ import annotations

import pytest

from memlint.rules import topology as T
from _megatron_helpers import check_metadata, fires_and_stays_silent, run, where

L8 = "# launcher: torchrun --nproc_per_node 8 --nnodes 1\n"

CASES = [
    # rule, bad, good
    (T.WorldSizeDivisibility(), L8 + "--tensor-model-parallel-size 3\n",
     L8 + "--tensor-model-parallel-size 4\n"),
    (T.WorldSizeDivisibility(), L8 + "--pipeline-model-parallel-size 2 --context-parallel-size 8\n",
     L8 + "--pipeline-model-parallel-size 2 --context-parallel-size 4\n"),
    (T.ExpertParallelDivisibility(), L8 + "--pipeline-model-parallel-size 4 "
     "--expert-model-parallel-size 4 --num-experts 8\n",
     L8 + "--pipeline-model-parallel-size 4 --expert-model-parallel-size 2 --num-experts 8\n"),
    (T.ExpertParallelDivisibility(), L8 + "--tensor-model-parallel-size 2 "
     "--expert-model-parallel-size 8 --expert-tensor-parallel-size 2 --num-experts 8\n",
     L8 + "--tensor-model-parallel-size 2 --expert-model-parallel-size 4 "
     "--expert-tensor-parallel-size 2 --num-experts 8\n"),
    (T.LayersPipelineDivisibility(), "--num-layers 30 --pipeline-model-parallel-size 4\n",
     "--num-layers 32 --pipeline-model-parallel-size 4\n"),
    (T.LayersPipelineDivisibility(), "--num-layers 32 --pipeline-model-parallel-size 4 "
     "--num-virtual-stages-per-pipeline-rank 3\n",
     "--num-layers 32 --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2\n"),
    (T.LayersPipelineDivisibility(), "--num-layers 30 --pipeline-model-parallel-size 4 "
     "--decoder-first-pipeline-num-layers 7\n",
     "--num-layers 30 --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 6\n"),
    (T.LayersPipelineDivisibility(), "--num-layers 30 --pipeline-model-parallel-size 4 "
     "--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 6\n",
     "--num-layers 30 --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 7 "
     "--decoder-last-pipeline-num-layers 7\n"),
    (T.HeadsTensorParallelDivisibility(), "--num-attention-heads 12 --hidden-size 768 "
     "--tensor-model-parallel-size 8\n",
     "--num-attention-heads 12 --hidden-size 768 --tensor-model-parallel-size 4\n"),
    (T.HeadsTensorParallelDivisibility(), "--num-attention-heads 48 --hidden-size 6144 "
     "--group-query-attention --num-query-groups 6 --tensor-model-parallel-size 4\n",
     "--num-attention-heads 48 --hidden-size 6144 --group-query-attention "
     "--num-query-groups 8 --tensor-model-parallel-size 4\n"),
    (T.HeadsTensorParallelDivisibility(), "--num-attention-heads 12 --hidden-size 1000\n",
     "--num-attention-heads 12 --hidden-size 1000 --kv-channels 80\n"),
    (T.FfnTensorParallelDivisibility(), "--num-attention-heads 24 --hidden-size 3072 "
     "--ffn-hidden-size 11008 --tensor-model-parallel-size 3\n",
     "--num-attention-heads 24 --hidden-size 3072 --ffn-hidden-size 11008 "
     "--tensor-model-parallel-size 2\n"),
    (T.FfnTensorParallelDivisibility(), "--num-attention-heads 8 --hidden-size 512 "
     "--num-experts 8 --moe-ffn-hidden-size 1000 --expert-tensor-parallel-size 16\n",
     "--num-attention-heads 8 --hidden-size 512 --num-experts 8 --moe-ffn-hidden-size 1024 "
     "--expert-tensor-parallel-size 16\n"),
    (T.BatchArithmetic(), L8 + "--micro-batch-size 2 --global-batch-size 100\n",
     L8 + "--micro-batch-size 2 --global-batch-size 96\n"),
    (T.ContextParallelSequence(), "--context-parallel-size 4 --seq-length 8190\n",
     "--context-parallel-size 4 --seq-length 8192\n"),
    (T.ExpertsExpertParallel(), "--num-layers 2 --num-experts 8 --expert-model-parallel-size 3\n",
     "--num-layers 2 --num-experts 8 --expert-model-parallel-size 4\n"),
    (T.ExpertsExpertParallel(), "--num-layers 2 --expert-model-parallel-size 2\n",
     "--num-layers 2 --expert-model-parallel-size 1\n"),
    (T.MoeTopkExceedsExperts(), "--num-layers 2 --num-experts 8 --moe-router-topk 9\n",
     "--num-layers 2 --num-experts 8 --moe-router-topk 8\n"),
]


@pytest.mark.parametrize("rule,bad,good", CASES,
                         ids=[f"{c[0].code}-{i}" for i, c in enumerate(CASES)])
def test_fires_and_stays_silent(rule, bad, good):
    fires_and_stays_silent(rule, bad, good)


def test_rule_metadata():
    check_metadata(T.RULES, "ML2")


def test_heads_finding_points_at_tp_flag():
    text = ("--num-layers 2\n--hidden-size 768\n--num-attention-heads 12\n"
            "--tensor-model-parallel-size 8\n")
    sc, findings = run(T.HeadsTensorParallelDivisibility(), text)
    assert where(sc, findings[0]).line == 4


def test_generic_rules_apply_without_megatron_sources():
    from memlint.ir import Partial, Provenance
    from memlint.rules.base import Context
    from memlint.scenario import build

    partial = Partial(source="ds.json", fmt="deepspeed")
    prov = Provenance("ds.json", 3, 5, "x")
    for key, value in (("world_size", 16), ("micro_batch", 4), ("global_batch", 100),
                       ("model.num_hidden_layers", 4), ("model.hidden_size", 64),
                       ("model.num_attention_heads", 4), ("model.vocab_size", 100)):
        partial.set(key, value, prov)
    sc, _ = build([partial])
    findings = list(T.BatchArithmetic().check(Context(sc, formats=("deepspeed",))))
    assert findings and "not divisible" in findings[0].message
