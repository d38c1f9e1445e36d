"""Regression tests for issue 30 (hardening 3): compare's log reading, the output formats, the
configuration reading and the directory walk on hostile input. One test (or a few) per numbered
finding; --write-assumptions (finding 1) is tests/cli/test_write_assumptions.py.

Speed itself is measured by `python bench/hardening.py` (CPU time and peak memory of each
reproducer in its own process); these tests pin the behaviour that keeps the work bounded, under
a generous hang guard (never a speed assertion: the inputs take milliseconds).
"""
from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from fuzz.test_hardening import check_json, guard, run
from memlint import logs
from memlint import comparison as compare

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT2 = os.path.join(ROOT, "fixtures", "hf", "gpt2.json")
MiB = 1024**2
GOOD = ("[Rank 0] (after 10 iterations) memory (MB) | allocated: 10250.5 | max allocated: 12606.0 "
        "| reserved: 17482.0 | max reserved: 17482.0")
DS = '{"train_batch_size": 8, "zero_optimization": {"stage": 7}}'


def parse(text):
    with guard():
        return logs.parse_text(text)


# -- 2. numbers of a log ----------------------------------------------------------------------

@pytest.mark.parametrize("bad,why", [
    (GOOD.replace("10250.5", "1.2.3"), "'1.2.3' is not a number"),
    (GOOD.replace("12606.0", "1" * 400), "is not a number"),
    (GOOD.replace("17482.0", "."), "'.' is not a number"),
    (GOOD.replace("Rank 0", "Rank " + "1" * 5000), "is not a rank"),
    (GOOD.replace("after 10", "after " + "1" * 5000), "is not a step"),
    ("CUDA out of memory. (GPU 0; 31.74 XB total capacity; 1 GiB already allocated; 1 GiB free; "
     "2 GiB reserved in total)", "unit 'XB'"),
    ("step: 5 memory: 1e999 GiB(50%)", None),       # no match: `e` is not part of a number
    (GOOD.replace("12606.0", "9" * 39), "more memory than a GPU has"),
])
def test_a_bad_number_skips_its_line_with_a_note(bad, why):
    report = parse(GOOD + "\n" + bad + "\n")
    assert len(report.readings) == 1 and report.readings[0].line == 1
    if why is not None:
        (line, reason), = report.skipped
        assert line == 2 and why in reason


def test_compare_names_the_skipped_lines_and_still_compares(repo, capsys):
    (repo / "train.log").write_text(GOOD + "\n" + GOOD.replace("10250.5", "1.2.3") + "\n")
    code, out, err = run("compare", "train.log", "--model", GPT2, "--format", "json")
    assert code == 0, err
    assert "line 2 not read: '1.2.3' is not a number" in json.loads(out)["notes"]


def test_a_log_of_only_unreadable_lines_is_one_line_exit_2(repo):
    (repo / "train.log").write_text(GOOD.replace("10250.5", "1.2.3").replace("12606.0", ".")
                                    .replace("17482.0", "..") + "\n")
    code, _out, err = run("compare", "train.log", "--model", GPT2)
    assert code == 2 and "internal error" not in err
    assert "1 memory line(s), none readable (line 1:" in err and err.count("\n") == 1


# -- 3. linear patterns -----------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "step: 1 " * 30_000 + "memory: 1 GiB",                   # torchtitan: `.*?` per step
    "see_memory_usage] a" + " " * 240_000 + "b",             # DeepSpeed: `(.*?)\s*$`
    "out of memory (GPU 0; " + "1" * 240_000,                # old OOM: digits and \w+ units
    "out of memory GPU 0 has a total capacity of " + "1" * 240_000,
    "out of memory " + "GPU 0 has a total capacity of 1 GiB of which 1 GiB is free. " * 4000,
])
def test_long_hostile_lines_parse_in_linear_time(line):
    # each took 3-7 s at a tenth of this length (quadratic); the hang guard is 60 s
    report = parse(GOOD + "\n" + line + "\n")
    assert len(report.readings) == 1


def test_launcher_pattern_of_hf_scripts_is_linear():
    from memlint.adapters import hf_trainer

    with guard():
        assert not hf_trainer.detect("x.sh", "python " * 600_000 + "\n")
    assert hf_trainer.detect("x.sh", "torchrun --nproc 8 train.py cfg/a.yaml\n")
    assert not hf_trainer.detect("x.sh", "echo train.py cfg/a.yaml\n")


