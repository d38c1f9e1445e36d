"""Rule documentation pages, rendered from the rules' docstrings (one text, never written twice).

`docs/rules/<CODE>.md` is one page per rule (reserved ML0xx codes included) and
`docs/rules/README.md` the index; `memlint explain`, SARIF `help.markdown` and `helpUri` all point
at or carry the same text. Regenerate the pages after changing a rule's docstring:

    python -m memlint.rules.docs docs/rules

tests/test_rule_docs.py fails while the pages in the repository are not current.

A rule's Example section has one style, read by `examples` (the one parser: the pages here and
tests/rules/test_rule_fixtures.py, which checks that each Bad file fires its rule and each Good one
does not): optional prose, then `Bad (FILENAME):` / `Good (FILENAME; --set key=value):` headings,
each followed by the whole file indented one level deeper. FILENAME picks the adapter, as a user's
file name would; `--set` gives what the file alone does not say.
"""
from __future__ import annotations

import os
import re
import shlex
import sys
import textwrap
from dataclasses import dataclass

from memlint import safe_write
from memlint.rules import registry
from memlint.rules.base import DOC_SECTIONS, Rule

DOCS_DIR = "docs/rules"
INDEX = "README.md"
_FAMILIES = {"ML0": "Reading the configs", "ML1": "Memory", "ML2": "Topology",
             "ML3": "DeepSpeed", "ML4": "Megatron-LM", "ML5": "FSDP and parallel layouts",
             "ML6": "Strategy (what to change to fit or go faster)"}
_FENCE = {".json": "json", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".sh": "bash",
          ".slurm": "bash", ".args": "text", ".txt": "text", ".py": "python"}


def page_name(rule: Rule) -> str:
    return f"{rule.code}.md"


class ExampleError(ValueError):
    """A rule's Example section does not follow the one style (the message names the line)."""


@dataclass(frozen=True)
class Example:
    """One snippet of a rule's Example section: a whole file, checkable as it stands."""

    label: str                  # "Bad" (the rule fires on it) or "Good" (the rule stays silent)
    filename: str               # the file's name: its name and extension pick the adapter
    settings: tuple = ()        # "key=value" for each `--set key=value` the file alone lacks
    text: str = ""              # the file's content

    @property
    def fires(self) -> bool:
        return self.label == "Bad"

    @property
    def head(self) -> str:
        """The snippet's heading, as the docstring writes it: `Bad (ds_config.json; --set k=v):`."""
        args = "".join(f" --set {s}" for s in self.settings)
        return f"{self.label} ({self.filename}{';' + args if args else ''}):"


# `Bad (FILENAME):` or `Good (FILENAME; --set key=value --set key=value):`, then an indented block.
_HEAD = re.compile(r"^(Bad|Good) \(([\w.-]+)(?:; (--set [^()]+))?\):$")
_HEAD_LIKE = re.compile(r"^(bad|good)\b.*:$", re.I)


def example_parts(text: str) -> list:
    """An Example section's text (docstring indentation removed) as a list of parts: a prose
    paragraph (str) or an `Example`. Raises ExampleError where the text breaks the style:

        Optional prose, at the section's indentation.

        Bad (FILENAME; --set key=value):

            the whole file, indented one level deeper

        Good (FILENAME):

            ...
    """
    parts: list = []
    lines = text.splitlines()
    fenced = next((i for i, line in enumerate(lines, 1) if line.lstrip().startswith("```")), None)
    if fenced is not None:
        raise ExampleError(f"example line {fenced}: no fences; indent the file under a "
                           "`Bad (FILENAME):` heading")
    index = 0
    prose: list = []

    def end_prose():
        if prose:
            parts.append("\n".join(prose))
            prose.clear()

    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        index += 1
        if not stripped:
            end_prose()
            continue
        if line[0] in " \t":
            raise ExampleError(f"example line {index}: an indented block must follow a "
                               f"`Bad (FILENAME):` or `Good (FILENAME):` heading: {stripped!r}")
        head = _HEAD.match(stripped)
        if head is None:
            if _HEAD_LIKE.match(stripped):
                raise ExampleError(f"example line {index}: {stripped!r} is not "
                                   "`Bad (FILENAME):` or `Good (FILENAME; --set key=value):`")
            prose.append(stripped)
            continue
        end_prose()
        block: list = []
        while index < len(lines) and (not lines[index].strip() or lines[index][0] in " \t"):
            block.append(lines[index])
            index += 1
        body = textwrap.dedent("\n".join(block)).strip("\n")
        if not body:
            raise ExampleError(f"example line {index}: {stripped!r} has no indented file")
        parts.append(Example(head.group(1), head.group(2), _settings(head.group(3), index),
                             body + "\n"))
    end_prose()
    return parts


def _settings(args, index: int) -> tuple:
    if not args:
        return ()
    words = shlex.split(args)
    if len(words) % 2 or any(w != "--set" for w in words[::2]) or not all(
            "=" in w for w in words[1::2]):
        raise ExampleError(f"example line {index}: arguments must be `--set key=value`, "
                           f"got {args!r}")
    return tuple(words[1::2])


