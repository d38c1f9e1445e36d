"""The resolved context of one run: `Resolved`, the facts every later stage reads, each computed
at most once.

From a Scenario, `resolve_context(scenario)` gives the parallel layout (`topology`,
memory/topology.py), the architecture the run builds (`architecture`: the model's config with the
vocabulary padded for the run's tp, memlint/facts/vocab.py) and its exact parameter counts
(`counts`, memory/params.py), the framework's dtypes (`dtypes`, memory/states.py), its conventions
(`conventions`, memory/conventions.py) and the pipeline schedule (`schedule`: layers per virtual
stage, the layers of each rank, micro-batches per step; memory/stages.py). The API builds one per
run; the memory model builds from it (memory/model.py), the Estimate carries it (`Estimate.context`) and the engine hands the same
object to every rule (`ctx.resolved`), so nothing is resolved twice.

Each part is computed on first use (a one-file check that no rule asks about never loads the
parameter counter). Nothing here raises: a part that cannot be resolved (no model, a config the
counter cannot read, more pipeline stages than layers) is None, its reason is in `problems`, and
`require(part)` re-raises the original error for the memory model, which must fail loudly.
"""
from __future__ import annotations

from memlint.assumptions import assumed
from memlint.memory.topology import Topology, resolve
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Optional

#: Every pipeline stage is an estimate of its own (its terms, a row of the report), so the work
#: grows with pp. The deepest published pipelines are far below this: 64 stages for the 1T-parameter
#: GPT of Narayanan et al. 2021 (Table 1), 16 for Llama 3 405B (Dubey et al. 2024, Table 4). A
#: deeper one is "no estimate" (a warning-level note), never an error.
MAX_STAGES = 512


@record(frozen=True)
class Schedule:
    """How the decoder layers are spread over the pipeline, and the micro-batches per step."""

    chunks: Optional[list]   # layers of each virtual stage when the split is uneven, else None
    plans: list              # memory/stages.py StagePlan of each pipeline rank
    microbatches: int        # per optimizer step of each data-parallel rank (0: unknown)


