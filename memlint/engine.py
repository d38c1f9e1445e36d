"""The engine: runs the registered rules over (Scenario, Estimate) and returns finished Diagnostics.

It owns everything between a rule's `Finding` and a reporter's input (STYLE.md 4):
- which rules run: select / ignore by code (`ML101`), name (`exceeds-gpu-memory`) or family prefix
  (`ML1`, `ML10`); the most specific selector wins, ignore wins a tie; preview rules run only when
  selected by code or name;
- where a finding points: its keys resolved through `Scenario.where(key)` or the Provenance of
  `Scenario.extra[key]`, so rules never see lines;
- what it is called and how severe: code and name from the rule, severity from `[tool.memlint]
  severity`, else the finding, else the rule's default;
- what is dropped: per-file ignores (glob -> selectors) and inline `# memlint: disable=...`;
- failures: a rule that raises becomes an `internal-error` (ML009) diagnostic, and the run exits 2.

The same filters apply to the diagnostics found before any rule ran (parse, schema, conflicts),
since their reserved codes are registered too.
"""
from __future__ import annotations

import fnmatch
import os

from memlint import lazy_re
from memlint.diagnostics import Diagnostic, Severity, make_internal
from memlint.ir import Provenance
from memlint.keys import suggest
from memlint.memory.context import Resolved, context_of
from memlint.records import field, record, replace
from memlint.rules import Registry, configure
from memlint.rules import registry as default_registry
from memlint.rules.base import Context, Finding, Rule, meets
from memlint.suppressions import record_use, unused

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Iterable, Optional

PREFIX_RE = lazy_re.compile(r"^ML\d{0,2}$")


class SettingsError(ValueError):
    """memlint's own configuration (command line or [tool.memlint]) is unusable: exit 2."""


@record
class LintConfig:
    select: tuple = ()
    extend_select: tuple = ()
    ignore: tuple = ()
    fail_on: Severity = Severity.ERROR
    per_file_ignores: dict = field(default_factory=dict)   # glob -> tuple of selectors
    severities: dict = field(default_factory=dict)         # selector -> Severity
    options: dict = field(default_factory=dict)            # code or name -> {option: value}
    root: Optional[str] = None     # directory of the pyproject.toml it came from
    source: Optional[str] = None   # that pyproject.toml
    files: tuple = ()              # what `memlint check` lints without paths
    exclude: tuple = ()            # globs a directory walk skips (relative to root)
    runs: tuple = ()               # ({"name", "files", "set"}) groups of files forming one run
    allow_outside_root: bool = False
    assumptions: dict = field(default_factory=dict)  # [tool.memlint.assumptions]: name -> value
    models: dict = field(default_factory=dict)  # [tool.memlint.models]: lower-cased id -> entry


# ---------------------------------------------------------------------------------------------
# Selection


def specificity(selector: str, rule: Rule) -> int:
    """How precisely `selector` names `rule`: 0 no match, 1 ALL, 2-4 a prefix, 5 code/name."""
    text = selector.strip()
    upper = text.upper()
    if upper == "ALL":
        return 1
    if upper == rule.code or text.lower() == rule.name:
        return 5
    if PREFIX_RE.match(upper) and rule.code.startswith(upper):
        return len(upper) - 1
    return 0


def check_selectors(selectors: Iterable[str], reg: Registry, where: str) -> None:
    """Raise SettingsError for a selector that names no rule (with a did-you-mean)."""
    for selector in selectors:
        text = selector.strip()
        if not text:
            continue
        if text.upper() == "ALL" or PREFIX_RE.match(text.upper()) or reg.entry(text) is not None:
            continue
        hint = suggest(text.lower(), reg.names()) or suggest(text.upper(), reg.codes())
        tail = f"; did you mean {hint!r}?" if hint else ""
        raise SettingsError(f"{where}: no rule is called {text!r}{tail}")


_ENABLED: dict = {}


def _selectors(config: LintConfig) -> tuple:
    return (tuple(config.select), tuple(config.extend_select), tuple(config.ignore))


