"""The fleet manager, as the CLI talks to it: typed calls on the manager actor.

`ManagerApi` is what commands are written against; `RayManagerClient` is it on the manager
actor (`cluster/ray_adapters/manager_actor.py`), joined from a terminal or from a
`ray job submit` job alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from domain.exit_codes import UserInputError
from domain.fleet_file import FleetFile, FleetModelEntry
from domain.fleet_state import FleetState
from domain.operation import OperationEvent, OperationResult
from domain.operation_request import OperationRequest
from domain.status_report import ManagerStatus

if TYPE_CHECKING:
    from cluster.fleet.fleet_plan import FleetPlan
    from cluster.fleet.manager_settings import ManagerSettings

OnEvent = Callable[[OperationEvent], None]

STATUS_TIMEOUT_S = 120.0
"""How long `status` waits for the manager's answers (it may be reconciling after a restart)."""


class ManagerApi(Protocol):
    def identity(self) -> str:
        """The manager actor's id: which manager answered, when clusters share a machine."""
        ...

    def run(
        self, request: OperationRequest, on_event: OnEvent | None = None
    ) -> OperationResult | None:
        """Run one operation, handing each progress event to `on_event` as it happens; its
        result, or None when the manager died during it (it reconciles when it restarts)."""
        ...

    def fleet(self) -> FleetState: ...

    def plan_fleet(self, desired: FleetFile) -> FleetPlan:
        """The judged steps from the live fleet to `desired` (nothing is changed)."""
        ...

    def export_fleet(self) -> list[FleetModelEntry]: ...

    def record_apply(self, record: Mapping[str, Any]) -> None:
        """Journal one phase of an `apply` (who, which file, how far)."""
        ...

    def status(self) -> ManagerStatus:
        """The manager's part of `status` (inventory probed now)."""
        ...


class RayManagerClient:
    """`ManagerApi` on the manager actor."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor

    @classmethod
    def connect(cls, address: str) -> RayManagerClient:
        """Join the cluster at `address` and find its manager; UserInputError when none runs."""
        from cluster.startup.ray_runtime import connect

        connect(address)
        found = cls.find()
        if found is None:
            raise UserInputError(f"no Switchyard manager runs on {address}; start `switchyard up`")
        return found

    @classmethod
    def find(cls) -> RayManagerClient | None:
        """The manager of the cluster this process has joined; None when none runs."""
        from cluster.ray_adapters.manager_actor import manager_actor

        try:
            return cls(manager_actor())
        except ValueError:
            return None

    @classmethod
    def create(cls, settings: ManagerSettings) -> RayManagerClient:
        """The manager actor, created on the head node with `settings` if it does not run."""
        from cluster.ray_adapters.manager_actor import manager_actor

        return cls(manager_actor(settings))

    def identity(self) -> str:
        import ray

        identity: str = ray.get(self._actor.identity.remote())
        return identity

    def run(
        self, request: OperationRequest, on_event: OnEvent | None = None
    ) -> OperationResult | None:
        import ray

        pending = self._actor.run.remote(request)
        seen = 0
        while True:
            done, _ = ray.wait([pending], timeout=1.0)
            if on_event is not None:
                events: list[OperationEvent] = ray.get(self._actor.events.remote(seen))
                for event in events:
                    seen += 1
                    on_event(event)
            if done:
                break
        try:
            result: OperationResult = ray.get(pending)
        except ray.exceptions.RayActorError:
            return None
        if on_event is not None:
            for event in result.events[seen:]:
                on_event(event)
        return result

    def fleet(self) -> FleetState:
        import ray

        fleet: FleetState = ray.get(self._actor.fleet.remote())
        return fleet

    def plan_fleet(self, desired: FleetFile) -> FleetPlan:
        import ray

        plan: FleetPlan = ray.get(self._actor.plan_fleet.remote(desired))
        return plan

    def export_fleet(self) -> list[FleetModelEntry]:
        import ray

        entries: list[FleetModelEntry] = ray.get(self._actor.export_fleet.remote())
        return entries

    def record_apply(self, record: Mapping[str, Any]) -> None:
        import ray

        ray.get(self._actor.record_apply.remote(dict(record)))

    def status(self) -> ManagerStatus:
        import ray

        status: ManagerStatus = ray.get(self._actor.status.remote(), timeout=STATUS_TIMEOUT_S)
        return status
