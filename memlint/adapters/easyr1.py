"""EasyR1 (hiyouga/EasyR1): `python3 -m verl.trainer.main config=FILE.yaml a.b=c ...` and its YAML.

Read statically (the script never runs) at hiyouga/EasyR1@b44b311b:
- verl/trainer/main.py merges its dataclass defaults (memlint/facts/easyr1_defaults.json, from
  tools/easyr1_defaults.py), then the `config=` file, then the command line's dotted overrides
  (OmegaConf.merge; a structured config refuses a key it lacks);
- the actor trains under FSDP (workers/fsdp_workers.py): parameters in fp32 unless
  `fsdp.torch_dtype` (the reference in bf16, :198-199), `enable_full_shard` (FULL_SHARD, else
  SHARD_GRAD_OP), `enable_cpu_offload` (FSDP CPUOffload(offload_params=True): parameters and
  gradients on the host, the optimizer step there, :298-299), `offload.offload_params` /
  `offload_optimizer` (moved to the host between passes, :481-498);
- the update runs `global_batch_size x rollout.n / (GPUs / ulysses_size)` sequences per device
  per optimizer step (:141-146) in micro-batches of `micro_batch_size_per_device_for_update`, or
  with `dynamic_batching` packed micro-batches of that many times the longest sequence
  (workers/actor/dp_actor.py:242); the log-prob pass likewise with `..._for_experience`
  (dp_actor.py:198) and no entropy;
- a reference unless `algorithm.disable_kl` (trainer/ray_trainer.py:195-200), the actor with its
  adapter disabled under LoRA (fsdp_workers.py compute_ref_log_probs); a critic for `gae`;
- vLLM in the worker (workers/rollout/vllm_rollout_spmd.py): `gpu_memory_utilization`,
  `tensor_parallel_size`, `max_num_batched_tokens`, max_model_len `prompt + response` unless
  given, sleep mode at level 1 between rollouts (:143-149).
"""
from __future__ import annotations

import json
import os
import re
from functools import lru_cache
TYPE_CHECKING = False   # start-up: typing is for the type checker only

if TYPE_CHECKING:
    from typing import Any, Optional

from memlint.adapters.detection import easyr1 as detect  # noqa: F401 - the adapter's detect()
from memlint.diagnostics import UNKNOWN_KEY, UNRESOLVED, Severity, make
from memlint.ir import Partial, Provenance
from memlint.keys import suggest
from memlint.loaders import inside, load_yaml, read_text, repo_root, suppressions

FORMAT = "easyr1"
HERE = os.path.dirname(os.path.abspath(__file__))
# dict-valued fields: any key below them is accepted
_OPEN = ("worker.actor.model.override_config", "worker.critic.model.override_config",
         "worker.rollout.val_override_config", "worker.reward.reward_function_kwargs")


@lru_cache(maxsize=1)
def defaults() -> dict:
    with open(os.path.join(os.path.dirname(HERE), "facts", "easyr1_defaults.json"),
              encoding="utf-8") as handle:
        return json.load(handle)


def version() -> str:
    return f"EasyR1@{defaults()['commit'][:8]}"


class Entry:
    __slots__ = ("value", "prov", "default", "line", "unresolved")

    def __init__(self, value, prov, default, line=None, unresolved=()):
        self.value, self.prov, self.default = value, prov, default
        self.line, self.unresolved = line, unresolved


class Config:
    """EasyR1's flat config (dotted key -> Entry) with the file and the overrides laid over."""

    name = "PPOConfig"

    def __init__(self, anchor: Provenance):
        self.entries = {key: Entry(value, anchor, True, where)
                        for key, (value, where) in defaults()["keys"].items()}
        self.used_defaults: dict = {}

    def known(self, key: str) -> bool:
        return key in self.entries or any(key.startswith(k + ".") for k in _OPEN)

    def set(self, key: str, value: Any, prov: Provenance, unresolved: tuple = ()) -> None:
        self.entries[key] = Entry(value, prov, False, None, unresolved)

    def get(self, key: str) -> Optional[Entry]:
        entry = self.entries.get(key)
        if entry is not None and entry.default:
            self.used_defaults[key] = (entry.value, entry.line)
        return entry


