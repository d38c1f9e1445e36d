"""Which adapter reads which file: the built-in list, `memlint.adapters` entry points, detection.

Built-in adapters are imported lazily from an explicit list; one that is not in this checkout is
skipped silently. The list is in detection order: specific formats first, the broad HF config
detector last. A third-party adapter (entry-point group `memlint.adapters`, a module exposing
FORMAT, detect and load) is tried after the specific built-ins and before the HF fallback.

`load_file` reads one file with the size limit and returns its Partial; `load_with_references`
also follows `Partial.references` (accelerate's deepspeed_config_file, a memlint.toml's `files`),
relative to the referring file and never outside the repository root (the nearest directory with
.git or pyproject.toml) unless allowed. Referenced files come first, so the referring file's own
settings override theirs.
"""
from __future__ import annotations

import os
from functools import lru_cache

from memlint import lazy_import
from memlint import plugins as _plugins
from memlint.adapters import detection
from memlint.adapters._neighbours import hydra_launch, neighbour_format
from memlint.diagnostics import (INVALID_VALUE, PARSE_ERROR, UNRESOLVED, Severity, make,
                                 make_internal)
from memlint.ir import UNREAD_REFERENCE, Partial, Provenance, Setting
from memlint.loaders import (MAX_FILE_BYTES, NUL_PATH, inside, read_text, realpath, repo_root,
                             suppressions)

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

BUILTIN_ADAPTERS = (
    "memlint.adapters.native",
    "memlint.adapters.easyr1",
    "memlint.adapters.nemo_rl",
    "memlint.adapters.verl",
    "memlint.adapters.openrlhf",
    "memlint.adapters.vllm_serve",
    "memlint.adapters.gpt_neox",
    "memlint.adapters.llamafactory_v1",
    "memlint.adapters.llamafactory",
    "memlint.adapters.deepspeed_chat",
    "memlint.adapters.ms_swift",
    "memlint.adapters.hf_trainer",
    "memlint.adapters.deepspeed",
    "memlint.adapters.accelerate",
    "memlint.adapters.axolotl",
    "memlint.adapters.torchtitan",
    "memlint.adapters.megatron",
)
FALLBACK_ADAPTERS = ("memlint.adapters.hf_config",)
ENTRY_POINT_GROUP = "memlint.adapters"
MAX_REFERENCE_DEPTH = 8

_CACHE: dict = {}


def _import(name: str, builtin: bool, problems: list):
    try:
        module = lazy_import.imported(name)
    except ModuleNotFoundError as exc:
        if builtin and exc.name == name:
            return None
        problems.append(f"adapter {name} failed to import: {exc}")
        return None
    except Exception as exc:  # noqa: BLE001 - one broken adapter must not sink the run
        problems.append(f"adapter {name} failed to import: {type(exc).__name__}: {exc}")
        return None
    for attribute in ("FORMAT", "detect", "load"):
        if not hasattr(module, attribute):
            problems.append(f"adapter {name} has no {attribute}; skipped")
            return None
    return module


def adapters(plugins: bool = True) -> tuple[list, list]:
    """(adapter modules in detection order, load problems as strings)."""
    if plugins in _CACHE:
        return _CACHE[plugins]
    problems: list = []
    found = [m for m in (_import(n, True, problems) for n in BUILTIN_ADAPTERS) if m]
    if plugins:
        try:
            entries = sorted(_plugins.entry_points(ENTRY_POINT_GROUP), key=lambda e: e.name)
        except Exception as exc:  # noqa: BLE001
            entries = []
            problems.append(f"cannot list {ENTRY_POINT_GROUP} entry points: {exc}")
        for entry in entries:
            try:
                module = entry.load()
            except Exception as exc:  # noqa: BLE001 - each plugin in its own try/except
                problems.append(f"adapter plugin {entry.name!r} failed to load: "
                                f"{type(exc).__name__}: {exc}")
                continue
            if all(hasattr(module, a) for a in ("FORMAT", "detect", "load")):
                found.append(module)
            else:
                problems.append(f"adapter plugin {entry.name!r} lacks FORMAT/detect/load")
    found += [m for m in (_import(n, True, problems) for n in FALLBACK_ADAPTERS) if m]
    _CACHE[plugins] = (found, problems)
    return found, problems


