"""The command line: `memlint check|estimate|rules|explain` (also `python -m memlint`).

Exit codes (DESIGN.md): 0 no finding at or above --fail-on; 1 findings at or above it (parse
errors of a config included); 2 memlint could not do its job (bad command line, missing file,
internal error): one line on stderr, a traceback only with --debug.

Heavy modules (rich, yaml, jsonschema, the memory model) are imported only when a run needs them.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
from typing import Optional

from memlint import __version__


class UsageError(Exception):
    """The command line or memlint's own configuration is unusable: exit 2."""


# ---------------------------------------------------------------------------------------------
# Argument parsing


def _csv(values) -> tuple:
    out = []
    for value in values or ():
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return tuple(out)


# The node around the GPUs: each flag is a shorthand for --set KEY=VALUE (memory/host.py).
_HOST_FLAGS = (
    ("--node", "node", "node type for host RAM and NVMe: dgx-h100, p5.48xlarge, ... (--set node)"),
    ("--host-memory", "host_memory", "host RAM per node, e.g. 2TiB (--set host_memory)"),
    ("--nvme-capacity", "nvme_capacity", "local NVMe per node, e.g. 30TB (--set nvme_capacity)"),
    ("--disk", "disk", "free space where checkpoints are saved, e.g. 10TB (--set disk)"),
)


def _common(parser: argparse.ArgumentParser, formats: tuple) -> None:
    parser.add_argument("--model", help="HF config.json (or its directory) or a preset name")
    parser.add_argument("--set", dest="assignments", action="append", default=[],
                        metavar="KEY=VALUE", help="set a scenario key (repeatable)")
    parser.add_argument("--world-size", type=int, help="total number of GPUs (--set world_size)")
    parser.add_argument("--gpu", help="GPU name, e.g. H100-80GB, H200, A100-40GB (--set gpu)")
    for flag, key, text in _HOST_FLAGS:
        parser.add_argument(flag, dest=key, help=text)
    parser.add_argument("--select", action="append", default=[], metavar="RULES",
                        help="only these rules: codes, names or prefixes (ML1), comma-separated")
    parser.add_argument("--extend-select", action="append", default=[], metavar="RULES",
                        help="add rules to the selection (e.g. preview rules)")
    parser.add_argument("--ignore", action="append", default=[], metavar="RULES",
                        help="skip these rules: codes, names or prefixes, comma-separated")
    parser.add_argument("--fail-on", choices=("error", "warning", "info"),
                        help="lowest severity that makes the exit code 1 (default: error)")
    parser.add_argument("--format", choices=formats, default="text", help="output format")
    parser.add_argument("--quiet", "-q", action="store_true", help="only the diagnostics")
    parser.add_argument("--units", choices=("GiB", "GB"), help="units of the text report")
    parser.add_argument("--max-file-size", default="4MiB",
                        help="largest config file read (default 4MiB)")
    parser.add_argument("--allow-outside-root", action="store_true",
                        help="follow references to files outside the repository root")
    parser.add_argument("--hub", action="store_true",
                        help="let a Hub model id that neither the HF cache nor the bundled catalog "
                        "knows be fetched from the Hugging Face Hub (config.json only; needs "
                        "memlint[hub]; off by default, also MEMLINT_HUB=1)")
    parser.add_argument("--no-color", action="store_true", help="never colour the output")
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memlint",
        description="Lint LLM training configs for out-of-memory and launch-time errors.")
    parser.add_argument("--version", action="version", version=f"memlint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = sub.add_parser("check", help="lint config files",
                           description="Lint config files; files that describe one run (a "
                           "memlint.toml's files, [tool.memlint] runs) are checked together.")
    check.add_argument("paths", nargs="*", metavar="PATH")
    _common(check, ("text", "json", "sarif", "github", "junit"))

    estimate = sub.add_parser("estimate", help="estimate per-GPU memory of one run",
                              description="Estimate per-GPU memory; all PATHS describe one run.")
    estimate.add_argument("paths", nargs="*", metavar="PATH")
    _common(estimate, ("text", "json"))
    estimate.add_argument("--explain", action="store_true",
                          help="show the derivation term by term")
    estimate.add_argument("--stage", type=int, help="with --explain: only this pipeline stage")

    rules = sub.add_parser("rules", help="list the rules")
    rules.add_argument("--format", choices=("text", "json"), default="text")
    rules.add_argument("--debug", action="store_true")

    explain = sub.add_parser("explain", help="print a rule's documentation")
    explain.add_argument("rule", metavar="CODE|NAME")
    explain.add_argument("--debug", action="store_true")

    from memlint.commands import plan

    plan.add_parser(sub)
    _add_fit_compare_parsers(sub)
    return parser


