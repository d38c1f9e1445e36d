"""Memory lines of real training logs, read into byte counts per rank.

Styles (each a regular expression on one line; nothing in a log is executed):
- `megatron`: `[Rank N] (after K iterations) memory (MB) | allocated: A | max allocated: M |
  reserved: R | max reserved: X` (megatron/training/utils.py `report_memory`; MB = 2**20 bytes,
  `torch.cuda.memory_allocated() / (1024 * 1024)`). Older versions print it without `[Rank N]`
  and without the parentheses (rank 0 then: only the first data-parallel rank of a stage logs).
- `torchtitan`: `step: K ... memory: X GiB(Y%)` (torchtitan/components/metrics.py: X is
  `max_reserved_gib`, Y `max_reserved_pct` of the device's capacity) and, where a metrics dict is
  logged, `memory/max_active(GiB)` / `memory/max_reserved(GiB)`; `[rankN]:` prefixes (torchrun's
  `--log-prefix`/`LOG_RANK`) give the rank.
- `deepspeed`: `see_memory_usage` pairs: a message line, then `MA a GB Max_MA m GB CA c GB Max_CA x
  GB` (deepspeed/runtime/utils.py: GB = 2**30 bytes; Max_CA is rounded to a whole GB). It prints
  on global rank 0 only (unless forced), so a line without a rank is rank 0.
- `hf`: the HF Trainer's memory metrics (`skip_memory_metrics=False`): `before_init_mem_gpu`,
  `init_mem_gpu_alloc_delta`, `train_mem_gpu_alloc_delta`, `train_mem_gpu_peaked_delta`, printed
  by `log_metrics` as `NNNMB` (`int(v) >> 20`) or as raw bytes in a metrics dict / JSON; rank 0
  (`is_world_process_zero`). The train peak of allocated memory is their sum (transformers
  `TrainerMemoryTracker`: alloc = end - begin, peaked = peak - end).
- `oom`: PyTorch's CUDA out-of-memory message (both the `GPU 0; X total capacity; ...` form and
  the `GPU 0 has a total capacity of X of which Y is free. ... this process has Z memory in use.
  Of the allocated memory A is allocated by PyTorch, and B is reserved by PyTorch but
  unallocated.` form): the process's device memory, its allocator's reserve and, by difference,
  what lies outside the allocator (CUDA context, NCCL, workspaces).

Metric names: `allocated` (live tensors when the line was logged), `max_allocated`, `reserved`,
`max_reserved`, `max_active`, `device` (all the process holds on the GPU), `capacity`.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Optional

MiB = 1024**2
GiB = 1024**3
_UNIT = {"B": 1, "KiB": 1024, "KB": 1024, "MiB": MiB, "MB": MiB, "GiB": GiB, "GB": GiB,
         "TiB": 1024**4}

STYLES = ("megatron", "torchtitan", "deepspeed", "hf", "oom")


@dataclass
class Reading:
    """One memory report of one rank, at one point of the run."""

    style: str
    line: int                      # 1-based line of the log
    rank: Optional[int]            # global rank; None: the line names none
    label: str                     # the log's own words for when ("after 10 iterations", ...)
    metrics: dict                  # metric -> bytes
    step: Optional[int] = None
    notes: list = field(default_factory=list)


@dataclass
class LogReport:
    path: str
    readings: list
    lines: int

    @property
    def styles(self) -> list:
        return sorted({r.style for r in self.readings})

    def ranks(self) -> list:
        return sorted({r.rank for r in self.readings if r.rank is not None})


def _bytes(number: str, unit: str) -> int:
    return int(round(float(number.replace(",", "")) * _UNIT[unit]))


# A rank named by the line: Megatron's `[Rank N]`, torchrun's `[rankN]:` prefix.
_RANK = re.compile(r"\[[Rr]ank\s*(\d+)\]")
_MEGATRON = re.compile(r"(?:\(after|after)\s+(\d+)\s+iterations\)?\s+memory\s+\(MB\)\s*\|(.*)$")
_MEGATRON_FIELD = re.compile(r"(max allocated|allocated|max reserved|reserved)\s*:\s*([\d.]+)")
_TITAN = re.compile(r"step:\s*(\d+)\b.*?memory:\s*([\d.]+)\s*GiB\s*\(\s*([\d.]+)%\)")
_TITAN_DICT = re.compile(r"memory/(max_active|max_reserved|max_allocated)\((GiB|%)\)['\"]?\s*[:=]"
                         r"\s*([\d.]+)")
_DS_MSG = re.compile(r"see_memory_usage\]\s*(.*?)\s*$")
_DS = re.compile(r"\bMA\s+([\d.]+)\s*GB\s+Max_MA\s+([\d.]+)\s*GB\s+CA\s+([\d.]+)\s*GB\s+"
                 r"Max_CA\s+([\d.]+)\s*GB")
_HF = re.compile(r"['\"]?\b(before_init_mem_gpu|init_mem_gpu_alloc_delta|init_mem_gpu_peaked_delta|"
                 r"train_mem_gpu_alloc_delta|train_mem_gpu_peaked_delta)['\"]?\s*[=:]\s*"
                 r"(-?[\d.]+)\s*(MB)?")
_OOM_OLD = re.compile(r"\(GPU\s*(\d+);\s*([\d.]+)\s*(\w+)\s+total capacity;\s*([\d.]+)\s*(\w+)\s+"
                      r"already allocated;\s*([\d.]+)\s*(\w+)\s+free;(?:\s*[\d.]+\s*\w+\s+allowed;)?\s*"
                      r"([\d.]+)\s*(\w+)\s+reserved")
_OOM_NEW = re.compile(r"GPU\s*(\d+)\s+has a total capacity of\s*([\d.]+)\s*(\w+)\s+of which\s*"
                      r"([\d.]+)\s*(\w+)\s+is free\..*?(?:this process|Process \d+) has\s*"
                      r"([\d.]+)\s*(\w+)\s+memory in use\.\s*Of the allocated memory\s*([\d.]+)\s*"
                      r"(\w+)\s+is allocated by PyTorch,\s*and\s*([\d.]+)\s*(\w+)\s+is reserved by "
                      r"PyTorch but unallocated", re.I)


def _rank(line: str) -> Optional[int]:
    found = _RANK.search(line)
    return int(found.group(1)) if found else None


def parse_text(text: str, path: str = "<log>") -> LogReport:
    """Every memory reading in `text` (any mix of styles)."""
    readings: list = []
    ds_message = ""
    hf_values: dict = {}
    hf_line = 0
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if "memory (MB)" in line:
            found = _MEGATRON.search(line)
            if found:
                metrics = {}
                for name, value in _MEGATRON_FIELD.findall(found.group(2)):
                    metrics[name.replace(" ", "_")] = _bytes(value, "MiB")
                if metrics:
                    rank = _rank(line)
                    readings.append(Reading("megatron", number, rank if rank is not None else 0,
                                            f"after {found.group(1)} iterations", metrics,
                                            step=int(found.group(1))))
                continue
        if "memory:" in line and "GiB" in line:
            found = _TITAN.search(line)
            if found:
                reserved = _bytes(found.group(2), "GiB")
                pct = float(found.group(3))
                metrics = {"max_reserved": reserved}
                if pct > 0:
                    metrics["capacity"] = int(round(reserved * 100 / pct))
                readings.append(Reading("torchtitan", number, _rank(line),
                                        f"step {found.group(1)}", metrics,
                                        step=int(found.group(1))))
                continue
        if "memory/max_" in line:
            metrics = {name: _bytes(value, "GiB") for name, unit, value in _TITAN_DICT.findall(line)
                       if unit == "GiB"}
            if metrics:
                readings.append(Reading("torchtitan", number, _rank(line), "metrics", metrics))
                continue
        if "see_memory_usage" in line:
            message = _DS_MSG.search(line)
            found = _DS.search(line)
            if found:
                ma, max_ma, ca, max_ca = (_bytes(v, "GiB") for v in found.groups())
                rank = _rank(line)
                reading = Reading("deepspeed", number, rank if rank is not None else 0,
                                  ds_message or "see_memory_usage",
                                  {"allocated": ma, "max_allocated": max_ma, "reserved": ca,
                                   "max_reserved": max_ca})
                reading.notes.append("Max_CA is printed rounded to a whole GB (±0.5 GiB)")
                readings.append(reading)
            elif message and not message.group(1).startswith(("CPU Virtual", "MA ")):
                ds_message = message.group(1)
            continue
        if "_mem_gpu" in line:
            for name, value, unit in _HF.findall(line):
                hf_values[name] = int(float(value)) * MiB if unit else int(float(value))
                hf_line = hf_line or number
            continue
        if "out of memory" in line.lower() or "total capacity" in line:
            reading = _oom(line, number)
            if reading is not None:
                readings.append(reading)
    if "train_mem_gpu_peaked_delta" in hf_values:
        readings.append(_hf_reading(hf_values, hf_line))
    return LogReport(path=path, readings=readings, lines=len(lines))


def _hf_reading(values: dict, line: int) -> Reading:
    start = values.get("before_init_mem_gpu", 0) + values.get("init_mem_gpu_alloc_delta", 0)
    end = start + values.get("train_mem_gpu_alloc_delta", 0)
    peak = end + values["train_mem_gpu_peaked_delta"]
    reading = Reading("hf", line, 0, "train", {"allocated": end, "max_allocated": peak})
    if "before_init_mem_gpu" not in values:
        reading.notes.append("no before_init_mem_gpu (transformers < 4.12): memory held before "
                             "the Trainer's init is not counted")
    return reading


def _oom(line: str, number: int) -> Optional[Reading]:
    found = _OOM_NEW.search(line)
    if found:
        g = found.groups()
        capacity = _bytes(g[1], g[2])
        in_use = _bytes(g[5], g[6])
        allocated = _bytes(g[7], g[8])
        reserved = allocated + _bytes(g[9], g[10])
        metrics = {"capacity": capacity, "device": in_use, "allocated": allocated,
                   "reserved": reserved}
    else:
        found = _OOM_OLD.search(line)
        if not found:
            return None
        g = found.groups()
        capacity = _bytes(g[1], g[2])
        free = _bytes(g[5], g[6])
        metrics = {"capacity": capacity, "allocated": _bytes(g[3], g[4]),
                   "reserved": _bytes(g[7], g[8]), "device": capacity - free}
    rank = _rank(line)
    reading = Reading("oom", number, rank, f"out of memory on GPU {g[0]}", metrics)
    if rank is None:
        reading.notes.append(f"GPU {g[0]} is a local device index, not a global rank")
    return reading


def read(path: str, max_bytes: int = 64 * MiB) -> LogReport:
    """Read a log file (the last `max_bytes` of it when larger: memory lines repeat)."""
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        if size > max_bytes:
            handle.seek(size - max_bytes)
        data = handle.read(max_bytes)
    return parse_text(data.decode("utf-8", errors="replace"), path)
