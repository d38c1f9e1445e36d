"""Which files make up which run: run discovery for `memlint check` and the public API.

A training run is often described by several files (a launch script, a DeepSpeed JSON, a model's
config.json, a memlint.toml giving the world size). A hook or CI job may pass only the one file
that changed, so every file given is checked as part of each run it belongs to:

- a run-defining scenario file (`memlint.toml`, `*.memlint.toml`, `*.memlint.yaml`) in the file's
  folder or any folder above it, up to the repository root, that lists it in `files = [...]`
  (directly or through a file it lists) or names it as its `model`;
- a `[[tool.memlint.runs]]` group of the governing pyproject.toml that lists it.

A file that belongs to no run is a run of its own. `[tool.memlint.scenario]` of the governing
pyproject.toml gives every run its project-wide scenario keys, below every file's own values.
A directory given is walked for the files some adapter can read (hidden and build folders and the
`exclude` globs of `[tool.memlint]` skipped).

Every run carries its anchor: the file and line that define it (the memlint.toml's `files`, the
`[[tool.memlint.runs]]` header, a launch script's command line, else line 1 of the file), where a
verdict about the run as a whole is reported when no single setting is at fault.
"""
from __future__ import annotations

import fnmatch
import os
import re

from memlint import lazy_re
from memlint.adapters.registry import (detect_format, detect_remembered, direct_references,
                                       forget_detected, load_file, load_with_references)
from memlint.config import config_for
from memlint.engine import LintConfig
from memlint.errors import UsageError
from memlint.ir import Partial, Provenance
from memlint.loaders import NUL_PATH, inside
from memlint.loaders import MAX_FILE_BYTES, is_buffered, read_text, repo_root
from memlint.records import field, record
from memlint.scenario import parse_assignment

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

# Folders a directory walk never enters (besides hidden ones): environments, caches, build output.
SKIPPED_DIRS = frozenset({"node_modules", "venv", "__pycache__", "__pypackages__",
                          "site-packages", "dist", "build", "_build", "buck-out"})
# File endings some adapter reads (adapters/registry.py CLAIMS); a walk tries only these.
READABLE_ENDINGS = (".json", ".hjson", ".yaml", ".yml", ".toml", ".sh", ".bash", ".slurm",
                    ".sbatch", ".args", ".txt", ".py")
RUN_FILE_NAMES = lazy_re.compile(r"^(memlint\.toml|.+\.memlint\.(toml|ya?ml))$", re.I)


def run_file_name(name: str) -> bool:
    """RUN_FILE_NAMES.match(name), the pattern compiled and run only for a name that may match
    (start-up): each match ends in toml, yaml or yml, letters that re.I matches only as
    str.lower() does (tests/test_runs_names.py)."""
    stem = name[:-1] if name.endswith("\n") else name   # `$` matches before a final newline
    if stem[-4:].lower() not in ("toml", "yaml", ".yml"):
        return False
    if not stem.isascii():
        return RUN_FILE_NAMES.match(name) is not None
    # ASCII: re.I is str.lower(); `.+` is one or more characters other than "\n"
    low = stem.lower()
    return low == "memlint.toml" or any(
        low.endswith(end) and len(low) > len(end) and "\n" not in low[:-len(end)]
        for end in (".memlint.toml", ".memlint.yaml", ".memlint.yml"))
PROJECT_FORMAT = "project"   # Partial.fmt of [tool.memlint.scenario]: defaults, below every file
MAX_LISTED_LOADED = 256      # a scenario file listing more is loaded whole only when it may list


@record
class Run:
    """One run to lint: its files' Partials (lowest priority first), settings and anchor."""

    name: str
    partials: list
    config: LintConfig
    anchor: Provenance
    key: str = ""                        # identity (the defining file or group)
    members: frozenset = field(default_factory=frozenset)   # real paths of every file in it


# ---------------------------------------------------------------------------------------------
# Paths


