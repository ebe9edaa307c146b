"""How long each way of waking a parked model should take, and which one to use.

A parked model comes back one of three ways (`WakePath`). Each is predicted from the bytes
it moves and the link it moves them over, then scaled by how the model's own past wakes on
that path compared with their predictions. The figure feeds the hold a waking model's
requests wait in and their `Retry-After`, and is exported next to the measured time.

The rates below are planning figures, not measurements of a given box: the correction from
past wakes is what makes a model's prediction its own.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from policies.sleep_mode import SleepLevel

GB = 1e9
"""Link rates are decimal GB/s, as datasheets quote them."""

WAKE_UP_OVERHEAD_S = 1.0
"""`wake_up` beyond the copy: re-mapping the CuMem allocations of every rank and the
engine's resume (vllm/device_allocator/cumem.py `wake_up`, v1/engine/core.py)."""
RELOAD_OVERHEAD_S = 3.0
"""`reload_weights` beyond the read: the loader's per-tensor work and the weights' post-load
processing (`process_weights_after_loading`), per rank in parallel."""
ENGINE_START_OVERHEAD_S = 45.0
"""A cold start beyond its weight load: a new process per rank, the distributed init, the
profiling run, compilation from the cache and CUDA-graph capture. Published cold starts of
the story's models are 47-97 s; a model's own last start replaces this once known."""
HOST_MEMORY_GBPS = 200.0
"""What one node's DRAM delivers to all its GPUs' host-to-device copies at once."""
LOADER_GBPS_PER_RANK = 3.0
"""safetensors read from the page cache into one rank's GPU: the loader is CPU-bound."""
DISK_GBPS = 5.0
"""One node's weight-cache disk (NVMe) when the page cache does not hold the weights."""

CORRECTION_WINDOW = 5
"""How many of the model's latest wakes on a path its correction is the median of."""


class WakePath(StrEnum):
    """How a parked model comes back."""

    LEVEL_1 = "level_1"
    """`wake_up` of an engine asleep at level 1: the weights copied back from pinned host
    memory, every GPU over its own host link."""
    LEVEL_2 = "level_2"
    """`wake_up` and `reload_weights` of an engine asleep at level 2: the weights read again
    from the node's weight cache, no new process."""
    COLD_START = "cold_start"
    """A new engine: what an unloaded model (park_mode unload) always does."""


def paths_for(level: SleepLevel | None) -> tuple[WakePath, ...]:
    """The paths open to a model parked at `level` (None: unloaded). A sleeping engine can
    always be given up for a cold start (its placement released first)."""
    if level is SleepLevel.ONE:
        return (WakePath.LEVEL_1, WakePath.COLD_START)
    if level is SleepLevel.TWO:
        return (WakePath.LEVEL_2, WakePath.COLD_START)
    return (WakePath.COLD_START,)


@dataclass(frozen=True)
class WakeWork:
    """What a wake moves for one replica of a model."""

    weights_per_gpu_bytes: int
    busiest_node_bytes: int
    """The weights of all the replica's ranks on its most loaded node."""
    page_cache_warm: bool = True
    """The node's page cache holds the weights (the wake's preflight reads them first)."""


@dataclass(frozen=True)
class WakeLinks:
    """The links a wake moves bytes over, in GB/s."""

    host_to_gpu_gbps: float = 50.0
    """Per GPU, from pinned memory (`GpuProfile.host_link_gbps`; the default is PCIe Gen5
    x16's planning figure)."""
    host_memory_gbps: float = HOST_MEMORY_GBPS
    loader_gbps_per_rank: float = LOADER_GBPS_PER_RANK
    disk_gbps: float = DISK_GBPS


def physics_s(
    path: WakePath, work: WakeWork, links: WakeLinks, *, last_cold_start_s: float | None = None
) -> float:
    """`path`'s time from bytes and links alone. All ranks copy at once, so a copy takes
    the longer of one GPU's share over its host link and the busiest node's bytes through
    its DRAM; a read from disk is bounded by the node's disk."""
    copy_s = max(
        work.weights_per_gpu_bytes / (links.host_to_gpu_gbps * GB),
        work.busiest_node_bytes / (links.host_memory_gbps * GB),
    )
    read_s = work.weights_per_gpu_bytes / (links.loader_gbps_per_rank * GB)
    if not work.page_cache_warm:
        read_s = max(read_s, work.busiest_node_bytes / (links.disk_gbps * GB))
    if path is WakePath.LEVEL_1:
        return WAKE_UP_OVERHEAD_S + copy_s
    if path is WakePath.LEVEL_2:
        return WAKE_UP_OVERHEAD_S + RELOAD_OVERHEAD_S + read_s
    if last_cold_start_s is not None:
        return last_cold_start_s
    return ENGINE_START_OVERHEAD_S + read_s


@dataclass(frozen=True)
class PastWake:
    """One earlier wake of the model: what was predicted (before correction) and taken."""

    path: WakePath
    physics_s: float
    measured_s: float


def correction(path: WakePath, history: Sequence[PastWake]) -> float:
    """The median of measured over predicted across the model's latest wakes on `path`;
    1.0 before its first."""
    ratios = [w.measured_s / w.physics_s for w in history if w.path is path and w.physics_s > 0][
        -CORRECTION_WINDOW:
    ]
    return statistics.median(ratios) if ratios else 1.0


@dataclass(frozen=True)
class WakeEstimate:
    """One path's predicted time for one model."""

    path: WakePath
    predicted_s: float
    physics_s: float
    correction: float


def estimate(
    path: WakePath,
    work: WakeWork,
    links: WakeLinks,
    history: Sequence[PastWake] = (),
    *,
    last_cold_start_s: float | None = None,
) -> WakeEstimate:
    """`path`'s prediction, corrected by the model's own wakes on it (a cold start taken
    from the model's last start is already its own and is not corrected again)."""
    raw = physics_s(path, work, links, last_cold_start_s=last_cold_start_s)
    own_start = path is WakePath.COLD_START and last_cold_start_s is not None
    factor = 1.0 if own_start else correction(path, history)
    return WakeEstimate(path, raw * factor, raw, factor)


def cheapest(estimates: Iterable[WakeEstimate]) -> WakeEstimate:
    """The fastest path; on a tie the one that keeps more (level 1, then 2, then cold)."""
    order = list(WakePath)
    return min(estimates, key=lambda e: (e.predicted_s, order.index(e.path)))


def choose(
    level: SleepLevel | None,
    work: WakeWork,
    links: WakeLinks,
    history: Sequence[PastWake] = (),
    *,
    last_cold_start_s: float | None = None,
) -> WakeEstimate:
    """The cheapest path open to a model parked at `level` (None: unloaded)."""
    return cheapest(
        estimate(p, work, links, history, last_cold_start_s=last_cold_start_s)
        for p in paths_for(level)
    )
