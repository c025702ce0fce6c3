"""Quiet tables: a host stops announcing a table no other node follows, and starts again before
another node's first request for it ("Quiet tables" in ``blackdrez.server.node.hosting``).

On one real Redis with two nodes: a table played on its host alone goes quiet (its updates are
no longer published on its channel); a spectator on the other node then misses nothing, and the
table is announced again. A "nobody heard" that comes back after such a request arrived must not
make the table quiet again (the requester had subscribed before it asked).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.server.app import GameServer
from blackdrez.server.stores.base import Append, Settled
from tests.server.helpers import Listener, play_out, seat_and_start, wait_for

WAIT = 15.0


@pytest.fixture
async def nodes(make_server, redis_url_clean) -> tuple[GameServer, GameServer]:
    host = await make_server(redis_url=redis_url_clean, node_id="node-a")
    follower = await make_server(redis_url=redis_url_clean, node_id="node-b")
    return host, follower


async def move(players: list[Client], table: str) -> v1.Ok:
    """The move of whichever of ``players`` is on turn (waiting for one to be)."""
    async with asyncio.timeout(WAIT):
        while True:
            for player in players:
                legal = player.tables[table].legal
                if legal:
                    return await player.act(table, legal[0])
            await asyncio.sleep(0.02)


async def test_a_table_nobody_else_follows_goes_quiet_and_a_new_remote_spectator_misses_nothing(
    nodes, connect, redis_url_clean
) -> None:
    a, b = nodes
    host, other = await connect(a, name="Host"), await connect(a, name="Other")
    table = await seat_and_start(host, [other], turn_seconds=60)
    await move([host, other], table)
    await wait_for(lambda: a.node.hosting.leases.held[table].quiet, "the table quiet", WAIT)
    listener = Listener(redis_url_clean, table)
    await listener.start()
    try:
        unannounced = await move([host, other], table)
        await asyncio.sleep(0.3)
        assert listener.heard == [], "a quiet table's update was published"
        spectator = await connect(b, name="Spectator")
        await spectator.request(v1.Spectate(table=table))
        state = spectator.tables[table]
        assert state.seq >= unannounced.seq, "the answer holds what was not announced"
        assert not a.node.hosting.leases.held[table].quiet
        announced = await move([host, other], table)
        await spectator.wait_until(lambda: state.seq >= announced.seq, WAIT)
        assert announced.seq in listener.heard
        await asyncio.gather(play_out(host, table), play_out(other, table))
        await spectator.wait_until(lambda: state.view["phase"] == "over", WAIT)
        seqs = [e.seq for e in state.events]
        assert seqs == sorted(set(seqs)), "no duplicate, in order"
    finally:
        await listener.stop()


class HeldReturn:
    """Holds the return of the next log append (after it ran), until released: awaited, or
    not awaited (an action's: :meth:`soon` holds its outcome from its callback)."""

    def __init__(
        self, call: Callable[..., Awaitable[Any]], call_soon: Callable[[Append, Settled], None]
    ) -> None:
        self.call = call
        self.call_soon = call_soon
        self.armed = False
        self.holding = asyncio.Event()
        self.released = asyncio.Event()
        self._held: set[asyncio.Task[None]] = set()

    def soon(self, append: Append, settled: Settled) -> None:
        def hold(outcome: bool | BaseException) -> None:
            if not self.armed:
                settled(outcome)
                return
            self.armed = False
            self.holding.set()
            task = asyncio.get_running_loop().create_task(self._settle_later(settled, outcome))
            self._held.add(task)

        self.call_soon(append, hold)

    async def _settle_later(self, settled: Settled, outcome: bool | BaseException) -> None:
        await self.released.wait()
        settled(outcome)

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = await self.call(*args, **kwargs)
        if self.armed:
            self.armed = False
            self.holding.set()
            await self.released.wait()
        return result


async def test_nobody_heard_after_a_request_came_does_not_quiet_the_table(
    nodes, connect, monkeypatch
) -> None:
    """The host's append announces to nobody; before its reply is taken in, the spectator's
    node subscribes and asks for the table (the request waits for the table's lock). That
    "nobody heard" is older than the request: the table must stay loud, or the spectator's
    next update is never announced."""
    a, b = nodes
    host, other = await connect(a, name="Host"), await connect(a, name="Other")
    table = await seat_and_start(host, [other], turn_seconds=60)
    await move([host, other], table)
    await wait_for(lambda: a.node.hosting.leases.held[table].quiet, "the table quiet", WAIT)
    # as just after an adoption: loud, followed by nobody
    a.node.hosting.leases.held[table].quiet = False
    held = HeldReturn(a.node.store.logs.append, a.node.store.logs.append_soon)
    monkeypatch.setattr(a.node.store.logs, "append", held)
    monkeypatch.setattr(a.node.store.logs, "append_soon", held.soon)
    held.armed = True
    moving = asyncio.create_task(move([host, other], table))
    await asyncio.wait_for(held.holding.wait(), WAIT)
    asked = a.node.hosting._tables_asked
    spectator = await connect(b, name="Spectator")
    spectating = asyncio.create_task(spectator.request(v1.Spectate(table=table)))
    await wait_for(lambda: a.node.hosting._tables_asked > asked, "the request seen", WAIT)
    held.released.set()
    await moving
    await spectating
    state = spectator.tables[table]
    after = await move([host, other], table)
    await spectator.wait_until(lambda: state.seq >= after.seq, WAIT)
