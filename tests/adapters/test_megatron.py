"""Megatron adapter: real fixtures load, scripts keep positions, flags map to the scenario."""
from __future__ import annotations

import glob
import os

import pytest

from memlint.adapters import megatron as M
from memlint.diagnostics import Severity
from memlint.scenario import build
from helpers import padded_vocab

HERE = os.path.dirname(__file__)
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
REAL = os.path.abspath(os.path.join(ROOT, "fixtures", "shared-real"))
OURS = os.path.join(ROOT, "fixtures", "adapters", "megatron")
REAL_FILES = sorted(glob.glob(os.path.join(REAL, "megatron-args", "*"))
                    + glob.glob(os.path.join(REAL, "megatron", "*")))


def load_text(text: str, name: str = "train.sh", strict: bool = False):
    return M.load(name, text, strict=strict)


def scenario(text: str, name: str = "train.sh"):
    partial = load_text(text, name)
    sc, diags = build([partial])
    return sc, partial


def codes(partial, severity=None):
    return [d.code for d in partial.diagnostics if severity is None or d.severity == severity]


# -- real fixtures ---------------------------------------------------------------------------

# file -> (world_size, tp, pp, cp, ep, vpp, zero, precision)
EXPECTED = {
    "bigscience_tr11_176B_ml.txt": (192, 4, 12, 1, 1, 1, 1, "bf16"),  # BF16_Optimizer = ZeRO-1
    "gpt3_175b_distributed.txt": (8, 8, 16, 1, 1, 1, 0, "fp16"),
    "llama3_8b_h100_fp8.txt": (8, 1, 1, 1, 1, 1, 1, "fp8"),
    "megatron_fsdp_deepseek_v3.txt": (None, 1, 1, 1, 8, 1, 3, "bf16"),
    "megatron_fsdp_llama3_8b_h100_fp8.txt": (8, 1, 1, 1, 1, 1, 3, "fp8"),
    "mixtral_8x7b_distributed.txt": (8, 1, 4, 1, 8, 1, 1, "bf16"),
    "multimodal_nvlm_pretrain_qwen20_72b_internvit_6b.txt": (8, 8, 1, 1, 1, 1, 1, "bf16"),
    "multimodal_pretrain_mistral_clip.txt": (8, 4, 1, 1, 1, 1, 1, "bf16"),
    "Megatron-LM__examples-gpt3-gpt_config.yaml": (None, 1, 1, 1, 1, 1, 0, "bf16"),
    "Megatron-LM__tests-functional_tests-test_cases-gpt-gpt3_15b_8t_release-model_config.yaml":
        (None, 8, 1, 1, 1, 1, 1, "bf16"),
    "Megatron-LM__tests-functional_tests-test_cases-gpt-gpt3_mcore_te_tp2_zp_z3_resume_fsdp_"
    "dtensor-model_config.yaml": (None, 2, 1, 1, 1, 1, 3, "bf16"),
    "Megatron-LM__tests-functional_tests-test_cases-mixtral-deepseekv3_proxy_flex_tp1pp4emp16"
    "etp1cp1_release-model_config.yaml": (None, 2, 4, 1, 16, 2, 1, "bf16"),
    "Megatron-LM__tests-functional_tests-test_cases-mixtral-mixtral_8x22b_tp2pp8ep8vpp1_release-"
    "model_config.yaml": (None, 2, 8, 1, 8, 1, 1, "bf16"),
    "Megatron-LM__tests-functional_tests-test_cases-mixtral-mixtral_8x7b_tp1pp4ep8vpp8_release-"
    "model_config.yaml": (None, 2, 4, 1, 8, 8, 1, "bf16"),
    "Megatron-LM__tests-functional_tests-test_cases-moe-deepseek_proxy_fsdp_ep2_fsdp2-model_"
    "config.yaml": (None, 1, 1, 1, 2, 1, 3, "fp32"),
    "Megatron-LM__tests-functional_tests-test_cases-multimodal-llava-multimodal_llava_mcore_te_"
    "tp4_sp_cp2-model_config.yaml": (None, 4, 1, 2, 1, 1, 0, "bf16"),
    "Megatron-LM__tests-functional_tests-test_cases-nemotron-nemotron3_super_release_gb200-model_"
    "config.yaml": (None, 2, 1, 1, 64, 1, 1, "fp8"),
    "verl__verl-trainer-config-engine-megatron.yaml": (None, 1, 1, 1, 1, 1, 1, "bf16"),
}


