"""`memlint fit`: the largest micro batch, the largest sequence length (with the context
parallelism it needs) and the smallest world size that fit the GPU with the configured headroom.

    memlint fit memlint.toml
    memlint fit --model llama3-70b --set framework=fsdp2 --set fsdp=full --world-size 64

Every answer is found on the memory model itself (`memlint.memory.estimate.estimate`), never on a
formula of its own: the per-GPU peak grows with micro_batch and seq_len and shrinks (or stays) as
the data-parallel size grows, so an exponential search brackets the boundary and a binary search
finds it. Each answer carries the estimate at the value found (its per-stage peaks) and at the
first value that does not fit, from which "what limits it" is read: the stage that overflows, its
largest term and the term that grew the most. A run where even the smallest value does not fit
says so and names the term that dominates.

"Fits" is the rule low-memory-headroom's test: the peak beside the allocator's releasable cache
(held_peak_bytes) <= capacity x (1 - margin), with the margin
from `[tool.memlint.options.low-memory-headroom]` (default 0.10) or `--headroom`.

The library entry point is `fit(scenario, headroom)`; `run(args, scenario)` is the command.
"""
from __future__ import annotations

import dataclasses
import json
import math
import sys
from dataclasses import dataclass, field
from typing import Callable, Optional

from memlint import __version__, records
from memlint.ir import Training
from memlint.memory.context import context_of, resolve_context
from memlint.memory.estimate import EstimateError, estimate
from memlint.planner import search_plans
from memlint.planner.search import FRAMEWORKS
from memlint.units import fmt

TYPE_CHECKING = False   # the type checker's names only
if TYPE_CHECKING:
    from memlint.ir import Scenario
    from memlint.memory.result import Estimate

#: The low-memory-headroom rule's default margin (memlint/rules/memory.py, ML102).
DEFAULT_HEADROOM = 0.10
#: Search ceilings: far past any real run; reaching one is reported, not hidden.
MAX_MICRO_BATCH = 1 << 16
MAX_SEQ_LEN = 1 << 24
MAX_DP = 1 << 17
#: Sequence lengths are searched on multiples of this many tokens (a kernel-friendly size).
SEQ_GRANULE = 128

QUESTIONS = ("micro_batch", "seq_len", "world_size")


class FitError(ValueError):
    """The run cannot be searched (no model, no GPU size, an estimate that fails)."""


# ---------------------------------------------------------------------------------------------
# The generic monotone searches


def largest(fits: Callable[[int], bool], low: int, high: int) -> tuple:
    """(largest v in [low, high] with fits(v), first v above it that does not fit or None).
    fits must be true up to a boundary and false after it; (None, low) when fits(low) is false."""
    if not fits(low):
        return None, low
    good, step = low, 1
    bad = None
    while bad is None:
        probe = min(low + step, high)
        if probe == good:
            return good, None  # fits all the way to the ceiling
        if fits(probe):
            good = probe
            step *= 2
        else:
            bad = probe
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good, bad


def smallest(fits: Callable[[int], bool], low: int, high: int) -> tuple:
    """(smallest v in [low, high] with fits(v), the value just below it or None when it is low).
    fits must be false up to a boundary and true after it; (None, high) when fits(high) fails."""
    last_bad, first_good = largest(lambda v: not fits(v), low, high)
    if last_bad is None:
        return low, None
    if first_good is None:
        return None, high
    return first_good, last_bad


# ---------------------------------------------------------------------------------------------
# Results


