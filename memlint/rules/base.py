"""The rule contract (STYLE.md, "memlint shape").

A rule is a small class: `code` (ML + 3 digits, the hundreds digit is the family), `name`
(kebab-case), default `severity`, `options` (name -> (type, default)), and a docstring with the four
sections *What it checks* / *Why it matters* / *How to fix* / *Example*. `check(ctx)` yields
`Finding`s: a message plus the scenario keys (or adapter `extra` keys) at fault. The engine turns
those keys into file/line/column through the Scenario's provenance, stamps code, name and the
configured severity, and applies select/ignore/suppressions.

Rules do no parsing, I/O, formatting or memory maths: they read the Scenario and Estimate terms,
and the run's resolved context (`ctx.resolved`: topology, architecture, parameter counts, dtypes,
pipeline schedule; memory/context.py), computed once per run and shared by every rule.
"""
from __future__ import annotations

from memlint.diagnostics import Severity
from memlint.memory.context import Resolved, context_of
from memlint.records import field, record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Any, Iterable, Mapping, Optional


@record(frozen=True)
class Finding:
    message: str
    keys: tuple = ()                  # scenario keys / extra keys whose provenance to point at
    severity: Optional[Severity] = None  # overrides the rule's default for this finding
    data: dict = field(default_factory=dict)


@record(frozen=True)
class Context:
    """What a rule sees: the merged scenario, its estimate (None without a model), options, and
    the run's resolved context (the estimate's, else one made here when none is given)."""

    scenario: Any                 # memlint.ir.Scenario
    estimate: Any = None          # memlint.memory.terms.Estimate or None
    options: Mapping = field(default_factory=dict)
    formats: tuple = ()           # formats of the sources (deepspeed, megatron, ...)
    resolved: Optional[Resolved] = None   # memlint.memory.context.Resolved of the scenario

    def __post_init__(self):
        if self.resolved is None and self.scenario is not None:
            object.__setattr__(self, "resolved", context_of(self.scenario, self.estimate))

    def extra(self, key: str, default: Any = None) -> Any:
        setting = self.scenario.extra.get(key)
        return default if setting is None else setting.value

    def has_extra(self, key: str) -> bool:
        return key in self.scenario.extra


class Rule:
    code: str = ""
    name: str = ""
    severity: Severity = Severity.WARNING
    options: dict = {}
    # Formats whose sources make this rule relevant; empty means every scenario.
    formats: tuple = ()
    # What must hold of a run for `check` to find anything (all of them; REQUIRES names each):
    # the engine calls `check` only where they hold, and a one-file check imports a built-in
    # rule's module only then (memlint/rules/_index.py lists them without importing it).
    requires: tuple = ()
    # Preview rules are off unless selected explicitly.
    preview: bool = False

    def check(self, ctx: Context) -> Iterable[Finding]:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def family(self) -> str:
        return self.code[:3]

    @property
    def doc(self) -> str:
        # start-up: inspect loads only when rule documentation is built
        import inspect

        return inspect.cleandoc(self.__doc__ or "")

    def sections(self) -> dict:
        """The docstring split into its sections (title -> text)."""
        out: dict = {}
        current = "summary"
        lines: list = []
        for line in self.doc.splitlines():
            stripped = line.strip()
            if stripped.endswith(":") and stripped[:-1] in DOC_SECTIONS:
                out[current] = "\n".join(lines).strip()
                current, lines = stripped[:-1], []
            else:
                lines.append(line)
        out[current] = "\n".join(lines).strip()
        return out


DOC_SECTIONS = ("What it checks", "Why it matters", "How to fix", "Example")

#: The conditions a rule's `requires` may name, each of the run's (Scenario, Estimate or None);
#: `"extra:KEY"` besides: KEY is among the scenario's adapter `extra` settings.
REQUIRES = {
    "estimate": lambda scenario, estimate: estimate is not None,
    "model": lambda scenario, estimate: scenario.model is not None,
    "rl": lambda scenario, estimate: getattr(estimate, "rl", None) is not None,
    "tp>1": lambda scenario, estimate: scenario.parallelism.tp > 1,
}
EXTRA = "extra:"


def is_requirement(name) -> bool:
    return isinstance(name, str) and (name in REQUIRES or (name.startswith(EXTRA)
                                                           and len(name) > len(EXTRA)))


def meets(requires: tuple, scenario, estimate) -> bool:
    """Whether every condition of `requires` holds of the run. A condition that cannot be told
    (it raises) counts as holding: the rule then runs, and fails or finds as it would."""
    for name in requires:
        try:
            if name.startswith(EXTRA):
                held = name[len(EXTRA):] in scenario.extra
            else:
                held = REQUIRES[name](scenario, estimate)
        except Exception:  # noqa: BLE001 - the rule itself decides what such a run gives
            continue
        if not held:
            return False
    return True