class Paths:
    """os.path.realpath, once per path (grouping asks for each file several times)."""

    def __init__(self) -> None:
        self._real: dict = {}

    def real(self, path: str) -> str:
        found = self._real.get(path)
        if found is None:
            found = self._real[path] = os.path.realpath(path)
        return found


def check_exists(path: str) -> None:
    if not os.path.exists(path) and not is_buffered(path):
        if os.path.islink(path):
            raise UsageError(f"{path}: a broken symbolic link or a symbolic link loop")
        raise UsageError(f"{path}: no such file or directory")


def check_inside(path: str, config: LintConfig, setting: str, allow: bool = False) -> None:
    """Files that settings name stay inside the repository root, after links are resolved, so a
    pull request editing pyproject.toml cannot make CI print a file from elsewhere."""
    if "\x00" in path:
        raise UsageError(f"{config.source}: [tool.memlint] {setting}: "
                         f"{os.path.relpath(path)!r} {NUL_PATH}; not read")
    if allow or config.allow_outside_root or config.root is None:
        return
    if not inside(path, config.root):
        raise UsageError(f"{config.source}: [tool.memlint] {setting}: {os.path.relpath(path)} is "
                         "outside the repository root; not read (set allow-outside-root = true "
                         "or pass --allow-outside-root)")


def _excluded(path: str, config: LintConfig) -> bool:
    if not config.exclude:
        return False
    root = config.root or os.getcwd()
    rel = os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
    parts = rel.split("/")
    candidates = {rel, os.path.basename(path)} | {"/".join(parts[:i]) for i in range(1, len(parts))}
    return any(fnmatch.fnmatch(c, pattern.rstrip("/")) for c in candidates
               for pattern in config.exclude)


def readable(path: str, max_bytes: int = MAX_FILE_BYTES, regular: bool = False,
             remember: bool = False) -> bool:
    """Whether some adapter claims the file (cheap: the name first, then its text). `regular`:
    a walk listed it as a regular file with a readable ending (loaders._read_listed).
    `remember`: keep the answer for loading the file (registry.detect_remembered)."""
    if not regular and not os.path.basename(path).lower().endswith(READABLE_ENDINGS):
        return False
    text, _ = read_text(path, max_bytes, regular)
    if text is None:
        return False
    return (detect_remembered if remember else detect_format)(path, text) is not None


def walk(top: str, config: LintConfig):
    """(path, is a regular file) of the files under `top` a walk looks at, in sorted order:
    hidden and build folders and the `exclude` globs skipped, links to folders not followed.
    Iterative (a tree 1,000 folders deep is no RecursionError: os.walk recurses on Python <
    3.12), one scandir per folder; the listing's file type spares a stat per file."""
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue   # unreadable folder, or vanished: os.walk skips it too
        folders = []
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                name = entry.name
                if (not name.startswith(".") and name not in SKIPPED_DIRS
                        and not name.endswith(".egg-info")
                        and not _excluded(entry.path, config)):
                    folders.append(entry.path)
            elif entry.name.lower().endswith(READABLE_ENDINGS) and not _excluded(entry.path,
                                                                                    config):
                try:
                    regular = entry.is_file(follow_symlinks=False)
                except OSError:
                    regular = False
                yield entry.path, regular
        stack.extend(reversed(folders))   # depth first, in name order, as os.walk gave them


def expand(paths: list, max_bytes: int = MAX_FILE_BYTES) -> list:
    """Files to check: files as given; directories walked for the files memlint can read."""
    out: list = []
    forget_detected()   # what an earlier walk remembered and nobody loaded
    for path in paths:
        check_exists(path)
        if not os.path.isdir(path):
            out.append(path)
            continue
        config = config_for(path)
        for full, regular in walk(path, config):
            listed = os.path.normpath(full)
            if readable(full, max_bytes, regular, remember=listed == full):
                out.append(listed)
    return out