@dataclass
class Limit:
    """What stops the search: the stage that overflows, its largest term, the term that grew."""

    stage: int
    phase: str
    total_bytes: int
    term: str
    term_bytes: int
    grew: Optional[str] = None
    grew_bytes: int = 0

    def describe(self, units: str, stages: int) -> str:
        where = f"stage {self.stage}" if stages > 1 else "the GPU"
        text = (f"{where} ({self.phase}, {fmt(self.total_bytes, units)}): largest term "
                f"{self.term} {fmt(self.term_bytes, units)}")
        if self.grew and self.grew != self.term:
            text += f"; grows most: {self.grew} (+{fmt(self.grew_bytes, units)})"
        elif self.grew:
            text += f" (+{fmt(self.grew_bytes, units)} from the last fitting value)"
        return text

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class Answer:
    question: str                 # micro_batch | seq_len | world_size | gpus
    value: Optional[int]          # None: even the smallest value does not fit
    settings: dict[str, object]   # scenario keys that reproduce the answer
    estimate: Optional[Estimate] = None  # at the answer (or at the smallest value tried)
    failing: Optional[int] = None  # the neighbouring value that does not fit
    failing_settings: dict[str, object] = field(default_factory=dict)
    limit: Optional[Limit] = None
    capped: Optional[str] = None  # why the search stopped short of memory (a ceiling)
    notes: list[str] = field(default_factory=list)
    rows: list[Answer] = field(default_factory=list)  # seq_len: one sub-answer per cp

    @property
    def fits(self) -> bool:
        return self.value is not None

    def assignments(self) -> list:
        """`--set` arguments that reproduce the answer on the run."""
        return [f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                for k, v in self.settings.items()]

    def to_dict(self) -> dict:
        out = {"question": self.question, "value": self.value, "fits": self.fits,
               "settings": dict(self.settings), "set": self.assignments(),
               "failing": self.failing, "failing_settings": dict(self.failing_settings),
               "limit": self.limit.to_dict() if self.limit else None, "capped": self.capped,
               "notes": list(self.notes)}
        if self.estimate is not None:
            out["peak_bytes"] = self.estimate.peak_bytes
            out["stages"] = [{"stage": s.stage, "phase": s.phase, "total_bytes": s.total_bytes,
                              "components": s.components()} for s in self.estimate.stages]
        if self.rows:
            out["by_cp"] = [row.to_dict() for row in self.rows]
        return out


@dataclass
class FitResult:
    scenario: Scenario
    headroom: float
    budget_bytes: float
    answers: list[Answer]
    # the run's resolved context (memory/context.py), shared with its estimates
    context: object = field(default=None, repr=False, compare=False)

    def answer(self, question: str) -> Optional[Answer]:
        return next((a for a in self.answers if a.question == question), None)

    def to_dict(self) -> dict:
        sc = self.scenario
        return {"memlint_version": __version__, "model": sc.model.name if sc.model else None,
                "gpu": {"name": sc.hardware.gpu, "capacity_bytes": sc.hardware.gpu_memory},
                "headroom": self.headroom, "budget_bytes": int(self.budget_bytes),
                "answers": [a.to_dict() for a in self.answers]}


# ---------------------------------------------------------------------------------------------
# The model on a variant of the run


class _Runs:
    """Estimates of variants of one scenario, cached by their changed keys."""

    def __init__(self, scenario, headroom: float):
        self.base = scenario
        self.context = resolve_context(scenario)   # the run's; variants share its architecture
        self.capacity = scenario.hardware.gpu_memory
        self.budget = self.capacity * (1 - headroom)
        self._cache: dict = {}

    def variant(self, **keys):
        tr = {k: v for k, v in keys.items() if k in _TRAINING}
        par = {k: v for k, v in keys.items() if k not in _TRAINING}
        sc = self.base
        if tr:
            sc = records.replace(sc, training=records.replace(sc.training, **tr))
        if par:
            sc = records.replace(sc, parallelism=records.replace(sc.parallelism, **par))
        return sc

    def estimate(self, **keys):
        key = tuple(sorted(keys.items()))
        if key not in self._cache:
            try:
                variant = self.variant(**keys)
                context = self.context if variant is self.base else self.context.varied(variant)
                self._cache[key] = estimate(variant, context)
            except EstimateError as exc:
                raise FitError(f"{', '.join(f'{k}={v}' for k, v in keys.items())}: {exc}") \
                    from None
        return self._cache[key]

    def fits(self, **keys) -> bool:
        # the margin is kept beside what the allocator cannot give back (memory/allocator.py)
        return self.estimate(**keys).held_peak_bytes <= self.budget


_TRAINING = {f.name for f in records.fields(Training)}


def limit_of(failing, fitting, budget: float) -> Limit:
    """The stage of `failing` that overflows most, its largest term, and the term that grew the
    most against the same stage of `fitting` (None when there is no fitting estimate)."""
    over = [s for s in failing.stages if s.total_bytes > budget] or list(failing.stages)
    stage = max(over, key=lambda s: (s.total_bytes, -s.stage))
    top = max(stage.terms, key=lambda t: (t.bytes, t.name))
    limit = Limit(stage=stage.stage, phase=stage.phase, total_bytes=stage.total_bytes,
                  term=top.name, term_bytes=top.bytes)
    if fitting is not None:
        before_stage = next((s for s in fitting.stages if s.stage == stage.stage), None)
        if before_stage is not None:
            before = {}
            for t in before_stage.terms:
                before[t.name] = before.get(t.name, 0) + t.bytes
            now = {}
            for t in stage.terms:
                now[t.name] = now.get(t.name, 0) + t.bytes
            growth = {name: now[name] - before.get(name, 0) for name in now}
            name = max(growth, key=lambda n: (growth[n], n))
            if growth[name] > 0:
                limit.grew, limit.grew_bytes = name, growth[name]
    return limit


