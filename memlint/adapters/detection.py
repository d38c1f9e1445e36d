"""Which built-in adapter reads a file: each built-in adapter's detect(), kept apart from it.

Detection asks the adapters in order until one claims the file (adapters/registry.py). When each
test lived in its adapter, telling a file's format imported every adapter that could claim its
name: a launch script imported nine adapters (their flag tables, shell readers and records) to
be read by one, a YAML file eleven (issue 29: about a bare interpreter's start). Here the tests
need nothing but the file's name and text, so that detection imports only the adapter that
reads the file. Each adapter re-exports its own test as its `detect` (the adapter contract,
DESIGN.md); registry.DETECTORS maps an adapter to its test here, and an adapter without one (a
new or third-party adapter) is imported to be asked.

Each test looks at the name first, then at the text (the first 64 KB where the adapter reads no
further); none parses the file. Keep each test's cheap substring checks ahead of its regular
expressions (bulk speed: most files fail them).
"""
from __future__ import annotations

import os
import re

from memlint import lazy_re
from memlint.adapters._neighbours import ARGUMENT_KEYS, flag_given, training_arguments
from memlint.adapters._toplevel import top_level_keys
from memlint.loaders import load_json

#: Launch scripts by their extension (a name without one is tested on its text).
SCRIPT_EXT = (".sh", ".bash", ".slurm", ".sbatch")


def line_starts(text: str, *prefixes: str) -> bool:
    r"""Whether a line of `text` begins with one of `prefixes`: re.search(r"^(?:p1|p2)", text, re.M)
    for literal prefixes, without compiling a pattern (start-up: each costs a one-file check about
    0.5M instructions; `^` under re.M matches at the start and after each "\n")."""
    return any(text.startswith(p) or "\n" + p in text for p in prefixes)


_KEY_TAIL = "abcdefghijklmnopqrstuvwxyz_-"


def top_level_names(head: str) -> list:
    r"""[m.group(1) for m in re.finditer(r"^([a-z][a-z_-]+):", head, re.M)], without compiling
    it: a line's run of [a-z_-] after a first [a-z], at least two letters long, then a colon."""
    out = []
    for line in head.split("\n"):
        if line[:1] and line[0] in _KEY_TAIL[:26]:
            rest = line[1:].lstrip(_KEY_TAIL)
            size = len(line) - len(rest)
            if size >= 2 and rest[:1] == ":":
                out.append(line[:size])
    return out


# ---------------------------------------------------------------------------------------------
# memlint's own scenario files (adapters/native.py)

_NATIVE_YAML = lazy_re.compile(r"^(memlint|scenario)\s*:", re.M)
_NATIVE_PYPROJECT = lazy_re.compile(r"^[ \t]*\[[ \t]*tool\.memlint\.scenario[ \t]*\]", re.M)


