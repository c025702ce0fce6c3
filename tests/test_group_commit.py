"""Group commit: the log appends of one event-loop turn go to Redis together, each with its own
outcome.

On every store (in memory, one Redis, a Redis Cluster): appends started in the same turn are
fenced each on its own (a stale token or position refuses that append only), a table's appends
keep their order, and an announcement is published only with its logged entry. On one Redis the
batch is one script call; a batch that fails fails its own appends and no others (an earlier or
later batch is untouched), and closing the store answers every append still queued. On a cluster
a dead master fails only the appends of its tables.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from types import FrameType

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

import blackdrez.server
from blackdrez.server.connection import Connection, Outbox
from blackdrez.server.identity import Token
from blackdrez.server.ratelimit import TokenBucket
from blackdrez.server.stores import open_stores, redis_tables
from blackdrez.server.stores.base import (
    Append,
    LeaseLost,
    LobbyRecord,
    Stores,
    StoreUnavailable,
    table_channel,
)
from blackdrez.server.stores.memory import MemoryLink
from blackdrez.server.stores.redis import redis_stores
from blackdrez.server.stores.redis_cluster import ClusterLink
from blackdrez.server.stores.redis_tables import (
    ARGS,
    UNHEARD,
    PendingAppend,
    _packed_args,
    _settle,
)
from blackdrez.server.stores.resp import bulks
from blackdrez.server.testing.node_harness import FakeWebSocket
from blackdrez.server.testing.redis_cluster import LocalCluster
from blackdrez.server.testing.redis_server import RedisServer
from tests.stores.helpers import Inbox, eventually


@pytest.fixture(params=["memory", "redis", "cluster"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Stores]:
    """Started stores of each kind, empty (as in ``tests/stores/conftest.py``)."""
    url = {
        "memory": None,
        "redis": "redis_url_clean",
        "cluster": "redis_cluster_url_clean",
    }[request.param]
    started = open_stores(request.getfixturevalue(url) if url else None, "node-a")
    await started.start()
    yield started
    await started.close()


async def leased(store: Stores, tables: list[str]) -> dict[str, int]:
    """Lease every table and log its first entry; the tokens."""
    tokens = {}
    for table in tables:
        token = await store.leases.acquire(table, 30)
        assert token is not None
        await store.logs.append(Append(table, token, 1, b"create"))
        tokens[table] = token
    return tokens


async def test_appends_of_one_turn_each_have_their_own_outcome(store: Stores) -> None:
    tokens = await leased(store, ["good1", "stale", "ahead", "good2"])
    outcomes = await asyncio.gather(
        store.logs.append(Append("good1", tokens["good1"], 2, b"g1")),
        store.logs.append(Append("stale", tokens["stale"] + 1, 2, b"stale token")),
        store.logs.append(Append("ahead", tokens["ahead"], 3, b"position ahead")),
        store.logs.append(Append("good2", tokens["good2"], 2, b"g2")),
        store.logs.append(Append("unleased", tokens["good1"], 1, b"no lease")),
        return_exceptions=True,
    )
    assert outcomes[0] is True and outcomes[3] is True
    assert [type(o) for o in outcomes[1:3] + outcomes[4:]] == [LeaseLost] * 3
    assert await store.logs.read("good1") == [b"create", b"g1"]
    assert await store.logs.read("good2") == [b"create", b"g2"]
    assert await store.logs.read("stale") == [b"create"]
    assert await store.logs.read("ahead") == [b"create"]
    assert await store.logs.read("unleased") == []


async def test_each_tables_appends_keep_their_order_among_others(store: Stores) -> None:
    tables = [f"order{i}" for i in range(12)]
    tokens = await leased(store, tables)

    async def play(table: str) -> None:
        for position in range(2, 32):
            await store.logs.append(
                Append(table, tokens[table], position, f"{table}:{position}".encode())
            )

    await asyncio.gather(*(play(table) for table in tables))
    for table in tables:
        expected = [b"create"] + [f"{table}:{p}".encode() for p in range(2, 32)]
        assert await store.logs.read(table) == expected


async def test_only_logged_entries_are_announced(store: Stores) -> None:
    tokens = await leased(store, ["heard", "fenced"])
    inbox = Inbox()
    for table in tokens:
        await store.bus.subscribe(table_channel(table), inbox)
    outcomes = await asyncio.gather(
        store.logs.append(
            Append("fenced", tokens["fenced"] + 1, 2, b"f", table_channel("fenced"), b"no")
        ),
        store.logs.append(
            Append("heard", tokens["heard"], 2, b"h", table_channel("heard"), b"yes")
        ),
        return_exceptions=True,
    )
    assert isinstance(outcomes[0], LeaseLost) and outcomes[1] is True
    await store.logs.append(
        Append("heard", tokens["heard"], 3, b"h2", table_channel("heard"), b"yes2")
    )
    await eventually(lambda: b"yes2" in inbox.messages)
    assert inbox.messages == [b"yes", b"yes2"], "the fenced append's update never went out"


async def test_an_append_says_whether_its_announcement_was_heard(store: Stores) -> None:
    """What lets a host stop announcing a table no other node follows ("Quiet tables" in
    ``blackdrez.server.node.hosting``): an announcement published with nobody subscribed is not
    heard, on
    one Redis and in memory; a cluster's ``PUBLISH`` counts the subscribers of one master only,
    so there it is always heard. An append that announces nothing is heard (nothing to tell)."""
    tokens = await leased(store, ["t"])
    channel = table_channel("t")
    alone = await store.logs.append(Append("t", tokens["t"], 2, b"a", channel, b"to nobody"))
    silent = await store.logs.append(Append("t", tokens["t"], 3, b"b"))
    inbox = Inbox()
    await store.bus.subscribe(channel, inbox)
    followed = await store.logs.append(Append("t", tokens["t"], 4, b"c", channel, b"to the inbox"))
    assert (alone, silent, followed) == (isinstance(store.link, ClusterLink), True, True)
    assert await store.logs.read("t") == [b"create", b"a", b"b", b"c"]
    await eventually(lambda: inbox.messages == [b"to the inbox"])


async def test_a_logged_entry_carries_its_tables_lobby_record_and_change(store: Stores) -> None:
    tokens = await leased(store, ["seated", "fenced"])
    for table in tokens:
        await store.lobby.put(table, "node-a", b"before", True, tokens[table])
    inbox = Inbox()
    await store.bus.subscribe("lobby-under-test", inbox)

    def lobby(record: bytes) -> LobbyRecord:
        return LobbyRecord("node-a", record, True, "lobby-under-test", b"changed:" + record)

    outcomes = await asyncio.gather(
        store.logs.append(Append("fenced", tokens["fenced"] + 1, 2, b"f", lobby=lobby(b"stale"))),
        store.logs.append(Append("seated", tokens["seated"], 2, b"s", lobby=lobby(b"after"))),
        return_exceptions=True,
    )
    assert isinstance(outcomes[0], LeaseLost) and outcomes[1] is True
    assert await store.lobby.get("seated") == ("node-a", b"after")
    assert await store.lobby.get("fenced") == ("node-a", b"before"), "written without its entry"
    assert sorted(await store.lobby.listed()) == [b"after", b"before"]
    # an entry without a record leaves the record as it is
    await store.logs.append(Append("seated", tokens["seated"], 3, b"s2"))
    assert await store.lobby.get("seated") == ("node-a", b"after")
    await store.logs.append(Append("seated", tokens["seated"], 4, b"s3", lobby=lobby(b"later")))
    await eventually(lambda: b"changed:later" in inbox.messages)
    assert inbox.messages == [b"changed:after", b"changed:later"]


def script_calls(url: str) -> int:
    """Scripts Redis ran so far (EVAL and EVALSHA calls)."""
    with redis.Redis.from_url(url) as client:
        stats = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("eval", "evalsha"))


async def test_the_logged_callback_runs_for_a_logged_entry_only_and_before_its_caller(
    store: Stores,
) -> None:
    """``logged``, which lets a host fan an update out as soon as the store knows the entry
    logged: once for a logged entry, never for a refused one; on Redis and a cluster from the
    batch's own settling, before the awaiting caller resumes. A callback it schedules (the
    turn's writes: ``blackdrez.server.connection.Outbox``) runs after the caller resumed, so
    that what the caller sends then (its player's reply) goes in the same write as the update.
    The in-memory store returns without a turn of the loop: its caller calls it."""
    tokens = await leased(store, ["good", "stale", "ahead"])
    loop = asyncio.get_running_loop()
    order: dict[str, list[str]] = {table: [] for table in tokens}

    async def append(table: str, token: int, position: int) -> None:
        def logged() -> None:
            order[table].append("logged")
            loop.call_soon(order[table].append, "a turn later")

        try:
            await store.logs.append(Append(table, token, position, b"x", logged=logged))
        finally:
            order[table].append("resumed")

    outcomes = await asyncio.gather(
        append("good", tokens["good"], 2),
        append("stale", tokens["stale"] + 1, 2),
        append("ahead", tokens["ahead"], 3),
        return_exceptions=True,
    )
    await asyncio.sleep(0)
    assert [type(outcome) for outcome in outcomes] == [type(None), LeaseLost, LeaseLost]
    assert order["stale"] == order["ahead"] == ["resumed"]
    early = ["logged", "resumed", "a turn later"]
    assert order["good"] == (["resumed"] if isinstance(store.link, MemoryLink) else early)


async def test_an_append_not_awaited_is_settled_as_an_awaited_one_would_be(
    store: Stores,
) -> None:
    """``append_soon`` (what a host's action uses, ``Hosting.act_soon``): the same fencing and
    the same outcome as ``append``, handed to a callback, once; the logged entries announced.
    In memory before it returns; on Redis and a cluster from the group commit's reply."""
    tokens = await leased(store, ["good", "stale", "ahead"])
    inbox = Inbox()
    await store.bus.subscribe(table_channel("good"), inbox)
    outcomes: dict[str, list[bool | BaseException]] = {table: [] for table in tokens}
    assert store.logs.appends_soon
    store.logs.append_soon(
        Append("good", tokens["good"], 2, b"g", table_channel("good"), b"update"),
        outcomes["good"].append,
    )
    store.logs.append_soon(Append("stale", tokens["stale"] + 1, 2, b"s"), outcomes["stale"].append)
    store.logs.append_soon(Append("ahead", tokens["ahead"], 3, b"a"), outcomes["ahead"].append)
    settled_at_once = all(outcomes.values())
    assert settled_at_once == isinstance(store.link, MemoryLink)
    await eventually(lambda: all(outcomes.values()))
    await asyncio.sleep(0.05)  # (nothing is settled twice)
    assert outcomes["good"] == [True]
    assert [type(o) for t in ("stale", "ahead") for o in outcomes[t]] == [LeaseLost] * 2
    assert await store.logs.read("good") == [b"create", b"g"]
    assert await store.logs.read("stale") == await store.logs.read("ahead") == [b"create"]
    await eventually(lambda: inbox.messages == [b"update"])


async def test_a_durable_store_takes_appends_only_awaited(redis_url_clean: str) -> None:
    """With ``WAIT`` for replicas an append waits for them (and may be taken back): a host
    awaits it (``Hosting.execute``), never hands it to ``append_soon``."""
    store = redis_stores(redis_url_clean, "node-a", wait_replicas=1)
    try:
        assert not store.logs.appends_soon
    finally:
        await store.close()


def viewer(outbox: Outbox, frames: list[str | bytes], player: str = "viewer") -> Connection:
    """A connection of ``player`` whose frames are written through ``outbox`` to ``frames``
    (its transport counts the writes)."""
    ws = FakeWebSocket(frames.append, lambda: None)
    return Connection(
        ws=ws,  # type: ignore[arg-type]  # the part of ServerConnection it uses
        binary=False,
        player=player,
        name=player.title(),
        bucket=TokenBucket(1e9, 1_000_000, 0.0),
        max_buffer=2**20,
        token=Token("t", player, player.title(), 0.0),
        outbox=outbox,
    )


async def test_a_turns_updates_of_several_tables_reach_a_viewer_of_each_in_one_write(
    store: Stores,
) -> None:
    """Appends of several tables settled together (one batch on Redis: their ``logged``
    callbacks run one after another in the batch's settling; in memory each in its caller's
    turn): a connection that sees every table gets each table's update and the replies its
    callers send once resumed in one write, in the order they were sent (each table's update
    before its reply)."""
    tables = ["a", "b", "c"]
    tokens = await leased(store, tables)
    frames: list[str | bytes] = []
    outbox = Outbox()
    client = viewer(outbox, frames)

    async def act(table: str) -> None:
        told: list[str] = []

        def logged() -> None:
            told.append(table)
            client.send_frame(f"update {table}")

        await store.logs.append(Append(table, tokens[table], 2, b"act", logged=logged))
        if not told:  # the in-memory store: its caller calls it (as Hosting.append_entry does)
            logged()
        client.send_frame(f"ok {table}")

    await asyncio.gather(*(act(table) for table in tables))
    for _ in range(3):
        await asyncio.sleep(0)
    assert client.ws.transport.writes == 1, frames
    assert sorted(frames) == sorted(f"{kind} {t}" for t in tables for kind in ("update", "ok"))
    for table in tables:
        assert frames.index(f"update {table}") < frames.index(f"ok {table}")
    if not isinstance(store.link, MemoryLink):
        assert frames[:3] == [f"update {t}" for t in tables], "one batch: the updates first"


@pytest.mark.parametrize("with_lobby_records", [False, True])
async def test_one_turns_appends_are_one_script_call(
    redis_url_clean: str, with_lobby_records: bool
) -> None:
    store = redis_stores(redis_url_clean, "node-a")
    await store.start()
    try:
        tables = [f"t{i}" for i in range(40)]
        tokens = await leased(store, tables)
        before = script_calls(redis_url_clean)

        def append(t: str) -> Awaitable[None]:
            lobby = LobbyRecord("node-a", t.encode(), False) if with_lobby_records else None
            return store.logs.append(Append(t, tokens[t], 2, b"act", table_channel(t), b"u", lobby))

        await asyncio.gather(*(append(t) for t in tables))
        assert script_calls(redis_url_clean) - before == 1
        for table in tables:
            assert await store.logs.read(table) == [b"create", b"act"]
            if with_lobby_records:
                assert await store.lobby.get(table) == ("node-a", table.encode())
        assert await store.lobby.listed() == [], "unlisted tables stay out of the lobby"
    finally:
        await store.close()


async def test_a_busy_nodes_appends_wait_for_each_other_and_a_lone_one_goes_at_once(
    redis_url_clean: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While appends keep coming, batches go at most one every ``COALESCE``: appends of
    successive turns soon after a batch go out together in one script call (a write to Redis and
    its reply's reading cost the node more than an append); one after a quiet interval goes in
    the next turn, not a ``COALESCE`` later. (The interval is stretched here so that a slow
    machine's turns fall inside it.)"""
    store = redis_stores(redis_url_clean, "node-a")
    await store.start()
    try:
        tables = [f"t{i}" for i in range(10)]
        tokens = await leased(store, tables)  # (their first appends: a batch just went)
        monkeypatch.setattr(redis_tables, "COALESCE", 0.5)
        before = script_calls(redis_url_clean)
        appends = []
        for table in tables:  # each in a turn of its own
            entry = Append(table, tokens[table], 2, b"act")
            appends.append(asyncio.create_task(store.logs.append(entry)))
            await asyncio.sleep(0)
        await asyncio.wait_for(asyncio.gather(*appends), 5)
        assert script_calls(redis_url_clean) - before == 1, "one batch for the ten turns"
        await asyncio.sleep(0.6)  # quiet for longer than COALESCE
        loop = asyncio.get_running_loop()
        started = loop.time()
        await store.logs.append(Append("t0", tokens["t0"], 3, b"alone"))
        assert loop.time() - started < 0.4, "a lone append waited for the interval"
        assert await store.logs.read("t0") == [b"create", b"act", b"alone"]
        for table in tables[1:]:
            assert await store.logs.read(table) == [b"create", b"act"]
    finally:
        await store.close()


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of this test's own that keeps what it acknowledged over a restart, a SIGKILL
    included (``everysec`` may lose its last two seconds to a kill: seen once in 30 runs)."""
    with RedisServer(appendonly=True, fsync="always", data_dir=tmp_path) as server:
        yield server


async def test_a_failed_batch_fails_its_own_appends_only(durable_redis: RedisServer) -> None:
    store = redis_stores(durable_redis.url, "node-a")
    await store.start()
    try:
        tables = ["a", "b", "c"]
        tokens = await leased(store, tables)
        await asyncio.gather(
            *(store.logs.append(Append(t, tokens[t], 2, b"before")) for t in tables)
        )
        durable_redis.stop()
        told: list[str] = []
        failed = await asyncio.gather(
            *(
                store.logs.append(
                    Append(t, tokens[t], 3, b"lost", logged=lambda: told.append("logged"))
                )
                for t in tables
            ),
            return_exceptions=True,
        )
        assert all(isinstance(outcome, StoreUnavailable) for outcome in failed)
        await asyncio.sleep(0)
        assert told == [], "a failed append's logged callback was called"
        await asyncio.to_thread(durable_redis.start)
        await asyncio.wait_for(store.health.wait_up(), 10)
        for table in tables:
            assert await store.logs.read(table) == [b"create", b"before"], "nothing of the batch"
        # The next batch takes the positions the failed one could not.
        await asyncio.gather(
            *(store.logs.append(Append(t, tokens[t], 3, b"after")) for t in tables)
        )
        for table in tables:
            assert await store.logs.read(table) == [b"create", b"before", b"after"]
    finally:
        await store.close()


@pytest.fixture
def private_cluster() -> Iterator[LocalCluster]:
    """A cluster of this test's own, whose masters the test may kill."""
    with LocalCluster() as cluster:
        yield cluster


async def test_a_dead_master_fails_only_its_own_tables_appends(
    private_cluster: LocalCluster,
) -> None:
    store = open_stores(private_cluster.url, "node-a")
    await store.start()
    try:
        tables = [f"t{i}" for i in range(24)]
        tokens = await leased(store, tables)
        serving = {t: private_cluster.index_serving(f"bd:t:{{{t}}}:log") for t in tables}
        victim = serving[tables[0]]
        assert len(set(serving.values())) == 3, "the tables are spread over every master"
        private_cluster.kill(victim)
        outcomes = await asyncio.gather(
            *(store.logs.append(Append(t, tokens[t], 2, b"act")) for t in tables),
            return_exceptions=True,
        )
        for table, outcome in zip(tables, outcomes, strict=True):
            if serving[table] == victim:
                assert isinstance(outcome, StoreUnavailable), table
            else:
                assert outcome is True, f"{table}: {outcome!r}"
                assert await store.logs.read(table) == [b"create", b"act"]
    finally:
        await store.close()


async def test_closing_the_store_answers_every_queued_append(durable_redis: RedisServer) -> None:
    store = redis_stores(durable_redis.url, "node-a")
    await store.start()
    tables = [f"q{i}" for i in range(300)]  # more than one batch: some wait for the next
    tokens = await leased(store, tables)
    durable_redis.pause()  # the first batch stays out, the rest waits in the queue
    try:
        appends = [
            asyncio.create_task(store.logs.append(Append(t, tokens[t], 2, b"act"))) for t in tables
        ]
        await asyncio.sleep(0.2)
        await store.close()
        done, pending = await asyncio.wait(appends, timeout=10)
    finally:
        durable_redis.resume()
    assert not pending, f"{len(pending)} appends never answered"
    assert all(isinstance(task.exception(), StoreUnavailable) for task in done)


async def test_closing_the_store_settles_every_append_not_awaited(
    durable_redis: RedisServer,
) -> None:
    store = redis_stores(durable_redis.url, "node-a")
    await store.start()
    tables = [f"q{i}" for i in range(300)]  # more than one batch: some wait for the next
    tokens = await leased(store, tables)
    outcomes: list[bool | BaseException] = []
    durable_redis.pause()  # the first batch stays out, the rest waits in the queue
    try:
        for table in tables:
            store.logs.append_soon(Append(table, tokens[table], 2, b"act"), outcomes.append)
        await asyncio.sleep(0.2)
        await store.close()
        await eventually(lambda: len(outcomes) == len(tables), timeout=10)
    finally:
        durable_redis.resume()
    assert all(isinstance(outcome, StoreUnavailable) for outcome in outcomes)


# ---------------------------------------------------------------- the group commit's own connection
# On one Redis the batches go on a connection of the store's own (``blackdrez.server.stores.resp``),
# not
# through redis-py's pool: what happens to it when Redis forgets the script, restarts, dies with
# a batch out, or does not answer.


def noscript_errors(url: str) -> int:
    """NOSCRIPT replies Redis gave so far."""
    with redis.Redis.from_url(url) as client:
        stats = client.info("errorstats")
    return int(stats.get("errorstat_NOSCRIPT", {}).get("count", 0))


async def test_a_script_redis_forgot_is_loaded_again(durable_redis: RedisServer) -> None:
    store = redis_stores(durable_redis.url, "node-a")
    await store.start()
    try:
        tables = ["a", "b"]
        tokens = await leased(store, tables)
        with redis.Redis.from_url(durable_redis.url) as admin:
            admin.script_flush()
        before = noscript_errors(durable_redis.url)
        await asyncio.gather(*(store.logs.append(Append(t, tokens[t], 2, b"act")) for t in tables))
        assert noscript_errors(durable_redis.url) - before == 1, "the call met NOSCRIPT once"
        await store.logs.append(Append("a", tokens["a"], 3, b"again"))
        assert await store.logs.read("a") == [b"create", b"act", b"again"]
        assert await store.logs.read("b") == [b"create", b"act"]
        assert store.health.outages == 0
    finally:
        await store.close()


async def test_a_restarted_redis_costs_no_append(durable_redis: RedisServer) -> None:
    store = redis_stores(durable_redis.url, "node-a")
    await store.start()
    try:
        tokens = await leased(store, ["a"])
        await asyncio.to_thread(durable_redis.restart)  # its scripts are gone with it
        await store.logs.append(Append("a", tokens["a"], 2, b"after the restart"))
        assert noscript_errors(durable_redis.url) == 0, "the script was loaded on reconnection"
        # The pool's connections were all closed by the restart: none is handed out stale.
        assert await store.logs.read("a") == [b"create", b"after the restart"]
        assert store.health.outages == 0
    finally:
        await store.close()


async def test_a_batch_out_when_redis_dies_fails_and_the_next_works_when_it_is_back(
    durable_redis: RedisServer,
) -> None:
    store = redis_stores(durable_redis.url, "node-a")
    await store.start()
    try:
        tables = ["a", "b", "c"]
        tokens = await leased(store, tables)
        durable_redis.pause()  # the batch is sent, then the connection is cut under it
        out = [
            asyncio.create_task(store.logs.append(Append(t, tokens[t], 2, b"cut"))) for t in tables
        ]
        await asyncio.sleep(0.2)
        await asyncio.to_thread(durable_redis.kill)
        failed = await asyncio.wait_for(asyncio.gather(*out, return_exceptions=True), 10)
        assert [type(outcome) for outcome in failed] == [StoreUnavailable] * 3
        assert not store.health.up
        refused = await asyncio.gather(
            store.logs.append(Append("a", tokens["a"], 2, b"while down")), return_exceptions=True
        )
        assert isinstance(refused[0], StoreUnavailable)
        await asyncio.to_thread(durable_redis.start)
        await asyncio.wait_for(store.health.wait_up(), 10)
        await asyncio.gather(*(store.logs.append(Append(t, tokens[t], 2, b"back")) for t in tables))
        for table in tables:
            assert await store.logs.read(table) == [b"create", b"back"]
    finally:
        await store.close()


async def test_an_unanswered_batch_fails_and_the_next_gets_its_own_replies(
    durable_redis: RedisServer,
) -> None:
    store = redis_stores(durable_redis.url, "node-a")
    await store.start()
    try:
        tokens = await leased(store, ["slow", "next"])
        durable_redis.pause()
        try:
            stalled = await asyncio.gather(
                store.logs.append(Append("slow", tokens["slow"], 2, b"stalled")),
                return_exceptions=True,
            )  # after the command timeout
        finally:
            durable_redis.resume()
        assert isinstance(stalled[0], StoreUnavailable)
        await asyncio.wait_for(store.health.wait_up(), 10)
        # Were the stalled call's reply read on the same connection, it would answer this one.
        await store.logs.append(Append("next", tokens["next"], 2, b"its own"))
        assert await store.logs.read("next") == [b"create", b"its own"]
    finally:
        await store.close()


async def test_a_batch_goes_out_while_the_one_before_waits_for_its_reply(
    durable_redis: RedisServer,
) -> None:
    """On one Redis the batches are pipelined: appends queued while a batch is out are sent at
    once (a busy node's appends do not wait a round trip for a reply that is not theirs), and
    each gets its own outcome."""
    store = redis_stores(durable_redis.url, "node-a")
    await store.start()
    try:
        tokens = await leased(store, ["first", "second"])
        assert store.logs._commit_link is not None
        durable_redis.pause()
        try:
            first = asyncio.create_task(
                store.logs.append(Append("first", tokens["first"], 2, b"1"))
            )
            await asyncio.sleep(0.05)
            second = asyncio.create_task(
                store.logs.append(Append("second", tokens["second"] + 1, 2, b"2"))
            )
            await asyncio.sleep(0.05)
            connection = store.logs._commit_link._connection
            assert connection is not None and len(connection._waiting) == 2, "not pipelined"
        finally:
            durable_redis.resume()
        await asyncio.wait_for(first, 5)
        with pytest.raises(LeaseLost):
            await asyncio.wait_for(second, 5)
        assert await store.logs.read("first") == [b"create", b"1"]
        assert await store.logs.read("second") == [b"create"]
    finally:
        await store.close()


async def test_snapshots_go_on_after_redis_restarts_or_forgets_the_script(
    durable_redis: RedisServer,
) -> None:
    """Snapshots have a connection of their own, as the appends: after a restart of Redis (the
    connection lost, the script gone) and after a ``SCRIPT FLUSH`` (the connection kept) the
    next snapshot is stored, and a stale token is still refused."""
    store = redis_stores(durable_redis.url, "node-a")
    await store.start()
    try:
        tokens = await leased(store, ["a"])
        await store.logs.put_snapshot("a", tokens["a"], 1, b"one")
        await asyncio.to_thread(durable_redis.restart)
        await store.logs.put_snapshot("a", tokens["a"], 2, b"two")
        assert await store.logs.read_snapshot("a") == (2, b"two")
        with redis.Redis.from_url(durable_redis.url) as admin:
            admin.script_flush()
        await store.logs.put_snapshot("a", tokens["a"], 3, b"three")
        assert await store.logs.read_snapshot("a") == (3, b"three")
        with pytest.raises(LeaseLost):
            await store.logs.put_snapshot("a", tokens["a"] + 1, 4, b"stale")
        assert await store.logs.read_snapshot("a") == (3, b"three")
    finally:
        await store.close()


_texts = st.text(max_size=40)
_blobs = st.binary(max_size=1500)


@settings(max_examples=200, deadline=None)
@given(
    holder=_texts,
    position=st.integers(min_value=1, max_value=2**40),
    entry=_blobs,
    announce=st.none() | st.tuples(_texts, _blobs),
    lobby=st.none()
    | st.tuples(_texts, _blobs, st.booleans(), st.none() | st.tuples(_texts, _blobs)),
)
def test_an_append_is_packed_for_the_commit_link_as_its_arguments_are(
    holder: str,
    position: int,
    entry: bytes,
    announce: tuple[str, bytes] | None,
    lobby: tuple[str, bytes, bool, tuple[str, bytes] | None] | None,
) -> None:
    """The commit link sends an append's arguments packed in one step (the hot path); redis-py's
    paths (a cluster, TLS, a resend) send its argument list: both say the same to Redis."""
    record = None
    if lobby is not None:
        node, data, listed, change = lobby
        channel, announced = change if change is not None else ("", None)
        record = LobbyRecord(node, data, listed, channel, announced)
    append = Append(
        "t-1", 7, position, entry,
        channel=announce[0] if announce else "", announce=announce[1] if announce else None,
        lobby=record,
    )  # fmt: skip
    loop = asyncio.new_event_loop()
    try:
        pending = PendingAppend(append, holder, loop.create_future())
    finally:
        loop.close()
    assert len(pending.args) == ARGS
    assert _packed_args(holder, append) == bulks(pending.args)


def test_an_append_soon_is_settled_once_whatever_settles_its_batch_again() -> None:
    """A callback's append is told its outcome once: a batch whose reply settled it and that
    is settled again (the store closing with the batch still listed) does not call it twice,
    nor a lease lost after the entry was logged. Each outcome as ``append`` would give it:
    heard, not heard, the lease lost (nothing written: 0), the log elsewhere (-1)."""
    told: dict[str, list[bool | BaseException]] = {}
    batch = []
    for table in ("heard", "unheard", "lost", "behind"):
        told[table] = []
        batch.append(PendingAppend(Append(table, 7, 2, b"e"), "h", None, told[table].append))
    _settle(batch, [1, UNHEARD, 0, -1])
    _settle(batch, [StoreUnavailable("closed")] * len(batch))
    assert told["heard"] == [True]
    assert told["unheard"] == [False]
    assert [type(outcome) for outcome in told["lost"] + told["behind"]] == [LeaseLost, LeaseLost]


async def test_appends_do_not_ask_for_the_running_loop_each_time(store: Stores) -> None:
    """Every action's append ran ``asyncio.get_running_loop()`` on Redis (and the in-memory bus
    at each publish): on Python 3.11 that is a ``getpid`` system call, 1.5-2.3 µs an action in
    the node's native profiles. The store asks once; a table's appends after that ask none."""
    tables = [f"t{i}" for i in range(8)]
    tokens = await leased(store, tables)
    inbox = Inbox()
    await store.bus.subscribe(table_channel("t0"), inbox)  # (the bus has a listener)
    asked = 0
    callers: list[str] = []
    ask = asyncio.get_running_loop
    ours = str(Path(blackdrez.server.__file__).parent)  # (the store's calls, not asyncio's)

    def count(frame: FrameType, event: str, arg: object) -> None:
        nonlocal asked
        if event == "c_call" and arg is ask and frame.f_code.co_filename.startswith(ours):
            asked += 1
            code = frame.f_code
            callers.append(f"{code.co_qualname} ({code.co_filename}:{frame.f_lineno})")

    previous = sys.getprofile()
    for position in (2, 3, 4):
        sys.setprofile(count)
        try:
            appends = [
                store.logs.append(Append(t, tokens[t], position, b"act", table_channel(t), b"u"))
                for t in tables
            ]
            await asyncio.gather(*appends)
        finally:
            sys.setprofile(previous)
        if position == 2:
            asked = 0  # the first batch may ask (the store learns its loop)
            callers.clear()
    assert asked == 0, f"{asked} calls of get_running_loop in 16 appends: {sorted(set(callers))}"
    for table in tables:
        assert await store.logs.read(table) == [b"create", b"act", b"act", b"act"]
