"""Which Ray nodes are alive and how many replicas each Serve application runs: what the
ingress endpoints' `alive` and `running_replicas` in `status` are made of."""

from __future__ import annotations

from typing import Any


def alive_node_ids() -> set[str]:
    import ray

    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    return {str(n.get("NodeID")) for n in nodes if n.get("Alive")}


def running_replicas_or_none() -> dict[str, int] | None:
    """Running replicas per Serve app; None while Serve's controller cannot answer (it is
    restarting: the rest of the status still counts).

    From the controller's running-replica table, not `serve.status()`, which describes
    every deployment's whole config: the manager asks every few seconds."""
    from cluster.ray_adapters.serve_control import ServeControl
    from serve_apps.internals import running_replicas_by_app_now, serve_controller

    try:
        return running_replicas_by_app_now(serve_controller())
    except AttributeError:  # a Ray whose controller lacks the table
        pass
    except Exception:
        return None
    try:
        return ServeControl().running_replicas()
    except Exception:
        return None
