"""Common training nodes: host RAM, local NVMe and GPUs per node (facts only, with sources).

`node = "dgx-h100"` (or `--node`) gives the host-memory and NVMe checks a capacity; `host_memory`
and `nvme_capacity` override it. Memory built from DIMMs is quoted by vendors in binary units
("2 TB" of DIMMs is 2 TiB; AWS and Azure list GiB); NVMe drives are quoted in decimal TB.
"""
from __future__ import annotations

from memlint.names import norm_name as _norm
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

GiB = 1024**3
TB = 10**12


@record(frozen=True)
class Node:
    name: str
    host_memory: int             # bytes of host RAM
    gpus: int                    # GPUs per node
    nvme: Optional[int]          # bytes of local NVMe (None: not stated)
    source: str
    aliases: tuple = ()


NODES = (
    Node("dgx-a100", 1024 * GiB, 8, int(4 * 3.84 * TB),
         "NVIDIA DGX A100 datasheet (320GB system): 1 TB system memory, 15 TB NVMe (4 x 3.84 TB)",
         ("dgx-a100-320gb",)),
    Node("dgx-a100-640gb", 2048 * GiB, 8, int(8 * 3.84 * TB),
         "NVIDIA DGX A100 datasheet (640GB system): 2 TB system memory, 30 TB NVMe (8 x 3.84 TB)"),
    Node("dgx-h100", 2048 * GiB, 8, int(8 * 3.84 * TB),
         "NVIDIA DGX H100 datasheet: 2 TB system memory, 8 x 3.84 TB NVMe U.2 internal storage"),
    Node("dgx-h200", 2048 * GiB, 8, int(8 * 3.84 * TB),
         "NVIDIA DGX H200 datasheet: 2 TB system memory, 8 x 3.84 TB NVMe U.2 internal storage"),
    Node("dgx-b200", 2048 * GiB, 8, int(8 * 3.84 * TB),
         "NVIDIA DGX B200 datasheet: 2 TB system memory (4 TB optional), 8 x 3.84 TB NVMe U.2"),
    Node("gb200-nvl72-tray", 960 * 10**9, 4, None,
         "NVIDIA GB200 NVL72: a compute tray holds 2 GB200 superchips (4 GPUs), each Grace CPU "
         "with up to 480 GB LPDDR5X", ("gb200",)),
    Node("p4d.24xlarge", 1152 * GiB, 8, 8 * 1000 * 10**9,
         "AWS EC2 P4d instances: 1152 GiB memory, 8 x 1000 GB NVMe SSD, 8 A100-40GB"),
    Node("p4de.24xlarge", 1152 * GiB, 8, 8 * 1000 * 10**9,
         "AWS EC2 P4de instances: 1152 GiB memory, 8 x 1000 GB NVMe SSD, 8 A100-80GB"),
    Node("p5.48xlarge", 2048 * GiB, 8, int(8 * 3.84 * TB),
         "AWS EC2 P5 instances: 2048 GiB memory, 8 x 3.84 TB NVMe SSD, 8 H100"),
    Node("p5e.48xlarge", 2048 * GiB, 8, int(8 * 3.84 * TB),
         "AWS EC2 P5e instances: 2048 GiB memory, 8 x 3.84 TB NVMe SSD, 8 H200"),
    Node("p5en.48xlarge", 2048 * GiB, 8, int(8 * 3.84 * TB),
         "AWS EC2 P5en instances: 2048 GiB memory, 8 x 3.84 TB NVMe SSD, 8 H200"),
    Node("nd-a100-v4", 900 * GiB, 8, None,
         "Azure ND A100 v4 series: 900 GiB memory, 8 A100-40GB", ("standard_nd96asr_v4",)),
    Node("nd-h100-v5", 1900 * GiB, 8, None,
         "Azure ND H100 v5 series: 1900 GiB memory, 8 H100", ("standard_nd96isr_h100_v5",)),
)


_BY_NAME = {}
for _node in NODES:
    for _alias in (_node.name,) + _node.aliases:
        _BY_NAME[_norm(_alias)] = _node


def lookup(name: str) -> Optional[Node]:
    """The catalog entry for a node name or alias (case and '_'/'-' insensitive), or None."""
    return _BY_NAME.get(_norm(name))


def known_names() -> list:
    return [node.name for node in NODES]
