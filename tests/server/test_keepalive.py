"""Keepalive pings from the loop's one timer (``blackdrez.server.keepalive``): a client that
answers stays, one that does not is closed with 1011 (``test_slow_reader``), and no connection
holds a task of its own for it."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import time
import weakref
from collections.abc import AsyncIterator

import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.protocol import State

from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS, encode
from blackdrez.protocol.handshake import Hello
from blackdrez.server.app import GameServer, Settings
from blackdrez.server.keepalive import Pings, pings_of


async def test_clients_that_answer_pings_stay_and_hold_no_keepalive_task_each() -> None:
    server = GameServer(Settings(port=0, ping_interval=0.1, ping_timeout=0.3))
    await server.start()
    clients = []
    try:
        for n in range(3):
            ws = await ws_connect(f"ws://127.0.0.1:{server.port}/", compression=None)
            await ws.send(encode(Hello(versions=[1], name=f"Pinged{n}"), False))
            assert isinstance(SERVER_DECODERS[1].decode(await ws.recv()), v1.Welcome)
            clients.append(ws)
        held = list(server.server.connections)  # type: ignore[union-attr]
        assert len(held) == 3
        assert all(connection.keepalive_task is None for connection in held)
        assert len(pings_of(asyncio.get_running_loop())) == 3
        await asyncio.sleep(1.0)  # ten intervals: pinged and answered (websockets' client)
        assert all(connection.latency > 0 for connection in held)
        for ws in clients:
            await ws.send(encode(v1.Ping(id=7), False))
            assert isinstance(SERVER_DECODERS[1].decode(await ws.recv()), v1.Pong)
        await clients[0].close()
        await asyncio.sleep(0.2)
        assert len(pings_of(asyncio.get_running_loop())) == 2  # the lost one let go
    finally:
        for ws in clients:
            await ws.close()
        await server.stop()


def test_the_keepalive_of_a_loop_lets_the_loop_go() -> None:
    """Each test's loop (and a worker's) is let go once closed: the keepalive kept per loop
    does not keep it alive."""
    loop = asyncio.new_event_loop()
    pings_of(loop)
    gone = weakref.ref(loop)
    loop.close()
    del loop
    gc.collect()
    assert gone() is None


def test_a_node_stalled_past_the_ping_timeout_keeps_the_clients_that_answered() -> None:
    """A node whose loop stalls for longer than ``ping_timeout`` (a long pause of its process
    or of its machine) finds, when it runs again, the pongs its clients sent meanwhile unread
    in its sockets; uvloop, the node's loop, runs due timers before it reads sockets, so every
    connection whose ping was out was failed with 1011 at once, the clients that answered too.
    A keepalive that wakes that late (a stall) waits a tick, for the sockets to be read, before
    it judges."""
    uvloop = pytest.importorskip("uvloop")
    greeted, stop, closes = threading.Event(), threading.Event(), []

    def client(port: int) -> None:  # in a thread: answers pings while the node's loop stalls
        async def run() -> None:
            async with ws_connect(f"ws://127.0.0.1:{port}/", compression=None) as ws:
                await ws.send(encode(Hello(versions=[1], name="Stalled"), False))
                await ws.recv()
                greeted.set()
                while not stop.is_set() and ws.state is State.OPEN:
                    await asyncio.sleep(0.05)
                closes.append(ws.close_code)  # (None: still open)

        asyncio.run(run())

    async def node() -> None:
        server = GameServer(Settings(port=0, ping_interval=0.2, ping_timeout=0.2))
        await server.start()
        thread = threading.Thread(target=client, args=(server.port,))
        thread.start()
        try:
            while not greeted.is_set():
                await asyncio.sleep(0.01)
            (connection,) = server.server.connections  # type: ignore[union-attr]
            pings = pings_of(asyncio.get_running_loop())
            for _ in range(3):  # three stalls, each right after a ping went out
                while pings._waiting.get(connection) is None:
                    await asyncio.sleep(0)
                time.sleep(0.8)  # the whole loop stalls (the client's thread answers)
                await asyncio.sleep(0.5)
                assert connection.protocol.state is State.OPEN
        finally:
            stop.set()
            await asyncio.to_thread(thread.join)
            await server.stop()

    uvloop.run(node())
    assert closes == [None]  # never closed by the node (a keepalive failure: 1011)


class _Silent:
    """A connection that never answers a ping (its pong never comes)."""

    ping_interval, ping_timeout = 0.2, 0.2

    def __init__(self) -> None:
        self.failed: list[int] = []
        self.protocol = self

    async def ping(self) -> asyncio.Future[float]:
        return asyncio.get_running_loop().create_future()

    def fail(self, code: int, reason: str) -> None:
        self.failed.append(code)

    @contextlib.asynccontextmanager
    async def send_context(self) -> AsyncIterator[None]:
        yield


async def test_after_a_stall_a_client_that_did_not_answer_is_still_failed() -> None:
    """The tick of grace after a stall is given once a ping: a connection whose pong does not
    come is failed with 1011 a tick later, even while the loop goes on waking late."""
    pings, silent = Pings(asyncio.get_running_loop()), _Silent()
    pings.add(silent)  # type: ignore[arg-type]
    while pings._waiting.get(silent) is None:  # type: ignore[call-overload]
        await asyncio.sleep(0.01)
    for _ in range(8):  # stall after stall: every wake-up is late
        time.sleep(0.3)
        await asyncio.sleep(0)
    assert silent.failed == [1011]
    assert len(pings) == 0


def test_a_wake_up_set_for_a_time_gone_by_is_kept_on_uvloop() -> None:
    """uvloop's ``call_at`` of a time gone by gives a plain handle, with no ``when()``: a pong
    whose latency was over the interval (a stall) sets such a wake-up, and the next one set
    must still compare with it (it failed with ``AttributeError``, in a pong's callback)."""
    uvloop = pytest.importorskip("uvloop")

    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        pings, ran = Pings(loop), []
        pings._run = lambda: ran.append(loop.time())  # type: ignore[method-assign]
        pings._wake_by(loop.time() - 1.0)
        pings._wake_by(loop.time() + 5.0)  # later: the earlier wake-up stays
        await asyncio.sleep(0.05)
        return ran

    assert len(uvloop.run(main())) == 1
