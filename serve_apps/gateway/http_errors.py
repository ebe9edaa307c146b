"""The errors the gateway answers with, and the failures they come from.

`GatewayError` (`openai_errors.py`) is the OpenAI shape; this module decides which status,
code and Retry-After a failure gets: an unavailable model, an oversized body, a request the
parser refused, or an error object the model server sent instead of an answer.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from serve_apps.gateway.openai_errors import GatewayError


def error_response(error: GatewayError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers())


def unavailable(message: str, retry_after_s: int) -> GatewayError:
    """503 + Retry-After: the model will be back (a swap, a restarting engine)."""
    return GatewayError(503, message, code="model_unavailable", retry_after_s=retry_after_s)


def body_too_large(limit: int) -> GatewayError:
    return GatewayError(
        413, f"Request body is larger than {limit} bytes.", code="request_too_large"
    )


def model_not_found(requested: str) -> GatewayError:
    """OpenAI's answer for a model that does not exist or that the key may not use."""
    return GatewayError(
        404,
        f"The model '{requested}' does not exist or you do not have access to it.",
        code="model_not_found",
        param="model",
    )


def routing_error(status: int, method: str, path: str) -> GatewayError:
    """An unknown path (404) or a method the path does not take (405), as OpenAI words it."""
    if status == 405:
        return GatewayError(
            405, f"Method not allowed ({method} {path}).", code="method_not_allowed"
        )
    if status == 404:
        return GatewayError(404, f"Invalid URL ({method} {path}).", code="unknown_url")
    return GatewayError(status, f"{method} {path} failed with HTTP {status}.")


def unsupported_endpoint(model: str, method: str) -> GatewayError:
    """The model's engine does not serve this endpoint (vLLM registers, say, /v1/embeddings
    only for pooling models, and answers 404 for it otherwise)."""
    return GatewayError(
        400,
        f"The model '{model}' does not serve {method}: its engine has no such endpoint "
        "(embeddings need a pooling model, e.g. one started with an embedding runner).",
        code="unsupported_endpoint",
        param="model",
    )


def parser_message(exc: BaseException) -> str:
    """The request parser's message, short enough for a 400 answer."""
    text = str(exc).strip() or type(exc).__name__
    lines = text.splitlines()
    # pydantic puts the field on line 2 and the problem on line 3; keep them together.
    return " ".join(line.strip() for line in lines[:3])


ENGINE_DEAD_MESSAGE = "EngineCore encountered an issue"
"""How vLLM's EngineDeadError message starts (vllm/v1/engine/exceptions.py): the engine
process is gone, so Serve replaces the replica and the same request will succeed."""


def engine_failure_is_transient(status: int, message: str) -> bool:
    """Whether an engine's 5xx is "come back later" (503 + Retry-After) rather than the
    engine's answer to this request (500 `server_error`, which a retry would only repeat).

    Transient: the engine said 503 itself (vLLM's RetryableRequestError, an overload), its
    core died (EngineDeadError, and a replacement is on the way), or its generate loop failed
    without a word (EngineGenerateError has no message: what vLLM answers while its core is
    going down). Anything else, a 500 from the chat template or a tool parser say, is
    deterministic for that request.
    """
    if status == 503:
        return True
    return status >= 500 and (message.startswith(ENGINE_DEAD_MESSAGE) or not message.strip())


def model_server_error(item: Any, retry_after_s: int) -> GatewayError | None:
    """An OpenAI error object from the model server (vLLM's ErrorResponse), if `item` is one.

    4xx keep their status. 5xx split by `engine_failure_is_transient`: a dead or
    overloaded engine becomes 503 + Retry-After (`model_unavailable`'s type), the engine's
    own 500 (or 501) for this request keeps its status with OpenAI's `server_error` type. An
    error object with no usable status is the engine's own failure: 500.
    """
    error = getattr(item, "error", None)
    if error is None or not hasattr(error, "message"):
        return None
    status = getattr(error, "code", 500)
    status = status if isinstance(status, int) and 400 <= status < 600 else 500
    message = str(error.message)
    retry = None
    if status >= 500 and engine_failure_is_transient(status, message):
        status, retry = 503, retry_after_s
    return GatewayError(
        status,
        message,
        code=getattr(error, "type", None),
        param=getattr(error, "param", None),
        retry_after_s=retry,
    )
