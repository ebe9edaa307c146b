"""A request body turned into a JSON object, or a 400 that says what is wrong with it."""

from __future__ import annotations

import json
import re
from typing import Any

from serve_apps.gateway.openai_errors import GatewayError

# A \uD800-\uDFFF escape: legal JSON syntax, but alone (not a high+low pair) it decodes to
# a lone surrogate that no UTF-8 encoder accepts, so any answer echoing it would fail.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def parse_json_object(raw: bytes) -> dict[str, Any]:
    try:
        # Strict UTF-8 (the OpenAI API's encoding): `json.loads(bytes)` would also take
        # UTF-16/32 and, through 'surrogatepass', UTF-8-encoded surrogates.
        text = raw.decode("utf-8-sig")
        body = json.loads(text)
    except RecursionError:
        raise GatewayError(400, "Request body is nested too deeply.", code="invalid_json") from None
    except ValueError as exc:  # includes invalid UTF-8
        raise GatewayError(
            400, f"Request body is not valid JSON: {exc}", code="invalid_json"
        ) from None
    if not isinstance(body, dict):
        raise GatewayError(400, "Request body must be a JSON object.", code="invalid_request")
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(body):
        raise GatewayError(
            400,
            "Request body is not valid JSON: it contains an unpaired UTF-16 surrogate escape.",
            code="invalid_json",
        )
    return body


def _has_lone_surrogate(body: dict[str, Any]) -> bool:
    # Paired escapes were joined into one code point by json.loads; what is left can't be
    # encoded. Only bodies with a surrogate escape get here, so the re-encoding is rare.
    try:
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, RecursionError):
        return True
    return False
