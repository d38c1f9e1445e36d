"""The coverage contract (memlint/facts/coverage): every flag or key an adapter knows has a memory
class, the tables are well formed, and no flag of the pinned Megatron-LM commit is unknown."""
from __future__ import annotations

import json
import os

import pytest

from memlint.adapters import megatron
from memlint.adapters.megatron.flags import FLAG_BY_NAME, KNOWN_FLAGS
from memlint.diagnostics import UNKNOWN_KEY
from memlint.facts.coverage import DIRECTIONS, TERMS, frameworks, set_not_modeled, table
from memlint.ir import Provenance, Setting

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS_JSON = os.path.join(ROOT, "memlint", "adapters", "megatron", "megatron_flags.json")


def _commit_flags() -> list:
    """The flags of the pinned commit's training parsers (main parser, entry points, ModelOpt)."""
    with open(FLAGS_JSON, encoding="utf-8") as handle:
        data = json.load(handle)
    return sorted({flag for section in ("megatron_lm", "megatron_lm_entry_points",
                                        "megatron_lm_modelopt")
                   for flag in data[section]["flags"]})


def test_every_megatron_flag_has_a_memory_class():
    spec = table("megatron")
    missing = sorted(f for f in KNOWN_FLAGS | set(FLAG_BY_NAME) if spec.memory_class(f) is None)
    assert missing == [], f"give these flags a class in memlint/facts/coverage/megatron.json: " \
                          f"{missing}"


@pytest.mark.parametrize("framework", frameworks())
def test_tables_are_well_formed(framework):
    spec = table(framework)
    # set_not_modeled opens a table only for the namespaces a run's keys are in
    assert spec.namespace == framework + "."
    for key, terms in spec.modeled.items():
        assert terms and set(terms) <= TERMS, (key, terms)
    for key, entry in spec.not_modeled.items():
        assert entry.direction in DIRECTIONS, key
        assert entry.effect and entry.scope in ("gpu", "host"), key
        assert not (entry.when and entry.off), key
        # a key both modeled and not modeled is not modeled for some values only
        assert key not in spec.modeled or entry.when, key
    for key, parent in spec.part_of.items():
        assert parent in spec.not_modeled, (key, parent)
    classed = [set(spec.modeled), set(spec.part_of), spec.neutral,
               set(spec.not_modeled) - set(spec.modeled)]
    for i, one in enumerate(classed):
        for other in classed[i + 1:]:
            assert not one & other, sorted(one & other)[:5]


def test_megatron_table_lists_only_known_flags():
    spec = table("megatron")
    listed = set(spec.modeled) | set(spec.not_modeled) | set(spec.part_of) | spec.neutral
    assert sorted(listed - KNOWN_FLAGS - set(FLAG_BY_NAME)) == []


def test_no_flag_of_the_pinned_commit_is_reported_unknown():
    """Every flag of NVIDIA/Megatron-LM@d98e8a64's parsers (bench/megatron_flags.py) reads as
    known: an argument file with each of them gets no unknown-key diagnostic."""
    flags = _commit_flags()
    assert "--flextron" in flags and "--fine-grained-activation-offloading" in flags
    assert len(flags) > 1000
    text = "\n".join(flags) + "\n"
    partial = megatron.load("all_flags.txt", text)
    unknown = [d.message for d in partial.diagnostics if d.code == UNKNOWN_KEY[0]]
    assert unknown == []


def _extra(**flags) -> dict:
    prov = Provenance("train.sh", 3, 1, None)
    return {f"megatron.{name}": Setting(value, prov) for name, value in flags.items()}


def test_set_not_modeled_reads_values_when_and_off():
    found = set_not_modeled(_extra(**{"tp-comm-overlap": True,
                                      "num-distributed-optimizer-instances": "2",
                                      "cuda-graph-impl": "none",
                                      "moe-token-dispatcher-type": "alltoall",
                                      "optimizer": "adam", "log-interval": "1"}))
    # instances and both common dispatchers are modeled (memory/topology.py, moe_activations.py)
    assert sorted(f.entry.key for f in found) == ["--tp-comm-overlap"]
    found = set_not_modeled(_extra(**{"cuda-graph-impl": "transformer_engine",
                                      "moe-token-dispatcher-type": "flex",
                                      "optimizer": "dist_muon"}))
    assert sorted(f.entry.key for f in found) == ["--cuda-graph-impl",
                                                  "--moe-token-dispatcher-type", "--optimizer"]
    # allgather and alltoall are modeled (memory/moe_activations.py), flex is not
    assert set_not_modeled(_extra(**{"moe-token-dispatcher-type": "allgather"})) == []


