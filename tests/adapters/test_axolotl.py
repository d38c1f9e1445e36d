"""axolotl adapter: every memory-relevant key of real axolotl examples (fixtures/shared-real/
axolotl, SOURCES.md there), mapped as axolotl-ai-cloud/axolotl@067b021 does."""
from __future__ import annotations

import json
import os
import shutil


from memlint.adapters import axolotl
from memlint.adapters.registry import load_with_references
from memlint.diagnostics import Severity
from memlint.memory.estimate import estimate
from memlint.scenario import build, overrides_partial

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(ROOT, "fixtures", "shared-real")
AXO = os.path.join(REAL, "axolotl")
HF = os.path.join(REAL, "hf-configs")


def real(name):
    return os.path.join(AXO, f"axolotl__examples-{name}")


def load(path):
    return axolotl.load(path, open(path, encoding="utf-8").read())


def values(partial):
    return {k: s.value for k, s in partial.settings.items()}


def line_of(partial, key):
    return partial.settings[key].prov.line


def test_bf16_weights_train_without_master_and_8bit_states():
    """gpt-oss-20b FSDP2: bf16: true loads bf16 weights (pure-bf16: no fp32 master), torchao
    AdamW8bit keeps block-quantized moments (int8 codes, fp32 scale per 256), activation offloading, CCE (no logits)."""
    partial = load(real("gpt-oss-gpt-oss-20b-fft-fsdp2.yaml"))
    got = values(partial)
    assert got["precision"] == "pure-bf16" and got["framework"] == "fsdp2"
    assert got["optimizer"] == "adamw" and got["optimizer_state_dtype"] == "int8"
    assert got["offload_activations"] is True and got["recompute"] == "full"
    assert got["logits.enabled"] is False
    text = open(real("gpt-oss-gpt-oss-20b-fft-fsdp2.yaml")).read().splitlines()
    assert text[line_of(partial, "optimizer") - 1].startswith("optimizer: adamw_torch_8bit")
    assert text[line_of(partial, "offload_activations") - 1].startswith("activation_offloading")


def test_deepspeed_keeps_its_fp32_master_and_fused_default_optimizer():
    partial = load(real("mistral-mixtral-mixtral_22.yml"))
    got = values(partial)
    assert got["framework"] == "deepspeed" and got["precision"] == "bf16"  # bf16: auto
    assert got["optimizer_state_dtype"] == "int8"  # adamw_bnb_8bit: uint8 moments + fp32 absmax per 256
    partial = load(real("llama-3-fft-8b-liger-fsdp.yaml"))
    got = values(partial)
    assert got["optimizer_impl"] == "fused" and got["logits.enabled"] is False  # Liger FLCE
    assert got["precision"] == "pure-bf16"


def test_shipped_deepspeed_config_not_found_is_read_from_axolotls_table(tmp_path):
    """mixtral_22 names deepspeed_configs/zero3_bf16_cpuoffload_all.json, relative to axolotl's
    working directory; absent here, axolotl's shipped file says ZeRO-3 with both offloads.
    Before: ZeRO-3 and offload silently dropped (a 2,203 GiB false OOM on 8x22B)."""
    copy = tmp_path / "examples" / "mixtral_22.yml"
    copy.parent.mkdir()
    (tmp_path / ".git").mkdir()
    shutil.copy(real("mistral-mixtral-mixtral_22.yml"), copy)
    partial = load(str(copy))
    got = values(partial)
    assert (got["zero"], got["offload_optimizer"], got["offload_params"]) == (3, "cpu", "cpu")
    assert partial.settings["zero"].prov.line == 48
    assert not [d for d in partial.diagnostics if d.severity >= Severity.WARNING]
    assert any("shipped" in d.message for d in partial.diagnostics)


