"""``/metrics`` on a listen address of its own, off the public port."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from blackdrez.protocol import v1


def status_of(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


async def test_metrics_move_to_their_own_port_when_one_is_given(make_server, connect) -> None:
    server = await make_server(metrics_host="127.0.0.1", metrics_port=0)
    assert server.metrics_port not in (None, server.port)
    client = await connect(server, name="Ann")
    await client.request(v1.CreateTable())
    status, body = await asyncio.to_thread(status_of, server.metrics_port, "/metrics")
    assert status == 200 and b"blackdrez_connections 1.0" in body
    status, body = await asyncio.to_thread(status_of, server.metrics_port, "/healthz")
    assert status == 200 and b'"status":"ok"' in body
    status, _ = await asyncio.to_thread(status_of, server.port, "/metrics")
    assert status == 404, "the game port no longer serves the metrics"
    status, _ = await asyncio.to_thread(status_of, server.port, "/healthz")
    assert status == 200, "the load balancer's health check stays on the game port"
    for path in ("/", "/index.html"):
        status, _ = await asyncio.to_thread(status_of, server.metrics_port, path)
        assert status == 404, "no game client on the metrics port"
    with pytest.raises(InvalidStatus):
        async with ws_connect(f"ws://127.0.0.1:{server.metrics_port}/"):
            pass


async def test_without_a_metrics_port_the_game_port_serves_them(server) -> None:
    assert server.metrics_port is None
    status, body = await asyncio.to_thread(status_of, server.port, "/metrics")
    assert status == 200 and b"blackdrez_connections" in body


async def test_stopping_the_server_closes_the_metrics_port(make_server) -> None:
    server = await make_server(metrics_port=0)
    port = server.metrics_port
    await server.stop()
    with pytest.raises(OSError):
        await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
