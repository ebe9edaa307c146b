"""Switchyard's part of a cluster `up` joined, removed: Serve's applications, the fleet
manager and the fleet registry with its saved state. The cluster itself keeps running.

`python -m cluster.startup.cluster_teardown ADDRESS` runs it in a child process, which
`switchyard down` gives a deadline, so an unreachable cluster is reported, not waited on.
"""

from __future__ import annotations

import contextlib
import sys


def remove_switchyard(address: str) -> None:
    import ray
    from ray import serve

    from cluster.ray_adapters.manager_actor import MANAGER_ACTOR_NAME
    from cluster.startup.ray_runtime import connect
    from serve_apps.registry.registry_actor import (
        REGISTRY_ACTOR_NAME,
        SWITCHYARD_NAMESPACE,
        forget_registry_state,
    )

    connect(address)
    serve.shutdown()  # type: ignore[no-untyped-call]
    for actor in (MANAGER_ACTOR_NAME, REGISTRY_ACTOR_NAME):
        with contextlib.suppress(ValueError):
            ray.kill(ray.get_actor(actor, namespace=SWITCHYARD_NAMESPACE))
    forget_registry_state()
    ray.shutdown()


if __name__ == "__main__":
    remove_switchyard(sys.argv[1])