# The file names each built-in adapter's detect() can accept (its first test is always the
# name), so that a file is matched without importing the adapters that could never claim it:
# the Megatron flag table and the torchtitan catalog cost more to import than a whole check of a
# DeepSpeed JSON. "" stands for a name without an extension. tests/fuzz/test_speed.py checks
# these against every detect().
NO_EXTENSION = ""
CLAIMS = {
    "memlint.adapters.native": (".toml", ".yaml", ".yml"),
    "memlint.adapters.easyr1": (".sh", ".bash", ".slurm", ".sbatch", ".yaml", ".yml", NO_EXTENSION),
    "memlint.adapters.nemo_rl": (".yaml", ".yml"),
    "memlint.adapters.verl": (".sh", ".bash", ".slurm", ".sbatch", ".yaml", ".yml", NO_EXTENSION),
    "memlint.adapters.openrlhf": (".sh", ".bash", ".slurm", ".sbatch", NO_EXTENSION),
    "memlint.adapters.vllm_serve": (".sh", ".bash", ".slurm", ".sbatch", ".yaml", ".yml",
                                    NO_EXTENSION),
    "memlint.adapters.gpt_neox": (".yaml", ".yml"),
    "memlint.adapters.llamafactory_v1": (".yaml", ".yml"),
    "memlint.adapters.llamafactory": (".yaml", ".yml"),
    "memlint.adapters.deepspeed_chat": (".sh", ".bash", ".slurm", ".sbatch", NO_EXTENSION),
    "memlint.adapters.ms_swift": (".sh", ".bash", ".slurm", ".sbatch", ".yaml", ".yml", ".json",
                                  NO_EXTENSION),
    "memlint.adapters.hf_trainer": (".sh", ".bash", ".slurm", ".sbatch", ".yaml", ".yml", ".json",
                                    NO_EXTENSION),
    "memlint.adapters.deepspeed": (".json", ".hjson", ".conf"),
    "memlint.adapters.accelerate": (".yaml", ".yml", ".json"),
    "memlint.adapters.axolotl": (".yaml", ".yml"),
    "memlint.adapters.torchtitan": (".toml", ".py", ".sh", NO_EXTENSION),
    "memlint.adapters.megatron": (".sh", ".bash", ".slurm", ".sbatch", ".txt", ".args", ".yaml",
                                  ".yml", NO_EXTENSION),
    "memlint.adapters.hf_config": (".json",),
}


#: Each built-in adapter's detect(), from adapters/detection.py: asking it imports no adapter, and
#: only the adapter whose test claims the file is imported. An adapter not listed here (a new one)
#: is imported to be asked. tests/adapters/test_detection.py checks that each adapter's own
#: `detect` is the one listed.
DETECTORS = {
    "memlint.adapters.native": detection.native,
    "memlint.adapters.easyr1": detection.easyr1,
    "memlint.adapters.nemo_rl": detection.nemo_rl,
    "memlint.adapters.verl": detection.verl,
    "memlint.adapters.openrlhf": detection.openrlhf,
    "memlint.adapters.vllm_serve": detection.vllm_serve,
    "memlint.adapters.gpt_neox": detection.gpt_neox,
    "memlint.adapters.llamafactory_v1": detection.llamafactory_v1,
    "memlint.adapters.llamafactory": detection.llamafactory,
    "memlint.adapters.deepspeed_chat": detection.deepspeed_chat,
    "memlint.adapters.ms_swift": detection.ms_swift,
    "memlint.adapters.hf_trainer": detection.hf_trainer,
    "memlint.adapters.deepspeed": detection.deepspeed,
    "memlint.adapters.accelerate": detection.accelerate,
    "memlint.adapters.axolotl": detection.axolotl,
    "memlint.adapters.torchtitan": detection.torchtitan,
    "memlint.adapters.megatron": detection.megatron,
    "memlint.adapters.hf_config": detection.hf_config,
}


