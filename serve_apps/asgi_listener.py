"""An ASGI app served by uvicorn on the caller's event loop, inside a Ray actor.

uvicorn's `serve()` installs SIGINT/SIGTERM handlers with `signal.signal`, which only the
main thread may do and which would take the signals away from Ray's worker; an embedded
server leaves signals alone (Ray Serve's own proxy does the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn


class _EmbeddedServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class AsgiListener:
    """Serves `app` on `host`:`port` (0: a port the OS picks, then in `port`) until `stop()`.

    `share_port`: several processes of one node may listen on the same port (SO_REUSEPORT;
    the kernel spreads connections among them), as gateway replicas do.
    """

    def __init__(
        self,
        app: Any,
        host: str,
        port: int = 0,
        *,
        share_port: bool = False,
        tls_files: tuple[str, str] | None = None,
    ) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if share_port:
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            self._socket.bind((host, port))
        except OSError as exc:
            self._socket.close()
            raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from exc
        self.host = host
        self.port: int = self._socket.getsockname()[1]
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
        self._server = _EmbeddedServer(
            uvicorn.Config(
                app,
                lifespan="off",
                access_log=False,
                log_config=None,
                # Gateways keep their connections open between requests.
                timeout_keep_alive=300,
                # (certificate chain, key) files: uvicorn reads them once, when it starts.
                ssl_certfile=tls_files[0] if tls_files else None,
                ssl_keyfile=tls_files[1] if tls_files else None,
            )
        )
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self._server.config.ssl_certfile else "http"
        return f"{scheme}://{host}:{self.port}"

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._server.serve(sockets=[self._socket])
        )
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what stopped it
            await asyncio.sleep(0.01)

    @property
    def serving(self) -> bool:
        """False once the server stopped on its own (a crash): its replica is unhealthy."""
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, 5)
            self._task = None
