"""What a Megatron launch runs: training, or a job that only loads a model (text generation,
evaluation, checkpoint conversion, data analysis, quantization).

memlint estimates training runs. A script that starts `tools/generate_samples_gpt.py` or
`tasks/eval_harness/evaluate.py` passes Megatron's flags too, but keeps no gradients or optimizer
states and often takes the model's shape from its checkpoint (the eval harness passes
`--num-layers -1` and friends as "dummy arguments to make megatron happy": Megatron-DeepSpeed
examples_deepspeed/MoE/ds_evalharness.sh at f4157be, read back by tasks/eval_harness/evaluate.py
override_args). Counting such a run as training gave out-of-memory errors of 1,600 GiB for a 1.3B
model; now it gets no memory verdict, with the reason, and its model-shape values are not judged
(a warning at most).

Also a Megatron test-case YAML with `MODE: inference` (tests/functional_tests/test_cases/*/
*inference*/model_config.yaml at d98e8a6: run by the inference launcher, not pretrain_gpt.py).
"""
from __future__ import annotations

import os

from memlint import lazy_re

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

# Entry-point file names (basename, without .py) of Megatron-LM, Megatron-DeepSpeed and their
# examples that do not train, by what they do.
_KINDS = (
    ("text generation", lazy_re.compile(
        r"(generat|text_generation|run_text_gen|inference|openai_server|chat|serve|server)")),
    ("evaluation", lazy_re.compile(r"(^|_)(eval|evaluate|evaluation|mmlu|validate|rw_eval|"
                              r"prompt_eval)($|_)")),
    ("checkpoint conversion", lazy_re.compile(r"(convert|converter|export|merge_mp|checkpoint_"
                                         r"inspector|combine_state_dicts|roundtrip)")),
    ("data analysis", lazy_re.compile(r"(analy[sz]e|preprocess|prepare_.*data)")),
    ("quantization or pruning", lazy_re.compile(r"(^quantize$|^prune$|offline_feature_extract)")),
)
# Entry points that train whatever their name says (finetuning on a task is training).
_TRAINING = lazy_re.compile(r"^(pretrain_.*|train.*|finetune.*|.*_train(ing)?(_.*)?|main)$")

# Model-shape flags such jobs may leave as placeholders for the checkpoint's values.
SHAPE_FLAGS = frozenset(("--num-layers", "--hidden-size", "--num-attention-heads",
                         "--seq-length", "--max-position-embeddings", "--ffn-hidden-size",
                         "--kv-channels", "--num-query-groups"))


# tasks/main.py runs a finetuning or an evaluation by --task (Megatron-DeepSpeed tasks/main.py
# at f4157be: LAMBADA / WIKITEXT103 go to tasks/zeroshot_gpt, ICT-ZEROSHOT-NQ / RETRIEVER-EVAL to
# tasks/orqa evaluation; RACE, the GLUE tasks and RET-FINETUNE-NQ finetune).
EVALUATION_TASKS = frozenset(("LAMBADA", "WIKITEXT103", "ICT-ZEROSHOT-NQ", "RETRIEVER-EVAL"))


def kind(script: str, task: Optional[str] = None) -> Optional[str]:
    """What the entry point does when it is not training, else None."""
    name = os.path.basename(script)
    if not name.endswith(".py"):
        return None
    stem = name[:-3]
    parent = os.path.basename(os.path.dirname(script))
    if stem == "main" and parent == "msdp":
        return "text generation"   # tasks/msdp/main.py: prompting and evaluation, no training
    if stem == "main" and task is not None and task.strip("'\"") in EVALUATION_TASKS:
        return "evaluation"
    if stem.startswith(("pretrain_", "train", "finetune")) and "\n" not in stem:
        return None   # what _TRAINING matches first, without compiling it (start-up)
    if _TRAINING.match(stem):
        return None
    for label, pattern in _KINDS:
        if pattern.search(stem):
            return label
    return None


def reason(script: str, what: str) -> str:
    return (f"{os.path.basename(script)} is a {what} entry point, not training: memlint "
            "estimates the memory of training runs")
