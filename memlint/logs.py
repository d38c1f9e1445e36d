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

- `verl`: the step metrics verl's trainer logs (`step:N - ... - perf/max_memory_allocated_gb:A -
  perf/max_memory_reserved_gb:R - perf/cpu_memory_used_gb:C`, console logger
  verl/utils/logger/aggregate_logger.py, or `{"step": N, "data": {...}}` from its file logger;
  newer versions prefix them `actor/`, older numpy ones print `np.float64(A)`): the actor worker's
  `torch.cuda.max_memory_allocated() / 1024**3` and `max_memory_reserved()` (GB = 2**30 bytes,
  volcengine/verl v0.7.0 workers/fsdp_workers.py:926-928), reduced over the actor's ranks with
  the max (utils/metric/utils.py reduce_metrics: keys holding "max"), and `psutil`'s used host
  RAM of the node (`host_used`); and its `log_gpu_memory_usage` lines (`memory allocated (GB): A,
  memory reserved (GB): R, device memory used/total (GB): U/T`, utils/profiler/performance.py),
  whose U is `mem_get_info`'s view of the whole device (verl reads it "since vllm's sleep mode
  works below pytorch").
- `vllm`: vLLM's start-up lines (vllm-project/vllm v0.12.0): `Model loading took X GiB`
  (v1/worker/gpu_model_runner.py:3550, `engine_weights`), `Available KV cache memory: X GiB`
  (v1/worker/gpu_worker.py:360, `engine_kv_cache`), `GPU KV cache size: N tokens`
  (v1/core/kv_cache_utils.py:1286, `engine_kv_tokens`, a count, not bytes), `Graph capturing
  finished in S secs, took X GiB` (gpu_model_runner.py:4467, `engine_cuda_graphs`) and sleep
  mode's `CuMemAllocator: sleep freed X GiB memory in total` (device_allocator/cumem.py,
  `engine_pool`). Each engine worker logs its own (EngineCore / worker prefixes carry no rank).

Metric names: `allocated` (live tensors when the line was logged), `max_allocated`, `reserved`,
`max_reserved`, `max_active`, `device` (all the process holds on the GPU), `capacity`,
`host_used` (host RAM used on the node), and the `engine_*` metrics of one vLLM engine GPU.
"""
from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Optional

MiB = 1024**2
GiB = 1024**3
_UNIT = {"B": 1, "KiB": 1024, "KB": 1024, "MiB": MiB, "MB": MiB, "GiB": GiB, "GB": GiB,
         "TiB": 1024**4}

STYLES = ("megatron", "torchtitan", "deepspeed", "hf", "oom", "verl", "vllm")
#: Every memory line of every style holds one of these (compared lower-cased): the log is scanned
#: for them in bytes and only the lines holding one are decoded and matched. A new style adds its
#: own word here.
KEYWORDS = (b"memory (mb)", b"memory:", b"memory/max_", b"see_memory_usage", b"_mem_gpu",
            b"out of memory", b"total capacity", b"perf/max_memory_", b"perf/cpu_memory_used",
            b"memory allocated (gb)", b"model loading took", b"kv cache memory:",
            b"gpu kv cache size:", b"graph capturing finished", b"sleep freed")
#: A log larger than this is read as its first and its last half: memory lines come early
#: (Megatron's report_memory once, DeepSpeed's see_memory_usage at init) or late (the HF
#: Trainer's metrics, an out-of-memory message), or repeat (torchtitan's every log step).
MAX_LOG_BYTES = 16 * MiB
#: The middle of a larger log is only counted for newlines (to number the last half's lines)
#: up to this size; beyond it the last half's readings have no line number.
MAX_COUNTED_BYTES = 1024 * MiB
MAX_MEMORY_LINES = 40_000   # the first and last 20,000 are read: more than 16k ranks' reports
MAX_RANK = 10**8           # more ranks than any cluster has: a larger "rank" is not one
MAX_BYTES = 2**64          # a memory reading beyond 16 EiB is not a GPU's
MAX_NUMBER_CHARS = 40
MAX_SKIPPED = 20           # skipped lines named one by one; the rest are counted


@dataclass(slots=True)
class Reading:
    """One memory report of one rank, at one point of the run."""

    style: str
    line: Optional[int]            # 1-based line of the log; None: in an uncounted tail
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
    skipped: list = field(default_factory=list)   # (line, why) of memory lines not read
    skipped_count: int = 0
    notes: list = field(default_factory=list)     # about the log as a whole (read in part, ...)

    @property
    def styles(self) -> list:
        return sorted({r.style for r in self.readings})

    def ranks(self) -> list:
        return sorted({r.rank for r in self.readings if r.rank is not None})

    def skip(self, line: Optional[int], why: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_SKIPPED:
            self.skipped.append((line, why))


class _Unreadable(ValueError):
    """A number of a memory line that is no number, or none a GPU could report."""


def _shown_number(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:12]}...({len(text):,} characters)"


def _number(number: str) -> float:
    """The value of a number of the log ([0-9.,]+ as the patterns capture it); _Unreadable for
    `1.2.3`, `.` or 400 digits."""
    text = number.replace(",", "") if "," in number else number
    if len(text) > MAX_NUMBER_CHARS or text.count(".") > 1 or text in (".", ""):
        raise _Unreadable(f"{_shown_number(number)!r} is not a number")
    return float(text)


def _bytes(number: str, unit: str) -> int:
    """Bytes of `number` `unit`; _Unreadable for a bad number or an unknown unit."""
    scale = _UNIT.get(unit)
    if scale is None:
        raise _Unreadable(f"unit {_shown_number(unit)!r} is not one of {', '.join(_UNIT)}")
    value = _number(number) * scale
    if not value < MAX_BYTES:   # also inf and nan
        raise _Unreadable(f"{_shown_number(number)} {unit} is more memory than a GPU has")
    return int(round(value))


def _count(text: str, what: str, limit: int) -> int:
    """An integer of the log (a rank, a step) that must be at most `limit`."""
    if len(text) > 12 or int(text) > limit:
        raise _Unreadable(f"{what} {_shown_number(text)} is not a {what}")
    return int(text)


# A rank named by the line: Megatron's `[Rank N]`, torchrun's `[rankN]:` prefix.
_RANK = re.compile(r"\[[Rr]ank\s*(\d+)\]")
_NUM = r"([\d.,]+)"     # read strictly by _bytes
_UNIT_WORD = r"([A-Za-z]+)"   # letters only: a unit never shares characters with its number
_MEGATRON = re.compile(r"(?:\(after|after)\s+(\d+)\s+iterations\)?\s+memory\s+\(MB\)\s*\|(.*)$")
_MEGATRON_FIELD = re.compile(r"(max allocated|allocated|max reserved|reserved)\s*:\s*" + _NUM)
# torchtitan: `step: K` and, after it, `memory: X GiB(Y%)`, found in two searches (one pattern
# with `.*?` between them costs the line's length for every `step:` of it: quadratic)
_TITAN_STEP = re.compile(r"step:\s*(\d+)\b")
_TITAN_MEMORY = re.compile(r"memory:\s*" + _NUM + r"\s*GiB\s*\(\s*" + _NUM + r"%\)")
_TITAN_DICT = re.compile(r"memory/(max_active|max_reserved|max_allocated)\((GiB|%)\)['\"]?\s*[:=]"
                         r"\s*" + _NUM)
_DS_MSG = re.compile(r"see_memory_usage\]\s*(.*)$")
_DS = re.compile(r"\bMA\s+" + _NUM + r"\s*GB\s+Max_MA\s+" + _NUM + r"\s*GB\s+CA\s+" + _NUM
                 + r"\s*GB\s+Max_CA\s+" + _NUM + r"\s*GB")
_HF = re.compile(r"['\"]?\b(before_init_mem_gpu|init_mem_gpu_alloc_delta|init_mem_gpu_peaked_delta|"
                 r"train_mem_gpu_alloc_delta|train_mem_gpu_peaked_delta)['\"]?\s*[=:]\s*"
                 r"(-?[\d.,]+)\s*(MB)?")
_OOM_OLD = re.compile(r"\(GPU\s*(\d+);\s*" + _NUM + r"\s*" + _UNIT_WORD + r"\s+total capacity;\s*"
                      + _NUM + r"\s*" + _UNIT_WORD + r"\s+already allocated;\s*" + _NUM + r"\s*"
                      + _UNIT_WORD + r"\s+free;(?:\s*[\d.,]+\s*[A-Za-z]+\s+allowed;)?\s*" + _NUM
                      + r"\s*" + _UNIT_WORD + r"\s+reserved")
# the new form in two searches, as torchtitan's (a `.*?` joins its two halves)
_OOM_NEW = re.compile(r"GPU\s*(\d+)\s+has a total capacity of\s*" + _NUM + r"\s*" + _UNIT_WORD
                      + r"\s+of which\s*" + _NUM + r"\s*" + _UNIT_WORD + r"\s+is free\.", re.I)
_OOM_NEW_TAIL = re.compile(r"(?:this process|Process \d+) has\s*" + _NUM + r"\s*" + _UNIT_WORD
                           + r"\s+memory in use\.\s*Of the allocated memory\s*" + _NUM + r"\s*"
                           + _UNIT_WORD + r"\s+is allocated by PyTorch,\s*and\s*" + _NUM
                           + r"\s*" + _UNIT_WORD + r"\s+is reserved by PyTorch but unallocated",
                           re.I)


# verl: `perf/max_memory_allocated_gb:45.2`, `actor/perf/...: np.float64(45.2)`, JSON `": 45.2`
_VERL = re.compile(r"perf/(max_memory_allocated|max_memory_reserved|cpu_memory_used)_gb['\"]?"
                   r"\s*[:=]\s*(?:np\.float\d*\()?\s*" + _NUM)
