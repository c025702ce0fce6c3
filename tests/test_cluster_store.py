"""The store on a real Redis Cluster: what one Redis cannot show.

Slots (a table's keys in one slot, each index one key), the bus moving to another node when its
node dies, a master's failover under a live store, and the WAIT durability setting: with it no
acknowledged append is lost when a master is killed. (Each store's contract runs on the
cluster too: ``tests/stores/``.)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis.asyncio.connection
import redis.exceptions

from blackdrez.server.node.clock import SystemClock
from blackdrez.server.node.leases import Leases
from blackdrez.server.stores import Stores, StoreUnavailable, open_stores
from blackdrez.server.stores.base import (
    LOBBY_CHANNEL,
    Append,
    LobbyRecord,
    PartlyRenewed,
    table_channel,
)
from blackdrez.server.stores.redis_cluster import (
    ClusterLink,
    _replicas_of,
    _unreachable_cluster,
    parse_cluster_url,
)
from blackdrez.server.stores.redis_link import CONNECT_TIMEOUT
from blackdrez.server.testing.redis_cluster import (
    LocalCluster,
    direct_client,
    redis_command,
    unlinked,
)
from tests.stores.helpers import Inbox, eventually, stalls

OpenStore = Callable[..., Awaitable[Stores]]


@pytest.fixture
async def open_cluster_store() -> AsyncIterator[OpenStore]:
    """Open started stores (``open_stores(url, node_id, **options)``); close them after."""
    opened: list[Stores] = []

    async def start(url: str, node_id: str = "node-a", **options: Any) -> Stores:
        store = open_stores(url, node_id, **options)
        await store.start()
        opened.append(store)
        return store

    yield start
    for store in opened:
        await store.close()


@pytest.fixture
def private_cluster() -> Iterator[LocalCluster]:
    """A cluster of this test's own, whose nodes the test may kill."""
    with LocalCluster() as cluster:
        yield cluster


def slot_of(cluster: LocalCluster, key: str) -> int:
    return int(redis_command(cluster.nodes[0].port, "CLUSTER", "KEYSLOT", key).lstrip(":"))


def test_cluster_urls_name_nodes_and_credentials_only() -> None:
    assert parse_cluster_url("redis+cluster://a:7000,b:7001") == (
        [("a", 7000), ("b", 7001)],
        {},
    )
    assert parse_cluster_url("redis+cluster://u:p%40ss@h") == (
        [("h", 6379)],
        {"username": "u", "password": "p@ss"},
    )
    for bad in (
        "redis://h:1",
        "redis+cluster://h:1/3",
        "redis+cluster://h:1?x=1",
        "redis+cluster://h:port",
        "redis+cluster://",
    ):
        with pytest.raises(ValueError):
            parse_cluster_url(bad)


async def test_a_connection_closed_under_a_command_counts_as_unreachable() -> None:
    """redis-py's cluster client can close a pooled connection while another command takes it;
    that command's error means "connection lost", not a bug of ours; our own bugs still raise."""
    unsent = redis.asyncio.connection.Connection(host="127.0.0.1", port=1)
    with pytest.raises(redis.exceptions.ConnectionError), _unreachable_cluster():
        await unsent._send_packed_command([b"PING"])  # inside redis-py, on no transport
    with pytest.raises(AttributeError), _unreachable_cluster():
        None.writelines  # noqa: B018 - an AttributeError of our own
    with pytest.raises(redis.exceptions.ConnectionError), _unreachable_cluster():
        raise redis.exceptions.RedisClusterException("Redis Cluster cannot be connected.")
    with pytest.raises(redis.exceptions.RedisClusterException), _unreachable_cluster():
        raise redis.exceptions.RedisClusterException("keys in request don't hash to one slot")