# -- 4. many ranks ----------------------------------------------------------------------------

def _ranks_log(n):
    return "".join(f"[Rank {i}] (after 10 iterations) memory (MB) | allocated: 1.5 | max "
                   f"allocated: {i % 7 + 2}.5 | reserved: 300 | max reserved: 400\n"
                   for i in range(n))


def test_ranks_outside_the_run_are_named_in_a_short_line(repo):
    (repo / "train.log").write_text(_ranks_log(5000))
    code, _out, err = run("compare", "train.log", "--model", GPT2, "--world-size", "8")
    assert code == 2 and len(err) < 400
    assert "ranks 8-4999 of the log do not exist in the run (world size 8" in err


def test_many_ranks_are_shown_one_per_stage(repo):
    (repo / "train.log").write_text(_ranks_log(5000))
    code, out, _err = run("compare", "train.log", "--model", GPT2, "--world-size", "5000",
                          "--set", "pp=4", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert [r["stage"] for r in doc["ranks"]] == [0, 1, 2, 3]
    # per stage, the rank with the highest peak: allocated i % 7 + 2.5 MiB peaks at i % 7 == 6
    assert all(r["rank"] % 7 == 6 for r in doc["ranks"])
    assert doc["notes"][0] == ("5,000 ranks logged: each pipeline stage is shown by its rank "
                               "with the highest peak")
    assert any(n.startswith("stage 0: 1,250 ranks logged, shown by rank 6") for n in doc["notes"])


def test_a_world_size_the_stages_do_not_divide_is_one_line_exit_2(repo):
    # fuzz: world 8 over pp 3 put rank 7 on a stage 3 the estimate does not have (KeyError)
    (repo / "train.log").write_text(_ranks_log(8))
    code, _out, err = run("compare", "train.log", "--model", GPT2, "--world-size", "8",
                          "--set", "pp=3")
    assert code == 2 and "internal error" not in err
    assert "world size 8 is not a multiple of its 3 pipeline stages" in err


def test_an_engines_single_stage_takes_every_rank_whatever_pp_is_set(repo):
    # fuzz: `--set pp=4` over a vLLM serve run (one engine stage) put rank 1 on stage 1
    shutil.copy(os.path.join(ROOT, "fixtures", "logs", "vllm-llama3.1-8b-h100.sh"), repo / "r.sh")
    (repo / "v.log").write_text("".join(f"(EngineCore pid=1) [Rank {rank}] INFO Model loading "
                                        "took 14.99 GiB memory and 7.0 seconds\n"
                                        for rank in (0, 1)))
    code, out, err = run("compare", "v.log", "r.sh", "--world-size", "2", "--set", "pp=4",
                         "--format", "json")
    assert code == 0, err
    assert [(r["rank"], r["stage"]) for r in json.loads(out)["ranks"]] == [(0, 0), (1, 0)]


def test_memory_lines_are_bounded(monkeypatch):
    monkeypatch.setattr(logs, "MAX_MEMORY_LINES", 100)
    report = parse(_ranks_log(1000))
    assert len(report.readings) == 100
    assert [r.rank for r in report.readings[:2]] == [0, 1] and report.readings[-1].rank == 999
    assert report.notes == ["1,000 memory lines: read the first and the last 50 of them"]


def test_a_large_log_is_read_at_both_ends_with_true_line_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(logs, "MAX_LOG_BYTES", 64 * 1024)
    path = tmp_path / "train.log"
    filler = "".join(f"iteration {i} | loss 2.0\n" for i in range(20_000))
    path.write_text(GOOD + "\n" + filler + GOOD.replace("Rank 0", "Rank 1") + "\n")
    report = logs.read(str(path))
    assert [(r.rank, r.line) for r in report.readings] == [(0, 1), (1, 20_002)]
    assert report.lines == 20_002
    assert report.notes == [f"the log is {path.stat().st_size:,} bytes: read its first and last "
                            "32 KiB"]
    monkeypatch.setattr(logs, "MAX_COUNTED_BYTES", 10)
    report = logs.read(str(path))
    assert [(r.rank, r.line) for r in report.readings] == [(0, 1), (1, None)]
    assert "line numbers are not counted" in report.notes[0]


def test_lines_are_found_in_bytes_as_splitlines_would_number_them():
    text = "a\r\nb\n" + GOOD + "\r\n\nprogress\r" + GOOD.replace("Rank 0", "Rank 3") + "\n"
    report = parse(text)
    assert [(r.rank, r.line) for r in report.readings] == [(0, 3), (3, 5)]


# -- 5. file names in the output --------------------------------------------------------------

HOSTILE = "a\nFORGED::error file=x.py,line=1::forged\x1b[31m\x07.json"


@pytest.mark.parametrize("fmt", ["text", "github", "junit", "sarif", "json", "markdown"])
def test_a_file_name_forges_no_line_and_no_command(repo, fmt):
    (repo / HOSTILE).write_text(DS)
    code, out, err = run("check", "--format", fmt, ".")
    assert code == 1
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f]", out + err)
    assert not any(line.startswith("FORGED") for line in out.splitlines())
    if fmt == "github":
        assert all(re.match(r"::(error|warning|notice) [^\n]*title=[^:\n]*::", line)
                   for line in out.splitlines())


