"""Issue 19's reproducers, each in its own process in an empty repository: CPU time, peak RSS and
exit code (targets: under 1 s of CPU, under 100 MB, the exit code DESIGN.md gives).

    python bench/hardening.py

CPU time (user + system, from wait4) rather than wall time, so that a loaded machine does not
change the verdict; tests/fuzz/test_hardening.py pins the behaviour behind each number.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MEMLINT = [sys.executable, "-m", "memlint"]
BIG = "1" * 5000
ARGS = ("--hidden-size 1024 --num-attention-heads 8 --seq-length 1024 "
        "--max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 8 "
        "--vocab-size 32000")

CASES = [
    ("1 doubled variable", {"pretrain_chain.sh": "V0=ab\n" + "".join(
        f"V{i}=$V{i - 1}$V{i - 1}\n" for i in range(1, 40))
        + "torchrun pretrain_gpt.py --num-layers 2 --tokenizer-model $V39\n"},
     ["check", "pretrain_chain.sh"], (0, 1)),
    ("1 doubled array", {"pretrain_arr.sh": "A=(x)\n" + 'A=("${A[@]}" "${A[@]}")\n' * 40
                         + "torchrun pretrain_gpt.py ${A[@]} --num-layers 2\n"},
     ["check", "pretrain_arr.sh"], (0, 1)),
    ("2 list expression *3000", {"args.txt": "--num-layers 2\n--num-experts 8\n"
                                             "--moe-layer-freq [0]*100000*3000\n"},
     ["check", "args.txt"], (0, 1)),
    ("2 list expression + x20000", {"args.txt": "--num-layers 2\n--num-experts 8\n"
                                                "--moe-layer-freq " + "+".join(["[0]*9"] * 20000)
                                                + "\n"}, ["check", "args.txt"], (0, 1)),
    ("3 30,000 unknown flags", {"train.sh": "torchrun pretrain_gpt.py --num-layers 2 " + " ".join(
        f"--unknown-flag-{i} 1" for i in range(30000)) + "\n"}, ["check", "train.sh"], (0, 1)),
    ("3 args file, 30,000 unknown flags", {"args.txt": "--num-layers 2\n" + "".join(
        f"--unknown-flag-{i} {i}\n" for i in range(30000))}, ["check", "args.txt"], (0, 1)),
    ("4 TOML line of 3,000 spaces", {"job.toml": "[job]\n" + " " * 3000 + "\n"},
     ["check", "job.toml"], (0, 1)),
    ("4 20,000-digit gpu_memory", {"memlint.toml": 'model = "llama3-8b"\ngpu_memory = "'
                                                  + "1" * 20000 + '"\n'},
     ["check", "memlint.toml"], (1,)),
    ("5 DeepSpeed 5,000-digit int", {"ds_config.json": '{"train_batch_size": %s}' % BIG},
     ["check", "ds_config.json"], (1,)),
    ("5 accelerate 5,000-digit int", {"acc.yaml": "distributed_type: MULTI_GPU\nnum_processes: "
                                                  + BIG + "\n"}, ["check", "acc.yaml"], (1,)),
    ("5 torchtitan 5,000-digit int", {"job.toml": "[parallelism]\ntensor_parallel_degree = "
                                                  + BIG + "\n"}, ["check", "job.toml"], (1,)),
    ("5 HF config 5,000-digit int", {"config.json": '{"model_type": "llama", "hidden_size": %s}'
                                                    % BIG}, ["check", "config.json"], (1,)),
    ("5 #SBATCH 5,000-digit int", {"train.sh": f"#SBATCH --nodes={BIG}\nsrun python "
                                               "pretrain_gpt.py --num-layers 2\n"},
     ["check", "train.sh"], (0, 1)),
    ("5 estimate --model 5,000-digit", {"config.json": '{"model_type": "llama", '
                                                       '"hidden_size": %s}' % BIG},
     ["estimate", "--model", "config.json"], (1,)),
    ("6 pyproject files /etc", {"pyproject.toml": '[tool.memlint]\nfiles = ["/etc/host*"]\n'},
     ["check"], (2,)),
    ("6 pyproject runs /etc", {"pyproject.toml": '[tool.memlint]\n[[tool.memlint.runs]]\n'
                                                 'files = ["/etc/hostname"]\n'}, ["check"], (2,)),
    ("6 symlink out of the root", {"@ds_config.json": "/etc/hostname"},
     ["check", "ds_config.json"], (0,)),
    ("7 FIFO (check)", {"|ds_config.json": ""}, ["check", "ds_config.json"], (1,)),
    ("7 FIFO (plan)", {"|ds_config.json": ""}, ["plan", "--model", "llama3-8b", "--gpus", "8",
                                               "ds_config.json"], (2,)),
    ("8 control characters (junit)", {"train.sh": "torchrun pretrain_gpt.py --num-layers 2 "
                                                  "--bad\x1b[31mflag 1\n"},
     ["check", "--format", "junit", "train.sh"], (0, 1)),
    ("9 --num-layers $1", {"train.sh": "torchrun --nproc_per_node 8 pretrain_gpt.py "
                                       f"--num-layers $1 {ARGS}\n"}, ["check", "train.sh"], (0,)),
    ("9 $(( 8 * 4 ))", {"train.sh": "NUM_LAYERS=$(( 8 * 4 ))\ntorchrun --nproc_per_node 8 "
                                    f"pretrain_gpt.py --num-layers $NUM_LAYERS {ARGS}\n"},
     ["check", "train.sh"], (0, 1)),
    ("10 4 MB JSON, 1.9M-item array", {"ds_config.json": '{"train_batch_size": 8, "x": ['
                                                         + ",".join(["1"] * 1900000) + "]}"},
     ["check", "ds_config.json"], (0,)),
    ("10 estimate 10,000 layers, pp 10,000", {}, ["estimate", "--model", "llama3-8b", "--set",
                                                   "model.num_hidden_layers=10000", "--set",
                                                   "pp=10000", "--set", "world_size=10000"],
     (2,)),  # deeper than memory/model.py MAX_STAGES: no estimate, so `estimate` did not its job
    ("10 estimate 10,240 layers, pp 512", {}, ["estimate", "--model", "llama3-8b", "--set",
                                               "model.num_hidden_layers=10240", "--set",
                                               "pp=512", "--set", "world_size=512"], (0, 1)),
    ("10 plan global batch 2**50", {}, ["plan", "--model", "llama3-8b", "--gpus", "8", "--set",
                                        "global_batch=1125899906842624"], (0,)),
    ("11 plan 720,720 GPUs (says why)", {}, ["plan", "--model", "llama3-8b", "--gpus", "720720",
                                             "--set", "global_batch=1024"], (1,)),
    ("11 plan 1,009 GPUs (prime)", {}, ["plan", "--model", "llama3-8b", "--gpus", "1009",
                                        "--set", "global_batch=1024"], (1,)),
    ("11 empty ds_config.json", {"ds_config.json": ""}, ["check", "ds_config.json"], (1,)),
    ("11 world_size 2**53 + 1", {}, ["estimate", "--model", "llama3-8b", "--set",
                                     "world_size=9007199254740993"], (1, 2)),
    ("11 UTF-16", {"ds_config.json": '{"train_batch_size": 8}'.encode("utf-16")},
     ["check", "ds_config.json"], (1,)),
    ("11 SARIF on a usage error", {}, ["check", "--format", "sarif", "--bogus"], (2,)),
]


def run(files: dict, argv: list) -> tuple:
    work = tempfile.mkdtemp(prefix="memlint-h19-")
    try:
        os.mkdir(os.path.join(work, ".git"))
        for name, content in files.items():
            if name.startswith("@"):
                os.symlink(content, os.path.join(work, name[1:]))
            elif name.startswith("|"):
                os.mkfifo(os.path.join(work, name[1:]))
            else:
                mode = "wb" if isinstance(content, bytes) else "w"
                with open(os.path.join(work, name), mode) as handle:
                    handle.write(content)
        env = dict(os.environ, NO_COLOR="1", PYTHONPATH=os.path.dirname(HERE))
        # bytecode cached, as an installed package has it (pip compiles .pyc at install time):
        # with PYTHONDONTWRITEBYTECODE every run would compile memlint from source (~0.5 s)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        child = subprocess.Popen(MEMLINT + argv, cwd=work, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        return (usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024,
                os.waitstatus_to_exitcode(status))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    base_cpu, base_rss, _ = run({}, ["--version"])
    print(f"start-up (memlint --version): {base_cpu:.2f}s CPU, {base_rss / 2**20:.0f} MiB")
    bad = 0
    for name, files, argv, codes in CASES:
        cpu, rss, code = run(files, argv)
        ok = cpu < 1.0 and rss < 100 * 2**20 and code in codes
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:34s} {cpu:5.2f}s CPU {rss / 2**20:6.1f} MiB "
              f"exit {code} (expected {'/'.join(map(str, codes))})")
    print(f"{len(CASES) - bad} of {len(CASES)} within 1 s CPU, 100 MB and the expected exit code")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
