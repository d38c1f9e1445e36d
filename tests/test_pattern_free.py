"""String tests that stand for regular expressions on the start-up path (issue 29: compiling a
pattern costs a one-file check about 0.5-3M instructions): each answers as its pattern does."""
import re

from hypothesis import given, settings, strategies as st

from memlint import keys, runs
from memlint.adapters import detection
from memlint.adapters.megatron import context, interpret
from memlint.catalog import nodes

# texts made of the pieces the patterns look for, so that matches are common
PIECES = ["\n", " ", "\t", "_", "-", ":", "a", "z", "K", "base_model:", "stage", "model_parallel",
          "actor_rollout_ref:", "template", "finetuning_type", "/", ".py", "mimo/", "train",
          "pretrain_mimo", "pretrain_t5.py", "memlint", ".memlint.", "toml", "yaml", "yml", "TOML",
          "\u0131", "\u212a", "0", "7", "\x1c", "\u2003"]
texts = st.lists(st.sampled_from(PIECES), max_size=14).map("".join)
SETTINGS = settings(max_examples=400, deadline=None)


@SETTINGS
@given(texts, st.lists(st.sampled_from(["base_model:", "stage:", "a", ":", "model_parallel:"]),
                       min_size=1, max_size=3))
def test_line_starts_is_a_multiline_caret(text, prefixes):
    pattern = "^(?:%s)" % "|".join(map(re.escape, prefixes))
    assert detection.line_starts(text, *prefixes) == bool(re.search(pattern, text, re.M))


@SETTINGS
@given(texts)
def test_top_level_names_are_the_finditer_groups(text):
    expected = [m.group(1) for m in re.finditer(r"^([a-z][a-z_-]+):", text, re.M)]
    assert detection.top_level_names(text) == expected


@SETTINGS
@given(texts)
def test_node_names_normalise_as_the_substitution(text):
    assert nodes._norm(text) == re.sub(r"[\s_]+", "-", text.strip().lower())


@SETTINGS
@given(texts)
def test_run_file_names(text):
    assert runs.run_file_name(text) == (runs.RUN_FILE_NAMES.compiled.match(text) is not None)


@SETTINGS
@given(texts, st.lists(st.sampled_from(["pretrain_t5.py", "train.py", "a"]), min_size=1,
                       max_size=2))
def test_script_ends_is_a_dollar_search(text, ends):
    pattern = "(?:%s)$" % "|".join(map(re.escape, ends))
    assert context.script_ends(text, *ends) == bool(re.search(pattern, text))


@SETTINGS
@given(texts | st.sampled_from(["12", "007", "\u0661\u0662", "\u00b2", "3_0"]))
def test_integers_read_without_the_pattern_are_the_patterns(text):
    # keys.to_int reads an ASCII digit string without _INTEGER: each is one that it matches
    if text.isascii() and text.isdigit():
        assert keys._INTEGER.fullmatch(text) and keys.to_int(text) == int(text)


@SETTINGS
@given(texts)
def test_the_mimo_script_test_is_the_pattern(text):
    pattern = re.compile(r"(^|/)mimo/(train|pretrain_mimo)\.py$")
    for script in (text, text + "mimo/train.py", text + "/mimo/pretrain_mimo.py\n"):
        assert interpret.mimo_script(script) == bool(pattern.search(script)), script


ID_PIECES = ["a", "Z", "0", ".", "_", "-", "/", "\n", " ", "é", "b" * 40, "c" * 57]
ids = st.lists(st.sampled_from(ID_PIECES), max_size=8).map("".join)


@SETTINGS
@given(ids)
def test_hub_repo_ids(text):
    from memlint.catalog import hub
    assert hub.repo_id(text) == (hub._REPO_ID.compiled.match(text) is not None)


@SETTINGS
@given(texts | st.sampled_from(["${A}", "$HOME/x", "a $(date) b", "$", "${unclosed"]))
def test_dollar_references(text):
    from memlint.adapters.megatron.readers import dollar_refs
    expected = tuple(f"{m.group(0)} (not set in this file)"
                     for m in re.finditer(r"\$\{[^}]*\}|\$[A-Za-z_0-9]+|\$\([^)]*\)", text))
    assert dollar_refs(text) == expected


KIND_PIECES = ["grpo", "dpo", "online_dpo", "reward", "reward_model", "rewardmodel", "ppo", "/",
               "_", "-", ".", " ", "x", "trl", "\n"]


@SETTINGS
@given(st.lists(st.sampled_from(KIND_PIECES), max_size=6).map("".join))
def test_trainer_kinds(script):
    from memlint.adapters import trl_rl
    text = f"{script} cfg.yaml".lower()
    expected = None
    for kind in trl_rl.KINDS:
        if re.search(rf"(^|[\s/_\-.]){kind}([\s/_\-.]|$)", text):
            expected = kind
            break
    if expected is None and re.search(r"(^|[/_\-.])reward_?model", text):
        expected = "reward"
    assert trl_rl.trainer_kind({}, "cfg.yaml", script) == expected   # no arguments: names only


@SETTINGS
@given(texts | st.sampled_from(["a\\b", "it's", '"x"', "$A", "`date`", "# c", "plain --flag 1"]))
def test_argument_file_lines_needing_the_shell_reader(line):
    from memlint.adapters.megatron import readers
    found = readers._SPECIAL.compiled.search(line)
    assert any(c in line for c in readers._SPECIAL_CHARS) == bool(found)


