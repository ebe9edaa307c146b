"""What a relayed chunk costs without Ray, and what the bare system calls cost: the floor under
relay_capacity.py's figures.

Three relays of the same emitter (vLLM's chunk format, a token every 10 ms per stream, in its
own process), each in a process of its own, each loaded with the same client at rising
concurrency; per level the relay process's user and system CPU per chunk (psutil):

  passthrough  a uvloop protocol that writes every read from the emitter to the client as it
               came: one read and one write per chunk, nothing else (Python's floor)
  gateway      Switchyard's gateway (routing, the tenant gate, vLLM's request validation,
               the direct backend, the pushed relay, in-memory metrics) under uvicorn on
               uvloop, as in a gateway replica, but in a plain process: no Ray worker, no Ray
               metrics
  (relay_capacity.py measures the same gateway inside its Ray Serve replica)

    .venv/bin/python benchmarks/relay_floor.py            # ~1 min

Not a test: nothing here asserts a number. Prints the median round (by total CPU per chunk)
of each relay and level; every round is in benchmarks/results/relay_floor.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import sys
from pathlib import Path
from typing import Any

import psutil
from comparison_report import lower_median, run_record
from relay_capacity import measure_level
from relay_capacity import parse_args as capacity_args

from switchyard.bench.client import Endpoint

REPO_ROOT = Path(__file__).resolve().parents[1]
TOKEN = (
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"default",'
    b'"choices":[{"index":0,"delta":{"content":"tok"},"logprobs":null,"finish_reason":null}]}\n\n'
)


def emitter(ready: Any) -> None:
    """vLLM's streamed chat answer: `max_tokens` token events 10 ms apart, usage, [DONE]."""
    import uvloop

    from serve_apps.asgi_listener import AsgiListener

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        tokens = int(json.loads(raw).get("max_tokens") or 16)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(tokens):
            await send({"type": "http.response.body", "body": TOKEN, "more_body": True})
            await asyncio.sleep(0.01)
        usage = {"prompt_tokens": 4, "completion_tokens": tokens, "total_tokens": tokens + 4}
        tail = b'data: {"choices":[],"usage":%b}\n\ndata: [DONE]\n\n' % json.dumps(usage).encode()
        await send({"type": "http.response.body", "body": tail})

    async def main() -> None:
        listener = AsgiListener(app, "127.0.0.1")
        await listener.start()
        ready.put(listener.url)
        await asyncio.Event().wait()

    uvloop.run(main())


