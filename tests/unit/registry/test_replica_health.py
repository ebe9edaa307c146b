"""The gateway's view of which model applications have a running replica
(`serve_apps/registry/replica_health.py`).

It polls a cheap count (Serve's running-replica table). A controller restarted with the
head lists the replicas it found alive as recovering, not running, for a few seconds: the
cheap count then drops to none while they answer. So a drop to none of an application the
view had seen running is confirmed with a fuller count (`serve.status()`, which counts
recovering replicas); the fuller count is asked for nothing else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from serve_apps.registry.replica_health import ReplicaHealthView

MODEL = "model-mini-llama-g1"
OTHER = "model-mini-kimi-g1"


class Counts:
    """A count that answers from a list, poll after poll (the last one again at the end)."""

    def __init__(self, *tables: Mapping[str, int]) -> None:
        self._tables = list(tables)
        self.calls = 0

    async def fetch(self) -> Mapping[str, int]:
        self.calls += 1
        return self._tables[min(self.calls, len(self._tables)) - 1]


async def _after_polls(view: ReplicaHealthView, table: Counts, polls: int) -> None:
    view.start()
    try:
        while table.calls < polls:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.02)
    finally:
        await view.stop()


def test_a_drop_to_none_that_the_fuller_count_denies_is_not_taken() -> None:
    table = Counts({MODEL: 1, OTHER: 1}, {MODEL: 0, OTHER: 1})
    recovering = Counts({MODEL: 1, OTHER: 1})
    view = ReplicaHealthView(table.fetch, period_s=0.001, confirm=recovering.fetch)
    asyncio.run(_after_polls(view, table, 3))
    assert (view.running(MODEL), view.running(OTHER)) == (1, 1)


def test_a_drop_to_none_that_the_fuller_count_confirms_is_taken_once() -> None:
    table = Counts({MODEL: 1}, {MODEL: 0})
    gone = Counts({MODEL: 0})
    view = ReplicaHealthView(table.fetch, period_s=0.001, confirm=gone.fetch)
    asyncio.run(_after_polls(view, table, 5))
    assert view.running(MODEL) == 0
    assert gone.calls == 1, "asked again for an application already known to have none"


def test_the_fuller_count_is_not_asked_while_nothing_drops() -> None:
    table = Counts({MODEL: 1}, {MODEL: 2}, {MODEL: 1, OTHER: 0})
    fuller = Counts({MODEL: 1})
    view = ReplicaHealthView(table.fetch, period_s=0.001, confirm=fuller.fetch)
    asyncio.run(_after_polls(view, table, 4))
    assert fuller.calls == 0
    assert (view.running(MODEL), view.running(OTHER)) == (1, 0)


def test_before_any_count_a_model_is_unknown_not_gone() -> None:
    view = ReplicaHealthView(Counts({}).fetch, period_s=0.001)
    assert view.running(MODEL) is None
