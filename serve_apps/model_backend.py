"""How the gateway reaches a model's engines."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal, Protocol

from serve_apps.routing_table import ModelRoute

Method = Literal["chat", "completions"]


class ModelBackend(Protocol):
    def stream(
        self, route: ModelRoute, method: Method, request: Any, body: Mapping[str, Any]
    ) -> AsyncIterator[Any]:
        """`request` is the parsed request, `body` the JSON object it was parsed from.

        Yield the model server's outputs: lists of SSE strings when streaming, else one
        response object; an object with an `.error` attribute is an OpenAI error."""
        ...

    def requests_by_path(self) -> Mapping[str, int]:
        """Requests sent so far per data path ("handle", "direct"): shown on `/health`."""
        ...


class ServeHandleBackend:
    """Calls the model's Ray Serve LLM deployment (`LLMServer`) through a streaming handle."""

    def __init__(self) -> None:
        self._handles: dict[tuple[str, str], Any] = {}
        self._sent = 0

    def _handle(self, route: ModelRoute) -> Any:
        key = (route.app_name, route.deployment_name)
        handle = self._handles.get(key)
        if handle is None:
            from ray import serve

            handle = serve.get_deployment_handle(route.deployment_name, route.app_name)
            handle = handle.options(stream=True)
            self._handles[key] = handle
        return handle

    def stream(
        self, route: ModelRoute, method: Method, request: Any, body: Mapping[str, Any]
    ) -> AsyncIterator[Any]:
        self._sent += 1
        generator: AsyncIterator[Any] = getattr(self._handle(route), method).remote(request, None)
        return generator

    def requests_by_path(self) -> Mapping[str, int]:
        return {"handle": self._sent}
