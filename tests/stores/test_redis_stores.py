"""The Redis stores as a whole: several nodes on one Redis, the key layout, and Redis going away
and coming back under live stores."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio as aioredis

from blackdrez.server.stores.base import (
    StoreUnavailable,
)
from blackdrez.server.testing.redis_server import RedisServer

from .helpers import Inbox, OpenRedisStores, eventually


async def test_nodes_share_one_redis(open_redis_stores: OpenRedisStores) -> None:
    node_a = await open_redis_stores("node-a")
    node_b = await open_redis_stores("node-b")

    assert await node_a.tokens.shared_secret(b"from-a") == b"from-a"
    assert await node_b.tokens.shared_secret(b"from-b") == b"from-a"

    await node_a.lobby.put("t1", "node-a", b"on a", listed=True)
    await node_b.lobby.put("t2", "node-b", b"on b", listed=True)
    assert await node_b.lobby.get("t1") == ("node-a", b"on a")
    assert sorted(await node_a.lobby.listed()) == [b"on a", b"on b"]

    await node_a.players.add_table("alice", "t1")
    await node_b.players.add_table("alice", "t2")
    assert await node_a.players.tables("alice") == ["t1", "t2"]

    await node_a.leaderboards.submit("piles", "p1", b"Ann", 5)
    await node_b.leaderboards.submit("piles", "p2", b"Bob", 5)
    assert await node_b.leaderboards.top("piles", 5) == [("p1", b"Ann", 5), ("p2", b"Bob", 5)]
    assert await node_a.daily.seed("piles", "2026-11-30", "a") == "a"
    assert await node_b.daily.seed("piles", "2026-11-30", "b") == "a"

    await node_a.presence.heartbeat(10)
    await node_b.presence.heartbeat(0.3)
    assert await node_a.presence.live_nodes() == {"node-a", "node-b"}
    await asyncio.sleep(0.45)
    assert await node_b.presence.live_nodes() == {"node-a"}


async def test_key_layout_is_cluster_friendly(
    open_redis_stores: OpenRedisStores, redis_url_clean: str
) -> None:
    stores = await open_redis_stores()
    await stores.tokens.shared_secret(b"s")
    await stores.lobby.put("t1", "node-a", b"rec", listed=True)
    await stores.players.add_table("alice", "t1")
    await stores.presence.heartbeat(5)
    await stores.leaderboards.submit("piles", "p1", b"Ann", 3)
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        assert await raw.hgetall("bd:t:{t1}:record") == {
            b"node": b"node-a",
            b"record": b"rec",
            b"listed": b"1",
        }
        assert await raw.smembers("bd:lobby:tables") == {b"t1"}
        assert await raw.smembers("bd:p:{alice}:tables") == {b"t1"}
        assert await raw.zrange("bd:nodes", 0, -1) == [b"node-a"]
        assert await raw.get("bd:secret") == b"s"
        keys = {key.decode() for key in await raw.keys("*")}
    board_keys = {key for key in keys if key.startswith("bd:lb:")}
    assert board_keys and all(key.startswith("bd:lb:{piles}") for key in board_keys)


async def test_unavailable_promptly_then_recovers(
    open_redis_stores: OpenRedisStores, private_redis: RedisServer
) -> None:
    stores = await open_redis_stores(url=private_redis.url)
    inbox, dropped = Inbox(), Inbox()
    await stores.bus.subscribe("news", inbox)
    await stores.bus.subscribe("news", dropped)
    await stores.lobby.put("t1", "node-a", b"before", listed=True)

    private_redis.stop()
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: stores.tokens.shared_secret(b"s"),
        lambda: stores.lobby.put("t1", "node-a", b"during", listed=False),
        lambda: stores.lobby.get("t1"),
        lambda: stores.lobby.remove("t1"),
        stores.lobby.listed,
        lambda: stores.players.add_table("alice", "t1"),
        lambda: stores.players.remove_table("alice", "t1"),
        lambda: stores.players.tables("alice"),
        lambda: stores.presence.heartbeat(5),
        stores.presence.live_nodes,
        lambda: stores.leaderboards.submit("piles", "p1", b"Ann", 1),
        lambda: stores.leaderboards.top("piles", 5),
        lambda: stores.bus.publish("news", b"lost"),
        lambda: stores.bus.subscribe("other", Inbox()),
    ]
    for call in calls:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await call()
        assert time.monotonic() - started < 3.0
    await stores.bus.unsubscribe("news", dropped)  # local bookkeeping: works while Redis is away

    private_redis.restart()  # no persistence: Redis comes back empty
    assert await stores.lobby.get("t1") is None
    await stores.lobby.put("t1", "node-a", b"after", listed=True)
    assert await stores.lobby.listed() == [b"after"]

    # The reader reconnects with backoff and subscribes "news" again: publish until it arrives.
    deadline = time.monotonic() + 5.0
    while not inbox.messages and time.monotonic() < deadline:
        await stores.bus.publish("news", b"back")
        await asyncio.sleep(0.05)
    assert inbox.messages and set(inbox.messages) == {b"back"}
    assert dropped.messages == []


async def test_a_frozen_redis_times_out_and_replies_stay_in_step(
    open_redis_stores: OpenRedisStores, private_redis: RedisServer
) -> None:
    stores = await open_redis_stores(url=private_redis.url)
    await stores.lobby.put("t1", "node-a", b"one", listed=True)
    private_redis.pause()
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await stores.lobby.get("t1")
        assert time.monotonic() - started < 3.0
    finally:
        private_redis.resume()
    # The late reply to the timed-out command must not be taken for the next command's.
    await stores.lobby.put("t2", "node-a", b"two", listed=False)
    assert await stores.lobby.get("t1") == ("node-a", b"one")
    assert await stores.lobby.get("t2") == ("node-a", b"two")
    assert await stores.lobby.listed() == [b"one"]


async def test_store_started_while_redis_is_down(
    open_redis_stores: OpenRedisStores, private_redis: RedisServer
) -> None:
    private_redis.stop()
    stores = await open_redis_stores(url=private_redis.url)
    with pytest.raises(StoreUnavailable):
        await stores.lobby.listed()
    with pytest.raises(StoreUnavailable):
        await stores.bus.subscribe("news", Inbox())

    await asyncio.sleep(2.0)  # the reader now waits over a second between attempts

    private_redis.start()
    inbox = Inbox()
    started = time.monotonic()
    await stores.bus.subscribe("news", inbox)  # wakes the reader out of its backoff
    assert time.monotonic() - started < 0.5
    await stores.bus.publish("news", b"hi")
    await eventually(lambda: inbox.messages == [b"hi"])


async def test_data_survives_a_restart_with_persistence(
    open_redis_stores: OpenRedisStores, tmp_path
) -> None:
    with RedisServer(appendonly=True, data_dir=tmp_path) as server:
        stores = await open_redis_stores(url=server.url)
        await stores.lobby.put("t1", "node-a", b"kept", listed=True)
        await stores.leaderboards.submit("piles", "p1", b"Ann", 7)
        server.stop()
        with pytest.raises(StoreUnavailable):
            await stores.lobby.put("t1", "node-a", b"not written", listed=False)
        server.restart()
        assert await stores.lobby.listed() == [b"kept"]
        assert await stores.lobby.get("t1") == ("node-a", b"kept")
        assert await stores.leaderboards.top("piles", 1) == [("p1", b"Ann", 7)]


async def test_health_warns_once_and_sees_redis_back_by_itself(
    open_redis_stores: OpenRedisStores, private_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    stores = await open_redis_stores(url=private_redis.url)
    await stores.lobby.listed()
    assert stores.health.up
    caplog.set_level("WARNING", logger="blackdrez.store")
    private_redis.stop()
    for _ in range(20):
        with pytest.raises(StoreUnavailable):
            await stores.lobby.get("t1")
    assert not stores.health.up
    await asyncio.sleep(1.0)  # the probe keeps trying meanwhile, quietly
    private_redis.start()
    await asyncio.wait_for(stores.health.wait_up(), 3.0)  # no call of ours: the probe saw it
    assert stores.health.outages == 1
    warnings = [  # the health's own (the pub/sub's reconnection logs under the same name)
        r.getMessage()
        for r in caplog.records
        if r.name == "blackdrez.store" and r.module == "retry"
    ]
    assert len(warnings) == 2, warnings
    assert "unavailable" in warnings[0]
    assert "back after" in warnings[1]
    assert int(re.search(r"\((\d+) failed", warnings[1])[1]) >= 20, "counted, probes included"