def _schema_keys() -> set:
    """The dotted key paths of the DeepSpeed schema memlint validates with (three levels)."""
    with open(os.path.join(ROOT, "memlint", "adapters", "deepspeed.schema.json"),
              encoding="utf-8") as handle:
        schema = json.load(handle)
    defs = schema["$defs"]

    def resolve(node, depth=0):
        if depth > 5 or not isinstance(node, dict):
            return {}
        if "$ref" in node:
            return resolve(defs.get(node["$ref"].split("/")[-1], {}), depth + 1)
        for alternatives in (node.get("anyOf"), node.get("oneOf")):
            for option in alternatives or ():
                found = resolve(option, depth + 1)
                if found.get("properties"):
                    return found
        return node

    out: set = set()

    def walk(props, prefix, depth):
        for key, value in props.items():
            out.add(prefix + key)
            node = resolve(value)
            if depth < 2 and node.get("properties"):
                walk(node["properties"], prefix + key + ".", depth + 1)

    walk(schema["properties"], "", 0)
    return out


def test_every_deepspeed_key_has_a_memory_class():
    spec = table("deepspeed")
    keys = _schema_keys()
    assert len(keys) > 200
    assert sorted(k for k in keys if spec.memory_class(k) is None) == []
    listed = set(spec.modeled) | set(spec.not_modeled) | set(spec.part_of) | spec.neutral
    assert sorted(listed - keys) == []


def test_a_deepspeed_not_modeled_key_reaches_the_rule(tmp_path):
    from memlint.adapters import deepspeed

    text = ('{"train_micro_batch_size_per_gpu": 1,\n "zero_optimization": {"stage": 3,\n'
            '  "zero_hpz_partition_size": 8, "reduce_bucket_size": 5e8},\n'
            ' "hybrid_engine": {"enabled": true}}\n')
    partial = deepspeed.load(str(tmp_path / "ds_config.json"), text)
    found = set_not_modeled(partial.extra)
    assert sorted(f.entry.key for f in found) == ["hybrid_engine",
                                                  "zero_optimization.zero_hpz_partition_size"]
    where = {f.entry.key: partial.extra[f.extra_key].prov.line for f in found}
    assert where == {"hybrid_engine": 4, "zero_optimization.zero_hpz_partition_size": 3}


# ---------------------------------------------------------------------------------------------
# The RL readers (tables written by tools/rl_coverage.py)

def test_every_verl_key_has_a_memory_class():
    from memlint.adapters import verl

    spec = table("verl")
    keys = set()
    for config in verl.defaults()["configs"].values():
        keys |= set(config["keys"])
    missing = sorted(k for k in keys if spec.memory_class(k) is None)
    assert missing == [], f"run tools/rl_coverage.py and class: {missing[:20]}"


def test_every_openrlhf_argument_has_a_memory_class():
    from memlint.adapters.openrlhf_mapping import RENAMES

    with open(os.path.join(ROOT, "memlint", "facts", "openrlhf_args.json"),
              encoding="utf-8") as handle:
        data = json.load(handle)
    spec = table("openrlhf")
    names = {RENAMES.get(name, name) for version in data["versions"].values()
             for args in version["entry_points"].values() for name in args}
    missing = sorted(n for n in names if spec.memory_class(n) is None)
    assert missing == [], f"run tools/rl_coverage.py and class: {missing[:20]}"


def test_every_trl_argument_the_reader_records_has_a_memory_class():
    from memlint.adapters.trl_rl import COVERED

    spec = table("trl")
    assert sorted(n for n in COVERED if spec.memory_class(n) is None) == []


def test_a_verl_script_setting_a_not_modeled_key_is_found(tmp_path):
    from memlint.adapters.registry import load_file

    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=Qwen/Qwen2-7B "
                      "actor_rollout_ref.model.use_liger=True "
                      "actor_rollout_ref.actor.optim.lr=1e-6\n")
    partial = load_file(str(script))
    found = {f.entry.key for f in set_not_modeled(partial.extra)}
    assert found == {"actor_rollout_ref.model.use_liger"}


def test_every_easyr1_field_has_a_memory_class():
    from memlint.adapters import easyr1

    spec = table("easyr1")
    missing = sorted(k for k in easyr1.defaults()["keys"] if spec.memory_class(k) is None)
    assert missing == [], f"run tools/rl_coverage.py and class: {missing[:20]}"


def test_every_nemo_rl_key_read_or_set_has_a_memory_class(monkeypatch):
    """Every key the NeMo-RL mapping asks for, and every key of the corpus's NeMo-RL configs
    (outside the blocks NeMo-RL passes on), has a class in memlint/facts/coverage/nemo_rl.json."""
    from memlint.adapters import nemo_rl
    from memlint.adapters.nemo_rl_mapping import OPEN

    spec = table("nemo_rl")
    asked: set = set()
    original = nemo_rl.Config.get

    def get(self, key):
        asked.add(key)
        return original(self, key)

    monkeypatch.setattr(nemo_rl.Config, "get", get)
    files = _corpus_files(nemo_rl.detect)
    assert len(files) >= 30
    keys = set()
    for path, text in files:
        keys |= {k[len("nemo_rl."):] for k in nemo_rl.load(path, text).extra
                 if k.startswith("nemo_rl.")}
    assert sorted(k for k in asked if spec.memory_class(k) != "modeled") == []
    assert sorted(k for k in keys if spec.memory_class(k) is None
                  and not k.startswith(OPEN)) == []


