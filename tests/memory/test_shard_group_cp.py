"""An explicit dp_shard with context parallelism: the FSDP shard group is dp_shard·cp.

torchtitan's ParallelDims builds the FSDP mesh dimension as fsdp = dp_shard * cp
(pytorch/torchtitan@238fa9953e4a torchtitan/distributed/parallel_dims.py build_mesh: "fsdp: ...
This includes dp_shard and cp"); accelerate's ParallelismConfig flattens dp_shard and cp into the
"dp_shard_cp" mesh FSDP shards over (huggingface/accelerate@16cb6eb
src/accelerate/parallelism_config.py fsdp_dim_names). Both refuse a world size that is not
dp_replicate·dp_shard·cp·tp (·pp), ML502's product. verl and EasyR1 build the FSDP mesh apart
from the Ulysses one: their dp_shard (fsdp_size) is the whole shard group.
"""
from __future__ import annotations

import os

import memlint
from memlint.memory.topology import resolve

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ACCELERATE = os.path.join(ROOT, "fixtures", "real-world", "huggingface__accelerate", "examples",
                          "torch_native_parallelism", "configs")
SHARED = os.path.join(ROOT, "fixtures", "shared-real")


def _estimate(path, **scenario):
    return memlint.estimate([path], model="meta-llama/Meta-Llama-3-8B", **scenario)


def _weights(estimate):
    return next(t for t in estimate.stages[0].terms if t.name == "weights")


def test_accelerate_cp8_over_one_shard_rank_shards_over_the_eight_cp_ranks():
    """accelerate examples/torch_native_parallelism/configs/cp.yaml @16cb6eb: dp_shard 1 x cp 8
    on 8 GPUs. FSDP2 shards over dp_shard_cp = 8 ranks (it was counted unsharded: shard 1)."""
    path = os.path.join(SHARED, "fsdp", "accelerate__examples-torch_native_parallelism-configs-cp.yaml")
    estimate = _estimate(path)
    scenario = estimate.scenario
    assert scenario.parallelism.dp_shard == 1 and scenario.parallelism.cp == 8
    assert resolve(scenario).shard == 8
    assert _weights(estimate).inputs["shard"] == 8
    result = memlint.check([path], model="meta-llama/Meta-Llama-3-8B")
    assert not [d for d in result.diagnostics if d.code == "ML502"]


def test_accelerate_nd_config_shards_over_dp_shard_times_cp():
    """accelerate examples/torch_native_parallelism/configs/nd.yaml @c874c37: dp_shard 2 x cp 2
    x tp 2 on 8 GPUs: shard group 4 (the tp ranks hold their own slices)."""
    estimate = _estimate(os.path.join(ACCELERATE, "nd.yaml"))
    par = estimate.scenario.parallelism
    assert (par.dp_shard, par.cp, par.tp) == (2, 2, 2)
    assert resolve(estimate.scenario).shard == 4


def test_torchtitan_explicit_shard_degree_with_cp():
    """torchtitan's llama3_8b.toml at 9dec370 (bench/data/calibration/gpu-published) with
    data_parallel_shard_degree 4 and context_parallel_degree 2 on 8 GPUs: the fsdp mesh
    dimension is 4 x 2 = 8, as with data_parallel_shard_degree -1 (filled to 4)."""
    path = os.path.join(ROOT, "bench", "data", "calibration", "gpu-published", "configs",
                        "torchtitan", "llama3_8b_9dec370.toml")
    explicit = memlint.estimate([path], world_size=8, dp_shard=4, cp=2)
    filled = memlint.estimate([path], world_size=8, cp=2)
    assert filled.scenario.parallelism.dp_shard in (None, -1)
    assert resolve(explicit.scenario).shard == resolve(filled.scenario).shard == 8
    assert explicit.peak_bytes == filled.peak_bytes
    # verl/EasyR1 (separate FSDP and Ulysses meshes) keep dp_shard as the group:
    # tests/corpus/test_rl_pairs.py test_verl_shards_over_fsdp_size_whatever_the_ulysses_size
