"""GPU catalog: name -> usable memory capacity in bytes, and lookup by loose spelling.

Capacities are the memory the device reports to CUDA/ROCm (vendor data sheets; binary GiB where the
vendor's "80GB" HBM is 80 GiB as `torch.cuda.get_device_properties().total_memory` shows it, less
nothing: the runtime's own use is the memory model's `runtime` component).

Sizes written by a user (`gpu_memory`, `--set gpu_memory=...`, `memlint.keys.to_bytes`) follow the
SI/IEC convention strictly: "GB" is decimal (48GB = 48 * 10**9 bytes, as vendors print it) and
"GiB" binary (48GiB = 48 * 2**30 bytes, as `torch.cuda.get_device_properties().total_memory`
reports a card sold as "48 GB"); a bare number is bytes. A card's capacity is best given by name
(`gpu = "L40S"`), which uses the catalogue's binary figure; to give it as a size, write GiB.
"""
from __future__ import annotations

from memlint.names import norm_name as _norm
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional

GiB = 1024**3


@record(frozen=True)
class GPU:
    name: str
    capacity_bytes: int
    interconnect: str  # intra-node link
    aliases: tuple = ()


# total_memory as PyTorch reports it on each device (data sheets: H100 SXM 80 GB HBM3, H200 141 GB
# HBM3e, B200 180 GB HBM3e usable, A100 40/80 GB, MI300X 192 GB, MI325X 256 GB, L40S 48 GB).
CATALOG = (
    GPU("H100-80GB", 80 * GiB, "NVLink4 900 GB/s", ("h100", "h100-sxm", "h100-80g", "h100-80gb-hbm3")),
    GPU("H100-94GB", 94 * GiB, "NVLink4 900 GB/s", ("h100-nvl", "h100-94g")),
    GPU("H200", 141 * 10**9, "NVLink4 900 GB/s", ("h200-141gb", "h200-sxm", "gh200")),
    GPU("B200", 180 * 10**9, "NVLink5 1.8 TB/s", ("b200-180gb", "gb200")),
    GPU("B300", 288 * 10**9, "NVLink5 1.8 TB/s", ("b300-288gb", "gb300")),
    GPU("A100-80GB", 80 * GiB, "NVLink3 600 GB/s", ("a100-80g", "a100-sxm4-80gb")),
    GPU("A100-40GB", 40 * GiB, "NVLink3 600 GB/s", ("a100", "a100-40g", "a100-sxm4-40gb")),
    GPU("V100-32GB", 32 * GiB, "NVLink2 300 GB/s", ("v100", "v100-32g")),
    GPU("V100-16GB", 16 * GiB, "NVLink2 300 GB/s", ("v100-16g",)),
    GPU("L40S", 48 * GiB, "PCIe 4.0", ("l40s-48gb",)),
    GPU("A10G", 24 * GiB, "PCIe 4.0", ("a10", "a10g-24gb")),
    GPU("RTX-4090", 24 * GiB, "PCIe 4.0", ("4090", "rtx4090")),
    # the cards fine-tuning runs are written for (NVIDIA data sheets: memory size as sold)
    GPU("H800", 80 * GiB, "NVLink4 400 GB/s", ("h800-80gb", "h800-sxm")),
    GPU("H20", 96 * GiB, "NVLink4 900 GB/s", ("h20-96gb",)),
    GPU("A800-80GB", 80 * GiB, "NVLink3 400 GB/s", ("a800", "a800-80g", "a800-sxm4-80gb")),
    GPU("A40", 48 * GiB, "PCIe 4.0", ("a40-48gb",)),
    GPU("RTX-A6000", 48 * GiB, "PCIe 4.0", ("a6000", "rtx-a6000-48gb")),
    GPU("RTX-6000-Ada", 48 * GiB, "PCIe 4.0", ("rtx6000-ada", "rtx-6000-ada-generation")),
    GPU("RTX-PRO-6000", 96 * GiB, "PCIe 5.0", ("rtx-pro-6000-blackwell", "rtx-pro-6000-96gb")),
    GPU("L4", 24 * GiB, "PCIe 4.0", ("l4-24gb",)),
    GPU("T4", 16 * GiB, "PCIe 3.0", ("t4-16gb", "tesla-t4")),
    GPU("RTX-5090", 32 * GiB, "PCIe 5.0", ("5090", "rtx5090")),
    GPU("RTX-4080", 16 * GiB, "PCIe 4.0", ("4080", "rtx4080")),
    GPU("RTX-3090", 24 * GiB, "PCIe 4.0", ("3090", "rtx3090", "rtx-3090-ti", "3090-ti")),
    GPU("RTX-3060", 12 * GiB, "PCIe 4.0", ("3060", "rtx3060")),
    GPU("RTX-2080-Ti", 11 * GiB, "PCIe 3.0", ("2080-ti", "rtx2080ti", "rtx-2080ti")),
    GPU("MI300X", 192 * GiB, "Infinity Fabric 896 GB/s", ("mi300x-192gb", "mi300")),
    GPU("MI325X", 256 * GiB, "Infinity Fabric 896 GB/s", ("mi325x-256gb",)),
    GPU("MI250X", 128 * GiB, "Infinity Fabric", ("mi250x-128gb", "mi250")),
)


_INDEX = {}
for _gpu in CATALOG:
    for _name in (_gpu.name,) + _gpu.aliases:
        _INDEX[_norm(_name)] = _gpu


def lookup(name: str) -> Optional[GPU]:
    return _INDEX.get(_norm(name))


def known_names() -> list:
    return [gpu.name for gpu in CATALOG]
