"""The store contract, run against the in-memory store and a real Redis server.

The Redis-only tests at the end cover what memory cannot show: several nodes on one Redis, the
key layout, and Redis going away and coming back under a live store.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
import redis.asyncio as aioredis

from blackdrez.server.stores import open_store
from blackdrez.server.stores.base import (
    LeaseLost,
    Store,
    StoreUnavailable,
    Whereabouts,
    bucket_of,
    in_share,
    node_channel,
    table_channel,
)
from blackdrez.server.stores.memory import MemoryStore
from blackdrez.server.stores.redis import SCAN_CHUNK, RedisStore, hosted_key
from blackdrez.server.testing.redis_server import RedisServer

from .leases import SHORT_LEASE, until_lapsed
from .server.helpers import redis_user

OpenRedisStore = Callable[..., Awaitable[RedisStore]]


class Inbox:
    """A bus handler that keeps what it receives."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []

    def __call__(self, data: bytes) -> None:
        self.messages.append(data)


async def eventually(condition: Callable[[], bool], timeout: float = 3.0) -> None:
    """Wait until ``condition()`` holds, failing the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


async def subscribe_barrier(store: Store, channel: str) -> Inbox:
    """Subscribe a barrier inbox to ``channel``; see :func:`flush_bus`."""
    barrier = Inbox()
    await store.subscribe(channel, barrier)
    return barrier


async def flush_bus(store: Store, barrier: Inbox, channel: str) -> None:
    """Publish on the barrier channel and wait for it: earlier messages have arrived by then."""
    marker = f"barrier-{len(barrier.messages)}".encode()
    await store.publish(channel, marker)
    await eventually(lambda: marker in barrier.messages)


@pytest.fixture
async def open_redis_store(redis_url_clean: str) -> AsyncIterator[OpenRedisStore]:
    """Open started RedisStores on the clean session server (or ``url``); close them after."""
    stores: list[RedisStore] = []

    async def open_store(node_id: str = "node-a", url: str = redis_url_clean) -> RedisStore:
        store = RedisStore(url, node_id)
        await store.start()
        stores.append(store)
        return store

    yield open_store
    for store in stores:
        await store.close()


@pytest.fixture(params=["memory", "redis", "cluster"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """A started store of each kind, empty, for node ``node-a``: in memory, on one Redis, on
    a Redis Cluster of three masters and three replicas."""
    if request.param == "memory":
        started: Store = MemoryStore("node-a")
    elif request.param == "redis":
        started = RedisStore(request.getfixturevalue("redis_url_clean"), "node-a")
    else:
        started = open_store(request.getfixturevalue("redis_cluster_url_clean"), "node-a")
    await started.start()
    yield started
    await started.close()


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    """A Redis server of this test's own, which the test may stop and restart."""
    with RedisServer() as server:
        yield server


# ---------------------------------------------------------------------- table records
async def test_table_record_put_get_replace_remove(store: Store) -> None:
    assert await store.get_table("t1") is None
    await store.put_table("t1", "node-a", b"record-1", listed=True)
    assert await store.get_table("t1") == ("node-a", b"record-1")
    await store.put_table("t1", "node-b", b"record-2", listed=True)
    assert await store.get_table("t1") == ("node-b", b"record-2")
    await store.remove_table("t1")
    assert await store.get_table("t1") is None
    assert await store.list_tables() == []
    await store.remove_table("t1")  # forgetting twice is harmless


async def test_list_tables_shows_listed_tables_only(store: Store) -> None:
    assert await store.list_tables() == []
    await store.put_table("t1", "node-a", b"one", listed=True)
    await store.put_table("t2", "node-a", b"two", listed=False)
    await store.put_table("t3", "node-b", b"three", listed=True)
    assert sorted(await store.list_tables()) == [b"one", b"three"]
    assert await store.get_table("t2") == ("node-a", b"two")

    await store.put_table("t1", "node-a", b"one, private now", listed=False)
    await store.put_table("t2", "node-a", b"two, public now", listed=True)
    assert sorted(await store.list_tables()) == [b"three", b"two, public now"]

    await store.remove_table("t3")
    assert await store.list_tables() == [b"two, public now"]


async def test_records_are_opaque_bytes(store: Store) -> None:
    record = bytes(range(256))
    await store.put_table("t-bin", "node-a", record, listed=True)
    assert await store.get_table("t-bin") == ("node-a", record)
    assert await store.list_tables() == [record]


# ---------------------------------------------------------------------- players
async def test_player_tables(store: Store) -> None:
    assert await store.player_tables("alice") == []
    await store.add_player_table("alice", "t2")
    await store.add_player_table("alice", "t1")
    await store.add_player_table("alice", "t1")
    await store.add_player_table("bob", "t3")
    assert await store.player_tables("alice") == ["t1", "t2"]
    assert await store.player_tables("bob") == ["t3"]

    await store.remove_player_table("alice", "t1")
    await store.remove_player_table("alice", "t-never")
    await store.remove_player_table("carol", "t1")
    assert await store.player_tables("alice") == ["t2"]
    await store.remove_player_table("alice", "t2")
    assert await store.player_tables("alice") == []


