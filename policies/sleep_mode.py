"""Parking by vLLM's sleep mode: whether the platform and each node's host memory allow it.

An engine started with `enable_sleep_mode` can be put to sleep and woken without a new
process (vllm/v1/worker/gpu_worker.py `Worker.sleep` / `wake_up`, over the CuMem allocator
of vllm/device_allocator/cumem.py):

- level 1 copies the weights to pinned host memory and discards the KV cache; a wake copies
  them back over the host link;
- level 2 discards the weights too; a wake re-allocates them and the engine reloads them
  (`reload_weights`) from the node's weight cache.

Pinned memory cannot be paged out, so a node's level-1 sleepers together must fit its host
memory with room left for everything else the node runs. docs/sleep-mode.md has the design.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from policies.inventory import GpuProfile, Interconnect, NodeInventory
from policies.reasons import Reason, ReasonCode
from policies.units import gib


class SleepLevel(IntEnum):
    """How deeply a parked engine sleeps (vLLM's `sleep(level)`)."""

    ONE = 1
    """Weights copied to pinned host memory, KV cache discarded: a wake is a host-to-GPU
    copy of the weights."""
    TWO = 2
    """Weights and KV cache discarded: a wake reloads the weights from the node's weight
    cache (page cache or disk), still without a new engine process."""


HOST_RAM_KEPT_FRACTION = 0.10
"""The share of a node's host memory level-1 sleepers never pin: the system, Ray's
processes and the page cache that serves level-2 wakes and cold starts need it."""


def sleep_mode_refusal(gpu: GpuProfile) -> Reason | None:
    """`park_mode: sleep` refused on a platform without vLLM's sleep mode; None where it
    has one. vLLM offers it on CUDA, ROCm and XPU (vllm/platforms/interface.py
    `is_sleep_mode_available`); its CPU platform does not, and the engine raises when
    `enable_sleep_mode` is set there (vllm/config/model.py)."""
    if gpu.interconnect is not Interconnect.HOST_MEMORY:
        return None
    return Reason(
        ReasonCode.SLEEP_MODE_UNAVAILABLE,
        f"park_mode sleep needs vLLM's sleep mode, which the {gpu.name} platform (vLLM's CPU "
        "engine) does not have; use park_mode unload",
    )


@dataclass(frozen=True)
class PinnedWeights:
    """The weights one model pins (or would pin) in one node's host memory at level 1."""

    model: str
    node: str
    pinned_bytes: int


def pinned_per_node(
    model: str, weights_per_gpu_bytes: int, ranks_per_node: Mapping[str, int]
) -> tuple[PinnedWeights, ...]:
    """Level 1 copies every rank's weights to the host of the node that rank runs on."""
    return tuple(
        PinnedWeights(model, node, weights_per_gpu_bytes * ranks)
        for node, ranks in sorted(ranks_per_node.items())
        if ranks > 0
    )


def host_budget_bytes(node: NodeInventory) -> int | None:
    """What level-1 sleepers may pin on `node` in all; None where its memory is unknown."""
    if node.host_ram_bytes is None:
        return None
    return int(node.host_ram_bytes * (1 - HOST_RAM_KEPT_FRACTION))


def level_one_refusals(
    nodes: Iterable[NodeInventory],
    wanted: Iterable[PinnedWeights],
    asleep: Iterable[PinnedWeights],
) -> tuple[Reason, ...]:
    """One reason per node where `wanted` (one model's level-1 copy) does not fit beside
    the models `asleep` at level 1 there; the model's own earlier copy is not counted
    twice. A node whose host memory is unknown is refused: pinning blind could leave the
    node without memory."""
    by_name = {n.name: n for n in nodes}
    held: dict[str, int] = {}
    wanted = tuple(wanted)
    models = {w.model for w in wanted}
    for claim in asleep:
        if claim.model not in models:
            held[claim.node] = held.get(claim.node, 0) + claim.pinned_bytes
    reasons: list[Reason] = []
    for claim in wanted:
        node = by_name.get(claim.node)
        budget = None if node is None else host_budget_bytes(node)
        if budget is None:
            reasons.append(
                Reason(
                    ReasonCode.SLEEP_HOST_MEMORY,
                    f"sleep_level 1 would pin {gib(claim.pinned_bytes):.1f} GiB of "
                    f"{claim.model}'s weights on node {claim.node}, whose host memory is "
                    "unknown (set host_ram_gib in the inventory); use sleep_level 2",
                )
            )
            continue
        used = held.get(claim.node, 0)
        if used + claim.pinned_bytes > budget:
            assert node is not None and node.host_ram_bytes is not None
            reasons.append(
                Reason(
                    ReasonCode.SLEEP_HOST_MEMORY,
                    f"sleep_level 1 would pin {gib(claim.pinned_bytes):.1f} GiB of "
                    f"{claim.model}'s weights on node {claim.node}, where models asleep "
                    f"already pin {gib(used):.1f} GiB of the {gib(budget):.1f} GiB allowed "
                    f"({gib(node.host_ram_bytes):.1f} GiB of host memory less "
                    f"{HOST_RAM_KEPT_FRACTION:.0%} kept); use sleep_level 2",
                )
            )
    return tuple(reasons)