# ---------------------------------------------------------------------------------------------
# The trainer adapters: every key the adapter reads, and every key of the corpus's files

def _corpus_files(detect) -> list:
    """The project's own corpus files (fixtures/) a format's detect() claims."""
    out = []
    for folder, _dirs, names in os.walk(os.path.join(ROOT, "fixtures")):
        for name in sorted(names):
            path = os.path.join(folder, name)
            try:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
            except (UnicodeDecodeError, OSError):
                continue
            if detect(path, text):
                out.append((path, text))
    return out


def _literal_reads(module, method_names: tuple, receiver: str = "") -> list:
    """The string arguments of every `<receiver>.<method>("...", ...)` call in an adapter's
    source (any receiver when empty): the keys it reads besides its declarative table."""
    import ast
    import inspect

    calls = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in method_names and node.args
                and (not receiver or (isinstance(node.func.value, ast.Name)
                                      and node.func.value.id == receiver))
                and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                        for a in node.args)):
            calls.append(tuple(a.value for a in node.args))
    return calls


def test_every_torchtitan_key_has_a_memory_class():
    from memlint.adapters import torchtitan

    spec = table("torchtitan")
    keys = {f"{section}.{key}" for sections, key, *_ in torchtitan.TABLE for section in sections}
    for key, *sections in _literal_reads(torchtitan, ("find",), "facts"):
        keys |= {f"{section}.{key}" for section in sections}
    files = _corpus_files(torchtitan.detect)
    assert len(files) > 20
    for path, text in files:
        keys |= {k[len("torchtitan."):] for k in torchtitan.load(path, text).extra
                 if k.startswith("torchtitan.") and k != "torchtitan.config"}
    assert sorted(k for k in keys if spec.memory_class(k) is None) == []


def test_a_torchtitan_not_modeled_key_reaches_the_rule():
    from memlint.adapters import torchtitan

    text = ("[model]\nname = 'llama3'\nflavor = '8B'\n[training]\nlocal_batch_size = 1\n"
            "dtype = 'bfloat16'\n[checkpoint]\nasync_mode = 'disabled'\n")
    found = set_not_modeled(torchtitan.load("train.toml", text).extra)
    assert [(f.entry.key, f.entry.direction) for f in found] == [("training.dtype", "high")]


def test_every_gpt_neox_key_has_a_memory_class():
    from memlint.adapters import gpt_neox

    spec = table("gpt_neox")
    keys = set(gpt_neox.known_keys())
    keys |= {k for k, *_ in _literal_reads(gpt_neox, ("get", "num", "where", "default"), "c")}
    assert sorted(k for k in keys if spec.memory_class(k) is None) == []


def test_a_gpt_neox_not_modeled_key_reaches_the_rule():
    from memlint.adapters import gpt_neox

    text = ('{"num_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "seq_length": 512,\n'
            ' "train_micro_batch_size_per_gpu": 4, "hidden_dropout": 0.1,\n'
            ' "attention_dropout": 0.0, "z_loss": 0.0}\n')
    found = set_not_modeled(gpt_neox.load("neox.yml", text).extra)
    assert [(f.entry.key, f.extra_key) for f in found] == [("hidden_dropout",
                                                            "gpt_neox.hidden_dropout")]


def test_every_accelerate_key_has_a_memory_class():
    from memlint.adapters import accelerate as A

    spec = table("accelerate")
    keys = set(A.BASE_KEYS) | set(A.CLUSTER_KEYS) | set(A.SAGEMAKER_KEYS)
    keys |= {f"fsdp_config.{k}" for k in A.FSDP_KEYS} | {
        f"fsdp_config.{k[len('fsdp_'):]}" for k in A.FSDP_KEYS}
    keys |= {f"deepspeed_config.{k}" for k in A.DEEPSPEED_KEYS}
    keys |= {f"parallelism_config.{k}" for k in (*A.PARALLELISM_KEYS, *A.PARALLELISM_EXTRA)}
    assert sorted(k for k in keys if spec.memory_class(k) is None) == []
    files = _corpus_files(A.detect)
    assert len(files) > 20
    known = set(A.FSDP_KEYS) | {k[len("fsdp_"):] for k in A.FSDP_KEYS}
    for path, text in files:
        for extra in A.load(path, text).extra:
            key = extra[len("accelerate."):] if extra.startswith("accelerate.") else None
            if key is None or key in ("fsdp_version",):
                continue
            block, _, name = key.partition(".")
            # a key accelerate does not know gets its own unknown-key diagnostic instead
            if name and block == "fsdp_config" and name not in known:
                continue
            if name and block in ("deepspeed_config", "parallelism_config") and name not in (
                    *A.DEEPSPEED_KEYS, *A.PARALLELISM_KEYS, *A.PARALLELISM_EXTRA):
                continue
            if block in ("fp8_config", "dynamo_config", "megatron_lm_config") and name:
                continue  # their blocks are classed whole
            if not name and key not in keys:
                continue
            assert spec.memory_class(key) is not None, (path, key)