def test_compare_escapes_the_logs_name(repo):
    name = "t\x1b[2J\x07\nFORGED.log"
    (repo / name).write_text(GOOD + "\n")
    code, out, err = run("compare", name, "--model", GPT2)
    assert code == 0
    assert "Compare t\\x1b[2J\\x07\\x0aFORGED.log with" in out
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f]", out + err)


def test_exit_2_reasons_are_one_escaped_line(repo):
    code, _out, err = run("compare", "missing\n\x1b.log", "--model", GPT2)
    assert code == 2 and err.count("\n") == 1 and "\x1b" not in err


# -- 6. Markdown ------------------------------------------------------------------------------

def test_markdown_shows_html_links_and_mentions_as_text(repo):
    (repo / "ds_config.json").write_text('{"train_batch_size": 8, "<img src=x onerror=1>": 1, '
                                         '"@someone [a](http://x) *b*": 2}')
    code, out, _err = run("check", "--format", "markdown", "ds_config.json")
    assert code in (0, 1)
    assert "<img" not in out and "&lt;img src=x onerror=1&gt;" in out
    assert "@someone" not in out and "@&#8203;someone" in out
    assert "\\[a\\](http://x) \\*b\\*" in out


def test_markdown_code_spans_cannot_be_closed_by_a_name():
    from memlint.report import markdown_format

    assert markdown_format._code("a|b.json") == "`a\\|b.json`"
    assert markdown_format._code("a`<img>`.json") == "a\\`&lt;img&gt;\\`.json"
    assert markdown_format._code("a\\|<b>") == "a\\\\\\|&lt;b&gt;"


# -- 7. and 10. pyproject.toml ----------------------------------------------------------------

def test_an_oversized_pyproject_is_a_one_line_exit_2(repo):
    with open(repo / "pyproject.toml", "wb") as handle:
        handle.write(b"[tool.memlint]\n")
        handle.truncate(1_500_000_000)   # sparse
    (repo / "ds_config.json").write_text(DS)
    code, _out, err = run("check", "ds_config.json")
    assert code == 2 and "over the 4,194,304-byte limit of a pyproject.toml" in err
    assert "internal error" not in err


def test_a_latin1_byte_in_pyproject_is_located(repo):
    (repo / "pyproject.toml").write_bytes(b'[tool.memlint]\n# caf\xe9\nfail-on = "warning"\n')
    (repo / "ds_config.json").write_text(DS)
    for fmt in ("text", "json", "sarif"):
        code, out, err = run("check", "--format", fmt, "ds_config.json")
        assert code == 2 and "internal error" not in err
        assert "pyproject.toml:2:6: file is not valid UTF-8 (byte 0xe9)" in err
    assert json.loads(out)["runs"][0]["invocations"][0]["executionSuccessful"] is False


def test_a_4mb_toml_float_is_not_read(repo):
    (repo / "job.toml").write_text("[job]\ndump_folder = 'x'\n[model]\nname = 'llama3'\n"
                                   "[training]\nlr = 1." + "1" * 200_000 + "\n")
    code, out, _err = run("check", "--format", "json", "job.toml")
    assert code == 0
    (warning,) = [d for d in json.loads(out)["diagnostics"] if d["code"] == "ML001"]
    assert warning["severity"] == "warning" and warning["line"] == 6
    assert "a number of 200,002 characters; file not read" in warning["message"]


