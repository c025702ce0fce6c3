"""The table logs contract (``TableLogs``): fenced appends, retirement, game records.

The group commit of appends is in ``tests/test_group_commit.py``; snapshots in
``tests/test_snapshots.py``."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from blackdrez.server.stores import redis_tables
from blackdrez.server.stores.base import (
    Append,
    LeaseLost,
    Stores,
    Whereabouts,
)

from .helpers import OpenRedisStores


async def test_an_append_needs_the_token_and_the_expected_position(stores: Stores) -> None:
    token = await stores.leases.acquire("t1", 5)
    assert token is not None
    await stores.logs.append(Append("t1", token, 1, b"create"))
    await stores.logs.append(Append("t1", token, 2, b"join"))
    for stale_token, position in ((token, 2), (token, 4), (token, 1), (token + 1, 3)):
        with pytest.raises(LeaseLost):
            await stores.logs.append(Append("t1", stale_token, position, b"stale"))
    with pytest.raises(LeaseLost):
        await stores.logs.append(Append("t-unleased", token, 1, b"create"))
    assert await stores.logs.read("t1") == [b"create", b"join"], "nothing was written"
    await stores.logs.append(Append("t1", token, 3, b"act"))
    assert await stores.logs.read("t1") == [b"create", b"join", b"act"]
    with pytest.raises(LeaseLost):
        await stores.lobby.put("t1", stores.node_id, b"record", listed=True, token=token + 1)
    assert await stores.lobby.get("t1") is None


async def test_a_retired_table_leaves_its_record_and_is_never_leased_again(stores: Stores) -> None:
    token = await stores.leases.acquire("t1", 5)
    assert token is not None
    await stores.logs.append(Append("t1", token, 1, b"create"))
    await stores.lobby.put("t1", stores.node_id, b"info", listed=True, token=token)
    await stores.players.add_table("alice", "t1")
    await stores.players.add_table("alice", "t2")
    await stores.players.add_table("bob", "t1")
    with pytest.raises(LeaseLost):
        await stores.logs.retire("t1", token + 1, b"game", 60, ["alice", "bob"])
    await stores.logs.retire("t1", token, b"game", 60, ["alice", "bob"])
    assert (await stores.leases.locate("t1")).where is Whereabouts.CLOSED
    assert await stores.leases.acquire("t1", 5) is None
    assert await stores.logs.game_record("t1") == b"game"
    assert await stores.logs.read("t1") == []
    assert await stores.lobby.get("t1") is None
    assert await stores.lobby.listed() == []
    assert await stores.leases.adoptable() == []
    assert await stores.players.tables("alice") == ["t2"]
    assert await stores.players.tables("bob") == []
    with pytest.raises(LeaseLost):
        await stores.logs.append(Append("t1", token, 2, b"late"))


async def test_a_game_record_is_kept_for_its_retention(stores: Stores) -> None:
    token = await stores.leases.acquire("t1", 5)
    assert token is not None
    await stores.logs.append(Append("t1", token, 1, b"create"))
    await stores.logs.retire("t1", token, b"game", 1.0)
    assert await stores.logs.game_record("t1") == b"game"
    await asyncio.sleep(1.2)
    assert await stores.logs.game_record("t1") is None
    assert (await stores.leases.locate("t1")).where is Whereabouts.UNKNOWN


async def test_every_table_key_gets_a_lifetime_when_retired(
    open_redis_stores: OpenRedisStores, redis_url_clean: str
) -> None:
    stores = await open_redis_stores()
    token = await stores.leases.acquire("t1", 5)
    assert token is not None
    await stores.logs.append(Append("t1", token, 1, b"create"))
    await stores.lobby.put("t1", "node-a", b"info", listed=True, token=token)
    await stores.players.add_table("alice", "t1")
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        assert await raw.ttl("bd:p:{alice}:tables") > 0, "a player's set has a TTL"
        await stores.logs.retire("t1", token, b"game", 3600, ["alice"])
        keys = {key.decode() for key in await raw.keys("*")}
        assert {k for k in keys if "{t1}" in k} == {
            "bd:t:{t1}:epoch",
            "bd:t:{t1}:state",
            "bd:t:{t1}:game",
        }
        assert not {key for key in keys if key.startswith("bd:{hosted}:")}, "hosted no more"
        for key in keys - {"bd:secret", "bd:nodes", "bd:lobby:tables"}:
            assert 0 < await raw.ttl(key) <= 3600, f"{key} has no lifetime"
        assert await raw.smembers("bd:lobby:tables") == set()


async def test_an_append_counts_the_log_and_does_not_read_its_last_entry(
    open_redis_stores: OpenRedisStores, redis_url_clean: str
) -> None:
    """Every action's append is fenced by the log's position inside Redis's script: the log's
    length (entries run 1, 2, ... without a gap), not its last entry read back into the script
    (``XREVRANGE``: an entry's copy, the larger part of what Redis spent on an append)."""
    stores = await open_redis_stores()
    token = await stores.leases.acquire("t1", 5)
    assert token is not None
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        before = (await raw.info("commandstats")).get("cmdstat_xrevrange", {}).get("calls", 0)
        for position in range(1, 6):
            await stores.logs.append(Append("t1", token, position, b"entry"))
        for position in (5, 7):
            with pytest.raises(LeaseLost):
                await stores.logs.append(Append("t1", token, position, b"stale"))
        stats = await raw.info("commandstats")
        assert stats.get("cmdstat_xrevrange", {}).get("calls", 0) == before
        assert stats["cmdstat_xlen"]["calls"] >= 7
    assert await stores.logs.read("t1") == [b"entry"] * 5


async def test_a_log_whose_entries_skip_a_number_refuses_its_append_alone(
    open_redis_stores: OpenRedisStores, redis_url_clean: str
) -> None:
    """A log as long as the append expects whose last entry is numbered past it (written by
    hand, say: entries run 1, 2, ... when only appends and take-backs write them) refuses that
    append, as a log at another position does; the other tables' appends of the same batch are
    written."""
    stores = await open_redis_stores()
    odd, fine = await stores.leases.acquire("t-odd", 5), await stores.leases.acquire("t-fine", 5)
    assert odd is not None and fine is not None
    await stores.logs.append(Append("t-odd", odd, 1, b"create"))
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        await raw.xdel("bd:t:{t-odd}:log", "1-0")
        await raw.xadd("bd:t:{t-odd}:log", {"e": b"create"}, id="9-0")
    outcomes = await asyncio.gather(
        stores.logs.append(Append("t-odd", odd, 2, b"join")),
        stores.logs.append(Append("t-fine", fine, 1, b"create")),
        return_exceptions=True,
    )
    assert isinstance(outcomes[0], LeaseLost), outcomes
    assert outcomes[1] is not None and not isinstance(outcomes[1], BaseException), outcomes
    assert await stores.logs.read("t-fine") == [b"create"]
    assert await stores.logs.read("t-odd") == [b"create"]


async def test_the_end_of_a_log_is_read_with_its_length(stores: Stores) -> None:
    """What an operator's look at a table reads: the log's length and its last entries, not
    the whole log."""
    assert await stores.logs.read_last("t1", 3) == (0, [])
    token = await stores.leases.acquire("t1", 5)
    assert token is not None
    entries = [b"entry %d" % position for position in range(1, 8)]
    for position, entry in enumerate(entries, start=1):
        await stores.logs.append(Append("t1", token, position, entry))
    assert await stores.logs.read_last("t1", 3) == (7, entries[-3:])
    assert await stores.logs.read_last("t1", 1) == (7, entries[-1:])
    assert await stores.logs.read_last("t1", 50) == (7, entries)
    assert await stores.logs.read_last("t1", 0) == (7, [])
    assert await stores.logs.read_last("t-none", 3) == (0, [])


async def test_the_end_of_a_long_log_is_read_without_the_rest(
    open_redis_stores: OpenRedisStores, redis_url_clean: str
) -> None:
    stores = await open_redis_stores()
    token = await stores.leases.acquire("t1", 5)
    assert token is not None
    for position in range(1, 401):
        await stores.logs.append(Append("t1", token, position, b"entry %d" % position))
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        await raw.config_resetstat()
        assert await stores.logs.read_last("t1", 2) == (400, [b"entry 399", b"entry 400"])
        stats = await raw.info("commandstats")
    assert "cmdstat_xrange" not in stats, "no read from the log's start"
    assert stats["cmdstat_xrevrange"]["calls"] == 1


async def test_a_long_log_is_read_back_in_pages(
    open_redis_stores: OpenRedisStores, redis_url_clean: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A closing table's whole log is read back on the node's event loop (its record keeps
    it): redis-py takes about 11 µs an entry to parse a reply, so a table of a day's play read
    in one reply stalled every other table of the node for half a second; in pages, the other
    tables go between them (and Redis, too, is held a page at a time)."""
    monkeypatch.setattr(redis_tables, "READ_PAGE", 100)
    stores = await open_redis_stores()
    token = await stores.leases.acquire("t1", 5)
    assert token is not None
    entries = [b"entry %d" % position for position in range(1, 351)]
    for position, entry in enumerate(entries, start=1):
        await stores.logs.append(Append("t1", token, position, entry))
    async with aioredis.Redis.from_url(redis_url_clean) as raw:

        async def reads() -> int:
            stats = await raw.info("commandstats")
            return int(stats.get("cmdstat_xrange", {}).get("calls", 0))

        before = await reads()
        assert await stores.logs.read("t1", held=True) == entries
        assert await reads() - before == 4, "350 entries in pages of 100"
        for after in (99, 100, 299, 300, 349, 350):
            assert await stores.logs.read("t1", after, held=True) == entries[after:]
        assert await stores.logs.read("t-none", held=True) == []
        before = await reads()
        assert await stores.logs.read("t1") == entries  # not held: one step (retired meanwhile,
        assert await reads() - before == 1  # a part read later would be missing)


async def test_a_log_read_by_its_holder_is_whole_and_in_order(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every store's reading in parts (a cluster's through redis-py, one Redis's on its own
    connection) gives the same entries as one reading."""
    monkeypatch.setattr(redis_tables, "READ_PAGE", 100)
    token = await stores.leases.acquire("t1", 5)
    assert token is not None
    entries = [b"entry %d" % position for position in range(1, 251)]
    for position, entry in enumerate(entries, start=1):
        await stores.logs.append(Append("t1", token, position, entry))
    for after in (0, 99, 100, 249, 250):
        assert await stores.logs.read("t1", after, held=True) == entries[after:]
        assert await stores.logs.read("t1", after) == entries[after:]