async def test_a_tables_keys_share_a_slot_and_each_index_is_one_key(
    open_cluster_store: OpenStore, redis_cluster: LocalCluster, redis_cluster_url_clean: str
) -> None:
    store = await open_cluster_store(redis_cluster_url_clean)
    await store.tokens.shared_secret(b"s")
    await store.presence.heartbeat(5)
    await store.leaderboards.submit("piles", "p1", "Ann", 3)
    for table in ("t1", "t2", "t3", "t4"):
        token = await store.leases.acquire(table, 5)
        assert token == 1
        await store.logs.append(Append(table, token, 1, b"create"))
        await store.lobby.put(table, "node-a", b"rec", listed=True, token=token)
        await store.players.add_table("alice", table)
    await store.logs.retire("t4", 1, b"game", 60, ["alice"])
    with direct_client(redis_cluster_url_clean) as raw:
        keys = sorted(key.decode() for key in raw.scan_iter(match="bd:*"))
    slots: dict[str, set[int]] = {}
    for key in keys:
        group = key.split("}")[0] if "{" in key else key
        slots.setdefault(group, set()).add(slot_of(redis_cluster, key))
    assert all(len(found) == 1 for found in slots.values()), slots
    assert {"bd:t:{t1", "bd:t:{t4", "bd:p:{alice", "bd:lb:{piles"} <= set(slots)
    assert {"bd:{hosted", "bd:lobby:tables", "bd:nodes", "bd:secret"} <= set(slots)
    with direct_client(redis_cluster_url_clean) as raw:
        assert raw.hkeys("{bd:nodes}:incarnations") == [b"node-a"]
    beats = slot_of(redis_cluster, "{bd:nodes}:incarnations")
    assert {beats} == slots["bd:nodes"], "the heartbeat script writes both in one slot"
    tables = {slot for group, found in slots.items() if group.startswith("bd:t:") for slot in found}
    assert len(tables) > 1, "tables spread over slots"
    assert sorted(await store.lobby.listed()) == [b"rec"] * 3
    assert await store.players.tables("alice") == ["t1", "t2", "t3"]


async def test_an_addresss_rate_limit_is_one_bucket_for_every_node_of_a_cluster(
    open_cluster_store: OpenStore, redis_cluster_url_clean: str
) -> None:
    """``take_token``: the handshake and API limits of one address, shared by every node (a
    single-key script: any slot), timed by Redis, waited out exactly."""
    first = await open_cluster_store(redis_cluster_url_clean, "node-a")
    second = await open_cluster_store(redis_cluster_url_clean, "node-b")
    takes = [await store.tokens.take("handshake", "192.0.2.7", 2.0, 2) for store in (first, second)]
    assert takes == [0.0, 0.0]
    wait = await first.tokens.take("handshake", "192.0.2.7", 2.0, 2)
    assert 0 < wait <= 0.5
    assert await second.tokens.take("api", "192.0.2.7", 2.0, 2) == 0.0  # another kind: its own
    await asyncio.sleep(wait)
    assert await second.tokens.take("handshake", "192.0.2.7", 2.0, 2) == 0.0


NODES = """\
a1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:30002@40002 master - 0 1700000000000 2 connected 5461-10922
c3 127.0.0.1:30003@40003 master - 0 1700000000000 3 disconnected 10923-16383
d4 127.0.0.1:30004@40004 slave b2 0 1700000000000 2 connected
e5 127.0.0.1:30005@40005,host-e slave fail? c3 0 1700000000000 3 connected
f6 127.0.0.1:30006@40006 handshake - 0 0 0 connected
"""
"""One node's ``CLUSTER NODES``: linked to 30002 and 30004 only (30003's link is down, 30005 is
suspected failing, 30006 is still in a handshake, 30007 is not known at all)."""


def test_a_node_counts_as_linked_only_to_the_nodes_it_knows_and_reaches() -> None:
    """A new cluster is ready for a test only once every node has met every other on the
    cluster bus, which pub/sub crosses (``LocalCluster.wait_healthy``): ``cluster_state:ok``
    comes first, and an update published before two nodes met is lost."""
    others = {30002, 30003, 30004, 30005, 30006, 30007}
    assert unlinked(NODES, others) == {30003, 30005, 30006, 30007}
    assert unlinked(NODES, {30002, 30004}) == set()


def test_the_started_cluster_has_every_node_linked_to_every_other(
    redis_cluster: LocalCluster,
) -> None:
    ports = {node.port for node in redis_cluster.nodes if node.running}
    for node in redis_cluster.nodes:
        if node.running:
            links = redis_command(node.port, "CLUSTER", "NODES", host=node.host)
            assert unlinked(links, ports - {node.port}) == set(), node.port


async def test_updates_cross_the_cluster_to_a_subscriber_on_another_node(
    open_cluster_store: OpenStore, redis_cluster_url_clean: str
) -> None:
    publisher = await open_cluster_store(redis_cluster_url_clean, "node-a")
    # Each store's bus link starts on a node picked at random: four listeners all landed on
    # the same one once in about 27 runs. Listeners are added until two nodes are used.
    listeners, inboxes, bus_ports = [], [], set()
    while len(listeners) < 4 or (len(bus_ports) < 2 and len(listeners) < 16):
        listener = await open_cluster_store(redis_cluster_url_clean, f"n{len(listeners)}")
        inbox = Inbox()
        await listener.bus.subscribe(table_channel("t1"), inbox)
        listeners.append(listener)
        inboxes.append(inbox)
        bus_ports.add(listener.bus._pubsub.connection.port)
    assert len(bus_ports) > 1, "the stores' bus links start on different nodes"
    token = await publisher.leases.acquire("t1", 5)
    assert token is not None
    await publisher.logs.append(Append("t1", token, 1, b"create", table_channel("t1"), b"update"))
    await eventually(lambda: all(inbox.messages == [b"update"] for inbox in inboxes))


