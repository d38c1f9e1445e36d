"""memlint's library pipeline and public Python API.

One pipeline serves every caller: files -> runs (`memlint.runs`) -> Scenario -> Estimate -> rules
-> Diagnostics. `memlint check`, `estimate`, `plan`, `fit` and `compare` call `check_paths`,
`estimate_paths`, `plan_scenario`, `fit_paths` and `compare_paths`; from Python the same is
`memlint.check`, `memlint.estimate`, `memlint.plan`, `memlint.fit` and `memlint.compare`:

    import memlint

    result = memlint.check(["configs/ds_config.json"], model="llama3-8b", world_size=64)
    result.exit_code            # 0, 1 (findings at or above fail_on) or 2 (memlint failed)
    for d in result.diagnostics:
        print(d.path, d.line, d.code, d.message)

    est = memlint.estimate(model="llama3-8b", world_size=8, tp=2, seq_len=8192)
    est.peak_bytes, est.fits, [s.total_bytes for s in est.stages]

    plans = memlint.plan(model="llama3-8b", gpus=64, gpu="H100-80GB", top=3)
    plans.plans[0].settings, plans.plans[0].estimate.peak_bytes

    answer = memlint.fit(model="llama3-8b", world_size=8, gpu="H100-80GB")
    answer.answers[0].question, answer.answers[0].value     # e.g. "micro_batch", 3

    seen = memlint.compare("train.log", ["run.memlint.toml"])
    [(r.rank, r.rows[0].metric, r.rows[0].relative) for r in seen.ranks]

Scenario keys (DESIGN.md) are keyword arguments; a dotted key (`model.hidden_size`,
`runtime.allocator_fraction`) goes in `settings={...}`. The product decisions live here, not in
the CLI: no memory verdict when ZeRO/FSDP shard over a world size nobody gave, and none for a
config.json alone (a model, not a run); a model named on the command line that cannot be found is
a usage error (exit 2) in every command, like a missing file.
"""
from __future__ import annotations

from memlint import lazy_re

# start-up: the pipeline's first import of json, before any module below imports it: json compiles
# five patterns when imported (about 4M instructions a check) that only its pure-Python fallbacks
# use (tests/test_startup.py)
json = lazy_re.import_module("json")

import os  # noqa: E402 - after json, on purpose

from memlint import engine, verdicts  # noqa: E402
from memlint.config import assumptions_partial, config_for, find_pyproject
from memlint.diagnostics import (INVALID_VALUE, MISSING_MODEL, UNKNOWN_MODEL_TYPE, Severity, make,
                                 make_internal)
from memlint.engine import LintConfig, SettingsError
from memlint.errors import MemlintError, UsageError
from memlint.ir import NO_ESTIMATE, NO_ESTIMATE_REASON, Provenance
from memlint.loaders import MAX_FILE_BYTES, is_buffered, repo_root
from memlint.memory.context import resolve_context
from memlint.records import field, record, replace
from memlint.rules import registry
from memlint.runs import Planner, Run, default_paths, expand, file_anchor
from memlint.scenario import build, overrides_partial
from memlint.suppressions import drop_used

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Iterable, Mapping, Optional

    from memlint.comparison import Comparison
    from memlint.diagnostics import Diagnostic
    from memlint.fitting import FitResult
    from memlint.memory.result import Estimate
    from memlint.planner import PlanResult

MODEL_ONLY_FORMATS = ("hf_config", "preset", "gpt-neox-model")  # adapters/gpt_neox.py


@record
class Options:
    """How to check, besides the files: what the command line (or an API caller) gives."""

    model: Optional[str] = None
    assignments: tuple = ()             # "key=value" scenario keys (--set, --world-size, --gpu)
    select: tuple = ()                  # () : [tool.memlint] select (or every stable rule)
    extend_select: tuple = ()
    ignore: tuple = ()
    fail_on: Optional[Severity] = None  # None: [tool.memlint] fail-on (default error)
    max_bytes: int = MAX_FILE_BYTES
    allow_outside_root: bool = False
    skip_unknown: bool = False          # files no adapter reads are skipped, not warned about
    require_estimate: bool = False      # a file without a memory verdict is an error
    hub: Optional[bool] = None          # True: a Hub model id may be fetched (config.json only)
    lenient: bool = True                # check: no memory verdict on a partial run description


