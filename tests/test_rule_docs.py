"""docs/rules/ is generated from the rules' docstrings and current; what users read cites the
framework source or paper, never the internal notes memlint's model started from."""
import os
import re

import pytest

from memlint.cli import main
from memlint.rules import help_path, registry
from memlint.rules.docs import builtin_rules, markdown_page, pages

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs", "rules")
# Internal references that mean nothing to a user ("seed 000 CH 7", "3 stars", "§4.2").
INTERNAL = re.compile(r"seed\s*0\d\d|\bCH\s*\d|\bstars?\b|\u2605|seed's|\bM3\b", re.I)


def test_docs_rules_are_current():
    wanted = pages(builtin_rules())
    on_disk = {name for name in os.listdir(DOCS) if name.endswith(".md")}
    assert on_disk == set(wanted), "regenerate: python -m memlint.rules.docs docs/rules"
    for name, text in wanted.items():
        with open(os.path.join(DOCS, name), encoding="utf-8") as handle:
            assert handle.read() == text, (f"docs/rules/{name} is stale: python -m "
                                           "memlint.rules.docs docs/rules")


def test_every_rule_has_a_page_with_its_sections():
    for rule in registry(plugins=False):
        path = help_path(rule)
        assert path == f"docs/rules/{rule.code}.md" and os.path.isfile(os.path.join(ROOT, path))
        page = markdown_page(rule)
        for title in ("What it checks", "Why it matters", "How to fix", "Example"):
            assert f"## {title}" in page, (rule.code, title)
        assert page.count("```") % 2 == 0, rule.code


def test_user_facing_text_has_no_internal_references():
    for rule in registry(plugins=False):
        found = INTERNAL.search(rule.doc)
        assert found is None, f"{rule.code}: {found.group(0)!r} in its documentation"


def test_explain_points_at_the_page(capsys):
    assert main(["explain", "ML101"]) == 0
    out = capsys.readouterr().out
    assert "docs/rules/ML101.md" in out and "readthedocs" not in out


@pytest.mark.parametrize("code", ["ML101", "ML301"])
def test_pages_fence_examples_in_their_format(code):
    page = markdown_page(registry().get(code))
    assert "## Example" in page and "```" in page


def test_explained_estimates_cite_papers_and_code_not_internal_notes(capsys):
    """`estimate --explain` prints each term's source: a paper or a framework file, never the
    section numbers of the articles memlint's model started from."""
    llava = os.path.join(ROOT, "fixtures", "hf", "llava-1.5-7b-hf.json")
    runs = [
        [os.path.join(ROOT, "fixtures", "examples", "llama3-8b-h100.memlint.toml")],
        ["--model", "llama3-8b", "--set", "profile=seed", "--set", "recompute=full"],
        ["--model", "llama3-8b", "--set", "lora_rank=16", "--set", "quantization=nf4"],
        ["--model", llava, "--set", "profile=seed", "--set", "zero=3"],
        ["--model", llava, "--set", "zero=2", "--set", "offload_optimizer=cpu"],
    ]
    for argv in runs:
        main(["estimate", *argv, "--world-size", "8", "--explain"])
        out = capsys.readouterr().out
        assert "source:" in out, argv
        found = INTERNAL.search(out)
        assert found is None, f"{argv}: {found.group(0)!r} in:\n" + "\n".join(
            line for line in out.splitlines() if found.group(0) in line)


def _rule(example: str):
    from memlint.rules.base import Rule

    class Documented(Rule):
        code, name = "ML990", "documented"

    Documented.__doc__ = ("T.\n\n    What it checks:\n        x\n\n    Why it matters:\n        1\n\n"
                          "    How to fix:\n        y\n\n    Example:\n" + example)
    return Documented()