# ---------------------------------------------------------------------- presence
async def test_heartbeat_marks_node_alive_until_ttl(store: Store) -> None:
    assert store.node_id not in await store.live_nodes()
    await store.heartbeat(0.5)
    assert await store.live_nodes() == {"node-a"}
    await asyncio.sleep(0.3)
    await store.heartbeat(0.5)  # renewed: alive 0.5 s from now, not from the first beat
    await asyncio.sleep(0.3)
    assert await store.live_nodes() == {"node-a"}
    await asyncio.sleep(0.4)
    assert await store.live_nodes() == set()


async def test_a_heartbeat_names_the_process_that_sent_it(store: Store) -> None:
    assert await store.live_incarnations() == {}
    await store.heartbeat(0.5)
    assert await store.live_incarnations() == {"node-a": store.incarnation}
    await asyncio.sleep(0.7)
    assert await store.live_incarnations() == {}


async def test_a_node_restarted_under_its_id_heartbeats_as_its_new_process(
    open_redis_store: OpenRedisStore, redis_url_clean: str
) -> None:
    """The node id stays live throughout; its incarnation changes. A node of an older version
    (a heartbeat without incarnation) is live with none, and so is a node whose last heartbeat
    with one lapsed while it beats without (rolled back): the lapsed one is dropped."""
    before = await open_redis_store("node-a")
    await before.heartbeat(10)
    after = await open_redis_store("node-a")
    await after.heartbeat(10)
    assert await before.live_incarnations() == {"node-a": after.incarnation}
    other = await open_redis_store("node-b")
    await other.heartbeat(0.3)
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        seconds, micros = await raw.time()
        later = seconds * 1000 + micros // 1000 + 10_000
        await raw.zadd("bd:nodes", {"node-old": later})  # as an older version beats
        assert await after.live_incarnations() == {
            "node-a": after.incarnation,
            "node-b": other.incarnation,
            "node-old": None,
        }
        await raw.zadd("bd:nodes", {"node-b": later})  # node-b goes on as an older version
        await asyncio.sleep(0.4)
        assert (await after.live_incarnations())["node-b"] is None
        await after.heartbeat(10)
        assert await raw.hkeys("{bd:nodes}:incarnations") == [b"node-a"]


# ---------------------------------------------------------------------- leaderboards
async def test_leaderboard_keeps_each_players_best(store: Store) -> None:
    assert await store.top_scores("piles", 10) == []
    assert await store.submit_score("piles", "p1", b"Ann", 50)
    assert await store.submit_score("piles", "p2", b"Bob", 70)
    assert not await store.submit_score("piles", "p1", b"Ann 2", 40)  # worse: ignored
    assert await store.submit_score("piles", "p1", b"Ann", 50)  # the same again: it is there
    assert await store.submit_score("piles", "p3", b"Cy", 60)
    assert await store.top_scores("piles", 10) == [
        ("p2", b"Bob", 70),
        ("p3", b"Cy", 60),
        ("p1", b"Ann", 50),
    ]
    assert await store.submit_score("piles", "p1", b"Annie", 90)  # better: replaces it
    assert await store.top_scores("piles", 10) == [
        ("p1", b"Annie", 90),
        ("p2", b"Bob", 70),
        ("p3", b"Cy", 60),
    ]


async def test_leaderboard_ties_rank_who_scored_first(store: Store) -> None:
    await store.submit_score("piles", "late", b"Late", 10)
    await store.submit_score("piles", "early", b"Early", 30)
    await store.submit_score("piles", "second", b"Second", 30)
    await store.submit_score("piles", "early", b"Renamed", 30)  # equal, not better: no change
    await store.submit_score("piles", "late", b"Late", 30)  # reaches the tie last
    assert await store.top_scores("piles", 10) == [
        ("early", b"Early", 30),
        ("second", b"Second", 30),
        ("late", b"Late", 30),
    ]


async def test_leaderboard_limit_and_games_apart(store: Store) -> None:
    for rank in range(5):
        await store.submit_score("piles", f"p{rank}", f"P{rank}".encode(), 100 - rank)
    await store.submit_score("blue-jacket", "p9", b"Nine", 1)
    await store.submit_score("piles", "neg", b"Negative", -5)
    assert [player for player, _, _ in await store.top_scores("piles", 3)] == ["p0", "p1", "p2"]
    assert len(await store.top_scores("piles", 100)) == 6
    assert (await store.top_scores("piles", 100))[-1] == ("neg", b"Negative", -5)
    assert await store.top_scores("piles", 0) == []
    assert await store.top_scores("blue-jacket", 10) == [("p9", b"Nine", 1)]
    assert await store.top_scores("no-such-game", 10) == []


async def test_leaderboard_names_and_players_with_odd_characters(store: Store) -> None:
    await store.submit_score("g:{x}", "id:with:colons", "Zoë {ü}".encode(), 2**40)
    assert await store.top_scores("g:{x}", 1) == [("id:with:colons", "Zoë {ü}".encode(), 2**40)]


async def test_records_kept_for_good(store: Store) -> None:
    assert await store.kept_record("s1.1") is None
    await store.keep_record("s1.1", b"{}")
    assert await store.kept_record("s1.1") == b"{}"


