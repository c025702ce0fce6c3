"""Keepalive pings from the loop's one timer (``blackdrez.server.keepalive``): a client that
answers stays, one that does not is closed with 1011 (``test_slow_reader``), and no connection
holds a task of its own for it."""

from __future__ import annotations

import asyncio
import gc
import weakref

from websockets.asyncio.client import connect as ws_connect

from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS, encode
from blackdrez.protocol.handshake import Hello
from blackdrez.server.app import GameServer, Settings
from blackdrez.server.keepalive import pings_of


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
