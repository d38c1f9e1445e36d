"""Host RAM, NVMe and checkpoint terms (memory/host.py, memory/checkpoint.py, catalog/nodes.py).

Real DeepSpeed files come from fixtures/shared-real (see its SOURCES.md): LLaMA-Factory's
examples/deepspeed/ds_z3_offload_config.json and ds_z2_offload_config.json, and DeepSpeedExamples'
megatron/Megatron-LM-v1.1.5-ZeRO3/examples/ds_zero_stage_infinity_config.json.
"""
from __future__ import annotations

import json
import os


from memlint.api import estimate_paths
from memlint.catalog import nodes
from memlint.cli import build_parser, main, options_from
from memlint.memory import host, host_nodes
from memlint.ir import Provenance
from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(ROOT, "fixtures", "shared-real", "deepspeed")
Z3_OFFLOAD = os.path.join(REAL, "LLaMA-Factory__examples-deepspeed-ds_z3_offload_config.json")
Z2_OFFLOAD = os.path.join(REAL, "LLaMA-Factory__examples-deepspeed-ds_z2_offload_config.json")
INFINITY = os.path.join(REAL, "DeepSpeedExamples__megatron-Megatron-LM-v1.1.5-ZeRO3-examples-"
                              "ds_zero_stage_infinity_config.json")
GiB = 1024**3
LLAMA3_70B = 70_553_706_496
LLAMA3_8B = 8_030_261_248


def _estimate(*assignments, pin_memory=None):
    partial = overrides_partial(list(assignments))
    if pin_memory is not None:  # what a DeepSpeed config's offload_*.pin_memory gives
        for block in ("offload_optimizer", "offload_param"):
            partial.set_extra(f"deepspeed.{block}.pin_memory", pin_memory,
                              Provenance("ds_config.json", 1, 1, "pin_memory"))
    scenario, _ = build([partial])
    return estimate(scenario)


def _terms(node):
    return {t.name: t.bytes for t in node.terms}


