"""The disk rule: a model is staged on a node only if what is still missing fits.

usable = free space on the cache volume - configured reserve - space promised to other
stagings still in progress. The verdict is computed before the first byte is downloaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster.staging.units import format_bytes


@dataclass(frozen=True)
class DiskVerdict:
    """Whether one model's missing bytes fit on one node's cache volume, with the numbers."""

    node: str
    model: str
    cache_dir: str
    need_bytes: int
    """Bytes of the model not yet on disk (files already complete are not counted)."""
    free_bytes: int
    reserve_bytes: int
    reserved_by_others_bytes: int
    evictable_bytes: int = 0
    """What evicting unprotected least-recently-used models could free; 0 when not allowed."""

    @property
    def usable_bytes(self) -> int:
        return max(0, self.free_bytes - self.reserve_bytes - self.reserved_by_others_bytes)

    @property
    def fits(self) -> bool:
        return self.need_bytes <= self.usable_bytes

    @property
    def fits_with_eviction(self) -> bool:
        return self.need_bytes <= self.usable_bytes + self.evictable_bytes

    @property
    def shortfall_bytes(self) -> int:
        return max(0, self.need_bytes - self.usable_bytes)

    def describe(self) -> str:
        numbers = (
            f"{format_bytes(self.usable_bytes)} usable = {format_bytes(self.free_bytes)} free - "
            f"{format_bytes(self.reserve_bytes)} reserve - "
            f"{format_bytes(self.reserved_by_others_bytes)} promised to other stagings"
        )
        if self.fits:
            return (
                f"node {self.node}: {self.model} needs {format_bytes(self.need_bytes)} more on "
                f"{self.cache_dir}; fits ({numbers})"
            )
        eviction = (
            "; evicting unpinned, not-serving models could free "
            f"{format_bytes(self.evictable_bytes)}"
            if self.evictable_bytes
            else ""
        )
        return (
            f"node {self.node}: {self.model} needs {format_bytes(self.need_bytes)} more on "
            f"{self.cache_dir} but only {numbers}{eviction}"
        )


def judge_disk(
    *,
    node: str,
    model: str,
    cache_dir: str,
    need_bytes: int,
    free_bytes: int,
    reserve_bytes: int,
    reserved_by_others_bytes: int,
    evictable_bytes: int = 0,
) -> DiskVerdict:
    if min(need_bytes, free_bytes, reserve_bytes, reserved_by_others_bytes, evictable_bytes) < 0:
        raise ValueError("byte counts cannot be negative")
    return DiskVerdict(
        node=node,
        model=model,
        cache_dir=cache_dir,
        need_bytes=need_bytes,
        free_bytes=free_bytes,
        reserve_bytes=reserve_bytes,
        reserved_by_others_bytes=reserved_by_others_bytes,
        evictable_bytes=evictable_bytes,
    )
