"""Parse `nvidia-smi topo -m` and `nvidia-smi --query-gpu` text into typed records (pure).

Used when NVML cannot be loaded. `topo -m` prints a matrix whose header names the devices
(GPUs, NICs) and whose rows give the link between two devices: `X` (self), `NV<n>` (n bonded
NVLinks) or a PCIe path (`PIX`, `PXB`, `PHB`, `NODE`, `SYS`). The header is underlined with
ANSI escapes even when piped, and trailing columns hold CPU/NUMA affinity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cluster.inventory.records import GpuDevice
from policies.inventory import Interconnect

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"^GPU(\d+)$")
_NVLINK = re.compile(r"^NV(\d+)$")
_PCIE_PATHS = frozenset({"PIX", "PXB", "PHB", "NODE", "SYS", "SOC"})


class TopologyParseError(ValueError):
    """The text is not `nvidia-smi topo -m` output this parser understands."""


@dataclass(frozen=True)
class GpuTopology:
    """GPU-to-GPU links of one node."""

    gpus: int
    links: tuple[tuple[str, ...], ...]
    """links[i][j]: the link between GPU i and GPU j as printed ("X" on the diagonal)."""

    def nvlinks(self, i: int, j: int) -> int:
        """Bonded NVLinks between GPU i and j (0 over PCIe)."""
        match = _NVLINK.match(self.links[i][j])
        return int(match[1]) if match else 0

    @property
    def all_pairs_nvlink(self) -> bool:
        return all(
            self.nvlinks(i, j) > 0 for i in range(self.gpus) for j in range(self.gpus) if i != j
        )

    @property
    def interconnect(self) -> Interconnect | None:
        """NVLINK when every pair has NVLink (a ring all-reduce is only as fast as its
        slowest hop), PCIE otherwise; None for a single GPU."""
        if self.gpus < 2:
            return None
        return Interconnect.NVLINK if self.all_pairs_nvlink else Interconnect.PCIE


def parse_topology(text: str) -> GpuTopology:
    """The GPU block of `nvidia-smi topo -m`; NIC rows and columns are ignored."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header_at = next(
        (i for i, line in enumerate(lines) if line.split() and _GPU.match(line.split()[0])), None
    )
    if header_at is None:
        raise TopologyParseError("no header line naming GPU0 ... in the topology text")
    header = lines[header_at].split()
    gpu_columns = [i for i, name in enumerate(header) if _GPU.match(name)]
    if [int(_GPU.match(header[i])[1]) for i in gpu_columns] != list(  # type: ignore[index]
        range(len(gpu_columns))
    ):
        raise TopologyParseError(f"GPU columns are not GPU0..GPUn in order: {header}")
    rows: dict[int, tuple[str, ...]] = {}
    for line in lines[header_at + 1 :]:
        cells = line.split()
        if not cells:
            break  # the blank line before the legend
        row = _GPU.match(cells[0])
        if row is None:
            continue  # a NIC row
        values = cells[1:]
        if len(values) < len(gpu_columns):
            raise TopologyParseError(f"row {cells[0]} has {len(values)} cells, too few: {line!r}")
        links = tuple(values[i] for i in gpu_columns)
        for link in links:
            if link != "X" and not _NVLINK.match(link) and link not in _PCIE_PATHS:
                raise TopologyParseError(f"row {cells[0]}: unknown link kind {link!r}")
        rows[int(row[1])] = links
    if sorted(rows) != list(range(len(gpu_columns))):
        raise TopologyParseError(
            f"expected rows GPU0..GPU{len(gpu_columns) - 1}, got {sorted(rows)}"
        )
    return GpuTopology(gpus=len(gpu_columns), links=tuple(rows[i] for i in sorted(rows)))


def parse_query_gpu(text: str) -> tuple[GpuDevice, ...]:
    """Rows of `nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits`
    (memory in MiB)."""
    devices = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            raise TopologyParseError(f"expected 'index, name, memory MiB', got {line!r}")
        index, name, memory_mib = parts
        try:
            devices.append(GpuDevice(int(index), name, int(float(memory_mib)) * 1024 * 1024))
        except ValueError:
            raise TopologyParseError(f"not numbers in {line!r}") from None
    return tuple(devices)
