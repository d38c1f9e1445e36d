"""Dev-only: refresh memlint's bundled catalog (memlint/catalog/hub_models.json) from the Hub.

    python tools/refresh_catalog.py ID [ID ...]            # what would change (nothing written)
    python tools/refresh_catalog.py --write ID [ID ...]    # add or update those entries
    python tools/refresh_catalog.py --write --all          # re-fetch every entry of the catalog
    python tools/refresh_catalog.py --write --config ID=PATH --params N --source TEXT
                                                           # an entry from a config.json at hand

For each Hub id it asks the Hub (`HF_ENDPOINT`, default https://huggingface.co; `HF_TOKEN` for
gated repositories) for the model's info (`/api/models/<id>`: the commit `sha` and the
safetensors parameter count `safetensors.total`) and for `config.json` at that commit, and keeps
the architecture keys of the config (token ids, initialiser settings and other keys no memory
term reads are dropped). Each entry records where it came from in `source`: the config's URL at
the commit, the commit, the parameter count's origin and the date.

An entry is written only when memlint counts the model: its parameter count of the config must
equal the Hub's within the entry's existing `params_tolerance` (0.5% for a new entry), and the
model type must be one memlint counts (memory/model_types.py); otherwise the id is refused with
the reason, and the catalog keeps what it had (a catalog entry memlint miscounts would lead to
wrong verdicts). Aliases already in the catalog are kept. Nothing here runs in the tests
against the network: tests/catalog/test_refresh.py drives it against a loopback Hub.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from memlint.catalog import hub  # noqa: E402
from memlint.memory.architecture import ConfigError  # noqa: E402
from memlint.memory.params import architecture, count_params  # noqa: E402

CATALOG = hub.CATALOG_FILE
NEW_TOLERANCE = 0.005
# config.json keys no memory term reads (the rest is kept: hybrids need their layer plans)
DROP = frozenset({
    "_name_or_path", "transformers_version", "bos_token_id", "eos_token_id", "pad_token_id",
    "initializer_range", "use_cache", "auto_map", "output_attentions", "output_hidden_states",
    "return_dict", "id2label", "label2id", "task_specific_params", "chat_template",
    "decoder_start_token_id", "sep_token_id", "unk_token_id", "image_token_id",
    "video_token_id", "vision_start_token_id", "vision_end_token_id", "audio_token_id",
    "boi_token_id", "eoi_token_id", "eos_token_ids", "bos_token_ids", "tokenizer_class",
})


class Refused(Exception):
    """An id the catalog does not take, with the reason."""


def _get(url: str, token: str | None) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "memlint-catalog-refresh"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.read(hub.MAX_CONFIG_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise Refused(f"{url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise Refused(f"{url}: {exc}") from None


def _json(data: bytes, what: str) -> dict:
    if len(data) > hub.MAX_CONFIG_BYTES:
        raise Refused(f"{what} is larger than {hub.MAX_CONFIG_BYTES} bytes")
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise Refused(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise Refused(f"{what} is not a JSON object")
    return value


def architecture_keys(config: dict) -> dict:
    """The config without the keys no memory term reads (nested configs too)."""
    out = {}
    for key, value in config.items():
        if key in DROP:
            continue
        out[key] = architecture_keys(value) if isinstance(value, dict) and key.endswith(
            "_config") and key != "quantization_config" else value
    return out


def fetch(model_id: str, endpoint: str, token: str | None) -> tuple[dict, int, dict]:
    """(config, parameter count, source) of a Hub repository at its current commit."""
    base = endpoint.rstrip("/")
    info = _json(_get(f"{base}/api/models/{model_id}", token), f"{model_id}'s model info")
    sha = info.get("sha")
    total = (info.get("safetensors") or {}).get("total")
    if not isinstance(sha, str) or not sha:
        raise Refused(f"{model_id}: the Hub's model info has no commit sha")
    if not isinstance(total, int) or total <= 0:
        raise Refused(f"{model_id}: the Hub gives no safetensors parameter count")
    url = f"{base}/{model_id}/resolve/{sha}/config.json"
    config = _json(_get(url, token), f"{model_id}'s config.json")
    source = {"config": url, "revision": sha,
              "params": f"safetensors.total of {base}/api/models/{model_id}",
              "retrieved": datetime.date.today().isoformat()}
    return config, total, source


def make_entry(model_id: str, config: dict, params: int, source: dict,
               old: dict | None) -> dict:
    """The catalog entry, or Refused when memlint does not count the model within tolerance."""
    kept = architecture_keys(config)
    try:
        counted = count_params(architecture(kept)).total
    except ConfigError as exc:
        raise Refused(f"{model_id}: {exc}") from None
    tolerance = (old or {}).get("params_tolerance", NEW_TOLERANCE)
    off = abs(counted - params) / params
    if off > tolerance:
        raise Refused(f"{model_id}: memlint counts {counted:,} parameters, the source "
                      f"{params:,} ({off:.2%} off, over {tolerance:.2%}); not in the catalog")
    entry = {"id": model_id}
    if old and old.get("aliases"):
        entry["aliases"] = list(old["aliases"])
    entry["params"] = params
    for key in ("params_tolerance", "note"):
        if old and key in old:
            entry[key] = old[key]
    entry["source"] = source
    entry["config"] = kept
    return entry


def load_catalog(path: str = CATALOG) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def write_catalog(data: dict, path: str = CATALOG) -> None:
    """The catalog's own layout: one entry per line (a refresh diffs as the entries it changed)."""
    head = {k: v for k, v in data.items() if k != "models"}
    lines = ["{"] + [f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in head.items()]
    entries = [json.dumps(m, ensure_ascii=False) for m in data["models"]]
    text = "\n".join(lines + ['"models": ['] + [",\n".join(entries)] + ["]", "}"]) + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def refresh(ids: list, endpoint: str, token: str | None, write: bool, path: str = CATALOG,
            local: dict | None = None, out=sys.stdout) -> int:
    """Refresh `ids` (or the `local` {id: (config, params, source)}); returns how many refused."""
    data = load_catalog(path)
    models = data["models"]
    index = {m["id"].lower(): i for i, m in enumerate(models)}
    refused = 0
    for model_id in ids:
        old = models[index[model_id.lower()]] if model_id.lower() in index else None
        try:
            config, params, source = (local[model_id] if local and model_id in local
                                      else fetch(model_id, endpoint, token))
            entry = make_entry(old["id"] if old else model_id, config, params, source, old)
        except Refused as exc:
            refused += 1
            print(f"refused  {exc}", file=out)
            continue
        if old is None:
            index[model_id.lower()] = len(models)
            models.append(entry)
            print(f"added    {model_id} ({entry['params']:,} parameters)", file=out)
        elif old != entry:
            models[index[model_id.lower()]] = entry
            print(f"updated  {model_id}", file=out)
        else:
            print(f"same     {model_id}", file=out)
    if write:
        write_catalog(data, path)
    return refused


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*")
    parser.add_argument("--all", action="store_true", help="every id the catalog holds")
    parser.add_argument("--write", action="store_true", help="write hub_models.json")
    parser.add_argument("--catalog", default=CATALOG)
    parser.add_argument("--config", help="ID=PATH: an entry from a config.json at hand")
    parser.add_argument("--params", type=int, help="with --config: the published count")
    parser.add_argument("--source", help="with --config: where the config and count are from")
    args = parser.parse_args(argv)
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    token = os.environ.get("HF_TOKEN")
    local = None
    ids = list(args.ids)
    if args.config:
        if not (args.params and args.source and "=" in args.config):
            parser.error("--config ID=PATH needs --params N and --source TEXT")
        model_id, path = args.config.split("=", 1)
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
        local = {model_id: (config, args.params, {
            "config": args.source, "params": args.source,
            "retrieved": datetime.date.today().isoformat()})}
        ids.append(model_id)
    if args.all:
        ids += [m["id"] for m in load_catalog(args.catalog)["models"]]
    if not ids:
        parser.error("give Hub ids, --all or --config")
    refused = refresh(ids, endpoint, token, args.write, args.catalog, local)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
