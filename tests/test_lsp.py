"""`memlint server` driven over stdio as an editor drives it (tests/lsp_client.py): initialize,
didOpen of a broken DeepSpeed config, publishDiagnostics at the right line, hover with GiB
figures, the did-you-mean code action, a change that fixes the file, its save, shutdown. The
protocol-free parts (memlint/lsp/analysis.py) are tested directly below."""
import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from lsp_client import Client  # noqa: E402
from memlint.document import analyze  # noqa: E402
from memlint.lsp import analysis as A  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BROKEN = """{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 1,
  "bf16": {"enabled": true},
  "zero_optimisation": {"stage": 1}
}
"""
# full recompute: the optimizer, not the activations, leads the out-of-memory verdict, which so
# points at the memlint.toml's gpu line rather than the DeepSpeed file's micro batch (DeepSpeed
# runs transformers' eager layers, whose saved activations lead at selective recompute)
RUN = ('files = ["ds_config.json"]\nmodel = "llama3-8b"\ngpu = "H100-80GB"\nworld_size = 8\n'
       'seq_len = 4096\nrecompute = "full"\n')


@pytest.fixture
def project(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "memlint.toml").write_text(RUN)
    (tmp_path / "ds_config.json").write_text(BROKEN)
    return tmp_path


def _env() -> dict:
    env = dict(os.environ, NO_COLOR="1")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.mark.slow   # a server process of its own
def test_an_editor_session_over_stdio(project, tmp_path):
    uri = (project / "ds_config.json").as_uri()
    client = Client([sys.executable, "-m", "memlint", "server", "--stdio"], str(project), _env())
    try:
        init = client.request("initialize", {"processId": os.getpid(), "rootUri":
                                             project.as_uri(), "capabilities": {},
                                             "initializationOptions": {"debounce": 0.05}})
        capabilities = init["capabilities"]
        assert capabilities["hoverProvider"] and capabilities["codeActionProvider"]
        assert init["serverInfo"]["name"] == "memlint"
        client.notify("initialized", {})
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "json", "version": 1, "text": BROKEN}})
        diagnostics = client.diagnostics(uri, version=1)
        [typo] = [d for d in diagnostics if d["code"] == "ML003"]
        assert typo["range"]["start"]["line"] == 4          # line 5: "zero_optimisation"
        assert "did you mean 'zero_optimization'" in typo["message"]
        assert typo["severity"] == 2 and typo["source"] == "memlint"

        hover = client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                      "position": {"line": 1, "character": 5}})
        text = hover["contents"]["value"]
        assert text.startswith("**micro_batch = 4**") and "GiB of 80.0 GiB" in text
        assert "| 2 | stage 0 |" in text and "| 8 | stage 0 |" in text

        actions = client.request("textDocument/codeAction", {
            "textDocument": {"uri": uri}, "range": typo["range"],
            "context": {"diagnostics": [typo]}})
        [rename] = [a for a in actions if a["title"].startswith("Rename")]
        assert rename["title"] == "Rename zero_optimisation to zero_optimization"
        [edit] = rename["edit"]["changes"][uri]
        assert edit["newText"] == "zero_optimization"
        assert edit["range"]["start"] == {"line": 4, "character": 3}
        assert any(a["title"].startswith("Suppress ML003") for a in actions)

        # the run's out-of-memory verdict points at the memlint.toml's gpu line: published there
        toml = client.diagnostics((project / "memlint.toml").as_uri())
        [oom] = [d for d in toml if d["code"] == "ML101"]
        assert oom["severity"] == 1 and "GiB" in oom["message"]

        # the editor applies the fix (incremental change): the diagnostic goes
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"range": edit["range"], "text": edit["newText"]}]})
        fixed = client.diagnostics(uri, version=2)
        assert not [d for d in fixed if d["code"] == "ML003"]
        # the editor saves it: checked again, as it is now on disk
        (project / "ds_config.json").write_text(BROKEN.replace("optimisation", "optimization"))
        client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        assert client.diagnostics(uri, version=2) == fixed
        assert client.close() == 0
    finally:
        (tmp_path / "lsp-transcript.json").write_text(json.dumps(client.transcript, indent=1))
        if client.process.poll() is None:
            client.process.kill()


def test_without_the_extra_the_server_says_how_to_get_it(monkeypatch, capsys):
    import builtins

    from memlint.cli import main

    real = builtins.__import__

    def no_pygls(name, *args, **kwargs):
        if name.startswith(("pygls", "lsprotocol")):
            raise ImportError(name=name.split(".")[0])
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_pygls)
    monkeypatch.delitem(sys.modules, "memlint.lsp.server", raising=False)
    assert main(["server"]) == 2
    assert "pip install 'memlint-llm[lsp]'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# analysis.py alone


def test_the_buffer_wins_over_the_file_on_disk(project):
    path = str(project / "ds_config.json")
    saved = analyze(path, {})
    assert any(d.code == "ML003" for d in saved.diagnostics)
    fixed = BROKEN.replace("optimisation", "optimization")
    edited = analyze(path, {path: fixed})
    assert not any(d.code == "ML003" for d in edited.diagnostics)
    # an unsaved memlint.toml buffer is the run context too
    bigger = analyze(path, {str(project / "memlint.toml"): RUN.replace("4096", "32768")})
    assert A.peak(bigger.estimate)[1] > A.peak(saved.estimate)[1]
    assert Path(path).read_text() == BROKEN   # nothing written


