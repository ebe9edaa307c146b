"""How the gateway reaches a model's engines."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal, Protocol

from serve_apps.gateway.http_errors import unavailable
from serve_apps.registry.routing_table import ModelRoute

Method = Literal["chat", "completions", "responses", "embeddings", "tokenize", "detokenize"]
"""The model server's endpoints the gateway forwards to (`direct_backend._PATHS`)."""

HANDLE_METHODS: frozenset[Method] = frozenset({"chat", "completions"})
"""What the Serve-handle fallback can carry: the methods whose requests the gateway parses
into vLLM's request objects (`serve_deployment.parse_openai_request`). The rest of the surface
travels on the direct path only."""


class ModelBackend(Protocol):
    def stream(
        self,
        route: ModelRoute,
        method: Method,
        request: Any,
        body: Mapping[str, Any],
        *,
        request_id: str = "",
    ) -> AsyncIterator[Any]:
        """`request` is the parsed request, `body` the JSON object it was parsed from,
        `request_id` the id the engine should know it by (`request_id.py`; "" for its own).

        Yield the model server's outputs: lists of SSE strings when streaming, else one
        response object; an object with an `.error` attribute is an OpenAI error."""
        ...

    def requests_by_path(self) -> Mapping[str, int]:
        """Requests sent so far per data path ("handle", "direct"): shown on `/health`."""
        ...

    def endpoints_by_app(self) -> Mapping[str, int]:
        """How many engine endpoints the direct path knows per Serve app: shown on
        `/health`, so an operator (or a test) sees when a new replica starts taking direct
        traffic. Empty for a backend without a direct path."""
        ...


class ServeHandleBackend:
    """Calls the model's Ray Serve LLM deployment (`LLMServer`) through a streaming handle."""

    def __init__(self, retry_after_s: int = 5) -> None:
        self._retry_after_s = retry_after_s
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
        self,
        route: ModelRoute,
        method: Method,
        request: Any,
        body: Mapping[str, Any],
        *,
        request_id: str = "",
    ) -> AsyncIterator[Any]:
        # Serve makes its own request ids; the gateway's is in the gateway's log lines.
        if method not in HANDLE_METHODS:
            # Only reached when no engine endpoint is registered yet (a replica starting)
            # or every one just failed: the same transient state a 503 tells clients about.
            raise unavailable(
                f"The model '{route.name}' has no direct endpoint yet, and '{method}' does not "
                "travel through Serve handles. Retry shortly.",
                self._retry_after_s,
            )
        self._sent += 1
        generator: AsyncIterator[Any] = getattr(self._handle(route), method).remote(request, None)
        return generator

    def requests_by_path(self) -> Mapping[str, int]:
        return {"handle": self._sent}

    def endpoints_by_app(self) -> Mapping[str, int]:
        return {}
