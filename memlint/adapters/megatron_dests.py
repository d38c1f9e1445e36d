"""Megatron-LM's arguments spelt as their argparse destinations (`tensor_model_parallel_size`), as
trainers that drive Megatron-Core from their own argument files write them: ms-swift's
`megatron sft`, LLaMA-Factory's mcore_adapter and Megatron-Bridge backends. They are turned into
Megatron `Arg`s and read by the Megatron adapter's interpretation, so the sharding they state is
the one memlint estimates with.

The model is a Hugging Face checkpoint (the trainer converts it to Megatron's layout), so what the
interpretation derives from Megatron's own defaults about the model (a GPT-2 vocabulary, learned
positions) is dropped: the checkpoint's config.json describes it.
"""
from __future__ import annotations

from typing import Iterable, Optional

from memlint.adapters.megatron.context import Interp
from memlint.adapters.megatron.flags import FLAG_BY_NAME, KNOWN_FLAGS
from memlint.adapters.megatron.interpret import run
from memlint.adapters.megatron.readers import Arg, Read
from memlint.adapters.trainer_args import to_bool
from memlint.ir import Partial, Provenance


def flag_of(name: str, renamed: Optional[dict] = None) -> Optional[str]:
    """The Megatron flag an argument name spells, or None when it is not one."""
    flag = (renamed or {}).get(name, "--" + name.replace("_", "-"))
    return flag if flag in FLAG_BY_NAME or flag in KNOWN_FLAGS else None


def megatron_args(items: Iterable, anchor: Provenance, defaults: dict, source: str,
                  renamed: Optional[dict] = None) -> list:
    """`Arg`s of the items that are Megatron flags (a switch written `true`; `false` leaves it
    off), then the trainer's `defaults` (flag -> value, True for a switch) for those it leaves
    out, each at `anchor` with `source` in its label."""
    args, given = [], set()
    for item in items:
        flag = flag_of(item.name, renamed)
        if flag is None:
            continue
        given.add(flag)
        spec = FLAG_BY_NAME.get(flag)
        if spec is not None and spec.nargs == 0:
            if item.value is None or to_bool(item.value):
                args.append(Arg(flag, [], item.prov))
            continue
        values = [] if item.value is None else [str(item.value)]
        args.append(Arg(flag, values, item.prov, [item.prov] * len(values), item.unresolved))
    for flag, value in defaults.items():
        if flag in given or (flag in ("--bf16", "--fp16") and given & {"--bf16", "--fp16"}):
            continue
        prov = Provenance(anchor.file, anchor.line, anchor.column, f"{flag} default ({source})")
        args.append(Arg(flag, [] if value is True else [str(value)], prov,
                        [] if value is True else [prov]))
    return args


def interpret(partial: Partial, args: list, anchor: Provenance, launcher: Optional[dict] = None
              ) -> None:
    """Run the Megatron interpretation over `args` into `partial`, then drop its model keys."""
    read = Read(args=args, kind="script", anchor=anchor)
    read.launcher.update(launcher or {})
    run(Interp(partial.source, read, partial, strict=False))
    for key in [k for k in partial.settings if k.startswith("model.")]:
        del partial.settings[key]