def test_hover_shows_the_peak_at_the_neighbour_values(project):
    found = analyze(str(project / "ds_config.json"), {})
    text = A.hover(found, 2, 4)
    assert text.splitlines()[0].startswith("**micro_batch = 4**: stage 0 peaks at ")
    assert "(now)" in text and "| 2 |" in text and "| 8 |" in text
    assert A.hover(found, 1, 1) is None                      # the opening brace: nothing
    zero = A.hover(found, 5, 4)   # the typo'd block sets nothing: no figures claimed
    assert zero is None or "zero" in zero


def test_the_suppress_action_for_json_adds_the_native_key(project):
    path = str(project / "ds_config.json")
    found = analyze(path, {})
    [suppress] = [a for a in A.actions(found, BROKEN, 5, 5) if a.title.startswith("Suppress")]
    [edit] = suppress.edits
    lines = BROKEN.splitlines(keepends=True)
    assert edit.start == edit.end == (1, 2)
    text = lines[0][:1] + edit.text + lines[0][1:] + "".join(lines[1:])
    assert json.loads(text)["memlint"] == {"disable": ["ML003"]}
    again = analyze(path, {path: text})
    assert not any(d.code == "ML003" for d in again.diagnostics)


def test_an_unused_suppression_is_removed_by_its_quick_fix(project):
    from memlint.fixes import apply

    path = str(project / "ds_config.json")
    text = BROKEN.replace('{\n', '{\n  "memlint": {"disable": ["ML003", "duplicate-key"]},\n', 1)
    found = analyze(path, {path: text})
    [unused] = [d for d in found.diagnostics if d.code == "ML011"]
    assert (unused.line, unused.key) == (2, "duplicate-key")
    [remove] = A.actions(found, text, 2, 2)
    assert remove.title == "Remove the unused suppression of duplicate-key" and remove.preferred
    fixed = apply(text, remove.edits)
    assert json.loads(fixed)["memlint"] == {"disable": ["ML003"]}
    assert not [d for d in analyze(path, {path: fixed}).diagnostics if d.code in ("ML011", "ML003")]
    # the last name takes the whole member (and its line) with it
    text = BROKEN.replace('{\n', '{\n  "memlint": {"disable": ["duplicate-key"]},\n', 1)
    [remove] = A.actions(analyze(path, {path: text}), text, 2, 2)
    assert apply(text, remove.edits) == BROKEN
    # a comment directive: the name, then the comment (alone on its line: the line)
    toml = str(project / "memlint.toml")
    run = RUN + "# memlint: disable=ML204,ML001\ntp = 1\n"
    found = analyze(toml, {toml: run})
    assert [d.key for d in found.diagnostics if d.code == "ML011"] == ["ml001", "ml204"]
    first = apply(run, A.actions(found, run, 7, 7)[0].edits)
    assert first.endswith("# memlint: disable=ML204\ntp = 1\n")
    second = analyze(toml, {toml: first})
    assert apply(first, A.actions(second, first, 7, 7)[0].edits) == RUN + "tp = 1\n"


def test_a_shell_suppression_goes_before_the_whole_continued_command(tmp_path):
    (tmp_path / ".git").mkdir()
    script = ("#!/bin/bash\ntorchrun pretrain_gpt.py \\\n  --num-layers 2 --hidden-size 64 \\\n"
              "  --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 \\\n"
              "  --micro-batch-size 1 --global-batch-size 8 \\\n  --sequence-parallel\n")
    path = tmp_path / "train.sh"
    path.write_text(script)
    found = analyze(str(path), {})
    [sp] = [d for d in found.diagnostics if d.code == "ML402"]
    assert sp.line > 2
    [suppress] = [a for a in A.actions(found, script, sp.line, sp.line)
                  if a.title.startswith("Suppress")]
    [edit] = suppress.edits
    assert edit.start == (2, 1)          # before `torchrun`, not before the flag's line
    lines = script.splitlines(keepends=True)
    text = "".join(lines[:1]) + edit.text + "".join(lines[1:])
    assert not any(d.code == "ML402" for d in analyze(str(path), {str(path): text}).diagnostics)


# ---------------------------------------------------------------------------------------------
# editors/


EDITORS = os.path.join(ROOT, "editors")


@pytest.mark.slow   # a Node process driving a server process
@pytest.mark.skipif(__import__("shutil").which("node") is None, reason="node is not installed")
def test_the_vscode_extensions_driver_script_passes():
    import subprocess

    done = subprocess.run(["node", os.path.join(EDITORS, "vscode", "test", "drive-server.js"),
                           f"{sys.executable} -m memlint"], env=_env(), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hover, quick fix, shutdown: ok" in done.stdout


def test_the_editor_set_ups_start_memlint_server_on_the_files_it_reads():
    from memlint.schemas.catalog import DEEPSPEED_FILES

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    with open(os.path.join(EDITORS, "vscode", "package.json"), encoding="utf-8") as handle:
        package = json.load(handle)
    [validation] = package["contributes"]["jsonValidation"]
    assert validation["fileMatch"] == DEEPSPEED_FILES
    assert validation["url"] == "./schemas/deepspeed.schema.json"
    assert package["main"] == "./extension.js"
    assert package["version"] == __import__("memlint").__version__
    settings = open(os.path.join(EDITORS, "vscode", "lib", "settings.js")).read()
    assert "args: ['server', '--stdio']" in settings
    with open(os.path.join(EDITORS, "helix", "languages.toml"), "rb") as handle:
        helix = tomllib.load(handle)
    assert helix["language-server"]["memlint"] == {"command": "memlint",
                                                   "args": ["server", "--stdio"],
                                                   "config": {"set": [], "debounce": 0.3}}
    assert all("memlint" in lang["language-servers"] for lang in helix["language"])
    neovim = open(os.path.join(EDITORS, "neovim", "memlint.lua")).read()
    assert "cmd = { 'memlint', 'server', '--stdio' }" in neovim