async def test_the_bus_moves_to_another_node_when_its_node_dies(
    open_cluster_store: OpenStore, private_cluster: LocalCluster
) -> None:
    listener = await open_cluster_store(private_cluster.url, "listener")
    publisher = await open_cluster_store(private_cluster.url, "publisher")
    recovered = asyncio.Event()
    listener.bus.on_recovered = recovered.set
    inbox = Inbox()
    await listener.bus.subscribe("news", inbox)
    port = listener.bus._pubsub.connection.port
    victim = private_cluster.ports.index(port)
    was_master = private_cluster.role(victim) == "master"
    private_cluster.kill(victim)
    await asyncio.wait_for(recovered.wait(), 30)
    assert listener.bus._pubsub.connection.port != port
    deadline = time.monotonic() + 30  # a killed master's slots are away until its failover
    while not inbox.messages:
        assert time.monotonic() < deadline, "the bus did not come back"
        with contextlib.suppress(StoreUnavailable):
            await publisher.bus.publish("news", b"after")
        await asyncio.sleep(0.1)
    assert set(inbox.messages) == {b"after"}
    if was_master:
        await asyncio.to_thread(private_cluster.wait_promoted)


async def test_a_master_failover_is_unavailable_then_served_by_its_replica(
    open_cluster_store: OpenStore, private_cluster: LocalCluster
) -> None:
    store = await open_cluster_store(private_cluster.url, wait_replicas=1)
    token = await store.leases.acquire("t1", 60)
    assert token is not None
    await store.logs.append(Append("t1", token, 1, b"create"))
    await store.logs.append(Append("t1", token, 2, b"act"))
    private_cluster.kill(private_cluster.index_serving("bd:t:{t1}:log"))
    started = time.monotonic()
    with pytest.raises(StoreUnavailable):
        await store.logs.append(Append("t1", token, 3, b"during the failover"))
    assert time.monotonic() - started < 3.0, "unavailable at once, not after a long wait"
    assert not store.health.up
    await asyncio.wait_for(store.health.wait_up(), 60)  # the probe sees the new master
    # The replica took over with every acknowledged entry; WAIT now finds no replica of it.
    assert await read_soon(store, "t1") == [b"create", b"act"]
    with pytest.raises(StoreUnavailable, match="0 of 1 replicas"):
        await store.logs.append(Append("t1", token, 3, b"unreplicated"))
    assert store.health.up, "a missing replica does not make the store look down"


async def test_wait_acknowledges_only_what_enough_replicas_hold(
    open_cluster_store: OpenStore, redis_cluster_url_clean: str, redis_url_clean: str
) -> None:
    one = await open_cluster_store(redis_cluster_url_clean, "one", wait_replicas=1)
    two = await open_cluster_store(redis_cluster_url_clean, "two", wait_replicas=2)
    alone = await open_cluster_store(redis_url_clean, "alone", wait_replicas=1)
    assert isinstance(one.link, ClusterLink) and not isinstance(alone.link, ClusterLink)
    inbox = Inbox()
    await one.bus.subscribe(table_channel("t1"), inbox)
    for store, table in ((one, "t1"), (two, "t2"), (alone, "t3")):
        token = await store.leases.acquire(table, 60)
        assert token is not None
        if store is one:
            await store.logs.append(
                Append(table, token, 1, b"create", table_channel(table), b"seen")
            )
            continue
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="replicas took entry 1"):
            await store.logs.append(
                Append(table, token, 1, b"create", table_channel("t1"), b"unseen")
            )
        assert time.monotonic() - started >= 0.09, "it waited for the replicas (100 ms)"
    await eventually(lambda: inbox.messages == [b"seen"])
    await asyncio.sleep(0.2)
    assert inbox.messages == [b"seen"], "an unacknowledged entry is never announced"


