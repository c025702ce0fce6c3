"""The fault suite's own parts: what its players call a stalled game, and which tables a
scenario waits for before it checks every key has a lifetime.

A player waiting for its turn gives up (the game "stalled") after :data:`players.STALL` seconds
without the update it waits for, counted only while the scenario's gate is open: the time the
scenario held its players does not count. (A Swarm rolling update that held the players for
longer than that, then opened the gate, saw players give up a second after it opened, with their
turn on its way: the games were reported stuck while the server was fine.)

A scenario waits for its tables to close before it checks that no key of Redis lives without a
TTL. The tables of openings a fault broke off part way (the table made, its players gone before
the opening returned) are not in the scenario's list: they close by themselves within a grace or
two, and the scenario must wait for them too (:func:`history.tables_in_store`). A chaos soak in
CI found such a table's keys still without a TTL, the table alive and well.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio as redis

from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.server.stores.keys import epoch_key
from blackdrez.server.testing.nodes import NodeProcess
from blackdrez.server.testing.redis_server import RedisServer
from tests.faults import players
from tests.faults.history import keys_without_ttl, tables_in_store, wait_closed

pytestmark = pytest.mark.timeout(30)


class SilentClient:
    """What ``_progress`` needs of a client: ``wait_until``, here until ``ready`` is set (the
    update the player waits for) or the timeout."""

    def __init__(self) -> None:
        self.ready = asyncio.Event()

    async def wait_until(self, predicate: object, timeout: float | None = 10.0) -> bool:
        async with asyncio.timeout(timeout):
            await self.ready.wait()
        return True


async def test_the_time_the_gate_was_closed_does_not_count_towards_a_stall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(players, "STALL", 0.5)
    monkeypatch.setattr(players, "GATE_POLL", 0.05)
    client, gate = SilentClient(), asyncio.Event()
    started = time.monotonic()
    waiting = asyncio.create_task(players._progress(client, lambda: True, gate))  # type: ignore[arg-type]
    await asyncio.sleep(0.8)  # held past STALL
    gate.set()
    await asyncio.sleep(0.3)  # open for less than STALL: the update arrives
    assert not waiting.done(), "the player gave up while its wait had been open 0.3 s of 0.5"
    client.ready.set()
    await asyncio.wait_for(waiting, 1.0)
    assert time.monotonic() - started >= 1.1


async def test_a_wait_with_the_gate_open_past_the_stall_gives_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(players, "STALL", 0.5)
    monkeypatch.setattr(players, "GATE_POLL", 0.05)
    gate = asyncio.Event()
    gate.set()
    for held in (None, gate):
        started = time.monotonic()
        with pytest.raises(players._Stalled):
            await players._progress(SilentClient(), lambda: True, held)  # type: ignore[arg-type]
        assert 0.45 <= time.monotonic() - started < 1.0


async def test_a_table_whose_opening_broke_off_is_waited_for_before_the_keys_are_checked(
    durable_redis: RedisServer,
) -> None:
    node = NodeProcess(durable_redis.url, "opening0")
    client: Client | None = None
    try:
        await asyncio.to_thread(node.start)
        client = await Client.connect(node.url, name="Ann", binary=True)
        options = players.fault_options(seats=2, grace_seconds=1.0)
        table = (await client.request(v1.CreateTable(options=options))).table.id
        await client.close()  # the opening broke off here: the scenario never heard of it
        client = None
        assert await tables_in_store(durable_redis.url) == {table}
        left = await keys_without_ttl(durable_redis.url)
        assert any(f"{{{table}}}" in key for key in left), left  # the table lives on a while
        await wait_closed(durable_redis.url, await tables_in_store(durable_redis.url), 20.0)
        assert await keys_without_ttl(durable_redis.url) == []
        assert await tables_in_store(durable_redis.url) == {table}  # retired: kept a while
    finally:
        if client is not None:
            await client.close()
        node.stop()


async def test_a_table_leased_and_never_logged_is_waited_for_until_it_is_forgotten(
    durable_redis: RedisServer,
) -> None:
    """A node that dies between a table's lease and its first entry leaves the lease's counter
    without a TTL until the orphan scan forgets the table (here: deleted by hand)."""
    client = redis.Redis.from_url(durable_redis.url)
    try:
        await client.set(epoch_key("tnever00000"), 1)
        waiting = asyncio.create_task(wait_closed(durable_redis.url, ["tnever00000"], 10.0))
        await asyncio.sleep(0.6)
        assert not waiting.done(), "the wait ended while the table still had a key without a TTL"
        await client.delete(epoch_key("tnever00000"))  # the orphan scan's forget
        assert await asyncio.wait_for(waiting, 2.0) < 2.0
    finally:
        await client.aclose()