# ---------------------------------------------------------------------------------------------
# The three questions


def fit_micro_batch(runs: _Runs) -> Answer:
    sc = runs.base
    tr = sc.training
    dp = runs.context.topology.dp
    high, capped = MAX_MICRO_BATCH, None
    if tr.global_batch and not tr.grad_accum:
        high = max(1, tr.global_batch // dp)
        capped = f"global_batch / dp = {tr.global_batch} / {dp}"
    best, bad = largest(lambda v: runs.fits(micro_batch=v), 1, high)
    answer = _answer("micro_batch", runs, best, bad, lambda v: {"micro_batch": v})
    if best is not None and bad is None:
        answer.capped = capped or f"search ceiling {high}"
    if best is not None and tr.global_batch and not tr.grad_accum:
        per_rank = tr.global_batch // dp
        valid = max(d for d in range(1, best + 1) if per_rank % d == 0)
        if valid != best and tr.global_batch % dp == 0:
            answer.notes.append(f"global_batch {tr.global_batch} over dp {dp} is {per_rank} "
                                f"samples per rank: the largest micro_batch that divides it "
                                f"is {valid}")
    return answer


def cp_options(scenario, context=None) -> list:
    """The run's cp, then every larger power of two the world size allows (tp·pp·cp divides
    it) in a framework with context parallelism (the planner's framework table). `context`:
    the scenario's resolved context, when the caller has it."""
    par = scenario.parallelism
    options = [par.cp]
    frame = FRAMEWORKS.get(scenario.training.framework, {})
    world = (context or context_of(scenario)).topology.world
    if not frame.get("cp") or par.world_size is None or world is None:
        return options
    cp = max(1, par.cp) * 2
    while par.tp * par.pp * cp <= world:
        if world % (par.tp * par.pp * cp) == 0:
            options.append(cp)
        cp *= 2
    return options


def _seq_granule(cp: int) -> int:
    # Megatron's causal load balancing splits the sequence into 2·cp chunks (seq % (2·cp) == 0).
    return SEQ_GRANULE if cp <= 1 else math.lcm(SEQ_GRANULE, 2 * cp)


def fit_seq_len(runs: _Runs) -> Answer:
    sc = runs.base
    par = sc.parallelism
    rows = []
    for cp in cp_options(sc, runs.context):
        granule = _seq_granule(cp)
        keys = {"cp": cp}
        if par.dp is not None and cp != par.cp:
            keys["dp"] = None  # dp follows from world_size / (tp·pp·cp)
        best, bad = largest(lambda k: runs.fits(seq_len=k * granule, **keys), 1,
                            MAX_SEQ_LEN // granule)
        row = _answer("seq_len", runs, best and best * granule, bad and bad * granule,
                      lambda v: {"seq_len": v, "cp": cp}, extra=keys)
        if best is not None and bad is None:
            row.capped = f"search ceiling {MAX_SEQ_LEN} tokens"
        row.notes.append(f"seq_len searched in multiples of {granule}")
        rows.append(row)
        if best is None and cp != par.cp:
            break
    main = rows[0]
    answer = dataclasses.replace(main, rows=rows if len(rows) > 1 else [],
                                 notes=list(main.notes))
    longest = max((r for r in rows if r.value), key=lambda r: r.value, default=None)
    if longest is not None and longest is not main:
        answer.notes.append(f"with context parallelism: seq_len {longest.value:,} at "
                            f"cp={longest.settings['cp']}")
    positions = sc.model.config.get("max_position_embeddings") if sc.model else None
    if isinstance(positions, int) and longest is not None and longest.value > positions:
        answer.notes.append(f"beyond the model's max_position_embeddings {positions:,} "
                            "(needs RoPE scaling or long-context training)")
    return answer


def _world_valid(sc, dp: int) -> bool:
    """A data-parallel size the frameworks accept: expert parallelism divides dp·cp·tp, and a
    global batch splits into whole micro-batches per rank."""
    par, tr = sc.parallelism, sc.training
    etp = par.etp or par.tp
    if (dp * par.cp * par.tp) % (etp * par.ep):
        return False
    if tr.global_batch and not tr.grad_accum and tr.global_batch % (tr.micro_batch * dp):
        return False
    return True


def fit_world_size(runs: _Runs) -> Answer:
    sc = runs.base
    par = sc.parallelism
    model_parallel = par.tp * par.pp * par.cp
    free_dp = {"dp": None}  # dp follows from world_size / (tp·pp·cp)

    def fits(dp: int) -> bool:
        return runs.fits(world_size=model_parallel * dp, **free_dp)

    def settings_of(world: int) -> dict:
        return {"world_size": world, "tp": par.tp, "pp": par.pp, "cp": par.cp, "ep": par.ep}

    boundary, below = smallest(fits, 1, MAX_DP)
    layout = (f"layout kept: tp={par.tp}, pp={par.pp}, cp={par.cp}, ep={par.ep}; "
              "world_size = tp·pp·cp·dp")
    if boundary is None:
        answer = _answer("world_size", runs, None, model_parallel * MAX_DP, settings_of,
                         extra=free_dp)
        sharded = par.zero > 0 or par.fsdp != "none"
        answer.notes.append("more data parallelism does not help: " + (
            "the sharded states already stop shrinking" if sharded else
            "nothing is sharded over data parallelism (zero = 0, no FSDP)"))
        answer.notes.append(layout)
        return answer
    # Memory is monotone in dp; validity (expert layout, whole micro-batches) is not: the answer
    # is the smallest valid dp at or above the memory boundary.
    dp = boundary
    while dp <= MAX_DP and not _world_valid(sc, dp):
        dp += 1
    if dp > MAX_DP:
        answer = Answer("world_size", None, {}, estimate=runs.estimate(
            world_size=model_parallel * boundary, **free_dp))
        answer.notes.append(f"memory allows dp >= {boundary}, but no dp up to {MAX_DP:,} "
                            "divides the global batch and the expert layout")
        answer.notes.append(layout)
        return answer
    answer = _answer("world_size", runs, model_parallel * dp,
                     below and model_parallel * below, settings_of, extra=free_dp)
    if dp != boundary:
        answer.notes.append(f"memory allows dp >= {boundary} (world_size "
                            f"{model_parallel * boundary:,}); the smallest dp the global batch "
                            f"and the expert layout accept is {dp}")
    answer.notes.append(layout)
    return answer


def smallest_gpus(scenario, headroom: float, gpus_per_node: Optional[int] = None,
                  **plan_options) -> Answer:
    """The fewest GPUs on which the planner finds a layout with the headroom. GPU counts tried:
    the divisors of a node, then whole nodes; the planner's best layout at each."""
    gpn = gpus_per_node or scenario.hardware.gpus_per_node
    small = [d for d in range(1, gpn + 1) if gpn % d == 0]
    limit = MAX_DP
    cache: dict = {}

    def count(index: int) -> int:
        return small[index] if index < len(small) else gpn * (index - len(small) + 2)

    def best(index: int):
        if index not in cache:
            result = search_plans(scenario, count(index), gpn, 1, headroom=headroom,
                                  **plan_options)
            plan = result.plans[0] if result.plans and result.plans[0].has_headroom else None
            cache[index] = plan
        return cache[index]

    top = len(small) + limit // gpn
    found, below = smallest(lambda i: best(i) is not None, 0, top)
    if found is None:
        return Answer("gpus", None, {}, notes=[f"no layout fits on up to {count(top):,} GPUs"])
    plan = best(found)
    settings = {"world_size": count(found)}
    settings.update((k, v) for k, v in plan.settings.items() if k != "dp")
    answer = Answer("gpus", count(found), settings, estimate=plan.estimate,
                    failing=count(below) if below is not None else None)
    answer.notes.append(f"planner layout {plan.label()}; GPU counts tried: divisors of a "
                        f"{gpn}-GPU node, then whole nodes")
    if below is not None:
        answer.notes.append(f"on {count(below):,} GPUs no layout leaves the headroom")
    return answer


def _answer(question: str, runs: _Runs, value, failing, settings_of, extra=None) -> Answer:
    """The Answer for `question` (also the scenario key searched) from the search's result."""
    extra = dict(extra or {})
    key = question

    def est(v):
        return runs.estimate(**{key: v}, **extra)

    if value is None:
        first = est(failing)
        note = (f"no {key} up to {failing:,} fits" if question == "world_size" else
                f"even {key}={failing:,} does not fit")
        return Answer(question, None, {}, estimate=first, failing=failing,
                      failing_settings=settings_of(failing),
                      limit=limit_of(first, None, runs.budget), notes=[note])
    fitting = est(value)
    answer = Answer(question, value, settings_of(value), estimate=fitting)
    if failing is not None:
        failed = est(failing)
        answer.failing, answer.failing_settings = failing, settings_of(failing)
        answer.limit = limit_of(failed, fitting, runs.budget)
    return answer


def configured_headroom(config) -> float:
    """The margin of the rule low-memory-headroom as `[tool.memlint.options]` sets it (by name
    or code), else its default."""
    options = getattr(config, "options", None) or {}
    for key in ("low-memory-headroom", "ML102"):
        margin = (options.get(key) or {}).get("margin")
        if margin is not None:
            return float(margin)
    return DEFAULT_HEADROOM


def fit(scenario, headroom: float = DEFAULT_HEADROOM, questions: tuple = QUESTIONS,
        planner: bool = False) -> FitResult:
    """Answer the fit questions for `scenario` (a built Scenario with a model)."""
    if scenario.model is None:
        raise FitError("no model: give --model PATH|PRESET or config files that name one")
    if not 0 <= headroom < 1:
        raise FitError("headroom must be in [0, 1)")
    runs = _Runs(scenario, headroom)
    runs.estimate()  # the run itself must be estimable
    answers = []
    for question in questions:
        if question == "micro_batch":
            answers.append(fit_micro_batch(runs))
        elif question == "seq_len":
            answers.append(fit_seq_len(runs))
        elif question == "world_size":
            answers.append(fit_world_size(runs))
    if planner:
        answers.append(smallest_gpus(scenario, headroom))
    return FitResult(scenario=scenario, headroom=headroom, budget_bytes=runs.budget,
                     answers=answers, context=runs.context)


# ---------------------------------------------------------------------------------------------
# Output


_TITLES = {"micro_batch": "largest micro_batch", "seq_len": "largest seq_len",
           "world_size": "smallest world_size (layout kept)",
           "gpus": "smallest GPU count (planner's layout)"}


def _stages_line(est, units: str, budget: float) -> str:
    parts = []
    for s in est.stages:
        label = f"stage {s.stage} " if len(est.stages) > 1 else ""
        parts.append(f"{label}{fmt(s.total_bytes, units)} ({s.phase})")
    return "peak per stage: " + ", ".join(parts) + f" of {fmt(int(budget), units)} allowed"


def render_text(result: FitResult, units: str = "GiB", stream=None) -> None:
    out = stream or sys.stdout
    sc = result.scenario
    cap = sc.hardware.gpu_memory
    out.write(f"Fit for {sc.model.name or 'the model'} on {sc.hardware.gpu} "
              f"({fmt(cap, units)}), headroom {result.headroom:.0%}: a value fits when every "
              f"stage peaks at <= {fmt(int(result.budget_bytes), units)}\n")
    topo = (result.context or context_of(sc)).topology
    par = sc.parallelism
    given = "" if par.world_size is not None or par.dp is not None else \
        " (world_size not given: dp = 1)"
    world = topo.world or topo.tp * topo.pp * topo.cp * topo.dp
    out.write(f"run: world_size {world} = tp {topo.tp} x pp {topo.pp} x cp {topo.cp} x "
              f"dp {topo.dp}{given}, micro_batch {sc.training.micro_batch}, seq_len "
              f"{sc.training.seq_len:,}\n")
    for a in result.answers:
        out.write("\n")
        title = _TITLES[a.question]
        stages = len(a.estimate.stages) if a.estimate is not None else 1
        if a.value is None:
            out.write(f"{title}: none fits\n")
        else:
            shown = f"{a.value:,}"
            if a.question == "seq_len":
                shown += f" at cp={a.settings['cp']}"
            out.write(f"{title}: {shown}   (--set " + " --set ".join(a.assignments()) + ")\n")
        if a.estimate is not None:
            out.write("  " + _stages_line(a.estimate, units, result.budget_bytes) + "\n")
        if a.limit is not None:
            lead = "limited by" if a.value is not None else "does not fit:"
            at = f" at {a.question}={a.failing:,}" if a.failing is not None else ""
            out.write(f"  {lead} {a.limit.describe(units, stages)}{at}\n")
        if a.capped:
            out.write(f"  stopped at {a.capped}, not by memory\n")
        for row in a.rows[1:]:
            if row.value is None:
                out.write(f"  cp={row.failing_settings.get('cp')}: none fits\n")
            else:
                out.write(f"  cp={row.settings['cp']}: seq_len {row.value:,}"
                          + (f", limited by {row.limit.describe(units, stages)}"
                             if row.limit else "") + "\n")
        for note in a.notes:
            out.write(f"  note: {note}\n")


def render_json(result: FitResult) -> str:
    return json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n"


def exit_code(result: FitResult) -> int:
    """0 when every question has an answer that fits, 1 when one does not."""
    return 0 if all(a.fits for a in result.answers) else 1