def test_long_toml_integers_are_still_tomllibs_error():
    from memlint.loaders import load_toml

    doc = load_toml("x.toml", "[a]\nb = " + "1" * 5000 + "\n")
    assert doc.diagnostics[0].severity.label == "error"
    assert "integer too large" in doc.diagnostics[0].message


# -- 8. walking -------------------------------------------------------------------------------

def test_a_1000_deep_tree_is_walked(repo):
    folder = repo
    for _ in range(1000):
        folder = folder / "d"
        folder.mkdir()
    (folder / "ds_config.json").write_text(DS)
    code, out, err = run("check", "--format", "json", ".")
    assert code == 1 and "internal error" not in err
    assert any(d["code"] == "ML002" for d in json.loads(out)["diagnostics"])
    os.system(f"rm -rf {repo / 'd'}")   # shutil.rmtree recurses per level


def test_walk_order_and_skips_are_os_walks(repo):
    from memlint.config import config_for
    from memlint.runs import walk

    for path in ("b/x.json", "a/z.yaml", "a/c/y.json", ".hidden/h.json", "node_modules/n.json",
                 "top.json", "a/notes.md", "x.egg-info/e.json"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("{}")
    (repo / "link").symlink_to("a", target_is_directory=True)
    found = [os.path.relpath(p, repo) for p, _ in walk(str(repo), config_for(str(repo)))]
    assert found == ["top.json", "a/z.yaml", "a/c/y.json", "b/x.json"]


def test_listed_files_are_read_without_following_a_link(tmp_path):
    from memlint.loaders import read_text

    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    assert read_text(str(tmp_path / "real.json"), regular=True)[0] == "{}"
    text, problems = read_text(str(tmp_path / "link.json"), regular=True)
    assert text is None and "cannot read" in problems[0].message
    big = tmp_path / "big.json"
    big.write_text("x" * 200_000)
    assert read_text(str(big), 100_000, regular=True)[0] is None
    assert read_text(str(big), 200_000, regular=True)[0] == "x" * 200_000


# -- 9. deep config.json ----------------------------------------------------------------------

def test_deep_config_json_in_the_hf_cache_is_a_warning(repo, monkeypatch):
    snapshot = repo / "hf" / "models--org--deep" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (repo / "hf" / "models--org--deep" / "refs").mkdir()
    (repo / "hf" / "models--org--deep" / "refs" / "main").write_text("abc")
    (snapshot / "config.json").write_text('{"model_type": "llama", "x": ' + "[" * 100_000
                                          + "]" * 100_000 + "}")
    monkeypatch.setenv("HF_HUB_CACHE", str(repo / "hf"))
    (repo / "memlint.toml").write_text('model = "org/deep"\n')
    code, out, err = run("check", "--format", "json", "memlint.toml")
    assert code == 0 and "internal error" not in err
    assert "nested deeper than 64 levels" in out


def test_deep_but_parseable_config_is_refused_too(tmp_path):
    from memlint.catalog import hub

    path = tmp_path / "config.json"
    path.write_text('{"x": ' + "[" * 100 + "]" * 100 + "}")
    data, problem = hub._read_json(str(path))
    assert data is None and "nested deeper than 64" in problem
    path.write_text('{"x": ' + "[" * 60 + "]" * 60 + "}")
    assert hub._read_json(str(path))[0] is not None


def test_deep_set_value_is_a_string_not_a_crash():
    from memlint.scenario import literal

    assert literal("[" * 100_000) == "[" * 100_000


# -- 11. a long preamble ----------------------------------------------------------------------

def test_launch_line_after_64kb_of_preamble_is_read(repo):
    preamble = "".join(f"# line {i} of a long preamble, padding padding padding\n"
                       for i in range(1500))
    (repo / "train.sh").write_text(preamble + "torchrun pretrain_gpt.py --num-layers 2 "
                                   "--hidden-size 1024 --num-attention-heads 7 "
                                   "--tensor-model-parallel-size 2 --seq-length 1024 "
                                   "--max-position-embeddings 1024\n")
    assert len(preamble) > 65536
    code, out, _err = run("check", "--format", "json", "train.sh")
    assert code == 1
    assert any("7" in d["message"] and d["severity"] == "error"
               for d in json.loads(out)["diagnostics"])


# -- 12. DeepSpeed unknown keys ---------------------------------------------------------------

def test_unknown_deepspeed_keys_are_listed_up_to_the_cap(repo):
    from memlint.keys import MAX_UNKNOWN_LISTED

    keys = ", ".join(f'"unknown_key_{i}": {i}' for i in range(3000))
    (repo / "ds_config.json").write_text('{"train_batch_size": 8, ' + keys + ', '
                                         '"zero_optimization": {"stage": 1, "bogus_a": 1, '
                                         + ", ".join(f'"bogus_{i}": 1' for i in range(150))
                                         + "}}")
    code, out, _err = run("check", "--format", "json", "ds_config.json")
    unknown = [d for d in json.loads(out)["diagnostics"] if d["code"] == "ML003"]
    top = [d for d in unknown if "top-level key" in d["message"] or "top level" in d["message"]]
    assert len(top) == MAX_UNKNOWN_LISTED + 1
    assert top[-1]["message"].startswith("2900 more unknown keys in top level, from "
                                         "'unknown_key_100' on")
    assert top[-1]["severity"] == "warning"
    block = [d for d in unknown if "zero_optimization" in d["message"]]
    assert len(block) == MAX_UNKNOWN_LISTED + 1 and block[-1]["severity"] == "error"
    assert code == 1


# -- 13. bounded but slow ---------------------------------------------------------------------

def test_plan_top_is_capped_with_a_note(capsys):
    from memlint.cli import main
    from memlint.commands import plan

    assert main(["plan", "--model", "llama3-8b", "--gpus", "8", "--top", "100000",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["plans"]) <= plan.MAX_TOP
    assert doc["notes"][0].startswith(f"--top 100000: the best {plan.MAX_TOP} plans are shown")


def test_a_long_memlint_toml_is_not_loaded_for_a_file_it_does_not_list(repo, monkeypatch):
    from memlint import runs

    (repo / "d").mkdir()
    names = [f"d/f{i}.json" for i in range(runs.MAX_LISTED_LOADED + 50)]
    for name in names:
        (repo / name).write_text('{"train_batch_size": 8}')
    (repo / "memlint.toml").write_text('model = "llama3-8b"\nfiles = ['
                                       + ", ".join(f'"{n}"' for n in names) + "]\n")
    (repo / "ds_config.json").write_text('{"train_batch_size": 8}')
    loaded = []
    real_load = runs.Planner.load
    monkeypatch.setattr(runs.Planner, "load",
                        lambda self, files, config: loaded.append(list(files))
                        or real_load(self, files, config))
    code, out, _err = run("check", "--format", "json", "ds_config.json")
    assert code == 0 and all("memlint.toml" not in str(f) for f in loaded)
    # a listed file is still checked as part of the whole run
    loaded.clear()
    code, out, _err = run("check", "--format", "json", "d/f7.json")
    assert any(str(f).endswith("memlint.toml") for files in loaded for f in files)


def test_a_member_named_only_by_a_listed_file_is_still_found(repo, monkeypatch):
    from memlint import runs

    monkeypatch.setattr(runs, "MAX_LISTED_LOADED", 2)
    (repo / "ds_config.json").write_text('{"train_batch_size": 8}')
    (repo / "accelerate.yaml").write_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n"
                                          "  deepspeed_config_file: ds_config.json\n")
    (repo / "x.json").write_text("{}")
    (repo / "y.json").write_text("{}")
    (repo / "memlint.toml").write_text('model = "llama3-8b"\nfiles = ["accelerate.yaml", '
                                       '"x.json", "y.json"]\n')
    planner = runs.Planner()
    assert planner._may_list(str(repo / "memlint.toml"), str(repo / "ds_config.json"))
    (repo / "other.json").write_text("{}")
    assert not planner._may_list(str(repo / "memlint.toml"), str(repo / "other.json"))


def test_a_binary_log_is_no_memory_lines(repo):
    (repo / "train.log").write_bytes(bytes(range(256)) * 40_000)
    code, _out, err = run("compare", "train.log", "--model", GPT2)
    assert code == 2 and "no memory lines found" in err and "internal error" not in err


def test_compare_error_messages_stay_one_line():
    report = logs.LogReport(path="x.log", readings=[], lines=3)
    report.skip(4, "'.' is not a number")
    assert "\n" not in compare._no_lines(report)


def test_every_text_segment_is_one_escaped_line(monkeypatch):
    # estimates carry file names too (an assumed value's source: "... in train\u202e.sh")
    from memlint.report import Report, text_format

    monkeypatch.setattr(text_format, "report_lines",
                        lambda report: [[("assumed: x (in a\nFORGED\u202e.sh)", "")]])
    assert text_format.render(Report()) == "assumed: x (in a\\x0aFORGED\\u202e.sh)\n"


def test_json_writes_bidi_controls_and_line_separators_as_escapes():
    from memlint.escape import json_safe

    value = "x\u202ey\u2028z\u2066\x7f\x9b2J"
    text = json_safe(json.dumps({"source": value}, ensure_ascii=False))
    assert text == '{"source": "x\\u202ey\\u2028z\\u2066\\u007f\\u009b2J"}'
    assert json.loads(text) == {"source": value}


def test_the_rule_docs_writer_is_the_safe_writer(tmp_path):
    # every file memlint writes goes through memlint/safe_write.py: a page that is a symbolic
    # link is refused, not written through
    from memlint import safe_write
    from memlint.rules import docs

    docs.write(str(tmp_path))
    page = sorted(p for p in os.listdir(tmp_path) if p.startswith("ML"))[0]
    target = tmp_path / "elsewhere.md"
    target.write_text("mine\n")
    os.remove(tmp_path / page)
    os.symlink(target, tmp_path / page)
    with pytest.raises(safe_write.WriteError, match="symbolic link"):
        docs.write(str(tmp_path))
    assert target.read_text() == "mine\n"


# -- found by the 100,000-input fuzz run ------------------------------------------------------

def test_top_level_keys_are_linear_on_long_blank_runs():
    from memlint.adapters._toplevel import top_level_keys

    with guard():   # a key then 100,000 tabs took 10 s (the lazy key rescanned the blanks)
        assert top_level_keys("num_machines" + "\t" * 60_000 + "\nmain: 1\n") == {"main"}
    assert top_level_keys('a : 1\n"b c"  : 2\n\'d\': 3\ne:f: 4\n') == {"a", "b c", "d"}


def test_rollout_rule_survives_a_gpu_of_no_memory(repo):
    script = os.path.join(ROOT, "fixtures", "real-world", "volcengine__verl")
    found = [os.path.join(folder, n) for folder, _d, names in os.walk(script) for n in names
             if n.endswith(".sh")]
    if not found:
        pytest.skip("no verl script in the corpus")
    code, _out, err = run("check", "--set", "gpu_memory=1e-300", "--model", "mixtral-8x7b",
                          sorted(found)[0])
    assert "internal error" not in err and code in (0, 1)


def test_an_assumption_coefficient_past_2_53_is_an_invalid_value(repo):
    # "runtime.allocator_fraction" = 1e308 made the allocator term infinite (OverflowError)
    (repo / "memlint.toml").write_text('model = "llama3-8b"\n"runtime.allocator_fraction" = 1e308\n')
    code, out, err = run("estimate", "--format", "json", "memlint.toml")
    assert "internal error" not in err and code in (1, 2)
    assert "1e+308 is too large" in out or "1e+308 is too large" in err


def test_the_benchs_table_names_each_case_of_each_finding():
    """bench/hardening.py's docstring maps every finding of issue 30 to its cases: each row names
    a case that exists, every case is in a row, and findings 1-13 each have one."""
    import importlib.util

    path = os.path.join(ROOT, "bench", "hardening.py")
    spec = importlib.util.spec_from_file_location("memlint_bench_hardening", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    table = bench.__doc__.split("item  what the issue found", 1)[1].split("\n\n", 1)[0]
    named = [re.split(r"\s{2,}", line.strip())[-1] for line in table.splitlines()[1:]]
    cases = [case[0] for case in bench.CASES_30]
    assert sorted(named) == sorted(cases)
    assert {int(name.split()[0]) for name in cases} == set(range(1, 14))


def test_a_vllm_length_of_400_digits_is_an_invalid_value_not_an_overflow(repo):
    # fuzz seed 6083395: int(float("1" + 400 zeros)) raised OverflowError in the vllm-serve reader
    (repo / "serve.sh").write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len "
                                   + "1" + "0" * 400 + " --max-num-batched-tokens 1.5k\n")
    code, data = check_json(str(repo / "serve.sh"))
    assert code == 1
    assert any("max_model_len" in d["message"] and "too large" in d["message"] for d in data)


def test_a_numeric_string_of_60000_digits_is_checked_in_linear_time(repo):
    # fuzz seed 8143998: loss_scale 111...1 0 (20,000 digits) took 16 s in the schema's
    # `[0-9]+\.?[0-9]*` (the digits split two ways: quadratic backtracking)
    (repo / "ds_config.json").write_text(json.dumps(
        {"train_micro_batch_size_per_gpu": 16, "fp16": {"enabled": True,
                                                        "loss_scale": "1" * 60_000 + " 0"}}))
    code, data = check_json(str(repo / "ds_config.json"))
    assert code == 1
    assert [d["code"] for d in data if "loss_scale" in d["message"]] == ["ML002"]


def _shipped_patterns() -> set:
    found = set()

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                found.add(node["pattern"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    folders = [os.path.join(ROOT, "memlint", "adapters"), os.path.join(ROOT, "memlint", "schemas")]
    for folder in folders:
        for name in sorted(os.listdir(folder)):
            if name.endswith(".schema.json"):
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    walk(json.load(handle))
    return found


def test_no_schema_pattern_backtracks_quadratically():
    """Every `pattern` of the schemas memlint ships and validates with, on long runs of what
    it accepts followed by what it does not (digits, blanks, a fraction, an exponent)."""
    patterns = _shipped_patterns()
    assert len(patterns) > 5
    runs = ["1" * 300_000 + "x", "1" * 300_000 + " 0", "1." + "1" * 300_000 + "x",
            "1e" + "1" * 300_000 + "x", "1" + " " * 300_000 + "x", " " * 300_000 + "x"]
    with guard():   # each quadratic case took minutes at this length
        for pattern in patterns:
            compiled = re.compile(pattern)
            for text in runs:
                assert compiled.search(text) is None, (pattern, text[:10])


# -- a referenced file's name holding a NUL byte (a YAML "\0" escape) ---------------------------

@pytest.mark.parametrize("name,text", [
    ("axolotl.yaml", 'base_model: Qwen/Qwen2.5-1.5B\ndeepspeed: "a\\0b.json"\nmicro_batch_size: 1\n'
                     'sequence_len: 1024\n'),
    ("accelerate.yaml", 'compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n'
                        'deepspeed_config:\n  deepspeed_config_file: "a\\0b.json"\n'
                        'num_processes: 8\n'),
    ("run.yaml", 'defaults: "a\\0b.yaml"\ngrpo:\n  num_prompts_per_step: 8\npolicy:\n'
                 '  model_name: Qwen/Qwen2.5-1.5B\n'),
    ("run.memlint.toml", 'model = "a\\u0000b/config.json"\n'),            # scenario.py
    ("train.toml", '[model]\nname = "llama3"\nflavor = "nosuch"\nhf_assets_path = "a\\u0000b"\n'
                   '[training]\nlocal_batch_size = 1\nseq_len = 2048\n'),  # torchtitan
], ids=["axolotl", "accelerate", "nemo-rl", "memlint-toml-model", "torchtitan-hf-assets"])
def test_a_reference_holding_a_nul_byte_is_no_file_and_no_traceback(repo, name, text):
    """os.path.realpath raises ValueError on a NUL byte: loaders.inside (every reader's
    containment check) was an internal error for axolotl's and accelerate's references. Then
    inside() said False and the readers called the name "outside the repository root"; no
    file system has such a name, and the message says so."""
    (repo / name).write_text(text, encoding="utf-8")
    code, diagnostics = check_json(name)   # relative, as from a shell in the repository
    assert code in (0, 1)
    assert not [d for d in diagnostics if d["code"] == "ML009"]
    [said] = [d["message"] for d in diagnostics if "a\\x00b" in d["message"]]
    if name != "axolotl.yaml":   # axolotl's reader looks for the file itself: "not found"
        assert "is not a valid path: it contains a NUL byte" in said, said
    assert "outside" not in said, said


def test_a_run_member_holding_a_nul_byte_is_named_so(repo):
    """[tool.memlint] runs members pass runs.check_inside, which said "outside the repository
    root" of a TOML "\\u0000" name."""
    (repo / "pyproject.toml").write_text('[tool.memlint]\n[[tool.memlint.runs]]\n'
                                         'files = ["a\\u0000b.toml", "b.toml"]\n')
    code, _, err = run("check")
    assert code == 2
    assert "runs: 'a\\x00b.toml' is not a valid path: it contains a NUL byte; not read" in err
    assert "outside" not in err
