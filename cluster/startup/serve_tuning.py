"""The Ray and Ray Serve settings every Ray process Switchyard starts runs with.

Serving processes run at the priority of Ray's own daemons. Ray starts its worker processes at
`nice 15` (`RAY_worker_niceness`) so that its raylet, GCS and dashboard win the CPU over user
work. On a serving head those workers are the product: the engine replicas (vLLM's engine core
and workers are a Ray worker's children and inherit the niceness), the gateway and the fleet
manager. At nice 15 every Ray daemon, and any process run beside the cluster (a load generator,
an operator's script), takes the CPU from them first: the gateway's event loop was preempted
once per 4 relayed tokens under load, 10 times as often as at nice 0 (the relay investigation in
BENCHMARKS.md's relay-capacity section), and vLLM's own server, run by hand, competed at nice 0
against Switchyard's engine at 15, so the fair comparison was not fair in this. Niceness 0 puts
them on equal terms; the kernel still gives Ray's daemons their share. A lower value would need
privileges and could starve Ray's daemons.

The Ray Serve settings below are for Switchyard's handle calls.

Tokens normally reach clients without Ray Serve (the gateway listens on the endpoint itself
and streams from the engine replicas' own HTTP ports: serve_apps/relay/direct_backend.py).
Handles still carry the manager's warm-up requests and the gateway's fallback path, which
these settings make cheaper.

Ray Serve reads these once, at import, in each process (controller, proxy, replicas), so they
must be in the environment of `ray start`; workers inherit it. They are Ray Serve's own
"throughput optimized" settings (`RAY_SERVE_THROUGHPUT_OPTIMIZED` in
ray/serve/_private/constants.py) minus two that do not fit Switchyard:

- direct ingress stays off: it makes each ingress replica listen on a port of its own
  (30000-31000), while Switchyard promises one endpoint port (its gateway replicas bind the
  endpoint themselves);
- the router keeps its own event loop: the fleet manager is a threaded actor that calls
  deployment handles (warm-up requests) from threads without an asyncio loop, which Serve
  refuses when the router shares the caller's loop.

They are used because they are Ray's own recommendation for streaming throughput. The handle
path is only the fallback and warm-up path, so Switchyard takes Ray's recommended settings for
it rather than tuning its own; the whole test suite runs with them. A value the operator
already set in the environment wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

SERVE_TUNING_ENV: Final[Mapping[str, str]] = {
    # Engines, gateways and the manager at the priority of Ray's daemons, not below them (see
    # the module docstring). Ray reads it in each worker as it starts.
    "RAY_worker_niceness": "0",
    # Handle and proxy traffic over gRPC: one streamed chunk is one gRPC message instead of a
    # Ray object per chunk.
    "RAY_SERVE_USE_GRPC_BY_DEFAULT": "1",
    # Run user code on the replica's own event loop: no thread hop per chunk.
    "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
    # See the module docstring: the manager calls handles from threads.
    "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "1",
    # Replica logs to their files only, access-log lines buffered, not flushed per request.
    "RAY_SERVE_LOG_TO_STDERR": "0",
    "RAY_SERVE_REQUEST_PATH_LOG_BUFFER_SIZE": "1000",
    # Long-lived objects built at start-up (engine, tokenizer) leave the GC's scans.
    "RAY_SERVE_FREEZE_GC_ON_STARTUP": "1",
    "RAY_SERVE_ENABLE_DIRECT_INGRESS": "0",
    # Serve's gRPC keeps gRPC's 4 MiB receive cap, under which a request the gateway accepts
    # (up to its 4 MiB body limit, larger once pickled) or a big non-streamed answer would fail
    # as RESOURCE_EXHAUSTED -> 503; tests/faults/test_bad_input.py covers both. 128 MiB is a
    # cap, not an allocation.
    "RAY_SERVE_REPLICA_GRPC_MAX_MESSAGE_LENGTH": str(128 * 1024 * 1024),
}


def with_serve_tuning(environment: Mapping[str, str]) -> dict[str, str]:
    """`environment` plus Switchyard's Serve settings; values already set are kept."""
    return {**SERVE_TUNING_ENV, **environment}
