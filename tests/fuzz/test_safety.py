"""Safe parsing: no code execution, bounded work on hostile files, no network, no reads outside
the repository root without --allow-outside-root."""
from __future__ import annotations

import json
import os
import socket
import time
import tracemalloc

import pytest

from memlint import cli


# Bounded work is bounded CPU time (time.process_time: what other processes on a loaded machine
# take does not count), far above what these inputs take (milliseconds) and far below what the
# unbounded work would (an alias bomb expanded, a quadratic or recursive parse: minutes).
CPU_BOUND = 5.0


def check(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def diagnostics(argv, capsys):
    code, out, err = check(["check", "--format", "json", *argv], capsys)
    assert code in (0, 1), err
    return code, json.loads(out)["diagnostics"]


# ---------------------------------------------------------------------------------------------
# YAML


def test_python_tags_are_rejected_not_constructed(repo, capsys):
    marker = repo / "pwned"
    (repo / "acc.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\n"
        f"num_processes: !!python/object/apply:os.system ['touch {marker}']\n")
    code, found = diagnostics(["acc.yaml"], capsys)
    assert code == 1 and not marker.exists()
    parse = [d for d in found if d["code"] == "ML001"]
    assert parse and "python/object/apply" in parse[0]["message"] and parse[0]["line"] == 3


@pytest.mark.parametrize("width", [9, 30])
def test_alias_bomb_rejected_fast_with_bounded_memory(repo, capsys, width):
    # "billion laughs": 9 levels of 9 (or 30) aliases each = 9**9 (30**9) leaves if expanded
    lines = ["memlint:", '  a0: &a0 ["lol"]']
    for level in range(1, 10):
        refs = ", ".join(f"*a{level - 1}" for _ in range(width))
        lines.append(f"  a{level}: &a{level} [{refs}]")
    (repo / "bomb.memlint.yaml").write_text("\n".join(lines) + "\n")
    tracemalloc.start()
    started = time.process_time()
    code, found = diagnostics(["bomb.memlint.yaml"], capsys)
    cpu = time.process_time() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert cpu < CPU_BOUND, cpu
    assert peak < 64 * 1024 * 1024, peak
    errors = [d for d in found if d["code"] == "ML001" and d["severity"] == "error"]
    assert code == 1 and errors and "alias" in errors[0]["message"]
    assert errors[0]["line"] is not None


@pytest.mark.parametrize("name,text", [
    ("deep.json", "[" * 100_000 + "]" * 100_000),
    ("deep.memlint.yaml", "memlint:\n  x: " + "[" * 100_000 + "]" * 100_000 + "\n"),
    ("deep.memlint.toml", "x = " + "[" * 100_000 + "]" * 100_000 + "\n"),
    ("deep2.memlint.yaml", "memlint:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 400))),
    # compact block sequences nest without indentation; libyaml (C) would overflow its stack
    ("deep3.memlint.yaml", "memlint:\n  x: \n    " + "- " * 100_000 + "x\n"),
])
def test_deep_nesting_is_a_parse_error(repo, capsys, name, text):
    if name.endswith(".json"):
        text = '{"train_batch_size": 8, "x": ' + text + "}"
        name = "ds_config.json"
    (repo / name).write_text(text)
    started = time.process_time()
    code, found = diagnostics([name], capsys)
    assert time.process_time() - started < CPU_BOUND
    assert code == 1
    assert any(d["code"] == "ML001" and d["line"] is not None for d in found), found


def test_file_size_limit(repo, capsys):
    small = repo / "ds_small.json"
    small.write_text('{"train_batch_size": 8, "pad": "' + "x" * 3000 + '"}')
    code, found = diagnostics(["--max-file-size", "2KiB", "ds_small.json"], capsys)
    assert code == 1 and "2048-byte limit" in found[0]["message"]
    big = repo / "ds_config.json"
    big.write_text('{"train_batch_size": 8, "pad": "' + "x" * (5 * 1024 * 1024) + '"}')
    tracemalloc.start()   # refused unread: a read of the 5 MiB file would hold 5 MiB at once
    code, found = diagnostics(["ds_config.json"], capsys)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1024 * 1024, peak
    assert code == 1 and "limit" in found[0]["message"] and found[0]["path"]
    code, _ = diagnostics(["--max-file-size", "8MiB", "ds_config.json"], capsys)
    code, _, err = check(["check", "--max-file-size", "lots", "ds_small.json"], capsys)
    assert code == 2 and "--max-file-size" in err


def test_model_config_obeys_the_size_limit(repo, capsys):
    (repo / "config.json").write_text('{"model_type": "llama", "pad": "' + "x" * 4000 + '"}')
    (repo / "run.memlint.toml").write_text('model = "config.json"\n')
    code, found = diagnostics(["--max-file-size", "2KiB", "run.memlint.toml"], capsys)
    assert any("limit" in d["message"] for d in found)


# ---------------------------------------------------------------------------------------------
# Shell scripts are read, never run


SCRIPT = """#!/bin/bash
set -e
touch {marker}-plain
OUT=$(touch {marker}-subst; echo 8)
TP=`touch {marker}-backtick; echo 2`
source ./{marker_name}-sourced.sh
. ./{marker_name}-sourced.sh
eval "touch {marker}-eval"
exec touch {marker}-exec
python -c "open('{marker}-python', 'w')"
torchrun --nproc_per_node 8 pretrain_gpt.py \\
    --tensor-model-parallel-size $(touch {marker}-arg; echo 2) \\
    --num-layers 2 --hidden-size 256 --num-attention-heads 8 --seq-length 128 \\
    --micro-batch-size 1 --global-batch-size 8 --max-position-embeddings 128 \\
    --deepspeed_config $(touch {marker}-ds; echo ds.json) --bf16
"""


def test_shell_scripts_are_never_executed(repo, capsys, monkeypatch):
    marker = repo / "pwned"
    (repo / "pwned-sourced.sh").write_text(f"touch {marker}-from-source\n")
    (repo / "train.sh").write_text(SCRIPT.format(marker=marker, marker_name="pwned"))
    import subprocess

    def forbidden(*args, **kwargs):
        raise AssertionError("memlint tried to run a process")

    for name in ("Popen", "run", "call", "check_call", "check_output"):
        monkeypatch.setattr(subprocess, name, forbidden)
    monkeypatch.setattr(os, "system", forbidden)
    monkeypatch.setattr(os, "popen", forbidden)
    for name in ("execv", "execve", "execvp", "execvpe", "spawnv", "spawnve", "posix_spawn",
                 "fork"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, forbidden)
    code, out, err = check(["check", "--format", "json", "train.sh"], capsys)
    assert code in (0, 1), err
    assert json.loads(out)["diagnostics"] is not None
    assert sorted(p.name for p in repo.iterdir() if p.name.startswith("pwned")) == \
        ["pwned-sourced.sh"]


# ---------------------------------------------------------------------------------------------
# No network


@pytest.mark.slow  # every fixture and real config, twice: ~8 s
def test_no_network_during_a_full_run(repo, capsys, monkeypatch):
    from fuzz.mutate import FIXTURES  # fixtures/shared-real among them

    def forbidden(*args, **kwargs):
        raise AssertionError("memlint opened a network connection")

    import urllib.request

    for name in ("__init__", "connect", "connect_ex", "bind", "sendto"):
        monkeypatch.setattr(socket.socket, name, forbidden)
    for name in ("create_connection", "getaddrinfo", "gethostbyname", "socketpair"):
        monkeypatch.setattr(socket, name, forbidden)
    monkeypatch.setattr(urllib.request, "urlopen", forbidden)
    files = []
    for folder, _dirs, names in os.walk(FIXTURES):
        files += [os.path.join(folder, n) for n in names
                  if n.endswith((".json", ".yaml", ".yml", ".toml", ".sh", ".txt"))
                  and not n.startswith("_expect")]
    assert files
    for args in ([], ["--model", "llama3-8b"]):
        code, out, err = check(["check", "--format", "sarif", "--allow-outside-root", *args,
                                *sorted(files)], capsys)
        assert code in (0, 1), err
    code, out, err = check(["estimate", "--model", "seed-m3", "--set", "profile=seed"], capsys)
    assert code in (0, 1), err


# ---------------------------------------------------------------------------------------------
# Paths in configs stay inside the repository root


@pytest.fixture
def outside(tmp_path_factory):
    """A directory outside the repository, holding a config.json and a DeepSpeed JSON."""
    where = tmp_path_factory.mktemp("outside")
    (where / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128}))
    (where / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, '
                                   '"zero_optimization": {"stage": 3}}')
    (where / "other.memlint.toml").write_text("tp = 2\n")
    return where


