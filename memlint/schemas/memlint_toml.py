"""JSON Schemas of memlint's own files, built from the tables memlint reads them with.

- `memlint.toml` / `*.memlint.toml` (adapters/native.py): the scenario keys of memlint/keys.py
  (training, parallelism, hardware, model, conventions, rl, engine), the named assumptions of
  memlint/assumptions.py and `files = [...]`, at the top level or under `[scenario]`. A dotted key
  is a nested table in TOML (`runtime.allocator_fraction = 0.05` is the table `runtime`), so the
  schema nests them; `model` is a name (`model = "llama3-8b"`) or a `[model]` table (`preset` or
  `path`, and any HF config key: `model.<hf_key>` overrides it).
- `[tool.memlint]` of pyproject.toml (config.py): select, ignore, fail-on, runs, scenario, ...

Each key's type comes from its converter (a positive whole number, a choice, a size such as
"80GiB", ...). memlint's converters also take numbers written as strings (the command line's
`--set`); the schema keeps to the TOML types a file should use.
"""
from __future__ import annotations

from memlint import keys as K
from memlint.assumptions import ASSUMPTIONS

DRAFT = "https://json-schema.org/draft/2020-12/schema"
SIZE = {"anyOf": [{"type": "integer", "minimum": 0},
                  {"type": "string", "pattern": r"^\s*([0-9]+(\.[0-9]*)?|\.[0-9]+)"
                                                r"([eE][+-]?[0-9]+)?"
                                                r"(\s*([kKmMgGtT][iI]?[bB]?|[bB]))?\s*$"}],
        "title": "bytes: a number, or a size such as \"80GiB\", \"141GB\", \"2TiB\""}
# (the unit's blanks sit inside its optional group: `\s*(unit)?\s*$` backtracked quadratically
# on a long run of blanks in an editor's validator)
_BY_CONVERTER = {
    "positive_int": {"type": "integer", "minimum": 1},
    "non_negative_int": {"type": "integer", "minimum": 0},
    "to_int": {"type": "integer"},
    "non_negative_float": {"type": "number", "minimum": 0},
    "probability": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
    "fraction": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    "to_bool": {"type": "boolean"},
    "to_str": {"type": "string"},
    "env_value": {"type": "string"},
    "to_bytes": SIZE,
    "size_or_auto": {"anyOf": [{"type": "integer", "minimum": 0}, {"const": "auto"}]},
    "optional_positive_int": {"anyOf": [{"type": "integer", "minimum": 1},
                                        {"enum": ["auto", "none"]}]},
    "shard_degree": {"anyOf": [{"type": "integer", "minimum": 1}, {"const": -1}]},
    "zero_stage": {"enum": [0, 1, 2, 3]},
    "sleep_level": {"enum": [0, 1, 2]},
    "layer_spec": {"type": "string", "pattern": r"^\s*(last|first|expanded)\s*:\s*[0-9]+\s*$"},
    "module_names": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}},
                               {"const": False}]},
    "word_list": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
    "layout_stages": {"anyOf": [{"type": "string", "pattern": "^[EtmL|]+$"},
                                {"type": "array", "items": {"type": "string",
                                                            "pattern": "^[EtmL]+$"}}]},
}


def value_schema(convert, doc: str) -> dict:
    """The JSON type a converter accepts, with the key's documentation."""
    options = getattr(convert, "options", None)
    if options is not None:
        words = list(options) + sorted(getattr(convert, "aliases", None) or {})
        out = {"enum": words + [w == "true" for w in ("true", "false") if w in words]}
    else:
        name = getattr(convert, "__name__", "")
        out = dict(_BY_CONVERTER.get(name, {}))   # unknown converter: any value
    out["description"] = doc
    return out


def _table() -> dict:
    return {"type": "object", "properties": {}, "additionalProperties": False}


def _as_table(parent: dict, part: str) -> dict:
    """The table at parent[part], made (or made beside a leaf of that name) when missing."""
    child = parent["properties"].get(part)
    if child is None:
        child = parent["properties"][part] = _table()
    if "properties" in child:
        return child
    if "anyOf" in child and "properties" in child["anyOf"][-1]:
        return child["anyOf"][-1]
    # a key that is both a value and a table (compile = true; compile.loss_saved = "eager")
    table = _table()
    parent["properties"][part] = {"anyOf": [child, table],
                                  "description": child.get("description", "")}
    return table


def _insert(tree: dict, dotted: str, leaf: dict) -> None:
    """Put `leaf` at the nested properties path of a dotted key."""
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        node = _as_table(node, part)
    existing = node["properties"].get(parts[-1])
    if existing is not None and "properties" in existing:
        node["properties"][parts[-1]] = {"anyOf": [leaf, existing],
                                         "description": leaf.get("description", "")}
        return
    node["properties"][parts[-1]] = leaf


def _model() -> dict:
    """`model`: a name, or a [model] table of HF config keys with preset/path naming it."""
    table = {"type": "object", "additionalProperties": True,
             "description": "the model as a table: `preset` or `path` name it, any other key "
                            "overrides that HF config.json key (model.<hf_key>)",
             "properties": {
                 "preset": {"type": "string", "description": "a preset name (memlint rules "
                            "lists none; `memlint estimate --model NAME` resolves it)"},
                 "path": {"type": "string", "description": "an HF config.json or its folder"}}}
    for name, key in K.KEYS.items():
        if name.startswith("model."):
            table["properties"][name[len("model."):]] = value_schema(key.convert, key.doc)
    return {"anyOf": [{"type": "string"}, table],
            "description": K.KEYS["model"].doc + ", or a [model] table"}


