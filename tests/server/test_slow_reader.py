"""A client that stops reading: closed with 4003, counted, and let go in bounded time.

These tests talk through a raw socket driven by ``websockets``' sans-I/O client, so the test
decides exactly when (and whether) the client reads anything at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Callable

import pytest
from websockets.client import ClientProtocol
from websockets.frames import Close, Opcode
from websockets.protocol import State
from websockets.uri import parse_uri

from blackdrez.protocol import v1
from blackdrez.protocol.codec import encode
from blackdrez.protocol.errors import CloseCode
from blackdrez.protocol.handshake import Hello
from blackdrez.server.app import GameServer, Settings
from tests.server.helpers import play_out, seat_and_start


class RawClient:
    """A WebSocket client over a plain non-blocking socket that reads only when told to."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills up fast
        self.sock.connect(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.protocol = ClientProtocol(parse_uri(f"ws://127.0.0.1:{port}/"))
        self.protocol.send_request(self.protocol.connect())
        self.frames = 0
        self.close: Close | None = None
        self._flush()

    def _flush(self) -> None:
        for data in self.protocol.data_to_send():
            with contextlib.suppress(OSError):
                self.sock.sendall(data)

    def send_text(self, text: str) -> None:
        self.protocol.send_text(text.encode())
        self._flush()

    async def read_until(self, done: Callable[[], bool], timeout: float) -> None:
        """Read what the socket holds until ``done()`` or the end of the stream or ``timeout``."""
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            try:
                data = self.sock.recv(1 << 20)
            except BlockingIOError:
                await asyncio.sleep(0.01)
                continue
            except ConnectionResetError:
                return
            if not data:
                self.protocol.receive_eof()
                return
            self.protocol.receive_data(data)
            for event in self.protocol.events_received():
                if getattr(event, "opcode", None) is Opcode.CLOSE:
                    self.close = Close.parse(event.data)
                elif getattr(event, "opcode", None) in (Opcode.TEXT, Opcode.BINARY):
                    self.frames += 1
            self._flush()


@pytest.fixture
async def stuck_spectator(make_server, connect) -> AsyncIterator[tuple]:
    """A busy two-player table and a greeted spectator that has stopped reading.

    The limit (64 KiB) is above the connection's own write-buffer mark (32 KiB), past which
    writing pauses: the case where a plain ``close()`` would wait for the buffer forever."""
    server = await make_server(
        send_buffer=64 * 1024, close_timeout=1.0, messages_per_second=1e6, burst=10**6
    )
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b])
    raw = RawClient(server.port)
    await raw.read_until(lambda: raw.protocol.state is State.OPEN, 5)
    raw.send_text(encode(Hello(versions=[1], name="Stuck"), False))
    await raw.read_until(lambda: raw.frames >= 1, 5)  # welcome
    raw.send_text(encode(v1.Spectate(table=table), False))
    deadline = time.monotonic() + 5
    while not any(c.name == "Stuck" and c.tables for c in server.node.clients.values()):
        assert time.monotonic() < deadline, "the spectator was not seated"
        await asyncio.sleep(0.01)
    slow = next(c for c in server.node.clients.values() if c.name == "Stuck")
    for _ in range(5000):  # bounded: a 64 KiB limit is passed after a few hundred updates
        if slow.closing:
            break
        await a.request(v1.SetReady(table=table, ready=False))
        await a.request(v1.SetReady(table=table, ready=True))
    assert slow.closing, "the spectator was not found too slow"
    try:
        yield server, raw, (a, b, table)
    finally:
        raw.sock.close()


def closes(server, code: int) -> float:
    """How many closes with ``code`` the server's metrics counted."""
    return server.metrics.closes.labels(str(code))._value.get()


async def test_a_client_that_never_reads_is_let_go_and_counted_as_4003(stuck_spectator) -> None:
    server, _, (a, b, table) = stuck_spectator
    assert closes(server, CloseCode.SLOW_CONSUMER) == 1
    deadline = time.monotonic() + 10  # close_timeout is 1 s: generous margin under load
    while any(c.name == "Stuck" for c in server.node.clients.values()):
        assert time.monotonic() < deadline, "the server still holds the client that never reads"
        await asyncio.sleep(0.05)
    await asyncio.gather(play_out(a, table), play_out(b, table))  # the players went on unhindered


async def test_a_client_that_reads_again_in_time_gets_the_4003_close(stuck_spectator) -> None:
    _, raw, _ = stuck_spectator
    await raw.read_until(lambda: raw.close is not None, 10)
    assert raw.close is not None, f"no close frame after {raw.frames} frames"
    assert raw.close.code == CloseCode.SLOW_CONSUMER
    assert "reconnect and resync" in raw.close.reason


async def test_a_client_that_answers_no_ping_is_closed_with_1011() -> None:
    server = GameServer(Settings(port=0, ping_interval=0.2, ping_timeout=0.2, close_timeout=5.0))
    await server.start()
    raw = RawClient(server.port)
    try:
        await raw.read_until(lambda: raw.protocol.state is State.OPEN, 5)
        raw.send_text(encode(Hello(versions=[1], name="Mute"), False))
        await raw.read_until(lambda: raw.frames >= 1, 5)
        await asyncio.sleep(1.0)  # read nothing, so answer no ping
        await raw.read_until(lambda: raw.close is not None, 5)
    finally:
        raw.sock.close()
        await server.stop()
    assert raw.close is not None and raw.close.code == 1011
    assert raw.close.reason == "keepalive ping timeout"