@record
class CheckResult:
    """What a check found: diagnostics (sorted per run), estimates, and the exit code."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    estimates: list[Estimate] = field(default_factory=list)
    fail_on: Severity = Severity.ERROR
    registry: object = None
    summary: Optional[verdicts.Summary] = None   # which files got a memory verdict, and why not

    @property
    def exit_code(self) -> int:
        return engine.exit_code(self.diagnostics, self.fail_on)

    @property
    def internal_error(self) -> Optional[Diagnostic]:
        return next((d for d in self.diagnostics if d.data.get("internal")), None)


# ---------------------------------------------------------------------------------------------
# Settings


def lint_config(options: Options, start: str) -> LintConfig:
    """[tool.memlint] governing `start`, with the command line's selection on top."""
    config = config_for(start)
    config = replace(config,
                     extend_select=tuple(config.extend_select) + tuple(options.extend_select),
                     ignore=tuple(config.ignore) + tuple(options.ignore),
                     allow_outside_root=config.allow_outside_root or options.allow_outside_root)
    if options.select:
        config.select = tuple(options.select)
    if options.fail_on is not None:
        config.fail_on = options.fail_on
    return config


def _configs_by_folder(options: Options):
    """lint_config(options, path), made once per pyproject.toml for the run (config_for reads
    the one governing the path's folder: a walk asked twice per file, parsing the TOML each
    time); without one, once per repository root (config_for's LintConfig(root=...))."""
    made: dict = {}
    governed: dict = {}   # folder -> (its pyproject.toml, else its repository root): a walk up

    def config_of(path: str) -> LintConfig:
        start = os.path.abspath(path)
        folder = start if os.path.isdir(start) else os.path.dirname(start)
        key = governed.get(folder)
        if key is None:
            governing = find_pyproject(folder)
            key = governed[folder] = (governing,
                                      None if governing is not None else repo_root(folder))
        found = made.get(key)
        if found is None:
            found = made[key] = lint_config(options, folder)
        return found

    return config_of


def validate(config: LintConfig, reg) -> None:
    try:
        engine.validate_config(config, reg)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None


def command_line_partial(options: Options):
    try:
        return overrides_partial(list(options.assignments), options.model)
    except ValueError as exc:
        raise UsageError(f"--set: {exc}") from None


def _project_assumptions(config: LintConfig) -> list:
    """[tool.memlint.assumptions] (runtime assumptions fitted by `compare`), as a Partial."""
    project = assumptions_partial(config)
    return [project] if project else []


def _usage_problems(diagnostics: list) -> None:
    """A model named on the command line (--model, --set model=) that is no config.json and no
    preset: memlint cannot do its job, as with a missing file (exit 2 in every command). A bad
    value stays a finding (exit 1), wherever it was set."""
    for d in diagnostics:
        if (d.severity >= Severity.WARNING and d.code in (INVALID_VALUE[0], MISSING_MODEL[0])
                and d.path is None and d.key in ("--model", "--set model")):
            raise UsageError(d.message)


# ---------------------------------------------------------------------------------------------
# One run


