"""The leases contract (``Leases``): fencing tokens, renewals, orphan scans, locating tables."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from blackdrez.server.stores import open_stores, redis_tables
from blackdrez.server.stores.base import (
    Append,
    LeaseLost,
    Stores,
    Whereabouts,
    bucket_of,
    in_share,
)
from blackdrez.server.stores.keys import hosted_key
from blackdrez.server.stores.redis_link import queue_script
from blackdrez.server.stores.redis_tables import SCAN_CHUNK

from ..leases import SHORT_LEASE, until_lapsed
from ..server.helpers import redis_user
from .helpers import OpenRedisStores


async def test_a_lease_yields_a_token_that_only_grows(stores: Stores) -> None:
    first = await stores.leases.acquire("t1", 5)
    assert first is not None
    assert await stores.leases.acquire("t1", 5) is None, "held: not taken twice"
    await stores.leases.release("t1", first + 1)  # not the holder's token: nothing happens
    assert await stores.leases.acquire("t1", 5) is None
    await stores.leases.release("t1", first)
    second = await stores.leases.acquire("t1", 5)
    assert second is not None and second > first
    assert (await stores.leases.locate("t1")).where is Whereabouts.HOSTED


async def test_renewal_extends_only_the_lease_held_with_that_token(stores: Stores) -> None:
    token = await stores.leases.acquire("t1", 1.0)
    other = await stores.leases.acquire("t2", 1.0)
    assert token is not None and other is not None
    assert await stores.leases.renew({"t1": token, "t2": other + 1}, 1.0) == {"t2"}
    await asyncio.sleep(0.6)
    assert await stores.leases.renew({"t1": token}, 1.0) == set()
    await asyncio.sleep(0.6)
    assert (await stores.leases.locate("t1")).where is Whereabouts.HOSTED, "renewed: still held"
    await asyncio.sleep(1.0)
    # Lapsed: the renewal reports it lost and does not take it again.
    assert await stores.leases.renew({"t1": token}, 5) == {"t1"}
    assert (await stores.leases.locate("t1")).node is None
    again = await stores.leases.acquire("t1", 5)
    assert again is not None and again > token


async def test_renewing_many_leases_reports_exactly_the_ones_not_held(stores: Stores) -> None:
    tables = [f"many{i}" for i in range(60)]
    tokens = {}
    for table in tables:
        token = await stores.leases.acquire(table, 5)
        assert token is not None
        tokens[table] = token
    stale = set(tables[::7])  # a token this node does not hold
    never = {"never1", "never2"}  # never leased at all
    asked = {t: tokens[t] + 1 if t in stale else tokens[t] for t in tables}
    asked.update(dict.fromkeys(never, 1))
    assert await stores.leases.renew(asked, 5) == stale | never
    await stores.leases.release(tables[1], tokens[tables[1]])
    assert await stores.leases.renew(tokens, 5) == {tables[1]}


async def test_the_shares_of_an_orphan_scan_are_disjoint_and_cover_every_table(
    stores: Stores,
) -> None:
    """Nodes scan for orphans in shares: for any number of shares, the tables found by each
    share are found by no other, and together they are every table the whole scan finds."""
    tables = [f"t{i}" for i in range(30)]
    for table in tables:
        token = await stores.leases.acquire(table, SHORT_LEASE)
        assert token is not None
        await stores.logs.append(Append(table, token, 1, b"create"))
    await until_lapsed(stores, tables[-1])
    assert await stores.leases.adoptable() == sorted(tables)
    for count in (1, 2, 3, 7):
        found = [await stores.leases.adoptable((index, count)) for index in range(count)]
        assert sorted(t for share in found for t in share) == sorted(tables), count
        assert all(share for share in found), f"{count} shares of 30 tables, one empty"


async def test_an_orphan_scan_lets_the_event_loop_run_between_its_round_trips(
    open_redis_stores: OpenRedisStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An orphan scan of many tables locates them at most ``SCAN_CHUNK`` per round trip, and the
    event loop runs other work between: one pipeline of every table held the loop while it
    packed and parsed them all, and every table of the node waited behind the scan."""
    stores = await open_redis_stores()
    tables = [f"t{i:03d}" for i in range(5 * SCAN_CHUNK)]
    for table in tables:
        token = await stores.leases.acquire(table, 30)
        assert token is not None
        await stores.logs.append(Append(table, token, 1, b"create"))
    turns = 0

    async def tick() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    seen: list[int] = []  # the loop's turn count at each locate queued
    locate = stores.leases._locate  # type: ignore[attr-defined]

    def counted(pipe, script, keys, args):  # type: ignore[no-untyped-def]
        if script is locate:
            seen.append(turns)
        return queue_script(pipe, script, keys, args)

    monkeypatch.setattr(redis_tables, "queue_script", counted)
    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    try:
        assert await stores.leases.adoptable() == []  # all held, by this very node
    finally:
        ticker.cancel()
    assert len(seen) == len(tables)
    stretches = [seen.count(turn) for turn in sorted(set(seen))]
    assert max(stretches) <= SCAN_CHUNK, stretches
    assert len(stretches) >= len(tables) // SCAN_CHUNK, stretches


