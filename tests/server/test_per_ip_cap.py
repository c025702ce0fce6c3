"""The per-address connection cap, and whose address counts behind a trusted proxy."""

from __future__ import annotations

import ipaddress
import socket
from contextlib import AsyncExitStack

import pytest
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS, encode
from blackdrez.protocol.errors import CloseCode
from blackdrez.protocol.handshake import Hello
from blackdrez.server.http.limits import client_address


def from_address(source: str) -> socket.socket:
    """A socket that connects from ``source`` (any 127.0.0.x is this machine)."""
    sock = socket.socket()
    sock.bind((source, 0))
    return sock


async def greeted(
    stack: AsyncExitStack, port: int, source: str = "127.0.0.1", forwarded: str | None = None
) -> ClientConnection:
    """A connection that said hello, or one the server closed at once (then ``recv`` raises)."""
    sock = from_address(source)
    sock.connect(("127.0.0.1", port))
    headers = {"X-Forwarded-For": forwarded} if forwarded else None
    ws = await stack.enter_async_context(
        ws_connect(f"ws://127.0.0.1:{port}/", sock=sock, additional_headers=headers)
    )
    try:
        await ws.send(encode(Hello(versions=[1]), False))
        assert isinstance(SERVER_DECODERS[1].decode(await ws.recv()), v1.Welcome)
    except ConnectionClosed:
        pass
    return ws


def refused(ws: ClientConnection) -> bool:
    return ws.close_code == CloseCode.TOO_MANY_CONNECTIONS


async def test_one_address_gets_at_most_the_cap_and_others_are_not_touched(make_server) -> None:
    server = await make_server(max_connections_per_ip=3)
    async with AsyncExitStack() as stack:
        first = [await greeted(stack, server.port) for _ in range(3)]
        assert not any(refused(ws) for ws in first)
        fourth = await greeted(stack, server.port)
        assert refused(fourth)
        assert "too many connections from 127.0.0.1" in fourth.close_reason
        other = await greeted(stack, server.port, source="127.0.0.2")  # another address
        assert not refused(other)
        await first[0].close()
        assert not refused(await greeted(stack, server.port))  # a place was given back
    assert server.metrics.closes.labels(str(int(CloseCode.TOO_MANY_CONNECTIONS)))._value.get() == 1


async def test_zero_means_no_cap(make_server) -> None:
    server = await make_server(max_connections_per_ip=0)
    async with AsyncExitStack() as stack:
        assert not any([refused(await greeted(stack, server.port)) for _ in range(5)])


async def test_forwarded_for_is_believed_only_from_a_trusted_proxy(make_server) -> None:
    direct = await make_server(max_connections_per_ip=1)
    behind = await make_server(max_connections_per_ip=1, trusted_proxies=["127.0.0.0/30"])
    async with AsyncExitStack() as stack:
        # Not behind a trusted proxy: the header is anyone's to write, so it is ignored.
        assert not refused(await greeted(stack, direct.port, forwarded="192.0.2.1"))
        assert refused(await greeted(stack, direct.port, forwarded="192.0.2.2"))
        # From the proxy: each client behind it counts apart, by the address the proxy saw.
        assert not refused(await greeted(stack, behind.port, forwarded="192.0.2.1"))
        assert not refused(await greeted(stack, behind.port, forwarded="192.0.2.2"))
        assert refused(await greeted(stack, behind.port, forwarded="198.51.100.9, 192.0.2.1"))
        # A peer outside the trusted range is a client itself, whatever it says.
        lone = await greeted(stack, behind.port, source="127.0.0.8", forwarded="192.0.2.3")
        assert not refused(lone)
        assert refused(await greeted(stack, behind.port, source="127.0.0.8", forwarded="192.0.2.4"))


TRUSTED = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("127.0.0.1")]


@pytest.mark.parametrize(
    ("peer", "forwarded", "expected"),
    [
        ("203.0.113.1", ["192.0.2.1"], "203.0.113.1"),  # untrusted peer: header ignored
        ("127.0.0.1", [], "127.0.0.1"),  # a trusted proxy that forwards nothing
        ("127.0.0.1", ["192.0.2.1"], "192.0.2.1"),
        ("127.0.0.1", ["192.0.2.9, 10.1.2.3"], "192.0.2.9"),  # through two trusted proxies
        ("127.0.0.1", ["192.0.2.9", "10.1.2.3"], "192.0.2.9"),  # the header given twice
        ("127.0.0.1", ["192.0.2.66, 192.0.2.9"], "192.0.2.9"),  # the client wrote the first one
        ("127.0.0.1", ["not an address"], "127.0.0.1"),
        ("127.0.0.1", ["10.9.9.9"], "10.9.9.9"),  # only trusted hops: the leftmost seen
        ("::ffff:127.0.0.1", ["192.0.2.1"], "192.0.2.1"),  # IPv4 on an IPv6 socket
    ],
)
def test_the_client_address_walks_back_through_trusted_proxies_only(peer, forwarded, expected):
    assert client_address(peer, forwarded, TRUSTED) == expected
