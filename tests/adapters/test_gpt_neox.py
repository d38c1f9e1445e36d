"""gpt-neox YAML adapter: real configs of EleutherAI/gpt-neox (fixtures/real-world/
EleutherAI__gpt-neox, SOURCES.md there), mapped as gpt-neox at ea7aefd8 reads them
(megatron/neox_arguments/arguments.py, neox_args.py; megatron/model/transformer.py;
megatron/tokenizer/tokenizer.py)."""
from __future__ import annotations

import json
import os

import pytest

import memlint
from memlint.adapters import gpt_neox
from memlint.adapters.registry import detect_format
from memlint.diagnostics import Severity
from memlint.engine import LintConfig
from memlint.memory.context import resolve_context
from memlint.runs import Planner
from memlint.scenario import build
from helpers import padded_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "fixtures", "real-world")
NEOX = os.path.join(CORPUS, "EleutherAI__gpt-neox", "configs")
SHARED = os.path.join(ROOT, "fixtures", "shared-real")


def real(name: str) -> str:
    return os.path.join(NEOX, name)


def load(path: str):
    with open(path, encoding="utf-8") as handle:
        return gpt_neox.load(path, handle.read())


def values(partial) -> dict:
    return {k: s.value for k, s in partial.settings.items()}


def line_of(path: str, text: str) -> int:
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if text in line:
                return number
    raise AssertionError(f"{text!r} not in {path}")


def errors(partial) -> list:
    return [d for d in partial.diagnostics if d.severity == Severity.ERROR]


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------------------------------------
# Detection


def test_real_gpt_neox_configs_are_detected():
    for name in ("pythia/6-9B.yml", "13B.yml", "20B.yml", "local_setup.yml", "125M.yml"):
        path = real(name)
        assert detect_format(path, open(path, encoding="utf-8").read()) is gpt_neox, name


def test_other_yaml_formats_of_the_corpus_are_not_claimed():
    """axolotl, LLaMA-Factory, HF Trainer / TRL recipes, Megatron YAML, accelerate: none is read
    as gpt-neox (every YAML of the real-world corpus whose verdict names another format)."""
    with open(os.path.join(CORPUS, "verdicts.json"), encoding="utf-8") as handle:
        files = json.load(handle)["files"]
    checked = 0
    for name, entry in files.items():
        if not name.endswith((".yml", ".yaml")) or entry["format"] in gpt_neox.FORMATS:
            continue
        path = os.path.join(CORPUS, name)
        with open(path, encoding="utf-8", errors="replace") as handle:
            assert not gpt_neox.detect(path, handle.read()), name
        checked += 1
    assert checked >= 50


# ---------------------------------------------------------------------------------------------
# Key mapping on real files


def test_pythia_6_9b_maps_every_memory_key():
    """configs/pythia/6-9B.yml: model-parallel 2, pipe 1, micro 8 x gas 2, fp16, checkpointed
    activations, ZeRO-1, Adam, flash attention; keys written with '-'."""
    path = real("pythia/6-9B.yml")
    partial = load(path)
    got = values(partial)
    assert not errors(partial)
    assert got["framework"] == "deepspeed"
    assert got["tp"] == 2 and got["pp"] == 1
    assert got["micro_batch"] == 8 and got["grad_accum"] == 2 and got["seq_len"] == 2048
    assert got["precision"] == "fp16" and got["recompute"] == "full"
    assert got["zero"] == 1 and got["optimizer"] == "adamw" and got["attention"] == "flash"
    assert got["model.num_hidden_layers"] == 32 and got["model.hidden_size"] == 4096
    assert got["model.num_attention_heads"] == 32 and got["model.num_key_value_heads"] == 32
    assert got["model.intermediate_size"] == 4 * 4096 and got["model.gated_mlp"] is False
    assert got["model.tie_word_embeddings"] is False and got["model.learned_positions"] == 0
    assert got["model.norm"] == "layernorm" and got["model.attention_bias"] is True
    # 50277 tokens (HFTokenizer, the 20B tokenizer) padded to 128 x model-parallel 2
    assert got["model.vocab_size"] == 50277 and got["model.vocab_pad_multiple"] == 128
    assert padded_vocab(build([partial])[0]) == 50432
    settings = partial.settings
    assert settings["tp"].prov.line == line_of(path, '"model-parallel-size"')
    assert settings["model.num_hidden_layers"].prov.line == line_of(path, '"num-layers"')
    assert settings["precision"].prov.line == line_of(path, '"enabled": true')
    assert settings["zero"].prov.line == line_of(path, '"stage": 1')
    assert settings["recompute"].prov.line == line_of(path, '"checkpoint-activations"')
    assert settings["micro_batch"].prov.line == line_of(path, "train_micro_batch_size_per_gpu")
    # the ZeRO block goes through the DeepSpeed adapter's own reader
    assert partial.extra["deepspeed.reduce_bucket_size"].value == 1260000000