def test_every_real_fixture_is_expected():
    assert sorted(os.path.basename(f) for f in REAL_FILES) == sorted(EXPECTED)


@pytest.mark.parametrize("path", REAL_FILES, ids=os.path.basename)
def test_real_fixture_topology(path):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    assert M.detect(path, text)
    partial = M.load(path, text)
    assert partial.fmt == "megatron"
    assert not [d for d in partial.diagnostics if d.severity == Severity.ERROR], \
        partial.diagnostics
    sc, diags = build([partial])
    assert not [d for d in diags if d.severity == Severity.ERROR and d not in partial.diagnostics]
    par = sc.parallelism
    got = (par.world_size, par.tp, par.pp, par.cp, par.ep, par.vpp, par.zero,
           sc.training.precision)
    assert got == EXPECTED[os.path.basename(path)]
    assert sc.training.framework == "megatron"
    if not os.path.basename(path).startswith("verl__"):  # verl's engine config has no model
        assert sc.model is not None and sc.model.config["num_hidden_layers"] > 0


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(OURS, "*", "*.sh"))),
                         ids=os.path.basename)
def test_our_scripts_load(path):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    assert M.detect(path, text)
    partial = M.load(path, text)
    assert not [d for d in partial.diagnostics if d.severity != Severity.INFO]


def test_our_scripts_topology():
    def sc_of(name):
        path = os.path.join(OURS, "good", name)
        with open(path, encoding="utf-8") as handle:
            return build([M.load(path, handle.read())])[0]

    gpt3 = sc_of("gpt3_175b.sh")
    assert (gpt3.parallelism.world_size, gpt3.parallelism.tp, gpt3.parallelism.pp) == (128, 8, 16)
    assert gpt3.training.precision == "fp16" and gpt3.training.grad_dtype == "fp16"
    l8 = sc_of("llama3_8b.sh")
    assert (l8.parallelism.world_size, l8.parallelism.tp, l8.parallelism.sp) == (8, 2, True)
    assert l8.model.config["num_key_value_heads"] == 8
    assert l8.model.config["vocab_size"] == 128256
    assert l8.training.grad_dtype == "fp32" and l8.parallelism.zero == 1
    l70 = sc_of("llama3_70b.sh")
    p = l70.parallelism
    assert (p.world_size, p.tp, p.pp, p.vpp, p.cp, p.sp) == (32, 4, 4, 5, 2, True)
    assert l70.model.config["vocab_size"] == 128256  # raw; padded at estimate time:
    assert padded_vocab(l70) == 128512               # to a multiple of 128·tp 4
    mix = sc_of("mixtral_8x7b.sh")
    assert (mix.parallelism.world_size, mix.parallelism.ep, mix.parallelism.pp) == (32, 8, 4)
    assert mix.model.config["num_local_experts"] == 8
    assert mix.model.config["num_experts_per_tok"] == 2
    ds = sc_of("deepseek_v3_mla_moe.sh")
    cfg = ds.model.config
    assert ds.parallelism.world_size == 256 and ds.parallelism.zero == 3
    assert cfg["model_type"] == "megatron_gpt" and cfg["kv_lora_rank"] == 512
    assert cfg["multi_latent_attention"] is True
    assert cfg["q_lora_rank"] == 1536 and cfg["qk_rope_head_dim"] == 64
    assert cfg["num_local_experts"] == 256
    assert cfg["shared_expert_intermediate_size"] == cfg["moe_intermediate_size"]
    assert cfg["first_k_dense_replace"] == 3 and cfg["vocab_size"] == 129280
    assert cfg["num_nextn_predict_layers"] == 1


# -- script reading --------------------------------------------------------------------------