@pytest.mark.parametrize("store", ["redis", "cluster"], indirect=True)
async def test_a_record_kept_for_a_while_then_for_good(store: Store) -> None:
    await store.keep_record("s2.1", b"{}", ttl=0.2)
    await store.keep_record("s3.1", b"{}", ttl=60.0)
    await store.keep_record("s3.1", b"{}")  # on a board now: for good
    await asyncio.sleep(0.4)
    assert await store.kept_record("s2.1") is None
    assert await store.kept_record("s3.1") == b"{}"


async def test_a_daily_seed_is_drawn_once_and_a_daily_claimed_once(store: Store) -> None:
    """A player's first claim of a day's deal is ranked, and names the table of that ranked
    session: every later claim (any node's) answers that table, whose game it waits for."""
    first = await store.daily_seed("blue_jacket", "2026-11-30", "one")
    assert first == "one"
    assert await store.daily_seed("blue_jacket", "2026-11-30", "two") == "one"
    assert await store.daily_seed("blue_jacket", "2026-12-01", "three") == "three"
    assert await store.daily_seed("blackjack_piles", "2026-11-30", "four") == "four"
    assert await store.daily_seed("blue_jacket", "2026-11-30", None) == "one"  # read only
    assert await store.daily_seed("blue_jacket", "2026-11-29", None) is None
    assert await store.daily_seed("blue_jacket", "2026-11-29", "five") == "five"  # none made
    assert await store.daily_table("blue_jacket", "2026-11-30", "p1") is None
    keep = 60.0
    assert await store.claim_daily("blue_jacket", "2026-11-30", "p1", "s1", keep) == "s1"
    assert await store.claim_daily("blue_jacket", "2026-11-30", "p1", "s2", keep) == "s1"
    assert await store.daily_table("blue_jacket", "2026-11-30", "p1") == "s1"
    assert await store.claim_daily("blue_jacket", "2026-11-30", "p2", "s3", keep) == "s3"
    assert await store.claim_daily("blue_jacket", "2026-12-01", "p1", "s4", keep) == "s4"
    assert await store.daily_table("blackjack_piles", "2026-11-30", "p1") is None


async def test_a_daily_claim_lasts_as_long_as_it_is_kept_for(store: Store) -> None:
    """Who started a day's deal matters only while that day's sessions can start: a claim is
    kept for what the caller says (until a day after the deal's day ends), then forgotten, so
    the claims of past days do not pile up for ever (the seed alone is kept for good)."""
    assert await store.claim_daily("blue_jacket", "2026-11-30", "p1", "s1", keep=0.3) == "s1"
    assert await store.claim_daily("blue_jacket", "2026-11-30", "p2", "s2", keep=0.3) == "s2"
    assert await store.daily_table("blue_jacket", "2026-11-30", "p1") == "s1"
    assert await store.claim_daily("blue_jacket", "2026-12-01", "p1", "s3", keep=30) == "s3"
    await asyncio.sleep(0.5)
    assert await store.daily_table("blue_jacket", "2026-11-30", "p1") is None
    assert await store.daily_table("blue_jacket", "2026-11-30", "p2") is None
    assert await store.daily_table("blue_jacket", "2026-12-01", "p1") == "s3"


async def test_a_players_latest_connection_is_the_greatest_order_given_them(store: Store) -> None:
    """Every hello takes the next order; each player's latest is noted (for a node whose bus
    was down when that player connected elsewhere: ``Node._close_replaced_meanwhile``)."""
    first = await store.next_attach("ann")
    second = await store.next_attach("bob")
    third = await store.next_attach("ann")
    assert first < second < third
    assert await store.latest_attaches(["ann", "bob", "cy"]) == {"ann": third, "bob": second}
    assert await store.latest_attaches([]) == {}


# ---------------------------------------------------------------------- secret
async def test_shared_secret_first_proposal_wins(store: Store) -> None:
    assert await store.shared_secret(b"first") == b"first"
    assert await store.shared_secret(b"second") == b"first"


# ---------------------------------------------------------------------- bus
async def test_publish_reaches_every_handler_of_the_channel(store: Store) -> None:
    one, two, elsewhere = Inbox(), Inbox(), Inbox()
    await store.subscribe("bd:lobby", one)
    await store.subscribe("bd:lobby", two)
    await store.subscribe(table_channel("t1"), elsewhere)
    await store.publish("bd:lobby", b"hello")
    await store.publish("bd:lobby", b"again")
    await eventually(lambda: len(one.messages) == 2 and len(two.messages) == 2)
    assert one.messages == two.messages == [b"hello", b"again"]
    assert elsewhere.messages == []


async def test_publish_without_subscribers_is_fine(store: Store) -> None:
    await store.publish(node_channel("nobody"), b"lost")


async def test_unsubscribe_stops_one_handler_then_the_channel(store: Store) -> None:
    barrier = await subscribe_barrier(store, "barrier")
    kept, dropped = Inbox(), Inbox()
    await store.subscribe("news", kept)
    await store.subscribe("news", dropped)
    await store.unsubscribe("news", dropped)
    await store.unsubscribe("news", Inbox())  # never subscribed: ignored
    await store.publish("news", b"one")
    await flush_bus(store, barrier, "barrier")
    assert kept.messages == [b"one"]
    assert dropped.messages == []

    await store.unsubscribe("news", kept)
    await store.publish("news", b"two")
    await flush_bus(store, barrier, "barrier")
    assert kept.messages == [b"one"]

    await store.subscribe("news", dropped)  # a channel can be subscribed again
    await store.publish("news", b"three")
    await eventually(lambda: dropped.messages == [b"three"])


