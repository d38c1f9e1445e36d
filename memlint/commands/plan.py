"""`memlint plan`: the parallel configurations that fit a GPU budget, ranked.

    memlint plan --model PATH|PRESET --gpus N --gpu NAME [--gpus-per-node 8] --seq-len T
                 --global-batch B [--top K] [--format text|json] [--set key=value ...]
    memlint plan ds_config.json --model config.json --gpus 64 ...

With configuration files, their settings are the starting point and the plans are the nearest
configurations that fit (fewest changed keys first). Every plan's `set` list (JSON) are `--set`
arguments that reproduce it with `memlint estimate`. Wired into memlint/cli.py (its COMMANDS) as
`add_arguments(parser)` + `run(args) -> int`; exit codes: 0 some plan fits, 1 none does, 2 the
command could not run.
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional

from memlint.errors import UsageError

GiB = 1024**3
PROGRESS_AFTER = 1.0   # seconds: a search that runs longer says so on stderr


class Progress:
    """A search that runs past PROGRESS_AFTER seconds says so on stderr: on a terminal, the
    seconds so far, rewritten in place and cleared at the end; elsewhere (a CI log) one line."""

    def __init__(self, what: str, stream=None):
        self.what, self.stream = what, stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.shown = False

    def __enter__(self) -> "Progress":
        # start-up: threads only for a plan search
        import threading
        import time

        self.done = threading.Event()
        self.start = time.monotonic()

        def tick():
            if self.done.wait(PROGRESS_AFTER):
                return
            while True:
                elapsed = time.monotonic() - self.start
                self.stream.write(("\r" if self.tty else "")
                                  + f"memlint plan: {self.what} ({elapsed:.0f} s)"
                                  + ("" if self.tty else "\n"))
                self.stream.flush()
                self.shown = True
                if not self.tty or self.done.wait(0.5):
                    return
        self.thread = threading.Thread(target=tick, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.done.set()
        self.thread.join()
        if self.shown and self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


MAX_TOP = 200   # plans shown at most: each one shown is a full estimate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("configs", nargs="*", metavar="CONFIG",
                        help="existing config files to start from (plans nearest to them first)")
    parser.add_argument("--model", help="HF config.json (or its directory) or a preset name")
    parser.add_argument("--gpus", type=int, help="total number of GPUs (default: world_size of the "
                                                  "config)")
    parser.add_argument("--gpu", help="GPU name, e.g. H100-80GB, H200, A100-40GB")
    parser.add_argument("--hub", action="store_true",
                        help="fetch a Hub model's config.json (only) when neither the HF cache "
                        "nor the bundled catalog has it (needs memlint-llm[hub])")
    parser.add_argument("--gpus-per-node", type=int, help="GPUs per node (default 8)")
    parser.add_argument("--seq-len", type=int, help="sequence length (--set seq_len)")
    parser.add_argument("--global-batch", type=int, help="global batch in samples")
    parser.add_argument("--top", type=int, default=10,
                        help=f"plans to show (default 10, at most {MAX_TOP})")
    parser.add_argument("--headroom", type=float, default=0.10,
                        help="share of GPU memory a plan should leave free (default 0.10)")
    parser.add_argument("--cross-node-tp", action="store_true",
                        help="also try tensor parallelism wider than a node")
    parser.add_argument("--max-pp", type=int, help="largest pipeline size to try")
    parser.add_argument("--allow-bubble", action="store_true",
                        help="also try pipelines with fewer micro-batches than stages")
    parser.add_argument("--detail", action="store_true",
                        help="also print each plan's per-stage memory and throughput penalties")
    parser.add_argument("--format", choices=("text", "json", "html"), default="text")
    parser.add_argument("--output-file", "-o", metavar="FILE",
                        help="write the plans to FILE (atomically, inside the repository root) "
                        "instead of standard output")
    parser.add_argument("--set", dest="assignments", action="append", default=[],
                        metavar="KEY=VALUE", help="set a scenario key (repeatable)")
    parser.add_argument("--no-color", action="store_true", help="never colour the output")
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


class _Usage(Exception):
    pass


def base_assignments(args) -> list:
    """The command line as scenario assignments (what every plan is relative to)."""
    out = list(args.assignments)
    if args.seq_len is not None:
        out.append(f"seq_len={args.seq_len}")
    if args.global_batch is not None:
        out.append(f"global_batch={args.global_batch}")
    if args.gpu:
        out.append(f"gpu={args.gpu}")
    if args.gpus_per_node is not None:
        out.append(f"gpus_per_node={args.gpus_per_node}")
    return out


def build_base(args):
    """(Scenario, whether config files were given) through the library pipeline
    (memlint.api.scenario_of), as `memlint estimate` and `memlint fit` build theirs."""
    # start-up: the CLI imports this module; the pipeline loads only for `plan`
    from memlint.api import Options, scenario_of

    options = Options(model=args.model, assignments=tuple(base_assignments(args)),
                      hub=True if getattr(args, "hub", False) else None)
    scenario, _config = scenario_of(args.configs, options)
    return scenario, bool(args.configs)


def run(args) -> int:
    try:
        return _run(args)
    except (_Usage, UsageError) as exc:
        print(f"memlint plan: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - exit 2 with one line unless --debug
        if getattr(args, "debug", False):
            raise
        print(f"memlint plan: internal error: {exc}", file=sys.stderr)
        return 2


def _run(args) -> int:
    # start-up: the CLI imports this module; the planner loads only for `plan`
    from memlint.api import plan_scenario
    from memlint.planner import near_settings

    scenario, from_files = build_base(args)
    gpus = args.gpus or scenario.parallelism.world_size
    if gpus is not None and gpus <= 0:
        raise _Usage("--gpus must be positive")
    if args.top is not None and args.top <= 0:
        raise _Usage("--top must be positive")
    if not 0 <= args.headroom < 1:
        raise _Usage("--headroom must be in [0, 1)")
    gpn = args.gpus_per_node or scenario.hardware.gpus_per_node
    if not gpus:
        # No budget given: answer the smallest GPU count first (memlint fit's planner search).
        # start-up: the CLI imports this module; the planner loads only for `plan`
        from memlint.fitting import smallest_gpus

        with Progress("searching for the smallest GPU count"):
            fewest = smallest_gpus(scenario, args.headroom, gpn,
                                   cross_node_tp=args.cross_node_tp, max_pp=args.max_pp,
                                   allow_bubble=args.allow_bubble)
        if fewest.value is None:
            print(f"memlint plan: {fewest.notes[0]}", file=sys.stderr)
            return 1
        gpus = fewest.value
        print(f"smallest GPU count with a layout that leaves {args.headroom:.0%} free: {gpus}"
              + (f" ({fewest.notes[-1]})" if fewest.failing is not None else ""),
              file=sys.stderr if args.format != "text" else sys.stdout)
    with Progress(f"searching the layouts of {gpus:,} GPUs"):
        result = plan_scenario(scenario, gpus, gpus_per_node=gpn, top=min(args.top, MAX_TOP),
                               headroom=args.headroom,
                               near=near_settings(scenario) if from_files else None,
                               cross_node_tp=args.cross_node_tp, max_pp=args.max_pp,
                               allow_bubble=args.allow_bubble)
    if args.top > MAX_TOP:
        result.notes.insert(0, f"--top {args.top}: the best {MAX_TOP} plans are shown (each "
                               "plan shown is estimated in full)")
    if args.format == "json":
        import json  # for start-up speed: only the JSON output needs it

        print(json.dumps(to_json(result, scenario, args), indent=2))
    elif args.format == "html":
        # start-up: the CLI imports this module; the planner loads only for `plan`
        from memlint.report.html_format import render_plan

        sys.stdout.write(render_plan(result, scenario, scenario.assumptions.get("units", "GiB")))
    else:
        render_text(result, scenario, args)
    return 0 if result.plans else 1


def to_json(result, scenario, args) -> dict:
    # start-up: the CLI imports this module; the planner loads only for `plan`
    from memlint import __version__

    out = {"memlint_version": __version__,
           "base": {"model": scenario.model.name, "set": base_assignments(args),
                    "profile": scenario.assumptions.profile,
                    "framework": scenario.training.framework,
                    "gpu": {"name": scenario.hardware.gpu,
                            "capacity_bytes": scenario.hardware.gpu_memory}}}
    out.update(result.to_dict())
    return out


def _gib(value: int, units: str) -> str:
    return f"{value / (1e9 if units == 'GB' else GiB):.1f}"


def render_text(result, scenario, args, file=None) -> None:
    # start-up: rich loads only when a table is printed
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from memlint.commands import color

    stream = file or sys.stdout
    # coloured as `memlint check` is: not with --no-color or NO_COLOR, not off a terminal (rich
    # alone would print bold under NO_COLOR, and colour a pipe under FORCE_COLOR)
    plain = {} if color(getattr(args, "no_color", False), stream) else {
        "color_system": None, "force_terminal": False}
    # A pipe or a narrow terminal would squeeze the ranked table until the layout column is
    # cut to "TP4·PP…": keep it at least wide enough for every column in full.
    width = None
    if not (hasattr(stream, "isatty") and stream.isatty()):
        width = 140
    console = Console(file=stream, highlight=False, width=width, **plain)
    if console.width < 120:
        console = Console(file=stream, highlight=False, width=120, **plain)
    units = scenario.assumptions.get("units", "GiB")
    cap = scenario.hardware.gpu_memory
    stats = result.stats
    console.print(f"[bold]memlint plan[/bold]: {scenario.model.name or 'model'} on "
                  f"{result.gpus} x {scenario.hardware.gpu} ({_gib(cap, units)} {units}), "
                  f"{result.gpus_per_node} per node, framework {scenario.training.framework}, "
                  f"profile {scenario.assumptions.profile}")
    console.print(f"examined {stats.examined:,} candidates: {stats.pruned_states:,} cut by the "
                  f"model-states bound, {stats.pruned_bound:,} by the activation bound, "
                  f"{stats.pruned_rules:,} by rules; {stats.estimated} estimated, "
                  f"{stats.fitting} fit ({stats.seconds:.2f} s)")
    for note in result.notes:
        console.print(f"note: {note}")
    if not result.plans:
        console.print("[red]no configuration fits[/red]" + (
            f": {escape(result.reason)}" if result.reason else ""))
        return
    table = Table(title="ranked plans", show_lines=False)
    for col in ("#", "layout", "zero/fsdp", "recompute", "mb×acc", "offload", f"peak {units}",
                "headroom", "step ×"):
        table.add_column(col)
    for p in result.plans:
        s = p.settings
        shard = f"zero{s['zero']}" if s["fsdp"] == "none" else s["fsdp"] + (
            f" r{s['dp_replicate']}" if "dp_replicate" in s else "")
        rec = s["recompute"] + (f"/{s['recompute_every']}" if s["recompute"] == "selective" else "")
        table.add_row(str(p.rank), p.label(), shard, rec,
                      f"{s['micro_batch']}×{s.get('grad_accum', '-')}", p.offload(),
                      _gib(p.peak_bytes, units),
                      f"{p.headroom_fraction * 100:.0f}%" + ("" if p.has_headroom else " (low)"),
                      f"{p.cost.relative_step_time:.2f}")
    console.print(table)
    for p in result.plans:
        # one line however wide: the --set list is copied into a shell as it is
        console.print(f"\n[bold]#{p.rank} {p.label()}[/bold]  --set " + " --set ".join(
            p.assignments()), soft_wrap=True)
        if p.changed:
            console.print("  changes: " + ", ".join(p.changed))
        if not getattr(args, "detail", False):
            continue
        stages = Table(show_header=True, box=None, padding=(0, 1))
        for col in ("stage", "layers", "phase", "weights", "grads", "optim", "activ", "other",
                    "total"):
            stages.add_column(col)
        for st in p.estimate.stages:
            comp = st.components()
            other = sum(v for k, v in comp.items()
                        if k not in ("weights", "gradients", "optimizer", "activations"))
            stages.add_row(str(st.stage), str(st.layers), st.phase,
                           *(_gib(comp.get(k, 0), units) for k in
                             ("weights", "gradients", "optimizer", "activations")),
                           _gib(other, units), _gib(st.total_bytes, units))
        console.print(stages)
        for pen in p.penalties:
            console.print(f"  +{pen.fraction * 100:5.1f}%  {pen.name}: {pen.explanation} "
                          f"[dim]({pen.source})[/dim]")
    if not getattr(args, "detail", False):
        console.print("\n[dim](--detail: each plan's per-stage memory and throughput "
                      "penalties)[/dim]")


def main(argv: Optional[list] = None) -> int:
    """Stand-alone entry point (`python -m memlint.commands.plan`), until cli.py wires it in."""
    parser = argparse.ArgumentParser(prog="memlint plan")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
