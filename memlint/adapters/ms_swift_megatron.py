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

from memlint.adapters.megatron.context import Interp
from memlint.adapters.megatron.flags import FLAG_BY_NAME, KNOWN_FLAGS
from memlint.adapters.megatron.interpret import run
from memlint.adapters.megatron.readers import Arg, Read
from memlint.adapters.ms_swift_launch import SOURCE, Launch, truthy
from memlint.adapters.trainer_args import to_bool, to_int
from memlint.ir import Partial, Provenance

_ARGS = "swift/megatron/arguments/megatron_args.py"
# ms-swift's defaults that differ from Megatron-LM's (flag -> value, or True for a switch)
DEFAULTS = {"--micro-batch-size": "1", "--global-batch-size": "16",
            "--recompute-granularity": "selective", "--use-distributed-optimizer": True,
            "--expert-tensor-parallel-size": "1"}
# ms-swift arguments whose Megatron flag has another name
_RENAMED = {"max_length": "--seq-length"}


def _flag(name: str) -> str:
    return _RENAMED.get(name, "--" + name.replace("_", "-"))


def megatron_args(launch: Launch) -> list:
    """Megatron `Arg`s of the launch's arguments that are Megatron flags, then ms-swift's
    defaults for those it leaves out."""
    args, given = [], set()
    for item in launch.items:
        flag = _flag(item.name)
        if flag not in FLAG_BY_NAME and flag not in KNOWN_FLAGS:
            continue  # ms-swift's own (kept as ms_swift.<name> facts)
        given.add(flag)
        spec = FLAG_BY_NAME.get(flag)
        if spec is not None and spec.nargs == 0:
            if item.value is None or to_bool(item.value):
                args.append(Arg(flag, [], item.prov))
            continue
        values = [] if item.value is None else [str(item.value)]
        args.append(Arg(flag, values, item.prov, [item.prov] * len(values), item.unresolved))
    anchor = launch.anchor
    for flag, value in DEFAULTS.items():
        if flag in given:
            continue
        prov = Provenance(anchor.file, anchor.line, anchor.column,
                          f"{flag} ms-swift default ({SOURCE} {_ARGS})")
        args.append(Arg(flag, [] if value is True else [value], prov,
                        [] if value is True else [prov]))
    if "--bf16" not in given and "--fp16" not in given:
        dtype = str(launch.value("torch_dtype") or "bfloat16")
        flag = "--fp16" if dtype in ("float16", "fp16") else "--bf16"
        args.append(Arg(flag, [], Provenance(anchor.file, anchor.line, anchor.column,
                                             f"{flag} from torch_dtype ({SOURCE} {_ARGS})")))
    return args


def apply(launch: Launch, partial: Partial) -> None:
    read = Read(args=megatron_args(launch), kind="script", anchor=launch.anchor)
    nproc, where = launch.env_int("NPROC_PER_NODE")
    nodes, node_prov = launch.env_int("NNODES")
    if nproc:
        read.launcher["nproc_per_node"] = (str(nproc), where, ())
    if nodes:
        read.launcher["nnodes"] = (str(nodes), node_prov, ())
    # the world size and processes came from the environment (ms_swift._world) or the launcher
    run(Interp(partial.source, read, partial, strict=False))
    # the model is the Hugging Face checkpoint: what the interpretation derived from Megatron's
    # defaults (a GPT-2 vocabulary, learned positions) does not describe it
    for key in [k for k in partial.settings if k.startswith("model.")]:
        del partial.settings[key]
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
