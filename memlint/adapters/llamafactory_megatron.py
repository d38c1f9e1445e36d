"""LLaMA-Factory YAML with Megatron-Core parallelism: its mcore_adapter backend
(`USE_MCA=1 llamafactory-cli train examples/megatron/*.yaml`) and its Megatron-Bridge backend
(`USE_MEGATRON_BRIDGE=1 ... examples/megatron_bridge/*.yaml`), hiyouga/LLaMA-Factory@ff6d4d12
src/llamafactory/hparams/parser.py.

Such a YAML states Megatron's parallelism with argparse-style names (`tensor_model_parallel_size`,
`pipeline_model_parallel_size`, `expert_model_parallel_size`, `sequence_parallel`,
`use_distributed_optimizer`, `recompute_granularity`, ...), beside LLaMA-Factory's own keys: it is
read through the Megatron interpretation (adapters/megatron_dests.py), the micro batch being
`per_device_train_batch_size` (mcore_adapter's micro_batch_size alias), the sequence `cutoff_len`
(default 2048), precision `bf16` / `fp16`, and the model the Hugging Face checkpoint of
`model_name_or_path`.

Which backend runs is an environment variable of the launch, not in the file. mcore_adapter
(alibaba/ROLL mcore_adapter/src/mcore_adapter/training_args.py) leaves `use_distributed_optimizer`
off and `expert_tensor_parallel_size` at 1; Megatron-Bridge's defaults
(hparams/megatron_bridge_args.py) turn the distributed optimizer on: when the file leaves it out,
memlint reads mcore_adapter's default and says that Megatron-Bridge would shard the optimizer.
"""
from __future__ import annotations

from memlint.adapters.trainer_args import to_int
from memlint.diagnostics import UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance

SOURCE = "hiyouga/LLaMA-Factory@ff6d4d12 with mcore_adapter (alibaba/ROLL training_args.py)"
# keys that only a Megatron-Core backend reads: their presence says the run is one
PARALLEL_KEYS = frozenset(("tensor_model_parallel_size", "pipeline_model_parallel_size",
                           "expert_model_parallel_size", "context_parallel_size",
                           "virtual_pipeline_model_parallel_size", "use_distributed_optimizer",
                           "recompute_granularity", "expert_tensor_parallel_size"))
_RENAMED = {"per_device_train_batch_size": "--micro-batch-size", "cutoff_len": "--seq-length"}
DEFAULTS = {"--seq-length": "2048", "--expert-tensor-parallel-size": "1",
            "--micro-batch-size": "1"}


def is_megatron(names) -> bool:
    return bool(PARALLEL_KEYS.intersection(names))


def apply(partial: Partial, items: list, path: str) -> None:
    # start-up: a plain LLaMA-Factory YAML never loads the Megatron adapter
    from memlint.adapters.megatron_dests import interpret, megatron_args
    anchor = Provenance(path, 1, 1, None)
    by_name = {item.name: item for item in items}
    # `bf16: true` / `fp16: true` are Megatron's switches; with neither, bf16 (the examples')
    defaults = dict(DEFAULTS, **{"--bf16": True})
    args = megatron_args(items, anchor, defaults, SOURCE, _RENAMED)
    interpret(partial, args, anchor)
    model = by_name.get("model_name_or_path")
    if model is not None and model.value and not model.unresolved:
        partial.set("model", str(model.value), model.prov)
    accum = to_int((by_name.get("gradient_accumulation_steps") or _Absent).value)
    if accum:
        partial.set("grad_accum", accum, by_name["gradient_accumulation_steps"].prov)
    method = str((by_name.get("finetuning_type") or _Absent).value or "lora")
    if method == "lora":
        rank = to_int((by_name.get("lora_rank") or _Absent).value) or 8
        where = by_name["finetuning_type"].prov if "finetuning_type" in by_name else anchor
        partial.set("lora_rank", rank, where)
        partial.set("lora_targets", "all-linear", where)
    if "use_distributed_optimizer" not in by_name:
        partial.diagnostics.append(make(
            UNRESOLVED, Severity.INFO,
            "use_distributed_optimizer not given: mcore_adapter (USE_MCA) leaves it off, as read "
            "here; under USE_MEGATRON_BRIDGE it defaults to on and shards the optimizer states "
            "over the data-parallel ranks (hparams/megatron_bridge_args.py)", anchor))


class _Absent:
    value = None
