"""Pipeline stages: which decoder layers each pipeline rank holds (`StagePlan`), from an even
split, Megatron's uneven first/last stage, or its virtual-stage layouts."""
from __future__ import annotations

from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional


@record(frozen=True)
class StagePlan:
    stage: int
    layers: tuple           # indices of decoder layers on this stage
    first: bool
    last: bool


def stage_layers(total: int, pp: int, first: Optional[int], last: Optional[int]) -> list:
    """Layers per pipeline stage; an uneven first/last stage is honoured (Megatron's
    decoder-first/last-pipeline-num-layers), the rest split as evenly as possible."""
    if pp <= 1:
        return [total]
    counts = [0] * pp
    remaining = total
    middle = list(range(pp))
    if first is not None:
        counts[0] = min(first, remaining)
        remaining -= counts[0]
        middle.remove(0)
    if last is not None and pp - 1 in middle:
        counts[-1] = min(last, remaining)
        remaining -= counts[-1]
        middle.remove(pp - 1)
    if middle:
        base, extra = divmod(remaining, len(middle))
        for i, stage in enumerate(middle):
            counts[stage] = base + (1 if i < extra else 0)
    elif remaining:
        counts[-1] += remaining
    return counts


def microbatches(training, dp: int) -> int:
    """Micro-batches per optimizer step of each data-parallel rank: `grad_accum`, else
    global_batch / (micro_batch · dp) (at least 1); 0 when neither is known."""
    if training.grad_accum:
        return training.grad_accum
    if training.global_batch:
        return max(1, training.global_batch // (training.micro_batch * dp))
    return 0


def virtual_chunks(conventions, par, layers: int, even: bool = False) -> Optional[list]:
    """Decoder layers of each virtual pipeline stage (pp·vpp of them, virtual stage k on rank
    k mod pp), when Megatron's split is not an even one: `--pipeline-model-parallel-layout`
    (PipelineParallelLayerLayout: the 't' of each '|'-separated stage), or
    `--account-for-embedding-in-pipeline-split` / `--account-for-loss-in-pipeline-split`
    (the embedding and the loss each count as one layer of the even split:
    megatron/core/transformer/transformer_block.py get_num_layers_to_build). None otherwise."""
    pp, vpp = par.pp, max(1, par.vpp)
    if pp <= 1 or even:  # even: the articles' even split (assumption states.model seed)
        return None
    layout = conventions.pipeline_layout
    if layout is not None:
        stages = [str(stage) for stage in layout]
        if len(stages) % pp == 0 and \
                sum(stage.count("t") for stage in stages) == layers:
            return [stage.count("t") for stage in stages]
        return None
    embedding, loss = conventions.embedding_in_split, conventions.loss_in_split
    if not (embedding or loss) or par.first_stage_layers or par.last_stage_layers:
        return None
    units = ["E"] * embedding + ["t"] * layers + ["L"] * loss
    chunks = pp * vpp
    if len(units) % chunks:
        return None
    size = len(units) // chunks
    return [units[k * size:(k + 1) * size].count("t") for k in range(chunks)]

def layout_layers(chunks: Optional[list], pp: int) -> Optional[list]:
    """Decoder-layer indices per pipeline rank from the virtual stages (`virtual_chunks`)."""
    if chunks is None:
        return None
    ranks: list = [[] for _ in range(pp)]
    index = 0
    for k, count in enumerate(chunks):
        ranks[k % pp].extend(range(index, index + count))
        index += count
    return ranks


def stage_plans(layers: int, par, chunks: Optional[list]) -> list:
    """The StagePlan of each pipeline rank: from the virtual stages when Megatron's split is not
    an even one, else `stage_layers`."""
    by_layout = layout_layers(chunks, par.pp)
    if by_layout is not None:
        return [StagePlan(i, tuple(indices), i == 0, i == len(by_layout) - 1)
                for i, indices in enumerate(by_layout)]
    counts = stage_layers(layers, par.pp, par.first_stage_layers, par.last_stage_layers)
    plans, start = [], 0
    for i, n in enumerate(counts):
        plans.append(StagePlan(i, tuple(range(start, start + n)), i == 0, i == len(counts) - 1))
        start += n
    return plans
