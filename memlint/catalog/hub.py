"""Hugging Face Hub ids (`meta-llama/Llama-3.1-8B`) -> an HF config, without downloading weights.

Steps, in order; the first that answers wins, and every step tried is named in `Resolution.steps`:
1. the local Hugging Face cache, laid out as huggingface_hub writes it:
   `<cache>/models--<org>--<name>/refs/<revision>` holds a commit hash and
   `<cache>/models--<org>--<name>/snapshots/<hash>/config.json` the file. `<cache>` is
   `HF_HUB_CACHE`, else `HUGGINGFACE_HUB_CACHE` (its older name), else `HF_HOME/hub`, else
   `XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub` (huggingface_hub's
   `constants.py`). Only `config.json` is read; a snapshot without `refs/main` is taken when it
   is the only one.
2. the bundled catalog (`hub_models.json` beside this file): by Hub id or alias, case-insensitive,
   then by the id without a chat/instruct suffix (an instruct model has its base's architecture).
3. the Hub itself, only when the user opts in (`--hub`, `MEMLINT_HUB=1`): `config.json` alone,
   through `huggingface_hub.hf_hub_download` (the optional extra `memlint-llm[hub]`), which honours
   `HF_TOKEN`, `HF_ENDPOINT` and `HF_HUB_OFFLINE`.

Nothing here raises on bad input: a malformed cache entry, a network error or a missing extra
becomes a step that says so, and a model that resolves nowhere has `config None`.
"""
from __future__ import annotations

import json
import os

from memlint import lazy_re
from memlint.records import field, record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

CATALOG_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hub_models.json")
MAX_CONFIG_BYTES = 1024 * 1024