def could_claim(module_name: str, path: str) -> bool:
    claims = CLAIMS.get(module_name)
    if claims is None:
        return True
    name = os.path.basename(path).lower()
    return name.endswith(tuple(c for c in claims if c)) or (NO_EXTENSION in claims
                                                            and "." not in name)


def _extension(path: str) -> str:
    """The name's extension, lower-cased ("" for none): CLAIMS hold plain extensions only."""
    name = path[max(path.rfind("/"), path.rfind(os.sep)) + 1:].lower()
    dot = name.rfind(".")
    return name[dot:] if dot != -1 else NO_EXTENSION


_CLAIMED_BY: dict = {}   # extension -> the built-in adapters that could claim such a name


def _claimants(path: str) -> tuple:
    """could_claim over every built-in adapter, cached by the name's extension (walking 100,000
    files asked could_claim a million times)."""
    extension = _extension(path)
    found = _CLAIMED_BY.get(extension)
    if found is None:
        probe = "x" + extension
        found = _CLAIMED_BY[extension] = (
            tuple(n for n in BUILTIN_ADAPTERS if could_claim(n, probe)),
            tuple(n for n in FALLBACK_ADAPTERS if could_claim(n, probe)))
    return found


def formats() -> list:
    return [module.FORMAT for module in adapters()[0]]


def _candidates(path: str):
    """(module name, detect, module) of each adapter in detection order that could claim
    `path`: a built-in adapter's test from DETECTORS with None for the module (it is imported
    only if the test claims the file), else the imported adapter and its own detect()."""
    if True in _CACHE:  # everything is loaded already
        for module in _CACHE[True][0]:
            yield module.__name__, module.detect, module
        return
    builtins, fallbacks = _claimants(path)
    yield from _detectors(builtins)
    if _plugins.declared(ENTRY_POINT_GROUP):
        # plugins come between the built-ins and the fallback
        for module in adapters()[0]:
            yield module.__name__, module.detect, module
        return
    yield from _detectors(fallbacks)


def _detectors(names: tuple):
    for name in names:
        test = DETECTORS.get(name)
        if test is not None:
            yield name, test, None
            continue
        module = _import_cached(name, [])
        if module is not None:
            yield name, module.detect, module


_MODULES: dict = {}


def _import_cached(name: str, problems: list):
    if name not in _MODULES:
        _MODULES[name] = _import(name, True, problems)
    return _MODULES[name]


def detect_format(path: str, text: str):
    """The first adapter whose detect() accepts the file, or None."""
    seen = set()
    for name, test, module in _candidates(path):
        if name in seen:
            continue
        seen.add(name)
        try:
            claimed = test(path, text)
        except Exception:  # noqa: BLE001 - a detector that crashes simply does not claim it
            continue
        if not claimed:
            continue
        if module is None:
            module = _import_cached(name, [])
        if module is not None and not (getattr(module, "FORMAT", None) == "megatron"
                                       and hydra_launch(text)):
            return module   # (a Hydra launch (verl) that names megatron in its overrides: not)
    return None


# detect_format's answers for the files a directory walk kept (runs.readable), by the path the
# walk hands on, with the text they were given: loading such a file does not run the detectors
# again (1,880 files detected twice were 7% of `check fixtures`). A file whose text changed in
# between is detected again. Bounded by the text held; a new walk starts afresh.
_DETECTED: dict = {}
DETECTED_CHARS = 64 * 2**20
_HELD = [0]


def forget_detected() -> None:
    _DETECTED.clear()
    _HELD[0] = 0


def detect_remembered(path: str, text: str):
    """detect_format(path, text), kept for load_file(path) when an adapter claims the file."""
    module = detect_format(path, text)
    if module is not None and _HELD[0] + len(text) <= DETECTED_CHARS:
        _DETECTED[path] = (text, module)
        _HELD[0] += len(text)
    return module


