"""ML7xx: host. The other ways a run dies: node RAM, NVMe and checkpoint disk.

The rules read the Estimate's per-node host totals (memory/host.py) and its checkpoint size
(memory/checkpoint.py); a capacity comes only from the user (`host_memory`, `nvme_capacity`,
`disk`) or a node preset (`node`), never from a guess, so no verdict is given without one.
"""
from __future__ import annotations


from memlint.diagnostics import Severity
from memlint.rules._support import size
from memlint.rules.base import Finding, Rule

_HOST_KEYS = ("offload_optimizer", "offload_params", "model_init", "host_memory", "node",
              "gpus_per_node", "zero")


def _where(node, estimate) -> str:
    ranks = sum(n for _, n in node.ranks)
    stages = sorted(s for s, _ in node.ranks if s >= 0)
    kind = f"{ranks} ranks"
    if len(estimate.stages) > 1 and stages:
        kind += f" of stage{'s' if len(stages) > 1 else ''} {', '.join(map(str, stages))}"
    many = f"; {node.nodes - 1} more nodes like it" if node.nodes > 1 else ""
    return f"node {node.node} ({kind}{many})"


def _terms(ctx, terms, count: int = 3) -> str:
    top = sorted(terms, key=lambda t: (-t.bytes, t.name))[:count]
    return ", ".join(f"{t.name} {size(ctx, t.bytes)}" for t in top)


class ExceedsHostMemory(Rule):
    """A node needs more host RAM than it has.

    What it checks:
        Per node, the host memory its ranks hold at once: offloaded optimizer states,
        gradients and parameters (ZeRO-Offload, ZeRO-Infinity, FSDP CPU offload), DeepSpeed's
        pinned staging buffers with PyTorch's power-of-two rounding of pinned blocks, and at
        start-up the model each rank builds or loads (`model_init`). Compared with the node's
        RAM from `host_memory` or a node preset (`node = "dgx-h100"`); no verdict without one.

    Why it matters:
        The kernel's OOM killer ends the job, often after it has loaded for many minutes, with
        no Python traceback (DeepSpeed issues #1891, #3606, #5290). ZeRO-3 CPU offload of a 70B
        model keeps 16 bytes per parameter on the hosts (fp32 master, gradients and two Adam
        moments): 1.12 TB, more than the 1 TiB of a node running all 8 ranks; eight ranks
        each loading a 60 GB model with from_pretrained need 480 GB at once.

    How to fix:
        Spread the ranks over more nodes, offload to NVMe (device "nvme") instead of CPU,
        shard more (a larger dp shrinks each rank's partition), load on the meta device or
        with ZeRO-3's zero.Init (model_init = "zero-init"), or set pin_memory false where the
        power-of-two rounding of pinned buffers is what tips it over.

    Example:
        Bad (memlint.toml):

            model = "llama3-70b"
            framework = "deepspeed"
            zero = 3
            offload_optimizer = "cpu"
            offload_params = "cpu"
            world_size = 8
            host_memory = "1TiB"

        Good (memlint.toml):

            model = "llama3-70b"
            framework = "deepspeed"
            zero = 3
            offload_optimizer = "nvme"
            offload_params = "none"
            world_size = 8
            host_memory = "1TiB"
    """

    code = "ML701"
    requires = ("estimate",)
    name = "exceeds-host-memory"
    severity = Severity.ERROR

    def check(self, ctx):
        estimate = ctx.estimate
        if estimate is None or not estimate.host:
            return
        node = estimate.host[0]
        cap = node.capacity_bytes
        if cap is None or node.total_bytes <= cap:
            return
        assumed = ""
        severity = None
        if node.phase == "startup" and not ctx.scenario.is_set("model_init"):
            init = next((t.inputs.get("model_init") for t in node.terms), "cpu")
            assumed = (f"; this rests on the framework's default way of loading the model "
                       f"(model_init = \"{init}\"): set model_init if the run loads differently")
            severity = Severity.WARNING
        yield Finding(
            f"{_where(node, estimate)} needs {size(ctx, node.total_bytes)} of host RAM at "
            f"{node.phase}, {size(ctx, node.total_bytes - cap)} more than its "
            f"{size(ctx, cap)}{' (upper bound)' if node.bounded else ''}; largest terms: "
            f"{_terms(ctx, node.terms)}{assumed}",
            keys=_HOST_KEYS, severity=severity,
            data={"node": node.node, "total_bytes": node.total_bytes, "capacity_bytes": cap})