async def test_concurrent_subscribers_of_a_new_channel(store: Store) -> None:
    inboxes = [Inbox() for _ in range(3)]
    await asyncio.gather(*(store.subscribe("fresh", inbox) for inbox in inboxes))
    await store.publish("fresh", b"all of you")
    await eventually(lambda: all(inbox.messages == [b"all of you"] for inbox in inboxes))


async def test_a_failing_handler_does_not_stop_the_bus(store: Store) -> None:
    def broken(data: bytes) -> None:
        raise RuntimeError("handler bug")

    inbox = Inbox()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda loop, context: None)  # the bug is expected here
    await store.subscribe("news", broken)
    await store.subscribe("news", inbox)
    await store.publish("news", b"one")
    await store.publish("news", b"two")
    await eventually(lambda: inbox.messages == [b"one", b"two"])


# ---------------------------------------------------------------------- hosting and fencing
async def test_a_lease_yields_a_token_that_only_grows(store: Store) -> None:
    first = await store.acquire_lease("t1", 5)
    assert first is not None
    assert await store.acquire_lease("t1", 5) is None, "held: not taken twice"
    await store.release_lease("t1", first + 1)  # not the holder's token: nothing happens
    assert await store.acquire_lease("t1", 5) is None
    await store.release_lease("t1", first)
    second = await store.acquire_lease("t1", 5)
    assert second is not None and second > first
    assert (await store.locate("t1")).where is Whereabouts.HOSTED


async def test_renewal_extends_only_the_lease_held_with_that_token(store: Store) -> None:
    token = await store.acquire_lease("t1", 1.0)
    other = await store.acquire_lease("t2", 1.0)
    assert token is not None and other is not None
    assert await store.renew_leases({"t1": token, "t2": other + 1}, 1.0) == {"t2"}
    await asyncio.sleep(0.6)
    assert await store.renew_leases({"t1": token}, 1.0) == set()
    await asyncio.sleep(0.6)
    assert (await store.locate("t1")).where is Whereabouts.HOSTED, "renewed: still held"
    await asyncio.sleep(1.0)
    # Lapsed: the renewal reports it lost and does not take it again.
    assert await store.renew_leases({"t1": token}, 5) == {"t1"}
    assert (await store.locate("t1")).node is None
    again = await store.acquire_lease("t1", 5)
    assert again is not None and again > token


async def test_renewing_many_leases_reports_exactly_the_ones_not_held(store: Store) -> None:
    tables = [f"many{i}" for i in range(60)]
    tokens = {}
    for table in tables:
        token = await store.acquire_lease(table, 5)
        assert token is not None
        tokens[table] = token
    stale = set(tables[::7])  # a token this node does not hold
    never = {"never1", "never2"}  # never leased at all
    asked = {t: tokens[t] + 1 if t in stale else tokens[t] for t in tables}
    asked.update(dict.fromkeys(never, 1))
    assert await store.renew_leases(asked, 5) == stale | never
    await store.release_lease(tables[1], tokens[tables[1]])
    assert await store.renew_leases(tokens, 5) == {tables[1]}


async def test_an_append_needs_the_token_and_the_expected_position(store: Store) -> None:
    token = await store.acquire_lease("t1", 5)
    assert token is not None
    await store.append_log("t1", token, 1, b"create")
    await store.append_log("t1", token, 2, b"join")
    for stale_token, position in ((token, 2), (token, 4), (token, 1), (token + 1, 3)):
        with pytest.raises(LeaseLost):
            await store.append_log("t1", stale_token, position, b"stale")
    with pytest.raises(LeaseLost):
        await store.append_log("t-unleased", token, 1, b"create")
    assert await store.read_log("t1") == [b"create", b"join"], "nothing was written"
    await store.append_log("t1", token, 3, b"act")
    assert await store.read_log("t1") == [b"create", b"join", b"act"]
    with pytest.raises(LeaseLost):
        await store.put_table("t1", store.node_id, b"record", listed=True, token=token + 1)
    assert await store.get_table("t1") is None


async def test_the_shares_of_an_orphan_scan_are_disjoint_and_cover_every_table(
    store: Store,
) -> None:
    """Nodes scan for orphans in shares: for any number of shares, the tables found by each
    share are found by no other, and together they are every table the whole scan finds."""
    tables = [f"t{i}" for i in range(30)]
    for table in tables:
        token = await store.acquire_lease(table, SHORT_LEASE)
        assert token is not None
        await store.append_log(table, token, 1, b"create")
    await until_lapsed(store, tables[-1])
    assert await store.adoptable_tables() == sorted(tables)
    for count in (1, 2, 3, 7):
        found = [await store.adoptable_tables((index, count)) for index in range(count)]
        assert sorted(t for share in found for t in share) == sorted(tables), count
        assert all(share for share in found), f"{count} shares of 30 tables, one empty"