async def test_a_lapsed_lease_fences_its_old_holder_out(stores: Stores) -> None:
    token = await stores.leases.acquire("t1", SHORT_LEASE)
    assert token is not None
    await stores.logs.append(Append("t1", token, 1, b"create"))
    await until_lapsed(stores, "t1")
    with pytest.raises(LeaseLost):
        await stores.logs.append(Append("t1", token, 2, b"late"))
    assert (await stores.leases.locate("t1")).where is Whereabouts.MOVING
    assert await stores.leases.adoptable() == ["t1"]
    adopted = await stores.leases.acquire("t1", 5)
    assert adopted is not None and adopted > token
    assert await stores.leases.adoptable() == []
    with pytest.raises(LeaseLost):
        await stores.logs.append(Append("t1", token, 2, b"late"))
    await stores.logs.append(Append("t1", adopted, 2, b"resume"))
    assert await stores.logs.read("t1") == [b"create", b"resume"]


async def test_locate_tells_unknown_from_moving(stores: Stores) -> None:
    assert (await stores.leases.locate("nowhere")).where is Whereabouts.UNKNOWN
    token = await stores.leases.acquire("t1", 5)
    assert token is not None
    await stores.logs.append(Append("t1", token, 1, b"create"))
    here = await stores.leases.locate("t1")
    assert (here.where, here.node, here.incarnation) == (
        Whereabouts.HOSTED,
        stores.node_id,
        stores.incarnation,
    )
    await stores.leases.release("t1", token)
    assert (await stores.leases.locate("t1")).where is Whereabouts.MOVING


async def test_a_paused_holder_is_fenced_out_by_the_adopter(
    open_redis_stores: OpenRedisStores,
) -> None:
    node_a = await open_redis_stores("node-a")
    node_b = await open_redis_stores("node-b")
    token_a = await node_a.leases.acquire("t1", SHORT_LEASE)
    assert token_a is not None
    assert await node_b.leases.acquire("t1", 5) is None, "held by A"
    assert await node_b.leases.adoptable() == []
    await node_a.logs.append(Append("t1", token_a, 1, b"create"))
    await until_lapsed(node_b, "t1")  # A pauses past its lease
    assert await node_b.leases.adoptable() == ["t1"]
    token_b = await node_b.leases.acquire("t1", SHORT_LEASE)
    assert token_b == token_a + 1
    await node_b.logs.append(Append("t1", token_b, 2, b"b acts"))
    assert await node_a.leases.renew({"t1": token_a}, 5) == {"t1"}
    with pytest.raises(LeaseLost):
        await node_a.logs.append(Append("t1", token_a, 2, b"a acts on its stale copy"))
    with pytest.raises(LeaseLost):
        await node_a.lobby.put("t1", "node-a", b"stale", listed=True, token=token_a)
    await until_lapsed(node_b, "t1")  # B pauses past its lease too; A's renewal must not revive A's
    assert await node_a.leases.renew({"t1": token_a}, 5) == {"t1"}
    assert (await node_a.leases.locate("t1")).where is Whereabouts.MOVING
    token_a2 = await node_a.leases.acquire("t1", 5)
    assert token_a2 == token_b + 1
    with pytest.raises(LeaseLost):
        await node_a.logs.append(Append("t1", token_a2, 2, b"a's stale position"))
    await node_a.logs.append(Append("t1", token_a2, 3, b"a resumes from the log"))
    assert await node_a.logs.read("t1") == [b"create", b"b acts", b"a resumes from the log"]


