"""The fleet manager, as the CLI talks to it: typed calls on the manager actor.

`ManagerApi` is what commands are written against; `RayManagerClient` is it on the manager
actor (`cluster/ray_adapters/manager_actor.py`), joined from a terminal or from a
`ray job submit` job alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from cluster.clients.actor_calls import ANSWER_S, answer
from cluster.startup.ray_runtime import advertised_address
from domain.exit_codes import ControlActorUnresponsive, UserInputError
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
"""How long `status` and `plan` wait for the manager's answer (it probes every node)."""
EVENT_POLL_S = 5.0
"""How long one poll of a running operation's progress waits."""


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


MANAGER = "fleet manager"


class RayManagerClient:
    """`ManagerApi` on the manager actor. Every call has a deadline (actor_calls.py), and an
    operation's run is watched: a manager that stops answering during one is reported, not
    waited on forever."""

    def __init__(self, actor: Any, *, answer_s: float = ANSWER_S) -> None:
        self._actor = actor
        self._answer_s = answer_s

    @classmethod
    def connect(cls, address: str) -> RayManagerClient:
        """Join the cluster at `address` and find its manager; UserInputError when none runs,
        ControlActorUnresponsive when it does not answer (nothing is sent to it then)."""
        from cluster.startup.ray_runtime import connect

        connect(address)
        found = cls.find()
        if found is None:
            raise UserInputError(f"no Switchyard manager runs on {address}; start `switchyard up`")
        found.identity()
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
        identity: str = self._answer(self._actor.identity.remote(), "who it is")
        return identity

    def run(
        self, request: OperationRequest, on_event: OnEvent | None = None
    ) -> OperationResult | None:
        import ray

        pending = self._actor.run.remote(request)
        seen = 0
        answered_at = time.monotonic()
        while True:
            done, _ = ray.wait([pending], timeout=1.0)
            events = self._events_since(seen)
            if events is not None:
                answered_at = time.monotonic()
                for event in events:
                    seen += 1
                    if on_event is not None:
                        on_event(event)
            if done:
                break
            if time.monotonic() - answered_at > self._answer_s:
                raise ControlActorUnresponsive(
                    advertised_address(),
                    f"the {MANAGER} stopped answering during the operation (nothing for "
                    f"{self._answer_s:.0f} s); its journal holds what it did, and it completes or "
                    "rolls the operation back when it answers again: check `switchyard status`",
                )
        try:
            result: OperationResult = ray.get(pending)
        except ray.exceptions.RayActorError:
            return None
        if on_event is not None:
            for event in result.events[seen:]:
                on_event(event)
        return result

    def _events_since(self, seen: int) -> list[OperationEvent] | None:
        """The operation's events after the first `seen`; None when the manager did not
        answer within a poll (a dead one fails the pending run, which says so)."""
        import ray

        try:
            events: list[OperationEvent] = ray.get(
                self._actor.events.remote(seen), timeout=min(EVENT_POLL_S, self._answer_s)
            )
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError):
            return None
        return events

    def fleet(self) -> FleetState:
        fleet: FleetState = self._answer(self._actor.fleet.remote(), "with the fleet")
        return fleet

    def plan_fleet(self, desired: FleetFile) -> FleetPlan:
        plan: FleetPlan = self._answer(
            self._actor.plan_fleet.remote(desired), "with a plan", STATUS_TIMEOUT_S
        )
        return plan

    def export_fleet(self) -> list[FleetModelEntry]:
        entries: list[FleetModelEntry] = self._answer(
            self._actor.export_fleet.remote(), "with the fleet's entries"
        )
        return entries

    def record_apply(self, record: Mapping[str, Any]) -> None:
        self._answer(self._actor.record_apply.remote(dict(record)), "to an apply's record")

    def status(self) -> ManagerStatus:
        status: ManagerStatus = self._answer(
            self._actor.status.remote(), "with its status", STATUS_TIMEOUT_S
        )
        return status

    def _answer(self, ref: Any, what: str, slower_s: float = 0.0) -> Any:
        """`ref`'s value within this client's deadline (`slower_s` for calls that probe
        every node, when longer)."""
        return answer(ref, MANAGER, what, timeout_s=max(self._answer_s, slower_s))
