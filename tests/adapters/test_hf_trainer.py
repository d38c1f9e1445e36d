"""HF Trainer / TRL arguments (launch scripts, YAML recipes, JSON files) and LLaMA-Factory YAML.

Real files: fixtures/real-world/<owner>__<repo>/<path>, byte copies with their commits in
fixtures/real-world/SOURCES.md. Each is read without a false error (the launcher's working
directory is the repository root, as the projects' READMEs run them).
"""
from __future__ import annotations

import json
import os

import pytest

from memlint.adapters import hf_trainer, llamafactory
from memlint.adapters.registry import detect_format, load_file, load_with_references
from memlint.scenario import build

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(ROOT, "fixtures", "real-world")
OWNERS = {"hiyouga__LLaMA-Factory": None, "huggingface__alignment-handbook": None}


with open(os.path.join(REAL, "verdicts.json"), encoding="utf-8") as _handle:
    _VERDICTS = json.load(_handle)["files"]
_DS = {"examples/deepspeed/ds_z0_config.json", "examples/deepspeed/ds_z2_config.json",
       "examples/deepspeed/ds_z3_config.json"}


def _real(owner: str) -> list:
    """The trainer fixtures in an owner's folder: the real-world corpus keeps other formats beside
    them (accelerate and DeepSpeed configs, launchers), which tests/corpus checks by their verdicts."""
    base = os.path.join(REAL, owner)
    out = []
    for folder, _, names in os.walk(base):
        out += [os.path.relpath(os.path.join(folder, n), base) for n in names]
    return sorted(rel for rel in out if _trainer_fixture(owner, rel))


def _trainer_fixture(owner: str, rel: str) -> bool:
    entry = _VERDICTS.get(f"{owner}/{rel}", {})
    return (entry.get("verdict") == "valid" and not entry.get("known_false_alarm")
            and ("by engineer finetune" in entry.get("evidence", "") or rel in _DS))


LF = _real("hiyouga__LLaMA-Factory")
HANDBOOK = _real("huggingface__alignment-handbook")
FASTCHAT = _real("lm-sys__FastChat")
ACCELERATE = {"recipes/accelerate_configs/deepspeed_zero3.yaml"}
EXPECTED = {".yaml": {"hiyouga__LLaMA-Factory": "llamafactory",
                      "huggingface__alignment-handbook": "hf_trainer"},
            ".sh": {"hiyouga__LLaMA-Factory": "hf_trainer", "lm-sys__FastChat": "hf_trainer"},
            ".json": {"hiyouga__LLaMA-Factory": "deepspeed"}}


def _values(partial) -> dict:
    return {k: s.value for k, s in partial.settings.items()}


def _scenario(owner: str, rel: str, monkeypatch, *sets):
    from memlint.scenario import overrides_partial

    monkeypatch.chdir(os.path.join(REAL, owner))
    partials = load_with_references(rel)
    return build(partials + [overrides_partial(list(sets))])


@pytest.mark.parametrize("owner,rel", [("hiyouga__LLaMA-Factory", r) for r in LF]
                         + [("huggingface__alignment-handbook", r) for r in HANDBOOK]
                         + [("lm-sys__FastChat", r) for r in FASTCHAT])
def test_real_files_detected_and_read_without_false_error(owner, rel, monkeypatch):
    from memlint.cli import main

    path = os.path.join(REAL, owner, rel)
    text = open(path, encoding="utf-8").read()
    module = detect_format(path, text)
    expected = "accelerate" if rel in ACCELERATE else EXPECTED[os.path.splitext(rel)[1]][owner]
    assert module.FORMAT == expected
    monkeypatch.chdir(os.path.join(REAL, owner))
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["check", rel, "--format", "json", "--world-size", "8", "--gpu",
                     "H100-80GB"])
    report = json.loads(out.getvalue())
    # 8 x H100 is this test's choice, not the recipes' (most state no hardware): a memory verdict
    # (ML1xx) on it is about that choice, not about the file; verdicts on the hardware the authors
    # state are tested one by one (test_fastchat_7b_on_four_a100_40gb_fits and its kind)
    errors = [d for d in report["diagnostics"]
              if d["severity"] == "error" and not d["code"].startswith("ML1")]
    assert errors == [], errors