# ---------------------------------------------------------------------------------------------
# Configuration


def lint_config(args, start: str):
    from memlint.config import config_for
    from memlint.diagnostics import Severity

    config = config_for(start)
    if args.select:
        config.select = _csv(args.select)
    config.extend_select = tuple(config.extend_select) + _csv(args.extend_select)
    config.ignore = tuple(config.ignore) + _csv(args.ignore)
    if args.fail_on:
        config.fail_on = Severity.parse(args.fail_on)
    config.allow_outside_root = config.allow_outside_root or args.allow_outside_root
    return config


def _max_bytes(args) -> int:
    from memlint.keys import to_bytes

    try:
        return to_bytes(args.max_file_size)
    except ValueError as exc:
        raise UsageError(f"--max-file-size: {exc}") from None


def _assignments(args) -> list:
    out = list(args.assignments)
    if args.world_size is not None:
        out.append(f"world_size={args.world_size}")
    if args.gpu:
        out.append(f"gpu={args.gpu}")
    for _, key, _ in _HOST_FLAGS:
        if getattr(args, key, None):
            out.append(f"{key}={getattr(args, key)}")
    return out


def command_line_partial(args):
    from memlint.scenario import overrides_partial

    try:
        return overrides_partial(_assignments(args), args.model)
    except ValueError as exc:
        raise UsageError(f"--set: {exc}") from None


# ---------------------------------------------------------------------------------------------
# Grouping files into runs


_REAL: dict = {}


def _real(path: str) -> str:
    """os.path.realpath, once per path and run (grouping asks for each file several times)."""
    found = _REAL.get(path)
    if found is None:
        found = _REAL[path] = os.path.realpath(path)
    return found


def _check_path(path: str) -> None:
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory (give the config files)")


def _load_run(files, args, config, max_bytes) -> list:
    from memlint.adapters.registry import load_with_references

    partials, seen = [], set()
    for path in files:
        for partial in load_with_references(path, max_bytes, config.allow_outside_root):
            key = _real(partial.source) if os.path.exists(partial.source) else partial.source
            if key in seen:
                continue
            seen.add(key)
            partials.append(partial)
    return partials


def _run_partial(run: dict, config):
    from memlint.ir import Partial, Provenance
    from memlint.scenario import parse_assignment

    partial = Partial(source=config.source or "<config>", fmt="config")
    for text in run.get("set", ()):
        try:
            key, value = parse_assignment(text)
        except ValueError as exc:
            raise UsageError(f"{config.source}: runs {run['name']!r}: {exc}") from None
        partial.set(key, value, Provenance(config.source, None, None, f"runs.set {key}"))
    if run.get("model"):
        partial.set("model", run["model"], Provenance(config.source, None, None, "runs.model"))
    return partial