SCRIPT = """\
#!/bin/bash
export TP=${TP:-2}
PP=2
ARGS=(
    --num-layers 8   # inline comment
    --tensor-model-parallel-size $TP
)
ARGS+=( --hidden-size 1024 )
OPTS="--num-attention-heads 16 \\
  --seq-length 2048"
torchrun --nproc-per-node=8 --nnodes 2 pretrain_gpt.py "${ARGS[@]}" $OPTS \\
    --pipeline-model-parallel-size=$PP \\
    --micro-batch-size 2 --bf16 | tee log.txt
"""


def test_script_positions_and_values():
    sc, partial = scenario(SCRIPT)
    assert sc.parallelism.tp == 2 and sc.parallelism.pp == 2
    assert sc.parallelism.world_size == 16 and sc.hardware.gpus_per_node == 8
    assert sc.model.config["num_hidden_layers"] == 8
    assert sc.model.config["num_attention_heads"] == 16
    # each flag points at the line (and column) where the script wrote it
    assert (sc.where("tp").line, sc.where("tp").column) == (6, 5)
    assert sc.where("model.num_hidden_layers").line == 5
    assert sc.where("model.hidden_size").line == 8
    assert (sc.where("model.num_attention_heads").line,
            sc.where("model.num_attention_heads").column) == (9, 7)
    assert sc.where("seq_len").line == 10
    assert sc.where("pp").line == 12
    assert sc.where("micro_batch").line == 13
    assert sc.where("world_size").line == 11
    assert partial.extra["flags.bf16"].value is True
    assert not codes(partial, Severity.WARNING) and not codes(partial, Severity.ERROR)


def test_unresolved_values_are_info_with_default():
    text = ("NNODES=$(scontrol show hostnames | wc -l)\n"
            "torchrun --nproc_per_node 8 --nnodes $NNODES pretrain_gpt.py \\\n"
            "  --tensor-model-parallel-size $TP_SIZE --num-layers $((4*8)) --hidden-size 64 \\\n"
            "  --num-attention-heads 4 --save $1 --seq-length $(( $TP_SIZE * 2 ))\n")
    sc, partial = scenario(text)
    infos = [d for d in partial.diagnostics if d.code == "ML007"]
    messages = " | ".join(d.message for d in infos)
    assert "$TP_SIZE" in messages and "default 1" in messages
    assert partial.settings["model.num_hidden_layers"].value == 32  # arithmetic over literals
    assert "$(( $TP_SIZE * 2 ))" in messages  # ... over an unknown value stays unresolved
    assert "$(scontrol" in messages and "1 node" in messages
    assert all(d.severity == Severity.INFO for d in infos)
    assert sc.parallelism.tp == 1 and sc.parallelism.world_size == 8
    tp_info = next(d for d in infos if "$TP_SIZE" in d.message)
    assert (tp_info.line, tp_info.column) == (3, 3)


def test_if_branches_decided_and_undecidable():
    text = ('MODE=${MODE:-fast}\n'
            'if [ "$MODE" == "fast" ]; then\n'
            '  TP=4\n'
            'else\n'
            '  TP=8\n'
            'fi\n'
            'if [[ -n "$SLURM_JOB_ID" ]]; then PP=2; else PP=4; fi\n'
            'torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size $TP '
            '--pipeline-model-parallel-size $PP --num-layers 8\n')
    sc, partial = scenario(text)
    assert sc.parallelism.tp == 4
    assert sc.parallelism.pp == 2  # undecidable: first branch, reported
    assert any("assumed true" in d.message for d in partial.diagnostics)


def test_unknown_flag_warning_with_suggestion_and_strict():
    text = "--num-layers 8\n--tensor-model-paralel-size 2\n--log-interval 10\n"
    partial = load_text(text, "args.txt")
    unknown = [d for d in partial.diagnostics if d.code == "ML003"]
    assert len(unknown) == 1 and unknown[0].severity == Severity.WARNING
    assert "--tensor-model-parallel-size" in unknown[0].message and unknown[0].line == 2
    strict = load_text(text, "args.txt", strict=True)
    assert [d.severity for d in strict.diagnostics if d.code == "ML003"] == [Severity.ERROR]