def _outside_messages(found):
    return [d for d in found if "outside th" in d["message"]]


REFERENCES = {
    "memlint.toml model": ("run.memlint.toml", 'model = "{rel}/config.json"\n'),
    "memlint.toml [model] path": ("run.memlint.toml", '[model]\npath = "{rel}"\n'),
    "memlint.toml absolute model": ("run.memlint.toml", 'model = "{abs}/config.json"\n'),
    "memlint.toml files": ("run.memlint.toml", 'files = ["{rel}/other.memlint.toml"]\n'),
    "accelerate deepspeed_config_file": (
        "acc.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n"
        "num_processes: 8\ndeepspeed_config:\n  deepspeed_config_file: {rel}/ds.json\n"),
    "axolotl deepspeed": (
        "axolotl.yaml", "base_model: meta-llama/Llama-3.1-8B\nsequence_len: 2048\n"
        "micro_batch_size: 1\ngradient_accumulation_steps: 1\ndeepspeed: {rel}/ds.json\n"),
    "megatron --deepspeed_config": (
        "train.sh", "torchrun pretrain_gpt.py --num-layers 2 --hidden-size 64 "
        "--num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 "
        "--micro-batch-size 1 --deepspeed_config {rel}/ds.json\n"),
    "torchtitan hf_assets_path": (
        "job.toml", '[job]\ndump_folder = "./out"\n[model]\nname = "llama3"\nflavor = "custom"\n'
        'hf_assets_path = "{rel}"\n[training]\nlocal_batch_size = 1\nseq_len = 64\n'),
}