def plan_runs(paths: list, args, max_bytes: int) -> list:
    """[(name, partials, config)]: one entry per run to lint."""
    runs = []
    claimed = set()
    for path in paths:
        config = lint_config(args, path)
        for run in config.runs:
            members = {_real(f) for f in run["files"]}
            if _real(path) in members and run["name"] not in {r[0] for r in runs}:
                for member in run["files"]:
                    _check_path(member)
                partials = _load_run(run["files"], args, config, max_bytes)
                if run.get("set") or run.get("model"):
                    partials.append(_run_partial(run, config))
                runs.append((run["name"], partials, config))
                claimed |= members | {_real(p.source) for p in partials
                                      if os.path.exists(p.source)}
    singles = []
    for path in paths:
        if _real(path) in claimed:
            continue
        config = lint_config(args, path)
        singles.append((path, _load_run([path], args, config, max_bytes), config))
    # A file that another given file refers to is part of that run, not a run of its own.
    kept, covered = [], set()
    for item in sorted(singles, key=lambda item: -len(item[1])):
        if _real(item[0]) in covered:
            continue
        kept.append(item)
        covered |= {_real(p.source) for p in item[1] if os.path.exists(p.source)}
    order = {id(item): index for index, item in enumerate(singles)}
    kept.sort(key=lambda item: order[id(item)])
    return runs + kept


def default_paths(args) -> list:
    """`memlint check` without paths: what [tool.memlint] lists (files, runs, scenario)."""
    from memlint.config import find_pyproject

    config = lint_config(args, os.getcwd())
    if config.source is None:
        raise UsageError("no paths given, and no pyproject.toml with [tool.memlint] files "
                         "above the working directory")
    paths = []
    for pattern in config.files:
        full = os.path.join(config.root, pattern)
        matches = sorted(glob.glob(full, recursive=True))
        if not matches and not glob.has_magic(pattern):
            raise UsageError(f"{config.source}: [tool.memlint] files: {pattern}: no such file")
        paths.extend(m for m in matches if os.path.isfile(m))
    for run in config.runs:
        paths.extend(run["files"][:1])
    if not paths:
        pyproject = find_pyproject(os.getcwd())
        if pyproject is not None:
            with open(pyproject, encoding="utf-8", errors="replace") as handle:
                if "tool.memlint.scenario" in handle.read():
                    paths.append(pyproject)
    if not paths:
        raise UsageError(f"no paths given, and {config.source} lists no [tool.memlint] files")
    return [os.path.relpath(p) if os.path.isabs(p) else p for p in paths]


# ---------------------------------------------------------------------------------------------
# The pipeline for one run


def run_pipeline(partials: list, args, config, reg):
    """partials -> Scenario -> Estimate (with a model) -> engine. Returns (diagnostics, est)."""
    from memlint import engine
    from memlint.diagnostics import MISSING_MODEL, Severity, make
    from memlint.ir import Provenance
    from memlint.scenario import build

    from memlint.config import assumptions_partial

    project = assumptions_partial(config)  # [tool.memlint.assumptions], fitted by `compare`
    all_partials = list(partials) + ([project] if project else []) + [command_line_partial(args)]
    scenario, pre = build(all_partials, base_dir=os.getcwd(),
                          allow_outside_root=config.allow_outside_root,
                          max_bytes=_max_bytes(args),
                          hub=True if getattr(args, "hub", False) else None)
    anchor = engine.anchor_of(scenario)
    estimate = None
    model = scenario.model
    parse_failed = any(d.code == "ML001" for d in pre)
    if model is None and not parse_failed:
        pre.append(make(MISSING_MODEL, Severity.INFO,
                        "no memory estimate: no model (give --model PATH|PRESET, or model = "
                        "... in a memlint.toml)", Provenance(anchor, None, None, None)))
    elif model is not None and (model.config or model.total_params):
        model_problems = _model_type_warnings(scenario)
        pre.extend(model_problems)
        if getattr(args, "command", None) == "check" and _world_unknown(scenario):
            # ZeRO / FSDP shard over the data-parallel size: without the world size the per-GPU
            # states are unknowable, and assuming one GPU would be a false alarm.
            pre.append(make(MISSING_MODEL, Severity.INFO,
                            "no memory check: ZeRO/FSDP shard the model over the data-parallel "
                            "size, and the world size is not given (give --world-size N, or "
                            "world_size in a memlint.toml / [tool.memlint])",
                            scenario.where("zero") or scenario.where("fsdp")
                            or Provenance(anchor, None, None, None)))
        elif getattr(args, "command", None) == "check" and not _describes_run(partials, args):
            pre.extend(_model_config_errors(scenario, anchor))
            # A config.json alone describes a model, not a training run: the defaults (one GPU,
            # no parallelism) would make every large model "not fit", a false alarm.
            pre.append(make(MISSING_MODEL, Severity.INFO,
                            "no memory check: this file describes a model, not a training run "
                            "(lint it together with the run's config, e.g. in a memlint.toml "
                            "`files = [...]`, or give the run with --set tp=... world_size=...)",
                            Provenance(anchor, None, None, None)))
        else:
            estimate, problem = _estimate(scenario, anchor, args)
            if problem is not None:
                pre.append(problem)
    formats = tuple(p.fmt for p in partials)
    suppressions = {p.source: p.suppressions for p in partials if p.suppressions}
    diagnostics = engine.lint(scenario, estimate, config, reg, pre, suppressions, formats,
                              anchor=anchor)
    return diagnostics, estimate