def test_llamafactory_lora_values_and_defaults():
    path = os.path.join(REAL, "hiyouga__LLaMA-Factory", "examples/train_lora/llama3_lora_sft.yaml")
    partial = load_file(path)
    values = _values(partial)
    assert values["model"] == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert (values["micro_batch"], values["grad_accum"], values["seq_len"]) == (1, 8, 2048)
    assert (values["lora_rank"], values["lora_targets"]) == (8, "all-linear")
    # bf16: true over the checkpoint's bf16 weights (torch_dtype="auto"): nothing in fp32
    assert values["precision"] == "pure-bf16"
    assert values["recompute"] == "full"   # LLaMA-Factory checkpoints unless disabled
    assert values["framework"] == "hf"
    note = next(d for d in partial.diagnostics if "defaults assumed" in d.message)
    assert "disable_gradient_checkpointing" in note.message and "adamw_torch_fused" in note.message
    assert partial.settings["lora_rank"].prov.line == 9


def test_llamafactory_qlora_freeze_galore_and_deepspeed(monkeypatch):
    base = os.path.join(REAL, "hiyouga__LLaMA-Factory", "examples")
    qlora = _values(load_file(os.path.join(base, "train_qlora/llama3_lora_sft_otfq.yaml")))
    assert qlora["base_quant"] == "nf4" and qlora["lora_rank"] == 8
    fsdp_qlora = _values(load_file(os.path.join(base, "extras/fsdp_qlora/llama3_lora_sft.yaml")))
    assert fsdp_qlora["lora_targets"] == "qkvo" and fsdp_qlora["base_quant"] == "nf4"
    freeze = _values(load_file(os.path.join(base, "extras/llama_pro/llama3_freeze_sft.yaml")))
    assert freeze["train_base"] is False
    galore = _values(load_file(os.path.join(base, "extras/galore/llama3_full_sft.yaml")))
    assert galore["precision"] == "pure-bf16" and "lora_rank" not in galore
    scenario, diags = _scenario("hiyouga__LLaMA-Factory", "examples/train_full/llama3_full_sft.yaml",
                                monkeypatch, "world_size=8")
    assert scenario.training.framework == "deepspeed" and scenario.parallelism.zero == 3
    assert scenario.training.precision == "bf16" and scenario.training.micro_batch == 1
    assert scenario.model.config["hidden_size"] == 4096
    assert not [d for d in diags if d.severity.label == "error"]


def test_llamafactory_cli_script_reads_like_its_yaml():
    base = os.path.join(REAL, "hiyouga__LLaMA-Factory", "examples/train_lora")
    script = _values(load_file(os.path.join(base, "llama3_lora_sft.sh")))
    yaml = _values(load_file(os.path.join(base, "llama3_lora_sft.yaml")))
    for key in ("model", "micro_batch", "grad_accum", "seq_len", "lora_rank", "lora_targets",
                "precision", "recompute"):
        assert script[key] == yaml[key], key
    gemma = _values(load_file(os.path.join(base, "gemma2_lora_sft.sh")))
    assert gemma["model"] == "google/gemma-2-9b-it" and gemma["lora_rank"] == 16


def test_trl_recipes():
    base = os.path.join(REAL, "huggingface__alignment-handbook", "recipes")
    sft = load_file(os.path.join(base, "zephyr-7b-beta/sft/config_full.yaml"))
    values = _values(sft)
    assert sft.fmt == "hf_trainer"
    assert (values["micro_batch"], values["seq_len"], values["grad_accum"]) == (16, 2048, 1)
    assert values["precision"] == "pure-bf16"  # torch_dtype bfloat16 + bf16 autocast
    assert values["attention"] == "flash" and values["recompute"] == "full"
    assert values["model"] == "mistralai/Mistral-7B-v0.1"
    dpo = _values(load_file(os.path.join(base, "zephyr-7b-beta/dpo/config_qlora.yaml")))
    assert (dpo["lora_rank"], dpo["lora_targets"], dpo["base_quant"]) == (16, "all-linear", "nf4")
    assert dpo["seq_len"] == 1024 and dpo["optimizer"] == "adamw"
    orpo = _values(load_file(os.path.join(base, "llama3-8b/orpo/config_v1.0.yaml")))
    assert orpo["optimizer_state_dtype"] == "int8"  # adamw_bnb_8bit: uint8 moments + fp32 absmax per 256
    assert orpo["attention"] == "flash"


