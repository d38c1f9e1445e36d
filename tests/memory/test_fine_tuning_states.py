"""States of Hugging Face fine-tuning runs: PEFT `modules_to_save` copies, what a bitsandbytes
base leaves unquantized, gradients kept across accumulated micro-batches, and the sharding an HF
recipe leaves to its launcher (memory/lora.py, memory/stage_states.py, memory/estimate.py,
memory/inputs.py)."""
from __future__ import annotations

import os

import pytest

import memlint
from memlint.adapters.registry import load_file
from memlint.hardware import lookup
from memlint.keys import module_names
from memlint.memory.runtime import compute_capability

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(ROOT, "fixtures", "real-world")
LORA_8B = os.path.join(REAL, "axolotl-ai-cloud__axolotl", "examples", "llama-3", "lora-8b.yml")
LLAMA3_EMBEDDING = 128_256 * 4_096          # Llama-3-8B's word embedding = its LM head
LLAMA3_NORMS = 32 * 2 * 4_096 + 4_096       # two RMSNorms per layer and the final one


def _terms(estimate, stage=0) -> dict:
    return {t.name: t for t in estimate.stages[stage].terms}


def _phase(estimate, name, stage=0):
    return next(p for p in estimate.stages[stage].phases if p.name == name)


@pytest.mark.parametrize("given,roles", [
    (["embed_tokens", "lm_head"], "embedding,output"),
    ("lm_head, embed_tokens", "embedding,output"),
    (["model.embed_tokens"], "embedding"),
    (["wte", "score"], "embedding,score"),
    (None, ""), ([], ""), ("", ""),
])
def test_modules_to_save_names_read_as_roles(given, roles):
    assert module_names(given) == roles


def test_modules_to_save_rejects_what_is_not_a_name():
    with pytest.raises(ValueError):
        module_names({"embed_tokens": 1})