def scenario_properties() -> dict:
    """The scenario keys as an object schema: each dotted key both as nested tables
    (`[runtime] allocator_fraction = ...`) and as one quoted key (`"runtime.allocator_fraction"
    = ...`), as adapters/native.py flattens them; `"model.<hf_key>"` for any HF config key."""
    tree = _table()
    leaves = [(name, value_schema(key.convert, key.doc))
              for name, key in list(K.KEYS.items()) + list(K.CONVENTION_KEYS.items())]
    leaves += [(name, value_schema(a.convert, f"{a.doc} (assumption; source: {a.source})"))
               for name, a in ASSUMPTIONS.items()]
    for name, leaf in leaves:
        if name == "model":
            continue
        if "." in name:
            tree["properties"][name] = leaf
        if not name.startswith("model."):
            _insert(tree, name, leaf)
    tree["properties"]["model"] = _model()
    tree["patternProperties"] = {r"^model\..+": {"description": "overrides this key of the "
                                                  "model's HF config.json"}}
    return tree


def memlint_toml() -> dict:
    """memlint.toml: the scenario keys at the top level or under [scenario], plus files."""
    scenario = scenario_properties()
    files = {"type": "array", "items": {"type": "string", "minLength": 1},
             "description": "the other files of this run (configs, launch scripts), relative to "
                            "this file; checked together as one run"}
    top = {"type": "object", "additionalProperties": False,
           "patternProperties": scenario["patternProperties"],
           "properties": dict(scenario["properties"], files=files,
                              scenario={"$ref": "#/$defs/scenario",
                                        "description": "the scenario keys as a table of their "
                                                       "own (instead of the top level)"})}
    return {"$schema": DRAFT, "title": "memlint run description (memlint.toml)",
            "description": "A training run for memlint: the model, the scenario keys of "
                           "memlint's vocabulary and the run's other files "
                           "(`memlint check`, `memlint estimate`).",
            **top, "$defs": {"scenario": scenario}}


def _strings(description: str) -> dict:
    return {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
            "description": description}


def tool_memlint() -> dict:
    """[tool.memlint] of pyproject.toml, as memlint.config.parse_table reads it."""
    severity = {"enum": ["error", "warning", "warn", "info"]}
    run = {"type": "object", "additionalProperties": False, "required": ["files"],
           "properties": {
               "name": {"type": "string", "description": "the run's name in reports"},
               "files": {"type": "array", "minItems": 1, "items": {"type": "string"},
                         "description": "the files of the run, relative to pyproject.toml"},
               "set": {"type": "array", "items": {"type": "string", "pattern": "^[^=]+=.*$"},
                       "description": "scenario keys of this run, as KEY=VALUE"},
               "model": {"type": "string", "description": K.KEYS["model"].doc}}}
    properties = {
        "select": _strings("only these rules: codes, names or prefixes (ML1); default: every "
                           "stable rule"),
        "extend-select": _strings("rules added to the selection (preview rules)"),
        "ignore": _strings("rules skipped: codes, names or prefixes"),
        "fail-on": dict(severity, description="the lowest severity that makes the exit code 1 "
                                              "(default error)"),
        "per-file-ignores": {"type": "object", "additionalProperties": _strings(""),
                             "description": "glob = [rules] skipped in the files it matches"},
        "severity": {"type": "object", "additionalProperties": severity,
                     "description": "rule = severity: a rule's findings reported at another "
                                    "severity"},
        "options": {"type": "object", "additionalProperties": {"type": "object"},
                    "description": "rule = {option = value}: a rule's options "
                                   "(`memlint explain CODE` lists them)"},
        "files": {"type": "array", "items": {"type": "string"},
                  "description": "what `memlint check` without paths checks"},
        "exclude": {"type": "array", "items": {"type": "string"},
                    "description": "globs of folders and files `memlint check DIR` skips"},
        "allow-outside-root": {"type": "boolean",
                               "description": "follow references to files outside the "
                                              "repository root"},
        "runs": {"anyOf": [{"type": "array", "items": run}, run],
                 "description": "[[tool.memlint.runs]]: files that describe one run, checked "
                                "together"},
        "scenario": {"$ref": "#/$defs/scenario",
                     "description": "scenario keys every run of the project starts from"},
        "assumptions": {"type": "object",
                        "description": "named assumptions (runtime.allocator_fraction, ...) "
                                       "that `memlint compare --write-assumptions` records"},
        "models": {"type": "object",
                   "additionalProperties": {"anyOf": [
                       {"type": "string", "minLength": 1,
                        "description": "the model's config.json (or its folder), relative to "
                                       "pyproject.toml"},
                       {"type": "object", "minProperties": 1,
                        "description": "the model's config.json keys (model_type, hidden_size, "
                                       "...)"}]},
                   "description": "the project's own models: name (as its configs write it) = "
                                  "the path of its config.json, or a table of its keys; they "
                                  "resolve before the HF cache and memlint's catalog"},
    }
    # parse_table reads snake_case spellings of the same settings too
    for name in list(properties):
        if "-" in name:
            properties[name.replace("-", "_")] = properties[name]
    return {"$schema": DRAFT, "title": "memlint settings ([tool.memlint] in pyproject.toml)",
            "description": "memlint's settings for a project: rule selection, severities, runs "
                           "and the project's scenario.",
            "type": "object", "additionalProperties": False, "properties": properties,
            "$defs": {"scenario": scenario_properties()}}
