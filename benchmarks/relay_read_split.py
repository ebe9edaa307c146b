"""Inside one relayed chunk: the read callback's time, the client write's, and the garbage
collector's, for a bare pass-through and for Switchyard's gateway, both in plain processes.

relay_floor.py gives each relay's CPU per chunk as a whole. This splits it where the relay
spends it, on the same emitter and client:

  read callback  wall time inside the engine connection's `data_received` per chunk: the
                 HTTP parse, the scans, the timing and the client write (for the
                 pass-through, the write alone); the socket read itself is uvloop's, before it
  client write   wall time inside the transport's `write` to the client (the system call
                 and uvloop's bookkeeping around it); the gateway's only
  gc             CPU time of the cyclic garbage collector per chunk, per generation
                 (`gc.callbacks`), counted from after two warming loads

The gateway runs twice, as it is and with its heap frozen after the warm-up (`gc.freeze()`,
which leaves its hundreds of thousands of import-time objects out of every later
collection), to show what collections cost at steady state.

    .venv/bin/python benchmarks/relay_read_split.py            # ~2 min per round

The timers wrap the measured functions (two `perf_counter` calls each, about 0.1 us), so the
process's CPU per chunk here runs a little above relay_floor.py's. Not a test: nothing here
asserts a number. Prints the median round per relay and level; every round is in
benchmarks/results/relay_read_split.json.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import relay_floor
from comparison_report import lower_median, run_record
from relay_capacity import measure_level
from relay_capacity import parse_args as capacity_args

from switchyard.bench.client import Endpoint

STATS = Path(tempfile.gettempdir()) / "switchyard-relay-read-split"


class Counters:
    """What the relay process accumulates; written to a file on SIGUSR2."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {"read_s": 0.0, "reads": 0, "write_s": 0.0}
        self.values.update({f"gc{g}_s": 0.0 for g in range(3)})
        self._gc_started = 0.0
        gc.callbacks.append(self._gc)

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.process_time()
        else:
            self.values[f"gc{info['generation']}_s"] += time.process_time() - self._gc_started

    def timed(self, method: Callable[..., None], key: str, count: str | None = None) -> Any:
        clock, values = time.perf_counter, self.values

        def wrapper(this: Any, data: bytes) -> None:
            started = clock()
            try:
                method(this, data)
            finally:
                values[key] += clock() - started
                if count is not None:
                    values[count] += 1

        return wrapper

    def serve_signals(self, freeze: bool) -> None:
        """SIGUSR1: the warm-up is over (freeze the heap if asked); SIGUSR2: write the
        counters where the measuring process reads them."""
        loop = asyncio.get_running_loop()

        def warmed() -> None:
            if freeze:
                gc.collect()
                gc.freeze()

        def dump() -> None:
            # Written whole, then renamed: the measuring process never reads half a file.
            path = STATS / f"{os.getpid()}.json"
            partial = path.with_suffix(".partial")
            partial.write_text(json.dumps(self.values))
            partial.replace(path)

        loop.add_signal_handler(signal.SIGUSR1, warmed)
        loop.add_signal_handler(signal.SIGUSR2, dump)


def _run_with(counters: Counters, freeze: bool, *, wrap_connections: bool = False) -> None:
    """The relay's `uvloop.run` installs the signal handlers on its loop first;
    `wrap_connections`: and times `data_received` of every protocol the loop connects with
    (the pass-through's upstream protocol is local to relay_floor.passthrough)."""
    import uvloop

    run = uvloop.run

    def patched(main: Any) -> Any:
        async def wrapped() -> None:
            counters.serve_signals(freeze)
            if wrap_connections:
                _time_connections(asyncio.get_running_loop(), counters)
            await main

        return run(wrapped())

    uvloop.run = patched  # type: ignore[assignment]


def _time_connections(loop: Any, counters: Counters) -> None:
    connect = loop.create_connection
    wrapped: set[type] = set()

    async def create_connection(factory: Any, *args: Any, **kwargs: Any) -> Any:
        def made() -> Any:
            protocol = factory()
            kind = type(protocol)
            if kind not in wrapped:
                kind.data_received = counters.timed(kind.data_received, "read_s", "reads")
                wrapped.add(kind)
            return protocol

        return await connect(made, *args, **kwargs)

    loop.create_connection = create_connection