async def read_soon(store: Stores, table: str) -> list[bytes]:
    """The table's log, read again while the cluster still settles after a failover (a call
    can meet a connection closed by the change, as a node's calls can: it retries too)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return await store.logs.read(table)
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _appends_lost_when_a_master_dies(store: Stores, cluster: LocalCluster) -> tuple[int, int]:
    """Writers append as fast as they can to tables of one master; the replica's link breaks
    (the replica frozen, so that it cannot reconnect), and 0.5 s later the master is killed;
    once the replica has taken over, count the acknowledged appends it does not have.
    Returns (acknowledged, lost)."""
    victim = cluster.index_serving("bd:t:{t0}:log")
    tables = [f"t{i}" for i in range(200)]
    tables = [t for t in tables if cluster.index_serving(f"bd:t:{{{t}}}:log") == victim][:8]
    replica = cluster.replica_of(victim)
    acked: dict[str, int] = {}
    breaking = asyncio.Event()

    async def append_until_refused(table: str) -> None:
        token = await store.leases.acquire(table, 60)
        assert token is not None
        position = 1
        while True:
            try:
                await store.logs.append(Append(table, token, position, b"entry %d" % position))
            except StoreUnavailable:
                assert breaking.is_set(), "refused only once the replica is cut off"
                return
            acked[table] = position
            position += 1

    writers = [asyncio.create_task(append_until_refused(table)) for table in tables]
    await eventually(lambda: len(acked) == len(tables) and min(acked.values()) >= 20, 30)
    breaking.set()
    cluster.pause(replica)
    redis_command(cluster.nodes[victim].port, "CLIENT", "KILL", "TYPE", "slave")
    await asyncio.sleep(0.5)
    cluster.kill(victim)
    cluster.resume(replica)
    await asyncio.wait_for(asyncio.gather(*writers), 30)
    await asyncio.wait_for(store.health.wait_up(), 60)
    lost = 0
    for table in tables:
        log = await read_soon(store, table)
        kept = [b"entry %d" % i for i in range(1, len(log) + 1)]
        assert log == kept, f"{table}: the log is a prefix of what was written"
        lost += max(0, acked[table] - len(log))
    return sum(acked.values()), lost


async def test_with_wait_no_acknowledged_append_is_lost_when_a_master_dies(
    open_cluster_store: OpenStore, private_cluster: LocalCluster
) -> None:
    store = await open_cluster_store(private_cluster.url, wait_replicas=1, wait_timeout_ms=200)
    acknowledged, lost = await _appends_lost_when_a_master_dies(store, private_cluster)
    assert acknowledged >= 160
    assert lost == 0


async def test_without_wait_acknowledged_appends_die_with_a_cut_off_master(
    open_cluster_store: OpenStore, private_cluster: LocalCluster
) -> None:
    """What WAIT is for: the same fault without it loses what the master acknowledged alone."""
    store = await open_cluster_store(private_cluster.url)
    acknowledged, lost = await _appends_lost_when_a_master_dies(store, private_cluster)
    print(f"acknowledged {acknowledged}, lost {lost}")
    assert lost > 0


async def test_with_wait_a_lobby_record_that_could_not_be_written_is_caught_up(
    open_cluster_store: OpenStore, redis_cluster_url_clean: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With WAIT a table's lobby record is written after its entry is replicated, apart from
    it. When that write fails (Redis out of reach just then) the lobby is not left a change
    behind until the table's next one: the newest record is written once Redis answers (never
    an older one after it), a record whose lease is gone is dropped, and the task doing this
    ends once nothing is behind."""
    store = await open_cluster_store(redis_cluster_url_clean, wait_replicas=1)
    tokens = {}
    for table in ("kept", "moved"):
        token = await store.leases.acquire(table, 60)
        assert token is not None
        tokens[table] = token
    real_put = store.lobby.put
    failures = {"kept": 2, "moved": 1}
    released = asyncio.Event()

    async def out_of_reach_at_first(table_id: str, *args: Any, **kwargs: Any) -> None:
        if failures[table_id]:
            failures[table_id] -= 1
            raise StoreUnavailable("redis: out of reach (this test's)")
        if table_id == "moved":
            await released.wait()  # the catch-up comes after the table moved away
        await real_put(table_id, *args, **kwargs)

    monkeypatch.setattr(store.lobby, "put", out_of_reach_at_first)

    def record(n: int) -> LobbyRecord:
        return LobbyRecord("node-a", b"record %d" % n, True, LOBBY_CHANNEL, b"change %d" % n)

    await store.logs.append(Append("kept", tokens["kept"], 1, b"create", lobby=record(1)))
    await store.logs.append(Append("moved", tokens["moved"], 1, b"create", lobby=record(1)))
    await store.logs.append(Append("kept", tokens["kept"], 2, b"act", lobby=record(2)))
    await store.leases.release("moved", tokens["moved"])
    released.set()
    await eventually(lambda: store.logs._lobby_catching_up is None, 10)
    assert store.logs._lobby_behind == {}
    assert await store.lobby.get("kept") == ("node-a", b"record 2")
    assert await store.lobby.get("moved") is None, "no record written without its lease"
    assert failures == {"kept": 0, "moved": 0}


async def test_a_node_that_reaches_most_masters_counts_its_store_up(
    open_cluster_store: OpenStore, private_cluster: LocalCluster
) -> None:
    """One master of three frozen (failing over, or on the far side of a cut): the store's
    probe still answers, so the node does not call its store lost and send its players away
    (every node of the three-host test did, during one master's failover); two frozen: a
    node on the minority side, its store is down."""
    store = await open_cluster_store(private_cluster.url)
    masters = private_cluster.master_indexes()
    private_cluster.pause(masters[0])
    try:
        await store.ping()
        private_cluster.pause(masters[1])
        with pytest.raises(StoreUnavailable):
            await store.ping()
    finally:
        for index in masters:
            private_cluster.resume(index)
    await store.ping()