def test_deepspeed_path_resolves_from_the_project_root_not_the_yaml_folder(tmp_path):
    """axolotl opens `deepspeed:` relative to its working directory (utils/config/__init__.py),
    the project root: a YAML under examples/gpt-oss/ finds <root>/deepspeed_configs/."""
    (tmp_path / ".git").mkdir()
    example = tmp_path / "examples" / "gpt-oss" / "fft-zero3.yaml"
    example.parent.mkdir(parents=True)
    shutil.copy(real("gpt-oss-gpt-oss-20b-fft-deepspeed-zero3.yaml"), example)
    ds = tmp_path / "deepspeed_configs" / "zero3_bf16.json"
    ds.parent.mkdir()
    ds.write_text(json.dumps({"zero_optimization": {"stage": 3}, "bf16": {"enabled": True},
                              "train_micro_batch_size_per_gpu": "auto"}))
    partials = load_with_references(str(example))
    assert [os.path.basename(p.source) for p in partials] == ["zero3_bf16.json",
                                                              "fft-zero3.yaml"]
    scenario, diagnostics = build(partials + [overrides_partial(
        [f"model={os.path.join(HF, 'gpt-oss-120b.json')}", "world_size=8"])])
    assert scenario.parallelism.zero == 3 and scenario.training.framework == "deepspeed"
    assert not [d for d in diagnostics if d.severity >= Severity.WARNING and d.code == "ML005"]


def test_unknown_deepspeed_path_is_a_warning(tmp_path):
    path = tmp_path / "a.yaml"
    text = ("base_model: x\nmicro_batch_size: 1\nsequence_len: 1024\n"
            "deepspeed: configs/mine.json\n")
    path.write_text(text)
    partial = axolotl.load(str(path), text)
    warnings = [d for d in partial.diagnostics if d.severity == Severity.WARNING]
    assert len(warnings) == 1 and "not found" in warnings[0].message
    assert "zero" not in partial.settings


def test_defaults_are_axolotls_own(tmp_path):
    """No sequence_len / micro_batch_size / optimizer / bf16: axolotl's schema defaults (512, 1,
    adamw_torch_fused, bf16 auto), named as such, not memlint's."""
    path = tmp_path / "a.yaml"
    text = "base_model: x\nsequence_len: 2048\n"
    path.write_text(text)
    partial = axolotl.load(str(path), text)
    got = values(partial)
    assert got["micro_batch"] == 1 and got["seq_len"] == 2048
    assert got["optimizer_impl"] == "fused" and got["precision"] == "pure-bf16"
    assert "axolotl default" in partial.settings["micro_batch"].prov.key
    assert got["recompute"] == "none"  # gradient_checkpointing defaults to false
    assert "axolotl default" in partial.settings["recompute"].prov.key
    text = "base_model: x\nmicro_batch_size: 2\nbf16: false\noptimizer: paged_adamw_8bit\n"
    partial = axolotl.load(str(path), text)
    got = values(partial)
    assert got["seq_len"] == 512 and got["precision"] == "fp32"
    assert partial.extra["optimizer.paged"].value is True


def test_gradient_checkpointing_offload_and_lora_targets(tmp_path):
    path = tmp_path / "a.yaml"
    text = ("base_model: x\nmicro_batch_size: 1\nsequence_len: 1024\nadapter: lora\nlora_r: 16\n"
            "lora_target_modules:\n  - q_proj\n  - v_proj\ngradient_checkpointing: offload\n"
            "sequence_parallel_degree: 2\n")
    path.write_text(text)
    got = values(axolotl.load(str(path), text))
    assert got["recompute"] == "full" and got["offload_activations"] is True
    assert got["lora_targets"] == "qkvo" and got["cp"] == 2
    text = text.replace("  - v_proj\n", "  - down_proj\n")
    assert values(axolotl.load(str(path), text))["lora_targets"] == "all-linear"