async def test_an_orphan_scan_lets_the_event_loop_run_between_its_round_trips(
    open_redis_store: OpenRedisStore,
) -> None:
    """An orphan scan of many tables locates them at most ``SCAN_CHUNK`` per round trip, and the
    event loop runs other work between: one pipeline of every table held the loop while it
    packed and parsed them all, and every table of the node waited behind the scan."""
    store = await open_redis_store()
    tables = [f"t{i:03d}" for i in range(5 * SCAN_CHUNK)]
    for table in tables:
        token = await store.acquire_lease(table, 30)
        assert token is not None
        await store.append_log(table, token, 1, b"create")
    turns = 0

    async def tick() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    seen: list[int] = []  # the loop's turn count at each locate queued
    queue_script = store._queue_script

    def counted(pipe, script, keys, args):  # type: ignore[no-untyped-def]
        if script is store._locate:
            seen.append(turns)
        return queue_script(pipe, script, keys, args)

    store._queue_script = counted  # type: ignore[method-assign]
    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    try:
        assert await store.adoptable_tables() == []  # all held, by this very node
    finally:
        ticker.cancel()
    assert len(seen) == len(tables)
    stretches = [seen.count(turn) for turn in sorted(set(seen))]
    assert max(stretches) <= SCAN_CHUNK, stretches
    assert len(stretches) >= len(tables) // SCAN_CHUNK, stretches


async def test_a_lapsed_lease_fences_its_old_holder_out(store: Store) -> None:
    token = await store.acquire_lease("t1", SHORT_LEASE)
    assert token is not None
    await store.append_log("t1", token, 1, b"create")
    await until_lapsed(store, "t1")
    with pytest.raises(LeaseLost):
        await store.append_log("t1", token, 2, b"late")
    assert (await store.locate("t1")).where is Whereabouts.MOVING
    assert await store.adoptable_tables() == ["t1"]
    adopted = await store.acquire_lease("t1", 5)
    assert adopted is not None and adopted > token
    assert await store.adoptable_tables() == []
    with pytest.raises(LeaseLost):
        await store.append_log("t1", token, 2, b"late")
    await store.append_log("t1", adopted, 2, b"resume")
    assert await store.read_log("t1") == [b"create", b"resume"]


async def test_a_retired_table_leaves_its_record_and_is_never_leased_again(store: Store) -> None:
    token = await store.acquire_lease("t1", 5)
    assert token is not None
    await store.append_log("t1", token, 1, b"create")
    await store.put_table("t1", store.node_id, b"info", listed=True, token=token)
    await store.add_player_table("alice", "t1")
    await store.add_player_table("alice", "t2")
    await store.add_player_table("bob", "t1")
    with pytest.raises(LeaseLost):
        await store.retire_table("t1", token + 1, b"game", 60, ["alice", "bob"])
    await store.retire_table("t1", token, b"game", 60, ["alice", "bob"])
    assert (await store.locate("t1")).where is Whereabouts.CLOSED
    assert await store.acquire_lease("t1", 5) is None
    assert await store.game_record("t1") == b"game"
    assert await store.read_log("t1") == []
    assert await store.get_table("t1") is None
    assert await store.list_tables() == []
    assert await store.adoptable_tables() == []
    assert await store.player_tables("alice") == ["t2"]
    assert await store.player_tables("bob") == []
    with pytest.raises(LeaseLost):
        await store.append_log("t1", token, 2, b"late")


async def test_a_game_record_is_kept_for_its_retention(store: Store) -> None:
    token = await store.acquire_lease("t1", 5)
    assert token is not None
    await store.append_log("t1", token, 1, b"create")
    await store.retire_table("t1", token, b"game", 1.0)
    assert await store.game_record("t1") == b"game"
    await asyncio.sleep(1.2)
    assert await store.game_record("t1") is None
    assert (await store.locate("t1")).where is Whereabouts.UNKNOWN


async def test_locate_tells_unknown_from_moving(store: Store) -> None:
    assert (await store.locate("nowhere")).where is Whereabouts.UNKNOWN
    token = await store.acquire_lease("t1", 5)
    assert token is not None
    await store.append_log("t1", token, 1, b"create")
    here = await store.locate("t1")
    assert (here.where, here.node, here.incarnation) == (
        Whereabouts.HOSTED,
        store.node_id,
        store.incarnation,
    )
    await store.release_lease("t1", token)
    assert (await store.locate("t1")).where is Whereabouts.MOVING


# ---------------------------------------------------------------------- Redis: several nodes
async def test_nodes_share_one_redis(open_redis_store: OpenRedisStore) -> None:
    node_a = await open_redis_store("node-a")
    node_b = await open_redis_store("node-b")

    assert await node_a.shared_secret(b"from-a") == b"from-a"
    assert await node_b.shared_secret(b"from-b") == b"from-a"

    await node_a.put_table("t1", "node-a", b"on a", listed=True)
    await node_b.put_table("t2", "node-b", b"on b", listed=True)
    assert await node_b.get_table("t1") == ("node-a", b"on a")
    assert sorted(await node_a.list_tables()) == [b"on a", b"on b"]

    await node_a.add_player_table("alice", "t1")
    await node_b.add_player_table("alice", "t2")
    assert await node_a.player_tables("alice") == ["t1", "t2"]

    await node_a.submit_score("piles", "p1", b"Ann", 5)
    await node_b.submit_score("piles", "p2", b"Bob", 5)
    assert await node_b.top_scores("piles", 5) == [("p1", b"Ann", 5), ("p2", b"Bob", 5)]
    assert await node_a.daily_seed("piles", "2026-11-30", "a") == "a"
    assert await node_b.daily_seed("piles", "2026-11-30", "b") == "a"

    await node_a.heartbeat(10)
    await node_b.heartbeat(0.3)
    assert await node_a.live_nodes() == {"node-a", "node-b"}
    await asyncio.sleep(0.45)
    assert await node_b.live_nodes() == {"node-a"}