MODEL_ONLY_FORMATS = ("hf_config", "preset")


def _world_unknown(scenario) -> bool:
    """True when the per-GPU states depend on a data-parallel size nobody gave."""
    par = scenario.parallelism
    if par.world_size is not None or par.dp is not None:
        return False
    if par.fsdp != "none" and par.dp_shard not in (None, -1):
        return False
    return par.zero > 0 or par.fsdp != "none"


def _describes_run(partials: list, args) -> bool:
    """True when some source says how the model is trained (not only what it is)."""
    if any(p.fmt not in MODEL_ONLY_FORMATS for p in partials):
        return True
    return any(not a.split("=", 1)[0].strip().startswith("model") for a in _assignments(args))


def _model_config_errors(scenario, anchor) -> list:
    """A model config that cannot be read (missing or bad key) is an error at that key."""
    from memlint.diagnostics import INVALID_VALUE, Severity, make
    from memlint.ir import Provenance
    from memlint.memory.params import ConfigError, architecture

    try:
        architecture(scenario.model.config)
    except ConfigError as exc:
        key = f"model.{exc.key}"
        prov = scenario.where(key) or scenario.where("model") or Provenance(anchor, None, None,
                                                                            None)
        return [make(INVALID_VALUE, Severity.ERROR, f"model config: {exc}", prov, key=key)]
    return []


def _model_type_warnings(scenario) -> list:
    """ML008: a model_type memlint does not count exactly is read through the generic keys."""
    from memlint.diagnostics import UNKNOWN_MODEL_TYPE, Severity, make
    from memlint.memory.params import ConfigError, architecture

    try:
        arch = architecture(scenario.model.config)
    except ConfigError:
        return []  # the estimate reports it, at the key
    if getattr(arch, "known", True):
        return []
    key = "model.model_type" if scenario.where("model.model_type") else "model"
    return [make(UNKNOWN_MODEL_TYPE, Severity.WARNING,
                 f"model_type {arch.model_type!r} is not one memlint counts exactly: parameters "
                 "are read through the generic llama-style keys (hidden_size, "
                 "num_hidden_layers, intermediate_size, ...), so counts may be approximate",
                 scenario.where(key), key=key)]


def _estimate(scenario, anchor, args):
    import traceback

    from memlint.diagnostics import (INVALID_VALUE, MISSING_MODEL, UNKNOWN_MODEL_TYPE, Severity,
                                     make)
    from memlint.ir import Provenance
    from memlint.rules import make_internal

    here = Provenance(anchor, None, None, None)
    try:
        from memlint.memory.estimate import estimate
    except ImportError as exc:
        if args.debug:
            traceback.print_exc()
        return None, make(MISSING_MODEL, Severity.INFO,
                          f"no memory estimate: the memory model is not available ({exc})", here)
    from memlint.memory.estimate import EstimateError
    from memlint.memory.params import ConfigError

    try:
        return estimate(scenario), None
    except (EstimateError, ConfigError) as exc:
        key = getattr(exc, "key", None) or "model"
        if isinstance(exc, ConfigError) and not key.startswith("model"):
            key = f"model.{key}"
        prov = scenario.where(key) or scenario.where("model") or here
        if getattr(exc, "severity", "error") == "warning":
            # a valid model memlint does not count (the adapter already warned where it is)
            return None, make(UNKNOWN_MODEL_TYPE, Severity.INFO, f"no memory estimate: {exc}",
                              prov, key=key)
        return None, make(INVALID_VALUE, Severity.ERROR, f"no memory estimate: {exc}", prov,
                          key=key)
    except Exception as exc:  # noqa: BLE001 - the model failing is an internal error (exit 2)
        failure = make_internal(f"the memory model failed: {type(exc).__name__}: {exc}", here)
        failure.data["traceback"] = traceback.format_exc()
        return None, failure