def _detected(path: str, text: str):
    """The adapter of `path`: remembered from its walk when the text is the same, else found."""
    held = _DETECTED.pop(path, None)
    if held is not None:
        _HELD[0] -= len(held[0])
        if held[0] == text:
            return held[1]
    return detect_format(path, text)


def _unread(path: str, message: str, neighbour: Optional[str]) -> Partial:
    """The Partial of a file no adapter reads: a warning that --skip-unknown drops."""
    partial = Partial(source=path, fmt="unknown")
    partial.diagnostics.append(make(PARSE_ERROR, Severity.WARNING, message,
                                    Provenance(path, None, None, None), unknown_format=True,
                                    neighbour=neighbour))
    return partial


def load_file(path: str, max_bytes: int = MAX_FILE_BYTES) -> Partial:
    """Read, detect and load one file. Never raises on bad input."""
    text, problems = read_text(path, max_bytes)
    if text is None:
        partial = Partial(source=path, fmt="unknown")
        partial.diagnostics.extend(problems)
        return partial
    neighbour = neighbour_format(path, text)
    if neighbour is not None:
        return _unread(path, f"a {neighbour.name} config ({neighbour.loader}): memlint does not "
                       f"read {neighbour.name}'s format, so this file gets no memory verdict",
                       neighbour.name)
    module = _detected(path, text)
    if module is None:
        # a file memlint cannot read is not a broken config: a warning, so that a hook or CI
        # gate never fails on a valid config of a framework memlint does not know
        return _unread(path, f"cannot tell which config format this is (memlint reads: "
                       f"{', '.join(formats())}); name it after its format or list it under "
                       "`files` in a memlint.toml", None)
    try:
        result = module.load(path, text)
    except Exception as exc:  # noqa: BLE001 - an adapter bug is an internal error, not a crash
        # start-up: traceback loads only when an adapter fails
        import traceback

        partial = Partial(source=path, fmt=getattr(module, "FORMAT", "unknown"))
        failure = make_internal(f"the {module.FORMAT} adapter failed on this file: "
                                f"{type(exc).__name__}: {exc}", Provenance(path, None, None, None))
        failure.data["traceback"] = traceback.format_exc()
        partial.diagnostics.append(failure)
        return partial
    if isinstance(result, tuple):  # (Partial, diagnostics), as STYLE.md words it
        partial, extra = result
        partial.diagnostics.extend(extra)
    else:
        partial = result
    if not partial.suppressions:
        partial.suppressions = suppressions(text)
    return partial


def _reference(item, partial: Partial) -> tuple[Optional[str], Provenance]:
    default = Provenance(partial.source, None, None, None)
    if isinstance(item, Setting):
        return str(item.value), item.prov
    if isinstance(item, tuple) and item:
        return str(item[0]), (item[1] if len(item) > 1 and isinstance(item[1], Provenance)
                               else default)
    if isinstance(item, dict) and "path" in item:
        return str(item["path"]), item.get("prov") or default
    if isinstance(item, str):
        return item, default
    return None, default


@lru_cache(maxsize=1024)
def _real_folder(folder: str) -> str:
    """realpath of a folder, once per run (a memlint.toml listing 20,000 files asked 60,000)."""
    return os.path.realpath(folder)


def find_reference(target: str, path: str, root: str) -> Optional[str]:
    """The file a config's relative path most likely names, or None when none exists.

    Launchers (the HF Trainer, axolotl, LLaMA-Factory, accelerate) open such a path relative to
    their working directory, which memlint cannot know: it is tried beside the referring file, in
    each folder above it up to the repository root (where a project runs its launcher from), and
    in memlint's own working directory."""
    if os.path.isabs(target):
        return os.path.normpath(target) if os.path.isfile(target) else None
    folders = [os.path.dirname(os.path.abspath(path))]
    base = _real_folder(root)
    while _real_folder(folders[-1]) != base:
        parent = os.path.dirname(folders[-1])
        if parent == folders[-1] or not inside(parent, base):
            break
        folders.append(parent)
    if _real_folder(folders[-1]) != base:
        folders.append(root)
    folders.append(os.getcwd())
    for folder in folders:
        candidate = os.path.normpath(os.path.join(folder, target))
        if os.path.isfile(candidate):
            return candidate
    return None