def test_defaults_are_gpt_neox_own_and_reported():
    """configs/2-7B.yml gives no no-weight-tying, activation, tokenizer: gpt-neox's defaults
    (tied embeddings, gelu, GPT-2 BPE 50257 -> 50304) apply and are listed as assumed."""
    partial = load(real("2-7B.yml"))
    got = values(partial)
    assert got["model.tie_word_embeddings"] is True
    assert got["model.hidden_act"] == "gelu" and got["model.vocab_size"] == 50257
    assert padded_vocab(build([partial])[0]) == 50304
    assumed = [d for d in partial.diagnostics if d.message.startswith("gpt-neox defaults")]
    assert assumed and "no_weight_tying = False" in assumed[0].message
    assert "tokenizer_type = GPT2BPETokenizer" in assumed[0].message


def test_global_attention_is_materialized_and_learned_positions_counted(tmp_path):
    """configs/125M.yml uses attention_config global (the fused masked softmax keeps the
    scores); a learned pos_emb (gpt-neox's default) adds max_position_embeddings x hidden."""
    got = values(load(real("125M.yml")))
    assert got["attention"] == "eager"
    path = write(tmp_path, "learned.yml", '{"num_layers": 2, "hidden_size": 64, '
                 '"num_attention_heads": 4, "seq_length": 128, "max_position_embeddings": 256}\n')
    got = values(load(path))
    assert got["model.learned_positions"] == 256 and got["precision"] == "fp32"
    assert got["zero"] == 0 and got["pp"] == 1


def test_swiglu_width_follows_parallel_mlp(tmp_path):
    """transformer.py ParallelMLP: a gated activation takes 2/3 of intermediate_size, halves it
    and rounds up to mlp_multiple_of (Llama-2-7B in gpt-neox: 32768 -> 11008)."""
    path = write(tmp_path, "llama.yml", """{
  "num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_kv_heads": 8,
  "seq_length": 4096, "max_position_embeddings": 4096, "pos_emb": "rotary",
  "intermediate_size": 32768, "activation": "swiglu", "mlp_multiple_of": 256,
  "norm": "rmsnorm", "use_bias_in_attn_linear": false, "use_bias_in_mlp": false,
  "no_weight_tying": true, "make_vocab_size_divisible_by": 1, "tokenizer_type": "SPMTokenizer",
  "bf16": {"enabled": true}, "sequence_parallel": true, "model_parallel_size": 2,
}
""")
    partial = load(path)
    got = values(partial)
    assert not errors(partial)
    assert got["model.intermediate_size"] == 11008 and got["model.gated_mlp"] is True
    assert got["model.num_key_value_heads"] == 8 and got["model.norm"] == "rmsnorm"
    assert got["model.vocab_size"] == 32000 and got["precision"] == "bf16" and got["sp"] is True


# ---------------------------------------------------------------------------------------------
# Parameter counts against the published Pythia numbers


# Total parameters of the Pythia suite (Biderman et al. 2023, the model table of the Pythia
# README / model cards): 70M 70,426,624; 160M 162,322,944; 410M 405,334,016;
# 1.4B 1,414,647,808; 6.9B 6,857,302,016.
PYTHIA = {"70M": 70_426_624, "160M": 162_322_944, "410M": 405_334_016,
          "1-4B": 1_414_647_808, "6-9B": 6_857_302_016}


@pytest.mark.parametrize("name,total", sorted(PYTHIA.items()))
def test_pythia_parameter_count_matches_published(name, total):
    scenario, _diags = build([load(real(f"pythia/{name}.yml"))])
    assert resolve_context(scenario).counts.total == total