def is_enabled(rule: Rule, config: LintConfig, selectors: Optional[tuple] = None) -> bool:
    """Whether the selectors enable `rule` (a pure function of the rule's code, name and preview
    flag and the selectors, cached: a run over many files asks it for every rule per file).
    `selectors`: _selectors(config), made once by a caller asking for every rule."""
    key = (rule.code, rule.name, bool(getattr(rule, "preview", False)),
           selectors if selectors is not None else _selectors(config))
    found = _ENABLED.get(key)
    if found is None:
        if len(_ENABLED) > 4096:
            _ENABLED.clear()
        found = _ENABLED[key] = _is_enabled(rule, config)
    return found


def _is_enabled(rule: Rule, config: LintConfig) -> bool:
    selectors = tuple(config.select) + tuple(config.extend_select)
    chosen = max((specificity(s, rule) for s in selectors), default=0)
    if not config.select:
        chosen = max(chosen, 1)  # default: every stable rule
    if getattr(rule, "preview", False) and chosen < 5:
        return False
    dropped = max((specificity(s, rule) for s in config.ignore), default=0)
    return chosen > 0 and chosen > dropped


def _configured_severity(rule: Rule, config: LintConfig) -> Optional[Severity]:
    best, severity = 0, None
    for selector, value in config.severities.items():
        score = specificity(selector, rule)
        if score > best:
            best, severity = score, value
    return severity


_DEFAULTS: dict = {}   # id(rule) -> (rule, its options when none are given)


def _default_options(rule: Rule) -> dict:
    """The rule's options when none are given, made once per rule (not to be changed)."""
    found = _DEFAULTS.get(id(rule))
    if found is None or found[0] is not rule:
        found = _DEFAULTS[id(rule)] = (rule, _configured(rule, {}))
    return found[1]


def _options(rule: Rule, config: LintConfig) -> dict:
    if not config.options:   # the usual case: the rule's defaults (a copy per run; bulk speed)
        return dict(_default_options(rule))
    given: dict = {}
    for key in (rule.code, rule.name):
        given.update(config.options.get(key, {}) or {})
    return _configured(rule, given)


def _configured(rule: Rule, given: dict) -> dict:
    try:
        return configure(rule, given)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def validate_config(config: LintConfig, reg: Registry) -> None:
    """Check selectors and rule options once, before anything runs."""
    where = config.source or "command line"
    check_selectors(config.select, reg, where)
    check_selectors(config.extend_select, reg, where)
    check_selectors(config.ignore, reg, where)
    check_selectors(config.severities, reg, where)
    for key in config.options:
        rule = reg.get(key)
        if rule is None:
            check_selectors([key], reg, where)
            continue
        _options(rule, config)


# ---------------------------------------------------------------------------------------------
# Positions


def locate(scenario, keys: Iterable[str]) -> tuple[Optional[Provenance], Optional[str]]:
    """The Provenance of the first key with a line in a file, else of the first key with a
    file (a default the file implies), else of the first with any."""
    in_file = fallback = None
    for key in keys:
        prov = scenario.where(key) if scenario is not None else None
        if prov is None and scenario is not None and key in scenario.extra:
            prov = scenario.extra[key].prov
        if prov is None:
            continue
        if prov.file is not None and prov.line is not None:
            return prov, key
        if prov.file is not None and in_file is None:
            in_file = (prov, key)
        if fallback is None:
            fallback = (prov, key)
    return in_file or fallback or (None, None)


def anchor_of(scenario) -> Optional[str]:
    """The file a finding with no located key is reported against: the last file source."""
    for source in reversed(tuple(getattr(scenario, "sources", ()) or ())):
        if source and not source.startswith("<") and not source.startswith("preset:"):
            return source
    return None


def as_anchor(anchor) -> Optional[Provenance]:
    """An anchor given as a path (line 1) or a Provenance, as a Provenance with a line."""
    if anchor is None:
        return None
    if isinstance(anchor, str):
        return Provenance(anchor, 1, 1, None)
    if anchor.file is None:
        return None
    if anchor.line is None:
        return Provenance(anchor.file, 1, 1, anchor.key)
    return anchor


