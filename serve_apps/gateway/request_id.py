"""Every request's id: the client's `X-Request-Id`, or one the gateway makes.

The id is returned on every answer (errors included), named in the gateway's log lines
about the request, and sent to the engine as its `X-Request-Id`, which vLLM makes the base
of its own request id (`chatcmpl-<id>` in its logs, aborts and response ids). A client's id
gets a short random suffix on the way to the engine: two clients may send the same id, and
vLLM must never see one request id twice.
"""

from __future__ import annotations

import re
import secrets
import uuid

HEADER = "x-request-id"
_USABLE = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
"""What is taken from a client as is; anything else (too long, spaces, control characters
that would forge log lines) is replaced by a generated id."""


def request_id_from(offered: str | None) -> tuple[str, bool]:
    """(the request's id, whether the client chose it)."""
    if offered is not None and _USABLE.fullmatch(offered):
        return offered, True
    return uuid.uuid4().hex, False


def engine_request_id(request_id: str, from_client: bool) -> str:
    return f"{request_id}-{secrets.token_hex(4)}" if from_client else request_id