def test_examples_are_parsed_once_for_docs_and_tests():
    from memlint.rules.docs import examples

    rule = _rule("        Two GPUs per node here.\n\n"
                 "        Bad (ds_config.json; --set world_size=8 --set tp=2):\n\n"
                 '            {"train_batch_size": 64,\n'
                 '             "train_micro_batch_size_per_gpu": 4}\n\n'
                 "        Good (memlint.toml):\n\n"
                 "            tp = 2\n")
    bad, good = examples(rule)
    assert (bad.label, bad.filename, bad.settings, bad.fires) == (
        "Bad", "ds_config.json", ("world_size=8", "tp=2"), True)
    assert bad.text == '{"train_batch_size": 64,\n "train_micro_batch_size_per_gpu": 4}\n'
    assert (good.label, good.filename, good.settings, good.text, good.fires) == (
        "Good", "memlint.toml", (), "tp = 2\n", False)
    page = markdown_page(rule)
    assert "Two GPUs per node here.\n\nBad (ds_config.json; --set world_size=8 --set tp=2):" \
        "\n\n```json\n{" in page
    assert "Good (memlint.toml):\n\n```toml\ntp = 2\n```" in page


@pytest.mark.parametrize("example,problem", [
    ("        Bad:\n\n            {}\n", "is not `Bad (FILENAME):`"),
    ("        Bad (ds_config.json):\n        ```json\n        {}\n        ```\n", "no fences"),
    ("        Bad (ds_config.json; --gpu H100):\n\n            {}\n", "--set key=value"),
    ("        Some prose.\n        More prose.\n\n            an indented line\n", "must follow"),
    ("        Good (memlint.toml):\n\n        Bad (memlint.toml):\n\n            tp = 2\n",
     "has no indented file"),
])
def test_examples_outside_the_style_are_refused_with_the_line(example, problem):
    from memlint.rules.docs import ExampleError, examples

    with pytest.raises(ExampleError, match=re.escape(problem)) as info:
        examples(_rule(example))
    assert str(info.value).startswith("ML990 documented: example line ")


def test_a_plugin_example_in_another_style_is_shown_as_written():
    """SARIF and `explain` render any rule's page: a plugin's own Example style must not fail."""
    page = markdown_page(_rule("        Bad:\n        ```yaml\n        x: 1\n        ```\n"))
    assert "````text\nBad:\n```yaml\nx: 1\n```\n````" in page


def _prose(page: str) -> list:
    """The paragraphs and sentences of a rule page a reader reads as that rule's own: not its
    headings, code blocks, options table, example captions or the generated footer."""
    page = re.sub(r"```.*?```", "", page, flags=re.S)
    out = []
    for block in page.split("\n\n"):
        block = block.strip()
        if not block or block.startswith(("#", "|", "---", "Default severity", "Select or ignore",
                                          "Bad (", "Good (")):
            continue
        paragraph = " ".join(block.split())
        out.append(paragraph)
        out += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(`])", paragraph)
                if len(s.split()) >= 8 and s != paragraph]
    return out


def repeated_prose(wanted: dict) -> list:
    owner: dict = {}
    found = []
    for name, text in sorted(wanted.items()):
        if name == "README.md":
            continue
        for piece in dict.fromkeys(_prose(text)):
            if piece in owner and owner[piece] != name:
                found.append(f"{name} repeats {owner[piece]}: {piece[:120]!r}")
            owner.setdefault(piece, name)
    return found


def test_no_rule_page_repeats_another_rules_text():
    """Each page says what its own rule checks (issue 31: ML301 ended with two lines of ML308,
    ML501 with a sentence of ML502): no paragraph or sentence of one page is in another."""
    found = repeated_prose(pages(builtin_rules()))
    assert not found, "\n".join(found)


def test_the_repeat_check_finds_a_pasted_sentence():
    sentence = "A torchtitan job asking for 8 x 4 = 32 ranks on 16 GPUs fails at start-up."
    wanted = {"ML501.md": f"## Why it matters\n\nGathered again. {sentence}\n",
              "ML502.md": f"## Why it matters\n\nThe product differs. {sentence}\n"}
    assert repeated_prose(wanted) == [f"ML502.md repeats ML501.md: {sentence!r}"]
