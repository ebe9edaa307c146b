"""A request's `model` (a name or an alias) resolved to the route it is forwarded to.

Requests for an alias that a swap is moving are held, up to a bound, until the routing
table says where the alias points now. So are requests for a parked model: the resolver
asks for its wake (`RequestWake`: a note in the fleet registry that the manager takes) and
holds them until the model serves, or until the manager says the wake ended without it.
Every other refusal is answered at once.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping

from domain.model_state import ModelState
from serve_apps.gateway.gateway_metrics import GatewayMetrics, HoldCause, HoldOutcome
from serve_apps.gateway.gateway_settings import GatewaySettings
from serve_apps.gateway.http_errors import unavailable
from serve_apps.gateway.openai_errors import GatewayError
from serve_apps.registry.replica_health import ReplicaHealthView
from serve_apps.registry.route_view import RouteView
from serve_apps.registry.routing_table import Forward, Hold, ModelRoute, Refuse

log = logging.getLogger(__name__)

_ASK_TIMEOUT_S = 5.0

RequestWake = Callable[[str], Awaitable[None]]
"""Ask the fleet manager to wake the parked model of that name (idempotent)."""


async def no_wakes(name: str) -> None:
    """A gateway without a registry to ask (unit tests of other paths)."""


class RouteResolver:
    def __init__(
        self,
        settings: GatewaySettings,
        routes: RouteView,
        health: ReplicaHealthView,
        metrics: GatewayMetrics,
        clock: Callable[[], float] = time.time,
        request_wake: RequestWake = no_wakes,
    ) -> None:
        self._clock = clock
        self._request_wake = request_wake
        self._settings = settings
        self._routes = routes
        self._health = health
        self._metrics = metrics
        self._held = 0
        self._held_by_alias: Counter[str] = Counter()

    @property
    def held(self) -> int:
        """Requests held right now, all aliases together."""
        return self._held

    @property
    def held_by_alias(self) -> Mapping[str, int]:
        """Requests held right now per alias (a live view; zero counts stay listed)."""
        return self._held_by_alias

    async def resolve(self, requested: str) -> ModelRoute:
        """The route to forward to; raises `GatewayError` when the request is refused."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.hold_timeout_s
        held = False
        hold_outcome = HoldOutcome.RELEASED
        held_since = loop.time()
        wakes_ended_seen: int | None = None
        cause = HoldCause.SWAP
        try:
            while True:
                resolution = self._routes.table.resolve(requested)
                if isinstance(resolution, Forward):
                    # Only health seen after the last table change counts: a model that was
                    # just (re)deployed and published READY has no stale "0 replicas" against it.
                    fresh = self._health.updated_at > self._routes.changed_at
                    if fresh and self._health.running(resolution.route.app_name) == 0:
                        raise self._unavailable(
                            f"The model '{resolution.route.name}' has no running replica "
                            "right now (it is being replaced); retry shortly."
                        )
                    return resolution.route
                if isinstance(resolution, Refuse):
                    refused = resolution.route
                    if refused is not None and self._serving_again(refused):
                        return refused
                    retry = self._settings.retry_after_s if resolution.status == 503 else None
                    raise GatewayError(
                        resolution.status,
                        resolution.message,
                        code=resolution.code,
                        param="model",
                        retry_after_s=retry,
                    )
                assert isinstance(resolution, Hold)
                if resolution.for_wake:
                    cause = HoldCause.WAKE
                parked = resolution.wake
                if parked is not None:
                    if wakes_ended_seen is None:
                        wakes_ended_seen = parked.wakes_ended
                    elif parked.wakes_ended > wakes_ended_seen:
                        hold_outcome = HoldOutcome.WAKE_ENDED
                        raise self._wake_ended(parked)
                    await self._ask_for_wake(parked.name)
                if not held:
                    self._refuse_a_hold_longer_than_the_bound(requested, resolution)
                    if self._held >= self._settings.max_held_requests:
                        self._metrics.hold_finished(requested, HoldOutcome.QUEUE_FULL, 0.0, cause)
                        raise self._unavailable(
                            f"'{requested}' is being switched and the hold queue is full."
                        )
                    self._held += 1
                    self._held_by_alias[requested] += 1
                    held = True
                    held_since = loop.time()
                remaining = deadline - loop.time()
                if remaining <= 0 or not await self._routes.wait_for_change(remaining):
                    hold_outcome = HoldOutcome.TIMEOUT
                    raise self._unavailable(
                        f"'{requested}' is still being switched after "
                        f"{self._settings.hold_timeout_s:g} s."
                    )
        finally:
            if held:
                self._held -= 1
                self._held_by_alias[requested] -= 1
                waited = loop.time() - held_since
                self._metrics.hold_finished(requested, hold_outcome, waited, cause)

    def _refuse_a_hold_longer_than_the_bound(self, requested: str, hold: Hold) -> None:
        """503 at once, with the predicted remaining time as Retry-After, when the manager
        expects the hold to outlast what this gateway would wait: the client learns when to
        come back instead of waiting to time out. A parked model's wake goes on."""
        if hold.ends_at is not None:
            left = hold.ends_at - self._clock()
        elif hold.predicted_s is not None:
            left = hold.predicted_s
        else:
            return
        if left > self._settings.hold_timeout_s:
            cause = HoldCause.WAKE if hold.for_wake else HoldCause.SWAP
            self._metrics.hold_finished(requested, HoldOutcome.TOO_LONG, 0.0, cause)
            doing = "switched" if hold.alias in self._routes.table.held_aliases else "woken"
            raise unavailable(
                f"'{requested}' is being {doing} for about {left:.0f} s more, longer than "
                f"this gateway holds requests ({self._settings.hold_timeout_s:g} s); retry then.",
                max(1, math.ceil(left)),
            )

    async def _ask_for_wake(self, name: str) -> None:
        """Ask once per table change while the model is parked: the registry keeps one note
        per model, and the manager starts one wake for it however many ask."""
        try:
            await asyncio.wait_for(self._request_wake(name), _ASK_TIMEOUT_S)
        except Exception as exc:
            # The hold goes on; the next table change (or the hold's end) settles it.
            log.warning("could not ask for %s's wake: %r", name, exc)

    def _wake_ended(self, route: ModelRoute) -> GatewayError:
        """The manager ended the wake this request waited for without serving the model."""
        return GatewayError(
            503,
            f"The model '{route.name}' is parked and could not be woken: {route.error}",
            code=route.error_code or "model_unavailable",
            param="model",
            retry_after_s=self._settings.retry_after_s,
        )

    def _serving_again(self, route: ModelRoute) -> bool:
        """A DEGRADED model that this gateway sees running a replica again is served.

        The manager marks DEGRADED from its own poll of Serve every few seconds, so its mark
        can lag a replica Serve has already replaced; replica health this gateway observed
        after that mark overrides it (a lost node still shows 0 replicas, and is refused)."""
        if route.state is not ModelState.DEGRADED:
            return False
        fresh = self._health.updated_at > self._routes.changed_at
        return fresh and (self._health.running(route.app_name) or 0) > 0

    def _unavailable(self, message: str) -> GatewayError:
        return unavailable(message, self._settings.retry_after_s)