# A Hub repo id: an optional namespace, then a name (huggingface_hub's validate_repo_id: letters,
# digits, '-', '_', '.', at most 96 characters, no '--' or '..').
_REPO_ID = lazy_re.compile(
    r"^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
# An instruct / chat model has its base model's architecture.
_SUFFIXES = ("-instruct", "-chat", "-it", "-sft", "-dpo", "-base")


@record
class Resolution:
    """What `resolve` found. `config` is None when no step could resolve the id."""

    name: str
    config: Optional[dict] = None
    path: Optional[str] = None        # the config.json read (cache or Hub download)
    origin: str = ""                  # "cache" | "catalog" | "hub" | ""
    source: str = ""                  # one line for the report: where the config came from
    steps: list = field(default_factory=list)
    entry: Optional[dict] = None      # the catalog entry, when the catalog answered


_ID_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_ID_CHARS = _ID_FIRST | frozenset("._-")


def repo_id(text: str) -> bool:
    """_REPO_ID.match(text), without compiling it (start-up): one or two "/"-separated names of
    1-96 characters from [A-Za-z0-9._-], each starting with a letter or digit; `$` also
    matches before a final newline."""
    body = text[:-1] if text.endswith("\n") else text
    parts = body.split("/")
    return len(parts) <= 2 and all(0 < len(p) <= 96 and p[0] in _ID_FIRST
                                   and _ID_CHARS.issuperset(p) for p in parts)


def looks_like_hub_id(name: str) -> bool:
    text = name.strip()
    if not repo_id(text) or "--" in text or ".." in text:
        return False
    return not text.lower().endswith((".json", ".yaml", ".yml", ".toml"))


# ---------------------------------------------------------------------------------------------
# 1. the local cache


def cache_dirs(env: Optional[dict] = None) -> list:
    """The cache folder huggingface_hub would use, from the environment (first that is set)."""
    env = os.environ if env is None else env
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(key):
            return [os.path.expanduser(env[key])]
    if env.get("HF_HOME"):
        return [os.path.join(os.path.expanduser(env["HF_HOME"]), "hub")]
    if env.get("XDG_CACHE_HOME"):
        return [os.path.join(os.path.expanduser(env["XDG_CACHE_HOME"]), "huggingface", "hub")]
    return [os.path.join(os.path.expanduser("~"), ".cache", "huggingface", "hub")]


MAX_CONFIG_DEPTH = 64   # as loaders.MAX_DEPTH: no model config nests deeper


def _read_json(path: str) -> tuple[Optional[dict], str]:
    try:
        if os.path.getsize(path) > MAX_CONFIG_BYTES:
            return None, f"{path} is over {MAX_CONFIG_BYTES} bytes"
        with open(path, "rb") as handle:
            data = json.loads(handle.read().decode("utf-8-sig"))
    except RecursionError:   # json's decoder recurses per level: 100,000 `[` in a cached file
        return None, f"{path} is unreadable (nested deeper than {MAX_CONFIG_DEPTH} levels)"
    except (OSError, ValueError) as exc:
        return None, f"{path} is unreadable ({type(exc).__name__}: {exc})"
    if not isinstance(data, dict):
        return None, f"{path} is not a JSON object"
    if _depth(data) > MAX_CONFIG_DEPTH:   # whatever later walks the config must not recurse
        return None, f"{path} is unreadable (nested deeper than {MAX_CONFIG_DEPTH} levels)"
    return data, ""


def _depth(data) -> int:
    """How deeply lists and objects nest in `data` (iterative)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        elif not isinstance(value, list):
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_CONFIG_DEPTH:
            stack.extend((item, depth + 1) for item in value if isinstance(item, (dict, list)))
    return deepest


def cache_lookup(name: str, env: Optional[dict] = None,
                 revision: str = "main") -> tuple[Optional[str], list]:
    """(path of the cached config.json or None, steps)."""
    steps: list = []
    if "/" not in name:
        folder_name = f"models--{name}"
    else:
        folder_name = "models--" + name.replace("/", "--")
    for cache in cache_dirs(env):
        repo = os.path.join(cache, folder_name)
        if not os.path.isdir(repo):
            steps.append(f"not in the Hugging Face cache ({cache})")
            continue
        snapshots = os.path.join(repo, "snapshots")
        commit = None
        ref = os.path.join(repo, "refs", revision)
        if os.path.isfile(ref):
            try:
                with open(ref, encoding="utf-8", errors="replace") as handle:
                    commit = handle.read(200).strip()
            except OSError:
                commit = None
        if commit and (os.sep in commit or commit in (".", "..")):
            commit = None
        candidates = []
        if commit:
            candidates.append(os.path.join(snapshots, commit, "config.json"))
        else:
            try:
                found = sorted(os.listdir(snapshots)) if os.path.isdir(snapshots) else []
            except OSError:
                found = []
            if len(found) == 1:
                candidates.append(os.path.join(snapshots, found[0], "config.json"))
            elif found:
                steps.append(f"in the Hugging Face cache ({repo}) without refs/{revision} and "
                             f"with {len(found)} snapshots: cannot tell which is current")
                continue
        for candidate in candidates:
            if os.path.isfile(candidate):
                return candidate, steps
        steps.append(f"in the Hugging Face cache ({repo}) but without a config.json"
                     + (f" for refs/{revision} = {commit}" if commit else ""))
    return None, steps


# ---------------------------------------------------------------------------------------------
# 2. the bundled catalog

_CATALOG: dict = {}


def catalog() -> dict:
    """lower-cased id or alias -> catalog entry (loaded once)."""
    if not _CATALOG:
        with open(CATALOG_FILE, encoding="utf-8") as handle:
            data = json.load(handle)
        for entry in data["models"]:
            for key in [entry["id"]] + list(entry.get("aliases", ())):
                _CATALOG[key.lower()] = entry
    return _CATALOG


def entries() -> list:
    """Every catalog entry once, in file order."""
    seen, out = set(), []
    for entry in catalog().values():
        if id(entry) not in seen:
            seen.add(id(entry))
            out.append(entry)
    return out


def catalog_lookup(name: str) -> tuple[Optional[dict], str]:
    """(entry, how it matched) or (None, "")."""
    table = catalog()
    key = name.strip().lower()
    if key in table:
        entry = table[key]
        how = "by id" if entry["id"].lower() == key else f"as an alias of {entry['id']}"
        return entry, how
    stem = key
    for _ in range(3):  # Llama-2-7b-chat-hf, Qwen2.5-7B-Instruct-1M ...
        stripped = False
        for suffix in _SUFFIXES + ("-hf",):
            if stem.endswith(suffix):
                stem = stem[: -len(suffix)]
                stripped = True
                break
        if not stripped:
            break
        for candidate in (stem, stem + "-hf"):
            if candidate in table:
                entry = table[candidate]
                return entry, (f"by its base model {entry['id']} (an instruct/chat variant has "
                               "its base's architecture)")
    return None, ""


def close_matches(name: str, n: int = 3) -> list:
    """The catalog ids closest to `name`, as difflib.get_close_matches ranks them (case aside)."""
    # start-up: the matcher loads only when a suggestion is made
    from memlint.keys import close_matches as closest

    table = catalog()
    if _LOWERED[0] is not table or _LOWERED[1] != len(table):   # once per catalog (bulk speed)
        lowered = {entry["id"].lower(): entry["id"] for entry in entries()}
        _LOWERED[:] = [table, len(table), lowered, tuple(lowered)]
    lowered, names = _LOWERED[2], _LOWERED[3]
    return [lowered[m] for m in closest(name.lower(), names, n)]


_LOWERED: list = [None, 0, {}, ()]   # [the catalog, its size, lower-cased id -> id, those ids]


# ---------------------------------------------------------------------------------------------
# 3. the Hub (opt-in)


def hub_enabled(flag: Optional[bool] = None, env: Optional[dict] = None) -> bool:
    if flag is not None:
        return flag
    env = os.environ if env is None else env
    return _truthy(env.get("MEMLINT_HUB"))


def _truthy(value) -> bool:
    """huggingface_hub's reading of its boolean variables (constants.ENV_VARS_TRUE_VALUES:
    1/ON/YES/TRUE, any case), so that HF_HUB_OFFLINE means here what it means to the Hub client;
    MEMLINT_HUB is read the same way."""
    return str(value or "").strip().lower() in ("1", "true", "yes", "on")


def hub_fetch(name: str, revision: Optional[str] = None,
              env: Optional[dict] = None) -> tuple[Optional[str], str]:
    """Download `config.json` of `name` (nothing else). (path or None, step text).

    The environment is read here, at the call, and handed to huggingface_hub explicitly (its own
    constants are read once at import): `HF_HUB_OFFLINE` / `TRANSFORMERS_OFFLINE` stop the call,
    `HF_ENDPOINT` names the Hub, `HF_TOKEN` authenticates, and the file lands in the cache folder
    that step 1 reads.
    """
    env = os.environ if env is None else env
    if _truthy(env.get("HF_HUB_OFFLINE")) or _truthy(env.get("TRANSFORMERS_OFFLINE")):
        return None, "the Hub was not asked: offline mode is on (HF_HUB_OFFLINE)"
    try:
        # start-up: optional dependency (the hub extra), only with --hub
        from huggingface_hub import hf_hub_download
    except ImportError:
        return None, ("the Hub was not asked: huggingface_hub is not installed "
                      "(pip install 'memlint-llm[hub]')")
    kwargs: dict = {"repo_id": name, "filename": "config.json", "revision": revision,
                    "cache_dir": cache_dirs(env)[0]}
    if env.get("HF_ENDPOINT"):
        kwargs["endpoint"] = env["HF_ENDPOINT"].rstrip("/")
    token = env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        kwargs["token"] = token
    try:
        path = hf_hub_download(**kwargs)
    except Exception as exc:  # noqa: BLE001 - any Hub failure is a step, never a traceback
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return None, f"the Hub could not give its config.json ({type(exc).__name__}: {text[:200]})"
    return str(path), "fetched config.json (only) from the Hub"


# ---------------------------------------------------------------------------------------------


def _take_file(result: Resolution, path: str, origin: str, source: str, done: str,
               bad: str) -> bool:
    """Read a found config.json into `result`; False (with the problem as a step) if unusable."""
    data, problem = _read_json(path)
    if data is None:
        result.steps.append(f"{bad}: {problem}")
        return False
    result.config, result.path, result.origin, result.source = data, path, origin, source
    if done:
        result.steps.append(done)
    return True


def resolve(name: str, hub: Optional[bool] = None, env: Optional[dict] = None) -> Resolution:
    """Resolve a Hub id through the cache, the catalog and (opt-in) the Hub, in that order."""
    result = Resolution(name=name)
    path, steps = cache_lookup(name, env)
    result.steps.extend(steps)
    if path is not None and _take_file(result, path, "cache", f"the Hugging Face cache ({path})",
                                       f"read {path} from the Hugging Face cache",
                                       "a malformed cache entry"):
        return result
    entry, how = catalog_lookup(name)
    if entry is not None:
        result.config = dict(entry["config"])
        result.origin, result.entry = "catalog", entry
        result.source = f"memlint's bundled catalog ({entry['id']}, matched {how})"
        result.steps.append(f"found in the bundled catalog, matched {how}")
        return result
    result.steps.append("not in memlint's bundled catalog")
    if not hub_enabled(hub, env):
        result.steps.append("the Hub was not asked (off by default; --hub or MEMLINT_HUB=1 "
                            "allows fetching config.json only)")
        return result
    path, step = hub_fetch(name, env=env)
    result.steps.append(step)
    if path is not None:
        _take_file(result, path, "hub", f"the Hugging Face Hub (config.json, saved at {path})",
                   "", "the Hub's config.json is unusable")
    return result


def how_to_resolve(name: str) -> str:
    """The advice an unresolved id's warning ends with."""
    near = close_matches(name)
    hint = f" (the catalog has: {', '.join(near)})" if near else ""
    return (f"give its config.json with --model PATH, or fetch it once with "
            f"`huggingface-cli download {name} config.json`, or pass --hub to let memlint fetch "
            f"config.json only{hint}")