def default_paths(config: LintConfig, cwd: str, allow_outside_root: bool = False) -> list:
    """`memlint check` without paths: what [tool.memlint] lists (files, runs, scenario)."""
    if config.source is None:
        raise UsageError("no paths given, and no pyproject.toml with [tool.memlint] files "
                         "above the working directory")
    # start-up: glob (and its contextlib) loads only for [tool.memlint] files patterns
    import glob

    paths = []
    for pattern in config.files:
        full = os.path.join(config.root, pattern)
        matches = sorted(glob.glob(full, recursive=True))
        if not matches and not glob.has_magic(pattern):
            raise UsageError(f"{config.source}: [tool.memlint] files: {pattern}: no such file")
        matches = [m for m in matches if os.path.isfile(m)]
        for match in matches:
            check_inside(match, config, f"files: {pattern!r}", allow_outside_root)
        paths.extend(matches)
    for run in config.runs:
        for member in run["files"]:
            check_inside(member, config, "runs", allow_outside_root)
        paths.extend(run["files"][:1])
    if not paths and has_project_scenario(config):
        paths.append(config.source)
    if not paths:
        raise UsageError(f"no paths given, and {config.source} lists no [tool.memlint] files")
    return [os.path.relpath(p, cwd) if os.path.isabs(p) else p for p in paths]


# ---------------------------------------------------------------------------------------------
# Anchors


def file_anchor(partial: Partial) -> Provenance:
    """Where a file defines its run: the adapter's anchor (a launch command), else line 1."""
    anchor = getattr(partial, "anchor", None)
    if anchor is not None and anchor.file is not None:
        return anchor
    return Provenance(partial.source, 1, 1, None)


def _definer_anchor(partial: Partial) -> Provenance:
    """A scenario file's run is defined where it lists its files (else at its first line)."""
    for item in partial.references:
        prov = getattr(item, "prov", None)
        if prov is not None and prov.file is not None and prov.line is not None:
            return Provenance(prov.file, prov.line, prov.column or 1, "files")
    return Provenance(partial.source, 1, 1, None)


_RUNS_HEADER = lazy_re.compile(r"^\s*\[\[\s*tool\s*\.\s*memlint\s*\.\s*runs\s*\]\]", re.M)


def _group_anchor(config: LintConfig, index: int) -> Provenance:
    """The line of the index-th `[[tool.memlint.runs]]` header of the pyproject.toml."""
    line = 1
    text, _ = read_text(config.source) if config.source else (None, [])
    if text:
        headers = list(_RUNS_HEADER.finditer(text))
        if index < len(headers):
            line = text.count("\n", 0, headers[index].start()) + 1
    return Provenance(config.source, line, 1, "tool.memlint.runs")


# ---------------------------------------------------------------------------------------------
# Project-wide scenario: [tool.memlint.scenario]

_SCENARIO_TABLE = lazy_re.compile(r"^\s*\[\s*tool\s*\.\s*memlint\s*\.\s*scenario\s*\]", re.M)


def has_project_scenario(config: LintConfig) -> bool:
    if not config.source:
        return False
    text, _ = read_text(config.source)
    return bool(text and _SCENARIO_TABLE.search(text))


def project_partial(config: LintConfig, max_bytes: int) -> Optional[Partial]:
    """[tool.memlint.scenario] as a Partial of defaults (no conflict warning when overridden)."""
    if not has_project_scenario(config):
        return None
    partial = load_file(config.source, max_bytes)
    partial.fmt = PROJECT_FORMAT
    partial.references = []
    return partial


# ---------------------------------------------------------------------------------------------
# Discovery


