"""Issue 27 class 2: Megatron-DeepSpeed's MoE flags are read as that fork defines them, not as
Megatron-LM's flags of the same name (adapters/megatron/fork.py; microsoft/Megatron-DeepSpeed
megatron/arguments.py at f4157be): `--num-experts` is a list, `--expert-interval` defaults to 2
(layer n, 1-based, is an MoE layer when n % interval == 0: megatron/model/transformer.py
get_num_experts_per_layer), `--topk` defaults to 1, `--moe-expert-parallel-size` is the expert
parallel size. Real files: examples_deepspeed/MoE at f4157be (fixtures/real-world, SOURCES.md)."""
import json
import os

from memlint.adapters.registry import load_file
from memlint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MOE = os.path.join(ROOT, "fixtures", "real-world", "microsoft__Megatron-DeepSpeed",
                   "examples_deepspeed", "MoE")


def settings(name: str) -> dict:
    partial = load_file(os.path.join(MOE, name))
    assert partial.fmt == "megatron"
    return {key: s.value for key, s in partial.settings.items()}, partial


def test_one_expert_count_every_second_layer_top1():
    # ds_pretrain_gpt_125M_MoE64.sh: --num-experts 64, no --expert-interval, no --topk
    got, _partial = settings("ds_pretrain_gpt_125M_MoE64.sh")
    assert got["model.num_hidden_layers"] == 12
    assert got["model.num_local_experts"] == 64
    # interval 2: layers 2, 4, ..., 12 (1-based) are MoE, so 0-based 0, 2, ..., 10 stay dense
    assert got["model.mlp_only_layers"] == [0, 2, 4, 6, 8, 10]
    assert got["model.num_experts_per_tok"] == 1            # --topk default 1
    assert got["model.moe_intermediate_size"] == 4 * 768    # the expert is the 4h GPT MLP


def test_the_estimate_counts_six_moe_layers_of_64_experts(capsys):
    path = os.path.join(MOE, "ds_pretrain_gpt_125M_MoE64.sh")
    assert main(["check", path, "--format", "json"]) == 0
    params = json.loads(capsys.readouterr().out)["estimates"][0]["params"]
    expert_matrices = 6 * 64 * 2 * 768 * 3072   # six MoE layers, 64 experts, h->4h and 4h->h
    assert abs(params["experts"] - expert_matrices) <= 0.002 * expert_matrices  # (+ biases)
    # read as Megatron-LM's integer flag on every layer it would have been twice as many
    assert params["total"] < 2.0e9


def test_an_expert_count_per_layer_and_the_stated_expert_parallel_size():
    # ds_pretrain_gpt_1.3B_PR-MoE64or128_MoS.sh: EP_SIZE="64 64 64 64 64 64 64 64 128 128"
    # (pyramid MoE) with --moe-expert-parallel-size: a list memlint counts at its largest entry,
    # said as a warning, never an error
    got, partial = settings("ds_pretrain_gpt_1.3B_PR-MoE64or128_MoS.sh")
    assert got["model.num_local_experts"] == 128
    assert "ep" in got
    [note] = [d for d in partial.diagnostics if "--num-experts" in d.message]
    assert note.severity.label == "warning" and "not modeled" in note.message
    assert not [d for d in partial.diagnostics if d.severity.label == "error"]


def test_a_billion_layers_lists_no_layer_indices(tmp_path):
    # bench/fuzz.py seed 8089988: NUM_LAYERS=1000000007 built a billion-entry dense-layer list
    # (19.6 GB); past the memory model's MAX_LAYERS there is no layout to give
    with open(os.path.join(MOE, "ds_pretrain_gpt_125M_MoE64.sh")) as handle:
        text = handle.read()
    assert "\nNUM_LAYERS=12\n" in text
    script = tmp_path / "run.sh"
    script.write_text(text.replace("\nNUM_LAYERS=12\n", "\nNUM_LAYERS=1000000007\n"))
    partial = load_file(str(script))
    got = {key: s.value for key, s in partial.settings.items()}
    assert got["model.num_hidden_layers"] == 1000000007
    assert "model.mlp_only_layers" not in got