async def test_nodes_see_each_others_messages(open_redis_store: OpenRedisStore) -> None:
    node_a = await open_redis_store("node-a")
    node_b = await open_redis_store("node-b")
    at_a, at_b, own = Inbox(), Inbox(), Inbox()
    await node_a.subscribe(node_channel("node-a"), at_a)
    await node_b.subscribe(node_channel("node-b"), at_b)
    await node_a.subscribe("bd:lobby", own)

    await node_b.publish(node_channel("node-a"), b"b to a")
    await node_a.publish(node_channel("node-b"), b"a to b")
    await node_a.publish("bd:lobby", b"a to all")
    await eventually(lambda: at_a.messages and at_b.messages and own.messages)
    assert at_a.messages == [b"b to a"]
    assert at_b.messages == [b"a to b"]
    assert own.messages == [b"a to all"]  # Redis delivers a node's own messages back to it


async def test_key_layout_is_cluster_friendly(
    open_redis_store: OpenRedisStore, redis_url_clean: str
) -> None:
    store = await open_redis_store()
    await store.shared_secret(b"s")
    await store.put_table("t1", "node-a", b"rec", listed=True)
    await store.add_player_table("alice", "t1")
    await store.heartbeat(5)
    await store.submit_score("piles", "p1", b"Ann", 3)
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


async def test_list_tables_drops_ids_whose_record_vanished(
    open_redis_store: OpenRedisStore, redis_url_clean: str
) -> None:
    store = await open_redis_store()
    await store.put_table("t1", "node-a", b"one", listed=True)
    await store.put_table("t2", "node-a", b"two", listed=True)
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        await raw.delete("bd:t:{t1}:record")
        assert await store.list_tables() == [b"two"]
        assert await raw.smembers("bd:lobby:tables") == {b"t2"}


async def test_close_stops_the_reader(open_redis_store: OpenRedisStore) -> None:
    store = await open_redis_store()
    await store.subscribe("news", Inbox())
    await store.close()
    names = {task.get_name() for task in asyncio.all_tasks()}
    assert "redis-store-pubsub" not in names


async def test_a_paused_holder_is_fenced_out_by_the_adopter(
    open_redis_store: OpenRedisStore,
) -> None:
    node_a = await open_redis_store("node-a")
    node_b = await open_redis_store("node-b")
    token_a = await node_a.acquire_lease("t1", SHORT_LEASE)
    assert token_a is not None
    assert await node_b.acquire_lease("t1", 5) is None, "held by A"
    assert await node_b.adoptable_tables() == []
    await node_a.append_log("t1", token_a, 1, b"create")
    await until_lapsed(node_b, "t1")  # A pauses past its lease
    assert await node_b.adoptable_tables() == ["t1"]
    token_b = await node_b.acquire_lease("t1", SHORT_LEASE)
    assert token_b == token_a + 1
    await node_b.append_log("t1", token_b, 2, b"b acts")
    assert await node_a.renew_leases({"t1": token_a}, 5) == {"t1"}
    with pytest.raises(LeaseLost):
        await node_a.append_log("t1", token_a, 2, b"a acts on its stale copy")
    with pytest.raises(LeaseLost):
        await node_a.put_table("t1", "node-a", b"stale", listed=True, token=token_a)
    await until_lapsed(node_b, "t1")  # B pauses past its lease too; A's renewal must not revive A's
    assert await node_a.renew_leases({"t1": token_a}, 5) == {"t1"}
    assert (await node_a.locate("t1")).where is Whereabouts.MOVING
    token_a2 = await node_a.acquire_lease("t1", 5)
    assert token_a2 == token_b + 1
    with pytest.raises(LeaseLost):
        await node_a.append_log("t1", token_a2, 2, b"a's stale position")
    await node_a.append_log("t1", token_a2, 3, b"a resumes from the log")
    assert await node_a.read_log("t1") == [b"create", b"b acts", b"a resumes from the log"]


async def test_a_restarted_node_takes_its_earlier_incarnations_tables_at_once(
    open_redis_store: OpenRedisStore,
) -> None:
    before = await open_redis_store("node-a")
    other = await open_redis_store("node-b")
    token = await before.acquire_lease("t1", 60)
    other_token = await other.acquire_lease("t2", 60)
    assert token is not None and other_token is not None
    await before.append_log("t1", token, 1, b"create")
    await other.append_log("t2", other_token, 1, b"create")
    after = await open_redis_store("node-a")  # same node id, a new process
    assert after.incarnation != before.incarnation
    assert await after.adoptable_tables() == ["t1"], "its own earlier tables, not node-b's"
    assert await other.adoptable_tables() == []
    taken = await after.acquire_lease("t1", 60)
    assert taken == token + 1
    assert await after.acquire_lease("t2", 60) is None
    place = await other.locate("t1")
    assert (place.node, place.incarnation) == ("node-a", after.incarnation)
    with pytest.raises(LeaseLost):
        await before.append_log("t1", token, 2, b"the old process")
    assert await before.acquire_lease("t1", 60) is None, "no stealing back from a newer one"