async def test_a_frozen_master_holds_up_the_renewal_of_its_own_leases_only(
    open_cluster_store: OpenStore, private_cluster: LocalCluster
) -> None:
    """A node's leases spread over the three masters, one of them frozen: the renewal says
    which it renewed (the others' masters answered) and which it could not, instead of
    failing them all (before, every node lost every lease during one master's failover and
    adopted all its tables again)."""
    store = await open_cluster_store(private_cluster.url)
    tables = [f"t{i}" for i in range(12)]
    tokens = {table: await store.leases.acquire(table, 1.0) for table in tables}
    held = {table: token for table, token in tokens.items() if token is not None}
    assert len(held) == len(tables)
    frozen = private_cluster.index_serving("bd:t:{t0}:lease")
    serving = {t: private_cluster.index_serving(f"bd:t:{{{t}}}:lease") for t in tables}
    on_frozen = {t for t in tables if serving[t] == frozen}
    assert len(on_frozen) < len(tables), "the leases live on more than one master"
    private_cluster.pause(frozen)
    try:
        with pytest.raises(PartlyRenewed) as part:
            await store.leases.renew(held, 60.0)
    finally:
        private_cluster.resume(frozen)
    assert part.value.renewed == set(tables) - on_frozen
    assert part.value.lost == set()
    with direct_client(private_cluster.url) as direct:
        assert all(direct.pttl(f"bd:t:{{{t}}}:lease") > 30_000 for t in part.value.renewed)
        assert all(direct.pttl(f"bd:t:{{{t}}}:lease") <= 1_000 for t in on_frozen)


async def test_a_frozen_master_never_holds_a_renewal_up_past_its_share_of_the_ttl(
    open_cluster_store: OpenStore, private_cluster: LocalCluster
) -> None:
    """After a share fails, the renewal reads the slot map again (to reach a successor); that
    read may go first to the frozen node and wait for its timeout, longer than the TTL: every
    lease of the node then lapsed (the three-host cut of issue 39 saw a node lose all its
    tables at the failover). Each renewal stays within half the TTL, whatever node the read
    tries first (the nodes are tried in a random order: twelve renewals)."""
    store = await open_cluster_store(private_cluster.url)
    tables = [f"t{i}" for i in range(12)]
    held = {table: await store.leases.acquire(table, 60.0) for table in tables}
    assert all(held.values())
    frozen = private_cluster.index_serving("bd:t:{t0}:lease")
    private_cluster.pause(frozen)
    durations = []
    try:
        for _ in range(12):
            # (the time the machine took from the loop is not the renewal's: CI saw a renewal
            # of 0.67 s, 0.17 s over its bound, on a loaded machine; waiting out the frozen
            # node, the fault this test is for, takes its timeout, 1 or 2 s, and is not
            # taken off)
            async with stalls() as stalled:
                began = time.perf_counter()
                # (which were renewed is another test's: on a loaded machine the masters that
                # answer may miss their share too, and the renewal is unavailable as a whole)
                with contextlib.suppress(StoreUnavailable):
                    await store.leases.renew(held, 1.0)  # type: ignore[arg-type]
                durations.append((time.perf_counter() - began, stalled.longest))
    finally:
        private_cluster.resume(frozen)
    # Each renewal waits for the slot map's read a share of the TTL at most, then renews
    # within a share: half the TTL in all.
    assert all(took - stall <= 0.5 + 0.1 for took, stall in durations), [
        (round(took, 2), round(stall, 2)) for took, stall in durations
    ]
    assert max(took for took, _ in durations) < CONNECT_TIMEOUT


async def test_a_renewal_all_of_whose_leases_are_on_a_frozen_master_gives_up_in_time(
    open_cluster_store: OpenStore, private_cluster: LocalCluster
) -> None:
    """Every lease of a node on one master, which stops answering: the renewal is unavailable
    within its share of the TTL, as with leases on several masters, not after the socket's
    timeout (2 s, twice the TTL: the next renewal, at the master's successor once the cluster
    has failed over, came too late, and the three-host cut saw tables adopted twice)."""
    store = await open_cluster_store(private_cluster.url)
    frozen = private_cluster.index_serving("bd:t:{t0}:lease")
    tables = [
        t
        for t in (f"t{i}" for i in range(40))
        if private_cluster.index_serving(f"bd:t:{{{t}}}:lease") == frozen
    ]
    held = {table: await store.leases.acquire(table, 60.0) for table in tables}
    assert len(held) >= 2 and all(held.values())
    private_cluster.pause(frozen)
    try:
        async with stalls() as stalled:
            began = time.perf_counter()
            with pytest.raises(StoreUnavailable):
                await store.leases.renew(held, 1.0)  # type: ignore[arg-type]
            took = time.perf_counter() - began
    finally:
        private_cluster.resume(frozen)
    assert took - stalled.longest <= 0.25 + 0.15, f"{took:.2f} s, {stalled.longest:.2f} s stalled"
    assert took < CONNECT_TIMEOUT