def anchored(prov: Optional[Provenance], anchor: Optional[Provenance]) -> Optional[Provenance]:
    """Every diagnostic points into a file: a value set on the command line (or nowhere) is
    reported at the run's anchor; a file-level one without a line at that file's first line
    (or the anchor's line, when the anchor is in the same file)."""
    if prov is None or prov.file is None:
        if anchor is None:
            return prov
        return Provenance(anchor.file, anchor.line, anchor.column,
                          prov.key if prov is not None else anchor.key)
    if prov.line is None:
        if anchor is not None and anchor.file == prov.file:
            return Provenance(prov.file, anchor.line, anchor.column, prov.key)
        return Provenance(prov.file, 1, 1, prov.key)
    return prov


def locate_diagnostic(diagnostic: Diagnostic, anchor) -> Diagnostic:
    """`anchored` for a finished diagnostic (one made before the rules ran)."""
    anchor = as_anchor(anchor)
    if diagnostic.path is not None and diagnostic.line is not None:
        return diagnostic
    if anchor is None and diagnostic.path is None:
        return diagnostic
    prov = anchored(Provenance(diagnostic.path, diagnostic.line, diagnostic.column,
                               diagnostic.key), anchor)
    return replace(diagnostic, path=prov.file, line=prov.line, column=prov.column)


def to_diagnostic(rule: Rule, finding: Finding, scenario, config: LintConfig,
                  anchor) -> Diagnostic:
    prov, key = locate(scenario, finding.keys)
    severity = _configured_severity(rule, config) or finding.severity or rule.severity
    prov = anchored(prov, as_anchor(anchor)) or Provenance(None, None, None, None)
    return Diagnostic(rule.code, rule.name, severity, finding.message, prov.file, prov.line,
                      prov.column, key or (finding.keys[0] if finding.keys else None),
                      data=dict(finding.data))


# ---------------------------------------------------------------------------------------------
# Filters


def _relative(path: str, root: Optional[str]) -> str:
    try:
        base = root or os.getcwd()
        rel = os.path.relpath(os.path.abspath(path), base)
    except ValueError:
        return path
    return rel.replace(os.sep, "/")


def per_file_ignored(diagnostic: Diagnostic, rule: Optional[Rule], config: LintConfig) -> bool:
    if not diagnostic.path or not config.per_file_ignores:
        return False
    candidates = {_relative(diagnostic.path, config.root), diagnostic.path.replace(os.sep, "/"),
                  os.path.basename(diagnostic.path)}
    for pattern, selectors in config.per_file_ignores.items():
        if not any(fnmatch.fnmatch(c, pattern) for c in candidates):
            continue
        for selector in selectors:
            if rule is not None and specificity(selector, rule):
                return True
            if rule is None and selector.strip().upper() in (diagnostic.code, "ALL"):
                return True
    return False


def suppressed(diagnostic: Diagnostic, suppressions: dict, used=None) -> bool:
    """Inline `# memlint: disable=CODE,name` on the diagnostic's line (or disable-file); the
    directives that turn it off are added to `used` (suppressions.record_use)."""
    if not diagnostic.path or not suppressions:
        return False
    key = diagnostic.path
    table = suppressions.get(key)
    if table is None:
        key = os.path.abspath(diagnostic.path)
        table = suppressions.get(key)
    if not table:
        return False
    names = set(table.get(0, ()))
    if diagnostic.line is not None:
        names |= set(table.get(diagnostic.line, ()))
    wanted = {"all", diagnostic.code.lower(), diagnostic.rule.lower()}
    if names & wanted and used is not None:
        record_use(key, table, wanted, diagnostic.line, used)
    return bool(names & wanted)


# ---------------------------------------------------------------------------------------------
# Running