async def test_every_table_key_gets_a_lifetime_when_retired(
    open_redis_store: OpenRedisStore, redis_url_clean: str
) -> None:
    store = await open_redis_store()
    token = await store.acquire_lease("t1", 5)
    assert token is not None
    await store.append_log("t1", token, 1, b"create")
    await store.put_table("t1", "node-a", b"info", listed=True, token=token)
    await store.add_player_table("alice", "t1")
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        assert await raw.ttl("bd:p:{alice}:tables") > 0, "a player's set has a TTL"
        await store.retire_table("t1", token, b"game", 3600, ["alice"])
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


async def test_adoptable_tables_forgets_tables_that_are_gone(
    open_redis_store: OpenRedisStore, redis_url_clean: str
) -> None:
    store = await open_redis_store()
    token = await store.acquire_lease("t1", SHORT_LEASE)  # its node died before writing anything
    assert token is not None
    await until_lapsed(store, "t1")
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        assert await raw.smembers(hosted_key(bucket_of("t1"))) == {b"t1"}
        assert await store.adoptable_tables() == []
        assert await raw.smembers(hosted_key(bucket_of("t1"))) == set()


async def test_an_orphan_scan_does_not_look_up_the_tables_this_node_holds(
    open_redis_store: OpenRedisStore, redis_url_clean: str
) -> None:
    """A node's full scan came every 10 s with one script call per hosted table: 300 tables
    of its own held the loop for a quarter of a second of parsing, the worst latencies of a
    node at half load. The tables whose lease it holds (and renews) are no orphans: not
    looked up. The others still are (here one whose lease lapsed, and one gone)."""
    store = await open_redis_store()
    held = {}
    for table in [f"h{i}" for i in range(40)] + ["lapsed", "gone"]:
        token = await store.acquire_lease(table, 60 if table.startswith("h") else SHORT_LEASE)
        assert token is not None
        held[table] = token
        if table != "gone":
            await store.append_log(table, token, 1, b"create")
    for table in ("lapsed", "gone"):
        await until_lapsed(store, table)
        del held[table]

    async def scripts_run(raw: aioredis.Redis) -> int:
        stats = await raw.info("commandstats")
        return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("eval", "evalsha"))

    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        before = await scripts_run(raw)
        assert await store.adoptable_tables(held=held.keys()) == ["lapsed"]
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
    store = open_store(url, "node-a")
    await store.start()
    try:
        assert await store.acquire_lease("t1", SHORT_LEASE) is not None
        await until_lapsed(store, "t1")
        assert await store.adoptable_tables() == []
        raw = store._redis  # the store's own client: a cluster's reaches every master
        left = [key async for key in raw.scan_iter(match="bd:t:{t1}:*")]
        assert left == [], f"keys left with no owner: {left}"
    finally:
        await store.close()


async def test_a_lease_is_taken_with_its_hosted_entry_or_not_at_all(
    redis_url_clean: str,
) -> None:
    """The lease, the epoch and the hosted index's entry are written together: a store that
    cannot write the index (here a user refused ``SADD``) takes no lease either, so no table is
    left leased and epoch-counted where no orphan scan would ever find it."""
    async with redis_user(redis_url_clean, "no-sadd") as user:
        await user.admin.execute_command("ACL", "SETUSER", "no-sadd", "-sadd")
        store = RedisStore(user.url, "node-a")
        await store.start()
        try:
            with pytest.raises(Exception):  # noqa: B017 (refused: whichever way redis-py says it)
                await store.acquire_lease("t1", 60)
        finally:
            await store.close()
        async with aioredis.Redis.from_url(redis_url_clean) as raw:
            assert [key async for key in raw.scan_iter(match="bd:t:{t1}:*")] == []


async def test_a_share_of_the_hosted_tables_is_read_from_its_own_buckets(
    open_redis_store: OpenRedisStore, redis_url_clean: str
) -> None:
    """Each live table's id is in the set of its bucket; a node's scan reads the buckets of its
    share only, and the shares of n nodes are disjoint and cover every table. A table in the one
    set an older version kept (``bd:hosted``, a rolling upgrade) is found in its share as well,
    and forgotten there once it is gone."""
    store = await open_redis_store()
    tables = [f"s{i}" for i in range(40)]
    for table in [*tables, "old", "gone"]:
        token = await store.acquire_lease(table, SHORT_LEASE)
        assert token is not None
        if table != "gone":  # (its node died before writing anything)
            await store.append_log(table, token, 1, b"create")
    async with aioredis.Redis.from_url(redis_url_clean) as raw:
        for table in tables:
            assert table.encode() in await raw.smembers(hosted_key(bucket_of(table)))
        for table in ("old", "gone"):  # as a node of the older version left them
            await raw.smove(hosted_key(bucket_of(table)), "bd:hosted", table)
        for table in [*tables, "old", "gone"]:
            await until_lapsed(store, table)
        shares = [(i, 3) for i in range(3)]
        found = [await store.adoptable_tables(share) for share in shares]
        assert sorted(t for part in found for t in part) == sorted([*tables, "old"])
        for share, part in zip(shares, found, strict=True):
            assert part and all(in_share(table, share) for table in part)
        assert await raw.smembers("bd:hosted") == {b"old"}, "the gone table forgotten"


