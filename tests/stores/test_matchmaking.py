"""The matchmaking queue's contract (``Matchmaking``): one ticket per player, alive until its
expiry unless refreshed; the matcher's lease, one process at a time; placing a table's players
only while every one of them is queued, fenced by the lease, announced in the same step."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from blackdrez.server.stores import Stores, open_stores
from blackdrez.server.stores.base import MATCH_CHANNEL, LeaseLost
from blackdrez.server.stores.memory import MemoryWorld, memory_stores

from .helpers import Inbox, eventually

NOW = 1_000_000.0


async def test_one_ticket_per_player_the_last_one_entered(stores: Stores) -> None:
    queue = stores.matchmaking
    assert await queue.waiting(NOW) == []
    await queue.enter("ann", b"ann 1", NOW + 10)
    await queue.enter("bob", b"bob", NOW + 10)
    await queue.enter("ann", b"ann 2", NOW + 10)
    assert sorted(await queue.waiting(NOW)) == [b"ann 2", b"bob"]
    assert await queue.ticket("ann", NOW) == b"ann 2"
    assert await queue.ticket("cat", NOW) is None
    await queue.leave("ann")
    await queue.leave("ann")  # not queued: nothing
    assert await queue.waiting(NOW) == [b"bob"]


async def test_a_ticket_lives_until_its_expiry_unless_refreshed(stores: Stores) -> None:
    queue = stores.matchmaking
    await queue.enter("ann", b"ann", NOW + 10)
    await queue.enter("bob", b"bob", NOW + 10)
    await queue.refresh(["bob", "nobody"], NOW + 30)
    assert await queue.ticket("ann", NOW + 11) is None, "expired, though not dropped yet"
    assert await queue.waiting(NOW + 11) == [b"bob"]
    assert await queue.ticket("ann", NOW) is None, "dropped by the look at the queue"
    assert await queue.waiting(NOW + 31) == []
    await queue.refresh(["nobody"], NOW + 60)
    assert await queue.waiting(NOW) == [], "a refresh queues nobody"


async def test_placing_takes_the_players_out_and_announces_the_table(stores: Stores) -> None:
    queue = stores.matchmaking
    inbox = Inbox()
    await stores.bus.subscribe(MATCH_CHANNEL, inbox)
    for player in ("ann", "bob", "cat"):
        await queue.enter(player, player.encode(), NOW + 10)
    token = await queue.lead(5.0)
    assert token is not None
    assert await queue.place(token, ["ann", "bob"], b"table 1")
    assert await queue.waiting(NOW) == [b"cat"]
    await eventually(lambda: inbox.messages == [b"table 1"])


async def test_a_table_with_someone_no_longer_queued_places_nobody(stores: Stores) -> None:
    queue = stores.matchmaking
    inbox = Inbox()
    await stores.bus.subscribe(MATCH_CHANNEL, inbox)
    for player in ("ann", "bob"):
        await queue.enter(player, player.encode(), NOW + 10)
    token = await queue.lead(5.0)
    assert token is not None
    await queue.leave("bob")  # cancelled while the table was being made
    assert not await queue.place(token, ["ann", "bob"], b"table 1")
    assert await queue.waiting(NOW) == [b"ann"]
    await asyncio.sleep(0.1)
    assert inbox.messages == []


@pytest.fixture(params=["memory", "redis", "cluster"])
async def two_nodes(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Stores, Stores]]:
    """Two nodes' stores over one store of each kind."""
    if request.param == "memory":
        world = MemoryWorld()
        pair = (memory_stores("node-a", world=world), memory_stores("node-b", world=world))
    else:
        fixture = "redis_url_clean" if request.param == "redis" else "redis_cluster_url_clean"
        url = request.getfixturevalue(fixture)
        pair = (open_stores(url, "node-a"), open_stores(url, "node-b"))
    for stores in pair:
        await stores.start()
    yield pair
    for stores in pair:
        await stores.close()


async def test_one_process_leads_the_queue_at_a_time(two_nodes: tuple[Stores, Stores]) -> None:
    a, b = (stores.matchmaking for stores in two_nodes)
    token = await a.lead(0.3)
    assert token is not None
    assert await b.lead(0.3) is None
    assert await a.lead(0.3) == token, "the holder extends its lease, same token"
    await asyncio.sleep(0.5)
    taken = await b.lead(5.0)
    assert taken is not None and taken > token, "a lapsed lease is taken with a newer token"
    assert await a.lead(5.0) is None


async def test_a_matcher_that_lost_its_lease_places_nobody(
    two_nodes: tuple[Stores, Stores],
) -> None:
    a, b = (stores.matchmaking for stores in two_nodes)
    for player in ("ann", "bob"):
        await a.enter(player, player.encode(), NOW + 10)
    stale = await a.lead(0.2)
    assert stale is not None
    await asyncio.sleep(0.4)  # paused past its lease: b leads now
    assert await b.lead(5.0) is not None
    with pytest.raises(LeaseLost):
        await a.place(stale, ["ann", "bob"], b"table 1")
    assert sorted(await b.waiting(NOW)) == [b"ann", b"bob"], "nobody was placed"
