"""Every private API of another package that Switchyard relies on, in one module, each with
its reason: Ray and Ray Serve, Ray Serve LLM, uvicorn and vLLM.

These packages have no public API for these needs. Keeping them here means an upgrade is
checked in one place: `missing_internals()` lists what the installed packages lack, and
tests/unit/test_internals.py fails naming each one. This is why pyproject.toml pins Ray to
one minor release (2.60.x): a new minor may move any of these.

Both planes use this module, so it sits in the data plane (`serve_apps/`), the lowest layer
that may import Ray; it imports nothing of the project's, and tests/unit/test_layers.py
enforces that no other module reaches a private API.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
"""An ASGI `send` (the gateway's own alias, `serve_apps/gateway/guard.py`, is the same type)."""

# --- Ray and Ray Serve

HEAD_NODE_RESOURCE: Final = "node:__internal_head__"
"""Ray's implicit resource of the head node. Actors that keep state on the head's disk or
memory (manager, registry) and listeners on the head's address (gateway) are pinned with it;
Ray offers no public "run on the head node" option."""

SERVE_REPLICA_PREFIX: Final = "SERVE_REPLICA::"
"""Serve names a replica's placement group `SERVE_REPLICA::<app>#<deployment>#<id>`
(`ReplicaID.to_full_id_str`); the only way to tell which app holds which accelerators."""


def head_node_resources() -> dict[str, float]:
    """Actor resources that place it on the head node (a tiny share, never exhausted)."""
    return {HEAD_NODE_RESOURCE: 0.001}


def is_head_node(node: Mapping[str, Any]) -> bool:
    """Whether an entry of `ray.nodes()` is the head node."""
    return HEAD_NODE_RESOURCE in (node.get("Resources") or {})


def app_of_placement_group(name: str) -> str | None:
    """The Serve application whose replica owns a placement group named `name`."""
    if not name.startswith(SERVE_REPLICA_PREFIX):
        return None
    app, _, rest = name.removeprefix(SERVE_REPLICA_PREFIX).partition("#")
    return app if rest else None


def replica_actor_class_name(app: str, deployment: str) -> str:
    """The class name Serve gives a deployment's replica actors
    (`DeploymentID.to_replica_actor_class_name`): how the state API finds them."""
    return f"ServeReplica:{app}:{deployment}"


def available_resources_per_node() -> dict[str, dict[str, float]]:
    """Ray's unclaimed resources per node id. Public Ray gives only the cluster-wide sum
    (`ray.available_resources()`); admission and placement need them per node."""
    from ray._private.state import available_resources_per_node as per_node

    found: dict[str, dict[str, float]] = per_node()  # type: ignore[no-untyped-call]
    return {str(node): dict(resources) for node, resources in found.items()}


def running_replicas_in(deployment_status: Any) -> int:
    """Replicas of one `DeploymentStatusOverview` (`serve.status()`) that serve: RUNNING,
    and RECOVERING, a replica that a restarted controller (a head restart) found alive and
    is attaching to again; it never stopped answering, and counting it as gone would mark
    its model degraded for the seconds the controller takes. Its `replica_states` is keyed
    by Serve's private ReplicaState enum."""
    from ray.serve._private.common import ReplicaState

    states: Mapping[Any, int] = deployment_status.replica_states
    return int(states.get(ReplicaState.RUNNING, 0)) + int(states.get(ReplicaState.RECOVERING, 0))


def serve_controller() -> Any:
    """Serve's controller actor, found by its private name and namespace."""
    import ray
    from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE

    return ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)


async def running_replicas_by_app(controller: Any) -> dict[str, int]:
    """Serve app -> RUNNING replicas, from the controller's own running-replica table.

    `serve.status()` builds the whole instance description; at one poll a second it cost a
    busy gateway a third of its CPU. The table is what Serve's routers read; AttributeError
    when this Ray's controller lacks it (callers fall back to `serve.status()`)."""
    by_deployment: Mapping[Any, list[Any]] = await controller._all_running_replicas.remote()
    return _count_by_app(by_deployment)


def running_replicas_by_app_now(controller: Any, timeout_s: float = 10.0) -> dict[str, int]:
    """`running_replicas_by_app` for a thread that may block (the fleet manager's)."""
    import ray

    by_deployment: Mapping[Any, list[Any]] = ray.get(
        controller._all_running_replicas.remote(), timeout=timeout_s
    )
    return _count_by_app(by_deployment)


def _count_by_app(by_deployment: Mapping[Any, list[Any]]) -> dict[str, int]:
    running: dict[str, int] = {}
    for deployment_id, replicas in by_deployment.items():
        running[deployment_id.app_name] = running.get(deployment_id.app_name, 0) + len(replicas)
    return running