def test_args_file_launcher_header_and_comments():
    text = ("# launcher: torchrun --nproc_per_node 4 --nnodes 3 (twelve GPUs)\n"
            "--num-layers 24 --hidden-size 1024  # two flags on one line\n"
            "--num-attention-heads 16\n"
            "--tensor-model-parallel-size 2 --fp16 --accumulate-allreduce-grads-in-fp32\n")
    sc, partial = scenario(text, "args.txt")
    assert sc.parallelism.world_size == 12
    assert sc.training.precision == "fp16" and sc.training.grad_dtype == "fp32"
    assert sc.where("tp").line == 4 and sc.where("tp").column == 1
    assert partial.extra["flags.fp16"].value is True


def test_gqa_and_query_groups():
    sc, partial = scenario("--num-layers 2 --hidden-size 256 --num-attention-heads 8 "
                           "--num-query-groups 2\n", "a.txt")
    assert sc.model.config["num_key_value_heads"] == 8       # ignored without the switch
    assert partial.extra["megatron.num-query-groups"].value == 2
    sc, _ = scenario("--num-layers 2 --hidden-size 256 --num-attention-heads 8 "
                     "--group-query-attention --num-query-groups 2\n", "a.txt")
    assert sc.model.config["num_key_value_heads"] == 2
    sc, _ = scenario("--num-layers 2 --hidden-size 256 --num-attention-heads 8 "
                     "--group-query-attention\n", "a.txt")
    assert sc.model.config["num_key_value_heads"] == 1       # Megatron's CLI default


def test_padded_vocab_and_ffn_defaults():
    sc, _ = scenario("--num-layers 2 --hidden-size 4096 --num-attention-heads 32 --swiglu "
                     "--vocab-size 32000 --make-vocab-size-divisible-by 128 "
                     "--tensor-model-parallel-size 3\n", "a.txt")
    assert sc.model.config["vocab_size"] == 32000 and sc.model.vocab_pad_multiple == 128
    assert padded_vocab(sc) == 32256   # ceil(32000/384)*384
    assert sc.model.config["intermediate_size"] == 10880   # int(4h*2/3/64)*64
    sc, _ = scenario("--num-layers 2 --hidden-size 1024 --num-attention-heads 16 "
                     "--vocab-size 50257\n", "a.txt")
    assert sc.model.config["intermediate_size"] == 4096
    assert sc.model.config["vocab_size"] == 50257 and padded_vocab(sc) == 50304
    assert sc.model.config["model_type"] == "megatron_gpt"
    assert sc.model.config["gated_mlp"] is False and sc.model.config["norm"] == "layernorm"
    assert sc.model.config["tie_word_embeddings"] is True


def test_virtual_pipeline_flags():
    sc, _ = scenario("--num-layers 32 --pipeline-model-parallel-size 4 "
                     "--num-layers-per-virtual-pipeline-stage 2\n", "a.txt")
    assert sc.parallelism.vpp == 4
    sc, _ = scenario("--num-layers 14 --pipeline-model-parallel-size 4 "
                     "--pipeline-model-parallel-layout 'Et*2|(tt|)*5t|tmL'\n", "a.txt")
    assert sc.parallelism.vpp == 2
    sc, _ = scenario("--num-layers 30 --pipeline-model-parallel-size 4 "
                     "--decoder-first-pipeline-num-layers 6 "
                     "--decoder-last-pipeline-num-layers 6\n", "a.txt")
    assert (sc.parallelism.first_stage_layers, sc.parallelism.last_stage_layers) == (6, 6)


def test_recompute_offload_attention():
    sc, p = scenario("--num-layers 4 --recompute-granularity full --recompute-method uniform "
                     "--recompute-num-layers 1 --transformer-impl local --optimizer-cpu-offload "
                     "--use-precision-aware-optimizer\n", "a.txt")
    assert sc.training.recompute == "full" and sc.training.attention == "eager"
    assert sc.parallelism.offload_optimizer == "cpu"
    assert p.extra["megatron.recompute-method"].value == "uniform"
    assert p.extra["megatron.recompute-num-layers"].value == 1
    sc, _ = scenario("--num-layers 4 --recompute-activations --use-flash-attn\n", "a.txt")
    assert sc.training.recompute == "selective" and sc.training.attention == "flash"


