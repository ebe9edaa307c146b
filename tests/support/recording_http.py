"""A real local HTTP server that records every request and answers from a route table."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, str, str]
"""(status, content type, body)."""
Route = Callable[[str, str, bytes], Answer | None]


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class RecordingServer:
    url: str
    requests: list[Recorded] = field(default_factory=list)


@contextmanager
def recording_server(route: Route) -> Iterator[RecordingServer]:
    recorded: list[Recorded] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            recorded.append(
                Recorded(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
            )
            status, content_type, text = route(self.command, self.path, body) or (
                404,
                "application/json",
                json.dumps({"message": "not found"}),
            )
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _answer

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield RecordingServer(f"http://127.0.0.1:{server.server_address[1]}", recorded)
    finally:
        server.shutdown()
        server.server_close()