class Resolved:
    """The resolved facts of one scenario (see the module docstring). Build with
    `resolve_context`; read `topology`, `architecture`, `counts`, `dtypes`, `conventions`,
    `schedule`."""

    def __init__(self, scenario, same_model: Optional["Resolved"] = None):
        self.scenario = scenario
        self._parts: dict = {}   # part name -> (value, error)
        self._same_model = same_model   # a context whose scenario has this very model

    def __repr__(self) -> str:
        return f"Resolved(parts={sorted(self._parts)})"

    def _part(self, name: str, compute) -> tuple:
        found = self._parts.get(name)
        if found is None:
            try:
                found = (compute(), None)
            except Exception as exc:  # noqa: BLE001 - kept for require(); rules see None
                found = (None, exc)
            self._parts[name] = found
        return found

    def require(self, name: str) -> Any:
        """The part, or its error raised (the memory model cannot go on without it)."""
        value, error = self._part(name, getattr(self, "_" + name))
        if error is not None:
            raise error
        return value

    def error(self, name: str) -> Optional[Exception]:
        """Why a part is None (None when it resolved, or when it is None by nature)."""
        return self._part(name, getattr(self, "_" + name))[1]

    # -- the parts ------------------------------------------------------------------------------

    @property
    def topology(self) -> Topology:
        """Every group size a per-GPU formula divides by (never None: `resolve` never raises;
        a world size nobody gave leaves `topology.world` None)."""
        return self._part("topology", self._topology)[0]

    @property
    def architecture(self):
        """The Architecture the run builds (the model's config, memory/params.py, with the
        vocabulary padded for the run's tp by `pad_vocabulary`), None without a model or when
        its config cannot be read (the error: `error("architecture")`)."""
        return self._part("architecture", self._architecture)[0]

    @property
    def counts(self):
        """Exact parameter counts per component and layer (ParamCounts), or None."""
        return self._part("counts", self._counts)[0]

    @property
    def dtypes(self):
        """Bytes per parameter, gradient and state of the framework and precision (Dtypes)."""
        return self._part("dtypes", self._dtypes)[0]

    @property
    def conventions(self):
        """The framework's conventions for this run (memory/conventions.py Conventions)."""
        return self._part("conventions", self._conventions)[0]

    @property
    def schedule(self) -> Optional[Schedule]:
        """The pipeline schedule, or None without an architecture or with a pipeline memlint
        does not estimate (more stages than layers, or than MAX_STAGES)."""
        return self._part("schedule", self._schedule)[0]

    @property
    def problems(self) -> tuple:
        """(message, keys) of the layout (Topology.problems), then of an unreadable model."""
        out = list(self.topology.problems)
        error = self.error("architecture")
        if error is not None:
            out.append((str(error), (_model_key(error),)))
        return tuple(out)

    # -- how each part is computed (once) -------------------------------------------------------

    def _topology(self) -> Topology:
        return resolve(self.scenario)

    def _config_architecture(self):
        # start-up: the parameter counter loads only when something asks for the architecture
        from memlint.memory.params import architecture

        if self._same_model is not None:
            return self._same_model.require("config_architecture")
        model = self.scenario.model
        return None if model is None else architecture(model.config)

    def _architecture(self):
        # start-up: the parameter counter loads only when something asks for the architecture
        from memlint.memory.params import pad_vocabulary

        same = self._same_model
        if same is not None and same.topology.tp == self.topology.tp:
            return same.require("architecture")
        arch = self.require("config_architecture")
        if arch is None:
            return None
        # the vocabulary as the framework builds it for this run's tp (memlint/facts/vocab.py)
        return pad_vocabulary(arch, self.scenario.model.vocab_pad_multiple, self.topology.tp)

    def _counts(self):
        # start-up: the parameter counter loads only when something asks for the counts
        from memlint.memory.params import count_params

        arch = self.require("architecture")
        same = self._same_model
        if same is not None and arch is not None and arch is same.architecture:
            return same.require("counts")
        return None if arch is None else count_params(arch)

    def _dtypes(self):
        # start-up: the dtype tables load only when something asks for them
        from memlint.memory.states import dtypes

        return dtypes(self.scenario.training,
                      assumed(self.scenario.assumptions, "states.model"))

    def _conventions(self):
        # start-up: the conventions load only when something asks for them
        from memlint.memory.conventions import build

        return build(self.scenario, self)

    def _schedule(self) -> Optional[Schedule]:
        # start-up: the pipeline split loads only when something asks for it
        from memlint.memory.stages import microbatches, stage_plans, virtual_chunks

        arch = self.require("architecture")
        par = self.scenario.parallelism
        if arch is None or par.pp > MAX_STAGES:
            return None
        conv = self.require("conventions")
        # the embedding and the loss may be units of the split (stages without a decoder layer)
        if par.pp > arch.layers + int(conv.embedding_in_split) + int(conv.loss_in_split):
            return None
        even = assumed(self.scenario.assumptions, "states.model") == "seed"
        chunks = virtual_chunks(conv, par, arch.layers, even)
        return Schedule(chunks, stage_plans(arch.layers, par, chunks),
                        microbatches(self.scenario.training, self.topology.dp))

    def varied(self, scenario) -> "Resolved":
        """The context of a variant of this scenario (a rule or `fit` trying another layout):
        the model's config is not read again when the variant has the same model, and its
        counts are reused when the run's architecture is the same (same vocabulary padding)."""
        return Resolved(scenario, self if scenario.model is self.scenario.model else None)


def _model_key(error: Exception) -> str:
    key = getattr(error, "key", None) or "model"
    return key if key.startswith("model") else f"model.{key}"


def resolve_context(scenario) -> Resolved:
    """The one resolved context of `scenario` (its parts are computed on first use)."""
    return Resolved(scenario)


def context_of(scenario, estimate=None) -> Resolved:
    """The context `estimate` carries (an Estimate of `scenario`), else a new one."""
    found = getattr(estimate, "context", None)
    return found if found is not None else Resolved(scenario)


def conventions_of(scenario, estimate=None):
    """The Conventions record (memory/conventions.py) of `scenario`, from the context `estimate`
    carries, else a new one."""
    return context_of(scenario, estimate).conventions