LEADING_PIECES = ["\ufeff", " ", "\t", "\r", "\n", "#", "# c\n", "//", "/*", "*/", "/*/", "-", "---",
                  "--", "{", "a:", "x", "/"]


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(LEADING_PIECES), max_size=10).map("".join))
def test_leading_comments_end_where_the_pattern_ends(head):
    from memlint.adapters import _toplevel
    assert _toplevel.leading_end(head) == _toplevel._LEADING.compiled.match(head).end()


FLAG_PIECES = ["--num-layers", "--hidden-size", "--num-attention-heads", "--tensor-model-parallel-size",
               "--micro-batch-size", "--pipeline-model-parallel-size", "-", "--", "s", "_", "0",
               "\u00e9", "\u0661", " ", "\t", "\n", "\r", "=", "#", "x"]
flag_texts = st.lists(st.sampled_from(FLAG_PIECES), max_size=10).map("".join)


@SETTINGS
@given(flag_texts)
def test_flag_given_is_the_flag_search(text):
    from memlint.adapters import _neighbours
    names = _neighbours._MEGATRON_FLAGS
    anywhere = r"--(%s)\b" % "|".join(map(re.escape, names))
    assert _neighbours.flag_given(text, names) == bool(re.search(anywhere, text))
    names = detection._MEGATRON_ARGS_FILE_FLAGS
    line = r"^[ \t]*--(%s)\b" % "|".join(map(re.escape, names))
    assert detection.flag_given(text, names, line_start=True) == bool(re.search(line, text, re.M))


LAUNCHER_PIECES = ["#", " ", "\t", "\u2003", "\x1c", "launcher:", "LAUNCHER:", "Launcher", ":",
                   "launcheR:", "torchrun", "x", "\u212a", "(", "\u0131"]


@SETTINGS
@given(st.lists(st.sampled_from(LAUNCHER_PIECES), max_size=8).map("".join))
def test_launcher_lines_are_the_patterns(line):
    from memlint.adapters.megatron import readers
    found = readers._LAUNCHER_LINE.compiled.match(line)
    assert readers._launcher_start(line) == (found.start(1) if found else None)


@SETTINGS
@given(texts | st.sampled_from(["a  b\tc\r\nd", " --x 1 ", "\u2003a\x1cb"]))
def test_argument_file_words_are_the_blank_separated_runs(line):
    from memlint.adapters.megatron import readers
    if any(c in line for c in readers._SPECIAL_CHARS):
        return   # the shell reader's lines
    got = [(w, p.column) for w, p, _ in readers._line_words("f", line, 1, 4)]
    assert got == [(m.group(0), 4 + m.start() + 1) for m in re.finditer(r"[^ \t\r\n]+", line)]


NODE_PIECES = ["${", "}", ":-", "-", " ", "SLURM_NNODES", "nnodes", "Num_Nodes", "WORLD_SIZE",
               "node_count", "NODES", "X", "\u017f", "$", "{"]


@SETTINGS
@given(st.lists(st.sampled_from(NODE_PIECES), max_size=8).map("".join))
def test_node_default_pre_test_never_hides_a_match(text):
    from memlint.adapters import megatron
    if megatron._NODE_DEFAULT.compiled.search(text):
        assert megatron._may_default_nodes(text)


ENTRY_PIECES = ["pretrain_", "train", "finetune", "_training", "main", "gpt", "_", "\n", "x"]


@SETTINGS
@given(st.lists(st.sampled_from(ENTRY_PIECES), max_size=5).map("".join))
def test_training_entry_names(stem):
    from memlint.adapters.megatron import entry
    if stem.startswith(("pretrain_", "train", "finetune")) and "\n" not in stem:
        # the shortcut in entry.kind answers "training" only where the pattern does
        assert entry._TRAINING.compiled.match(stem)


TOML_KEY_PIECES = ["a", "b_c", ".", " ", "\t", "\u2003", "-", '"q.r"', "'s'", '"', "'", "1"]


@SETTINGS
@given(st.lists(st.sampled_from(TOML_KEY_PIECES), max_size=8).map("".join))
def test_toml_key_parts_without_quotes_are_the_patterns(raw):
    from memlint import loaders
    parts = []
    for part in re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', raw):
        part = part.strip()
        if part:
            parts.append(part[1:-1] if part[:1] in "\"'" else part)
    assert loaders._toml_key_parts(raw) == tuple(parts)


TOML_LINE_PIECES = ["[", "]", "[[", "]]", " ", "\t", "#", "a", "b-c", ".", "=", '"q"', "'s'", '"',
                    "x y", "\u00e9", "1", "\u2003", "# c"]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(TOML_LINE_PIECES), max_size=9).map("".join))
def test_toml_line_tests_are_the_patterns(line):
    from memlint import loaders
    header = loaders._TOML_HEADER.compiled.fullmatch(line)
    assert loaders._toml_header(line) == (header.group(1) if header else None)
    key = loaders._TOML_KEY.compiled.match(line)
    assert loaders._toml_key(line) == ((key.group(1), key.end()) if key else None)