LAUNCH = """#!/bin/bash
NGPU=8
MODEL=Qwen/Qwen2.5-7B-Instruct
torchrun --nproc_per_node $NGPU --nnodes 2 train.py \\
    --model_name_or_path $MODEL \\
    --deepspeed ds.json \\
    --per_device_train_batch_size 2 \\
    --gradient_accumulation_steps 8 \\
    --bf16 True \\
    --gradient_checkpointing \\
    --model_max_length 4096 \\
    --my_own_flag 3 \\
    --report_to wandb
"""
DS = """{
  "bf16": {"enabled": "auto"},
  "zero_optimization": {"stage": 3},
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": "auto"
}
"""


def test_launch_script_with_deepspeed_file_is_one_run(repo):
    (repo / "train.sh").write_text(LAUNCH)
    (repo / "ds.json").write_text(DS.replace('"train_micro_batch_size_per_gpu": 4',
                                             '"train_micro_batch_size_per_gpu": "auto"'))
    partials = load_with_references("train.sh")
    assert [p.fmt for p in partials] == ["deepspeed", "hf_trainer"]
    scenario, diags = build(partials)
    assert scenario.parallelism.world_size == 16 and scenario.parallelism.zero == 3
    assert scenario.training.micro_batch == 2 and scenario.training.seq_len == 4096
    assert scenario.training.recompute == "full" and scenario.training.precision == "bf16"
    assert scenario.where("micro_batch").line == 7
    assert not [d for d in diags if d.severity.label in ("error", "warning")]  # --my_own_flag
    assert scenario.model.config["hidden_size"] == 3584


def test_deepspeed_value_the_trainer_refuses_is_an_error_at_its_line(repo):
    (repo / "train.sh").write_text(LAUNCH)
    (repo / "ds.json").write_text(DS)
    partial = load_file("train.sh")
    error = next(d for d in partial.diagnostics if d.severity.label == "error")
    assert error.path.endswith("ds.json") and error.line == 4
    assert "train_micro_batch_size_per_gpu" in error.message and "auto" in error.message


def test_bf16_and_fp16_together_are_refused(repo):
    from memlint.cli import main

    (repo / "run.sh").write_text("python -m torch.distributed.run --nproc_per_node=4 sft.py "
                                 "--model_name_or_path Qwen/Qwen3-8B --bf16 --fp16 true "
                                 "--per_device_train_batch_size 1\n")
    assert main(["check", "run.sh", "--select", "ML303"]) == 1
    scenario, _ = build(load_with_references("run.sh"))
    assert scenario.parallelism.world_size == 4


def test_json_arguments_file_and_trl_defaults(repo):
    (repo / "args.json").write_text(json.dumps({
        "model_name_or_path": "Qwen/Qwen2.5-1.5B", "per_device_train_batch_size": 4,
        "use_peft": True, "output_dir": "out"}))
    (repo / "launch.sh").write_text("accelerate launch --num_processes 8 trl/scripts/sft.py "
                                    "args.json\n")
    partials = load_with_references("launch.sh")
    assert [p.fmt for p in partials] == ["hf_trainer", "hf_trainer"]
    values = _values(partials[0])
    assert values["lora_rank"] == 16          # TRL ModelConfig.lora_r default
    assert values["seq_len"] == 1024          # TRL SFTConfig.max_length default
    assert values["recompute"] == "full"      # TRL: gradient_checkpointing defaults to True
    assert values["precision"] == "bf16"      # TRL: bf16 defaults to True; fp32 weights
    assert _values(partials[1])["world_size"] == 8


def test_plain_trainer_defaults_are_the_trainers():
    items = [hf_trainer.Item("per_device_train_batch_size", "2", None)]
    from memlint.ir import Partial, Provenance

    partial = Partial(source="x", fmt="hf_trainer")
    hf_trainer.apply(items, partial, "hf", Provenance("x", 1, 1, None))
    values = _values(partial)
    assert values["precision"] == "fp32" and values["recompute"] == "none"
    assert values["optimizer_impl"] == "fused"


