"""Megatron-LM adapter: launch scripts, argument files and YAML configs -> one `Partial`.

Formats read (none is ever executed or sourced):
- bash launch scripts (`.sh`, `.bash`, `.slurm`, `.sbatch`): variables, `export`, `${VAR:-default}`,
  arrays and `ARGS+=( ... )`, `"${ARGS[@]}"`, string variables expanded unquoted, comments and
  backslash continuations, `if [ "$X" == y ]` branches when decidable (memlint.adapters._shell).
  The launch command (torchrun, `python -m torch.distributed.run|launch`, deepspeed, srun, plain
  python) gives the world size from --nproc_per_node/--nproc-per-node x --nnodes (deepspeed:
  --num_gpus x --num_nodes; srun: --ntasks, or -N x --ntasks-per-node; `#SBATCH` lines fill
  SLURM_NNODES and friends). Everything after the entry script (`*.py`) is Megatron's argv.
- argument files: Megatron flags, one or more per line, `#` comments; `# launcher:` header lines
  give nproc_per_node / nnodes as above.
- YAML: Megatron test-case files (`MODEL_ARGS:` maps of flags), the experimental `--yaml-cfg`
  layout (argument names with underscores, `language_model:` / `model_parallel:` sections) and
  verl's Megatron engine config.

Every flag keeps the line and column where the file wrote it, also when it reached the command
line through an array or a variable. A value that cannot be known without running the script (a
`$(...)`, a variable never set, `$1`, arithmetic) becomes an `unresolved-value` info diagnostic
naming it and the default memlint assumes instead.

The flag table (`FLAGS`) reflects Megatron-LM at commit d98e8a64dd (`MEGATRON_VERSION`); flags it
does not map are checked against the full list of that commit's flag names
(`megatron_flags.json`), so that a typo is a warning with a suggestion and a known flag memlint does
not need is silent. Megatron-specific facts are kept in `Partial.extra` as `megatron.<flag>`
(e.g. `megatron.num-query-groups`, `megatron.recompute-method`), launcher facts as
`megatron.launcher.<option>`.

Megatron dtype conventions (megatron/training/arguments.py `validate_args`, DDP and optimizer):
- `--bf16`: bf16 parameters; gradients accumulate in an fp32 `main_grad` buffer (Megatron turns on
  accumulate_allreduce_grads_in_fp32 for bf16) unless `--grad-reduce-in-bf16` (or, with
  `--use-precision-aware-optimizer`, `--main-grads-dtype bf16`); the optimizer keeps fp32 master
  weights and fp32 Adam moments. `--no-gradient-accumulation-fusion` only disables the fused wgrad
  kernel; the main grads stay fp32.
- `--fp16`: fp16 parameters; main grads are fp16 unless `--accumulate-allreduce-grads-in-fp32`;
  fp32 master weights and moments.
- neither flag: fp32 everything.
- bytes per parameter with Adam: 2 + 4 + 12 = 18 (bf16 params, fp32 grads, fp32 master + two
  moments); with `--use-distributed-optimizer` (ZeRO-1 over the data-parallel group) the 12 bytes of
  optimizer state are sharded: 6 + 12/dp. `--use-megatron-fsdp` shards more according to
  `--data-parallel-sharding-strategy` (optim / optim_grads / optim_grads_params = ZeRO 1/2/3).
So `grad_dtype` is set to fp32 whenever Megatron keeps fp32 main grads.

Modules: `flags` (the flag table), `readers` and `yaml_reader` (every format -> `Arg`s),
`context`, `interpret`, `model` and `training` (flags -> scenario keys), `layouts` (layer-pattern
flags). This module detects and loads; the names other code uses are re-exported here.
"""
from __future__ import annotations

import os
import re

from memlint import lazy_import, lazy_re
from memlint.adapters.detection import SCRIPT_EXT as _SCRIPT_EXT
from memlint.adapters.detection import megatron as detect  # noqa: F401 - the adapter's detect()
from memlint.adapters.megatron.context import Interp
from memlint.adapters.megatron.flags import (DEFAULT_VOCAB, FLAG_BY_DEST, FLAG_BY_NAME, FLAGS,
                                             KNOWN_FLAGS, MAX_HINTS, MAX_UNKNOWN_LISTED,
                                             MEGATRON_VERSION, TOKENIZER_VOCAB, Flag)
from memlint.adapters.megatron.interpret import run
from memlint.adapters.megatron.readers import Arg, Read, read_args_file, read_script, split_argv
from memlint.diagnostics import PARSE_ERROR, UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance
from memlint.loaders import read_text, suppressions