def run_pipeline(run: Run, options: Options, reg, used: Optional[set] = None):
    """partials -> Scenario -> Estimate (with a model) -> engine: (diagnostics, estimate).

    The run's resolved context (topology, architecture, dtypes, schedule; memory/context.py) is
    made once here: the checks below, the memory model and every rule read the same one."""
    partials = run.partials
    all_partials = list(partials) + _project_assumptions(run.config) + [
        command_line_partial(options)]
    scenario, pre = build(all_partials, base_dir=os.getcwd(),
                          allow_outside_root=run.config.allow_outside_root,
                          max_bytes=options.max_bytes, hub=options.hub,
                          models=run.config.models)
    _usage_problems(pre)
    resolved = resolve_context(scenario)
    anchor = run.anchor
    estimate = None
    model = scenario.model
    parse_failed = any(d.code == "ML001" and d.severity == Severity.ERROR for d in pre)
    if options.skip_unknown and all(p.fmt == "unknown" for p in partials):
        return [], None
    not_training = scenario.extra.get(NO_ESTIMATE)
    if not_training is not None:
        # a file that is no training run (a text-generation launch, an inference test case)
        kind = scenario.extra.get(NO_ESTIMATE_REASON)
        pre.append(make(MISSING_MODEL, Severity.INFO,
                        f"no memory estimate: {not_training.value}", not_training.prov,
                        no_estimate=kind.value if kind is not None else verdicts.NOT_TRAINING))
    elif model is None and not parse_failed and not all(p.fmt == "unknown" for p in partials):
        pre.append(make(MISSING_MODEL, Severity.INFO,
                        "no memory estimate: no model (give --model PATH|PRESET, or model = "
                        "... in a memlint.toml)", anchor, no_estimate=verdicts.NO_MODEL))
    elif model is not None and (model.config or model.total_params):
        pre.extend(_model_type_warnings(scenario, resolved))
        if options.lenient and _world_unknown(scenario):
            # ZeRO / FSDP shard over the data-parallel size: without the world size the per-GPU
            # states are unknowable, and assuming one GPU would be a false alarm.
            pre.append(make(MISSING_MODEL, Severity.INFO,
                            "no memory check: ZeRO/FSDP shard the model over the data-parallel "
                            "size, and the world size is not given (give --world-size N, or "
                            "world_size in a memlint.toml / [tool.memlint])",
                            scenario.where("zero") or scenario.where("fsdp") or anchor,
                            no_estimate=verdicts.WORLD_UNKNOWN))
        elif options.lenient and not _describes_run(partials, options):
            pre.extend(_model_config_errors(scenario, anchor, resolved))
            # A config.json alone describes a model, not a training run: the defaults (one GPU,
            # no parallelism) would make every large model "not fit", a false alarm.
            pre.append(make(MISSING_MODEL, Severity.INFO,
                            "no memory check: this file describes a model, not a training run "
                            "(lint it together with the run's config, e.g. in a memlint.toml "
                            "`files = [...]`, or give the run with --set tp=... world_size=...)",
                            anchor, no_estimate=verdicts.MODEL_ONLY))
        else:
            estimate, problem = _estimate(scenario, anchor, resolved)
            if problem is not None:
                pre.append(problem)
    if options.skip_unknown:
        pre = [d for d in pre if not (d.data.get("unknown_format")
                                      and d.severity < Severity.ERROR)]
    formats = tuple(p.fmt for p in partials)
    suppressions = {p.source: p.suppressions for p in partials if p.suppressions}
    diagnostics = engine.lint(scenario, estimate, run.config, reg, pre, suppressions, formats,
                              anchor=anchor, resolved=resolved, used=used)
    return diagnostics, estimate


def _world_unknown(scenario) -> bool:
    """True when the per-GPU states depend on a data-parallel size nobody gave."""
    par = scenario.parallelism
    if par.world_size is not None or par.dp is not None:
        return False
    if par.fsdp != "none" and par.dp_shard not in (None, -1):
        return False
    return par.zero > 0 or par.fsdp != "none"


def _describes_run(partials: list, options: Options) -> bool:
    """True when some source says how the model is trained (not only what it is)."""
    if any(p.fmt not in MODEL_ONLY_FORMATS for p in partials):
        return True
    return any(not a.split("=", 1)[0].strip().startswith("model") for a in options.assignments)


def _model_config_errors(scenario, anchor, resolved) -> list:
    """A model config that cannot be read (missing or bad key) is an error at that key."""
    # start-up: the memory model loads only when a run is estimated
    from memlint.memory.params import ConfigError as ModelConfigError

    exc = resolved.error("architecture")
    if isinstance(exc, ModelConfigError):
        key = f"model.{exc.key}"
        unknown = _unresolved(scenario, key)
        if unknown is not None:
            return [unknown]
        prov = scenario.where(key) or scenario.where("model") or anchor
        if getattr(exc, "severity", "error") == "warning":
            return []  # a model type memlint does not count: _model_type_warnings said so
        return [make(INVALID_VALUE, Severity.ERROR, f"model config: {exc}", prov, key=key,
                     no_estimate=verdicts.CONFIG_ERROR)]
    return []