def test_detection_leaves_other_formats_alone():
    assert not hf_trainer.detect("a.sh", "torchrun pretrain_gpt.py --num-layers 2 "
                                         "--micro-batch-size 1\n")
    assert not hf_trainer.detect("a.yaml", "base_model: x\nmicro_batch_size: 1\n"
                                           "per_device_train_batch_size: 2\n")
    assert not hf_trainer.detect("ds.json", '{"train_micro_batch_size_per_gpu": 1, '
                                            '"per_device_train_batch_size": 1}')
    assert not llamafactory.detect("a.yaml", "compute_environment: LOCAL_MACHINE\n"
                                             "distributed_type: DEEPSPEED\n")


def test_fastchat_scripts_local_checkpoints_and_implied_lora(monkeypatch):
    base = os.path.join(REAL, "lm-sys__FastChat", "scripts")
    vicuna = load_file(os.path.join(base, "train_vicuna_13b.sh"))
    values = _values(vicuna)
    assert "model" not in values   # ~/model_weights/llama-13b is not on this machine: no error
    assert any("local checkpoint folder" in d.message for d in vicuna.diagnostics)
    assert (values["world_size"], values["fsdp"], values["framework"]) == (8, "full", "fsdp2")
    assert values["seq_len"] == 2048 and values["recompute"] == "full"
    lora = _values(load_file(os.path.join(base, "train_lora.sh")))
    assert lora["lora_rank"] == 8 and lora["world_size"] == 6
    assert lora["framework"] == "deepspeed"   # --deepspeed $PATH_...: DeepSpeed, file unknown
    assert lora["precision"] == "fp16"