def llm_server_health_check_period_s(server: Any, default_s: float = 10.0) -> float:
    """The health-check period an `LLMServer` replica was deployed with: Ray Serve LLM keeps
    its LLMConfig only in a private attribute."""
    config = server._llm_config.deployment_config
    return float(config.get("health_check_period_s", default_s))


def llm_server_load_from(server: Any, model_dir: str) -> None:
    """Point an `LLMServer` that has not started its engine at `model_dir` (this node's copy
    of the weights). Its LLMConfig caches the engine config it derived from the old path in
    a private attribute (built on the driver, then pickled along), so that cache is reset."""
    config = server._llm_config
    config.model_loading_config.model_source = model_dir
    config._engine_config = None


async def llm_server_asgi_app(server: Any) -> Any:
    """vLLM's OpenAI ASGI app over an `LLMServer`'s running engine (what `vllm serve`
    runs). Ray Serve LLM's engine wrapper builds it; it is not part of its public API."""
    engine = server.engine
    if engine is None:
        raise RuntimeError("the LLMServer's engine has not started")
    return await engine.build_asgi_app()


@dataclass(frozen=True)
class ServeLogTargets:
    """The file handlers behind this replica's Serve log, as Serve configured them.

    Why: vLLM configures logging with `logging.config.dictConfig` when an engine is created
    in the replica process (`AsyncLLM`), and dictConfig closes every handler of the
    process. Serve's replica logger is a `MemoryHandler` whose `target` (its file) closing
    sets to None: the replica's Serve log then keeps every record in memory and writes
    none, and a Serve controller restarted with the head fails the replica's
    `is_allocated` (`get_component_logger_file_path` reads `target.baseFilename`) and
    stops it, so every vLLM engine was restarted by a head restart."""

    kept: tuple[tuple[Any, Any], ...]
    """(MemoryHandler, its target) of the `ray.serve` logger."""

    @classmethod
    def now(cls) -> ServeLogTargets:
        import logging
        import logging.handlers

        from ray.serve._private.constants import SERVE_LOGGER_NAME

        handlers = logging.getLogger(SERVE_LOGGER_NAME).handlers
        return cls(
            tuple(
                (h, h.target)
                for h in handlers
                if isinstance(h, logging.handlers.MemoryHandler) and h.target is not None
            )
        )

    def restore(self) -> int:
        """Give each closed MemoryHandler its target back (a file handler reopens its file
        on its next record); how many were closed."""
        closed = [(handler, target) for handler, target in self.kept if handler.target is None]
        for handler, target in closed:
            handler.target = target
        return len(closed)


def llm_server_engine_client(server: Any) -> Any:
    """The vLLM `AsyncLLM` inside an `LLMServer`'s running engine: Ray Serve LLM's engine
    wrapper keeps it in a private attribute. The replica asks it whether any request is in
    flight (`engine/idle_gauges.py`)."""
    engine = server.engine
    client = getattr(engine, "_engine_client", None)
    if client is None:
        raise RuntimeError("the LLMServer's engine has not started")
    return client


def metrics_report_interval_s() -> float:
    """How often a Ray worker exports its metrics to the node's agent. Ray floors the
    interval at 1 s (`SetReportInterval` in src/ray/stats/stats.h); only its private config
    object reads the value the cluster was started with."""
    import ray

    return max(float(ray._config.metrics_report_interval_ms()), 1000.0) / 1000.0


# --- uvicorn
#
# A relayed token is one HTTP chunk. Through ASGI each costs a message dict, an awaited `send`
# and its flow-control checks; `ChunkWriter` frames the chunk as uvicorn's own `send` does
# (`httptools_impl.RequestResponseCycle.send`: `%x CRLF body CRLF`) and writes it to the
# client's transport from inside the engine connection's read. The response's start and end
# still go through `send`, so uvicorn's state (keep-alive, completion) stays its own. Anything
# else (the h11 implementation, HTTP/1.0 without chunking, another ASGI server, a test client)
# gets None, and the relay falls back to `send`.

_UVICORN_CYCLE = "uvicorn.protocols.http.httptools_impl"
_CYCLE_ATTRIBUTES = (
    "transport",
    "flow",
    "disconnected",
    "response_started",
    "response_complete",
    "chunked_encoding",
    "scope",
)
"""The private attributes of uvicorn's `RequestResponseCycle` that `ChunkWriter` reads."""