async def test_a_restarted_node_takes_its_earlier_incarnations_tables_at_once(
    open_redis_stores: OpenRedisStores,
) -> None:
    before = await open_redis_stores("node-a")
    other = await open_redis_stores("node-b")
    token = await before.leases.acquire("t1", 60)
    other_token = await other.leases.acquire("t2", 60)
    assert token is not None and other_token is not None
    await before.logs.append(Append("t1", token, 1, b"create"))
    await other.logs.append(Append("t2", other_token, 1, b"create"))
    after = await open_redis_stores("node-a")  # same node id, a new process
    assert after.incarnation != before.incarnation
    assert await after.leases.adoptable() == ["t1"], "its own earlier tables, not node-b's"
    assert await other.leases.adoptable() == []
    taken = await after.leases.acquire("t1", 60)
    assert taken == token + 1
    assert await after.leases.acquire("t2", 60) is None
    place = await other.leases.locate("t1")
    assert (place.node, place.incarnation) == ("node-a", after.incarnation)
    with pytest.raises(LeaseLost):
        await before.logs.append(Append("t1", token, 2, b"the old process"))
    assert await before.leases.acquire("t1", 60) is None, "no stealing back from a newer one"


async def test_adoptable_tables_forgets_tables_that_are_gone(
    open_redis_stores: OpenRedisStores, redis_url_clean: str
) -> None:
    """A table found nowhere (no lease, state, log or record) is forgotten by the first scan
    that finds it so ``unknown_grace`` s after another did: not by the first (its keys may be
    missing for a moment only: ``redis_tables.UNKNOWN_GRACE``)."""
    stores = await open_redis_stores()
    stores.leases.unknown_grace = 0.3  # type: ignore[attr-defined]  # (a RedisLeases's)
    token = await stores.leases.acquire("t1", SHORT_LEASE)  # its node died before writing anything
    assert token is not None
    await until_lapsed(stores, "t1")
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        assert await raw.smembers(hosted_key(bucket_of("t1"))) == {b"t1"}
        assert await stores.leases.adoptable() == []
        assert await raw.smembers(hosted_key(bucket_of("t1"))) == {b"t1"}, "kept for the grace"
        await asyncio.sleep(0.3)
        assert await stores.leases.adoptable() == []
        assert await raw.smembers(hosted_key(bucket_of("t1"))) == set()


async def test_a_table_whose_keys_are_missing_for_a_moment_stays_adoptable(
    open_redis_stores: OpenRedisStores, redis_url_clean: str
) -> None:
    """A scan that finds a live table's keys missing (a Redis Cluster master restarted without
    persistence answers for its old slots, empty, until its peers tell it its replica took them
    over) keeps its id in the hosted index: once its keys are found again it is adopted. The
    scan forgot the id at once, and the table was never found again (its players were answered
    ``moving`` until they gave up: the cluster failover test, now and then)."""
    stores = await open_redis_stores()
    token = await stores.leases.acquire("t1", SHORT_LEASE)
    assert token is not None
    await stores.logs.append(Append("t1", token, 1, b"create"))
    await until_lapsed(stores, "t1")
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        keys = [key async for key in raw.scan_iter(match="bd:t:{t1}:*")]
        for key in keys:  # (the empty master's view: none of the table's keys)
            await raw.rename(key, key.replace(b"bd:t:", b"aside:"))
        assert await stores.leases.adoptable() == []
        for key in keys:
            await raw.rename(key.replace(b"bd:t:", b"aside:"), key)
        assert await raw.smembers(hosted_key(bucket_of("t1"))) == {b"t1"}
    assert await stores.leases.adoptable() == ["t1"]


async def test_an_orphan_scan_does_not_look_up_the_tables_this_node_holds(
    open_redis_stores: OpenRedisStores, redis_url_clean: str
) -> None:
    """A node's full scan came every 10 s with one script call per hosted table: 300 tables
    of its own held the loop for a quarter of a second of parsing, the worst latencies of a
    node at half load. The tables whose lease it holds (and renews) are no orphans: not
    looked up. The others still are (here one whose lease lapsed, and one gone)."""
    stores = await open_redis_stores()
    stores.leases.unknown_grace = 0  # type: ignore[attr-defined]  # ("gone" forgotten at once)
    held = {}
    for table in [f"h{i}" for i in range(40)] + ["lapsed", "gone"]:
        token = await stores.leases.acquire(table, 60 if table.startswith("h") else SHORT_LEASE)
        assert token is not None
        held[table] = token
        if table != "gone":
            await stores.logs.append(Append(table, token, 1, b"create"))
    for table in ("lapsed", "gone"):
        await until_lapsed(stores, table)
        del held[table]

    async def scripts_run(raw: aioredis.Redis) -> int:
        stats = await raw.info("commandstats")
        return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("eval", "evalsha"))

    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        before = await scripts_run(raw)
        assert await stores.leases.adoptable(held=held.keys()) == ["lapsed"]
        # the lapsed table's and the gone one's lookups, and the gone one's epoch forgotten
        assert await scripts_run(raw) - before == 3, "a lookup for each table held"
        assert b"gone" not in await raw.smembers(hosted_key(bucket_of("gone")))


