"""Serving health of each model from its running replicas: READY <-> DEGRADED.

Pure rules (no Ray). A model the fleet serves is DEGRADED while its Serve application has no
running replica (its engine died, or the node hosting it was lost and Serve is re-placing
it, which happens by itself once a node with free accelerators exists); it is READY again as
soon as a replica runs. The manager applies these transitions to the registry, so the
gateway answers 503 + Retry-After meanwhile and `status` shows why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from domain.model_state import ModelState


@dataclass(frozen=True)
class HealthChange:
    name: str
    state: ModelState
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"model": self.name, "state": self.state.value, "reason": self.reason}


def health_changes(
    published: Mapping[str, ModelState],
    app_of: Mapping[str, str],
    running_replicas: Mapping[str, int],
) -> list[HealthChange]:
    """Transitions for the fleet's models.

    published: each fleet model's state in the routing table; app_of: model -> Serve app
    name; running_replicas: Serve app -> replicas RUNNING now (an app missing from it has
    none). Only READY and DEGRADED models move: LOADING, DRAINING, FAILED and REMOVED belong
    to an operation, which owns them.
    """
    changes = []
    for name, state in sorted(published.items()):
        app = app_of.get(name)
        if app is None:
            continue
        running = running_replicas.get(app, 0)
        if state is ModelState.READY and running == 0:
            reason = (
                f"no running replica of {app}: its engine or node was lost; "
                "Serve is re-placing it when capacity allows"
                if app in running_replicas
                else f"its Serve application {app} is gone"
            )
            changes.append(HealthChange(name, ModelState.DEGRADED, reason))
        elif state is ModelState.DEGRADED and running > 0:
            changes.append(
                HealthChange(name, ModelState.READY, f"{running} replica(s) of {app} running again")
            )
    return changes