def passthrough(upstream_url: str, ready: Any) -> None:
    _run_with(Counters(), freeze=False, wrap_connections=True)
    relay_floor.passthrough(upstream_url, ready)


def gateway(freeze: bool) -> Callable[[str, Any], None]:
    def target(upstream_url: str, ready: Any) -> None:
        from serve_apps import engine_connection, uvicorn_internals

        counters = Counters()
        protocol = engine_connection._EngineProtocol
        protocol.data_received = counters.timed(  # type: ignore[method-assign]
            protocol.data_received, "read_s", "reads"
        )
        clock, values = time.perf_counter, counters.values

        def write(self: Any, data: bytes) -> None:
            # ChunkWriter.write as it is, with its transport call timed.
            if self._cycle.disconnected or self._transport.is_closing():
                return
            framed = b"%x\r\n%b\r\n" % (len(data), data)
            started = clock()
            self._transport.write(framed)
            values["write_s"] += clock() - started

        uvicorn_internals.ChunkWriter.write = write  # type: ignore[method-assign]
        _run_with(counters, freeze)
        relay_floor.gateway(upstream_url, ready)

    return target


def _counters(pid: int) -> dict[str, float]:
    path = STATS / f"{pid}.json"
    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    values: dict[str, float] = json.loads(path.read_text())
    return values


def _per_chunk(before: dict[str, float], after: dict[str, float], key: str, chunks: int) -> float:
    return round(1e6 * (after[key] - before[key]) / chunks, 2)


def measure(name: str, target: Any, upstream: str, args: Any) -> list[dict[str, Any]]:
    ready: Any = mp.Queue()
    process = mp.Process(target=target, args=(upstream, ready), daemon=True)
    process.start()
    url = ready.get(timeout=120)
    assert process.pid is not None
    relay = psutil.Process(process.pid)
    endpoint = Endpoint(url + "/v1", "default", "")
    for _ in range(2):  # warm: imports, first connections, vLLM's lazily built models
        measure_level(endpoint, 8, args, [])
    os.kill(process.pid, signal.SIGUSR1)
    time.sleep(1.0)
    rows = []
    for level in args.concurrency:
        before, cpu_before = _counters(process.pid), relay.cpu_times()
        run = measure_level(endpoint, level, args, [])
        after, cpu_after = _counters(process.pid), relay.cpu_times()
        chunks = run["chunks"]

        cpu = cpu_after.user + cpu_after.system - cpu_before.user - cpu_before.system
        row = {
            "relay": name,
            "concurrency": level,
            "failed": run["failed"],
            "cpu_us_per_chunk": round(1e6 * cpu / chunks, 1),
            "read_callback_us": _per_chunk(before, after, "read_s", chunks),
            "client_write_us": _per_chunk(before, after, "write_s", chunks)
            if name != "passthrough"
            else None,
            "gc_us": [_per_chunk(before, after, f"gc{g}_s", chunks) for g in range(3)],
            "reads_per_chunk": round((after["reads"] - before["reads"]) / chunks, 3),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    process.terminate()
    return rows


RELAYS: dict[str, Any] = {
    "passthrough": passthrough,
    "gateway": gateway(freeze=False),
    "gateway, heap frozen": gateway(freeze=True),
}


def main(argv: list[str] | None = None) -> int:
    args = capacity_args(argv)
    STATS.mkdir(parents=True, exist_ok=True)
    _, upstream = relay_floor.start_emitter()
    document: dict[str, Any] = {**run_record("relay_read_split.py", argv), "rows": []}
    for _ in range(args.rounds):
        for name, target in RELAYS.items():
            document["rows"] += measure(name, target, upstream, args)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "relay_read_split.json").write_text(json.dumps(document, indent=2))
    print("| relay | concurrency | CPU us/chunk | read callback us | client write us | gc us |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in RELAYS:
        for level in args.concurrency:
            rows = [r for r in document["rows"] if (r["relay"], r["concurrency"]) == (name, level)]
            mid = lower_median(rows, "cpu_us_per_chunk")
            write = mid["client_write_us"]
            print(
                f"| {name} | {level} | {mid['cpu_us_per_chunk']} | {mid['read_callback_us']} "
                f"| {'-' if write is None else write} "
                f"| {math.fsum(mid['gc_us']):.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