_VERL_METRIC = {"max_memory_allocated": "max_allocated", "max_memory_reserved": "max_reserved",
                "cpu_memory_used": "host_used"}
_VERL_STEP = re.compile(r"(?:^|[\s{,)\]])['\"]?step['\"]?\s*[:=]\s*(\d+)\b")
_VERL_FIELD = re.compile(r"\b(max memory|memory) (allocated|reserved) \(GB\):\s*" + _NUM)
_VERL_DEVICE = re.compile(r"device memory used/total \(GB\):\s*" + _NUM + r"\s*/\s*" + _NUM)
_VLLM = (
    (re.compile(r"Model loading took\s*" + _NUM + r"\s*GiB"), "engine_weights"),
    (re.compile(r"Available KV cache memory:\s*" + _NUM + r"\s*GiB"), "engine_kv_cache"),
    (re.compile(r"Graph capturing finished in\s*[\d.]+\s*secs?, took\s*" + _NUM + r"\s*GiB"),
     "engine_cuda_graphs"),
    (re.compile(r"CuMemAllocator: sleep freed\s*" + _NUM + r"\s*GiB memory in total"),
     "engine_pool"),
)
_VLLM_TOKENS = re.compile(r"GPU KV cache size:\s*([\d,]+)\s*tokens")


