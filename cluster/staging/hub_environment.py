"""The process settings huggingface_hub and hf_xet read, set up before the first download."""

from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping

DEFAULT_HUB_ENDPOINT = "https://huggingface.co"
_TRUE_VALUES = frozenset({"1", "on", "yes", "true"})

logger = logging.getLogger(__name__)


def resolve_endpoint(
    configured: str | None, environ: MutableMapping[str, str] | None = None
) -> str:
    """The Hub URL to use: the config's, else `HF_ENDPOINT`, else the public Hub.

    Read at call time and passed to every huggingface_hub call explicitly, because
    huggingface_hub reads `HF_ENDPOINT` once at import, which may predate the caller's setting.
    """
    env = os.environ if environ is None else environ
    endpoint = configured or env.get("HF_ENDPOINT") or DEFAULT_HUB_ENDPOINT
    return endpoint.rstrip("/")


def prepare_hub_environment(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Turn on Xet's high-performance mode and say what is ignored; returns the warnings logged.

    `HF_XET_HIGH_PERFORMANCE` is read by hf_xet (Rust) when it starts a transfer, so setting it
    here takes effect even if huggingface_hub is already imported. A user's explicit value wins.
    """
    env = os.environ if environ is None else environ
    env.setdefault("HF_XET_HIGH_PERFORMANCE", "1")
    warnings: list[str] = []
    if env.get("HF_HUB_ENABLE_HF_TRANSFER", "").strip().lower() in _TRUE_VALUES:
        warnings.append(
            "HF_HUB_ENABLE_HF_TRANSFER is set, but huggingface_hub 1.x and later ignore it and "
            "never use hf_transfer; downloads use hf_xet (HF_XET_HIGH_PERFORMANCE="
            f"{env.get('HF_XET_HIGH_PERFORMANCE')}) or plain HTTP instead"
        )
    for message in warnings:
        logger.warning(message)
    return warnings