def test_fastchat_7b_on_four_a100_40gb_fits(monkeypatch):
    """lm-sys/FastChat scripts/train_7b_4x40g_a100.sh: its authors name the hardware in the file
    name (7B on 4 x A100 40GB). The model is a local LLaMA-7B folder, given here as the catalog's
    Llama-2-7b (the same architecture and parameter count, 6.74B); alpaca_train.py's own
    model_max_length default is 512 (Stanford Alpaca train.py TrainingArguments)."""
    from memlint.cli import main
    import contextlib
    import io

    monkeypatch.chdir(os.path.join(REAL, "lm-sys__FastChat"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["check", "scripts/train_7b_4x40g_a100.sh", "--model",
                     "meta-llama/Llama-2-7b-hf", "--set", "seq_len=512", "--gpu", "A100-40GB",
                     "--format", "json"])
    report = json.loads(out.getvalue())
    assert code == 0 and report["estimates"]
    peak = report["estimates"][0]["peak_bytes"]
    assert peak < 40 * 1024**3
    assert not [d for d in report["diagnostics"] if d["code"] == "ML101"]


def test_handbook_recipe_with_its_accelerate_config_is_one_run(repo):
    """alignment-handbook runs `accelerate launch --config_file
    recipes/accelerate_configs/deepspeed_zero3.yaml scripts/run_sft.py <recipe>` (its README):
    the accelerate file's ZeRO-3 and the recipe's Trainer arguments form one run."""
    import shutil

    base = os.path.join(REAL, "huggingface__alignment-handbook")
    shutil.copytree(os.path.join(base, "recipes"), repo / "recipes")
    (repo / "launch.sh").write_text(
        "ACCELERATE_LOG_LEVEL=info accelerate launch --config_file "
        "recipes/accelerate_configs/deepspeed_zero3.yaml --num_processes 8 scripts/run_sft.py "
        "recipes/zephyr-7b-beta/sft/config_full.yaml\n")
    partials = load_with_references("launch.sh")
    assert sorted(p.fmt for p in partials) == ["accelerate", "hf_trainer", "hf_trainer"]
    scenario, diags = build(partials)
    assert scenario.parallelism.zero == 3 and scenario.parallelism.world_size == 8
    assert scenario.training.micro_batch == 16 and scenario.training.seq_len == 2048
    assert scenario.model.config["hidden_size"] == 4096
    assert not [d for d in diags if d.severity.label == "error"]


def test_torch_dtype_null_is_the_default():
    path = os.path.join(REAL, "huggingface__alignment-handbook",
                        "recipes/zephyr-7b-beta/dpo/config_full.yaml")
    partial = load_file(path)
    assert not [d for d in partial.diagnostics if d.severity.label != "info"]
    assert _values(partial)["precision"] == "bf16"   # autocast over fp32 weights (TRL default)


def test_torch_dtype_fp8_is_no_torch_dtype():
    """trainer_args._DTYPES, not keys.dtype_name (which takes memlint's own "fp8"): TRL's and
    transformers' model loaders getattr(torch, torch_dtype), and torch has no `fp8`."""
    path = os.path.join(REAL, "huggingface__alignment-handbook",
                        "recipes/zephyr-7b-beta/sft/config_full.yaml")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    assert "torch_dtype: bfloat16\n" in text
    partial = hf_trainer.load("config_full.yaml", text.replace("torch_dtype: bfloat16",
                                                               "torch_dtype: fp8"))
    [bad] = [d for d in partial.diagnostics if d.severity.label != "info"]
    assert bad.message == "torch_dtype: expected bfloat16, float16, float32 or auto, got 'fp8'"


def test_huge_numbers_are_not_internal_errors():
    """Fuzz-found: a 130-digit lora_r / lora_dropout in a TRL recipe raised OverflowError."""
    big = "1" + "0" * 130
    text = (f"model_name_or_path: alignment-handbook/zephyr-7b-sft-qlora\nuse_peft: true\n"
            f"lora_r: {big}\nlora_dropout: {big}\nsave_steps: {big}\n"
            "per_device_train_batch_size: 4\n")
    partial = hf_trainer.load("config_qlora.yaml", text)
    assert partial.settings["lora_rank"].value != int(big)
    assert "checkpoint_interval" not in partial.settings
    assert hf_trainer.to_int(2**60) is None and hf_trainer.to_int("1e400") is None


def test_placeholder_model_path_is_not_an_error():
    """ymcui/Chinese-LLaMA-Alpaca-2 scripts/training/run_sft.sh (fixtures/real-world) passes
    --model_name_or_path path/to/hf/llama-2/or/merged/llama-2/dir/or/model_id, a placeholder the
    README says to replace: not a Hub id (`org/name`), so from_pretrained takes it as a folder
    that is not on this machine. It was an ML004 error ("neither a config.json path nor a known
    preset"); it is the same info as any other absent local checkpoint."""
    path = os.path.join(REAL, "ymcui__Chinese-LLaMA-Alpaca-2", "scripts/training/run_sft.sh")
    partial = load_file(path)
    assert "model" not in _values(partial)
    assert any("local checkpoint folder that is not here" in d.message
               for d in partial.diagnostics)
    scenario, diags = build([partial])
    assert not [d for d in diags if d.severity.label == "error"]


def test_fsdp_config_file_activation_checkpointing_fits_the_authors_gpus(repo):
    """linkedin/Liger-Kernel examples/huggingface/README.md: "The default hyperparameters and
    configurations work on single node with 4xA100 80GB GPUs" (benchmark conditions: "Qwen2-7B,
    Alpaca Dataset, Max seq len = 512, ..., Gradient Checkpointing = True, Distributed Strategy =
    FSDP1 on 4 A100s"). run_qwen.sh (fixtures/real-world) passes --fsdp_config
    config/fsdp_config.json, whose "activation_checkpointing": true (Liger-Kernel
    examples/huggingface/config/fsdp_config.json, not in the index: written here with that one
    fact) TrainingArguments json-loads; memlint did not read the file and estimated 221 GiB
    without recompute. training.py's own max_seq_length default is 512, not a Trainer flag."""
    import contextlib
    import io
    import shutil

    from memlint.cli import main

    src = os.path.join(REAL, "linkedin__Liger-Kernel", "examples/huggingface/run_qwen.sh")
    shutil.copy(src, repo / "run_qwen.sh")
    (repo / "config").mkdir()
    (repo / "config" / "fsdp_config.json").write_text('{"activation_checkpointing": true}\n')
    partial = load_file("run_qwen.sh")
    values = _values(partial)
    assert values["recompute"] == "full" and values["fsdp"] == "full"
    assert values["world_size"] == 4 and values["micro_batch"] == 48
    assert partial.extra["recompute.scope"].value == "inside-unit"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["check", "run_qwen.sh", "--set", "seq_len=512", "--gpu", "A100-80GB",
                     "--format", "json"])
    report = json.loads(out.getvalue())
    assert code == 0, report["diagnostics"]
    # at the full 512 tokens the tensors take 70 GiB; the allocator's cached idle blocks
    # (memory/allocator.py) are released on an out-of-memory retry, so they fill the GPU but
    # never pass it
    stage = report["estimates"][0]["stages"][0]
    assert sum(t["bytes"] for t in stage["terms"] if t["component"] != "runtime") < 72 * 1024**3
    assert report["estimates"][0]["peak_bytes"] <= 80 * 1024**3
    assert not [d for d in report["diagnostics"] if d["code"] == "ML101"]