def _unresolved(scenario, key: str):
    """A required value that a script computes when it runs (`--num-layers $1`): no estimate,
    said as info; it is not missing from a valid script."""
    found = scenario.extra.get(f"unresolved.{key}")
    if found is None:
        return None
    return make(MISSING_MODEL, Severity.INFO,
                f"no memory estimate: {key} is {found.value!r}, known only when the script runs "
                f"(give `--set {key}=N` to check it)", found.prov, key=key,
                no_estimate=verdicts.RUNTIME_VALUE)


def _model_type_warnings(scenario, resolved) -> list:
    """ML008: a model_type memlint does not count exactly is read through the generic keys."""
    arch = resolved.architecture
    if arch is None:
        exc = resolved.error("architecture")
        if getattr(exc, "severity", "error") == "warning":
            # a model_type memlint does not count: no estimate, said once as a warning here
            # (the estimate adds its info note)
            key = "model.model_type" if scenario.where("model.model_type") else "model"
            return [make(UNKNOWN_MODEL_TYPE, Severity.WARNING, f"no memory estimate: {exc}",
                         scenario.where(key) or scenario.where("model"), key=key,
                         no_estimate=verdicts.ARCHITECTURE)]
        return []  # the estimate reports it, at the key
    if getattr(arch, "known", True):
        return []
    # start-up: the model-type tables load with the architecture they describe
    from memlint.memory.model_types import APPROXIMATE_MODEL_TYPES

    key = "model.model_type" if scenario.where("model.model_type") else "model"
    left_out = APPROXIMATE_MODEL_TYPES.get(arch.model_type)
    how = (f"its count leaves out {left_out}" if left_out else
           "it is read as the transformers class its `architectures` names")
    return [make(UNKNOWN_MODEL_TYPE, Severity.WARNING,
                 f"model_type {arch.model_type!r} is not one memlint counts exactly: parameters "
                 "are read through the generic llama-style keys (hidden_size, "
                 f"num_hidden_layers, intermediate_size, ...); {how}, so counts may be "
                 "approximate", scenario.where(key), key=key)]


def _estimate(scenario, anchor, resolved):
    try:
        # start-up: the memory model loads only when a run is estimated
        from memlint.memory.estimate import EstimateError, estimate
    except ImportError as exc:
        return None, make(MISSING_MODEL, Severity.INFO,
                          f"no memory estimate: the memory model is not available ({exc})", anchor,
                          no_estimate=verdicts.OTHER)
    # start-up: the memory model loads only when a run is estimated
    from memlint.memory.params import ConfigError as ModelConfigError

    try:
        return estimate(scenario, resolved), None
    except (EstimateError, ModelConfigError) as exc:
        key = getattr(exc, "key", None) or "model"
        if isinstance(exc, ModelConfigError) and not key.startswith("model"):
            key = f"model.{key}"
        unknown = _unresolved(scenario, key)
        if unknown is not None:
            return None, unknown
        prov = scenario.where(key) or scenario.where("model") or anchor
        if getattr(exc, "severity", "error") == "warning":
            # a valid model memlint does not count (the adapter already warned where it is)
            return None, make(UNKNOWN_MODEL_TYPE, Severity.INFO, f"no memory estimate: {exc}",
                              prov, key=key, no_estimate=verdicts.ARCHITECTURE)
        return None, make(INVALID_VALUE, Severity.ERROR, f"no memory estimate: {exc}", prov,
                          key=key, no_estimate=verdicts.CONFIG_ERROR)
    except Exception as exc:  # noqa: BLE001 - the model failing is an internal error (exit 2)
        failure = make_internal(f"the memory model failed: {type(exc).__name__}: {exc}", anchor)
        import traceback  # for start-up speed: only a failure needs it
        failure.data["traceback"] = traceback.format_exc()
        return None, failure


# ---------------------------------------------------------------------------------------------
# Commands