class ChunkWriter:
    """Writes body chunks of a started, chunked uvicorn response straight to its socket."""

    def __init__(self, cycle: Any) -> None:
        self._cycle = cycle
        self._transport = cycle.transport
        self._flow = cycle.flow

    def write(self, data: bytes) -> None:
        if self._cycle.disconnected or self._transport.is_closing():
            return  # the client left; the relay hears it from `receive`
        self._transport.write(b"%x\r\n%b\r\n" % (len(data), data))

    @property
    def paused(self) -> bool:
        """The client reads slower than the engine writes: the socket's buffer is full."""
        return bool(self._flow.write_paused) and not self._cycle.disconnected

    async def drained(self) -> None:
        await self._flow.drain()


def chunk_writer(send: Send) -> ChunkWriter | None:
    """A `ChunkWriter` for the response `send` belongs to, if uvicorn's httptools server
    sends it chunked and has sent its headers; else None."""
    cycle = getattr(send, "__self__", None)
    if cycle is None:
        return None
    try:
        from uvicorn.protocols.http.httptools_impl import RequestResponseCycle
    except ImportError:  # uvicorn without httptools
        return None
    if type(cycle) is not RequestResponseCycle:
        return None
    if not cycle.response_started or cycle.response_complete or cycle.chunked_encoding is not True:
        return None
    if cycle.scope.get("method") == "HEAD":
        return None
    return ChunkWriter(cycle)


# --- vLLM

_VLLM_PARSER_REGISTRIES: Final = {
    "tool": ("tool_parsers", "_TOOL_PARSERS_TO_REGISTER"),
    "reasoning": ("reasoning", "_REASONING_PARSERS_TO_REGISTER"),
}
"""vLLM registers its built-in parsers lazily from two private dicts (name -> module)."""


def vllm_parser_names(kind: Literal["tool", "reasoning"]) -> frozenset[str] | None:
    """The built-in tool-call or reasoning parser names of the installed vLLM, read from its
    registry's source without importing it (an import costs 10-15 s on two cores); None
    when vLLM is not installed or the registry is not where this expects it."""
    module, var = _VLLM_PARSER_REGISTRIES[kind]
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    source = Path(next(iter(spec.submodule_search_locations))) / module / "__init__.py"
    if not source.is_file():
        return None
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and node.targets else None
        if isinstance(target, ast.Name) and target.id == var:
            assert isinstance(node, ast.Assign)
            return frozenset(ast.literal_eval(node.value))
    return None


# --- The self-check


class GcsKeyValue:
    """The GCS's key-value store, as Serve's controller keeps its checkpoints in it
    (`ray.serve._private.storage.kv_store.RayInternalKVStore`): the one store a Ray cluster
    has that outlives an actor's process and, with GCS fault tolerance, the head's. Ray's
    public API has none (`ray.experimental.internal_kv` has no timeout, and a GCS that is
    away would block the caller for its whole reconnect timeout).

    Built lazily, in the process that uses it: a `GcsClient` does not pickle."""

    def __init__(self, namespace: str, timeout_s: float) -> None:
        self._namespace = namespace.encode()
        self._timeout_s = timeout_s
        self._client: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}

    def _gcs(self) -> Any:
        if self._client is None:
            import ray

            # Compiled; its stub does not declare the class.
            gcs_client = importlib.import_module("ray._raylet").GcsClient
            self._client = gcs_client(address=ray.get_runtime_context().gcs_address)
        return self._client

    def get(self, key: str) -> bytes | None:
        value: bytes | None = self._gcs().internal_kv_get(
            key.encode(), namespace=self._namespace, timeout=self._timeout_s
        )
        return value

    def put(self, key: str, value: bytes) -> None:
        self._gcs().internal_kv_put(
            key.encode(),
            value,
            overwrite=True,
            namespace=self._namespace,
            timeout=self._timeout_s,
        )

    def delete(self, key: str) -> None:
        self._gcs().internal_kv_del(
            key.encode(), False, namespace=self._namespace, timeout=self._timeout_s
        )


def delete_gcs_tables_in_redis(
    host: str, port: int, password: str | None, storage_namespace: str
) -> None:
    """Delete a head's GCS tables from Redis (`down` of a fault-tolerant head): a later head
    in the same namespace would otherwise try to recover a cluster that is gone. What
    KubeRay's cleanup job calls; Ray has no public API for it."""
    from ray._private.gcs_utils import cleanup_redis_storage

    cleanup_redis_storage(
        host=host,
        port=port,
        password=password or "",
        use_ssl=False,
        storage_namespace=storage_namespace,
    )