def test_an_accelerate_not_modeled_key_reaches_the_rule():
    from memlint.adapters import accelerate

    text = ("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nmixed_precision: bf16\n"
            "num_processes: 8\nfsdp_config:\n  fsdp_version: 2\n  fsdp_auto_wrap_policy: NO_WRAP\n"
            "  fsdp_offload_params: false\n")
    found = set_not_modeled(accelerate.load("fsdp.yaml", text).extra)
    assert [f.entry.key for f in found] == ["fsdp_config.fsdp_auto_wrap_policy"]


def test_every_axolotl_key_has_a_memory_class():
    from memlint.adapters import axolotl

    spec = table("axolotl")
    keys = {name for name, _ in axolotl._INTS}
    keys |= {k for k, *_ in _literal_reads(axolotl, ("get",), "data")}
    keys |= {k for k, *_ in _literal_reads(axolotl, ("prov",), "")}
    assert sorted(k for k in keys if spec.memory_class(k) is None) == []
    schema = {k for k in spec.neutral | set(spec.modeled) | set(spec.not_modeled)}
    assert len(schema) > 380   # AxolotlInputConfig's fields at the pinned commit, all classed


def test_an_axolotl_not_modeled_key_reaches_the_rule():
    from memlint.adapters import axolotl

    text = ("base_model: meta-llama/Llama-3.1-8B\nmicro_batch_size: 2\nsequence_len: 4096\n"
            "tiled_mlp: true\nlearning_rate: 2e-5\n")
    found = set_not_modeled(axolotl.load("sft.yaml", text).extra)
    assert [f.entry.key for f in found] == ["tiled_mlp"]


def test_every_trainer_argument_has_a_memory_class():
    """HF TrainingArguments (in the table, three transformers releases) and every name the
    trainer-argument reader reads for any trainer (HF, TRL, LLaMA-Factory)."""
    from memlint.adapters import trainer_args as TA

    spec = table("hf_trainer")
    names = set(TA.INTS) | set(TA.SEQ_LEN_NAMES) | set(TA.MODEL_NAMES) | set(TA.DTYPE_NAMES)
    names |= {k for k, *_ in _literal_reads(TA, ("get",), "args")}
    for call in _literal_reads(TA, ("first",)):
        names |= set(call)
    assert sorted(k for k in names if spec.memory_class(k) is None) == []
    listed = set(spec.modeled) | set(spec.not_modeled) | spec.neutral
    assert {"per_device_train_batch_size", "fsdp_min_num_params", "use_cache"} <= listed


def test_a_trainer_not_modeled_argument_reaches_the_rule():
    from memlint.adapters import hf_trainer

    text = ('{"model_name_or_path": "gpt2", "output_dir": "out", "learning_rate": 1e-5,\n'
            ' "per_device_train_batch_size": 4, "torch_compile": true, "bf16": true}\n')
    found = set_not_modeled(hf_trainer.load("args.json", text).extra)
    assert [f.entry.key for f in found] == ["torch_compile"]


def test_every_llamafactory_argument_has_a_memory_class():
    from memlint.adapters import llamafactory

    spec = table("llamafactory")
    names = {k for k, *_ in _literal_reads(llamafactory, ("given", "truth", "where"), "args")}
    names |= {name for name, *_ in llamafactory._OPTIMIZERS}
    assert sorted(k for k in names if spec.memory_class(k) is None) == []
    listed = set(spec.modeled) | set(spec.not_modeled) | spec.neutral
    assert len(listed) > 250   # the hparams fields at the pinned commit, all classed


def test_a_llamafactory_not_modeled_argument_reaches_the_rule():
    from memlint.adapters import llamafactory

    text = ("model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\nfinetuning_type: lora\n"
            "lora_rank: 8\nuse_dora: true\ncutoff_len: 2048\nper_device_train_batch_size: 1\n"
            "torch_compile: true\n")
    found = set_not_modeled(llamafactory.load("sft.yaml", text).extra)
    assert sorted(f.entry.key for f in found) == ["torch_compile", "use_dora"]