def _check(capsys, *argv):
    code = main(["check", *argv, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_pow2_rounds_up_like_the_caching_host_allocator():
    assert [host._pow2(n) for n in (1, 2, 3, 4, 5, 1000, 2**33 + 1)] == \
        [1, 2, 4, 4, 8, 1024, 2**34]


def test_zero3_cpu_offload_70b_on_one_node():
    est = _estimate("model=llama3-70b", "framework=deepspeed", "zero=3", "offload_optimizer=cpu",
                    "offload_params=cpu", "world_size=8", "host_memory=1TiB", pin_memory=True)
    (node,) = est.host
    part = -(-LLAMA3_70B // 8)
    terms = _terms(node)
    assert node.ranks == ((0, 8),) and node.phase == "training"
    assert terms["host.optimizer_cpu"] == 8 * part * 16      # fp32 master, grads, 2 moments
    assert terms["host.params_cpu"] == 8 * part * 2
    # pinned: the fp32 gradient partitions and the bf16 parameter partition, each rounded up
    waste = (host._pow2(part * 4) - part * 4) + (host._pow2(part * 2) - part * 2)
    assert terms["host.pinned_rounding"] == 8 * waste
    assert node.total_bytes == sum(terms.values()) > node.capacity_bytes == 1024 * GiB
    assert node.phases[1].name == "startup" and node.phases[1].total == 0  # zero.Init


def test_pinned_rounding_is_an_assumption():
    args = ("model=llama3-70b", "framework=deepspeed", "zero=3", "offload_optimizer=cpu",
            "world_size=8")
    assert "host.pinned_rounding" in _terms(_estimate(*args, pin_memory=True).host[0])
    est = _estimate(*args, "host.pinned_pow2_rounding=false", pin_memory=True)
    assert "host.pinned_rounding" not in _terms(est.host[0])


def test_pin_memory_defaults_to_deepspeeds_false():
    """offload_optimizer / offload_param pin_memory default to False (DeepSpeed
    runtime/zero/offload_config.py, edaa722): without it nothing is pinned, nothing rounded."""
    args = ("model=llama3-70b", "framework=deepspeed", "zero=3", "offload_optimizer=cpu",
            "offload_params=cpu", "world_size=8")
    assert "host.pinned_rounding" not in _terms(_estimate(*args).host[0])
    assert "host.pinned_rounding" in _terms(_estimate(*args, pin_memory=True).host[0])


def test_zero2_offload_keeps_a_bit16_buffer_and_loads_the_model_on_every_rank():
    est = _estimate("model=llama3-8b", "framework=deepspeed", "zero=2", "offload_optimizer=cpu",
                    "world_size=8", "grad_accum=4")
    (node,) = est.host
    part = -(-LLAMA3_8B // 8)
    training = {t.name: t.bytes for t in node.phases[0].terms}
    assert training["host.bit16_partition_buffer"] == 8 * part * 2
    assert training["host.accumulated_grads"] == 8 * part * 2   # grad accumulation > 1
    startup = {t.name: t.bytes for t in node.phases[1].terms}
    assert startup == {"host.model_load": 8 * LLAMA3_8B * 2}


def test_model_init_defaults_follow_the_framework():
    def init(*keys):
        scenario, _ = build([overrides_partial(["model=llama3-8b", *keys])])
        return host.default_model_init(scenario)[0]

    assert init("framework=megatron") == "gpu"
    assert init("framework=fsdp2") == "meta"
    assert init("framework=deepspeed", "zero=3") == "zero-init"
    assert init("framework=hf") == "cpu"
    assert init("framework=hf", "model_init=rank0-cpu") == "rank0-cpu"


def test_rank0_cpu_loading_is_one_copy_on_the_first_node():
    est = _estimate("model=llama3-8b", "framework=hf", "fsdp=full", "world_size=16",
                    "model_init=rank0-cpu")
    first = next(n for n in est.host if n.node == 0)
    other = next(n for n in est.host if n.node == 1)
    assert first.total_bytes == LLAMA3_8B * 4 and other.total_bytes == 0


def test_node_kinds_follow_megatron_rank_order():
    kinds, bounded = host_nodes._node_kinds(world=16, pp=4, per_node=8)
    assert not bounded
    assert [(first, count, ranks) for first, count, ranks in kinds] == [
        (0, 1, ((0, 4), (1, 4))), (1, 1, ((2, 4), (3, 4)))]
    kinds, _ = host_nodes._node_kinds(world=64, pp=2, per_node=8)
    assert [(c, r) for _, c, r in kinds] == [(4, ((0, 8),)), (4, ((1, 8),))]
    kinds, bounded = host_nodes._node_kinds(world=8 * 100_000, pp=1, per_node=8)
    assert bounded and kinds[0][1] == 100_000


def test_cpu_device_has_no_host_estimate():
    assert _estimate("model=llama3-8b", "device=cpu").host == ()


def test_node_catalog():
    assert nodes.lookup("DGX_H100").host_memory == 2048 * GiB
    assert nodes.lookup("p4d.24xlarge").gpus == 8
    assert nodes.lookup("gb200").gpus == 4
    assert nodes.lookup("nonexistent") is None
    est = _estimate("model=llama3-8b", "node=gb200-nvl72-tray", "world_size=8")
    (node,) = est.host   # 4 GPUs per tray: two trays alike
    assert node.nodes == 2 and node.ranks == ((0, 4),)


def test_checkpoint_size_and_count():
    est = _estimate("model=llama3-8b", "framework=megatron", "world_size=8", "train_steps=10000",
                    "checkpoint_interval=500")
    ckpt = est.checkpoint
    assert {t.name: t.bytes for t in ckpt.terms} == {
        "checkpoint.weights": LLAMA3_8B * 2, "checkpoint.optimizer": LLAMA3_8B * 12}
    assert ckpt.kept == 20 and "keeps every" in ckpt.kept_source
    keep = _estimate("model=llama3-8b", "framework=fsdp2", "world_size=8",
                     "checkpoint_interval=100")
    assert keep.checkpoint.kept == 10 and keep.checkpoint.bytes_each == LLAMA3_8B * 12
    assert _estimate("model=llama3-8b", "framework=fsdp2").checkpoint.kept is None
    lora = _estimate("model=llama3-8b", "framework=hf", "lora_rank=16", "save_optimizer=false")
    (term,) = lora.checkpoint.terms
    assert term.name == "checkpoint.weights" and term.bytes == lora.params["trainable"] * 4


def test_real_megatron_script_checkpoints(capsys):
    """NVIDIA's GPT-3 175B example saves every 10,000 of 500,000 iterations and never deletes."""
    args = os.path.join(ROOT, "fixtures", "shared-real", "megatron-args",
                        "gpt3_175b_distributed.txt")
    code, report = _check(capsys, args, "--disk", "100TB", "--select", "ML705")
    (finding,) = report["diagnostics"]
    assert finding["severity"] == "warning" and "50 checkpoints" in finding["message"]
    assert finding["line"] is not None
    ckpt = report["estimates"][0]["checkpoint"]
    assert ckpt["kept"] == 50 and ckpt["bytes_each"] == 174_615_846_912 * 14
    code, report = _check(capsys, args, "--disk", "100TB", "--select", "ML705",
                          "--set", "checkpoint_keep=5")
    assert report["diagnostics"] == []


def test_real_torchtitan_checkpointing_off_is_not_counted(capsys):
    toml = os.path.join(ROOT, "fixtures", "shared-real", "torchtitan",
                        "torchtitan__torchtitan-models-deepseek_v3-train_configs-"
                        "deepseek_v3_671b.toml")
    code, report = _check(capsys, toml, "--world-size", "512", "--disk", "1TB")
    assert report["estimates"][0]["checkpoint"]["kept"] is None   # [checkpoint] enable = false
    assert "ML705" not in {d["code"] for d in report["diagnostics"]}


def test_real_zero3_offload_config_70b_exceeds_1tib(capsys):
    code, report = _check(capsys, Z3_OFFLOAD, "--model", "llama3-70b", "--world-size", "8",
                          "--host-memory", "1TiB")
    found = [d for d in report["diagnostics"] if d["code"] == "ML701"]
    assert code == 1 and found and found[0]["severity"] == "error"
    assert report["estimates"][0]["host"][0]["total_bytes"] > 1024 * GiB
    code, report = _check(capsys, Z3_OFFLOAD, "--model", "llama3-70b", "--world-size", "32",
                          "--node", "dgx-h100")
    assert not [d for d in report["diagnostics"] if d["code"] in ("ML701", "ML702")]


def test_real_zero2_offload_config_fits_a_dgx(capsys):
    code, report = _check(capsys, Z2_OFFLOAD, "--model", "llama3-8b", "--world-size", "8",
                          "--node", "dgx-h100")
    assert not [d for d in report["diagnostics"] if d["code"].startswith("ML70")]
    node = report["estimates"][0]["host"][0]
    assert node["capacity_bytes"] == 2048 * GiB and "DGX H100" in node["capacity_source"]


def test_real_zero_infinity_config(capsys, tmp_path):
    code, report = _check(capsys, INFINITY, "--model", "llama3-70b", "--world-size", "8",
                          "--nvme-capacity", "1TB")
    by_code = {d["code"]: d for d in report["diagnostics"]}
    # 128,256 x 8,192 / 8 = 131,334,144 elements > the default offload_param.buffer_size 1e8
    assert "131,334,144" in by_code["ML704"]["message"]
    assert by_code["ML704"]["severity"] == "error"   # max_in_cpu 1: the embedding is swapped
    node = report["estimates"][0]["host"][0]
    part = -(-LLAMA3_70B // 8)
    assert node["nvme_bytes"] == 8 * part * (16 + 2)    # optimizer states + fp16 params
    assert "ML703" in by_code
    terms = {t["name"]: t["bytes"] for t in node["terms"]}
    # max_in_cpu 1 element; optimizer swap buffers: buffer_count 4 x sub_group_size 1e8 x 4 B
    assert terms["host.nvme_param_cpu_cache"] == 8 * 1 * 2
    assert terms["host.nvme_optimizer_swap_buffers"] == 8 * 4 * 100_000_000 * 4
    code, report = _check(capsys, INFINITY, "--model", "llama3-70b", "--world-size", "64")
    assert "ML704" not in {d["code"] for d in report["diagnostics"]}
    # with DeepSpeed's default max_in_cpu (1e9) the embedding's sub-group may stay on the CPU
    config = json.loads(open(INFINITY, encoding="utf-8").read())
    del config["zero_optimization"]["offload_param"]["max_in_cpu"]
    copy = tmp_path / "ds_config.json"
    copy.write_text(json.dumps(config))
    code, report = _check(capsys, str(copy), "--model", "llama3-70b", "--world-size", "8")
    (finding,) = [d for d in report["diagnostics"] if d["code"] == "ML704"]
    assert finding["severity"] == "warning" and "max_in_cpu" in finding["message"]


def test_real_accelerate_cpu_ram_efficient_loading_is_one_copy(capsys):
    """LLaMA-Factory examples/accelerate/fsdp2_config.yaml: fsdp_cpu_ram_efficient_loading."""
    path = os.path.join(ROOT, "fixtures", "shared-real", "fsdp",
                        "LLaMA-Factory__examples-accelerate-fsdp2_config.yaml")
    code, report = _check(capsys, path, "--model", "llama3-8b")
    (node,) = report["estimates"][0]["host"]
    assert node["phase"] == "startup" and node["phases"]["startup"] == LLAMA3_8B * 4
    assert [t["inputs"]["model_init"] for t in node["terms"]] == ["rank0-cpu"]


def test_real_trainer_recipe_keeps_save_total_limit(capsys):
    """alignment-handbook recipes/zephyr-7b-beta/sft/config_full.yaml: save_steps 100,
    save_total_limit 1, max_steps -1 (epochs: no step count)."""
    path = os.path.join(ROOT, "fixtures", "real-world", "huggingface__alignment-handbook",
                        "recipes", "zephyr-7b-beta", "sft", "config_full.yaml")
    main(["estimate", path, "--format", "json"])
    ckpt = json.loads(capsys.readouterr().out)["estimates"][0]["checkpoint"]
    assert ckpt["kept"] == 1 and ckpt["kept_source"] == "checkpoint_keep"


def test_zero_offload_keeps_the_partitioned_gradients_on_the_host():
    """DeepSpeed v0.14.2 stage_1_and_2.py copy_grads_in_partition / stage3.py
    grad_partitions_flat_buffer: with the optimizer offloaded the reduced gradient partitions
    live in host memory, so the GPU holds none (LLaMA-Factory's real offload configs)."""
    sets = ["--model", "llama3-8b", "--world-size", "8", "--gpu", "A100-80GB",
            "--set", "micro_batch=1", "--set", "seq_len=2048"]
    for path in (Z2_OFFLOAD, Z3_OFFLOAD):
        parsed = build_parser().parse_args(["estimate", path, *sets])
        (est,) = estimate_paths([path], options_from(parsed)).estimates
        stage = est.stages[0]
        assert stage.components().get("gradients", 0) == 0, path
        # ... and the host has them (4 B fp32 per partitioned parameter, ZeRO-Offload)
        assert any(t.name == "host.optimizer_cpu" and "4 grad" in t.formula
                   for t in stage.host_terms), path
