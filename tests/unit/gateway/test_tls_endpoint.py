"""`up --tls-cert/--tls-key`: the gateway's listener serves HTTPS with the given pair, and
the key's file exists only while the listener loads it."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest

from serve_apps.asgi_listener import AsgiListener
from serve_apps.gateway.gateway_settings import GatewaySettings
from serve_apps.gateway.serve_deployment import tls_files
from tests.support.tls_cert import self_signed

pytestmark = pytest.mark.anyio


async def _app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": b"ok"})  # type: ignore[operator]


async def test_the_listener_serves_https_with_the_settings_pair(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    settings = GatewaySettings(tls_cert_pem=cert.read_text(), tls_key_pem=key.read_text())
    with tls_files(settings) as files:
        assert files is not None
        written = Path(files[1])
        assert written.stat().st_mode & 0o077 == 0  # the key: this process only
        listener = AsgiListener(_app, "127.0.0.1", 0, tls_files=files)
        await listener.start()
    assert not written.exists()  # loaded, then removed from disk
    try:
        assert listener.url.startswith("https://")
        context = ssl.create_default_context(cafile=str(cert))
        async with httpx.AsyncClient(verify=context) as client:
            assert (await client.get(listener.url)).text == "ok"
        async with httpx.AsyncClient() as plain:
            with pytest.raises(httpx.HTTPError):
                await plain.get(listener.url.replace("https://", "http://"))
    finally:
        await listener.stop()


def test_a_certificate_without_its_key_is_refused() -> None:
    with pytest.raises(ValueError, match="both the certificate and its key"):
        GatewaySettings(tls_cert_pem="x")
