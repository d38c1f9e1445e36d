"""The start-up path of a one-file check, as structure (issue 29; bench/speed.py measures it).

A hook pays memlint's start-up on every commit. For one real file of each format memlint reads
(bench/speed.py's FILES), `memlint check FILE` runs in a fresh interpreter, in a repository of its
own, and lists the modules it loaded that the bare interpreter had not. Each must be allowed:

- the standard library that argparse, json and re load (measured the same way, so a Python
  version's own imports need no edit here), what the pipeline uses besides (STDLIB), and PyYAML's
  or tomllib's own modules for a YAML or TOML file;
- memlint's CORE (every check), the adapter that reads the file (and those that read the files it
  refers to) with what they import, and what the case's kind needs (the memory model only where
  the check estimates). Detection imports no adapter (adapters/detection.py holds every built-in
  adapter's test): an adapter that declines the file is never imported.

Never on a one-file check: argparse (memlint/cli.py quick_check reads `check FILE`), dataclasses
and inspect (memlint/records.py declares the classes),
typing (except through tomllib), ast, traceback, shutil, importlib.metadata (memlint/plugins.py),
rich (plain text needs none), jsonschema (memlint's own schema walk validates DeepSpeed) and a
reporter the check does not print with.

This list is the start-up budget that a function-level import (`# start-up:` comment,
tests/test_layering.py) is justified against: moving an import to the top of a module puts the
module on the paths below, and this test says so.
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys

import pytest

from memlint.adapters import registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import speed  # noqa: E402 - bench/speed.py: the cases it times are the cases pinned here

NEVER = {"argparse", "gettext", "dataclasses", "inspect", "typing", "ast", "traceback", "shutil", "importlib.metadata",
         "rich", "jsonschema", "memlint.report.json_format", "memlint.report.sarif_format",
         "memlint.report.html_format", "memlint.commands.plan", "memlint.planner"}
#: Standard library the pipeline loads itself, besides what argparse, json and re load.
STDLIB = {"bisect", "_bisect", "errno", "fnmatch", "glob", "contextlib", "math", "gc", "atexit",
          "importlib", "importlib._bootstrap", "importlib._bootstrap_external",
          "collections.abc", "encodings.utf_8_sig", "locale", "_locale", "__future__"}
CORE = {
    "memlint", "memlint.cli", "memlint.commands", "memlint.commands.arguments", "memlint.api",
    "memlint.engine", "memlint.suppressions", "memlint.config", "memlint.runs", "memlint.scenario", "memlint.ir",
    "memlint.records", "memlint.lazy_re", "memlint.lazy_import", "memlint.diagnostics",
    "memlint.errors",
    "memlint.escape", "memlint.keys", "memlint.loaders", "memlint.assumptions", "memlint.units",
    "memlint.plugins", "memlint.verdicts", "memlint.catalog", "memlint.catalog.presets",
    "memlint.facts", "memlint.facts.coverage", "memlint.facts.deepspeed", "memlint.adapters",
    "memlint.adapters.registry", "memlint.adapters.detection", "memlint.adapters._neighbours",
    "memlint.adapters._toplevel",
    "memlint.report", "memlint.report.text_format",
    "memlint.report.host_lines", "memlint.report.phases",
    "memlint.memory",
    # the rule registry, from its index (memlint/rules/_index.py): a rule module loads only where
    # one of its rules can fire (RULE_MODULES)
    "memlint.rules", "memlint.rules.base", "memlint.rules._index",
}
#: The rule modules each case loads, exactly (memlint/rules/_index.py: a rule's formats and
#: requires decide): topology and FSDP layouts on every run (their rules read the parallel
#: degrees any file gives), the memory rules where a model is named (memlint.rules.memory loads
#: its helpers), the estimate's rules (strategy, host) where the check estimates or tp > 1
#: (ML603), and a framework's own rules for its files only; never the RL rules off an RL run.
_EVERY_RUN = ("topology", "fsdp")
_MODEL = (*_EVERY_RUN, "memory", "_support", "bounds")
_ESTIMATE = (*_MODEL, "strategy", "host")
RULE_MODULES = {
    "DeepSpeed JSON": (*_EVERY_RUN, "deepspeed"),
    "torchtitan TOML": (*_MODEL, "strategy"),   # no world size: no estimate, but tp = 8
    "torchtitan config_registry.py": _EVERY_RUN,
    "Megatron launch script": (*_ESTIMATE, "megatron"),
    "Megatron argument file": (*_ESTIMATE, "megatron"),
    "Megatron YAML": (*_ESTIMATE, "megatron"),
    "axolotl YAML": _ESTIMATE,
    "accelerate YAML": _EVERY_RUN,
    "gpt-neox YAML": _ESTIMATE,
    "LLaMA-Factory YAML": _ESTIMATE,
    "HF Trainer / TRL recipe": _ESTIMATE,
    "HF config.json": _MODEL,
    "memlint.toml (estimate)": _ESTIMATE,
}
#: Every run resolves its context (memory/context.py), and a sharded optimizer's layout reads the
#: framework's conventions (memory/topology.py): what importing them loads joins CORE (the
#: `stdlib` fixture adds it), but never the memory model itself (MODEL) unless the case estimates.
CONTEXT = ("memlint.memory.context", "memlint.memory.conventions")
MODEL = ("memlint.memory.estimate", "memlint.memory.model")
#: The model's architecture read from its config, without an estimate (a config.json alone, a
#: run whose world size nobody gave): what the parameter counter imports (the `stdlib` fixture
#: adds it), and the reader of config.json files.
ARCHITECTURE = {"memlint.adapters.hf_config", "memlint.facts.vocab"}
COUNTER = "memlint.memory.params"
#: A check that estimates: the memory model and the facts it reads (any module of them), the
#: hardware catalogs and the reader of the model's config.json (a Hub id resolves to one).
ESTIMATE = {"memlint.memory.", "memlint.facts.", "memlint.catalog.nodes", "memlint.catalog.hub",
            "memlint.hardware", "memlint.names", "memlint.adapters.hf_config"}
#: What each case needs beyond CORE and its adapters (by bench/speed.py's case name): module
#: names, or "architecture" / "estimate" for the groups above; a case not listed estimates.
KIND = {
    "DeepSpeed JSON": (),
    "torchtitan TOML": ("architecture", "memlint.catalog.torchtitan"),
    # the registry is Python: read with ast (never executed)
    "torchtitan config_registry.py": ("memlint.catalog.torchtitan", "ast", "_ast"),
    "HF config.json": ("architecture",),
    "accelerate YAML": (),
    # the trainer reader reads TRL's own arguments with the TRL RL reader; its argument mapping
    # loads when the file is read (adapters/hf_trainer.py)
    "HF Trainer / TRL recipe": ("estimate", "memlint.adapters.trl_rl",
                                "memlint.adapters.trainer_args", "memlint.adapters._values",
                                "memlint.adapters._lora"),
    # the shell reader loads when a launch script or an argument file is read (not a YAML file)
    # and the job kinds of its training script (megatron/entry.py)
    "Megatron launch script": ("estimate", "memlint.adapters._shell",
                               "memlint.adapters.megatron.entry"),
    "Megatron argument file": ("estimate", "memlint.adapters._shell"),
    "Megatron YAML": ("estimate", "memlint.adapters.megatron.yaml_reader"),
    # the reader takes the attention implementations from the trainer mapping
    "axolotl YAML": ("estimate", "memlint.adapters.trainer_args", "memlint.adapters._values"),
}
#: Modules on the way to a case that it never uses: each loads on first use only (lazy_import),
#: so these cases must not load them. The DeepSpeed and FSDP buffer terms (memory/buffers.py) on a
#: run with neither, the model presets (scenario.py) when no model is named, and the Megatron
#: reader's parts for another kind of file or a flag the file does not give.
_NOT_MEGATRON_RUN = ("memlint.memory.deepspeed_buffers", "memlint.memory.fsdp",
                     "memlint.catalog.presets", "memlint.adapters.megatron.layouts",
                     "memlint.facts.hybrid_pattern")
#: PyYAML, which a YAML file in memlint.yaml_subset's plain subset never needs
_NO_PYYAML = ("yaml", "yaml.constructor", "memlint.yaml_resolvers")
#: An estimate's parts for some runs only: TE's FP8 weights (an fp8 run), the node catalog (a
#: named node), the RL frameworks' records (an RL run) and the HF eager layer items (an HF eager
#: layer).
_SOME_RUNS = ("memlint.catalog.nodes", "memlint.memory.rl.frameworks")
_NOT_FP8 = (*_SOME_RUNS, "memlint.memory.fp8")
_NOT_HF = (*_NOT_FP8, "memlint.memory.activations_eager")
UNUSED = {
    "Megatron launch script": (*_NOT_MEGATRON_RUN, *_NOT_HF,
                               "memlint.adapters.megatron.yaml_reader"),
    "Megatron argument file": (*_NOT_MEGATRON_RUN, *_SOME_RUNS, "memlint.memory.activations_eager",
                               "memlint.adapters.megatron.yaml_reader",
                               "memlint.adapters.megatron.entry"),
    "Megatron YAML": (*_NOT_MEGATRON_RUN, *_NOT_HF, "memlint.adapters.megatron.entry",
                      "memlint.adapters._shell", *_NO_PYYAML),
    "axolotl YAML": ("memlint.memory.deepspeed_buffers", "memlint.memory.fsdp", *_NO_PYYAML,
                     *_NOT_FP8),
    "gpt-neox YAML": ("memlint.memory.deepspeed_buffers", "memlint.memory.fsdp",
                      "memlint.catalog.presets", *_NO_PYYAML, *_NOT_HF),
    "accelerate YAML": _NO_PYYAML,
    "LLaMA-Factory YAML": (*_NO_PYYAML, *_NOT_FP8),
    "HF Trainer / TRL recipe": (*_NO_PYYAML, *_NOT_FP8),
    "memlint.toml (estimate)": _NOT_HF,
    "DeepSpeed JSON": ("memlint.catalog", "memlint.catalog.presets"),
}
PROBE = ("import sys\nbefore = set(sys.modules)\n{code}\n"
         "print(repr(sorted(set(sys.modules) - before)))")


def loaded(code: str, cwd: str) -> set:
    """Modules that `code` loads in a fresh interpreter, beyond those the bare one has."""
    env = dict(os.environ, NO_COLOR="1", HF_HOME=os.path.join(cwd, ".hf-home"),
               HF_HUB_OFFLINE="1")
    env.pop("MEMLINT_HUB", None)
    result = subprocess.run([sys.executable, "-c", PROBE.format(code=code)], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return set(ast.literal_eval(result.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def stdlib(tmp_path_factory) -> dict:
    """What argparse, json and re load; PyYAML and tomllib on top (YAML, TOML files); and the
    architecture group: what the parameter counter imports."""
    cwd = str(tmp_path_factory.mktemp("stdlib"))
    base = loaded("import argparse, json, re", cwd) | STDLIB
    toml = "tomllib" if sys.version_info >= (3, 11) else "tomli"
    counter = {m for m in loaded(f"import {COUNTER}", cwd) if m.startswith("memlint.")}
    context = {m for m in loaded(f"import {', '.join(CONTEXT)}", cwd) if m.startswith("memlint.")}
    assert not context & set(MODEL), f"{CONTEXT} imports the memory model"
    CORE.update(context)
    # a YAML file in the plain subset is read by memlint.yaml_subset, others by PyYAML (whose
    # scalars memlint's loaders resolve with their own tag table, memlint.yaml_resolvers); the
    # YAML files of bench/speed.py are in the subset (UNUSED: no PyYAML)
    return {"": base, ".yaml": base | loaded("import yaml", cwd) | {"memlint.yaml_resolvers",
                                                                   "memlint.yaml_subset"},
            # a plain TOML file is read by memlint.toml_subset, others by tomllib
            ".toml": base | loaded(f"import {toml}", cwd) | {"memlint.toml_subset"},
            "architecture": ARCHITECTURE | counter}


def adapters_for(paths: list, cwd: str) -> set:
    """The adapters that read the files at `paths` (the checked file and those it refers to), and
    the memlint modules importing them loads."""
    readers = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            module = registry.detect_format(path, handle.read())
        assert module is not None, f"no adapter reads {path}"
        readers.append(module.__name__)
    return {m for m in loaded("\n".join(f"import {m}" for m in readers), cwd)
            if m.startswith("memlint.")}


def allowed(module: str, names: set) -> bool:
    return module in names or any(n.endswith(".") and module.startswith(n) for n in names)


def kind_of(case: str, stdlib: dict) -> set:
    groups = {"architecture": stdlib["architecture"], "estimate": ESTIMATE}
    out: set = set()
    for item in KIND.get(case, ("estimate",)):
        out |= groups.get(item, {item})
    return out


def check_case(tmp_path, case: str, copies: list, checked: str, stdlib: dict,
               extra: tuple = (), also: frozenset = frozenset()) -> set:
    for fixture, target in copies:
        path = tmp_path / target
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(ROOT, "fixtures", fixture), path)
    (tmp_path / ".git").mkdir()
    argv = ["check", checked, *extra]
    modules = loaded(f"from memlint.cli import main\nmain({argv!r})", str(tmp_path))
    suffix = os.path.splitext(checked)[1].replace(".yml", ".yaml")
    names = (stdlib.get(suffix, stdlib[""]) | CORE | kind_of(case, stdlib) | also
             | adapters_for([str(tmp_path / target) for _, target in copies], str(tmp_path)))
    # what argparse, json and re load themselves (stdlib[""]) exempts no NEVER module on a plain
    # `check FILE`, which cli.quick_check parses without argparse; an option that takes a value
    # (`--format json`) is parsed by argparse
    never = modules & (NEVER - (names if extra else names - stdlib[""]))
    if "estimate" not in KIND.get(case, ("estimate",)):
        never |= modules & set(MODEL)
    assert not never, f"{case}: `memlint {' '.join(argv)}` loads {sorted(never)}"
    rules = {m[len("memlint.rules."):] for m in modules if m.startswith("memlint.rules.")}
    wanted = {"base", "_index", *RULE_MODULES[case]}
    assert rules == wanted, f"{case}: `memlint {' '.join(argv)}` loads the rule modules " \
                            f"{sorted(rules)}, not {sorted(wanted)} (RULE_MODULES)"
    names = names | {f"memlint.rules.{m}" for m in wanted}
    unused = sorted(modules & set(UNUSED.get(case, ())))
    assert not unused, f"{case}: `memlint {' '.join(argv)}` loads {unused}, which it never uses"
    outside = sorted(m for m in modules if not allowed(m, names))
    assert not outside, f"{case}: `memlint {' '.join(argv)}` loads modules outside its " \
                        f"allow-list (tests/test_startup.py): {outside}"
    return modules


@pytest.mark.parametrize("case,copies,checked", speed.FILES, ids=[c[0] for c in speed.FILES])
def test_one_file_check_loads_only_what_it_uses(tmp_path, stdlib, case, copies, checked):
    if not all(os.path.isfile(os.path.join(ROOT, "fixtures", f)) for f, _ in copies):
        pytest.skip(f"fixtures/{copies[0][0]} is not in this checkout")
    check_case(tmp_path, case, copies, checked, stdlib)


def test_json_output_loads_its_reporter_only(tmp_path, stdlib):
    case, copies, checked = speed.FILES[0]
    modules = check_case(tmp_path, case, copies, checked, stdlib, extra=("--format", "json"),
                         also=frozenset({"memlint.report.json_format"}))
    assert "memlint.report.json_format" in modules
    assert not any(m.startswith(("memlint.memory.estimate", "yaml", "memlint.adapters.megatron",
                                 "memlint.adapters.torchtitan")) for m in modules)


def test_version_and_a_usage_error_load_no_pipeline(tmp_path):
    for code in ("from memlint.cli import main\nmain(['--version'])",
                 "from memlint.cli import main\nmain(['check', '--bogus'])"):
        modules = loaded(code, str(tmp_path))
        assert not any(m.startswith(("memlint.api", "memlint.engine", "memlint.adapters",
                                     "memlint.rules", "json", "memlint.memory"))
                       for m in modules), (code, sorted(modules))
    assert "argparse" not in loaded("from memlint.cli import main\nmain(['--version'])",
                                    str(tmp_path))


def test_json_patterns_compile_on_first_use_only(tmp_path):
    # memlint/api.py imports json first with its import-time patterns lazy (lazy_re.import_module):
    # a check never uses the pure-Python fallbacks' patterns, so they are never compiled
    case, copies, checked = speed.FILES[0]
    for fixture, target in copies:
        shutil.copy(os.path.join(ROOT, "fixtures", fixture), tmp_path / target)
    (tmp_path / ".git").mkdir()
    probe = (f"from memlint.cli import main\nmain(['check', {checked!r}])\n"
             "import json.encoder, json.scanner\n"
             "print(repr(sorted(name for module in (json.encoder, json.scanner)\n"
             "    for name, value in vars(module).items()\n"
             "    if type(value).__name__ == 'LazyPattern' and '_compiled' not in vars(value))))")
    env = dict(os.environ, NO_COLOR="1", HF_HOME=str(tmp_path / ".hf-home"), HF_HUB_OFFLINE="1")
    result = subprocess.run([sys.executable, "-c", PROBE.format(code=probe)], cwd=str(tmp_path),
                            env=env, capture_output=True, text=True, timeout=120)
    lazy = ast.literal_eval(result.stdout.strip().splitlines()[-2])
    assert lazy == ["ESCAPE", "ESCAPE_ASCII", "HAS_UTF8", "NUMBER_RE"], result.stdout