@pytest.mark.parametrize("kind", sorted(REFERENCES))
def test_references_outside_the_root_are_not_followed(repo, capsys, outside, kind, monkeypatch):
    name, template = REFERENCES[kind]
    rel = os.path.relpath(outside, repo)
    (repo / name).write_text(template.format(rel=rel, abs=outside))
    opened = []
    real_open = open

    def spy(path, *args, **kwargs):
        if isinstance(path, (str, os.PathLike)) and str(outside) in os.path.abspath(path):
            opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", spy)
    code, found = diagnostics([name], capsys)
    assert not opened, opened
    assert _outside_messages(found), (kind, found)
    monkeypatch.setattr("builtins.open", real_open)
    if kind.startswith(("memlint.toml", "megatron", "axolotl")):
        # with the flag the reference is followed (accelerate and torchtitan never follow one)
        code, out, err = check(["check", "--format", "json", "--allow-outside-root", name],
                               capsys)
        assert code in (0, 1), err
        assert not _outside_messages(json.loads(out)["diagnostics"])


def test_symlink_out_of_the_root_is_not_followed(repo, capsys, outside):
    os.symlink(outside, repo / "link")
    (repo / "run.memlint.toml").write_text('model = "link/config.json"\nfiles = ["link/ds.json"]\n')
    code, found = diagnostics(["run.memlint.toml"], capsys)
    assert len(_outside_messages(found)) == 2, found


def test_command_line_model_may_be_anywhere(repo, capsys, outside):
    code, out, err = check(["estimate", "--format", "json", "--model",
                            str(outside / "config.json")], capsys)
    assert code in (0, 1), err
    assert json.loads(out)["estimates"]


# ---------------------------------------------------------------------------------------------
# Plugin discovery without importlib.metadata


def test_plugin_scan_finds_declared_groups(tmp_path, monkeypatch):
    from memlint import plugins

    dist = tmp_path / "thing-1.0.dist-info"
    dist.mkdir()
    (dist / "entry_points.txt").write_text("[console_scripts]\nx = y:z\n\n[memlint.rules]\n"
                                           "mine = mypkg.rules\n")
    monkeypatch.setattr("sys.path", [str(tmp_path)])
    assert plugins.declared("memlint.rules")
    assert not plugins.declared("memlint.adapters")
    zipped = tmp_path / "lib.zip"
    zipped.write_bytes(b"PK")
    monkeypatch.setattr("sys.path", [str(tmp_path), str(zipped)])
    assert plugins.declared("memlint.adapters")  # unreadable by a scan: ask importlib.metadata