def lint(scenario, estimate, config: Optional[LintConfig] = None,
         reg: Optional[Registry] = None, pre: Iterable[Diagnostic] = (),
         suppressions: Optional[dict] = None, formats: tuple = (),
         anchor=None, resolved: Optional[Resolved] = None, used: Optional[set] = None) -> list:
    """Run every enabled rule; filter and stamp their findings and the `pre` diagnostics.

    `anchor` (a path or a Provenance) is where the run is defined: a finding whose values came
    from the command line or from no file is reported there, so every diagnostic has a location.
    `resolved`: the run's resolved context (memory/context.py); without one, the estimate's, or
    one made here. Every rule gets the same one, so each part is computed once per run.
    `used`: collects the inline suppressions that turned a finding off (several runs of one
    check share it, so that suppressions.drop_used can keep an unused one of every run only).
    """
    config = config or LintConfig()
    reg = reg or default_registry()
    suppressions = suppressions or {}
    if anchor is None and scenario is not None:
        anchor = anchor_of(scenario)
    anchor = as_anchor(anchor)
    out: list = []
    used = set() if used is None else used
    # the rules an unused suppression is reported for (suppressions.py): those found before the
    # rules run, whose findings are known even where they are turned off
    judged = set(_rule_plan(reg, config, _selectors(config))[0])
    pre = [locate_diagnostic(diagnostic, anchor) for diagnostic in pre]

    for diagnostic in pre:
        rule = reg.entry(diagnostic.code)   # (selection reads its code and name: no import)
        if rule is not None:
            if not is_enabled(rule, config):
                suppressed(diagnostic, suppressions, used)   # a directive for it is not unused
                continue
            severity = _configured_severity(rule, config)
            if severity is not None:
                diagnostic = diagnostic.with_severity(severity)
        out.append(diagnostic)

    if scenario is not None:
        if resolved is None:
            resolved = context_of(scenario, estimate)
        present = set(formats)
        formats = tuple(formats)
        shared = None   # the Context of every rule without options (a frozen record; bulk speed)
        for listed, code, wanted, requires in _rule_plan(reg, config, _selectors(config))[1]:
            if wanted and not wanted & present:
                continue
            if estimate is not None:
                judged.add(code)
            if requires and not meets(requires, scenario, estimate):
                continue   # it would find nothing here (and its module need not be imported)
            rule = reg.rule_of(listed)
            if rule is None:
                continue   # its module failed to import (a registry diagnostic says so)
            defaults = None if config.options else _default_options(rule)
            if defaults is not None and not defaults:
                if shared is None:
                    shared = Context(scenario=scenario, estimate=estimate, options={},
                                     formats=formats, resolved=resolved)
                ctx = shared
            else:
                ctx = Context(scenario=scenario, estimate=estimate,
                              options=dict(defaults) if defaults is not None
                              else _options(rule, config), formats=formats, resolved=resolved)
            try:
                findings = list(rule.check(ctx) or ())
            except Exception as exc:  # noqa: BLE001 - a broken rule must not sink the run
                failure = make_internal(f"rule {rule.code} {rule.name} failed: "
                                        f"{type(exc).__name__}: {exc}",
                                        anchor)
                import traceback  # for start-up speed: only a failure needs it
                failure.data["traceback"] = traceback.format_exc()
                out.append(failure)
                continue
            for finding in findings:
                if isinstance(finding, str):
                    finding = Finding(finding)
                out.append(to_diagnostic(rule, finding, scenario, config, anchor))

    if scenario is None or any(d.code == "ML001" and d.severity == Severity.ERROR for d in pre):
        judged = set()          # what an unread file or a failed run would have found is unknown
    elif estimate is not None and not config.select:
        judged.add("all")       # every rule ran (but those `ignore` turns off everywhere)
    kept = _kept(out, reg, config, suppressions, used)
    kept.extend(unknown_suppressions(suppressions, reg))
    kept.extend(_unused_suppressions(suppressions, used, judged, reg, config))
    return sorted(kept, key=Diagnostic.sort_key)


_PLANS: dict = {}   # (id(reg), its size, selectors, whether options are given) -> (reg, plan)


