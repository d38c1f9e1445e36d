"""Checkpoint size on disk, and how many checkpoints a run keeps.

One checkpoint holds the model weights as the framework stores them and, unless the run saves the
model only, the optimizer state (fp32 master copies where the framework keeps them, and moments):
- Megatron-LM (torch_dist): bf16 model weights + fp32 main params + moments (distrib_optimizer.py
  sharded_state_dict); checkpoints are never deleted (training.py save_checkpoint).
- DeepSpeed: the module state (mp_rank_00_model_states.pt, bit16; empty placeholders under ZeRO-3)
  + per-rank optimizer partitions (fp32 master + moments, zero_pp_rank_*_optim_states.pt); the
  engine keeps every checkpoint (runtime/engine.py save_checkpoint).
- FSDP2 / torchtitan (DCP): the sharded parameters in their dtype (fp32 under MixedPrecisionPolicy)
  + moments; keeps the latest `keep_latest_k` = 10 (torchtitan components/checkpointer/base.py
  at b5bcd76).
- HF Trainer: model.safetensors in the model's dtype (LoRA: the adapter) + optimizer.pt (moments);
  `save_total_limit` None keeps every one (transformers TrainingArguments).
"""
from __future__ import annotations

from memlint.memory.context import context_of
from memlint.memory.states import MOMENTS
from memlint.memory.terms import Term
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


@record(frozen=True)
class CheckpointEstimate:
    terms: tuple                  # one checkpoint, term by term
    kept: Optional[int]           # checkpoints on disk at once (None: not known)
    kept_source: str
    disk_bytes: Optional[int]

    @property
    def bytes_each(self) -> int:
        return sum(t.bytes for t in self.terms)

    @property
    def total_bytes(self) -> Optional[int]:
        return None if self.kept is None else self.bytes_each * self.kept

    def to_dict(self) -> dict:
        return {"bytes_each": self.bytes_each, "kept": self.kept, "kept_source": self.kept_source,
                "total_bytes": self.total_bytes, "disk_bytes": self.disk_bytes,
                "terms": [t.to_dict() for t in self.terms]}


def _saves(tr) -> Optional[int]:
    """Checkpoints a keep-everything run writes: one per interval, plus the final one."""
    if not tr.train_steps or not tr.checkpoint_interval:
        return None
    saves, rest = divmod(tr.train_steps, tr.checkpoint_interval)
    return saves + (1 if rest else 0)


def kept(scenario, estimate=None) -> tuple:
    """(checkpoints kept, where that came from); None when the run's saving is not described."""
    tr = scenario.training
    saves = _saves(tr)
    keep, source = tr.checkpoint_keep, "checkpoint_keep"
    if keep is None:
        if not tr.checkpoint_interval:
            return None, "no checkpoint_interval: saving not described"
        # the framework's default (memory/conventions.py)
        keep, source = context_of(scenario, estimate).conventions.checkpoint_keep
    if keep == 0:   # keep everything
        if saves is None:
            return None, source + " (number of saves unknown: give train_steps)"
        return saves, f"{source}: {tr.train_steps} steps / interval {tr.checkpoint_interval}"
    if saves is not None and saves < keep:
        return saves, f"{tr.train_steps} steps / interval {tr.checkpoint_interval}"
    return keep, source


def checkpoint_estimate(scenario, estimate) -> CheckpointEstimate:
    tr, par = scenario.training, scenario.parallelism
    context = context_of(scenario, estimate)
    dt, conv = context.dtypes, context.conventions
    model_source, optimizer_source = conv.checkpoint_sources
    total = int(estimate.params.get("total", 0))
    trainable = int(estimate.params.get("trainable", 0))
    lora = tr.lora_rank > 0
    terms = []
    if conv.deepspeed_conventions and par.zero >= 3:
        if conv.zero.gather_16bit_on_save:
            terms.append(Term("checkpoint.weights_16bit", "weights", total * 2,
                              f"{total:,} params × 2 B (consolidated 16-bit weights)",
                              {"params": total}, "deepspeed/runtime/engine.py save_16bit_model"))
    else:
        saved = trainable if lora else total
        what = "adapter" if lora else "model"
        terms.append(Term("checkpoint.weights", "weights", saved * dt.param,
                          f"{what} {saved:,} params × {dt.param} B", {"params": saved},
                          model_source))
    if tr.save_optimizer and trainable:
        moments = MOMENTS.get(tr.optimizer, 2)
        per = dt.master + moments * dt.state
        terms.append(Term("checkpoint.optimizer", "optimizer", trainable * per,
                          f"trainable {trainable:,} × ({dt.master} master + {moments} × "
                          f"{dt.state} moments) B", {"params": trainable, "bytes_per_param": per},
                          optimizer_source))
    count, source = kept(scenario, estimate)
    return CheckpointEstimate(terms=tuple(terms), kept=count, kept_source=source,
                              disk_bytes=scenario.hardware.disk)
