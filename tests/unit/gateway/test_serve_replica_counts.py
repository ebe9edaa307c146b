"""The gateway's replica-health source: Serve controller's running-replica table, summed per
application, with `serve.status()` as the fallback when a Ray lacks that table. No Ray: the
controller is a stand-in with the same call shape (`method.remote()` -> awaitable)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from serve_apps.gateway.serve_deployment import ServeReplicaCounts

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class DeploymentId:
    name: str
    app_name: str


class RemoteMethod:
    def __init__(self, result: Any) -> None:
        self._result = result
        self.calls = 0

    def remote(self) -> Any:
        self.calls += 1

        async def answer() -> Any:
            return self._result

        return answer()


class ControllerWithTable:
    def __init__(self, table: dict[DeploymentId, list[str]]) -> None:
        self._all_running_replicas = RemoteMethod(table)


class ControllerWithoutTable:
    """Like an actor handle: an unknown method is an AttributeError."""


async def _status_counts() -> Mapping[str, int]:
    return {"from-status": 1}


async def test_replicas_are_summed_per_application() -> None:
    controller = ControllerWithTable(
        {
            DeploymentId("LLMServer", "model-a"): ["r1", "r2"],
            DeploymentId("Other", "model-a"): ["r3"],
            DeploymentId("LLMServer", "model-b"): [],
        }
    )
    counts = await ServeReplicaCounts(controller, _status_counts)()
    # An app whose replicas are all gone is 0 (refuse at once), not missing (unknown).
    assert counts == {"model-a": 3, "model-b": 0}


async def test_a_ray_without_the_table_falls_back_to_serve_status_for_good() -> None:
    calls: list[int] = []

    async def status_counts() -> Mapping[str, int]:
        calls.append(1)
        return {"from-status": 1}

    counts = ServeReplicaCounts(ControllerWithoutTable(), status_counts)
    assert await counts() == {"from-status": 1}
    assert await counts() == {"from-status": 1}
    assert len(calls) == 2