def test_moe_layer_freq_parser():
    assert M.parse_layer_freq("[0]*3+[1]*5", 8) == [0, 0, 0, 1, 1, 1, 1, 1]
    assert M.parse_layer_freq("([1]*2+[0])*2", 6) == [1, 1, 0, 1, 1, 0]
    assert M.parse_layer_freq("2", 8) == 2
    assert M.parse_layer_freq("__import__('os')", 8) is None
    sc, _ = scenario("--num-layers 6 --hidden-size 64 --num-attention-heads 4 --num-experts 4 "
                     "--moe-layer-freq ([1]*2+[0])*2\n", "a.txt")
    assert sc.model.config["mlp_only_layers"] == [2, 5]


def test_yaml_model_args_positions():
    text = ("MODEL_ARGS:\n"
            "  --num-layers: 4\n"
            "  --tensor-model-parallel-size: 2\n"
            "  --bf16: true\n"
            "  --fp16: false\n"
            "  --tensor-model-paralel-size: 2\n")
    sc, partial = scenario(text, "model_config.yaml")
    assert sc.parallelism.tp == 2 and sc.training.precision == "bf16"
    assert (sc.where("tp").line, sc.where("tp").column) == (3, 3)
    assert "flags.fp16" not in partial.extra
    assert [d.line for d in partial.diagnostics if d.code == "ML003"] == [6]


def test_suppressions_and_detection():
    text = "torchrun pretrain_gpt.py --num-layers 4  # memlint: disable=ML204\n"
    partial = load_text(text)
    assert partial.suppressions == {1: {"ml204"}}
    assert M.detect("run.sh", text)
    assert M.detect("args.txt", "--num-layers 4\n")
    assert not M.detect("notes.txt", "hello\n")
    assert not M.detect("conf.yaml", "trainer:\n  devices: 8\n")


@pytest.mark.parametrize("text", [
    'ARGS=( --a "unterminated\n', "echo ${A:-", "torchrun x.py --num-layers", "(((", "$((",
    "--tensor-model-parallel-size\n", "--num-layers abc\n", "\x00", "if [ ; then\nfi\nfi\n",
    "--moe-layer-freq [[[[\n--num-experts 4 --num-layers 2\n",
])
def test_bad_input_never_raises(text):
    for name in ("x.sh", "x.txt", "x.yaml"):
        partial = M.load(name, text)
        assert partial.fmt == "megatron"


def test_heads_error_points_at_tp_line():
    from memlint.rules.base import Context
    from memlint.rules.topology import HeadsTensorParallelDivisibility

    path = os.path.join(OURS, "bad", "heads_not_divisible_by_tp.sh")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    sc, _ = build([M.load(path, text)])
    findings = list(HeadsTensorParallelDivisibility().check(Context(sc)))
    assert findings
    prov = sc.where(findings[0].keys[0])
    tp_line = next(i for i, line in enumerate(text.splitlines(), 1)
                   if "--tensor-model-parallel-size" in line)
    assert (prov.file, prov.line) == (path, tp_line)


def test_bert_spec_local_builds_megatrons_own_layers():
    """examples/bert/pretrain_bert.py turns `--spec local` into bert_layer_local_spec (Megatron
    CI bert_mcore_tp2_pp2_resume_torch_dist_local_spec): the local implementation's conventions
    (no Transformer Engine workspace; its unfused attention in the global memory buffer)."""
    from memlint.memory.estimate import estimate
    from memlint.scenario import overrides_partial

    path = os.path.join(ROOT, "bench", "data", "calibration", "gpu-megatron-ci", "configs",
                        "bert__bert_mcore_tp2_pp2_resume_torch_dist_local_spec.yaml")
    partial = M.load_path(path, entry="examples/bert/pretrain_bert.py")
    assert partial.extra["megatron.transformer-impl"].value == "local"
    assert partial.extra["megatron.transformer-impl"].prov.key == "--spec"
    scenario, _ = build([partial, overrides_partial(["world_size=8", "gpu=H100-80GB"])])
    last = estimate(scenario).stages[-1]
    assert last.term("buffers.te_workspace") is None
    assert last.term("buffers.global_memory_buffer") is not None
    # the same flags under another script: --spec names a module, not the local spec
    other = M.load_path(path, entry="pretrain_gpt.py")
    assert "megatron.transformer-impl" not in other.extra
