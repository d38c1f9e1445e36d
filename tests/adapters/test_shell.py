"""The one static shell reader (memlint.adapters._shell) as the Megatron and torchtitan adapters
use it: `sh -c` / `bash -c` strings (behind `srun`), `$(( ))` over known integers, `case`
branches chosen by the value, #SBATCH counts for the world size, and helper commands that are
not the launch. Issue 14 ("Shell reading")."""
from __future__ import annotations

from memlint.adapters import _shell, megatron, torchtitan

MODEL = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
         "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 "
         "--vocab-size 32000 --bf16")


def load(tmp_path, text, name="train.sh"):
    path = tmp_path / name
    path.write_text(text)
    return megatron.load(str(path), text)


def value(partial, key):
    setting = partial.settings.get(key)
    return None if setting is None else setting.value


def test_srun_bash_c_string_is_read(tmp_path):
    text = ("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=h100:8\n"
            f'run_cmd="torchrun --nproc_per_node $SLURM_GPUS_PER_NODE --nnodes $SLURM_NNODES '
            f'pretrain_gpt.py --tensor-model-parallel-size 4 {MODEL}"\n'
            'srun --container-image x sh -c "$run_cmd"\n')
    partial = load(tmp_path, text)
    assert value(partial, "tp") == 4
    assert value(partial, "world_size") == 16
    tp = partial.settings["tp"].prov
    line = text.splitlines()[3]  # where the script wrote it, inside run_cmd
    assert (tp.line, tp.column) == (4, line.index("--tensor-model-parallel-size") + 1)


def test_bash_c_single_quoted_literal(tmp_path):
    text = f"bash -lc 'torchrun --nproc_per_node 8 pretrain_gpt.py --pipeline-model-parallel-size 2 {MODEL}'\n"
    partial = load(tmp_path, text)
    assert value(partial, "pp") == 2 and value(partial, "world_size") == 8


def test_nested_shells_stop(tmp_path):
    inner = "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2"
    for _ in range(8):
        inner = "sh -c " + repr(inner).replace("'", "'\\''").join(["'", "'"])[1:-1]
    partial = load(tmp_path, inner + "\n")  # deep nesting is read no further, never a crash
    assert all(d.code != "ML009" for d in partial.diagnostics)


def test_arithmetic_reveals_pp_over_layers(tmp_path):
    text = ("LAYERS_PER_STAGE=3\nPP=8\nNUM_LAYERS=$((LAYERS_PER_STAGE * PP + 1))\n"
            "torchrun --nproc_per_node 8 pretrain_gpt.py --pipeline-model-parallel-size $PP "
            "--num-layers $NUM_LAYERS --hidden-size 1024 --num-attention-heads 8\n")
    partial = load(tmp_path, text)
    assert value(partial, "model.num_hidden_layers") == 25 and value(partial, "pp") == 8


def test_world_size_from_nnodes_times_gpus(tmp_path):
    text = ("#SBATCH --nodes=4\nGPUS_PER_NODE=8\nNNODES=$SLURM_NNODES\n"
            "WORLD_SIZE=$((NNODES*GPUS_PER_NODE))\n"
            f"srun python pretrain_gpt.py --tensor-model-parallel-size 8 {MODEL}\n")
    partial = load(tmp_path, text)
    # `srun python` without --ntasks-per-node: one task per node, as SLURM starts it
    assert value(partial, "world_size") in (None, 4)
    text = text.replace("#SBATCH --nodes=4\n", "#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=8\n")
    assert value(load(tmp_path, text), "world_size") == 32


def test_case_branch_chosen_by_value(tmp_path):
    text = ("MODEL_SIZE=70B\n"
            "case $MODEL_SIZE in\n"
            "  8B) TP=1 ;;\n"
            "  70B|405B)\n"
            "    TP=8\n"
            "    ;;\n"
            "  *) TP=2 ;;\n"
            "esac\n"
            f"torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size $TP {MODEL}\n")
    assert value(load(tmp_path, text), "tp") == 8
    assert value(load(tmp_path, text.replace("=70B", "=8B")), "tp") == 1
    assert value(load(tmp_path, text.replace("=70B", "=13B")), "tp") == 2
    one_line = ('case "$MODEL_SIZE" in 8B) TP=1;; 70B) TP=4;; esac\n'
                f"torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size $TP {MODEL}\n")
    assert value(load(tmp_path, "MODEL_SIZE=70B\n" + one_line), "tp") == 4