def _resolve_reference(target: str, path: str, root: str) -> str:
    """find_reference's file, else the path beside the referring file (reported as not found)."""
    found = find_reference(target, path, root)
    if found is not None:
        return found
    return os.path.normpath(target if os.path.isabs(target)
                            else os.path.join(os.path.dirname(path), target))


def load_with_references(path: str, max_bytes: int = MAX_FILE_BYTES,
                         allow_outside_root: bool = False, root: Optional[str] = None,
                         _seen: Optional[set] = None, _depth: int = 0) -> list:
    """The file's Partial preceded by those of the files it refers to (recursively)."""
    seen = _seen if _seen is not None else set()
    seen.add(realpath(path))
    root = root or repo_root(path)
    if not allow_outside_root and not inside(path, root):
        # a path given inside the repository that resolves outside it (a symbolic link, or a
        # link in a folder on the way): the root guarantee covers what a link points at
        partial = Partial(source=path, fmt="unknown")
        partial.diagnostics.append(make(
            PARSE_ERROR, Severity.WARNING,
            f"links to {os.path.realpath(path)}, outside the repository root {root}; not read "
            "(pass --allow-outside-root to read it)", Provenance(path, None, None, None)))
        return [partial]
    partial = load_file(path, max_bytes)
    out: list = []
    for item in partial.references:
        target, prov = _reference(item, partial)
        if not target:
            continue
        resolved = _resolve_reference(target, path, root)
        if "\x00" in resolved:
            partial.diagnostics.append(make(
                INVALID_VALUE, Severity.WARNING, f"refers to {target!r}, which {NUL_PATH}; not "
                "followed, so its settings are not checked", prov, key=prov.key))
            continue
        if not allow_outside_root and not inside(resolved, root):
            partial.diagnostics.append(make(
                INVALID_VALUE, Severity.WARNING,
                f"refers to {target!r}, outside the repository root {root}; not followed, so "
                "its settings are not checked (pass --allow-outside-root to follow it)", prov,
                key=prov.key))
            continue
        if not os.path.isfile(resolved) and partial.fmt == "native":
            # memlint's own scenario file lists a file that is not there: its author's mistake
            partial.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                            f"referenced file {target!r} does not exist",
                                            prov, key=prov.key))
            continue
        if not os.path.isfile(resolved):
            # launchers resolve such paths against their working directory, which memlint
            # cannot know: a file not found is unchecked, not wrong
            partial.diagnostics.append(make(
                UNRESOLVED, Severity.WARNING,
                f"referenced file {target!r} not found (looked beside this file, in the folders "
                "above it up to the repository root and in the working directory); its "
                "settings are not checked",
                prov, key=prov.key))
            # the memory verdict may rest on it (a ZeRO stage, an offload): rules say so
            partial.set_extra(f"{UNREAD_REFERENCE}{target}", target, prov)
            continue
        if realpath(resolved) in seen:
            continue
        if _depth >= MAX_REFERENCE_DEPTH:
            partial.diagnostics.append(make(PARSE_ERROR, Severity.ERROR,
                                            f"references nested deeper than "
                                            f"{MAX_REFERENCE_DEPTH}; {target!r} not followed",
                                            prov))
            continue
        out.extend(load_with_references(resolved, max_bytes, allow_outside_root, root, seen,
                                        _depth + 1))
    out.append(partial)
    return out


def direct_references(path: str, max_bytes: int = MAX_FILE_BYTES) -> list:
    """The files `path` itself refers to, resolved as load_with_references resolves them (those
    not found included), without loading them."""
    partial = load_file(path, max_bytes)
    root = repo_root(path)
    out = []
    for item in partial.references:
        target, _prov = _reference(item, partial)
        if target:
            out.append(_resolve_reference(target, path, root))
    return out