class Planner:
    """Groups the files to check into runs (one instance per check: it caches what it loads)."""

    def __init__(self, max_bytes: int = MAX_FILE_BYTES, allow_outside_root: bool = False,
                 config_of=config_for) -> None:
        self.max_bytes = max_bytes
        self.allow_outside_root = allow_outside_root
        self.config_of = config_of
        self.paths = Paths()
        self._definers: dict = {}     # real path of a scenario file -> (partials, members)
        self._folders: dict = {}      # folder -> scenario files in it

    # -- loading ----------------------------------------------------------------------------

    def load(self, files, config: LintConfig) -> list:
        partials, seen = [], set()
        allow = self.allow_outside_root or config.allow_outside_root
        for path in files:
            for partial in load_with_references(path, self.max_bytes, allow):
                key = (self.paths.real(partial.source) if os.path.exists(partial.source)
                       else partial.source)
                if key in seen:
                    continue
                seen.add(key)
                partials.append(partial)
        if sum(1 for p in partials if (p.fmt or "").startswith("gpt-neox")) < 2:
            return partials
        from memlint.adapters import gpt_neox  # start-up: only where gpt-neox files merge

        return gpt_neox.combine(partials)  # deepy.py merges its YAML files into one config

    def members(self, partials: list) -> frozenset:
        """Real paths of the run's files: every file loaded, and the model file it names."""
        out = {self.paths.real(p.source) for p in partials if os.path.exists(p.source)}
        for partial in partials:
            setting = partial.settings.get("model")
            if setting is None or setting.prov.file is None:
                continue
            path = os.path.join(os.path.dirname(os.path.abspath(setting.prov.file)),
                                os.path.expanduser(str(setting.value)))
            if os.path.isdir(path):
                path = os.path.join(path, "config.json")
            if os.path.isfile(path):
                out.add(self.paths.real(path))
        return frozenset(out)

    def _scenario_files(self, folder: str) -> list:
        found = self._folders.get(folder)
        if found is None:
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                names = []
            found = self._folders[folder] = [os.path.join(folder, n) for n in names
                                             if run_file_name(n)
                                             and os.path.isfile(os.path.join(folder, n))]
        return found

    def _may_list(self, candidate: str, path: str) -> bool:
        """Cheap test before loading a whole run: a scenario file lists others only under
        `files`, and names a listed or model file by its name. One that lists many files
        (more than MAX_LISTED_LOADED) without naming `path` is loaded alone: `path` is in its
        run only if a listed file is `path` or names it (a memlint.toml listing 20,000 files
        once cost 5 s to every file checked beside it)."""
        text, _ = read_text(candidate, self.max_bytes)
        if not text:
            return False
        name = os.path.basename(path)
        if name in text:
            return True
        if "files" not in text:
            return False
        listed = direct_references(candidate, self.max_bytes)
        if len(listed) <= MAX_LISTED_LOADED:
            return True   # loading the run is cheap, and exact through any depth of references
        try:
            target = os.stat(path)
        except OSError:
            return False
        for member in listed:
            try:
                if os.path.samestat(os.stat(member), target):
                    return True
            except OSError:
                continue
            found, _ = read_text(member, self.max_bytes)
            if found and name in found:
                return True
        return False

    def definers_of(self, path: str) -> list:
        """Scenario files in the path's folder or above (to the repository root) listing it."""
        real = self.paths.real(path)
        start = os.path.dirname(os.path.abspath(path))
        root = repo_root(start)
        folder, out = start, []
        while True:
            for candidate in self._scenario_files(folder):
                creal = self.paths.real(candidate)
                if creal == real:
                    continue
                if creal not in self._definers:
                    if not self._may_list(candidate, path):
                        self._definers[creal] = ((), frozenset())
                        continue
                    config = self.config_of(candidate)
                    partials = self.load([candidate], config)
                    self._definers[creal] = (partials, self.members(partials))
                if real in self._definers[creal][1]:
                    out.append(candidate)
            parent = os.path.dirname(folder)
            if folder == root or parent == folder:
                return out
            folder = parent

    # -- runs ---------------------------------------------------------------------------------

    def _with_project(self, partials: list, config: LintConfig) -> list:
        project = project_partial(config, self.max_bytes)
        if project is None:
            return partials
        real = self.paths.real(project.source)
        if any(p.fmt != "config" and os.path.exists(p.source)
               and self.paths.real(p.source) == real for p in partials):
            return partials   # the pyproject.toml is itself one of the run's files
        return [project] + partials

    def _definer_run(self, path: str) -> Run:
        real = self.paths.real(path)
        config = self.config_of(path)
        if real in self._definers:
            partials, members = self._definers[real]
        else:
            partials = self.load([path], config)
            members = self.members(partials)
            self._definers[real] = (partials, members)
        own = next((p for p in partials if os.path.exists(p.source)
                    and self.paths.real(p.source) == real), partials[-1])
        return Run(path, self._with_project(list(partials), config), config,
                   _definer_anchor(own), key=real, members=members)

    def _group_runs(self, path: str, config: LintConfig) -> list:
        real, out = self.paths.real(path), []
        for index, group in enumerate(config.runs):
            files = group["files"]
            if real not in {self.paths.real(f) for f in files}:
                continue
            for member in files:
                if not os.path.exists(member):
                    raise UsageError(f"{config.source}: runs {group['name']!r}: {member}: "
                                     "no such file")
                check_inside(member, config, "runs", self.allow_outside_root)
            partials = self.load([_shown(f) for f in files], config)
            if group.get("set") or group.get("model"):
                partials.append(_group_partial(group, config))
            out.append(Run(group["name"], self._with_project(partials, config), config,
                           _group_anchor(config, index), key=f"{config.source}#{index}",
                           members=self.members(partials)))
        return out

    def plan(self, paths: list) -> list:
        """[Run]: each run any given file belongs to, once, in the order the files were given."""
        runs: list = []
        keys: set = set()
        claimed: set = set()

        def add(run: Run) -> None:
            if run.key not in keys:
                keys.add(run.key)
                runs.append(run)
                claimed.update(run.members)

        singles = []
        for path in paths:
            config = self.config_of(path)
            found = self._group_runs(path, config)
            found += [self._definer_run(d) for d in self.definers_of(path)]
            for run in found:
                add(run)
            if not found:
                singles.append(path)
        # A file another given file refers to is part of that run, not a run of its own.
        loaded = []
        for path in singles:
            if self.paths.real(path) in claimed:
                continue
            config = self.config_of(path)
            partials = self.load([path], config)
            loaded.append((path, partials, config))
        kept, covered = [], set(claimed)
        for item in sorted(loaded, key=lambda item: -len(item[1])):
            if self.paths.real(item[0]) in covered:
                continue
            kept.append(item)
            covered |= self.members(item[1])
        order = {id(item): index for index, item in enumerate(loaded)}
        kept.sort(key=lambda item: order[id(item)])
        for path, partials, config in kept:
            own = next((p for p in partials if os.path.exists(p.source)
                        and self.paths.real(p.source) == self.paths.real(path)), partials[-1])
            anchor = (_definer_anchor(own) if run_file_name(os.path.basename(path))
                      else file_anchor(own))
            add(Run(path, self._with_project(partials, config), config, anchor,
                    key=self.paths.real(path), members=self.members(partials)))
        return runs


def _shown(path: str) -> str:
    """A path as diagnostics show it: relative to the working directory when inside it."""
    cwd = os.getcwd()
    absolute = os.path.abspath(path)
    if absolute.startswith(cwd.rstrip(os.sep) + os.sep):
        return os.path.relpath(absolute, cwd)
    return path


def _group_partial(group: dict, config: LintConfig) -> Partial:
    """A [[tool.memlint.runs]] group's own `set` and `model`, as a Partial."""
    partial = Partial(source=config.source or "<config>", fmt="config")
    for text in group.get("set", ()):
        try:
            key, value = parse_assignment(text)
        except ValueError as exc:
            raise UsageError(f"{config.source}: runs {group['name']!r}: {exc}") from None
        partial.set(key, value, Provenance(config.source, None, None, f"runs.set {key}"))
    if group.get("model"):
        partial.set("model", group["model"], Provenance(config.source, None, None, "runs.model"))
    return partial


