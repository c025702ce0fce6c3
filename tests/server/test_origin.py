"""The Origin policy: a page's own host, plus the allowed origins; non-browser clients pass."""

from __future__ import annotations

import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from blackdrez.server.http.routes import origin_allowed


async def opens(port: int, origin: str | None) -> bool:
    """Whether a WebSocket handshake with this Origin header (or none) succeeds."""
    try:
        async with ws_connect(f"ws://127.0.0.1:{port}/", origin=origin):  # type: ignore[arg-type]
            return True
    except InvalidStatus as refused:
        assert refused.response.status_code == 403
        assert b"origin" in refused.response.body
        return False


async def test_by_default_only_the_pages_own_host_and_port(server) -> None:
    port = server.port
    assert await opens(port, None)  # not a browser
    assert await opens(port, f"http://127.0.0.1:{port}")  # the page this server served
    assert await opens(port, f"https://127.0.0.1:{port}")  # the same host:port, over TLS
    assert not await opens(port, "http://evil.example")
    assert not await opens(port, f"http://localhost:{port}")  # another name is another site
    assert not await opens(port, f"http://127.0.0.1:{port + 1}")
    assert not await opens(port, "null")  # sandboxed frames and local files


async def test_allowed_origins_are_added_to_the_pages_own(make_server) -> None:
    server = await make_server(allowed_origins=["https://play.example"])
    port = server.port
    assert await opens(port, "https://play.example")
    assert await opens(port, f"http://127.0.0.1:{port}")
    assert await opens(port, None)
    assert not await opens(port, "https://play.example.evil")
    assert not await opens(port, "http://play.example")  # the scheme is part of an origin


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        ("https://play.example", "play.example", True),  # default ports: 443 ...
        ("http://play.example", "play.example", True),  # ... and 80
        ("https://play.example", "play.example:443", True),
        ("http://play.example:8765", "play.example:8765", True),
        ("http://PLAY.example:8765", "play.EXAMPLE:8765", True),  # host names ignore case
        ("http://[::1]:8765", "[::1]:8765", True),
        ("http://play.example:8765", "play.example", False),  # nginx's $host drops the port
        ("https://play.example", "play.example:8443", False),
        ("ftp://play.example", "play.example", False),
        ("http://play.example:99999", "play.example:99999", False),  # not a port
        ("http://play.example", None, False),
    ],
)
def test_same_host_compares_host_and_port(origin, host, allowed) -> None:
    assert origin_allowed(origin, host, []) is allowed
