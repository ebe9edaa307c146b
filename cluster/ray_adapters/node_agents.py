"""One long-lived worker process per node for the manager's per-node work: hardware probes,
cache markers, disk verdicts, staging.

Why not a Ray task per call: the manager is a detached actor, and once the driver that
created it (`switchyard up`) has exited, its job is finished. Ray then starts a new worker
process for every task the manager submits and kills it as soon as it is idle (measured here:
0.6 s per task, every time, against 3 ms from a live driver). Every operation probes each
node and checks each node's cache, so each paid that start-up several times over. An actor
keeps its process: an agent is started once per node, on first use, and answers in
milliseconds after that.

Agents are owned by the process that creates them (the manager), so they end with it. One
that dies (its node lost, its process killed) fails the calls made to it, as a task on a lost
node would, and is started again on the next call. An agent runs several calls at once
(threads), so a probe never waits behind a download on the same node.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

AGENT_CONCURRENCY = 16
"""Calls one agent runs at once: more than the manager ever has in flight on one node."""


class NodeAgent:
    """Runs a function on its node (plain class; decorated in `NodeAgents._start`)."""

    def run(
        self, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        return function(*args, **kwargs)


class NodeAgents:
    """The agents this process has started, one per node id; thread-safe."""

    def __init__(self) -> None:
        self._agents: dict[str, Any] = {}
        self._lock = threading.Lock()

    def submit(
        self, node_id: str, function: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Any:
        """Start `function(*args, **kwargs)` on `node_id`'s agent; its object ref."""
        return self._agent(node_id).run.remote(function, args, kwargs)

    def failed(self, node_id: str, error: BaseException) -> None:
        """A call to `node_id`'s agent raised `error`: an agent that died is started again
        on the next call (an error of the function itself leaves it be)."""
        from ray.exceptions import RayActorError

        if isinstance(error, RayActorError):
            with self._lock:
                self._agents.pop(node_id, None)

    def _agent(self, node_id: str) -> Any:
        with self._lock:
            agent = self._agents.get(node_id)
            if agent is None:
                agent = self._agents[node_id] = _start(node_id)
            return agent


def _start(node_id: str) -> Any:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    # No CPU: an agent must run beside a model that holds every CPU of its node.
    return (
        ray.remote(NodeAgent)
        .options(
            num_cpus=0,
            max_concurrency=AGENT_CONCURRENCY,
            max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
        )
        .remote()
    )