def test_mistral_7b_with_the_older_llama_mlp_type_matches_its_published_count():
    """configs/mistral/7B.yml writes `mlp_type: llama` (gpt-neox before 0d4bdb96: a SiLU-gated
    MLP without biases, width intermediate_size 14336), GQA with 8 KV heads, the SentencePiece
    vocabulary of 32000: Mistral-7B-v0.1 has 7,241,732,096 parameters (its HF model)."""
    partial = load(real("mistral/7B.yml"))
    got = values(partial)
    assert got["model.gated_mlp"] is True and got["model.mlp_bias"] is False
    assert got["model.intermediate_size"] == 14336 and got["model.num_key_value_heads"] == 8
    scenario, _diags = build([partial])
    assert resolve_context(scenario).counts.total == 7_241_732_096


def test_llama_30b_swiglu_width():
    """configs/llama/30B.yml: intermediate_size 53248 with swiglu and mlp_multiple_of 256 ->
    17920, LLaMA-30B's MLP width."""
    assert values(load(real("llama/30B.yml")))["model.intermediate_size"] == 17920


def test_a_model_only_file_gets_no_memory_verdict_alone():
    """configs/llama2/70B.yml gives the architecture only (the README launches it with
    llama/train_config.yml and local_setup.yml): alone it is a model, not a run, so no OOM
    verdict on gpt-neox's defaults."""
    partial = load(real("llama2/70B.yml"))
    assert partial.fmt == gpt_neox.MODEL_FORMAT
    result = memlint.check([real("llama2/70B.yml")])
    assert not [d for d in result.diagnostics if d.severity == Severity.ERROR]
    assert any(d.code == "ML006" for d in result.diagnostics)


def test_shared_gpt_neox_fixtures_load_without_errors_and_nemo_is_not_claimed():
    """fixtures/shared-real/gpt-neox: configs of gpt-neox at ea7aefd8 itself (SOURCES.md
    there); the NeMo Megatron YAMLs beside them (nested `model:` keys) are not gpt-neox."""
    folder = os.path.join(SHARED, "gpt-neox")
    names = sorted(n for n in os.listdir(folder) if n.endswith(".yml"))
    assert len(names) >= 10
    for name in names:
        partial = load(os.path.join(folder, name))
        assert partial.fmt in gpt_neox.FORMATS and not errors(partial), name
    nemo = os.path.join(SHARED, "nemo")
    for name in os.listdir(nemo) if os.path.isdir(nemo) else ():
        path = os.path.join(nemo, name)
        assert not gpt_neox.detect(path, open(path, encoding="utf-8").read()), name


def test_pythia_12b_at_the_pinned_commit_matches_published():
    """configs/pythia/12B.yml at ea7aefd8 (36 layers, model-parallel 4: 50277 tokens padded to
    a multiple of 512 = 50688): 11,846,072,320 parameters (the Pythia model table)."""
    partial = load(os.path.join(SHARED, "gpt-neox", "gpt-neox__configs-pythia-12B.yml"))
    assert values(partial)["model.vocab_size"] == 50277
    scenario, _diags = build([partial])
    assert padded_vocab(scenario) == 50688
    assert resolve_context(scenario).counts.total == 11_846_072_320


# ---------------------------------------------------------------------------------------------
# Runs of several files (deepy.py train.py a.yml b.yml)


def test_run_of_several_files_is_one_config():
    """pythia/1-4B.yml + local_setup.yml: the vocab file of the second (GPT-2 BPE) is used with
    the model of the first; each key keeps its own file and line."""
    partials = Planner().load([real("pythia/1-4B.yml"), real("local_setup.yml")], LintConfig())
    assert [p.fmt for p in partials] == ["gpt-neox", "gpt-neox"]
    got = values(partials[0])
    assert got["model.num_hidden_layers"] == 24 and got["micro_batch"] == 16
    assert not partials[1].settings
    assert not [d for p in partials for d in p.diagnostics if d.severity == Severity.ERROR]
    est = memlint.estimate([real("pythia/1-4B.yml"), real("local_setup.yml")], world_size=64,
                           gpu="A100-40GB")
    # Pythia-1.4B was trained on 64 GPUs ("# batch size (trained on 64 gpus)" in the file);
    # the vocab file is GPT-2's here: 50257 -> 50304 rows
    assert est.fits