async def test_a_store_not_started_reads_its_slot_map_and_renews_leases_on_every_master(
    open_cluster_store: OpenStore, redis_cluster_url_clean: str
) -> None:
    """The renewal thread's store is opened, never started (``Leases._renew_off_loop``): its
    ping must read the slot map (it asked the masters of an empty map: "no master", down), and
    its renewal must not need one. Before, the renewal split by master met an empty map and
    raised ``SlotNotCoveredError`` (not a ``RedisError``), which ended every node's renewal
    thread at its first lease: from then on a lease lived only while its table was busy, and
    after the three-host test's heal tables were adopted again and again."""
    store = await open_cluster_store(redis_cluster_url_clean)
    tables = [f"t{i}" for i in range(12)]
    held = {table: await store.leases.acquire(table, 1.0) for table in tables}
    assert all(held.values())
    tokens = {table: token for table, token in held.items() if token is not None}
    for ping_first in (False, True):
        renewer = open_stores(redis_cluster_url_clean, "node-a", incarnation=store.incarnation)
        try:
            if ping_first:
                await renewer.ping()
                assert renewer.health.up
            assert await renewer.leases.renew(tokens, 60.0) == set()
        finally:
            await renewer.close()
    with direct_client(redis_cluster_url_clean) as direct:
        assert all(direct.pttl(f"bd:t:{{{t}}}:lease") > 30_000 for t in tables)


async def test_the_renewal_thread_keeps_a_nodes_leases_on_a_cluster(
    open_cluster_store: OpenStore, redis_cluster_url_clean: str
) -> None:
    """Leases spread over every master, held by a node's :class:`Leases` with its renewal
    thread on a store of its own: none lapses, however long the tables stay idle."""
    store = await open_cluster_store(redis_cluster_url_clean)
    lost: list[str] = []
    leases = Leases(
        store,
        SystemClock(),
        1.0,
        lost=lost.append,
        stopping=lambda: False,
        renewal_store=functools.partial(open_stores, redis_cluster_url_clean, "node-a"),
    )
    tables = [f"t{i}" for i in range(12)]
    for table in tables:
        assert await leases.acquire(table) is not None
    leases.start(asyncio.get_running_loop())
    try:
        await asyncio.sleep(3.0)  # three TTLs
    finally:
        await leases.stop()
    assert lost == []
    with direct_client(redis_cluster_url_clean) as direct:
        assert all(direct.pttl(f"bd:t:{{{t}}}:lease") > 0 for t in tables), "none lapsed"


async def test_a_renewal_none_of_whose_masters_answers_is_unavailable(
    open_cluster_store: OpenStore, private_cluster: LocalCluster
) -> None:
    """Every master of a node's leases frozen (the node cut off from them): the renewal is
    :class:`StoreUnavailable`, as any call that does not reach Redis, not the bare
    ``TimeoutError`` of its bound, which ended the renewal thread of the node cut off in the
    three-host test."""
    store = await open_cluster_store(private_cluster.url)
    masters = private_cluster.master_indexes()
    tables = [f"t{i}" for i in range(24)]
    frozen = masters[:2]
    serving = {t: private_cluster.index_serving(f"bd:t:{{{t}}}:lease") for t in tables}
    on_frozen = [t for t in tables if serving[t] in frozen]
    assert {serving[t] for t in on_frozen} == set(frozen), "the leases live on both"
    held = {table: await store.leases.acquire(table, 60.0) for table in on_frozen}
    tokens = {table: token for table, token in held.items() if token is not None}
    for index in frozen:
        private_cluster.pause(index)
    try:
        with pytest.raises(StoreUnavailable) as failed:
            await store.leases.renew(tokens, 1.0)
    finally:
        for index in frozen:
            private_cluster.resume(index)
    assert not isinstance(failed.value, PartlyRenewed), "none was renewed"