def test_case_on_unknown_value_reads_first_branch_and_says_so(tmp_path):
    text = ("case $1 in\n  small) TP=1 ;;\n  big) TP=8 ;;\nesac\n"
            f"torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size $TP {MODEL}\n")
    partial = load(tmp_path, text)
    assert value(partial, "tp") == 1
    assert any("case $1" in d.message and d.severity.label == "info" for d in partial.diagnostics)


def test_helper_command_is_not_the_launch(tmp_path):
    text = ("python tools/preprocess_data.py --input data.json --output-prefix x "
            "--tokenizer-type GPT2BPETokenizer --workers 8\n"
            f"torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 {MODEL}\n")
    partial = load(tmp_path, text)
    assert value(partial, "tp") == 2
    assert not any("--input" in d.message for d in partial.diagnostics)


def test_if_inside_case_and_case_inside_if():
    script = _shell.parse("A=x\nif [ $A == x ]; then\n case $A in x) B=1;; *) B=2;; esac\n"
                          "else\n B=3\nfi\n")
    interpreter = _shell.Interpreter()
    list(interpreter.run(script))
    assert interpreter.env["B"].text == "1"


def test_torchtitan_reads_through_the_shell_reader(tmp_path):
    (tmp_path / ".git").mkdir()
    script = tmp_path / "run.sh"
    script.write_text('NGPU=${NGPU:-4}\nTP=$(( NGPU / 2 ))\nif [ "$NGPU" -gt 2 ]; then\n'
                      '  EXTRA="--training.seq_len 8192"\nfi\n'
                      'srun bash -c "NGPU=$NGPU ./run_train.sh '
                      '--parallelism.tensor_parallel_degree $TP $EXTRA"\n')
    partial = torchtitan.load(str(script), script.read_text())
    assert partial.settings["world_size"].value == 4
    assert partial.settings["tp"].value == 2
    assert partial.settings["seq_len"].value == 8192
    assert partial.settings["tp"].prov.line == 6


def test_here_document_bodies_are_data_not_shell():
    """A heredoc body (a hostfile, a notes file) may hold any text, an apostrophe included;
    bash reads it as data, so must the reader (it was a false 'unterminated quote' error)."""
    text = ("cat <<EOF > notes.txt\nit's a note\nEOF\n"
            "cat <<-'END' > hostfile\n\tnode1 slots=8 # it's\n\tEND\n"
            "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2\n")
    words = [[w.raw for w in c.words] for c in _shell._Lexer(text).commands()]
    assert words == [["cat"], ["cat"],   # redirections are not words
                     ["torchrun", "--nproc_per_node", "8", "pretrain_gpt.py", "--num-layers", "2"]]


def test_origins_of_every_character_survive_runs_and_quotes():
    # Issue 19 (3): the lexer takes runs of ordinary characters at once; every character of a
    # field must still point at the offset it came from, through quotes, escapes and variables.
    text = 'X="b c"\necho ab\'cd\'"e$X"f\\ g plain-word --k=v\n'
    script = _shell.parse(text)
    fields = [f for cmd in _shell.Interpreter().run(script) for f in cmd.fields]
    assert [f.text for f in fields] == ["echo", "abcdeb cf g", "plain-word", "--k=v"]
    for f in fields:
        assert len(f.origins) == len(f.text)
        assert all(text[o] == ch for o, ch in zip(f.origins, f.text)), f.text


def test_many_redirections_and_heredocs_lex_in_one_pass():
    # `2>x` was matched against a copy of the rest of the text (quadratic in the script size)
    text = "cmd 2>err >out <in --flag 1\n" * 2000 + "cat <<EOF\nbody\nEOF\nlast --a 1\n"
    words = [[w.raw for w in c.words] for c in _shell._Lexer(text).commands()]
    assert words[:2] == [["cmd", "--flag", "1"]] * 2 and len(words) == 2002
    assert words[-1] == ["last", "--a", "1"]