def check_paths(paths: Iterable[str], options: Options) -> CheckResult:
    """`memlint check`: every run the given files (or directories) belong to, linted."""
    reg = registry()
    cwd = os.getcwd()
    paths = list(paths) or default_paths(lint_config(options, cwd), cwd, options.allow_outside_root)
    files = expand(paths, options.max_bytes)
    planner = Planner(options.max_bytes, options.allow_outside_root,
                      config_of=_configs_by_folder(options))
    runs = planner.plan(files)
    diagnostics, estimates = list(reg.diagnostics), []
    problems = len(diagnostics)   # the registry's, so far: a rule module imports on first use
    fail_on = None
    seen = set()
    summary = verdicts.Summary()
    used: set = set()      # the inline suppressions some run used (ML011 is for the others)
    for run in runs:
        validate(run.config, reg)
        fail_on = run.config.fail_on if fail_on is None else min(fail_on, run.config.fail_on)
        found, estimate = run_pipeline(run, options, reg, used)
        for d in found:
            identity = (d.code, d.message, d.path, d.line, d.column)
            if identity not in seen:   # a file shared by two runs: one report per finding
                seen.add(identity)
                diagnostics.append(d)
        if estimate is not None:
            estimates.append(estimate)
        summary.add(run_files(run), verdicts.run_reason(
            found, estimate, all(p.fmt == "unknown" for p in run.partials)))
    # a rule module that failed to import when these runs first needed it
    diagnostics[problems:problems] = reg.diagnostics[problems:]
    result = CheckResult(drop_used(diagnostics, used), estimates,
                         fail_on or lint_config(options, cwd).fail_on, reg, summary)
    if options.require_estimate:
        result.diagnostics.extend(missing_estimates(summary, options.skip_unknown))
    return result


def run_files(run: Run) -> list:
    """The files a run read (not the model a name resolved to)."""
    return [p.source for p in run.partials if p.source and (os.path.exists(p.source)
                                                            or is_buffered(p.source))]


def missing_estimates(summary: "verdicts.Summary", skip_unknown: bool) -> list:
    """--require-estimate: an error per file that got no memory verdict, with the reason (not
    for the files --skip-unknown skips)."""
    return [make(MISSING_MODEL, Severity.ERROR,
                 f"no memory verdict ({reason}), and --require-estimate asks for one",
                 Provenance(path, None, None, None), require_estimate=True)
            for path, reason in sorted(summary.without.items())
            if not (skip_unknown and verdicts.is_unread_format(reason))]


def one_run(paths: Iterable[str], options: Options) -> Run:
    """All the files describe one run, as given (no discovery): estimate, fit."""
    paths = list(paths)
    for path in paths:
        if not os.path.exists(path):
            if os.path.islink(path):
                raise UsageError(f"{path}: a broken symbolic link or a symbolic link loop")
            raise UsageError(f"{path}: no such file")
        if os.path.isdir(path):
            raise UsageError(f"{path}: is a directory (give the config files)")
    config = lint_config(options, paths[0] if paths else os.getcwd())
    planner = Planner(options.max_bytes, options.allow_outside_root,
                      config_of=lambda path: config)
    partials = planner.load(paths, config)
    anchor = file_anchor(partials[-1]) if partials else Provenance(None, None, None, None)
    return Run(paths[0] if paths else "<command line>", partials, config, anchor)


def scenario_of(paths: Iterable[str], options: Options):
    """(Scenario, LintConfig) of the one run the files and options describe; an error in it, or
    no model, raises UsageError (the commands that need a scenario to search on: fit)."""
    run = one_run(paths, options)
    partials = run.partials + _project_assumptions(run.config) + [command_line_partial(options)]
    scenario, diagnostics = build(partials, base_dir=os.getcwd(),
                                  allow_outside_root=run.config.allow_outside_root,
                                  max_bytes=options.max_bytes, hub=options.hub,
                                  models=run.config.models)
    errors = [d for d in diagnostics if d.severity >= Severity.ERROR]
    if errors:
        first = errors[0]
        where = f"{first.path}:{first.line}: " if first.path and first.line else (
            f"{first.path}: " if first.path else "")
        raise UsageError(f"{where}{first.message}")
    if scenario.model is None:
        raise UsageError("no model: give --model PATH|PRESET or config files that name one")
    return scenario, run.config


def estimate_paths(paths: Iterable[str], options: Options) -> CheckResult:
    """`memlint estimate`: all the files describe one run (no discovery); one estimate."""
    reg = registry()
    paths = list(paths)
    if not paths and not options.model and not any(
            a.strip().startswith("model") for a in options.assignments):
        raise UsageError("estimate needs a model: give --model PATH|PRESET or config files")
    run = one_run(paths, options)
    validate(run.config, reg)
    config = run.config
    diagnostics, estimate = run_pipeline(run, replace(options, lenient=False), reg)
    return CheckResult(diagnostics, [estimate] if estimate is not None else [], config.fail_on,
                       reg)