def _check_json(owner: str, rel: str, *extra) -> tuple:
    from helpers import check_json

    return check_json(os.path.join(REAL, owner), rel, *extra)


def _weights(report) -> int:
    return report["estimates"][0]["stages"][0]["components"]["weights"]


def test_llamafactory_lora_example_against_the_readme_hardware_table():
    """hiyouga/LLaMA-Factory README.md, "Hardware Requirement" (* estimated): "Freeze/LoRA/GaLore/
    APOLLO/BAdam | 16 | 16GB (7B) ... | `2x`GB". examples/train_lora/llama3_lora_sft.yaml
    (Llama-3-8B, LoRA, bf16, cutoff_len 2048, batch 1): the frozen bf16 base is the table's
    2x GB (16.06 GB for 8.03B); the whole step (activations at 2,048 tokens, 128,256-entry
    logits in fp32, runtime) needs more than that, and fits a 24 GB RTX 4090 on its own."""
    code, report = _check_json("hiyouga__LLaMA-Factory", "examples/train_lora/llama3_lora_sft.yaml",
                               "--gpu", "RTX-4090", "--world-size", "1")
    assert code == 0 and not [d for d in report["diagnostics"] if d["code"] == "ML101"]
    assert abs(_weights(report) - 2 * 8.03e9) / (2 * 8.03e9) < 0.01
    assert report["estimates"][0]["peak_bytes"] <= 24 * 1024**3


def test_llamafactory_qlora_example_against_the_readme_hardware_table():
    """Same table: "QLoRA | 4 | 6GB (7B) ... | `x/2`GB". examples/train_qlora/llama3_lora_sft_otfq.yaml
    (quantization_bit 4, bitsandbytes NF4) fits a 16 GB GPU (V100-16GB). The table's x/2 GB is
    the authors' estimate for the whole model; bitsandbytes quantizes only the nn.Linear layers
    (transformers replace_with_bnb_linear, and get_keys_to_not_convert keeps the LM head), so
    Llama-3-8B's 6.98B linear weights are NF4 codes plus block scales (0.5 + 1/64 + 4/16384 B
    each) and its embedding, LM head (128,256 x 4,096 each) and norms stay bf16: 5.74 GB."""
    code, report = _check_json("hiyouga__LLaMA-Factory",
                               "examples/train_qlora/llama3_lora_sft_otfq.yaml",
                               "--gpu", "V100-16GB", "--world-size", "1")
    assert code == 0 and not [d for d in report["diagnostics"] if d["code"] == "ML101"]
    embedding = 128_256 * 4_096
    norms = 32 * 2 * 4_096 + 4_096
    linear = 8_030_261_248 - 2 * embedding - norms
    base = linear * (0.5 + 1 / 64 + 4 / 16384) + (2 * embedding + norms) * 2
    terms = {t["name"]: t["bytes"] for t in report["estimates"][0]["stages"][0]["terms"]}
    assert terms["weights.frozen_unquantized"] == (2 * embedding + norms) * 2
    assert abs(terms["weights.frozen"] + terms["weights.frozen_unquantized"] - base) < 1e3
    assert report["estimates"][0]["peak_bytes"] <= 16 * 1024**3