class LowHostMemoryHeadroom(Rule):
    """A node's host RAM is almost all taken by what the run puts there.

    What it checks:
        Whether the busiest node leaves at least `margin` (default 0.10) of its RAM free after
        the memory this run puts there (see exceeds-host-memory). Silent when it does not fit.

    Why it matters:
        The estimate counts tensors, not the operating system, the page cache of the data
        loader, or the 1-3 GB of resident libraries (CUDA, NCCL, Python) each rank process
        carries: on an 8-GPU node that is easily 20-40 GB. A node planned at 95% of its RAM
        swaps or meets the OOM killer.

    How to fix:
        The fixes of exceeds-host-memory, or accept the margin with
        `[tool.memlint.options.low-host-memory-headroom] margin = 0.05`.

    Example:
        Bad (memlint.toml):

            model = "llama3-8b"
            framework = "deepspeed"
            zero = 2
            offload_optimizer = "cpu"
            world_size = 8
            host_memory = "145GiB"

        Good (memlint.toml):

            model = "llama3-8b"
            framework = "deepspeed"
            zero = 2
            offload_optimizer = "cpu"
            world_size = 8
            host_memory = "2TiB"
    """

    code = "ML702"
    requires = ("estimate",)
    name = "low-host-memory-headroom"
    severity = Severity.WARNING
    options = {"margin": (float, 0.10)}

    def check(self, ctx):
        estimate = ctx.estimate
        if estimate is None or not estimate.host:
            return
        node = estimate.host[0]
        cap = node.capacity_bytes
        margin = float(ctx.options.get("margin", 0.10))
        if cap is None or node.total_bytes > cap or node.total_bytes <= cap * (1 - margin):
            return
        yield Finding(
            f"{_where(node, estimate)} uses {size(ctx, node.total_bytes)} of its {size(ctx, cap)} host RAM "
            f"({node.total_bytes / cap:.0%}) at {node.phase}, under the {margin:.0%} margin for "
            f"the OS, page cache and each rank's resident libraries",
            keys=_HOST_KEYS, data={"node": node.node, "total_bytes": node.total_bytes,
                                   "capacity_bytes": cap, "margin": margin})


class ExceedsNvmeCapacity(Rule):
    """ZeRO-Infinity puts more on a node's NVMe than the drives hold.

    What it checks:
        Per node, the bytes ZeRO-Infinity swaps to NVMe (optimizer states: fp32 master,
        gradients and moments; parameters in their dtype) for every rank on the node, against
        `nvme_capacity` or a node preset's local NVMe.

    Why it matters:
        The swapper writes each rank's partition to files under nvme_path at initialisation;
        a full drive fails the job with an I/O error once everything has loaded. A 175B model
        with Adam swaps 16 bytes per parameter: 2.8 TB over the job, 350 GB per GPU of a 8-GPU
        node when dp = 8.

    How to fix:
        Use more nodes (each holds a smaller partition), point nvme_path at a larger volume, or
        keep the parameters on the GPU (offload_param device "none").

    Example:
        Bad (memlint.toml):

            model = "llama3-70b"
            framework = "deepspeed"
            zero = 3
            offload_optimizer = "nvme"
            world_size = 8
            nvme_capacity = "500GB"

        Good (memlint.toml):

            model = "llama3-70b"
            framework = "deepspeed"
            zero = 3
            offload_optimizer = "nvme"
            world_size = 8
            nvme_capacity = "4TB"
    """

    code = "ML703"
    requires = ("estimate",)
    name = "exceeds-nvme-capacity"
    severity = Severity.ERROR

    def check(self, ctx):
        estimate = ctx.estimate
        if estimate is None or not estimate.host:
            return
        node = max(estimate.host, key=lambda n: n.nvme_bytes)
        cap = node.nvme_capacity_bytes
        if cap is None or not node.nvme_bytes or node.nvme_bytes <= cap:
            return
        yield Finding(
            f"{_where(node, estimate)} swaps {size(ctx, node.nvme_bytes)} to NVMe, "
            f"{size(ctx, node.nvme_bytes - cap)} more than its {size(ctx, cap)}; "
            f"{_terms(ctx, node.nvme_terms)}",
            keys=("offload_optimizer", "offload_params", "nvme_capacity", "node", "world_size"),
            data={"node": node.node, "nvme_bytes": node.nvme_bytes, "capacity_bytes": cap})