def _rank(line: str) -> Optional[int]:
    found = _RANK.search(line)
    return _count(found.group(1), "rank", MAX_RANK) if found else None


def memory_lines(data: bytes, first_line: Optional[int] = 1, limit: int = 0,
                 keep: str = "both") -> tuple:
    """([(line number, text)] of the lines of `data` holding one of KEYWORDS, in order, and how
    many more there were): with `limit`, only the first limit/2 and the last limit/2 of them
    (keep="both"), the first `limit` ("first") or the last ("last"). The numbers are None when
    `first_line` is. Linear: the scan is bytes.find over the lower-cased data."""
    low = data.lower()
    found_starts = set()
    for key in KEYWORDS:
        found = low.find(key)
        while found != -1:
            found_starts.add(low.rfind(b"\n", 0, found) + 1)
            end = low.find(b"\n", found)
            if end == -1:
                break
            found = low.find(key, end)
    starts = sorted(found_starts)
    dropped = 0
    if limit and len(starts) > limit:
        dropped = len(starts) - limit
        first = {"both": limit // 2, "first": limit, "last": 0}[keep]
        starts = starts[:first] + starts[len(starts) - (limit - first):]
    out = []
    number, counted = first_line, 0
    for start in starts:
        end = data.find(b"\n", start)
        end = len(data) if end == -1 else end
        if number is not None:
            number += data.count(b"\n", counted, start)
            counted = start
        out.append((number, data[start:end].rstrip(b"\r").decode("utf-8", errors="replace")))
    return out, dropped


def parse_text(text: str, path: str = "<log>") -> LogReport:
    """Every memory reading in `text` (any mix of styles)."""
    data = text.encode("utf-8", errors="surrogateescape")
    report = LogReport(path=path, readings=[], lines=_lines(data))
    parse_lines(_limited(report, memory_lines(data, 1, MAX_MEMORY_LINES)), report)
    return report


def _limited(report: LogReport, found: tuple) -> list:
    lines, dropped = found
    if dropped:
        report.notes.append(f"{len(lines) + dropped:,} memory lines: read the first and the last "
                            f"{len(lines) // 2:,} of them")
    return lines


def _lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def parse_lines(lines, report: LogReport) -> None:
    """Add the readings of `lines` ((number, text) pairs, in order) to `report`."""
    state = {"ds_message": "", "hf": {}, "hf_line": None}
    for number, line in lines:
        try:
            reading = _reading(line, number, state)
        except _Unreadable as exc:
            report.skip(number, str(exc))
            continue
        if reading is not None:
            report.readings.append(reading)
    if "train_mem_gpu_peaked_delta" in state["hf"]:
        report.readings.append(_hf_reading(state["hf"], state["hf_line"]))


def _reading(line: str, number: Optional[int], state: dict) -> Optional[Reading]:
    """The reading of one memory line (None: none, or one that continues state)."""
    if "perf/" in line and ("memory_" in line):
        found = _verl(line, number)
        if found is not None:
            return found
    if "memory allocated (GB)" in line:
        found = _verl_usage(line, number)
        if found is not None:
            return found
    if "GiB" in line or "KV cache size" in line:
        found = _vllm(line, number)
        if found is not None:
            return found
    if "memory (MB)" in line:
        found = _MEGATRON.search(line)
        if found:
            metrics = {name.replace(" ", "_"): _bytes(value, "MiB")
                       for name, value in _MEGATRON_FIELD.findall(found.group(2))}
            if not metrics:
                return None
            rank = _rank(line)
            step = _count(found.group(1), "step", 10**15)
            return Reading("megatron", number, rank if rank is not None else 0,
                           f"after {step} iterations", metrics, step=step)
    if "memory:" in line and "GiB" in line:
        step = _TITAN_STEP.search(line)
        found = _TITAN_MEMORY.search(line, step.end()) if step else None
        if found:
            reserved = _bytes(found.group(1), "GiB")
            pct = _number(found.group(2))
            metrics = {"max_reserved": reserved}
            if pct > 0:
                metrics["capacity"] = int(round(reserved * 100 / pct))
            count = _count(step.group(1), "step", 10**15)
            return Reading("torchtitan", number, _rank(line), f"step {count}", metrics,
                           step=count)
    if "memory/max_" in line:
        metrics = {name: _bytes(value, "GiB") for name, unit, value in _TITAN_DICT.findall(line)
                   if unit == "GiB"}
        if metrics:
            return Reading("torchtitan", number, _rank(line), "metrics", metrics)
    if "see_memory_usage" in line:
        return _deepspeed(line, number, state)
    if "_mem_gpu" in line:
        for name, value, unit in _HF.findall(line):
            amount = _bytes(value.lstrip("-"), "MiB" if unit else "B")
            state["hf"][name] = -amount if value.startswith("-") else amount
            state["hf_line"] = state["hf_line"] or number
        return None
    if "out of memory" in line.lower() or "total capacity" in line:
        return _oom(line, number)
    return None


_MAX_LABEL = 200


def _deepspeed(line: str, number: Optional[int], state: dict) -> Optional[Reading]:
    message = _DS_MSG.search(line)
    found = _DS.search(line)
    if found:
        ma, max_ma, ca, max_ca = (_bytes(v, "GiB") for v in found.groups())
        rank = _rank(line)
        reading = Reading("deepspeed", number, rank if rank is not None else 0,
                          state["ds_message"] or "see_memory_usage",
                          {"allocated": ma, "max_allocated": max_ma, "reserved": ca,
                           "max_reserved": max_ca})
        reading.notes.append("Max_CA is printed rounded to a whole GB (±0.5 GiB)")
        return reading
    text = message.group(1).strip() if message else ""
    if text and not text.startswith(("CPU Virtual", "MA ")):
        state["ds_message"] = text[:_MAX_LABEL]
    return None


def _verl(line: str, number: Optional[int]) -> Optional[Reading]:
    metrics = {_VERL_METRIC[name]: _bytes(value, "GiB") for name, value in _VERL.findall(line)}
    if not metrics:
        return None
    step = _VERL_STEP.search(line)
    count = _count(step.group(1), "step", 10**15) if step else None
    reading = Reading("verl", number, _rank(line), f"step {count}" if count is not None
                      else "step metrics", metrics, step=count)
    reading.notes.append("verl logs the largest of the actor's ranks (reduce_metrics); "
                         "cpu_memory_used_gb is the node's used host RAM (psutil)")
    return reading


def _verl_usage(line: str, number: Optional[int]) -> Optional[Reading]:
    metrics = {}
    first = None
    for found in _VERL_FIELD.finditer(line):
        first = found.start() if first is None else first
        name = ("max_" if found.group(1) == "max memory" else "") + found.group(2)
        metrics[name] = _bytes(found.group(3), "GiB")
    if not metrics:
        return None
    device = _VERL_DEVICE.search(line)
    if device:
        metrics["device"] = _bytes(device.group(1), "GiB")
        metrics["capacity"] = _bytes(device.group(2), "GiB")
    head = line[:first].rstrip(" ,")
    for mark in ("=> ", "] ", ") "):
        head = head.rsplit(mark, 1)[-1]
    reading = Reading("verl", number, _rank(line), head.strip()[:_MAX_LABEL]
                      or "log_gpu_memory_usage", metrics)
    if device:
        reading.notes.append("device memory used is mem_get_info's view of the whole GPU: "
                             "below an engine's sleep mode, which PyTorch's counters do not see")
    return reading


def _vllm(line: str, number: Optional[int]) -> Optional[Reading]:
    for pattern, metric in _VLLM:
        found = pattern.search(line)
        if found:
            return Reading("vllm", number, _rank(line), metric.replace("engine_", "vLLM "),
                           {metric: _bytes(found.group(1), "GiB")})
    found = _VLLM_TOKENS.search(line)
    if found:
        tokens = found.group(1).replace(",", "")
        return Reading("vllm", number, _rank(line), "vLLM kv cache size",
                       {"engine_kv_tokens": _count(tokens, "token count", 10**13)})
    return None


def _hf_reading(values: dict, line: Optional[int]) -> Reading:
    start = values.get("before_init_mem_gpu", 0) + values.get("init_mem_gpu_alloc_delta", 0)
    end = start + values.get("train_mem_gpu_alloc_delta", 0)
    peak = end + values["train_mem_gpu_peaked_delta"]
    reading = Reading("hf", line, 0, "train", {"allocated": end, "max_allocated": peak})
    if "before_init_mem_gpu" not in values:
        reading.notes.append("no before_init_mem_gpu (transformers < 4.12): memory held before "
                             "the Trainer's init is not counted")
    return reading


def _oom(line: str, number: Optional[int]) -> Optional[Reading]:
    head = _OOM_NEW.search(line)
    found = _OOM_NEW_TAIL.search(line, head.end()) if head else None
    if found:
        g = head.groups() + found.groups()
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
                   "reserved": _bytes(g[7], g[8]), "device": max(0, capacity - free)}
    device = _count(g[0], "GPU", MAX_RANK)
    rank = _rank(line)
    reading = Reading("oom", number, rank, f"out of memory on GPU {device}", metrics)
    if rank is None:
        reading.notes.append(f"GPU {device} is a local device index, not a global rank")
    return reading


