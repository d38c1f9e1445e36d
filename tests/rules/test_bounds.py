"""Issue 27 class 4: bound the unknowns. An OOM verdict that rests on defaults is re-estimated with
every default at its most memory-friendly plausible value at once (rules/bounds.py): an error
when it still does not fit there, else a warning that names the value that would flip it. The
HTML and Markdown reports never say "fits" beside an error that stops the launch.

Real files (fixtures/real-world, fixtures/shared-real; SOURCES.md): open-r1's OlympicCoder-7B SFT
recipe, DeepSpeedExamples' bing_bert DeepSpeed JSON, Megatron-LM's GPT-3 175B example."""
import os

from memlint.api import Options, check_paths
from memlint.cli import main
from memlint.diagnostics import Severity

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(ROOT, "fixtures", "real-world")
OLYMPIC_7B = os.path.join(REAL, "huggingface__open-r1", "recipes", "OlympicCoder-7B", "sft",
                          "config_v00.00.yaml")
BING_BERT = os.path.join(ROOT, "fixtures", "shared-real", "deepspeed",
                         "DeepSpeedExamples__training-bing_bert-deepspeed_bsz64k_lamb_config_"
                         "seq128.json")
GPT3 = os.path.join(REAL, "NVIDIA__Megatron-LM", "examples", "gpt3",
                    "train_gpt3_175b_distributed.sh")


def oom(path, model=None, *assignments):
    result = check_paths([path], Options(model=model, assignments=assignments))
    found = [d for d in result.diagnostics if d.code == "ML101"]
    return found[0] if found else None


def test_a_default_that_would_flip_the_verdict_is_named_with_its_value():
    # OlympicCoder-7B full SFT on 8 GPUs with no DeepSpeed/FSDP config: unsharded it is over an
    # 80 GiB GPU; ZeRO-3 over the 8 known GPUs (the launcher's choice) would make it fit
    d = oom(OLYMPIC_7B, None, "world_size=8", "gpu=H100-80GB")
    assert d.severity == Severity.WARNING
    assert "it would fit with sharding = ZeRO-3 over the known GPUs (" in d.message


def test_an_oom_no_assumed_value_could_fix_is_an_error_that_says_why():
    # Llama-3-70B unsharded on one GPU: even the states alone (any seq_len) with full recompute
    # on the largest GPU memlint knows are over: no default it assumed could make it fit
    d = oom(BING_BERT, "llama3-70b", "world_size=1")
    assert "no value memlint assumed could make it fit: even with seq_len any" in d.message
    assert "recompute full" in d.message and "the largest GPU memlint knows" in d.message
    # the config's sparse_attention is not modeled and could make the estimate too high (ML107):
    # that alone keeps it a warning; without it the verdict blocks
    assert d.severity == Severity.WARNING and "sparse_attention" in d.message


def test_the_bound_blocks_when_nothing_unmodeled_could_flip_it():
    d = oom(OLYMPIC_7B, "llama3-70b", "world_size=1")
    assert d.severity == Severity.ERROR
    assert "no value memlint assumed could make it fit" in d.message


def test_only_all_defaults_together_is_said_so():
    d = oom(BING_BERT, "llama3-8b", "world_size=8")
    assert d.severity == Severity.WARNING
    assert "it would fit only with all of" in d.message and "together" in d.message


def test_reports_never_say_fits_beside_an_error_that_stops_the_launch(capsys):
    # world size 8 against tp 8 x pp 16: Megatron refuses the layout (ML201); its memory fits
    for fmt, needle in (("markdown", "does not launch"), ("html", "does not launch")):
        code = main(["check", GPT3, "--format", fmt])
        out = capsys.readouterr()[0]
        assert code == 1 and needle in out
        assert "✅ fits" not in out and 'verdict ok">fits' not in out


# Issue 27 class 8: the softening for "sharding left to the launcher" applies only where the
# sharding really is unknown. open-r1's README launches its recipes with
# `accelerate launch --config_file recipes/accelerate_configs/{ddp,zero3}.yaml src/open_r1/sft.py
# --config <recipe>`: the accelerate config states the sharding and the world size.
ACCELERATE = os.path.join(REAL, "huggingface__open-r1", "recipes", "accelerate_configs")


def run_oom(paths, model=None, *assignments):
    from memlint.api import estimate_paths
    result = estimate_paths(paths, Options(model=model, assignments=assignments))
    found = [d for d in result.diagnostics if d.code == "ML101"]
    return found[0] if found else None


def test_a_ddp_launch_states_no_sharding_so_its_oom_is_firm():
    ddp = os.path.join(ACCELERATE, "ddp.yaml")    # distributed_type MULTI_GPU, num_processes 8
    d = run_oom([ddp, OLYMPIC_7B], None, "gpu=H100-80GB")
    assert d.severity == Severity.ERROR and "defaults" not in d.message
    # the recipe alone leaves the sharding to the launcher: a warning that says what flips it
    d = run_oom([OLYMPIC_7B], None, "gpu=H100-80GB", "world_size=8")
    assert d.severity == Severity.WARNING and "sharding" in d.message


def test_zero3_over_the_stated_processes_is_firm_when_the_states_do_not_fit():
    zero3 = os.path.join(ACCELERATE, "zero3.yaml")  # DEEPSPEED zero_stage 3, num_processes 8
    d = run_oom([zero3, OLYMPIC_7B], "llama3-70b", "gpu=H100-80GB")
    assert d.severity == Severity.ERROR