class NvmeSwapBufferTooSmall(Rule):
    """ZeRO-Infinity's parameter swap buffer is smaller than a parameter's partition.

    What it checks:
        With offload_param on NVMe, every parameter partition is swapped in through one of
        `buffer_count` pinned buffers of `buffer_size` elements. DeepSpeed asserts that a
        partition fits one buffer (swap_tensor/partitioned_param_swapper.py `get_buffer`:
        "More elements ... than buffer size"). The largest partition is at least the word
        embedding's, vocab × hidden / dp elements. An error when that partition exceeds
        `max_in_cpu` (so it must be swapped); otherwise a warning, since DeepSpeed keeps the
        first max_in_cpu elements' sub-groups on the CPU unswapped.

    Why it matters:
        The run fails on its first forward, after loading. Llama-3-70B's embedding is 128,256 ×
        8,192 = 1.05e9 elements: 131M per rank at dp = 8, over the default buffer_size of 1e8.

    How to fix:
        Raise `offload_param.buffer_size` to at least the reported number of elements (it
        costs buffer_count × buffer_size × 2 bytes of pinned RAM per rank), or shard over more
        ranks.

    Example:
        Bad (memlint.toml):

            model = "llama3-70b"
            framework = "deepspeed"
            zero = 3
            offload_params = "nvme"
            world_size = 8

        Good (memlint.toml):

            model = "llama3-70b"
            framework = "deepspeed"
            zero = 3
            offload_params = "nvme"
            world_size = 64
    """

    code = "ML704"
    requires = ("estimate",)
    name = "nvme-swap-buffer-too-small"
    severity = Severity.ERROR
    def check(self, ctx):
        scenario, estimate = ctx.scenario, ctx.estimate
        par = scenario.parallelism
        if estimate is None or par.offload_params != "nvme" or par.zero < 3:
            return
        config = scenario.model.config if scenario.model is not None else {}
        vocab, hidden = config.get("vocab_size"), config.get("hidden_size")
        if not isinstance(vocab, int) or not isinstance(hidden, int) or vocab <= 0 or hidden <= 0:
            return
        arch = ctx.resolved.architecture
        if arch is not None:
            vocab = arch.vocab  # as the framework builds it: padded for tp (facts/vocab.py)
        # for start-up speed: a one-file check without ZeRO-Infinity never needs these
        from memlint.memory.states import ceil_div

        dp = ctx.resolved.topology.dp
        partition = ceil_div(vocab * hidden, dp)
        zero = ctx.resolved.conventions.zero   # the config's values, or DeepSpeed's defaults
        buffer = zero.param_buffer_size
        if partition <= buffer:
            return
        in_cpu = zero.param_max_in_cpu
        # Sub-groups of parameters that fit max_in_cpu stay in a CPU buffer and are never
        # swapped (zero/stage3.py _create_fp16_partitions_with_defragmentation); a partition
        # larger than max_in_cpu cannot, so it goes through a swap buffer and the assert fires.
        certain = partition > in_cpu
        pinned = ctx.resolved.dtypes.param * partition
        yield Finding(
            f"the word embedding's partition is {partition:,} elements (vocab {vocab:,} × hidden "
            f"{hidden:,} / dp {dp}), more than offload_param.buffer_size {buffer:,}: DeepSpeed's "
            f"parameter swapper asserts a swapped partition fits one buffer"
            + ("" if certain else
               f" (it is swapped unless its sub-group fits the first max_in_cpu {in_cpu:,} "
               "elements kept on the CPU, which depends on parameter order)")
            + f"; set buffer_size >= {partition:,} ({size(ctx, pinned)} of pinned RAM per buffer)",
            keys=("deepspeed.offload_param.buffer_size", "offload_params"),
            severity=None if certain else Severity.WARNING,
            data={"partition": partition, "buffer_size": buffer, "max_in_cpu": in_cpu})


class CheckpointExceedsDisk(Rule):
    """The checkpoints the run keeps do not fit the disk they are saved to.

    What it checks:
        One checkpoint's size (model weights as the framework saves them plus, unless the run
        saves the model only, fp32 master copies and optimizer moments) times the number kept
        (`checkpoint_keep`, or the framework's default: Megatron and DeepSpeed keep every one,
        torchtitan the latest 10, the HF Trainer every one unless save_total_limit), against
        `disk`. A warning when the count kept rests on a default.

    Why it matters:
        A save that fills the disk kills the run hours in, and can leave a truncated latest
        checkpoint behind. With mixed-precision Adam a checkpoint is about 14 bytes per
        parameter, 7 times the bf16 weights: 112 GB for an 8B model, 20 such saves are 2.2 TB.

    How to fix:
        Keep fewer checkpoints (save_total_limit, keep_latest_k, a cleanup job), save less often,
        save the model only at the end, or point the save directory at a larger volume.

    Example:
        Bad (memlint.toml):

            model = "llama3-8b"
            framework = "megatron"
            world_size = 8
            train_steps = 10000
            checkpoint_interval = 500
            disk = "1TB"

        Good (memlint.toml):

            model = "llama3-8b"
            framework = "megatron"
            world_size = 8
            train_steps = 10000
            checkpoint_interval = 500
            disk = "4TB"
    """

    code = "ML705"
    requires = ("estimate",)
    name = "checkpoint-exceeds-disk"
    severity = Severity.ERROR

    def check(self, ctx):
        estimate = ctx.estimate
        ckpt = estimate.checkpoint if estimate is not None else None
        if ckpt is None or ckpt.disk_bytes is None or ckpt.kept is None:
            return
        total = ckpt.total_bytes
        if total <= ckpt.disk_bytes:
            return
        scenario = ctx.scenario
        defaulted = not scenario.is_set("checkpoint_keep")
        yield Finding(
            f"{ckpt.kept} checkpoints of {size(ctx, ckpt.bytes_each)} each "
            f"({ckpt.kept_source}) need {size(ctx, total)}, more than the {size(ctx, ckpt.disk_bytes)} "
            f"of disk" + ("; the number kept is the framework's default" if defaulted else ""),
            keys=("checkpoint_keep", "checkpoint_interval", "train_steps", "disk"),
            severity=Severity.WARNING if defaulted else None,
            data={"bytes_each": ckpt.bytes_each, "kept": ckpt.kept, "disk_bytes": ckpt.disk_bytes})


RULES = [ExceedsHostMemory(), LowHostMemoryHeadroom(), ExceedsNvmeCapacity(),
         NvmeSwapBufferTooSmall(), CheckpointExceedsDisk()]