def test_a_key_two_files_give_is_refused(tmp_path):
    """NeoXArgs.from_ymls: 'Conf file ... has the following duplicate keys' (ValueError)."""
    first = write(tmp_path, "model.yml", '{"num-layers": 2, "hidden_size": 64, '
                  '"num_attention_heads": 4, "seq_length": 128, "max_position_embeddings": 128,'
                  ' "train_micro_batch_size_per_gpu": 1}\n')
    second = write(tmp_path, "setup.yml", '{"num_layers": 4, "data_path": "x", '
                   '"vocab_file": "v.json", "gpt_j_residual": true}\n')
    partials = Planner().load([first, second], LintConfig())
    found = [d for p in partials for d in p.diagnostics if d.severity == Severity.ERROR]
    assert [(d.code, d.line) for d in found] == [("ML010", 1)]
    assert os.path.basename(found[0].path) == "setup.yml"
    # each file alone is fine
    assert not errors(load(second))


# ---------------------------------------------------------------------------------------------
# What gpt-neox refuses (errors), and what it does not (warnings at most)

BASE = ('"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "seq_length": 128, '
        '"max_position_embeddings": 128, "train_micro_batch_size_per_gpu": 1, ')


@pytest.mark.parametrize("value,precision", [("fp16", "fp16"), ("bfloat16", "bf16"),
                                             ("fp32", "fp32"), ("BFloat16", "bf16"),
                                             ("FP16", "fp16")])
def test_each_precision_gpt_neox_accepts_is_memlints(tmp_path, value, precision):
    """gpt-neox's precision Literal (CHOICES, matched case-insensitively) spelled through
    keys.dtype_name, as the adapter's own table did: fp16, bfloat16 -> bf16, fp32."""
    assert set(gpt_neox.CHOICES["precision"]) == {"fp16", "bfloat16", "fp32"}
    partial = load(write(tmp_path, "run.yml", "{" + BASE + f'"precision": "{value}"' + "}\n"))
    assert not errors(partial) and values(partial)["precision"] == precision


@pytest.mark.parametrize("extra,key", [
    ('"hidden_size": 66', "hidden_size"),
    ('"max_position_embeddings": 64', "max_position_embeddings"),
    ('"num_kv_heads": 3', "num_kv_heads"),
    ('"zero_optimization": {"allgather_partitions": true}', "zero_optimization"),
    ('"optimizer": {"type": "Adam"}', "optimizer"),
    ('"fp16": {"loss_scale": 0}', "fp16"),
    ('"precision": "bfloat16", "fp16": {"enabled": true}', "fp16"),
    ('"pos_emb": "yarn"', "pos_emb"),
    ('"num_layers": "2"', "num_layers"),
    ('"checkpoint_activations": "true"', "checkpoint_activations"),
    ('"moe_num_experts": 4, "zero_optimization": {"stage": 2}', "zero_optimization"),
])
def test_what_gpt_neox_refuses_is_an_error_at_its_line(tmp_path, extra, key):
    body = "{\n" + ", ".join(p for p in BASE.rstrip(", ").split(", ")
                             if not p.startswith(f'"{key}"')) + ",\n" + extra + "\n}\n"
    path = write(tmp_path, "bad.yml", body)
    partial = load(path)
    found = errors(partial)
    assert len(found) == 1, [d.message for d in partial.diagnostics]
    assert found[0].line == 3 and found[0].code == "ML004" and found[0].severity == Severity.ERROR


def test_unknown_keys_are_warnings_never_errors():
    """configs/19M.yml (gas) and 13B.yml (save-interval): keys of older gpt-neox versions."""
    for name in ("19M.yml", "13B.yml", "350M.yml"):
        partial = load(real(name))
        assert not errors(partial), name
        assert any(d.code == "ML003" and d.severity == Severity.WARNING
                   for d in partial.diagnostics), name


# ---------------------------------------------------------------------------------------------
# Verdicts on hardware the authors state


def test_gpt_neox_20b_fits_the_96_a100_40gb_it_was_trained_on():
    """configs/20B.yml: 'the configuration file for the GPT-NeoX-20B model as it was trained on
    96x 40GB A100 GPUs' (its first line; Black et al. 2022, section 3: twelve nodes of eight
    A100-SXM4-40GB). tp 2 x pp 4 x dp 12, ZeRO-1, fp16, full recompute: it fits."""
    est = memlint.estimate([real("20B.yml")], world_size=96, gpu="A100-40GB")
    assert est.fits
    assert est.peak_bytes < 40 * 1024**3
    result = memlint.check([real("20B.yml")], world_size=96, gpu="A100-40GB")
    assert not [d for d in result.diagnostics if d.severity == Severity.ERROR]