def native(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    if name == "memlint.toml" or name.endswith(".memlint.toml"):
        return True
    if name.endswith((".memlint.yaml", ".memlint.yml")):
        return True
    if name == "pyproject.toml":
        return bool(_NATIVE_PYPROJECT.search(text))
    if name.endswith((".yaml", ".yml")):
        return ("memlint" in text or "scenario" in text) and bool(_NATIVE_YAML.search(text))
    return False


# ---------------------------------------------------------------------------------------------
# RL frameworks (adapters/easyr1.py, verl.py, openrlhf.py) and vLLM serving (vllm_serve.py)

_EASYR1_ENTRY = lazy_re.compile(r"-m[ \t]+verl\.trainer\.main(?=[ \t\\]|$)", re.M)


def easyr1(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    head = text[:65536]
    if name.endswith((".yaml", ".yml")):
        return bool(line_starts(head, "worker:") and re.search(r"^worker:\s*$", head, re.M)
                    and re.search(r"^\s+(actor|rollout):\s*$", head, re.M)
                    and re.search(r"^(algorithm|trainer|data):\s*$", head, re.M))
    if name.endswith(SCRIPT_EXT) or "." not in name:
        # the entry point's name first (start-up: the pattern compiles only where it can match)
        return ("verl.trainer.main" in head and bool(_EASYR1_ENTRY.search(head))
                and ("config=" in head or "worker." in head))
    return False


# NeMo-RL YAML (adapters/nemo_rl.py)

_NEMO_RL_SECTIONS = lazy_re.compile(r"^(grpo|dpo|sft|rm|ppo|distillation|loss_fn):[ \t]*(#.*)?$",
                                    re.M)
_NEMO_RL_DEFAULTS = lazy_re.compile(r"""^defaults:[ \t]*(['"]?)[\w./-]+\.ya?ml\1[ \t]*(#.*)?$""",
                                    re.M)
_NEMO_RL_POLICY = lazy_re.compile(r"^policy:[ \t]*(&\w+[ \t]*)?(#.*)?$", re.M)
_NEMO_RL_MODEL = lazy_re.compile(r"^[ \t]+model_name:", re.M)


def nemo_rl(path: str, text: str) -> bool:
    """A NeMo-RL YAML: an algorithm section (grpo, dpo, sft, ...) beside a top-level `policy:`
    mapping with a `model_name`, or beside a `defaults:` parent YAML (a recipe)."""
    name = os.path.basename(path).lower()
    if not name.endswith((".yaml", ".yml")) or ("policy:" not in text
                                                 and "defaults:" not in text):
        return False
    head = text[:65536]
    if not _NEMO_RL_SECTIONS.search(head):
        return False
    if "defaults:" in head and _NEMO_RL_DEFAULTS.search(head):
        return True
    return bool(_NEMO_RL_POLICY.search(head) and _NEMO_RL_MODEL.search(head))


# `python3 -m verl.trainer.main_ppo`, recipes on the same tree (`-m recipe.dapo.main_dapo`),
# or the file path (`python3 verl/trainer/main_ppo.py`)
_VERL_ENTRY = lazy_re.compile(r"(?:-m[ \t]+|[\s/])(?:verl\.trainer\.main_ppo|recipe\.[\w.]+\."
                              r"main_\w+|verl\.trainer\.main_\w+|verl/trainer/main_ppo\.py)\b")
#: verl entry points that do not run PPO-style training (generation / evaluation / SFT)
VERL_NOT_RL = ("verl.trainer.main_generation", "verl.trainer.main_eval",
               "verl.trainer.fsdp_sft_trainer", "verl.trainer.sft_trainer",
               "verl.trainer.main_generation_server")


def verl(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    head = text[:65536]
    if name.endswith((".yaml", ".yml")):
        # a line `actor_rollout_ref:`; the second test's first pattern needs one too
        root = line_starts(head, "actor_rollout_ref:")
        return root and "defaults:" in head or bool(root and
            re.search(r"^actor_rollout_ref:\s*$", head, re.M) and re.search(
                r"^(trainer|data|algorithm|critic):\s*$", head, re.M))
    if name.endswith(SCRIPT_EXT) or "." not in name:
        # each entry point _VERL_ENTRY names holds one of these (bulk speed, start-up: most
        # scripts hold none, and the pattern is not compiled)
        return (("verl.trainer.main_" in head or "verl/trainer/main_ppo.py" in head
                 or ("recipe." in head and ".main_" in head))
                and bool(_VERL_ENTRY.search(head))
                and not re.search(r"-m[ \t]+verl\.trainer\.main[ \t\\]", head)
                and not _verl_not_rl(head))
    return False


def _verl_not_rl(head: str) -> bool:
    modules = re.findall(r"-m[ \t]+(verl\.trainer\.[\w.]+|recipe\.[\w.]+)", head)
    return bool(modules) and all(m in VERL_NOT_RL for m in modules)


#: OpenRLHF's entry modules (`python -m openrlhf.cli.train_ppo_ray`)
OPENRLHF_ENTRY = lazy_re.compile(r"\bopenrlhf\.cli\.(train_\w+)")


def openrlhf(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    if not (name.endswith(SCRIPT_EXT) or "." not in name):
        return False
    head = text[:65536]
    # OPENRLHF_ENTRY's text always holds "openrlhf.cli.train_" (bulk speed: most scripts do not)
    return ("openrlhf.cli.train_" in head and bool(OPENRLHF_ENTRY.search(head))) or (
        "--pretrain" in head and bool(re.search(r"\btrain_(sft|dpo|rm|kto|ppo|ppo_ray)\.py\b",
                                                 head)))


_VLLM_COMMAND = lazy_re.compile(r"\bvllm\s+serve\b|\bvllm\.entrypoints\.openai\.api_server\b")
_VLLM_YAML_KEYS = ("gpu-memory-utilization", "tensor-parallel-size", "max-model-len",
                   "max-num-seqs", "kv-cache-dtype", "max-num-batched-tokens",
                   "pipeline-parallel-size")
# a training config's top-level keys: such a file is a trainer's, whatever engine keys it has
_VLLM_TRAINING_KEYS = {"learning-rate", "output-dir", "per-device-train-batch-size", "trainer",
                       "actor-rollout-ref", "stage", "finetuning-type", "num-train-epochs"}


def vllm_serve(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    head = text[:65536]
    if name.endswith((".yaml", ".yml")):
        # top-level flags, with dashes or underscores (FlexibleArgumentParser takes both)
        found = {name.replace("_", "-") for name in top_level_names(head)}
        if found & _VLLM_TRAINING_KEYS:
            return False
        engine = len(found & set(_VLLM_YAML_KEYS))
        return engine >= 3 or (engine >= 2 and "model" in found)
    if name.endswith(SCRIPT_EXT) or "." not in name:
        return "vllm" in head and bool(_VLLM_COMMAND.search(head))   # both forms name vllm
    return False


# ---------------------------------------------------------------------------------------------
# gpt-neox (adapters/gpt_neox.py): a YAML whose top-level keys (quoted or not, `_` or `-`) include
# gpt-neox's own. Only the top level counts (NeoXArgs is one flat namespace): nanotron nests
# `lr_decay_style` and `hidden_size` inside its sections, and was read as gpt-neox before
# (adapters/_toplevel.py).

_NEOX_STRONG = frozenset((
    "pipe_parallel_size", "gpt_j_residual", "no_weight_tying", "attention_config",
    "make_vocab_size_divisible_by", "pos_emb", "output_layer_parallelism",
    "checkpoint_validation_with_forward_pass", "train_data_paths", "data_impl",
    "scaled_upper_triang_masked_softmax_fusion", "bias_gelu_fusion", "rotary_pct",
    "output_layer_init_method", "lr_decay_style", "checkpoint_factor", "synchronize_each_layer",
    "sparsity_config"))
_NEOX_WEAK = frozenset((
    "model_parallel_size", "num_layers", "hidden_size", "num_attention_heads", "seq_length",
    "max_position_embeddings", "train_micro_batch_size_per_gpu", "zero_optimization",
    "tokenizer_type", "vocab_file", "merge_file", "data_path", "train_iters",
    "checkpoint_activations", "partition_activations", "tensorboard_dir", "log_dir"))
# other formats' top-level keys: axolotl, LLaMA-Factory / HF Trainer, accelerate, Megatron-LM
# YAML, NeMo (trainer / exp_manager beside a nested model:)
_NEOX_FOREIGN = frozenset(("base_model", "model_name_or_path", "distributed_type", "MODEL_ARGS",
                           "language_model", "finetuning_type", "compute_environment", "trainer",
                           "exp_manager"))


def gpt_neox(path: str, text: str) -> bool:
    if not os.path.basename(path).lower().endswith((".yaml", ".yml")):
        return False
    keys = {k.replace("-", "_") for k in top_level_keys(text)}
    if keys & _NEOX_FOREIGN:
        return False
    strong, weak = keys & _NEOX_STRONG, keys & _NEOX_WEAK
    if strong and len(strong) + len(weak) >= 2:
        return True
    # DeepSpeed's batch or ZeRO keys beside the model's in one YAML: only gpt-neox writes that
    if "num_layers" in weak and ("train_micro_batch_size_per_gpu" in weak
                                 or "zero_optimization" in weak):
        return True
    return "vocab_file" in weak and "data_path" in weak and len(weak) >= 3


# ---------------------------------------------------------------------------------------------
# LLaMA-Factory (adapters/llamafactory_v1.py, llamafactory.py)

_LF_V1_PLUGINS = frozenset(("dist_config", "peft_config", "kernel_config", "quant_config",
                            "init_config", "model_class"))


def llamafactory_v1(path: str, text: str) -> bool:
    if not os.path.basename(path).lower().endswith((".yaml", ".yml")):
        return False
    keys = top_level_keys(text)
    return "model" in keys and "model_name_or_path" not in keys and bool(
        keys & _LF_V1_PLUGINS) and (bool(keys & {"micro_batch_size", "cutoff_len",
                                                 "train_dataset"}))


_LF_WORDS = ("finetuning_type", "stage", "cutoff_len", "template", "lora_target",
             "quantization_bit")


def llamafactory(path: str, text: str) -> bool:
    if not os.path.basename(path).lower().endswith((".yaml", ".yml")):
        return False
    head = text[:65536]
    if "distributed_type:" in head or line_starts(head, "base_model:"):
        return False
    # set(re.findall(r"^(finetuning_type|stage|...):", head, re.M)): no word is another's prefix
    found = {word for word in _LF_WORDS if line_starts(head, word + ":")}
    return ("finetuning_type" in found or "cutoff_len" in found
            or ("stage" in found and "template" in found)) and line_starts(
        head, "model_name_or_path:")


# ---------------------------------------------------------------------------------------------
# DeepSpeed-Chat (adapters/deepspeed_chat.py) and ms-swift (ms_swift.py)

# flags only DeepSpeed-Chat's main.py defines (beside a main.py entry point)
_DSCHAT_OWN = lazy_re.compile(r"--(zero_stage|actor_zero_stage|critic_zero_stage|lora_dim|"
                              r"actor_lora_dim|data_split|num_padding_at_beginning|"
                              r"only_optimize_lora)\b")
_DSCHAT_MAIN = lazy_re.compile(r"\bmain\.py\b")


def deepspeed_chat(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    if not (name.endswith(SCRIPT_EXT) or ("." not in name and text.startswith("#!"))):
        return False
    head = text[:65536]
    # the substring tests first (bulk speed): `and` of side-effect-free tests, same answer
    return ("--model_name_or_path" in head or "--actor_model_name_or_path" in head) and (
        "main.py" in head and bool(_DSCHAT_MAIN.search(head))
        and len(set(_DSCHAT_OWN.findall(head))) >= 1)


#: ms-swift's training commands, and every command of its CLI (swift/cli/*.py)
MS_SWIFT_TRAINING = ("sft", "pt")
MS_SWIFT_COMMANDS = MS_SWIFT_TRAINING + ("rlhf", "infer", "deploy", "export", "eval", "sample",
                                         "app", "web-ui", "merge-lora", "rollout")
_SWIFT_COMMAND = lazy_re.compile(r"(?:^|[\s;&|(])(swift|megatron)\s+(%s)(?=\s|$)" % "|".join(
    re.escape(c) for c in MS_SWIFT_COMMANDS), re.M)
_SWIFT_ENTRY_TEXT = lazy_re.compile(r"swift/(?:megatron/)?cli/(%s)\.py\b" % "|".join(
    re.escape(c.replace("-", "_")) for c in MS_SWIFT_COMMANDS))
# keys only ms-swift's argument dataclasses have (swift/arguments/base_args/*.py, tuner_args.py):
# with `model` at the top of a YAML / JSON file, they make it an ms-swift arguments file
_SWIFT_ARGUMENTS_ONLY = frozenset(("tuner_type", "train_type", "model_author", "attn_impl",
                                   "rlhf_type", "freeze_vit", "freeze_llm", "freeze_aligner",
                                   "split_dataset_ratio", "padding_free"))
_SWIFT_RAY = frozenset(("use_ray", "device_groups", "colocate_groups", "train", "rollout"))


def ms_swift_arguments_file(path: str, text: str) -> bool:
    """True for a YAML / JSON ms-swift arguments file (`swift sft <this>`): a top-level `model`
    beside a key only ms-swift's arguments have."""
    if not os.path.basename(path).lower().endswith((".yaml", ".yml", ".json")):
        return False
    keys = top_level_keys(text)
    # a Ray config (use_ray, device_groups, train / rollout groups) places several roles on
    # groups of GPUs: not read
    return "model" in keys and bool(keys & _SWIFT_ARGUMENTS_ONLY) and not keys & _SWIFT_RAY


def ms_swift(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    if name.endswith((".yaml", ".yml", ".json")):
        return ms_swift_arguments_file(path, text)
    if not (name.endswith(SCRIPT_EXT) or ("." not in name and text.startswith("#!"))):
        return False
    head = text[:65536]
    # both patterns name swift or megatron: a script naming neither is not searched (bulk speed)
    found = ("swift" in head or "megatron" in head) and (
        _SWIFT_COMMAND.search(head) or _SWIFT_ENTRY_TEXT.search(head))
    return bool(found) and ("--model" in head or re.search(r"\.(ya?ml|json)\s*$", head, re.M)
                            is not None)


# ---------------------------------------------------------------------------------------------
# HF Trainer / TRL (adapters/hf_trainer.py)

_HF_ARG = lazy_re.compile(r"--(per_device_train_batch_size|per-device-train-batch-size|"
                          r"gradient_accumulation_steps|model_name_or_path|model-name-or-path)\b|"
                          r"llamafactory-cli\s+train\b")
# `torchrun train.py args.yaml`: a launcher word, then on the same line a script given its
# arguments file. Found from the file back to the launcher: one pattern with `[^\n]*` between
# them cost the line's length for every launcher word of it (quadratic).
_HF_ARGUMENTS_FILE = lazy_re.compile(r"\.py\s+[\w./-]+\.(json|ya?ml)\s*$", re.M)
_HF_LAUNCHER = lazy_re.compile(r"(torchrun|launch|deepspeed|python3?)\b")
_HF_NOT_MEGATRON = ("--tensor-model-parallel-size", "pretrain_gpt.py", "--num-layers",
                    "--micro-batch-size")


#: a literal each match of _HF_ARG holds (start-up: the pattern compiles only where one is)
_HF_ARG_WORDS = ("--per_device_train_batch_size", "--per-device-train-batch-size",
                 "--gradient_accumulation_steps", "--model_name_or_path", "--model-name-or-path",
                 "llamafactory-cli")


def _hf_launch(text: str) -> bool:
    if any(w in text for w in _HF_ARG_WORDS) and _HF_ARG.search(text):
        return True
    if ".py" not in text or not (".json" in text or ".yml" in text or ".yaml" in text):
        return False   # what each match of _HF_ARGUMENTS_FILE holds
    for found in _HF_ARGUMENTS_FILE.finditer(text):
        start = text.rfind("\n", 0, found.start()) + 1
        if _HF_LAUNCHER.search(text, start, found.start()):
            return True
    return False


def hf_trainer(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    head = text[:65536]
    if name.endswith(SCRIPT_EXT) or ("." not in name and head.startswith("#!")):
        # the whole script, as Megatron's detect reads it: a launch line may follow 64 KB
        return not any(s in text for s in _HF_NOT_MEGATRON) and _hf_launch(text)
    if name.endswith((".yaml", ".yml")):
        if "distributed_type:" in head or line_starts(head, "finetuning_type:", "stage:",
                                                      "base_model:"):
            return False
        # top-level keys only, whatever the value's layout (TRL's CLI example puts each value
        # on the line below its key: examples/cli_configs/example_config.yaml at f2cd577)
        keys = top_level_keys(head)
        return "per_device_train_batch_size" in keys or (
            "model_name_or_path" in keys and len(keys & ARGUMENT_KEYS) >= 3)
    if name.endswith(".json"):
        return ('"per_device_train_batch_size"' in head and '"zero_optimization"' not in head
                and '"train_micro_batch_size_per_gpu"' not in head)
    return False


# ---------------------------------------------------------------------------------------------
# DeepSpeed (adapters/deepspeed.py), accelerate (accelerate.py), axolotl (axolotl.py)

_DS_NAME_HINTS = ("ds_config", "deepspeed", "ds_z", "zero1", "zero2", "zero3", "zero_stage")
# DeepSpeed's own top-level keys (deepspeed/runtime/constants.py): the first three are strong, the
# rest count only in a file that is no HF model config. Only the top level counts: picotron nests
# "gradient_accumulation_steps" under "training" and was read as DeepSpeed before.
_DS_SENTINELS = ("zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size",
                 "gradient_accumulation_steps", "steps_per_print", "zero_allow_untested_optimizer",
                 "wall_clock_breakdown")


def deepspeed(path: str, text: str) -> bool:
    """A .json/.hjson (or JSON .conf) file with a DeepSpeed sentinel key (a weak one only without
    HF `model_type`), unless it is a trainer's argument file."""
    name = os.path.basename(path).lower()
    if not name.endswith((".json", ".hjson", ".conf")):
        return False
    head = text[:65536]
    if name.endswith(".conf") and not head.lstrip().startswith("{"):
        return False  # open-instruct keeps its DeepSpeed JSON in *.conf; other .conf are not JSON
    if training_arguments(head):
        return False  # a trainer's argument file naming or sharing DeepSpeed keys (_neighbours)
    keys = top_level_keys(head)
    if keys.intersection(_DS_SENTINELS[:3]):
        return True
    if "model_type" in keys or "architectures" in keys:
        return False
    if keys.intersection(_DS_SENTINELS[3:]):
        return True
    if name.startswith("ds_config") and not text.strip():
        return True  # named for DeepSpeed, which fails to load an empty file
    if any(hint in name for hint in _DS_NAME_HINTS) and ('fp16' in keys or 'bf16' in keys):
        return True
    return name.startswith("ds_config") and _unparseable(text)


def _unparseable(text: str) -> bool:
    """Not JSON at all (not even with the comments DeepSpeed's hjson loader accepts): a file
    named ds_config*.json that DeepSpeed would fail to load, rather than some other format."""
    if text.lstrip()[:1] in ("{", "["):
        return load_json("", text, allow_comments=True).data is None
    return True


def accelerate(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    if not name.endswith((".yaml", ".yml", ".json")):
        return False
    head = text[:8192]
    if "distributed_type:" not in head and '"distributed_type"' not in head:
        return False
    return ("compute_environment" in head or "num_processes" in head or "fsdp_config" in head
            or "deepspeed_config" in head or "mixed_precision" in head
            or "main_training_function" in head)


def axolotl(path: str, text: str) -> bool:
    if not os.path.basename(path).lower().endswith((".yaml", ".yml")):
        return False
    head = text[:16384]
    if "distributed_type:" in head or "compute_environment:" in head:
        return False
    return "base_model:" in head and ("micro_batch_size:" in head or "sequence_len:" in head)


# ---------------------------------------------------------------------------------------------
# torchtitan (adapters/torchtitan.py), Megatron-LM (megatron/), HF model configs (hf_config.py)


def torchtitan(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    head = text[:20000]
    if name.endswith(".toml"):
        if "[tool." in head or "[project]" in head or "[build-system]" in head:
            return False
        headers = set(re.findall(r"^[ \t]*\[([A-Za-z_.]+)\]", head, re.M))
        return bool(headers & {"job", "parallelism", "activation_checkpoint"}) or (
            "model" in headers and "training" in headers)
    if name.endswith(".py"):
        return "torchtitan" in head and ("Trainer.Config(" in head or "JobConfig(" in head)
    if name.endswith(".sh") or "." not in name:
        return ("run_train.sh" in head or "torchtitan.train" in head
                or "torchtitan/train.py" in head)
    return False


#: an argument file's flags, one of which begins a line (after blanks)
_MEGATRON_ARGS_FILE_FLAGS = ("tensor-model-parallel-size", "num-layers", "hidden-size",
                             "micro-batch-size", "num-attention-heads")
_MEGATRON_SENTINELS = ("--tensor-model-parallel-size", "--num-layers",
                       "--pipeline-model-parallel-size", "--micro-batch-size", "--hidden-size",
                       "pretrain_gpt.py", "pretrain_mamba.py")


def megatron(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    head = text[:65536]
    if name.endswith(SCRIPT_EXT):
        # the whole script: a launch line may follow 64 KB of preamble (issue 30); `in` is linear
        return any(s in text for s in _MEGATRON_SENTINELS)
    if name.endswith((".txt", ".args")) or "." not in name:
        return flag_given(head, _MEGATRON_ARGS_FILE_FLAGS, line_start=True)
    if name.endswith((".yaml", ".yml")):
        if line_starts(head, "MODEL_ARGS:"):
            return True
        if "McoreEngineConfig" in head:
            return True
        return line_starts(head, "language_model:") and line_starts(head, "model_parallel:")
    return False


# PretrainedConfig's own top-level keys; nested ones do not count (a trainer config with a
# "model": {"num_hidden_layers": ...} section is not a model config).
_HF_CONFIG_SENTINELS = ("model_type", "architectures", "num_hidden_layers", "n_layer")


def hf_config(path: str, text: str) -> bool:
    name = os.path.basename(path).lower()
    if not name.endswith(".json"):
        return False
    if name == "config.json":
        return True
    if training_arguments(text):
        return False  # ms-swift / HF argument files carry a model_type too (_neighbours)
    keys = top_level_keys(text)
    return len(keys.intersection(_HF_CONFIG_SENTINELS)) >= 2 or (
        "model_type" in keys and not keys.intersection(
            ("zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu")))
