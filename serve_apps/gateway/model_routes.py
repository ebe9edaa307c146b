"""The model endpoints (POST with a JSON body), dispatched straight to the gateway's handler.

Every other request goes on to the FastAPI app. Between uvicorn and a handler, FastAPI puts
Starlette's exception middleware, its own exit stack, the router, the request wrapper and
dependency solving: about a quarter of the gateway's Python per request (py-spy, 1-token
answers; BENCHMARKS.md). These paths need two things of those layers, done here: a
`GatewayError` becomes its OpenAI-shaped answer, and a request whose client left before its
body arrived gets none. Anything else raised reaches uvicorn, which logs it and answers
500, as FastAPI's outermost layer did.

The same paths stay registered in the FastAPI app, so another method on them is answered
405 there, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from serve_apps.gateway.guard import ASGIApp, Receive, Scope, Send
from serve_apps.gateway.http_errors import body_too_large, error_response
from serve_apps.gateway.openai_errors import GatewayError
from serve_apps.relay.model_backend import Method

MODEL_PATHS: Mapping[str, Method] = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "/v1/responses": "responses",
    "/v1/embeddings": "embeddings",
    "/tokenize": "tokenize",
    "/detokenize": "detokenize",
}

Answer = Callable[[Scope, Receive, Send], Awaitable[None]]
Handle = Callable[[Scope, Receive, Method], Awaitable[Answer]]


class ClientGone(Exception):
    """The client disconnected before its request's body arrived: nobody to answer."""


class ModelRoutes:
    def __init__(self, handle: Handle, app: ASGIApp) -> None:
        self._handle = handle
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = (
            MODEL_PATHS.get(scope["path"])
            if scope["type"] == "http" and scope["method"] == "POST"
            else None
        )
        if method is None:
            await self._app(scope, receive, send)
            return
        answer: Any
        try:
            answer = await self._handle(scope, receive, method)
        except GatewayError as error:
            answer = error_response(error)
        except ClientGone:
            return
        await answer(scope, receive, send)


async def read_body(receive: Receive, limit: int) -> bytes:
    """The request's body, refused (413) past `limit` bytes: a chunked upload has no
    Content-Length for the guard to check."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise body_too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