def _rule_plan(reg: Registry, config: LintConfig, selectors: tuple) -> tuple:
    """(the reserved rules' lower-cased codes, [(rule or its index Entry, lower-cased code, its
    formats, its requires), ...] of the enabled rules that are not reserved, in the registry's
    order): what lint walks per run, made once per registry and selectors (a run over many files
    lints every file with the same few), from the registry's index: no rule module imported."""
    key = (id(reg), len(reg), selectors, bool(config.options))
    found = _PLANS.get(key)
    if found is not None and found[0] is reg:
        return found[1]
    reserved, rules = [], []
    for rule in reg.entries():
        if getattr(rule, "reserved", False):
            reserved.append(rule.code.lower())
        elif is_enabled(rule, config, selectors):
            rules.append((rule, rule.code.lower(), frozenset(rule.formats or ()),
                          tuple(getattr(rule, "requires", ()) or ())))
    if len(_PLANS) >= 64:
        _PLANS.clear()
    plan = (tuple(reserved), tuple(rules))
    _PLANS[key] = (reg, plan)
    return plan


def _kept(found: list, reg: Registry, config: LintConfig, suppressions: dict,
          used: set) -> list:
    """The findings that no per-file ignore or inline suppression drops, each once."""
    kept = []
    seen = set()
    for diagnostic in found:
        rule = reg.entry(diagnostic.code)   # (per-file ignores read its code and name)
        if not diagnostic.data.get("internal") and (
                suppressed(diagnostic, suppressions, used)
                or per_file_ignored(diagnostic, rule, config)):
            continue
        identity = (diagnostic.code, diagnostic.message, diagnostic.path, diagnostic.line,
                    diagnostic.column)
        if identity in seen:
            continue
        seen.add(identity)
        kept.append(diagnostic)
    return kept


def _unused_suppressions(suppressions: dict, used: set, judged: set, reg: Registry,
                         config: LintConfig) -> list:
    """ML011 (suppressions.unused) where it is enabled, at its configured severity, and not
    itself suppressed."""
    rule = reg.entry("ML011")
    if not suppressions or rule is None or not is_enabled(rule, config):
        return []   # (no directive: none unused)
    codes = set(reg.codes())
    judged = judged | {reg.entry(code.upper()).name.lower() for code in judged
                       if code.upper() in codes}
    known = {"all"} | {code.lower() for code in codes} | {n.lower() for n in reg.names()}
    severity = _configured_severity(rule, config)
    out = []
    for diagnostic in unused(suppressions, used, judged, known):
        if severity is not None:
            diagnostic = diagnostic.with_severity(severity)
        if not (suppressed(diagnostic, suppressions, used)
                or per_file_ignored(diagnostic, rule, config)):
            out.append(diagnostic)
    return out


def unknown_suppressions(suppressions: dict, reg: Registry) -> list:
    """ML003 (warning) for a `memlint: disable` directive naming no rule (a misspelt code turns
    nothing off), at the directive's line (line 1 for the file-wide and JSON forms)."""
    if not suppressions:
        return []
    known = {"all"} | {code.lower() for code in reg.codes()} | {n.lower() for n in reg.names()}
    out = []
    for path, table in suppressions.items():
        first: dict = {}
        for line, names in table.items():
            for name in names:
                if name not in known:
                    first[name] = min(first.get(name, line), line)
        for name, line in sorted(first.items()):
            hint = suggest(name.upper(), reg.codes()) or suggest(name, reg.names())
            message = (f"unknown rule {name!r} in a `memlint: disable` directive: it turns "
                       "nothing off" + (f"; did you mean {hint!r}?" if hint else ""))
            out.append(Diagnostic("ML003", "unknown-key", Severity.WARNING, message, path,
                                  max(line, 1), 1, key=name,
                                  data={"suggestion": hint} if hint else {}))
    return out


def has_internal_error(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.data.get("internal") for d in diagnostics)


def exit_code(diagnostics: Iterable[Diagnostic], fail_on: Severity) -> int:
    """DESIGN.md: 2 when memlint failed, 1 with findings at or above fail_on, else 0."""
    diagnostics = list(diagnostics)
    if has_internal_error(diagnostics):
        return 2
    return 1 if any(d.severity >= fail_on for d in diagnostics) else 0

