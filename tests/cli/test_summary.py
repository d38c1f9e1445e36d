"""Issue 27 class 6: no estimate is loud. Every check ends with a line counting the files that
got no memory verdict and why; --require-estimate makes that a failure; the text report prints
each diagnostic's severity; "problems" counts warnings and errors, not infos. Real files from
fixtures/real-world (SOURCES.md)."""
import json
import os

from memlint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "fixtures", "real-world")
NANOTRON = os.path.join(CORPUS, "huggingface__nanotron/examples/config_tiny_llama.yaml")
MOE = os.path.join(CORPUS, "microsoft__Megatron-DeepSpeed/examples_deepspeed/MoE/"
                   "ds_pretrain_gpt_125M_MoE64.sh")
GENERATE = os.path.join(CORPUS, "microsoft__Megatron-DeepSpeed/examples/detxoify_lm/"
                        "generate-1.3b.sh")
DS_ALONE = os.path.join(CORPUS, "EleutherAI__gpt-neox/configs/base_deepspeed.json")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_last_line_counts_the_files_without_a_verdict_by_reason(capsys):
    code, out, _ = run(capsys, "check", NANOTRON, GENERATE, MOE, DS_ALONE)
    assert code == 0
    last = out.splitlines()[-1]
    assert last == ("memlint: 4 files checked, 1 with a memory verdict, 3 without (1 format not "
                    "read: nanotron, 1 not a training run, 1 no model).")


def test_json_carries_the_summary(capsys):
    code, out, _ = run(capsys, "check", NANOTRON, MOE, "--format", "json")
    summary = json.loads(out)["summary"]
    assert summary["files"] == 2 and summary["with_verdict"] == 1
    [(reason, paths)] = summary["without_verdict"].items()
    assert reason == "format not read: nanotron" and paths[0].endswith("config_tiny_llama.yaml")


def test_machine_formats_print_the_line_on_stderr(capsys):
    code, out, err = run(capsys, "check", NANOTRON, "--format", "sarif")
    assert json.loads(out)["version"] == "2.1.0"
    assert err.strip().endswith("1 without (1 format not read: nanotron).")


def test_require_estimate_fails_on_each_file_without_a_verdict(capsys):
    code, out, _ = run(capsys, "check", GENERATE, MOE, "--require-estimate")
    assert code == 1
    [line] = [line for line in out.splitlines() if "--require-estimate" in line]
    assert "generate-1.3b.sh" in line and "ML006 error" in line
    assert "(not a training run)" in line
    # the files --skip-unknown skips are not required to have one
    code, out, _ = run(capsys, "check", NANOTRON, MOE, "--require-estimate", "--skip-unknown")
    assert code == 0, out


def test_severity_on_every_line_and_infos_are_no_problems(capsys):
    code, out, _ = run(capsys, "check", MOE)
    lines = out.splitlines()
    diagnostics = [line for line in lines if ": ML" in line]
    assert diagnostics and all(line.split(": ", 1)[1].split()[1] in ("error", "warning", "info")
                               for line in diagnostics)
    infos = sum(1 for line in diagnostics if line.split(": ", 1)[1].split()[1] == "info")
    problems = len(diagnostics) - infos
    assert infos and f"Found {problems} problems (" in out and f") and {infos} info." in out