def load(path: str, text: str) -> Partial:
    partial = Partial(source=path, fmt=FORMAT)
    partial.suppressions = suppressions(text)
    anchor = Provenance(path, 1, 1, "config")
    config = Config(anchor)
    if path.lower().endswith((".yaml", ".yml")):
        _overlay(config, path, text, partial)
    else:
        launch = _launch(path, text, partial)
        if launch is None:
            return partial
        anchor, config_file, overrides = launch
        config = Config(anchor)
        if config_file is not None:
            found = _find(config_file, path)
            if found is None:
                partial.diagnostics.append(make(
                    UNRESOLVED, Severity.INFO, f"config={config_file} is not found next to the "
                    "script or at its repository's root; EasyR1's defaults stand in for it",
                    anchor, key="config"))
            else:
                file_text, problems = read_text(found)
                partial.diagnostics.extend(problems)
                if file_text is not None:
                    _overlay(config, found, file_text, partial)
        _override(config, overrides, partial)
    partial.anchor = anchor
    # start-up: the mapping loads with the reader
    from memlint.adapters import easyr1_mapping

    easyr1_mapping.apply(config, partial, anchor, defaults()["commit"][:8])
    return partial


def _flatten(data: dict, prefix: str = ""):
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and name not in _OPEN:
            yield from _flatten(value, name + ".")
        else:
            yield name, value


def _overlay(config: Config, path: str, text: str, partial: Partial) -> None:
    doc = load_yaml(path, text)
    partial.diagnostics.extend(doc.diagnostics)
    if not isinstance(doc.data, dict):
        return
    for key, value in _flatten(doc.data):
        prov = doc.prov(tuple(key.split(".")), key)
        _known_or_warn(config, key, prov, partial)
        config.set(key, value, prov)


def _known_or_warn(config: Config, key: str, prov: Provenance, partial: Partial) -> None:
    if config.known(key):
        return
    hint = suggest(key, list(config.entries))
    partial.diagnostics.append(make(
        UNKNOWN_KEY, Severity.WARNING, f"{key} is not a field of {version()}'s PPOConfig: "
        "OmegaConf's structured merge refuses it (verl/trainer/main.py)"
        + (f"; did you mean {hint!r}?" if hint else ""), prov, key=key))


def _launch(path: str, text: str, partial: Partial) -> Optional[tuple]:
    # start-up: the shell reader loads only for a script
    from memlint.adapters import _script, _shell

    parsed = _script.parse(path, text, partial)
    if parsed is None:
        return None
    script, prov = parsed
    interpreter = _shell.Interpreter()
    for command in interpreter.run(script):
        texts = [f.text for f in command.fields]
        if "verl.trainer.main" not in texts:
            continue
        start = texts.index("verl.trainer.main") + 1
        config_file, overrides = None, []
        for field in command.fields[start:]:
            key, sep, value = field.text.partition("=")
            if not sep or not re.fullmatch(r"[A-Za-z_][\w.]*", key):
                continue
            where = prov(field.origin, key)
            if key == "config":
                config_file = value if not field.unresolved else None
                continue
            overrides.append((key, value, where, tuple(field.unresolved)))
        for offset, message in interpreter.notes:
            partial.diagnostics.append(make(UNRESOLVED, Severity.INFO, message, prov(offset)))
        return prov(command.offset, "launch command"), config_file, overrides
    partial.diagnostics.append(make(UNRESOLVED, Severity.INFO, "no EasyR1 launch found "
                                    "(python3 -m verl.trainer.main config=...); nothing was read",
                                    Provenance(path, 1, 1, None)))
    return None


def _override(config: Config, overrides: list, partial: Partial) -> None:
    # start-up: the Hydra value reader is shared with verl's
    from memlint.adapters._hydra import primitive

    for key, value, prov, unresolved in overrides:
        _known_or_warn(config, key, prov, partial)
        config.set(key, primitive(value) if not unresolved else value, prov, unresolved)


def _find(name: str, script: str) -> Optional[str]:
    """`config=` is relative to where the script is launched: EasyR1's root in its examples
    (`config=examples/config.yaml`). Tried from the script's folder upwards to the repository's
    root, never outside it."""
    root = os.path.abspath(repo_root(script))
    place = os.path.dirname(os.path.abspath(script))
    while True:
        candidate = os.path.normpath(os.path.join(place, name))
        if inside(candidate, root) and os.path.isfile(candidate):
            return candidate
        if place == root or os.path.dirname(place) == place:
            return None
        place = os.path.dirname(place)