@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_a_table_gone_before_its_first_entry_leaves_no_key_behind(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """A node that leased a new table id and failed before logging its create command (the
    store went away, the node died) leaves a lease that lapses and an epoch counter: the orphan
    scan that finds the id gone removes the counter too, or it would stay for good."""
    url = request.getfixturevalue(f"{'redis_cluster' if kind == 'cluster' else 'redis'}_url_clean")
    stores = open_stores(url, "node-a")
    await stores.start()
    stores.leases.unknown_grace = 0  # type: ignore[attr-defined]  # (forgotten at once)
    try:
        assert await stores.leases.acquire("t1", SHORT_LEASE) is not None
        await until_lapsed(stores, "t1")
        assert await stores.leases.adoptable() == []
        raw = stores.link.redis  # type: ignore[attr-defined]  # the store's own client: a cluster's reaches every master
        left = [key async for key in raw.scan_iter(match="bd:t:{t1}:*")]
        assert left == [], f"keys left with no owner: {left}"
    finally:
        await stores.close()


async def test_a_lease_is_taken_with_its_hosted_entry_or_not_at_all(
    redis_url_clean: str,
) -> None:
    """The lease, the epoch and the hosted index's entry are written together: a store that
    cannot write the index (here a user refused ``SADD``) takes no lease either, so no table is
    left leased and epoch-counted where no orphan scan would ever find it."""
    async with redis_user(redis_url_clean, "no-sadd") as user:
        await user.admin.execute_command("ACL", "SETUSER", "no-sadd", "-sadd")
        stores = open_stores(user.url, "node-a")
        await stores.start()
        try:
            with pytest.raises(Exception):  # noqa: B017 (refused: whichever way redis-py says it)
                await stores.leases.acquire("t1", 60)
        finally:
            await stores.close()
        async with aioredis.Redis.from_url(redis_url_clean) as raw:
            assert [key async for key in raw.scan_iter(match="bd:t:{t1}:*")] == []


async def test_a_share_of_the_hosted_tables_is_read_from_its_own_buckets(
    open_redis_stores: OpenRedisStores, redis_url_clean: str
) -> None:
    """Each live table's id is in the set of its bucket; a node's scan reads the buckets of its
    share only, and the shares of n nodes are disjoint and cover every table. A table in the one
    set an older version kept (``bd:hosted``, a rolling upgrade) is found in its share as well,
    and forgotten there once it is gone."""
    stores = await open_redis_stores()
    stores.leases.unknown_grace = 0  # type: ignore[attr-defined]  # ("gone" forgotten at once)
    tables = [f"s{i}" for i in range(40)]
    for table in [*tables, "old", "gone"]:
        token = await stores.leases.acquire(table, SHORT_LEASE)
        assert token is not None
        if table != "gone":  # (its node died before writing anything)
            await stores.logs.append(Append(table, token, 1, b"create"))
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        for table in tables:
            assert table.encode() in await raw.smembers(hosted_key(bucket_of(table)))
        for table in ("old", "gone"):  # as a node of the older version left them
            await raw.smove(hosted_key(bucket_of(table)), "bd:hosted", table)
        for table in [*tables, "old", "gone"]:
            await until_lapsed(stores, table)
        shares = [(i, 3) for i in range(3)]
        found = [await stores.leases.adoptable(share) for share in shares]
        assert sorted(t for part in found for t in part) == sorted([*tables, "old"])
        for share, part in zip(shares, found, strict=True):
            assert part and all(in_share(table, share) for table in part)
        assert await raw.smembers("bd:hosted") == {b"old"}, "the gone table forgotten"