def test_moe_without_ep_stays_silent_on_a_run_that_fits_with_room(capsys):
    """gpt-oss-120b FSDP2 with offload on 16 GPUs (dp_shard_size 16) peaks far under the GPU:
    ML601 used to warn anyway; expert parallelism only helps a run that does not fit."""
    from memlint.cli import main

    code = main(["check", real("gpt-oss-gpt-oss-120b-fft-fsdp2-offload.yaml"), "--model",
                 os.path.join(HF, "gpt-oss-120b.json"), "--set", "world_size=16",
                 "--format", "json"])
    doc = json.loads(capsys.readouterr()[0])
    assert code == 0
    assert doc["estimates"][0]["peak_bytes"] < 0.9 * doc["estimates"][0]["gpu"]["capacity_bytes"]
    assert "ML601" not in {d["code"] for d in doc["diagnostics"]}


def test_expert_parallel_is_its_own_mesh_axis(capsys):
    """qwen3_30ba3b_ep_fsdp_fft_4gpu: expert_parallel_size 2 × dp_shard_size 2 on 4 GPUs
    (axolotl utils/distributed.py: EP consumes part of the world before dp_shard). Before: a
    false ML502 (1·2 = 2 of 4 GPUs) and the experts counted unsharded."""
    from memlint.cli import main

    path = real("expert_parallel-qwen3_30ba3b_ep_fsdp_fft_4gpu.yaml")
    got = values(load(path))
    assert got["ep"] == 2 and got["dp_shard"] == 4 and got["model"].startswith("Qwen/Qwen3-30B")
    code = main(["check", path, "--set", "world_size=4", "--format", "json"])
    doc = json.loads(capsys.readouterr()[0])
    assert code == 0 and not {"ML502", "ML101"} & {d["code"] for d in doc["diagnostics"]}
    assert doc["estimates"][0]["peak_bytes"] < doc["estimates"][0]["gpu"]["capacity_bytes"]


def test_real_project_layout_finds_deepspeed_configs_at_the_project_root():
    """fixtures/real-world keeps axolotl's layout (SOURCES.md there): examples/mistral/
    bigstral-ds-zero3.yaml names deepspeed_configs/zero3_bf16_cpuoffload_params.json, which
    axolotl opens from its working directory, the project root two folders up."""
    corpus = os.path.join(ROOT, "fixtures", "real-world", "axolotl-ai-cloud__axolotl")
    path = os.path.join(corpus, "examples", "mistral", "bigstral-ds-zero3.yaml")
    partials = load_with_references(path)
    assert [os.path.relpath(p.source, corpus) for p in partials] == [
        os.path.join("deepspeed_configs", "zero3_bf16_cpuoffload_params.json"),
        os.path.join("examples", "mistral", "bigstral-ds-zero3.yaml")]
    scenario, diagnostics = build(partials)
    assert scenario.parallelism.zero == 3 and scenario.parallelism.offload_params == "cpu"
    assert not [d for d in diagnostics if d.severity == Severity.ERROR]


def test_context_and_tensor_parallel_sizes_from_the_fsdp_tp_cp_example():
    """distributed-parallel/qwen3-8b-fsdp-tp-cp.yaml: dp_shard 2 x cp 2 x tp 2 (axolotl's
    ParallelismConfig sizes, utils/schemas/config.py); cp and tp cut what each GPU holds."""
    path = real("distributed-parallel-qwen3-8b-fsdp-tp-cp.yaml")
    got = values(load(path))
    assert got["cp"] == 2 and got["tp"] == 2
    assert line_of(load(path), "cp") == 8


def test_alst_example_reads_cp_and_records_tiled_mlp():
    """alst/llama3-8b-fsdp2-alst.yaml: 500,000-token sequences over context_parallel_size 8, with
    tiled_mlp (recorded, not modelled: an info note, never an error)."""
    partial = load(real("alst-llama3-8b-fsdp2-alst.yaml"))
    got = values(partial)
    assert got["cp"] == 8 and got["seq_len"] == 500_000
    assert partial.extra["axolotl.tiled_mlp"].value is True
    notes = [d for d in partial.diagnostics if d.key == "tiled_mlp"]
    assert notes and all(d.severity == Severity.INFO for d in notes)


CORPUS = os.path.join(ROOT, "fixtures", "real-world", "axolotl-ai-cloud__axolotl")