# start-up: the shell reader loads only when a launch script or an argument file is read, the YAML
# reader only for a YAML file, the layer-pattern parsers when a file gives a pattern flag
_shell = lazy_import.module("memlint.adapters._shell")
_yaml_reader = lazy_import.module("memlint.adapters.megatron.yaml_reader")
_layouts = lazy_import.module("memlint.adapters.megatron.layouts")
# names re-exported from those modules (__all__), read through them on first use
_LAZY = {"MAX_PATTERN": _layouts, "parse_layer_freq": _layouts, "parse_layout": _layouts,
         "read_yaml": _yaml_reader}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(_LAZY[name], name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

FORMAT = "megatron"

__all__ = ["FORMAT", "MEGATRON_VERSION", "FLAGS", "FLAG_BY_NAME", "FLAG_BY_DEST", "KNOWN_FLAGS",
           "MAX_HINTS", "MAX_UNKNOWN_LISTED", "MAX_PATTERN", "DEFAULT_VOCAB", "TOKENIZER_VOCAB",
           "Flag", "Arg", "Read", "Interp", "detect", "load", "load_path", "parse_layer_freq",
           "parse_layout", "read_args_file", "read_script", "read_yaml", "split_argv"]

# ---------------------------------------------------------------------------------------------
# Entry points (detect() is adapters/detection.py's megatron: detecting loads none of this package)


def _kind(path: str, text: str) -> str:
    name = os.path.basename(path).lower()
    if name.endswith((".yaml", ".yml")):
        return "yaml"
    if name.endswith(_SCRIPT_EXT) or text.startswith("#!"):
        return "script"
    return "args"


def load(path: str, text: str, strict: bool = False, entry: Optional[str] = None) -> Partial:
    """Read a Megatron launch script, argument file or YAML config. Never raises on bad input.

    `entry`: the training script the arguments are given to, when the caller knows it and the
    file does not say (a YAML test case run by a CI recipe); it decides the model family."""
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    kind = _kind(path, text)
    try:
        if kind == "yaml":
            read = _yaml_reader.read_yaml(path, text)
        elif kind == "script":
            read = read_script(path, text)
        else:
            read = read_args_file(path, text)
    except (RecursionError, _shell.ShellError) as exc:
        partial.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                        f"cannot read the file: {exc}",
                                        Provenance(path, 1, 1, None)))
        return partial
    read.kind = kind
    if entry and read.entry is None:
        read.entry = (entry, Provenance(path, None, None, "training script (given by the caller)"))
    partial.anchor = read.anchor
    partial.diagnostics.extend(read.diagnostics)
    partial.references.extend(read.references)
    if read.args or read.launcher:
        run(Interp(path, read, partial, strict))
        _mark_default_world_size(partial, text)
    return partial


# A node count taken from a scheduler variable's default (`NNODES=${SLURM_NNODES:-1}`) is what the
# script does when run by hand, not what it does under the scheduler it was written for.
_NODE_DEFAULT = lazy_re.compile(
         r"\$\{(?:SLURM_NNODES|SLURM_JOB_NUM_NODES|NNODES|NUM_NODES|NODES|PET_NNODES|WORLD_SIZE|"
         r"NODE_COUNT)\s*:?-", re.I)


_NODE_NAMES = ("SLURM_NNODES", "SLURM_JOB_NUM_NODES", "NNODES", "NUM_NODES", "NODES",
               "PET_NNODES", "WORLD_SIZE", "NODE_COUNT")


def _may_default_nodes(text: str) -> bool:
    """False where _NODE_DEFAULT cannot match: no `${` followed by one of its names (in ASCII
    text, where re.I is str.upper(); other text goes to the pattern). Start-up: most scripts'
    `${...}` name something else, and the pattern is not compiled."""
    if not text.isascii():
        return True
    at = text.find("${")
    while at >= 0:
        if text[at + 2:at + 22].upper().startswith(_NODE_NAMES):
            return True
        at = text.find("${", at + 2)
    return False


def _mark_default_world_size(partial: Partial, text: str) -> None:
    world = partial.settings.get("world_size")
    if world is None or not _may_default_nodes(text) or not _NODE_DEFAULT.search(text):
        return
    partial.set_extra("world_size.assumed", True, world.prov)
    partial.diagnostics.append(make(
        UNRESOLVED, Severity.INFO,
        f"world size {world.value} uses the default node count of a scheduler variable; the "
        "checks that need it assume that default (give `--set world_size=N` for the real run)",
        world.prov))


def load_path(path: str, strict: bool = False, entry: Optional[str] = None) -> Partial:
    text, diagnostics = read_text(path)
    if text is None:
        partial = Partial(source=path, fmt=FORMAT)
        partial.diagnostics.extend(diagnostics)
        return partial
    return load(path, text, strict=strict, entry=entry)