# ---------------------------------------------------------------------------------------------
# The public API


def _options(model, settings, select, ignore, fail_on, scenario) -> Options:
    assignments = []
    for key, value in list(dict(settings or {}).items()) + list(scenario.items()):
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (list, tuple, dict)):
            value = json.dumps(value)
        assignments.append(f"{key}={value}")
    return Options(model=model, assignments=tuple(sorted(assignments)),
                   select=tuple(select or ()), ignore=tuple(ignore or ()),
                   fail_on=Severity.parse(fail_on) if isinstance(fail_on, str) else fail_on)


def check(paths: Iterable[str] = (), *, model: Optional[str] = None,
          settings: Optional[Mapping[str, object]] = None, select: Iterable[str] = (),
          ignore: Iterable[str] = (), fail_on: Optional[str] = None,
          **scenario: object) -> CheckResult:
    """Lint config files (or directories) as `memlint check` does, from Python.

    `model` is a config.json path or a preset name; other scenario keys are keyword arguments
    (`world_size=64, gpu="H100-80GB"`) or, when dotted, entries of `settings`. Raises
    MemlintError for what the CLI reports with exit 2 (a missing file, an unusable model).
    """
    try:
        return check_paths(list(paths), _options(model, settings, select, ignore, fail_on,
                                                 scenario))
    except (UsageError, SettingsError) as exc:
        raise MemlintError(str(exc)) from None


def estimate(paths: Iterable[str] = (), *, model: Optional[str] = None,
             settings: Optional[Mapping[str, object]] = None, **scenario: object) -> Estimate:
    """The per-GPU memory Estimate of one run (`memlint estimate`), from Python.

    Returns a memlint.memory Estimate: `.peak_bytes`, `.fits`, `.stages` (each with `.terms`,
    every term a named formula with its inputs and source). Raises MemlintError when no estimate
    can be made (no model, a config the memory model cannot read).
    """
    try:
        result = estimate_paths(list(paths), _options(model, settings, (), (), None, scenario))
    except (UsageError, SettingsError) as exc:
        raise MemlintError(str(exc)) from None
    if not result.estimates:
        reasons = "; ".join(d.message for d in result.diagnostics
                            if d.severity == Severity.ERROR or d.code == "ML006")
        raise MemlintError(f"no memory estimate could be made: {reasons or 'see diagnostics'}")
    return result.estimates[0]


#: Share of GPU memory a plan should leave free unless told otherwise (memlint plan --headroom).
PLAN_HEADROOM = 0.10