def test_gpt_neox_20b_on_one_node_does_not_fit():
    """The same config on one 8-GPU node (dp 1): ZeRO-1 has nothing to shard the fp32 master
    weights and moments over (12 bytes x 2.6B parameters per GPU): exceeds 40 GB."""
    result = memlint.check([real("20B.yml")], world_size=8, gpu="A100-40GB")
    assert "ML101" in {d.code for d in result.diagnostics if d.severity == Severity.ERROR}


def test_a_document_that_is_not_a_mapping_is_an_error_at_line_1(tmp_path):
    """NeoXArgs.from_ymls calls conf.items(): a YAML list stops it."""
    path = write(tmp_path, "list.yml", '- "num_layers": 2\n- "pipe_parallel_size": 1\n')
    partial = load(path)
    assert [(d.code, d.line, d.column) for d in errors(partial)] == [("ML002", 1, 1)]


def test_dropless_moe_experts_are_counted():
    """configs/125M-dmoe.yml: moe_num_experts 8 on every layer (moe_expert_interval 1), top-1
    (moe_top_k default), experts 4h wide without biases (megatron/model/moe_mlp.py
    ParallelGroupedMLP): 12 layers x 8 experts x 2 x 1024 x 4096 expert weights."""
    partial = load(real("125M-dmoe.yml"))
    got = values(partial)
    assert got["model.num_local_experts"] == 8 and got["model.num_experts_per_tok"] == 1
    assert got["model.moe_intermediate_size"] == 4096 and got["model.moe_layer_freq"] == 1
    assert not errors(partial)
    scenario, _diags = build([partial])
    counts = resolve_context(scenario).counts
    assert counts.experts == 12 * 8 * 2 * 1024 * 4096


def test_broken_flow_mapping_is_a_parse_error_at_its_line():
    """configs/finetuning_configs/6-9B.yml at 0966f31: a comma missing after "load" (line 3);
    PyYAML, which NeoXArgs.from_ymls uses, stops at line 4."""
    partial = load(real("finetuning_configs/6-9B.yml"))
    assert [(d.code, d.line) for d in errors(partial)] == [("ML001", 4)]


def test_zero_block_typos_are_warnings_from_the_deepspeed_schema():
    """configs/13B-zero3.yml (2021): 'stage3_param_persitance_threshold' (a typo) and
    sub_group_size 1e6 (text to PyYAML) in zero_optimization. Today's DeepSpeed refuses both
    (pydantic, extra keys forbidden); the DeepSpeed of that gpt-neox ignored them: warnings at
    their lines, never errors."""
    path = real("13B-zero3.yml")
    partial = load(path)
    assert not errors(partial)
    found = {(d.code, d.line) for d in partial.diagnostics
             if d.severity == Severity.WARNING and "zero_optimization" in d.message}
    assert ("ML003", line_of(path, "stage3_param_persitance_threshold")) in found
    assert ("ML002", line_of(path, '"sub_group_size"')) in found


def test_a_numeric_key_is_an_unknown_key_not_a_crash():
    """Fuzz-found (CI, slurm_125M.yml mutated): a YAML key that parses as a number (`-1:`)
    made the provenance label join an int: an internal error instead of an unknown-key warning."""
    text = ('{"num-layers": 2, "hidden-size": 64, "num-attention-heads": 4, "seq-length": 128,\n'
            ' "max-position-embeddings": 128, -1: 3}\n')
    partial = gpt_neox.load("neox.yml", text)
    unknown = [d for d in partial.diagnostics if d.code == "ML003"]
    assert unknown and "-1" in unknown[0].message and unknown[0].line == 2


@pytest.mark.parametrize("extra", ['"activation": "swiglu"', '"mlp_type": "llama"',
                                   '"expansion_factor": 2.5'])
def test_huge_mlp_sizes_are_integers_not_floats(extra):
    """Fuzz-found (bench/fuzz.py, llama2-70B.yml mutated): a 400-digit intermediate_size or hidden
    size went through float division (gpt-neox's int(ffn * 2/3)): OverflowError, an internal
    error. The widths are computed in integers now."""
    huge = "1" + "0" * 400
    for key in ("intermediate_size", "hidden_size"):
        text = ('{"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, '
                '"seq_length": 128, "max_position_embeddings": 128, ' + extra
                + f', "{key}": {huge}}}\n')
        gpt_neox.load("neox.yml", text)   # no exception