def _check_json(rel, *extra):
    from helpers import check_json

    return check_json(CORPUS, rel, *extra)


def test_llama3_fft_8b_fits_the_single_48gb_gpu_its_readme_names():
    """axolotl examples/llama-3/README.md (axolotl-ai-cloud/axolotl@3d1f5fa): "[Full Fine
    Tune](./fft-8b.yaml) - Single GPU @ 48GB VRAM". fft-8b.yaml (fixtures/real-world) trains
    Llama-3-8B in bf16 with optimizer: paged_adamw_8bit, whose states bitsandbytes keeps in CUDA
    unified memory (optim/optimizer.py get_state_buffer -> F.get_paged) as uint8 codes with an
    fp32 absmax per 256 elements, updated by a fused kernel. memlint counted them as 1-byte
    foreach AdamW moments on the GPU plus 7.5 GiB of foreach temporaries: 55.6 GiB, an OOM on
    a 48 GB L40S."""
    code, report = _check_json("examples/llama-3/fft-8b.yaml", "--gpu", "L40S")
    assert code == 0, report["diagnostics"]
    assert not [d for d in report["diagnostics"] if d["code"] == "ML101"]
    estimate = report["estimates"][0]
    assert estimate["peak_bytes"] <= 48 * 1024**3
    terms = {t["name"] for s in estimate["stages"] for t in s["terms"]}
    assert "optimizer.step_temporaries" not in terms


def test_paged_and_block_quantized_optimizer_settings():
    partial = load(os.path.join(CORPUS, "examples/llama-3/fft-8b.yaml"))
    got = values(partial)
    assert got["optimizer_state_dtype"] == "int8" and got["optimizer_paged"] is True


def test_llama4_scout_qlora_fits_the_single_h100_its_readme_measured():
    """axolotl examples/llama-4/README.md: "Our Single H100 implementation for Llama 4 Scout uses
    only 64.5GB VRAM for post-training with 4k context length" (scout-qlora-single-h100-flex.yaml,
    WandB run wpie7dkj). The model is axolotl-quants' NF4 upload (its config.json's
    quantization_config); LoRA adapts attention and the shared expert, not the 16 routed
    experts, so 0.12B parameters train; the checkpoints go to the host
    (gradient_checkpointing: offload). memlint: 59.6 GiB on the device (64.0 GB)."""
    code, report = _check_json("examples/llama-4/scout-qlora-single-h100-flex.yaml",
                               "--gpu", "H100-80GB")
    assert code == 0 and not [d for d in report["diagnostics"]
                              if d["code"] in ("ML101", "ML006")]
    estimate = report["estimates"][0]
    assert estimate["peak_bytes"] <= 80 * 1024**3
    assert abs(estimate["peak_bytes"] - 64.5e9) / 64.5e9 < 0.10
    assert estimate["params"]["trainable"] < 0.2e9
    # offloaded checkpoints cost ~1%: no "offload when it fits" advice
    assert not [d for d in report["diagnostics"] if d["code"] == "ML605"]


def test_llama4_scout_qlora_fsdp2_fits_the_four_h100_its_readme_measured():
    """Same README: "Multi-GPU (4xH100) for Llama 4 Scout uses 62.8GB VRAM/GPU @ 4k context
    length" (scout-qlora-flexattn-fsdp2.yaml: FSDP2 full shard, micro batch 2, full-vocabulary
    logits: no Cut-Cross-Entropy plugin in this one). memlint: 53.3 GiB per GPU (57.2 GB)."""
    code, report = _check_json("examples/llama-4/scout-qlora-flexattn-fsdp2.yaml",
                               "--gpu", "H100-80GB", "--world-size", "4")
    assert code == 0 and not [d for d in report["diagnostics"] if d["code"] == "ML101"]
    estimate = report["estimates"][0]
    assert estimate["peak_bytes"] <= 80 * 1024**3
    assert abs(estimate["peak_bytes"] - 62.8e9) / 62.8e9 < 0.15