# ---------------------------------------------------------------------------------------------
# Commands


def _color(args) -> bool:
    if args.no_color or os.environ.get("NO_COLOR"):
        return False
    return hasattr(sys.stdout, "isatty") and sys.stdout.isatty()


def _units(args, estimates) -> str:
    if args.units:
        return args.units
    for estimate in estimates:
        if estimate.profile == "seed":
            return "GB"
    return "GiB"


def _emit(report, fmt: str) -> None:
    from memlint import report as reporters

    if fmt == "text":
        from memlint.report.text_format import write

        write(report, sys.stdout)
    else:
        sys.stdout.write(reporters.render(fmt, report))


def _print_tracebacks(diagnostics, args) -> None:
    if not args.debug:
        return
    for d in diagnostics:
        if d.data.get("traceback"):
            sys.stderr.write(d.data["traceback"])


def _validate(config, reg) -> None:
    from memlint import engine

    try:
        engine.validate_config(config, reg)
    except engine.ConfigError as exc:
        raise UsageError(str(exc)) from None


def cmd_check(args) -> int:
    from memlint import engine
    from memlint.report import Report
    from memlint.rules import registry

    reg = registry()
    max_bytes = _max_bytes(args)
    paths = list(args.paths) or default_paths(args)
    for path in paths:
        _check_path(path)
    runs = plan_runs(paths, args, max_bytes)
    diagnostics, estimates = list(reg.diagnostics), []
    fail_on = None
    for _name, partials, config in runs:
        _validate(config, reg)
        fail_on = config.fail_on if fail_on is None else min(fail_on, config.fail_on)
        found, estimate = run_pipeline(partials, args, config, reg)
        diagnostics.extend(found)
        if estimate is not None:
            estimates.append(estimate)
    _print_tracebacks(diagnostics, args)
    report = Report(diagnostics=diagnostics, estimates=estimates, units=_units(args, estimates),
                    quiet=args.quiet, registry=reg, color=_color(args) and args.format == "text")
    _emit(report, args.format)
    code = engine.exit_code(diagnostics, fail_on or lint_config(args, os.getcwd()).fail_on)
    if code == 2:  # DESIGN.md: exit 2 comes with a one-line message
        internal = next(d for d in diagnostics if d.data.get("internal"))
        where = f"{internal.path}: " if internal.path else ""
        sys.stderr.write(f"memlint: internal error: {where}{internal.message} (run with "
                         "--debug for the traceback)\n")
    return code


def cmd_estimate(args) -> int:
    from memlint import engine
    from memlint.report import Report
    from memlint.rules import registry

    reg = registry()
    max_bytes = _max_bytes(args)
    for path in args.paths:
        _check_path(path)
    if not args.paths and not args.model and not any(
            a.strip().startswith("model") for a in args.assignments):
        raise UsageError("estimate needs a model: give --model PATH|PRESET or config files")
    config = lint_config(args, args.paths[0] if args.paths else os.getcwd())
    _validate(config, reg)
    partials = _load_run(args.paths, args, config, max_bytes)
    diagnostics, estimate = run_pipeline(partials, args, config, reg)
    _print_tracebacks(diagnostics, args)
    if engine.has_internal_error(diagnostics):
        raise UsageError(next(d.message for d in diagnostics if d.data.get("internal")))
    estimates = [estimate] if estimate is not None else []
    if args.stage is not None:
        if not args.explain:
            raise UsageError("--stage needs --explain")
        if estimate is not None and args.stage not in {s.stage for s in estimate.stages}:
            raise UsageError(f"--stage {args.stage}: the estimate has stages 0-"
                             f"{len(estimate.stages) - 1}")
    report = Report(diagnostics=diagnostics, estimates=estimates, units=_units(args, estimates),
                    quiet=args.quiet, explain=args.explain, stage=args.stage, registry=reg,
                    color=_color(args) and args.format == "text")
    _emit(report, args.format)
    if estimate is None:
        sys.stderr.write("memlint: error: no memory estimate could be made (see the "
                         "diagnostics above)\n")
        return 2
    return engine.exit_code(diagnostics, config.fail_on)