def forget_bootstrap_address(address: str) -> None:
    """Delete Ray's record of the last cluster started on this machine
    (`ray_current_cluster` in Ray's temp directory) when it names `address`.

    `ray start --head` refuses to start at an address that record names while a raylet on
    this machine still points at it; a fault-tolerant head's data node does, by design,
    while its head restarts. `ray start --head` writes the record again.
    """
    from ray._private.utils import (  # type: ignore[attr-defined]
        get_ray_address_file,
        read_ray_address,
    )

    if read_ray_address(None) == address:
        Path(get_ray_address_file(None)).unlink(missing_ok=True)


@dataclass(frozen=True)
class _Requirement:
    what: str
    check: Callable[[], bool]


def _has(module: str, *attributes: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            found: Any = importlib.import_module(module)
        except ImportError:
            return False
        for attribute in attributes:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True

    return check


def _gcs_client_has_timed_kv() -> bool:
    """`GcsClient`'s key-value calls take `timeout` (checked on Serve's own store, which
    calls them the same way)."""
    try:
        from ray.serve._private.storage import kv_store
    except ImportError:
        return False
    source = inspect.getsource(kv_store.RayInternalKVStore)
    return all(f"internal_kv_{verb}(" in source for verb in ("get", "put", "del")) and (
        "timeout=self.timeout" in source and _has("ray._raylet", "GcsClient")()
    )


def _has_replica_state_running() -> bool:
    return (
        _has("ray.serve._private.common", "ReplicaState", "RUNNING")()
        and _has("ray.serve._private.common", "ReplicaState", "RECOVERING")()
    )


def call_every_replica(
    app: str, deployment: str, method: str, kwargs: Mapping[str, Any] | None = None
) -> list[Any]:
    """`method(**kwargs)` on every running replica of the deployment, each awaited: Serve's
    handles reach one replica per call, and a control message (sleep, wake) must reach all.
    Ray Serve LLM's experimental `broadcast` does this (ray/llm/_internal/serve/utils/
    broadcast.py: each replica actor's `handle_request` with a request naming the method)."""
    from ray import serve
    from ray.llm._internal.serve.utils.broadcast import broadcast

    handle = serve.get_deployment_handle(deployment, app)
    results: list[Any] = broadcast(handle, method, kwargs=dict(kwargs or {}))
    return results


def start_deleting_app(app: str) -> None:
    """Ask Serve to delete `app` and return at once. Serve's public `delete` blocks polling
    its status once a second (ray/serve/_private/client.py `delete_apps`,
    CLIENT_POLLING_INTERVAL_S), a second added to every unload; its `_blocking` argument
    lets the caller wait at its own pace."""
    from ray import serve

    serve.delete(app, _blocking=False)


def _delete_takes_blocking() -> bool:
    from ray import serve

    return "_blocking" in inspect.signature(serve.delete).parameters


def _controller_has_running_table() -> bool:
    return _has("ray.serve._private.controller", "ServeController", "_all_running_replicas")()


def _llm_server_keeps_config() -> bool:
    import inspect

    module = "ray.llm._internal.serve.core.server.llm_server"
    if not _has(module, "LLMServer", "_init_shared")():
        return False
    source = inspect.getsource(importlib.import_module(module).LLMServer._init_shared)
    return "self._llm_config" in source


def _llm_config_caches_engine_config() -> bool:
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    return "_engine_config" in LLMConfig.__private_attributes__


def _serve_log_is_a_memory_handler() -> bool:
    from ray.serve._private import logging_utils
    from ray.serve._private.constants import SERVE_LOGGER_NAME

    source = inspect.getsource(logging_utils.get_component_logger_file_path)
    configure = inspect.getsource(logging_utils.configure_component_logger)
    return (
        bool(SERVE_LOGGER_NAME)
        and "MemoryHandler" in source
        and "target.baseFilename" in source
        and "MemoryHandler(" in configure
    )


def _engine_builds_asgi_app() -> bool:
    return _has(
        "ray.llm._internal.serve.engines.vllm.vllm_engine", "VLLMEngine", "build_asgi_app"
    )()


def _engine_keeps_client() -> bool:
    import inspect

    if not _has("ray.llm._internal.serve.engines.vllm.vllm_engine", "VLLMEngine")():
        return False
    from ray.llm._internal.serve.engines.vllm.vllm_engine import VLLMEngine

    return "self._engine_client" in inspect.getsource(VLLMEngine)


def _ray_config_has_report_interval() -> bool:
    return _has("ray", "_config")() and hasattr(
        importlib.import_module("ray")._config, "metrics_report_interval_ms"
    )


def _head_resource_name() -> bool:
    if not _has("ray._common.constants", "HEAD_NODE_RESOURCE_NAME")():
        return False
    from ray._common.constants import HEAD_NODE_RESOURCE_NAME

    return bool(HEAD_NODE_RESOURCE_NAME == HEAD_NODE_RESOURCE)


def _replica_class_name_format() -> bool:
    if not _has("ray.serve._private.common", "DeploymentID", "to_replica_actor_class_name")():
        return False
    from ray.serve._private.common import DeploymentID

    name = DeploymentID(name="d", app_name="a").to_replica_actor_class_name()  # type: ignore[no-untyped-call]
    return bool(name == replica_actor_class_name("a", "d"))


def _replica_id_format() -> bool:
    if not _has("ray.serve._private.common", "ReplicaID", "to_full_id_str")():
        return False
    from ray.serve._private.common import DeploymentID, ReplicaID

    full = ReplicaID("r1", DeploymentID(name="d", app_name="a")).to_full_id_str()
    return full == f"{SERVE_REPLICA_PREFIX}a#d#r1"


def _uvicorn_cycle_has_attributes() -> bool:
    import inspect

    if not _has(_UVICORN_CYCLE, "RequestResponseCycle")():
        return False
    cycle = importlib.import_module(_UVICORN_CYCLE).RequestResponseCycle
    source = inspect.getsource(cycle)
    return all(f"self.{name}" in source for name in _CYCLE_ATTRIBUTES)


def _vllm_registries_readable() -> bool:
    return all(vllm_parser_names(kind) for kind in ("tool", "reasoning"))


REQUIREMENTS: Final[tuple[_Requirement, ...]] = (
    _Requirement(f"the head node's resource {HEAD_NODE_RESOURCE!r}", _head_resource_name),
    _Requirement(
        "ray._private.state.available_resources_per_node",
        _has("ray._private.state", "available_resources_per_node"),
    ),
    _Requirement(
        "ray.serve._private.common.ReplicaState.RUNNING / RECOVERING", _has_replica_state_running
    ),
    _Requirement(
        "ray._raylet.GcsClient.internal_kv_get/put/del with timeout", _gcs_client_has_timed_kv
    ),
    _Requirement(
        "ray._private.gcs_utils.cleanup_redis_storage",
        _has("ray._private.gcs_utils", "cleanup_redis_storage"),
    ),
    _Requirement(
        "ray.serve._private.constants.SERVE_CONTROLLER_NAME / SERVE_NAMESPACE",
        _has("ray.serve._private.constants", "SERVE_CONTROLLER_NAME", "upper"),
    ),
    _Requirement(
        "ServeController._all_running_replicas (the running-replica table)",
        _controller_has_running_table,
    ),
    _Requirement("ray.serve.delete(name, _blocking=...)", _delete_takes_blocking),
    _Requirement("LLMServer._llm_config (set in LLMServer._init_shared)", _llm_server_keeps_config),
    _Requirement(
        "LLMConfig._engine_config (its cached engine config)", _llm_config_caches_engine_config
    ),
    _Requirement(
        "Serve's replica log is a MemoryHandler on SERVE_LOGGER_NAME whose target "
        "get_component_logger_file_path reads",
        _serve_log_is_a_memory_handler,
    ),
    _Requirement("VLLMEngine.build_asgi_app", _engine_builds_asgi_app),
    _Requirement("VLLMEngine._engine_client (the vLLM AsyncLLM)", _engine_keeps_client),
    _Requirement("ray._config.metrics_report_interval_ms", _ray_config_has_report_interval),
    _Requirement(
        "ray.llm._internal.serve.utils.broadcast.broadcast (a call to every replica)",
        _has("ray.llm._internal.serve.utils.broadcast", "broadcast"),
    ),
    _Requirement(
        "ray._private.utils.get_ray_address_file / read_ray_address (`ray start`'s record)",
        _has("ray._private.utils", "get_ray_address_file", "__call__"),
    ),
    _Requirement(
        "Serve replica placement groups named SERVE_REPLICA::<app>#<deployment>#<id>",
        _replica_id_format,
    ),
    _Requirement(
        "Serve replica actors of class ServeReplica:<app>:<deployment>",
        _replica_class_name_format,
    ),
    _Requirement(
        f"uvicorn's httptools RequestResponseCycle with {', '.join(_CYCLE_ATTRIBUTES)}",
        _uvicorn_cycle_has_attributes,
    ),
    _Requirement(
        "vLLM's parser registries "
        + " and ".join(var for _, var in _VLLM_PARSER_REGISTRIES.values()),
        _vllm_registries_readable,
    ),
)


def missing_internals() -> list[str]:
    """What the installed packages lack of the private APIs above (empty when all are
    there)."""
    return [r.what for r in REQUIREMENTS if not r.check()]