async def test_a_renewal_store_whose_map_predates_a_failover_keeps_a_lease_taken_after_it(
    open_cluster_store: OpenStore, private_cluster: LocalCluster
) -> None:
    """The renewal thread's store read its slot map before a master failed over, and held no
    lease there to notice; then its node adopts a table of that master's slots (at the
    successor, through the node's own client). The first renewal goes to the dead master and
    fails; the slot map read that follows tried the nodes in a random order, and a node that
    accepts connections but answers nothing (on the far side of a cut: here, frozen) held it
    for the socket timeout, twice the TTL: the lease lapsed and the table moved again (the
    three-host cut saw a table adopted three times). Ten renewal stores, each its own random
    order: none may let its lease lapse. Half of them renew again at once after a failure, as
    the renewal thread does when its store is back: that renewal must wait for the map being
    read, not go to the dead master again (seen in the three-host test)."""
    cluster = private_cluster
    dead = cluster.index_serving("bd:t:{t0}:lease")
    successor = cluster.replica_of(dead)
    tables = tables_on(cluster, dead, 10)
    frozen = [
        i
        for i in range(len(cluster.nodes))
        if i not in (dead, successor) and cluster.role(i) != "master"
    ]
    assert len(tables) == 10 and len(frozen) == 2
    incarnation = "inc-1"
    renewers = [open_stores(cluster.url, "node-a", incarnation=incarnation) for _ in tables]
    try:
        for renewer in renewers:
            await renewer.ping()  # the slot map, as the renewal thread reads it at its start
        cluster.kill(dead)
        await taken_over(cluster, successor)
        store = await open_cluster_store(cluster.url, incarnation=incarnation)
        tokens = {t: await eventually_acquired(store, t) for t in tables}
        for index in frozen:
            cluster.pause(index)
        lapsed, failed_again = await kept_renewed(renewers, tokens)
    finally:
        for index in range(len(cluster.nodes)):
            cluster.resume(index)
        for renewer in renewers:
            await renewer.close()
    assert lapsed == [], f"{len(lapsed)} of {len(tables)} leases lapsed"
    assert failed_again == [], "a renewal right after a failed one went to the dead master again"


def test_the_heirs_of_a_failed_master_are_its_replicas_in_the_slot_map() -> None:
    """The slot map is read again from a failed master's replicas when one answers: one of
    them is its successor, which knows of the failover before the other nodes do."""
    from redis.asyncio.cluster import ClusterNode

    a, a2, b, b2, b3 = (ClusterNode("127.0.0.1", port) for port in (1, 2, 3, 4, 5))
    first, second = [a, a2], [b, b2, b3]
    slots = {0: first, 1: first, 2: second, 3: second}
    assert _replicas_of(slots, {a.name}) == {a2.name}
    assert _replicas_of(slots, {b.name}) == {b2.name, b3.name}
    assert _replicas_of(slots, {a2.name}) == set()  # (a replica has no heirs)
    assert _replicas_of(slots, {a.name, b.name}) == {a2.name, b2.name, b3.name}


async def test_a_renewal_that_failed_at_a_master_that_answers_again_holds_up_no_later_one(
    open_cluster_store: OpenStore, private_cluster: LocalCluster
) -> None:
    """A master slow for a moment (here frozen for 0.4 s, far from the node timeout: no
    failover) fails one renewal. The slot map read that follows pings it too: it answers, the
    map that names it is right, and the read ends; the renewals after it go at once, not held
    up a share of the TTL each while a read waits for a failover that is not coming."""
    cluster = private_cluster
    master = cluster.index_serving("bd:t:{t0}:lease")
    store = await open_cluster_store(cluster.url, incarnation="inc-1")
    token = await eventually_acquired(store, "t0")
    cluster.pause(master)
    try:
        with pytest.raises(StoreUnavailable):
            await store.leases.renew({"t0": token}, 1.0)
        await asyncio.sleep(0.15)
    finally:
        cluster.resume(master)
    took = []
    for _ in range(4):
        sent = time.monotonic()
        assert await store.leases.renew({"t0": token}, 1.0) == set()
        took.append(time.monotonic() - sent)
        await asyncio.sleep(0.05)
    assert max(took) < 0.15, f"renewals took {[round(t, 3) for t in took]} s"


def tables_on(cluster: LocalCluster, master: int, count: int) -> list[str]:
    """``count`` table ids whose leases are in the slots of node ``master``."""
    ids = (f"t{i}" for i in range(90))
    return [t for t in ids if cluster.index_serving(f"bd:t:{{{t}}}:lease") == master][:count]


async def taken_over(cluster: LocalCluster, successor: int) -> None:
    """Wait until replica ``successor`` is a master and says the cluster is whole."""
    await eventually(
        lambda: (
            cluster.role(successor) == "master"
            and cluster.nodes[successor].info("cluster").get("cluster_state") == "ok"
        ),
        30,
    )


def all_say_master(cluster: LocalCluster, index: int) -> bool:
    """Whether every running node's view of the cluster has node ``index`` as a master."""
    port = cluster.nodes[index].port
    for node in cluster.nodes:
        if not node.running:
            continue
        line = next(
            (line for line in redis_command(node.port, "CLUSTER", "NODES").splitlines()
             if f":{port}@" in line),
            "",
        )  # fmt: skip
        fields = line.split(" ")
        if len(fields) < 3 or "master" not in fields[2].split(","):
            return False
    return True