# ---------------------------------------------------------------------- Redis: outages
async def test_unavailable_promptly_then_recovers(
    open_redis_store: OpenRedisStore, private_redis: RedisServer
) -> None:
    store = await open_redis_store(url=private_redis.url)
    inbox, dropped = Inbox(), Inbox()
    await store.subscribe("news", inbox)
    await store.subscribe("news", dropped)
    await store.put_table("t1", "node-a", b"before", listed=True)

    private_redis.stop()
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.shared_secret(b"s"),
        lambda: store.put_table("t1", "node-a", b"during", listed=False),
        lambda: store.get_table("t1"),
        lambda: store.remove_table("t1"),
        store.list_tables,
        lambda: store.add_player_table("alice", "t1"),
        lambda: store.remove_player_table("alice", "t1"),
        lambda: store.player_tables("alice"),
        lambda: store.heartbeat(5),
        store.live_nodes,
        lambda: store.submit_score("piles", "p1", b"Ann", 1),
        lambda: store.top_scores("piles", 5),
        lambda: store.publish("news", b"lost"),
        lambda: store.subscribe("other", Inbox()),
    ]
    for call in calls:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await call()
        assert time.monotonic() - started < 3.0
    await store.unsubscribe("news", dropped)  # local bookkeeping: works while Redis is away

    private_redis.restart()  # no persistence: Redis comes back empty
    assert await store.get_table("t1") is None
    await store.put_table("t1", "node-a", b"after", listed=True)
    assert await store.list_tables() == [b"after"]

    # The reader reconnects with backoff and subscribes "news" again: publish until it arrives.
    deadline = time.monotonic() + 5.0
    while not inbox.messages and time.monotonic() < deadline:
        await store.publish("news", b"back")
        await asyncio.sleep(0.05)
    assert inbox.messages and set(inbox.messages) == {b"back"}
    assert dropped.messages == []


async def test_a_frozen_redis_times_out_and_replies_stay_in_step(
    open_redis_store: OpenRedisStore, private_redis: RedisServer
) -> None:
    store = await open_redis_store(url=private_redis.url)
    await store.put_table("t1", "node-a", b"one", listed=True)
    private_redis.pause()
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await store.get_table("t1")
        assert time.monotonic() - started < 3.0
    finally:
        private_redis.resume()
    # The late reply to the timed-out command must not be taken for the next command's.
    await store.put_table("t2", "node-a", b"two", listed=False)
    assert await store.get_table("t1") == ("node-a", b"one")
    assert await store.get_table("t2") == ("node-a", b"two")
    assert await store.list_tables() == [b"one"]


async def test_store_started_while_redis_is_down(
    open_redis_store: OpenRedisStore, private_redis: RedisServer
) -> None:
    private_redis.stop()
    store = await open_redis_store(url=private_redis.url)
    with pytest.raises(StoreUnavailable):
        await store.list_tables()
    with pytest.raises(StoreUnavailable):
        await store.subscribe("news", Inbox())

    await asyncio.sleep(2.0)  # the reader now waits over a second between attempts

    private_redis.start()
    inbox = Inbox()
    started = time.monotonic()
    await store.subscribe("news", inbox)  # wakes the reader out of its backoff
    assert time.monotonic() - started < 0.5
    await store.publish("news", b"hi")
    await eventually(lambda: inbox.messages == [b"hi"])


async def test_data_survives_a_restart_with_persistence(
    open_redis_store: OpenRedisStore, tmp_path
) -> None:
    with RedisServer(appendonly=True, data_dir=tmp_path) as server:
        store = await open_redis_store(url=server.url)
        await store.put_table("t1", "node-a", b"kept", listed=True)
        await store.submit_score("piles", "p1", b"Ann", 7)
        server.stop()
        with pytest.raises(StoreUnavailable):
            await store.put_table("t1", "node-a", b"not written", listed=False)
        server.restart()
        assert await store.list_tables() == [b"kept"]
        assert await store.get_table("t1") == ("node-a", b"kept")
        assert await store.top_scores("piles", 1) == [("p1", b"Ann", 7)]


async def test_health_warns_once_and_sees_redis_back_by_itself(
    open_redis_store: OpenRedisStore, private_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_redis_store(url=private_redis.url)
    await store.list_tables()
    assert store.health.up
    caplog.set_level("WARNING", logger="blackdrez.store")
    private_redis.stop()
    for _ in range(20):
        with pytest.raises(StoreUnavailable):
            await store.get_table("t1")
    assert not store.health.up
    await asyncio.sleep(1.0)  # the probe keeps trying meanwhile, quietly
    private_redis.start()
    await asyncio.wait_for(store.health.wait_up(), 3.0)  # no call of ours: the probe saw it
    assert store.health.outages == 1
    warnings = [  # the health's own (the pub/sub's reconnection logs under the same name)
        r.getMessage()
        for r in caplog.records
        if r.name == "blackdrez.store" and r.module == "retry"
    ]
    assert len(warnings) == 2, warnings
    assert "unavailable" in warnings[0]
    assert "back after" in warnings[1]
    assert int(re.search(r"\((\d+) failed", warnings[1])[1]) >= 20, "counted, probes included"