def plan_scenario(scenario, gpus: Optional[int] = None, *, gpus_per_node: Optional[int] = None,
                  top: Optional[int] = 10, headroom: float = PLAN_HEADROOM,
                  near: Optional[dict] = None, cross_node_tp: bool = False,
                  max_pp: Optional[int] = None, allow_bubble: bool = False):
    """`memlint plan` on a built scenario: the configurations that fit `gpus` GPUs, ranked (a
    memlint.planner PlanResult). `gpus` defaults to the scenario's world size; `near`: the keys of
    a starting configuration (plans changing fewest of them first). Raises UsageError."""
    # start-up: the planner and the memory model load only when a plan is searched
    from memlint.memory.estimate import EstimateError
    from memlint.planner import search_plans

    gpus = gpus or scenario.parallelism.world_size
    if not gpus:
        raise UsageError("plan needs a GPU budget: give gpus=N (--gpus) or a world size")
    if gpus <= 0:
        raise UsageError("--gpus must be positive")
    if top is not None and top <= 0:
        raise UsageError("--top must be positive")
    if not 0 <= headroom < 1:
        raise UsageError("--headroom must be in [0, 1)")
    try:
        return search_plans(scenario, gpus, gpus_per_node or scenario.hardware.gpus_per_node, top,
                            headroom=headroom, near=near, cross_node_tp=cross_node_tp,
                            max_pp=max_pp, allow_bubble=allow_bubble)
    except (EstimateError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def plan(paths: Iterable[str] = (), *, model: Optional[str] = None, gpus: Optional[int] = None,
         gpus_per_node: Optional[int] = None, top: Optional[int] = 10,
         headroom: float = PLAN_HEADROOM, settings: Optional[Mapping[str, object]] = None,
         cross_node_tp: bool = False, max_pp: Optional[int] = None, allow_bubble: bool = False,
         **scenario: object) -> PlanResult:
    """The parallel configurations that fit a GPU budget, ranked (`memlint plan`), from Python.

    Returns a memlint.planner PlanResult: `.plans` best first, each with `.settings` (scenario
    keys that reproduce it with `memlint.estimate`), its `.estimate` and its throughput `.cost`;
    `.reason` says why none fits. With config files, their settings are the starting point and
    the plans nearest to them come first. Raises MemlintError where the CLI exits 2.
    """
    # start-up: the planner loads only when a plan is searched
    from memlint.planner import near_settings

    paths = list(paths)
    try:
        built, _config = scenario_of(paths, _options(model, settings, (), (), None, scenario))
        return plan_scenario(built, gpus, gpus_per_node=gpus_per_node, top=top,
                             headroom=headroom, near=near_settings(built) if paths else None,
                             cross_node_tp=cross_node_tp, max_pp=max_pp,
                             allow_bubble=allow_bubble)
    except (UsageError, SettingsError) as exc:
        raise MemlintError(str(exc)) from None


def fit_paths(paths: Iterable[str], options: Options, *, headroom: Optional[float] = None,
              questions: Iterable[str] = (), planner: bool = False) -> FitResult:
    """`memlint fit`: what fits the GPU for the one run the files and options describe (the
    largest micro_batch and seq_len, the fewest GPUs), searched on the memory model. `headroom`
    defaults to low-memory-headroom's margin ([tool.memlint], 0.10). Raises UsageError."""
    # start-up: the search loads only when something is fitted
    from memlint import fitting

    scenario, config = scenario_of(paths, options)
    if headroom is None:
        headroom = fitting.configured_headroom(config)
    try:
        return fitting.fit(scenario, headroom, questions=tuple(questions) or fitting.QUESTIONS,
                           planner=planner)
    except (fitting.FitError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def compare_paths(log: str, paths: Iterable[str], options: Options) -> tuple[Comparison,
                                                                              LintConfig]:
    """`memlint compare`: a training log's memory lines, rank by rank, against the estimate of
    the run the files and options describe; with the run's settings (where `--write-assumptions`
    writes). Raises UsageError."""
    # start-up: the log reader and the comparison load only for a comparison
    from memlint import comparison

    if not os.path.isfile(log):
        raise UsageError(f"{log}: no such file")
    try:
        report = comparison.read_log(log)
        scenario, config = scenario_of(paths, options)
        return comparison.compare(scenario, comparison.estimate_run(scenario), report), config
    except comparison.CompareError as exc:
        raise UsageError(f"cannot compare: {exc}") from None


def fit(paths: Iterable[str] = (), *, model: Optional[str] = None,
        headroom: Optional[float] = None, questions: Iterable[str] = (), planner: bool = False,
        settings: Optional[Mapping[str, object]] = None, **scenario: object) -> FitResult:
    """What fits the GPU (`memlint fit`), from Python: a FitResult whose `.answers` (one per
    question: micro_batch, seq_len, world_size) each give the `.value` found, the per-stage
    peaks at it and what limits it. Raises MemlintError where the CLI exits 2."""
    try:
        return fit_paths(list(paths), _options(model, settings, (), (), None, scenario),
                         headroom=headroom, questions=questions, planner=planner)
    except (UsageError, SettingsError) as exc:
        raise MemlintError(str(exc)) from None


def compare(log: str, paths: Iterable[str] = (), *, model: Optional[str] = None,
            settings: Optional[Mapping[str, object]] = None, **scenario: object) -> Comparison:
    """A training log's memory against the estimate (`memlint compare`), from Python: a
    Comparison whose `.ranks` each hold the measured and estimated bytes metric by metric and
    the difference split by what causes it; `.fitted` the runtime assumptions the log measures.
    Raises MemlintError where the CLI exits 2."""
    try:
        return compare_paths(log, list(paths), _options(model, settings, (), (), None,
                                                        scenario))[0]
    except (UsageError, SettingsError) as exc:
        raise MemlintError(str(exc)) from None