async def kept_renewed(
    renewers: list[Stores], tokens: dict[str, int], seconds: float = 3.0, ttl: float = 1.0
) -> tuple[list[str], list[str]]:
    """Each renewal store renews one of ``tokens``' leases (TTL ``ttl`` s) every 0.25 s for
    ``seconds``, half of them at once again after a failure (the renewal thread when its store
    is back): the tables whose lease lapsed, and those whose renewal right after a failed one
    failed again."""
    lapsed: list[str] = []
    failed_again: list[str] = []

    async def keep(renewer: Stores, table: str, at_once: bool) -> None:
        valid_until = time.monotonic() + ttl
        stop = time.monotonic() + seconds
        failed = False
        while time.monotonic() < stop:
            sent = time.monotonic()
            try:
                lost = await renewer.leases.renew({table: tokens[table]}, ttl)
            except StoreUnavailable:
                if failed and at_once:
                    failed_again.append(table)
                failed = True
            else:
                assert lost == set(), f"{table}: the lease was taken meanwhile"
                valid_until, failed = sent + ttl, False
            if not (failed and at_once):  # (else as the store back: renew at once)
                await asyncio.sleep(max(0.0, sent + 0.25 - time.monotonic()))
            if time.monotonic() > valid_until:
                lapsed.append(table)
                return

    await asyncio.gather(
        *(keep(r, t, i % 2 == 1) for i, (r, t) in enumerate(zip(renewers, tokens, strict=True)))
    )
    return lapsed, failed_again


async def test_renewal_stores_keep_leases_through_a_second_failover_of_the_same_slots(
    open_cluster_store: OpenStore, private_cluster: LocalCluster
) -> None:
    """After the first recovery: a master fails over, comes back as its successor's replica,
    then the successor fails too and the slots go back to the first. The same renewal stores
    (their slot map and seeds as the first failover's reads left them) keep the leases taken
    at each new master: after the second failover their map names a master that is dead now,
    and holds no replica for it (the first master was dead when the map was read)."""
    cluster = private_cluster
    # A TTL of 2 s: a renewal sent to the dead master again and again lapses within the 3 s
    # of renewals still; with 1 s the six leases taken one after another, or a test process
    # starved of the CPU for 0.75 s, lapsed too (seen as "taken meanwhile", 2 of 21 runs
    # beside busy processes; CI failed this test too, how it did not say).
    ttl = 2.0
    first = cluster.index_serving("bd:t:{t0}:lease")
    second = cluster.replica_of(first)
    tables = tables_on(cluster, first, 6)
    incarnation = "inc-1"
    renewers = [open_stores(cluster.url, "node-a", incarnation=incarnation) for _ in tables]
    try:
        for renewer in renewers:
            await renewer.ping()  # the slot map, as the renewal thread reads it at its start
        for dead, heir in ((first, second), (second, first)):
            cluster.kill(dead)
            await taken_over(cluster, heir)
            # Every node heard of it before the leases are taken: a renewal store reading its
            # map from a node that has not yet heard is the ten-store test's case (flaky there).
            await eventually(lambda heir=heir: all_say_master(cluster, heir), 30)
            store = await open_cluster_store(cluster.url, incarnation=incarnation)
            tokens = {t: await eventually_acquired(store, t, ttl=ttl) for t in tables}
            lapsed, failed_again = await kept_renewed(renewers, tokens, ttl=ttl)
            took = "first" if heir == second else "second"
            assert lapsed == [], f"the {took} takeover: {len(lapsed)} of {len(tables)} lapsed"
            assert failed_again == [], f"the {took} takeover: a renewal went to the dead master"
            cluster.restart(dead)  # it rejoins as the new master's replica
            await eventually(
                lambda dead=dead: (
                    cluster.role(dead) == "slave"
                    and cluster.nodes[dead].info("replication").get("master_link_status") == "up"
                ),
                30,
            )
    finally:
        for renewer in renewers:
            await renewer.close()


async def eventually_acquired(
    store: Stores, table: str, within: float = 10.0, ttl: float = 1.0
) -> int:
    """``table``'s lease, taken as an orphan scan would: tried again while the cluster is
    unavailable (a store opened just after a failover may meet the dead master first)."""
    deadline = time.monotonic() + within
    while True:
        with contextlib.suppress(StoreUnavailable):
            token = await store.leases.acquire(table, ttl)
            assert token is not None, f"{table}: nobody else holds it"
            return token
        assert time.monotonic() < deadline, f"{table}: the store stayed unavailable"
        await asyncio.sleep(0.1)
