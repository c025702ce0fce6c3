"""The lobby contract (``Lobby``): tables' records, the listed ones, on every store."""

from __future__ import annotations

import redis.asyncio as aioredis

from blackdrez.server.stores.base import (
    Stores,
)

from .helpers import OpenRedisStores


async def test_table_record_put_get_replace_remove(stores: Stores) -> None:
    assert await stores.lobby.get("t1") is None
    await stores.lobby.put("t1", "node-a", b"record-1", listed=True)
    assert await stores.lobby.get("t1") == ("node-a", b"record-1")
    await stores.lobby.put("t1", "node-b", b"record-2", listed=True)
    assert await stores.lobby.get("t1") == ("node-b", b"record-2")
    await stores.lobby.remove("t1")
    assert await stores.lobby.get("t1") is None
    assert await stores.lobby.listed() == []
    await stores.lobby.remove("t1")  # forgetting twice is harmless


async def test_list_tables_shows_listed_tables_only(stores: Stores) -> None:
    assert await stores.lobby.listed() == []
    await stores.lobby.put("t1", "node-a", b"one", listed=True)
    await stores.lobby.put("t2", "node-a", b"two", listed=False)
    await stores.lobby.put("t3", "node-b", b"three", listed=True)
    assert sorted(await stores.lobby.listed()) == [b"one", b"three"]
    assert await stores.lobby.get("t2") == ("node-a", b"two")

    await stores.lobby.put("t1", "node-a", b"one, private now", listed=False)
    await stores.lobby.put("t2", "node-a", b"two, public now", listed=True)
    assert sorted(await stores.lobby.listed()) == [b"three", b"two, public now"]

    await stores.lobby.remove("t3")
    assert await stores.lobby.listed() == [b"two, public now"]


async def test_records_are_opaque_bytes(stores: Stores) -> None:
    record = bytes(range(256))
    await stores.lobby.put("t-bin", "node-a", record, listed=True)
    assert await stores.lobby.get("t-bin") == ("node-a", record)
    assert await stores.lobby.listed() == [record]


async def test_list_tables_drops_ids_whose_record_vanished(
    open_redis_stores: OpenRedisStores, redis_url_clean: str
) -> None:
    stores = await open_redis_stores()
    await stores.lobby.put("t1", "node-a", b"one", listed=True)
    await stores.lobby.put("t2", "node-a", b"two", listed=True)
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        await raw.delete("bd:t:{t1}:record")
        assert await stores.lobby.listed() == [b"two"]
        assert await raw.smembers("bd:lobby:tables") == {b"t2"}
