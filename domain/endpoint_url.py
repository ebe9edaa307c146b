"""The URL clients reach a gateway at, from the host it binds (one rule for `up`'s printed
endpoint and every ingress node's)."""

from __future__ import annotations

WILDCARD_HOSTS = ("0.0.0.0", "::")
"""Binding these listens on every interface; clients on the machine reach it on loopback."""


def endpoint_url(scheme: str, host: str, port: int) -> str:
    """A wildcard bind is reached on loopback; an IPv6 address goes in brackets."""
    if host in WILDCARD_HOSTS:
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"