def passthrough(upstream_url: str, ready: Any) -> None:
    import uvloop

    host, port = upstream_url.removeprefix("http://").rsplit(":", 1)

    class Client(asyncio.Protocol):
        """Each client connection gets its own engine connection; bytes flow both ways."""

        def __init__(self) -> None:
            self.upstream: asyncio.Transport | None = None
            self.early: list[bytes] | None = None  # what came before the upstream connected

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport: Any = transport

        def data_received(self, data: bytes) -> None:
            if self.upstream is not None:
                self.upstream.write(data)
            elif self.early is not None:
                self.early.append(data)
            else:
                self.early = [data]
                loop = asyncio.get_running_loop()
                connecting = loop.create_connection(lambda: Upstream(self), host, int(port))
                self.connecting = loop.create_task(connecting)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.upstream is not None:
                self.upstream.close()

    class Upstream(asyncio.Protocol):
        def __init__(self, client: Client) -> None:
            self._client = client

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            upstream: Any = transport
            upstream.write(b"".join(self._client.early or ()))
            self._client.early = None
            self._client.upstream = upstream

        def data_received(self, data: bytes) -> None:
            self._client.transport.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self._client.transport.close()

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Client, "127.0.0.1", 0)
        ready.put(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        await asyncio.Event().wait()

    uvloop.run(main())


def start_emitter() -> tuple[mp.Process, str]:
    """The emitter in a process of its own: (the process, its base URL)."""
    ready: Any = mp.Queue()
    source = mp.Process(target=emitter, args=(ready,), daemon=True)
    source.start()
    return source, str(ready.get(timeout=120))


def gateway(upstream_url: str, ready: Any) -> None:
    import uvloop

    from domain.model_state import ModelState
    from serve_apps.asgi_listener import AsgiListener
    from serve_apps.direct_http_backend import DirectHttpBackend, EngineEndpointView
    from serve_apps.engine_endpoint import EngineEndpoint
    from serve_apps.gateway import Gateway
    from serve_apps.gateway_app import parse_openai_request
    from serve_apps.gateway_metrics import RecordingGatewayMetrics
    from serve_apps.gateway_settings import GatewaySettings
    from serve_apps.replica_health import ReplicaHealthView
    from serve_apps.route_view import RouteView
    from serve_apps.routing_table import ModelRoute, RoutingTable

    route = ModelRoute("default", "model-default", "model-default:default", ModelState.READY)
    table = RoutingTable(version=1, models={"default": route})

    async def fetch_table(known_version: int, timeout_s: float) -> RoutingTable:
        if known_version == table.version:
            await asyncio.sleep(timeout_s)
        return table

    async def replicas() -> dict[str, int]:
        return {"model-default": 1}

    async def no_endpoints() -> list[EngineEndpoint]:
        return []

    async def main() -> None:
        view = EngineEndpointView(no_endpoints, period_s=3600)
        view.update([EngineEndpoint("model-default", "r1", upstream_url, "token")])
        backend = DirectHttpBackend(view, fallback=None)  # type: ignore[arg-type]
        served = Gateway(
            GatewaySettings(),
            RouteView(fetch_table),
            ReplicaHealthView(replicas, period_s=5.0),
            backend,
            parse_openai_request,
            metrics=RecordingGatewayMetrics(),
        )
        served.start()
        listener = AsgiListener(served.app, "127.0.0.1")
        await listener.start()
        ready.put(listener.url)
        await asyncio.Event().wait()

    uvloop.run(main())


def measure(
    name: str, target: Any, upstream: str, args: argparse.Namespace
) -> list[dict[str, Any]]:
    ready: Any = mp.Queue()
    process = mp.Process(target=target, args=(upstream, ready), daemon=True)
    process.start()
    url = ready.get(timeout=120)
    relay = psutil.Process(process.pid)
    endpoint = Endpoint(url + "/v1", "default", "")
    measure_level(endpoint, 8, args, [])  # warm: imports, first connections
    rows = []
    for level in args.concurrency:
        before = relay.cpu_times()
        run = measure_level(endpoint, level, args, [])
        after = relay.cpu_times()
        chunks = run["chunks"]
        row = {
            "relay": name,
            "concurrency": level,
            "failed": run["failed"],
            "output_tokens_per_s": run["output_tokens_per_s"],
            "user_us_per_chunk": round(1e6 * (after.user - before.user) / chunks, 1),
            "system_us_per_chunk": round(1e6 * (after.system - before.system) / chunks, 1),
        }
        row["us_per_chunk"] = round(row["user_us_per_chunk"] + row["system_us_per_chunk"], 1)
        print(json.dumps(row), flush=True)
        rows.append(row)
    process.terminate()
    return rows


def main(argv: list[str] | None = None) -> int:
    args = capacity_args(argv)
    _, upstream = start_emitter()
    document: dict[str, Any] = {**run_record("relay_floor.py", argv), "rows": []}
    for _ in range(args.rounds):
        document["rows"] += measure("passthrough", passthrough, upstream, args)
        document["rows"] += measure("gateway", gateway, upstream, args)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "relay_floor.json").write_text(json.dumps(document, indent=2))
    print("| relay | concurrency | user us/chunk | system us/chunk | total | failed |")
    print("|---|---:|---:|---:|---:|---:|")
    for relay in ("passthrough", "gateway"):
        for level in args.concurrency:
            rows = [r for r in document["rows"] if (r["relay"], r["concurrency"]) == (relay, level)]
            mid = lower_median(rows, "us_per_chunk")
            print(
                f"| {relay} | {level} | {mid['user_us_per_chunk']} "
                f"| {mid['system_us_per_chunk']} | {mid['us_per_chunk']} "
                f"| {sum(r['failed'] for r in rows)} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