def cmd_rules(args) -> int:
    import json

    from memlint.rules import registry

    reg = registry()
    rows = []
    for rule in reg:
        sections = rule.sections()
        rows.append({"code": rule.code, "name": rule.name, "severity": rule.severity.label,
                     "family": rule.family, "preview": bool(rule.preview),
                     "summary": (sections.get("summary") or "").splitlines()[0]
                     if sections.get("summary") else "",
                     "options": {k: v[1] for k, v in dict(rule.options).items()}})
    if args.format == "json":
        sys.stdout.write(json.dumps(rows, sort_keys=True, indent=2) + "\n")
        return 0
    for row in rows:
        flag = " (preview)" if row["preview"] else ""
        sys.stdout.write(f"{row['code']}  {row['severity']:<7}  {row['name']:<30}  "
                         f"{row['summary']}{flag}\n")
    for problem in reg.diagnostics:
        sys.stderr.write(f"memlint: warning: {problem.message}\n")
    return 0


def cmd_explain(args) -> int:
    from memlint.keys import suggest
    from memlint.rules import help_uri, registry

    reg = registry()
    rule = reg.get(args.rule)
    if rule is None:
        hint = suggest(args.rule.lower(), list(reg.by_name)) or suggest(args.rule.upper(),
                                                                        list(reg.rules))
        raise UsageError(f"no rule is called {args.rule!r}"
                         + (f"; did you mean {hint!r}?" if hint else "")
                         + " (`memlint rules` lists them)")
    lines = [f"{rule.code} {rule.name} (default severity: {rule.severity.label}"
             + (", preview" if rule.preview else "") + ")", "", rule.doc, ""]
    if rule.options:
        lines.append("Options:")
        for name, (kind, default) in dict(rule.options).items():
            lines.append(f"    {name} ({kind.__name__}, default {default!r})")
        lines.append("")
    lines.append(f"More: {help_uri(rule)}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def cmd_plan(args) -> int:
    from memlint.commands import plan

    return plan.run(args)


# ---------------------------------------------------------------------------------------------
# fit and compare (issue 17): argument parsing and printing only; the answers come from
# memlint/commands/fit.py and memlint/commands/compare.py.


def _add_fit_compare_parsers(sub) -> None:
    fit = sub.add_parser("fit", help="the largest micro batch / seq_len and the fewest GPUs that "
                         "fit", description="Search the memory model for the largest "
                         "micro_batch, the largest seq_len (with the cp it needs) and the "
                         "smallest world size that fit the GPU with the headroom; all PATHS "
                         "describe one run.")
    fit.add_argument("paths", nargs="*", metavar="PATH")
    _common(fit, ("text", "json"))
    fit.add_argument("--headroom", type=float, help="share of GPU memory to leave free "
                     "(default: low-memory-headroom's margin, 0.10)")
    fit.add_argument("--only", action="append", default=[], metavar="QUESTIONS",
                     help="micro_batch, seq_len, world_size (comma-separated)")
    fit.add_argument("--planner", action="store_true",
                     help="also the fewest GPUs on which the planner finds any layout")
    compare = sub.add_parser("compare", help="compare a training log's memory with the estimate",
                             description="Read the memory lines of a training log (Megatron, "
                             "torchtitan, DeepSpeed, HF Trainer, CUDA out-of-memory) and compare "
                             "them rank by rank with the estimate of the run PATHS describe.")
    compare.add_argument("log", metavar="LOG")
    compare.add_argument("paths", nargs="*", metavar="PATH")
    _common(compare, ("text", "json"))
    compare.add_argument("--write-assumptions", nargs="?", const="", metavar="PYPROJECT",
                         help="record the fitted runtime assumptions in [tool.memlint."
                         "assumptions] (default: the governing pyproject.toml)")


def run_scenario(args):
    """(Scenario, LintConfig) of the one run that PATHS, --model and --set describe."""
    from memlint.diagnostics import Severity
    from memlint.scenario import build

    max_bytes = _max_bytes(args)
    for path in args.paths:
        _check_path(path)
    config = lint_config(args, args.paths[0] if args.paths else os.getcwd())
    from memlint.config import assumptions_partial

    project = assumptions_partial(config)
    partials = (_load_run(args.paths, args, config, max_bytes) + ([project] if project else [])
                + [command_line_partial(args)])
    scenario, diagnostics = build(partials, base_dir=os.getcwd(),
                                  allow_outside_root=config.allow_outside_root,
                                  max_bytes=max_bytes)
    errors = [d for d in diagnostics if d.severity >= Severity.ERROR]
    if errors:
        first = errors[0]
        where = f"{first.path}:{first.line}: " if first.path and first.line else (
            f"{first.path}: " if first.path else "")
        raise UsageError(f"{where}{first.message}")
    if scenario.model is None:
        raise UsageError("no model: give --model PATH|PRESET or config files that name one")
    return scenario, config


def cmd_fit(args) -> int:
    from memlint.commands import fit

    scenario, config = run_scenario(args)
    headroom = args.headroom if args.headroom is not None else fit.configured_headroom(config)
    questions = _csv(args.only) or fit.QUESTIONS
    try:
        result = fit.fit(scenario, headroom, questions=questions, planner=args.planner)
    except (fit.FitError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if args.format == "json":
        sys.stdout.write(fit.render_json(result))
    else:
        fit.render_text(result, _units(args, []))
    return fit.exit_code(result)


def cmd_compare(args) -> int:
    from memlint.commands import compare

    if not os.path.isfile(args.log):
        raise UsageError(f"{args.log}: no such file")
    try:
        report = compare.read_log(args.log)
        scenario, config = run_scenario(args)
        result = compare.compare(scenario, compare.estimate_run(scenario), report)
    except compare.CompareError as exc:
        raise UsageError(f"cannot compare: {exc}") from None
    if args.format == "json":
        sys.stdout.write(compare.render_json(result))
    else:
        compare.render_text(result, _units(args, []))
    if args.write_assumptions is not None:
        if not result.fitted:
            raise UsageError("--write-assumptions: the log measures no runtime assumption "
                             "(it needs max allocated with max reserved, or an out-of-memory "
                             "message)")
        target = args.write_assumptions or config.source or "pyproject.toml"
        written = compare.write_assumptions(target, result.fitted, args.log)
        sys.stderr.write(f"memlint: wrote {len(written)} assumption(s) to {target} "
                         "[tool.memlint.assumptions]\n")
    return 0


COMMANDS = {"check": cmd_check, "estimate": cmd_estimate, "rules": cmd_rules,
            "explain": cmd_explain, "plan": cmd_plan, "fit": cmd_fit, "compare": cmd_compare}


def main(argv: Optional[list] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    debug = getattr(args, "debug", False)
    _REAL.clear()  # paths are resolved afresh by each run
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        sys.stderr.write(f"memlint: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("memlint: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - never a traceback unless --debug
        from memlint.engine import ConfigError

        if isinstance(exc, ConfigError):
            sys.stderr.write(f"memlint: error: {exc}\n")
            return 2
        if debug:
            import traceback

            traceback.print_exc()
        sys.stderr.write(f"memlint: internal error: {type(exc).__name__}: {exc} "
                         "(run with --debug for the traceback)\n")
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
