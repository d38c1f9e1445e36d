"""Issue 27 class 2: frozen towers in Megatron's MIMO example. examples/mimo/train.py and
pretrain_mimo.py (NVIDIA/Megatron-LM at d98e8a6) build the model in Python from --model-provider
(examples/mimo/model_providers: a CLIP / Whisper encoder beside a Vicuna language model;
llava_vlm.py and llava_avlm.py freeze the encoders and the language model with
requires_grad = False). memlint does not run that code: it says so and gives no estimate,
rather than count the flags' language model as all trainable (148.7 GiB "does not fit" warnings
for run_vlm_train.sh), and never an error. Real files: examples/mimo/scripts at d98e8a6
(fixtures/real-world, SOURCES.md)."""
import json
import os

import pytest

from memlint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "fixtures", "real-world", "NVIDIA__Megatron-LM", "examples", "mimo",
                       "scripts")


def check(capsys, name: str) -> dict:
    assert main(["check", os.path.join(SCRIPTS, name), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name,provider,frozen", [
    ("run_vlm_train.sh", "llava_vlm", "the CLIP encoder and the language model"),
    ("run_avlm_train.sh", "llava_avlm", "the vision and audio encoders and the language model"),
])
def test_a_mimo_run_says_its_towers_are_built_and_frozen_in_python(capsys, name, provider,
                                                                    frozen):
    report = check(capsys, name)
    assert report["estimates"] == []
    [said] = [d for d in report["diagnostics"] if d["severity"] == "warning"
              and "MIMO model built in Python" in d["message"]]
    assert f"--model-provider {provider}" in said["message"] and frozen in said["message"]
    assert not [d for d in report["diagnostics"] if d["severity"] == "error"]
    assert list(report["summary"]["without_verdict"]) == ["architecture not counted"]


def test_a_module_launch_is_found(capsys):
    # run_hetero_nemotron_20l_mock_train.sh: `python -m torch.distributed.run ... -m
    # examples.mimo.pretrain_mimo --model-provider nemotron-moe-vlm ...`; the launch was not
    # found ("no model") while the script states a 20-layer hybrid MoE
    report = check(capsys, "run_hetero_nemotron_20l_mock_train.sh")
    assert list(report["summary"]["without_verdict"]) == ["architecture not counted"]
    assert any("--model-provider nemotron-moe-vlm" in d["message"]
               for d in report["diagnostics"])


def test_nvlms_vision_tower_is_said_to_be_left_out(capsys):
    # Issue 27 class 8: examples/multimodal/train.py builds the vision encoder from
    # --vision-model-type (examples/multimodal/multimodal_args.py, config.py at d98e8a6); NVLM's
    # InternViT-6B is not counted, which the estimate must say (it is too low, not only "too
    # high" for --freeze-ViT). fixtures/shared-real/megatron-args: NVLM's
    # pretrain_qwen20_72b_internvit_6b.sh at d98e8a6, its arguments transcribed
    path = os.path.join(ROOT, "fixtures", "shared-real", "megatron-args",
                        "multimodal_nvlm_pretrain_qwen20_72b_internvit_6b.txt")
    assert main(["check", path, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [said] = [d for d in report["diagnostics"] if d["code"] == "ML107"
              and "--vision-model-type internvit" in d["message"]]
    assert "InternViT-6B" in said["message"] and "too low" in said["message"]
