"""The command line: `memlint check|estimate|plan|rules|explain` (also `python -m memlint`).

Argument parsing and printing only: what a command does is memlint.api (the library pipeline).

Exit codes (DESIGN.md): 0 no finding at or above --fail-on; 1 findings at or above it (parse
errors of a config included); 2 memlint could not do its job (bad command line, missing file,
internal error): one line on stderr, a traceback only with --debug.

Heavy modules (rich, yaml, jsonschema, the memory model) are imported only when a run needs them.
"""
from __future__ import annotations

import gc
import os
import sys

from memlint import __version__
from memlint.errors import UsageError

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


def _common(parser, formats: tuple) -> None:
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
    parser.add_argument("--output-file", "-o", metavar="FILE",
                        help="write the report to FILE (atomically, inside the repository root) "
                        "instead of standard output")
    parser.add_argument("--quiet", "-q", action="store_true", help="only the diagnostics")
    parser.add_argument("--units", choices=("GiB", "GB"), help="units of the text report")
    parser.add_argument("--max-file-size", default="4MiB",
                        help="largest config file read (default 4MiB)")
    parser.add_argument("--allow-outside-root", action="store_true",
                        help="follow references to files outside the repository root")
    parser.add_argument("--hub", action="store_true",
                        help="let a Hub model id that neither the HF cache nor the bundled catalog "
                        "knows be fetched from the Hugging Face Hub (config.json only; needs "
                        "memlint-llm[hub]; off by default, also MEMLINT_HUB=1)")
    parser.add_argument("--no-color", action="store_true", help="never colour the output")
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


def _check_arguments(parser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="config files or directories (walked for the files memlint reads); "
                        "- reads one config from standard input (name it with --stdin-filename)")
    _common(parser, ("text", "json", "sarif", "github", "junit", "markdown", "html"))
    parser.add_argument("--stdin-filename", metavar="PATH",
                        help="with -: the file the text on standard input is (its name tells "
                        "the format; its folder, the run it belongs to)")
    parser.add_argument("--statistics", action="store_true",
                        help="instead of each diagnostic, how many of each code (a table; "
                        "with --format json, a JSON list)")
    parser.add_argument("--skip-unknown", action="store_true",
                        help="skip files of no format memlint reads, without a warning (hooks)")
    parser.add_argument("--require-estimate", action="store_true",
                        help="a file that gets no memory verdict is an error (CI), with the "
                        "reason the summary line gives")
    parser.add_argument("--fix", action="store_true",
                        help="apply the safe fixes (a mistyped key with one clear match, a "
                        "deprecated DeepSpeed key with a documented replacement), then report "
                        "what is left")
    parser.add_argument("--diff", action="store_true",
                        help="print the safe fixes as a unified diff instead of writing them "
                        "(exit 1 when there is one)")
    parser.add_argument("--sarif-min-severity", choices=("error", "warning", "info"),
                        help="with --format sarif: leave out results below this severity "
                        "(default: warning, or --fail-on's level where it is lower)")