def read(path: str, max_bytes: Optional[int] = None) -> LogReport:
    """Read a log file: all of it, or its first and last `max_bytes // 2` (MAX_LOG_BYTES) when
    larger."""
    max_bytes = MAX_LOG_BYTES if max_bytes is None else max_bytes
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        size = info.st_size
        if size <= max_bytes:
            data = handle.read(max_bytes)
            report = LogReport(path=path, readings=[], lines=_lines(data))
            parse_lines(_limited(report, memory_lines(data, 1, MAX_MEMORY_LINES)), report)
            return report
        half = max_bytes // 2
        head = handle.read(half)
        middle = _count_lines(handle, half, size - half)
        handle.seek(size - half)
        tail = handle.read(half)
    head = head[:head.rfind(b"\n") + 1]               # whole lines only
    cut = tail.find(b"\n")
    tail = tail[cut + 1:] if cut != -1 else b""
    first_tail_line = None if middle is None else head.count(b"\n") + middle + 2
    report = LogReport(path=path, readings=[], lines=0)
    first = memory_lines(head, 1, MAX_MEMORY_LINES // 2, keep="first")
    last = memory_lines(tail, first_tail_line, MAX_MEMORY_LINES // 2, keep="last")
    parse_lines(_limited(report, (first[0] + last[0], first[1] + last[1])), report)
    report.lines = first_tail_line - 1 + _lines(tail) if first_tail_line else head.count(b"\n")
    shown = f"{half // MiB} MiB" if half >= MiB else f"{half // 1024} KiB"
    report.notes.append(f"the log is {size:,} bytes: read its first and last {shown}"
                        + ("" if middle is not None else " (the last part's line numbers are "
                           "not counted)"))
    return report


def _count_lines(handle, start: int, end: int) -> Optional[int]:
    """Newlines in bytes [start, end) of the file, or None when that is over MAX_COUNTED_BYTES.
    The head is cut after its last newline and the tail after its first, so the count runs from
    the head's cut to the tail's."""
    if end - start > MAX_COUNTED_BYTES:
        return None
    handle.seek(start)
    count, left = 0, end - start
    while left > 0:
        chunk = handle.read(min(left, 8 * MiB))
        if not chunk:
            break
        count += chunk.count(b"\n")
        left -= len(chunk)
    return count
