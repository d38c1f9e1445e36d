"""ML106 seq-len-beyond-positions on real model configs (fixtures/hf/SOURCES.md).

GPT-2's position table (transformers GPT2Model.wpe = nn.Embedding(n_positions, n_embd), indexed
by position_ids) has 1,024 rows: a longer sequence fails in the first forward. Qwen3-8B is a
rotary model trained to max_position_embeddings 40,960: longer runs, beyond its trained length.
"""
import json
import os

from memlint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HF = os.path.join(ROOT, "fixtures", "hf")


def run(capsys, tmp_path, model, *assignments):
    config = tmp_path / "memlint.toml"
    config.write_text("world_size = 1\n" + "".join(f"{a}\n" for a in assignments))
    code = main(["check", str(config), "--model", os.path.join(HF, model), "--format", "json",
                 "--select", "ML106"])
    found = [d for d in json.loads(capsys.readouterr()[0])["diagnostics"] if d["code"] == "ML106"]
    return code, found


def test_learned_positions_past_the_table_fail(tmp_path, capsys):
    code, [finding] = run(capsys, tmp_path, "gpt2.json", "seq_len = 2048")
    assert code == 1 and finding["severity"] == "error" and finding["line"] == 2
    assert "1024 learned positions (n_positions)" in finding["message"]
    assert run(capsys, tmp_path, "gpt2.json", "seq_len = 1024") == (0, [])


def test_a_default_seq_len_past_the_table_is_only_a_warning(tmp_path, capsys):
    code, [finding] = run(capsys, tmp_path, "gpt2.json")
    assert code == 0 and finding["severity"] == "warning"
    assert "memlint's default" in finding["message"]


def test_rope_beyond_its_trained_length_is_info(tmp_path, capsys):
    code, [finding] = run(capsys, tmp_path, "Qwen3-8B.json", "seq_len = 65536")
    assert code == 0 and finding["severity"] == "info"
    assert "trained length 40960" in finding["message"]
    assert run(capsys, tmp_path, "Qwen3-8B.json", "seq_len = 32768") == (0, [])
    assert run(capsys, tmp_path, "Qwen3-8B.json") == (0, [])  # a default says nothing here