def _estimate_arguments(parser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH")
    _common(parser, ("text", "json", "markdown", "html"))
    parser.add_argument("--explain", action="store_true", help="show the derivation term by term")
    parser.add_argument("--stage", type=int, help="with --explain: only this pipeline stage")


def _rules_arguments(parser) -> None:
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--debug", action="store_true")


def _explain_arguments(parser) -> None:
    parser.add_argument("rule", metavar="CODE|NAME")
    parser.add_argument("--debug", action="store_true")


def build_parser(argv: list | None = None):
    """The parser; with `argv`, only the subcommand it runs gets its arguments (start-up)."""
    # start-up: argparse loads only when a command line is parsed (not for --version)
    from memlint.commands import arguments

    return arguments.build(COMMANDS, f"memlint {__version__}", argv)


# ---------------------------------------------------------------------------------------------
# From arguments to the library's Options


def _max_bytes(args) -> int:
    # start-up: `memlint --version` and usage errors load no pipeline
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


def options_from(args):
    """The parsed command line as memlint.api.Options."""
    # start-up: `memlint --version` and usage errors load no pipeline
    from memlint.api import Options
    from memlint.diagnostics import Severity

    return Options(model=args.model, assignments=tuple(_assignments(args)),
                   select=_csv(args.select), extend_select=_csv(args.extend_select),
                   ignore=_csv(args.ignore),
                   fail_on=Severity.parse(args.fail_on) if args.fail_on else None,
                   max_bytes=_max_bytes(args), allow_outside_root=args.allow_outside_root,
                   skip_unknown=getattr(args, "skip_unknown", False),
                   require_estimate=getattr(args, "require_estimate", False),
                   hub=True if getattr(args, "hub", False) else None)


# ---------------------------------------------------------------------------------------------
# Commands


def _severity(label):
    # start-up: `memlint --version` and usage errors load no pipeline
    from memlint.diagnostics import Severity

    return Severity.parse(label) if label else None


def _color(args) -> bool:
    # start-up: memlint.commands only (its arguments module imports argparse)
    from memlint.commands import color

    return color(args.no_color, sys.stdout)


def _units(args, estimates) -> str:
    if args.units:
        return args.units
    for estimate in estimates:  # the assumption `units` in force (GB under the seed profile)
        scenario = getattr(estimate, "scenario", None)
        if scenario is not None and scenario.assumptions.get("units") == "GB":
            return "GB"
    return "GiB"


def _emit(report, fmt: str) -> None:
    # start-up: `memlint --version` and usage errors load no pipeline
    from memlint import report as reporters

    if fmt == "text":
        # start-up: `memlint --version` and usage errors load no pipeline
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


# formats whose report carries the "files without a memory verdict" line (memlint/verdicts.py)
_SUMMARY_IN_REPORT = ("text", "json", "markdown", "html")


def cmd_check(args) -> int:
    options = options_from(args)
    paths = list(args.paths)
    if "-" in paths:
        # start-up: only a check of standard input needs the buffers
        from memlint.loaders import use_buffers

        paths, held = _stdin_paths(args, paths)
        previous = use_buffers(held)
        try:
            return _check(args, options, paths)
        finally:
            use_buffers(previous)
    return _check(args, options, paths)


def _check(args, options, paths: list) -> int:
    # start-up: `memlint --version` and usage errors load no pipeline
    from memlint.api import check_paths
    from memlint.report import Report

    result = check_paths(paths, options)
    if args.fix or args.diff:
        fixed = _fix(args, options, result)
        if args.diff or fixed is None:
            return fixed if fixed is not None else 1
        result = check_paths(paths, options)   # what is left after the fixes
    diagnostics, estimates = result.diagnostics, result.estimates
    _print_tracebacks(diagnostics, args)
    shown = args.format in _SUMMARY_IN_REPORT
    report = Report(diagnostics=diagnostics, estimates=estimates, units=_units(args, estimates),
                    quiet=args.quiet, registry=result.registry,
                    color=_color(args) and args.format == "text", fail_on=result.fail_on,
                    summary=result.summary if shown else None,
                    min_severity=_severity(args.sarif_min_severity))
    if args.statistics:
        _statistics(diagnostics, args.format == "json")
    else:
        _emit(report, args.format)
    if not shown and result.summary is not None and not args.quiet:
        # machine formats keep stdout to their own syntax: the verdict count goes to stderr
        sys.stderr.write(result.summary.line() + "\n")
    code = result.exit_code
    if code == 2:  # DESIGN.md: exit 2 comes with a one-line message
        internal = result.internal_error
        # start-up: only on an internal error
        from memlint.escape import one_line

        where = f"{one_line(internal.path)}: " if internal.path else ""
        sys.stderr.write(f"memlint: internal error: {where}{one_line(internal.message)} (run "
                         "with --debug for the traceback)\n")
    return code


def _stdin_paths(args, paths: list) -> list:
    """`-`: the text on standard input, checked as the file --stdin-filename names (paths and
    the {path: text} buffer for loaders.use_buffers: the file need not exist; its folder gives
    the run)."""
    if paths.count("-") > 1 or args.fix or args.diff:
        raise UsageError("- (standard input) may be given once, and not with --fix or --diff")
    if not args.stdin_filename:
        raise UsageError("- reads a config from standard input: name the file it is with "
                         "--stdin-filename PATH (e.g. ds_config.json)")
    return ([args.stdin_filename if p == "-" else p for p in paths],
            {args.stdin_filename: sys.stdin.read()})


def _statistics(diagnostics: list, as_json: bool = False) -> None:
    """--statistics: one line per code, most frequent first (with --format json, a JSON list of
    {code, rule, severity, count}, as a machine reading stdout expects)."""
    counts: dict = {}
    for d in diagnostics:
        key = (d.code, d.rule, d.severity.label)
        counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if as_json:
        import json  # start-up: only for --statistics --format json

        rows = [{"code": code, "rule": rule, "severity": severity, "count": count}
                for (code, rule, severity), count in ordered]
        sys.stdout.write(json.dumps({"statistics": rows}, indent=2) + "\n")
        return
    for (code, rule, severity), count in ordered:
        sys.stdout.write(f"{count:6d}  {code}  {severity:<7}  {rule}\n")


def _fix(args, options, result):
    """--diff: print the fixes and return the exit code (1: some); --fix: write them and return
    0 to go on reporting what is left."""
    # start-up: fixes load only for --fix / --diff
    from memlint.commands import fix

    changes = fix.plan(result.diagnostics, options)
    if args.diff:
        sys.stdout.write(fix.diffs(changes))
        count = sum(len(kept) for *_rest, kept in changes)
        sys.stderr.write(f"memlint: {count} fix(es) in {len(changes)} file(s) would be made "
                         "(--fix makes them)\n")
        return 1 if changes else 0
    count = fix.write(changes, options.allow_outside_root)
    if changes:
        sys.stderr.write(f"memlint: fixed {count} finding(s) in {len(changes)} file(s)\n")
    return 0


def cmd_estimate(args) -> int:
    # start-up: `memlint --version` and usage errors load no pipeline
    from memlint import engine
    from memlint.api import estimate_paths
    from memlint.report import Report

    result = estimate_paths(list(args.paths), options_from(args))
    diagnostics, estimates = result.diagnostics, result.estimates
    _print_tracebacks(diagnostics, args)
    if engine.has_internal_error(diagnostics):
        raise UsageError(result.internal_error.message)
    estimate = estimates[0] if estimates else None
    if args.stage is not None:
        if not args.explain:
            raise UsageError("--stage needs --explain")
        if estimate is not None and args.stage not in {s.stage for s in estimate.stages}:
            raise UsageError(f"--stage {args.stage}: the estimate has stages 0-"
                             f"{len(estimate.stages) - 1}")
    report = Report(diagnostics=diagnostics, estimates=estimates, units=_units(args, estimates),
                    quiet=args.quiet, explain=args.explain, stage=args.stage,
                    registry=result.registry, color=_color(args) and args.format == "text",
                    fail_on=result.fail_on)
    _emit(report, args.format)
    if estimate is None:
        sys.stderr.write("memlint: error: no memory estimate could be made (see the "
                         "diagnostics above)\n")
        # a config that cannot be read is a finding (exit 1), as in `check`
        unreadable = any(d.code == "ML001" and d.severity.label == "error" for d in diagnostics)
        return 1 if unreadable and result.exit_code == 1 else 2
    return result.exit_code


def cmd_rules(args) -> int:
    # start-up: `memlint --version` and usage errors load no pipeline
    import json

    # start-up: `memlint --version` and usage errors load no pipeline
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
    # start-up: `memlint --version` and usage errors load no pipeline
    from memlint.keys import suggest
    from memlint.rules import help_path, registry

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
    if help_path(rule):
        lines.append(f"This page is {help_path(rule)} in memlint's source tree.")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


# ---------------------------------------------------------------------------------------------
# fit and compare (issue 17): argument parsing and printing only; the answers come from the API
# (memlint.fit, memlint.compare: memlint/fitting.py and memlint/comparison.py).


def _fit_arguments(fit) -> None:
    fit.add_argument("paths", nargs="*", metavar="PATH")
    _common(fit, ("text", "json"))
    fit.add_argument("--headroom", type=float, help="share of GPU memory to leave free "
                     "(default: low-memory-headroom's margin, 0.10)")
    fit.add_argument("--only", action="append", default=[], metavar="QUESTIONS",
                     help="micro_batch, seq_len, world_size (comma-separated)")
    fit.add_argument("--planner", action="store_true",
                     help="also the fewest GPUs on which the planner finds any layout")


def _compare_arguments(compare) -> None:
    compare.add_argument("log", metavar="LOG")
    compare.add_argument("paths", nargs="*", metavar="PATH")
    _common(compare, ("text", "json"))
    compare.add_argument("--write-assumptions", nargs="?", const="", metavar="PYPROJECT",
                         help="record the fitted runtime assumptions in [tool.memlint."
                         "assumptions] (default: the governing pyproject.toml)")


def cmd_fit(args) -> int:
    # start-up: `memlint --version` and usage errors load no pipeline
    from memlint import fitting
    from memlint.api import fit_paths

    result = fit_paths(list(args.paths), options_from(args), headroom=args.headroom,
                       questions=_csv(args.only), planner=args.planner)
    if args.format == "json":
        sys.stdout.write(fitting.render_json(result))
    else:
        fitting.render_text(result, _units(args, []))
    return fitting.exit_code(result)


def _compare_scenario(args):
    # start-up: only --write-assumptions reads the scenario again
    from memlint.api import scenario_of

    return scenario_of(list(args.paths), options_from(args))[0]


def cmd_compare(args) -> int:
    # start-up: `memlint --version` and usage errors load no pipeline
    from memlint import comparison
    from memlint.api import compare_paths

    result, config = compare_paths(args.log, list(args.paths), options_from(args))
    if args.format == "json":
        sys.stdout.write(comparison.render_json(result))
    else:
        comparison.render_text(result, _units(args, []))
    if args.write_assumptions is not None:
        for line in comparison.states_mismatch(result, _compare_scenario(args)):
            # the fitted runtime assumptions would absorb a difference that is not runtime
            sys.stderr.write(f"memlint: warning: {line}; the assumptions written below would "
                             "hide it\n")
        if not result.fitted:
            raise UsageError("--write-assumptions: the log measures no runtime assumption "
                             "(it needs max allocated with max reserved, or an out-of-memory "
                             "message)")
        # start-up: the writer loads only when assumptions are written
        from memlint import safe_write
        from memlint.escape import one_line

        target = args.write_assumptions or config.source or "pyproject.toml"
        written = comparison.write_assumptions(target, result.fitted, args.log,
                                               safe_write.write_root(os.getcwd()),
                                               args.allow_outside_root)
        sys.stderr.write(f"memlint: wrote {len(written)} assumption(s) to {one_line(target)} "
                         "[tool.memlint.assumptions]\n")
    return 0


def _fewer_collections() -> None:
    """For speed: a run builds many small objects that live until it ends (a word and a position
    for every word of a launch script) and almost no cycles; at the default threshold (700
    allocations) the cycle collector walks the growing heap over and over, 40-60% of the CPU time
    of reading a 30,000-flag script. Collections stay on, only rarer."""
    gc.set_threshold(100_000, 50, 100)


class Command:
    """A subcommand: its help line and description (listed by `memlint --help` without building
    its parser), its arguments (a function adding them, or the name of a module whose
    add_arguments does) and what runs it (a function of the parsed arguments, or that module's
    run). A module named here is imported only when its subcommand runs."""

    __slots__ = ("help", "description", "arguments", "runner")

    def __init__(self, help: str, arguments, runner=None, description: str | None = None):
        self.help, self.arguments, self.runner = help, arguments, runner
        self.description = description

    def run(self, args) -> int:
        if self.runner is not None:
            return self.runner(args)
        # start-up: a subcommand's own module loads only when that subcommand runs
        import importlib

        return importlib.import_module(self.arguments).run(args)


COMMANDS = {
    "check": Command("lint config files", _check_arguments, cmd_check,
                     "Lint config files; files that describe one run (a memlint.toml's files, "
                     "[tool.memlint] runs) are checked together."),
    "estimate": Command("estimate per-GPU memory of one run", _estimate_arguments, cmd_estimate,
                        "Estimate per-GPU memory; all PATHS describe one run."),
    "rules": Command("list the rules", _rules_arguments, cmd_rules),
    "explain": Command("print a rule's documentation", _explain_arguments, cmd_explain),
    "plan": Command("find the parallel configurations that fit, ranked", "memlint.commands.plan",
                    description="Search tp/pp/dp/cp/ep, ZeRO/FSDP, recompute, micro batch and "
                    "offload for the configurations whose per-GPU memory fits, ranked by "
                    "headroom and a documented throughput-penalty model."),
    "fit": Command("the largest micro batch / seq_len and the fewest GPUs that fit",
                   _fit_arguments, cmd_fit,
                   "Search the memory model for the largest micro_batch, the largest seq_len "
                   "(with the cp it needs) and the smallest world size that fit the GPU with the "
                   "headroom; all PATHS describe one run."),
    "compare": Command("compare a training log's memory with the estimate", _compare_arguments,
                       cmd_compare,
                       "Read the memory lines of a training log (Megatron, torchtitan, "
                       "DeepSpeed, HF Trainer, CUDA out-of-memory) and compare them rank by rank "
                       "with the estimate of the run PATHS describe."),
    "server": Command("run the Language Server (LSP over stdio) for editors",
                      "memlint.commands.server",
                      description="memlint as a Language Server: diagnostics as you type, "
                      "hovers with memory figures, quick fixes. Needs memlint-llm[lsp]."),
    "completion": Command("print a shell completion script (bash, zsh, fish)",
                          "memlint.commands.completion",
                          description="Print a completion script for bash, zsh or fish, made "
                          "from memlint's own argument parser."),
    "schema": Command("print a JSON Schema memlint publishes (deepspeed, memlint.toml, ...)",
                      "memlint.commands.schema",
                      description="Print a JSON Schema: DeepSpeed's ds_config.json, memlint.toml, "
                      "[tool.memlint] of pyproject.toml, or the SchemaStore catalog entries."),
}
VERSION_ONLY = ["--version"]


def _run_to_file(command, args) -> int:
    """--output-file: the command's standard output, written to the file through the safe
    writer (atomic, locked, inside the repository root unless --allow-outside-root)."""
    # start-up: io and the writer load only for --output-file
    import io

    # start-up: io and the writer load only for --output-file
    from memlint import safe_write

    real, captured = sys.stdout, io.StringIO()
    sys.stdout = captured
    try:
        code = command.run(args)
    finally:
        sys.stdout = real
    safe_write.write(args.output_file, captured.getvalue(), safe_write.write_root(os.getcwd()),
                     allow_outside_root=getattr(args, "allow_outside_root", False))
    return code


def main(argv: list | None = None) -> int:
    """The command line. Without `argv` (the `memlint` command, `python -m memlint`: a process
    of its own) the process ends here, without tearing the interpreter down."""
    if argv is not None:
        return _main(list(argv))
    _fewer_collections()
    _end_process(_main(sys.argv[1:]))


def _end_process(code: int):
    """For start-up speed: freeing every module and object at interpreter exit costs about a
    sixth of a one-file check (bench/speed.py). The output is flushed and the process ends with
    `code`; when something registered an atexit handler, the normal exit runs it instead."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        pass  # a reader that went away (| head), or a stream already closed: nothing to keep
    # start-up: atexit is built in; only its count of handlers is read
    import atexit

    ncallbacks = getattr(atexit, "_ncallbacks", None)
    if ncallbacks is None or ncallbacks():
        sys.exit(code)
    os._exit(code)


class _Recorder:
    """Takes a subcommand's add_argument calls as a parser would and keeps, per destination,
    the value argparse gives when the option is absent, and the on/off flags by their names."""

    def __init__(self):
        self.defaults: dict = {}
        self.switches: dict = {}   # "--quiet", "-q" -> "quiet"
        self.positional = None
        self.simple = True         # only options whose absence and switches it models

    def add_argument(self, *names, **options) -> None:
        action = options.get("action", "store")
        if not names[0].startswith("-"):
            if self.positional is not None or options.get("nargs") != "*" or "default" in options:
                self.simple = False
            self.positional = options.get("dest", names[0])
            self.defaults[self.positional] = None
            return
        long = next((n for n in names if n.startswith("--")), names[0])
        dest = options.get("dest") or long.lstrip("-").replace("-", "_")
        if action == "store_true":
            self.defaults[dest] = options.get("default", False)
            self.switches.update(dict.fromkeys(names, dest))
        elif action in ("store", "append"):
            default = options.get("default")
            if isinstance(default, str) and "type" in options:
                default = options["type"](default)   # argparse converts a string default
            self.defaults[dest] = default
        else:
            self.simple = False


_QUICK_CHECK: list = []   # the Recorder of check's arguments, made once


class QuickArgs:
    """The parsed command line of `memlint check`, made without argparse (see quick_check)."""

    def __init__(self, values: dict):
        self.__dict__.update(values)

    def __repr__(self) -> str:
        return f"QuickArgs({self.__dict__!r})"


def quick_check(words: list):
    """For start-up speed (argparse and its gettext lookups cost about a tenth of a one-file
    check): the arguments of a `check` command line made only of paths and on/off flags (a
    hook's `memlint check --skip-unknown FILE...`), as argparse parses them; None for any other
    command line, which argparse then parses. tests/cli/test_quick_args.py compares the two."""
    if not words or words[0] != "check":
        return None
    if not _QUICK_CHECK:
        recorder = _Recorder()
        _check_arguments(recorder)
        _QUICK_CHECK.append(recorder)
    recorder = _QUICK_CHECK[0]
    if not recorder.simple or recorder.positional is None:
        return None
    values = dict(recorder.defaults, command="check")
    paths: list = []
    block = None   # where the paths are: argparse takes one run of positional words
    for index, word in enumerate(words[1:]):
        if word.startswith("-"):
            dest = recorder.switches.get(word)
            if dest is None:
                return None   # "-", "--", an option with a value, an abbreviation, -h
            values[dest] = True
        else:
            if block is not None and block != index - len(paths):
                return None
            block = index - len(paths)
            paths.append(word)
    for dest, value in values.items():
        if isinstance(value, list):
            values[dest] = list(value)
    values[recorder.positional] = paths
    return QuickArgs(values)


def _main(words: list) -> int:
    if words == VERSION_ONLY:  # start-up: the answer needs no parser (argparse prints the same)
        sys.stdout.write(f"memlint {__version__}\n")
        return 0
    args = quick_check(words)
    if args is not None:
        return _run(args, words)
    parser = build_parser(words)
    try:
        args = parser.parse_args(words)
    except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 2
        if code == 2:
            _sarif_failure("the command line is not valid (see the usage message)", words)
        return code
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return _run(args, words)


def _run(args, words: list) -> int:
    debug = getattr(args, "debug", False)
    try:
        if getattr(args, "output_file", None):
            return _run_to_file(COMMANDS[args.command], args)
        return COMMANDS[args.command].run(args)
    except UsageError as exc:
        # start-up: `memlint --version` and usage errors load no pipeline
        from memlint.escape import one_line

        sys.stderr.write(f"memlint: error: {one_line(str(exc))}\n")
        _sarif_failure(one_line(str(exc)), words)
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("memlint: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - never a traceback unless --debug
        # start-up: `memlint --version` and usage errors load no pipeline
        from memlint.engine import SettingsError
        from memlint.escape import one_line

        if isinstance(exc, SettingsError):
            sys.stderr.write(f"memlint: error: {one_line(str(exc))}\n")
            _sarif_failure(one_line(str(exc)), words)
            return 2
        if debug:
            # start-up: `memlint --version` and usage errors load no pipeline
            import traceback

            traceback.print_exc()
        sys.stderr.write(f"memlint: internal error: {type(exc).__name__}: {one_line(str(exc))} "
                         "(run with --debug for the traceback)\n")
        return 2


def _sarif_failure(message: str, words: list) -> None:
    """On exit 2 with --format sarif, stdout still gets a valid SARIF log (README's upload)."""
    wanted = any(w == "--format=sarif" or (w == "--format" and i + 1 < len(words)
                                           and words[i + 1] == "sarif")
                 for i, w in enumerate(words))
    if wanted:
        # start-up: `memlint --version` and usage errors load no pipeline
        from memlint.report.sarif_format import failure_log

        sys.stdout.write(failure_log(message))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
