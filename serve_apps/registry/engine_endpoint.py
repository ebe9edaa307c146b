"""Where a model replica's engine answers HTTP directly: the gateway's fast data path.

Every streamed token crossing a Ray Serve handle is a Ray streaming-generator item, with its
own object, task-event and event-loop bookkeeping on both sides; on a small machine that
costs more CPU than the engine's own front end (BENCHMARKS.md). So each engine replica also
serves vLLM's own OpenAI app on a port of its node, and registers that address here; the
gateway streams from it over plain HTTP and keeps the Serve handle as the fallback.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EngineEndpoint:
    """One engine replica's direct HTTP address, as registered in the fleet registry."""

    app_name: str
    """The model's Serve application (the routing table's `ModelRoute.app_name`)."""
    replica_id: str
    url: str
    """`http://HOST:PORT`, HOST being the replica's node address."""
    token: str = field(repr=False)
    """Bearer token the replica requires: its port is reachable from other nodes, and only
    gateways (which read it from the registry, behind Ray's own authentication) may call it."""
    refresh_period_s: float = 5.0
    """The replica registers again this often (its Serve health-check period)."""

    def expired(self, age_s: float) -> bool:
        """Missed three refreshes (plus slack): its replica is dead or failing health checks."""
        return age_s > 3 * self.refresh_period_s + 10.0