def test_open_r1_olympiccoder_7b_fits_the_node_its_header_names():
    """huggingface/open-r1 recipes/OlympicCoder-7B/sft/config_v00.00.yaml, first line: "# Config
    for 1 node of 8 H100s with DeepSpeed ZeRO-3" (launched with recipes/accelerate_configs/
    zero3.yaml, README). It trains at max_length 32,768 with `use_liger: true`: TRL's SFTConfig
    field ("Monkey patch the model with Liger kernels to increase throughput and reduce memory
    usage", trl/trainer/sft_config.py before TRL 0.16), whose fused linear cross entropy never
    materializes the logits. memlint did not read `use_liger` and counted 55.7 GiB of logits:
    93 GiB, an OOM on the node the authors trained it on."""
    code, report = _check_json("huggingface__open-r1", "recipes/OlympicCoder-7B/sft/config_v00.00.yaml",
                               "--set", "framework=deepspeed", "--set", "zero=3",
                               "--world-size", "8", "--gpu", "H100-80GB")
    assert code == 0, report["diagnostics"]
    assert not [d for d in report["diagnostics"] if d["code"] == "ML101"]
    assert report["estimates"][0]["stages"][0]["components"].get("logits", 0) == 0
    assert report["estimates"][0]["peak_bytes"] <= 80 * 1024**3


def test_liger_loss_spares_logits_only_where_the_trainer_calls_the_model_with_labels():
    base = os.path.join(REAL, "huggingface__open-r1", "recipes")
    sft = load_file(os.path.join(base, "OlympicCoder-7B/sft/config_v00.00.yaml"))
    assert _values(sft)["logits.enabled"] is False
    assert sft.extra["loss.fused"].value == "liger-flce"
    lf = load_file(os.path.join(REAL, "hiyouga__LLaMA-Factory",
                                "examples/train_full/qwen2_5_full_sft_fsdp.yaml"))
    assert _values(lf)["logits.enabled"] is False   # enable_liger_kernel, stage sft
    liger_off = load_file(os.path.join(base, "OlympicCoder-32B/sft/config_v00.00.yaml"))
    assert "logits.enabled" not in _values(liger_off)   # use_liger: false


def test_firefly_argument_files_default_to_qlora():
    """yangjianxin1/Firefly train.py: CustomizedArguments.train_mode defaults to qlora, which
    loads the base in NF4 (BitsAndBytesConfig load_in_4bit, nf4) and adapts every linear layer.
    Its train_args/sft/qlora/*.json files give lora_rank but no train_mode; read as a bf16 base,
    Mixtral-8x7B counted 168 GiB of frozen weights (an OOM warning on a file that trains on one
    GPU). Its train_args/sft/full/*.json say train_mode full and stay full fine-tunes."""
    base = os.path.join(REAL, "yangjianxin1__Firefly", "train_args", "sft")
    qlora = _values(load_file(os.path.join(base, "qlora", "mixtral-8x7b-sft-qlora.json")))
    assert (qlora["lora_rank"], qlora["base_quant"], qlora["lora_targets"]) == \
        (16, "nf4", "all-linear")
    full = _values(load_file(os.path.join(base, "full", "yi-6b-sft-full.json")))
    assert "lora_rank" not in full and "base_quant" not in full


def test_trl_cli_yaml_with_each_value_below_its_key():
    """Issue 27 class 5: TRL's CLI YAML (`trl sft --config example_config.yaml`,
    huggingface/trl examples/cli_configs/example_config.yaml at f2cd577) puts every value on the
    line below its key; TrlParser reads it as SFTConfig arguments, and so does memlint, with TRL's
    defaults (trl/trainer/sft_config.py: max_length 1024; base_config.py: bf16 and
    gradient_checkpointing True) and TrainingArguments' batch of 8."""
    path = os.path.join(REAL, "huggingface__trl", "examples", "cli_configs", "example_config.yaml")
    partial = load_file(path)
    assert partial.fmt == "hf_trainer"
    got = {key: s.value for key, s in partial.settings.items()}
    assert got["model"] == "Qwen/Qwen2.5-0.5B"
    assert (got["micro_batch"], got["seq_len"], got["precision"], got["recompute"]) == (
        8, 1024, "bf16", "full")
    [defaults] = [d for d in partial.diagnostics if d.message.startswith("TRL defaults")]
    assert "sft_config.py" in defaults.message and defaults.severity.label == "info"
