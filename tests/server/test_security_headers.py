"""Security headers on every HTTP response: pages, errors, metrics, the WebSocket handshake."""

from __future__ import annotations

import asyncio
import http.client

from websockets.asyncio.client import connect as ws_connect

from blackdrez.server.http.responses import secure_headers

EXPECTED = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


def head(port: int, path: str, host: str | None = None) -> tuple[int, dict[str, str]]:
    """GET ``path`` and return the status and the headers (lower-case names)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.putrequest("GET", path, skip_host=host is not None)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        response = conn.getresponse()
        response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()


def assert_secure(headers: dict[str, str], port: int) -> None:
    for name, value in EXPECTED.items():
        assert headers.get(name) == value, (name, headers)
    policy = {
        part.split()[0]: part.split()[1:] for part in headers["content-security-policy"].split("; ")
    }
    assert policy["default-src"] == ["'none'"]
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["connect-src"] == [
        "'self'",
        f"ws://127.0.0.1:{port}",
        f"wss://127.0.0.1:{port}",
    ]


async def test_every_http_response_carries_the_security_headers(make_server) -> None:
    server = await make_server()
    for path, status in (("/", 200), ("/app.js", 200), ("/nope", 404), ("/healthz", 200)):
        got, headers = await asyncio.to_thread(head, server.port, path)
        assert got == status, path
        assert_secure(headers, server.port)
    got, headers = await asyncio.to_thread(head, server.port, "/metrics")
    assert got == 200
    assert_secure(headers, server.port)


async def test_the_metrics_listener_and_the_websocket_handshake_too(make_server) -> None:
    server = await make_server(metrics_port=0)
    assert server.metrics_port is not None
    got, headers = await asyncio.to_thread(head, server.metrics_port, "/metrics")
    assert got == 200 and headers["x-content-type-options"] == "nosniff"
    async with ws_connect(f"ws://127.0.0.1:{server.port}/") as ws:
        assert ws.response is not None
        lowered = {k.lower(): v for k, v in ws.response.headers.raw_items()}
        assert_secure(lowered, server.port)


async def test_a_strange_host_header_is_not_echoed_into_the_policy(make_server) -> None:
    server = await make_server()
    got, headers = await asyncio.to_thread(head, server.port, "/", "evil.example; script-src *")
    assert got == 200
    assert "evil" not in headers["content-security-policy"]
    assert "connect-src 'self';" in headers["content-security-policy"]


def test_the_policy_names_the_host_with_its_port() -> None:
    policy = dict(secure_headers("play.example:8443"))["Content-Security-Policy"]
    assert "connect-src 'self' ws://play.example:8443 wss://play.example:8443;" in policy
    assert "[::1]:80" in dict(secure_headers("[::1]:80"))["Content-Security-Policy"]
