"""Reading a staged model's weight files into the page cache before they are needed.

A break-before-make swap loads NEW's weights inside the hold; read from memory instead of
disk, that part shrinks. Done only when the node's available memory, less a reserve, covers
every weight file (a prefetch that evicts what the running engines use would cost more than
it saves); skipped with the reason otherwise.
"""

from __future__ import annotations

import time
from pathlib import Path

from cluster.fleet.ports import PrefetchReport

PREFETCH_RESERVE_BYTES = 4 * 2**30
"""Memory left untouched for the engines and the OS."""
_CHUNK = 16 * 2**20
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def weight_files(model_dir: Path) -> list[Path]:
    return sorted(p for p in model_dir.rglob("*") if p.suffix in _WEIGHT_SUFFIXES and p.is_file())


def available_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """Linux's `MemAvailable` (what can be used without swapping); None where unknown."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def prefetch_weights(model_dir: Path, available: int | None, reserve: int) -> PrefetchReport:
    files = weight_files(model_dir)
    total = sum(p.stat().st_size for p in files)
    if available is None:
        return PrefetchReport(0, 0.0, "the node's available memory is unknown")
    if total > available - reserve:
        return PrefetchReport(
            0,
            0.0,
            f"{total / 2**30:.1f} GiB of weights over {max(available - reserve, 0) / 2**30:.1f} "
            f"GiB available (MemAvailable less a {reserve / 2**30:.0f} GiB reserve)",
        )
    started = time.monotonic()
    read = 0
    for path in files:
        with path.open("rb", buffering=0) as handle:
            while chunk := handle.read(_CHUNK):
                read += len(chunk)
    return PrefetchReport(read, time.monotonic() - started)