def test_axolotl_lora_modules_to_save_trains_copies_of_embedding_and_head():
    """axolotl examples/llama-3/lora-8b.yml: `lora_modules_to_save: [embed_tokens, lm_head]`
    (added because it sets a pad token). PEFT wraps each in a ModulesToSaveWrapper that keeps the
    frozen original and trains a deep copy, so 2 x 525M parameters are trained in full beside the
    LoRA adapters: weights, gradients and 8-bit AdamW states of their own."""
    estimate = memlint.estimate([LORA_8B], gpu="H100-80GB")
    terms = _terms(estimate)
    copies = 2 * LLAMA3_EMBEDDING
    assert terms["weights.modules_to_save"].bytes == copies * 2            # bf16, as loaded
    assert terms["gradients.modules_to_save"].bytes == copies * 2
    assert terms["optimizer.moments.modules_to_save"].bytes == 2 * (copies + -(-copies // 256) * 4)
    lora = estimate.params["trainable"] - copies
    assert 0 < lora < 0.1e9       # the rank-32 adapters on every linear: 84M
    assert "peft" in terms["weights.modules_to_save"].source


def test_int8_base_keeps_embedding_head_and_norms_in_bf16():
    """load_in_8bit: bitsandbytes replaces nn.Linear modules only and transformers keeps the
    output layer out of the conversion, so the embedding, LM head and norms stay bf16."""
    terms = _terms(memlint.estimate([LORA_8B], gpu="H100-80GB"))
    kept = 2 * LLAMA3_EMBEDDING + LLAMA3_NORMS
    assert terms["weights.frozen_unquantized"].bytes == kept * 2
    assert terms["weights.frozen"].bytes == 8_030_261_248 - kept        # 1 B per int8 weight
    assert "get_keys_to_not_convert" in terms["weights.frozen_unquantized"].source


def test_gradients_accumulated_over_micro_batches_are_held_in_the_next_forward():
    """HF Trainer clears `.grad` only after the optimizer step, so from the second accumulated
    micro-batch on, the forward and backward run beside the gradients."""
    keys = dict(model="llama3-8b", framework="hf", precision="bf16", micro_batch=1, seq_len=1024,
                lora_rank=16, world_size=1)
    one = memlint.estimate(grad_accum=1, **keys)
    four = memlint.estimate(grad_accum=4, **keys)
    grads = sum(t.bytes for t in _phase(four, "forward_end").terms if t.component == "gradients")
    assert grads > 0
    assert not [t for t in _phase(one, "forward_end").terms if t.component == "gradients"]
    assert four.peak_bytes > one.peak_bytes


def test_llama3_lora_8b_cannot_fit_the_11gb_its_readme_line_names():
    """axolotl examples/llama-3/README.md: "[LoRA](./lora-8b.yml) - Single GPU @ 11GB VRAM". The
    line dates from the commit that added the example (15f7910, 2024-04-18), when lora-8b.yml
    still trained NousResearch/Llama-2-7b-hf; a day later it became Llama-3-8B (0e8f340), and
    in May 2024 it gained `lora_modules_to_save: [embed_tokens, lm_head]` (230e0ac). The file
    as it is now holds 10 GiB of weights alone (int8 linears, bf16 embedding and head, their
    trainable copies) before any activation, and 8,192 tokens of 128,256-entry logits: it does
    not fit 11 GB, whatever the sharding (a firm error, not one resting on defaults)."""
    result = memlint.check([LORA_8B], gpu="RTX-2080-Ti")
    oom = [d for d in result.diagnostics if d.code == "ML101"]
    assert oom and oom[0].severity.name == "ERROR"
    estimate = result.estimates[0]
    weights = sum(t.bytes for t in estimate.stages[0].terms if t.component == "weights")
    assert weights > 10 * 1024**3


def test_hf_recipe_without_deepspeed_or_fsdp_rests_on_unsharded_default():
    """An open-instruct recipe names no DeepSpeed or FSDP config: the accelerate config given at
    launch decides the sharding, so 'none' is memlint's default and the OOM verdict says so."""
    path = os.path.join(REAL, "allenai__open-instruct", "configs", "train_configs", "olmo2",
                        "olmo2_1124_13b_sft.yaml")
    result = memlint.check([path], recompute="full")
    assumed = {a["key"]: a for a in result.estimates[0].assumed}
    assert assumed["sharding"]["value"] == "none" and assumed["sharding"]["source"] == "default"
    oom = [d for d in result.diagnostics if d.code == "ML101"]
    assert oom and oom[0].severity.name == "WARNING"
    assert "sharding" in oom[0].message


def test_llamafactory_additional_target_and_script_modules_to_save(tmp_path):
    yaml = tmp_path / "sft.yaml"
    yaml.write_text("model_name_or_path: meta-llama/Meta-Llama-3-8B\nstage: sft\n"
                    "finetuning_type: lora\nadditional_target: embed_tokens,lm_head\n"
                    "cutoff_len: 1024\n")
    values = {k: s.value for k, s in load_file(str(yaml)).settings.items()}
    assert module_names(values["lora_modules_to_save"]) == "embedding,output"
    script = os.path.join(REAL, "ymcui__Chinese-LLaMA-Alpaca-2", "scripts", "training",
                          "run_sft.sh")
    values = {k: s.value for k, s in load_file(script).settings.items()}
    assert module_names(values["lora_modules_to_save"]) == "embedding,output"


@pytest.mark.parametrize("name,gib,cc", [
    ("RTX 3090", 24, (8, 6)), ("rtx-2080-ti", 11, (7, 5)), ("T4", 16, (7, 5)),
    ("L4", 24, (8, 9)), ("L40S", 48, (8, 9)), ("RTX-A6000", 48, (8, 6)), ("H20", 96, (9, 0)),
    ("H200", None, (9, 0)), ("RTX-5090", 32, (12, 0)),
])
def test_fine_tuning_gpus_in_the_catalog(name, gib, cc):
    gpu = lookup(name)
    assert gpu is not None
    if gib is not None:
        assert gpu.capacity_bytes == gib * 1024**3
    assert compute_capability(gpu.name) == cc


def test_unknown_gpu_is_a_warning_and_the_verdict_uses_the_default():
    result = memlint.check([LORA_8B], gpu="GTX 1080")
    unknown = [d for d in result.diagnostics if d.code == "ML004"]
    assert unknown and unknown[0].severity.name == "WARNING"
    estimate = result.estimates[0]
    assert estimate.gpu_name == "H100-80GB"
    assert {a["key"]: a["source"] for a in estimate.assumed}["gpu"] == "default"


@pytest.mark.parametrize("targets,kind", [
    (["q_proj", "v_proj"], "qkvo"),
    ("q_proj,k_proj,v_proj,o_proj", "qkvo"),
    (["self_attn.q_proj", "shared_expert.gate_proj"], "all-linear"),
    (["q_proj", "gate_proj", "down_proj"], "all-linear"),
    ("all", "all-linear"),
    (["self_attn.q_proj", "experts.gate_projs.[0-9]+$"], "all-linear+experts"),
    (["query_key_value", "dense"], "qkvo"),
    (["dense_h_to_4h"], "all-linear"),
])
def test_lora_target_names_read_as_kinds(targets, kind):
    from memlint.adapters._lora import target_kind

    assert target_kind(targets) == kind


def test_all_linear_lora_on_moe_adapts_router_and_shared_expert_not_routed_experts():
    """PEFT's all-linear wraps nn.Linear modules; transformers 5 holds routed experts as fused
    3-D parameters, so a MoE layer gets adapters on its attention, router and shared expert
    (Qwen1.5-MoE: shared expert 5632 wide with its sigmoid gate), and the routed experts only
    when a target names them (all-linear+experts)."""
    from memlint.memory.params import architecture, lora_params_per_layer
    arch = architecture({
        "model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
        "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
        "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 16,
        "num_experts": 60, "num_experts_per_tok": 4, "vocab_size": 151936})
    r, d = 8, 2048
    attention = r * (d + d) * 4
    base = attention + r * (d + 60) + 3 * r * (d + 5632) + r * (d + 1)
    assert lora_params_per_layer(arch, r, "qkvo") == [attention] * 2
    assert lora_params_per_layer(arch, r, "all-linear") == [base] * 2
    experts = 60 * 3 * r * (d + 1408)
    assert lora_params_per_layer(arch, r, "all-linear+experts") == [base + experts] * 2


# PEFT's own counts (peft 0.21.2, transformers 5.24: `get_peft_model(model, LoraConfig(r=16,
# target_modules="all-linear"))` on each catalog config built on the meta device, trainable
# parameters summed): a fused qkv or gate+up nn.Linear gets one adapter, not one per projection
@pytest.mark.parametrize("model_id,peft_count", [
    ("microsoft/Phi-3-mini-4k-instruct", 25_165_824),     # qkv, o, gate_up, down projections
    ("microsoft/Phi-3-medium-4k-instruct", 55_705_600),   # the same under GQA (40 heads, 10 kv)
    ("EleutherAI/pythia-160m", 2_359_296),                # query_key_value, dense, two MLP linears
    ("EleutherAI/pythia-1b", 8_388_608),
    ("openai-community/gpt2", 2_359_296),                 # c_attn, c_proj, c_fc, c_proj (Conv1D)
    ("meta-llama/Llama-2-7b-hf", 39_976_960),             # unfused: seven adapters a layer
])
def test_all_linear_lora_counts_one_adapter_per_fused_linear_as_peft_does(model_id, peft_count):
    from memlint.catalog.hub import catalog_lookup
    from memlint.memory.params import architecture, lora_params_per_layer

    entry, _ = catalog_lookup(model_id)
    arch = architecture(entry["config"])
    assert sum(lora_params_per_layer(arch, 16, "all-linear")) == peft_count


def test_qwen_v1_lora_adapts_its_fused_c_attn_once():
    """Qwen's finetune.py (QwenLM/Qwen@2df8e8a, LoraArguments) targets c_attn, c_proj, w1, w2:
    c_proj names both the attention output and the MLP down projection, so every linear of a
    block gets one adapter, and c_attn (3 x 4096 wide, fused) one, not three: r 64 on Qwen-7B
    (fixtures/hf/Qwen-7B.json) is 32 x 64 x (16384 + 8192 + 3 x 15104) = 143,130,624."""
    import json

    from memlint.memory.params import architecture, lora_params_per_layer

    with open(os.path.join(ROOT, "fixtures", "hf", "Qwen-7B.json"), encoding="utf-8") as f:
        arch = architecture(json.load(f))
    assert (arch.fused_qkv, arch.ffn, arch.head_dim, arch.qkv_bias, arch.mlp_bias) == (
        True, 11008, 128, True, False)
    per_layer = 64 * ((4096 + 3 * 4096) + (4096 + 4096) + 3 * (4096 + 11008))
    assert lora_params_per_layer(arch, 64, "all-linear") == [per_layer] * 32
    assert sum(lora_params_per_layer(arch, 64, "all-linear")) == 143_130_624


def test_a_checkpoint_saved_in_nf4_is_counted_in_nf4(tmp_path):
    """config.json's quantization_config (bitsandbytes load_in_4bit) is applied by transformers
    whatever the training config says: the base is NF4 without a load_in_4bit anywhere."""
    from memlint.scenario import build, overrides_partial

    config = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1408,
              "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8,
              "vocab_size": 32000, "quantization_config": {
                  "quant_method": "bitsandbytes", "load_in_4bit": True}}
    settings = [f"model.{k}={v}" for k, v in config.items() if k != "quantization_config"]
    settings += ["model.quantization_config.quant_method=bitsandbytes",
                 "model.quantization_config.load_in_4bit=true"]
    scenario, _ = build([overrides_partial(settings)])
    assert scenario.training.base_quant == "nf4"
    gptq = [s.replace("bitsandbytes", "gptq") for s in settings]
    scenario, _ = build([overrides_partial(gptq)])
    assert scenario.training.base_quant == "none"   # a GPTQ config without bits / group size
    # Qwen/Qwen-7B-Chat-Int4's config.json: quant_method gptq, bits 4, group_size 128
    int4 = gptq + ["model.quantization_config.bits=4", "model.quantization_config.group_size=128"]
    scenario, _ = build([overrides_partial(int4)])
    assert scenario.training.base_quant == "gptq"
    scenario, _ = build([overrides_partial(int4 + ["model.quantization_config.group_size=32"])])
    assert scenario.training.base_quant == "none"   # other group sizes are not modeled


@pytest.mark.parametrize("given,spec", [("last:2", "last:2"), (" first : 4 ", "first:4"),
                                        ("expanded:8", "expanded:8")])
def test_trainable_layer_specs(given, spec):
    from memlint.keys import layer_spec

    assert layer_spec(given) == spec


@pytest.mark.parametrize("bad", ["last", "middle:2", "last:0", 3, "last:-1"])
def test_trainable_layer_spec_rejects(bad):
    from memlint.keys import layer_spec

    with pytest.raises(ValueError):
        layer_spec(bad)


@pytest.mark.parametrize("spec,layers", [
    ("last:2", {30, 31}), ("first:3", {0, 1, 2}),
    ("expanded:8", {3, 7, 11, 15, 19, 23, 27, 31}),
])
def test_partial_fine_tune_picks_llamafactorys_layers(spec, layers):
    """model/adapter.py _setup_freeze_tuning: the last N, the first N (a negative
    freeze_trainable_layers), or LLaMA-Pro's every (L/N)-th layer ending at the last."""
    from memlint.memory.model import Model
    from memlint.scenario import build, overrides_partial

    scenario, _ = build([overrides_partial(["model=llama3-8b", "framework=hf", "train_base=false",
                                            f"trainable_layers={spec}", "world_size=1"])])
    assert Model(scenario).trained_layers == layers


def test_llamafactory_freeze_tuning_trains_its_layers_in_fp32_beside_a_bf16_base():
    """LLaMA-Factory examples/extras/llama_pro/llama3_freeze_sft.yaml: finetuning_type freeze,
    freeze_trainable_layers 8 with use_llama_pro. The trained layers are upcast to fp32 (4 B
    weights, 4 B gradients, 8 B AdamW moments); the frozen ones stay in the checkpoint's bf16,
    and only the fp32 ones get autocast copies. Counting the whole base frozen in fp32 (as
    memlint did) missed 1.74B parameters' gradients and moments and doubled the frozen bytes."""
    path = os.path.join(REAL, "hiyouga__LLaMA-Factory", "examples", "extras", "llama_pro",
                        "llama3_freeze_sft.yaml")
    estimate = memlint.estimate([path], model="meta-llama/Meta-Llama-3-8B", world_size=1)
    layer = 218_112_000      # one Llama-3-8B decoder layer
    trained = 8 * layer
    terms = _terms(estimate)
    assert estimate.params["trainable"] == trained
    assert terms["weights.trained_layers"].bytes == trained * 4
    assert terms["gradients.trained_layers"].bytes == trained * 4
    assert terms["optimizer.moments.trained_layers"].bytes == trained * 8
    assert terms["weights.frozen"].bytes == (8_030_261_248 - trained) * 2
    # full recompute (LLaMA-Factory's default gradient checkpointing): the cached copies of the
    # trained layers live until the forward's autocast exits, none at the backward's start
    phase = {p.name: {t.name: t for t in p.terms} for p in estimate.stages[0].phases}
    assert "activations.autocast_weight_copies" not in phase["backward_start"]
    copies = phase["forward_end"]["activations.autocast_weight_copies"]
    assert copies.inputs["head_params"] == 0
    assert copies.inputs["layer_linear_params"] == trained - 8 * 2 * 4096   # less the norms
    recomputed = phase["backward_recompute"]["activations.autocast_weight_copies"]
    assert recomputed.inputs["layer_linear_params"] == layer - 2 * 4096     # one layer's


def test_freeze_layer_counts_beyond_the_model_or_not_integers(tmp_path):
    """LLaMA-Factory trains range(max(0, L - n), L): a count past the model's depth trains every
    layer (a valid config, no error); a count that is not an integer is a warning."""
    from memlint.keys import layer_spec

    assert layer_spec("last:100000000000") == "last:100000000000"
    yaml = tmp_path / "freeze.yaml"
    yaml.write_text("model_name_or_path: meta-llama/Meta-Llama-3-8B\nstage: sft\n"
                    "finetuning_type: freeze\nfreeze_trainable_layers: 100000000000\n")
    result = memlint.check([str(yaml)], world_size=1)
    assert not [d for d in result.diagnostics if d.code in ("ML004", "ML009")]
    layer = 218_112_000
    assert result.estimates[0].params["trainable"] == 32 * layer
    yaml.write_text(yaml.read_text().replace("100000000000", "abc"))
    result = memlint.check([str(yaml)], world_size=1)
    warned = [d for d in result.diagnostics if "freeze_trainable_layers" in d.message]
    assert warned and warned[0].severity.name == "WARNING"


def test_unstated_sharding_matters_only_where_gpus_could_share_the_states():
    """With one GPU, ZeRO-3 removes nothing: the OOM is firm. With eight, the model is asked
    whether ZeRO-3 over them would fit (it does for OLMo-2-13B at 4,096 tokens with full
    recompute), so the verdict rests on the launcher's sharding and is a warning."""
    path = os.path.join(REAL, "allenai__open-instruct", "configs", "train_configs", "olmo2",
                        "olmo2_1124_13b_sft.yaml")
    one = memlint.check([path], recompute="full", world_size=1, gpu="H100-80GB")
    oom = [d for d in one.diagnostics if d.code == "ML101"]
    assert oom and oom[0].severity.name == "ERROR" and "sharding" not in oom[0].message
    eight = memlint.check([path], recompute="full", world_size=8, gpu="H100-80GB")
    oom = [d for d in eight.diagnostics if d.code == "ML101"]
    assert oom and oom[0].severity.name == "WARNING" and "sharding" in oom[0].message