def examples(rule: Rule) -> list:
    """The Bad and Good snippets of a rule's Example section (the one parser: the docs pages and
    the tests read the examples through it). Raises ExampleError when the section breaks the
    style."""
    try:
        parts = example_parts(_body(rule.sections().get("Example", "")))
    except ExampleError as exc:
        raise ExampleError(f"{rule.code} {rule.name}: {exc}") from None
    return [part for part in parts if isinstance(part, Example)]


def _example(text: str) -> str:
    """The Example section as Markdown: prose stays, each snippet is its heading and a fence in
    its file's format. A section in another style (a plugin's) is shown as it is written."""
    try:
        parts = example_parts(text)
    except ExampleError:
        fence = "`" * max([3] + [len(run) + 1 for run in re.findall(r"`{3,}", text)])
        return "\n".join([f"{fence}text", text.strip("\n"), fence]) + "\n"
    out: list = []
    for part in parts:
        if isinstance(part, str):
            out += [part, ""]
            continue
        fence = _FENCE.get(os.path.splitext(part.filename)[1].lower(), "text")
        out += [part.head, "", f"```{fence}", part.text.rstrip("\n"), "```", ""]
    return "\n".join(out).strip() + "\n"


def _body(text: str) -> str:
    """A section's text: its first line is already stripped, the rest keep the docstring's
    indentation, which is removed here."""
    first, *rest = text.splitlines() or [""]
    return "\n".join([first] + textwrap.dedent("\n".join(rest)).splitlines()).strip("\n")


def markdown_page(rule: Rule) -> str:
    """One rule's page: title, metadata, summary, then the four documented sections."""
    sections = rule.sections()
    flags = [f"default severity **{rule.severity.label}**"]
    if getattr(rule, "preview", False):
        flags.append("preview (off unless selected by code or name)")
    if getattr(rule, "formats", ()):
        flags.append("applies to " + ", ".join(f"`{f}`" for f in rule.formats) + " configs")
    lines = [f"# {rule.code} `{rule.name}`", "", "; ".join(flags).capitalize() + ".", ""]
    summary = _body(sections.get("summary", "")).strip()
    if summary:
        lines += [summary, ""]
    for title in DOC_SECTIONS:
        body = sections.get(title)
        if not body:
            continue
        lines += [f"## {title}", ""]
        if title == "Example":
            lines.append(_example(_body(body)))
        else:
            lines += [_body(body).strip(), ""]
    options = dict(getattr(rule, "options", {}) or {})
    if options:
        lines += ["## Options", "", "| option | type | default |", "| --- | --- | --- |"]
        for name, (kind, default) in options.items():
            lines.append(f"| `{name}` | {kind.__name__} | `{default!r}` |")
        lines += ["", f"Set in pyproject.toml: `[tool.memlint.options.{rule.name}]`.", ""]
    lines += ["---", "", f"Select or ignore it as `{rule.code}`, `{rule.name}` or its family "
              f"`{rule.code[:3]}`; silence one line with `# memlint: disable={rule.code}`. "
              "[All rules](README.md).", ""]
    return "\n".join(lines).rstrip() + "\n"


def index_page(rules) -> str:
    lines = ["# memlint rules", "",
             "Generated from the rules' docstrings by `python -m memlint.rules.docs docs/rules`; "
             "`memlint rules` lists the same, `memlint explain CODE` prints a page.", ""]
    family = None
    for rule in sorted(rules, key=lambda r: r.code):
        if rule.code[:3] != family:
            family = rule.code[:3]
            lines += ["", f"## {family}xx: {_FAMILIES.get(family, 'Plugins')}", "",
                      "| code | name | severity | what it checks |", "| --- | --- | --- | --- |"]
        summary = (rule.sections().get("summary") or "").strip().splitlines()
        text = summary[0] if summary else ""
        preview = " (preview)" if getattr(rule, "preview", False) else ""
        lines.append(f"| [{rule.code}]({page_name(rule)}) | `{rule.name}` | "
                     f"{rule.severity.label}{preview} | {text.replace('|', '/')} |")
    return "\n".join(lines).replace("\n\n\n", "\n\n").rstrip() + "\n"


def pages(rules) -> dict:
    """File name -> content, for every built-in rule and the index."""
    rules = list(rules)
    out = {page_name(rule): markdown_page(rule) for rule in rules}
    out[INDEX] = index_page(rules)
    return out


def builtin_rules() -> list:
    """The built-in rules only (an installed plugin must not change the repository's docs)."""
    return list(registry(plugins=False))


def write(directory: str) -> list:
    """Write the pages; remove stale ML*.md pages. Returns the files changed."""
    os.makedirs(directory, exist_ok=True)
    root = safe_write.write_root(directory)
    wanted = pages(builtin_rules())
    changed = []
    for name in sorted(os.listdir(directory)):
        if name.startswith("ML") and name.endswith(".md") and name not in wanted:
            os.remove(os.path.join(directory, name))
            changed.append(name)
    for name, text in wanted.items():
        path = os.path.join(directory, name)
        current = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                current = handle.read()
        if current != text:
            safe_write.write(path, text, root)   # atomic, never through a link
            changed.append(name)
    return changed


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    directory = argv[0] if argv else DOCS_DIR
    for name in write(directory):
        print(f"wrote {os.path.join(directory, name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
