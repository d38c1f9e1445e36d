"""`megatron sft|pt` of ms-swift: Megatron-LM's arguments spelt with underscores, read by the
Megatron adapter's interpretation, with ms-swift's own defaults (modelscope/ms-swift at 3602360
swift/megatron/arguments/megatron_args.py): `tuner_type` full, `micro_batch_size` 1,
`global_batch_size` 16, `recompute_granularity` selective, `use_distributed_optimizer` True,
`expert_tensor_parallel_size` 1 (Megatron-LM's default is the tensor-parallel size),
bf16 / fp16 from the checkpoint's torch_dtype, `max_length` the sequence length; the model is the
Hugging Face checkpoint named by `--model` (ms-swift converts it to Megatron's layout itself).

A switch is given as `--sequence_parallel true`; `false` leaves it off. ms-swift's own arguments
(dataset, template, LoRA, checkpoint conversion, ...) are not Megatron flags: those that change
memory are mapped here, the others are kept as `ms_swift.<name>` facts.
"""
from __future__ import annotations

from memlint.adapters.megatron_dests import interpret, megatron_args
from memlint.adapters.ms_swift_launch import SOURCE, Launch, truthy
from memlint.adapters.trainer_args import to_int
from memlint.ir import Partial

_ARGS = "swift/megatron/arguments/megatron_args.py"
# ms-swift's defaults that differ from Megatron-LM's (flag -> value, or True for a switch)
DEFAULTS = {"--micro-batch-size": "1", "--global-batch-size": "16",
            "--recompute-granularity": "selective", "--use-distributed-optimizer": True,
            "--expert-tensor-parallel-size": "1"}
# ms-swift arguments whose Megatron flag has another name
_RENAMED = {"max_length": "--seq-length"}


def apply(launch: Launch, partial: Partial) -> None:
    dtype = str(launch.value("torch_dtype") or "bfloat16")
    defaults = dict(DEFAULTS)
    defaults["--fp16" if dtype in ("float16", "fp16") else "--bf16"] = True
    args = megatron_args(launch.items, launch.anchor, defaults, f"ms-swift, {SOURCE} {_ARGS}",
                         _RENAMED)
    launcher = {}
    nproc, where = launch.env_int("NPROC_PER_NODE")
    nodes, node_prov = launch.env_int("NNODES")
    if nproc:
        launcher["nproc_per_node"] = (str(nproc), where, ())
    if nodes:
        launcher["nnodes"] = (str(nodes), node_prov, ())
    interpret(partial, args, launch.anchor, launcher)
    model = launch.args.get("model")
    if model is not None and not model.unresolved and model.value:
        partial.set("model", str(model.value), model.prov)
    _tuner(launch, partial)


def _tuner(launch: Launch, partial: Partial) -> None:
    """LoRA of `megatron sft --tuner_type lora` (default full): rank and targets."""
    item = launch.args.get("tuner_type") or launch.args.get("train_type")
    if item is None or str(item.value) == "full":
        return
    rank = to_int(launch.value("lora_rank") or 8) or 8
    partial.set("lora_rank", rank, launch.args["lora_rank"].prov if "lora_rank" in
                launch.args else item.prov)
    partial.set("lora_targets", "all-linear", item.prov)
    if truthy(launch, "freeze_vit", True):
        partial.set_extra("ms_swift.freeze_vit", True, item.prov)
