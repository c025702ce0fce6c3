"""The presence contract (``Presence``): heartbeats, and the process each names."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from blackdrez.server.stores.base import (
    Stores,
)

from .helpers import OpenRedisStores


async def test_heartbeat_marks_node_alive_until_ttl(stores: Stores) -> None:
    assert stores.node_id not in await stores.presence.live_nodes()
    await stores.presence.heartbeat(0.5)
    assert await stores.presence.live_nodes() == {"node-a"}
    await asyncio.sleep(0.3)
    await stores.presence.heartbeat(0.5)  # renewed: alive 0.5 s from now, not from the first beat
    await asyncio.sleep(0.3)
    assert await stores.presence.live_nodes() == {"node-a"}
    await asyncio.sleep(0.4)
    assert await stores.presence.live_nodes() == set()


async def test_a_heartbeat_names_the_process_that_sent_it(stores: Stores) -> None:
    assert await stores.presence.live_incarnations() == {}
    await stores.presence.heartbeat(0.5)
    assert await stores.presence.live_incarnations() == {"node-a": stores.incarnation}
    await asyncio.sleep(0.7)
    assert await stores.presence.live_incarnations() == {}


async def test_a_node_restarted_under_its_id_heartbeats_as_its_new_process(
    open_redis_stores: OpenRedisStores, redis_url_clean: str
) -> None:
    """The node id stays live throughout; its incarnation changes. A node of an older version
    (a heartbeat without incarnation) is live with none, and so is a node whose last heartbeat
    with one lapsed while it beats without (rolled back): the lapsed one is dropped."""
    before = await open_redis_stores("node-a")
    await before.presence.heartbeat(10)
    after = await open_redis_stores("node-a")
    await after.presence.heartbeat(10)
    assert await before.presence.live_incarnations() == {"node-a": after.incarnation}
    other = await open_redis_stores("node-b")
    await other.presence.heartbeat(0.3)
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        seconds, micros = await raw.time()
        later = seconds * 1000 + micros // 1000 + 10_000
        await raw.zadd("bd:nodes", {"node-old": later})  # as an older version beats
        assert await after.presence.live_incarnations() == {
            "node-a": after.incarnation,
            "node-b": other.incarnation,
            "node-old": None,
        }
        await raw.zadd("bd:nodes", {"node-b": later})  # node-b goes on as an older version
        await asyncio.sleep(0.4)
        assert (await after.presence.live_incarnations())["node-b"] is None
        await after.presence.heartbeat(10)
        assert await raw.hkeys("{bd:nodes}:incarnations") == [b"node-a"]
