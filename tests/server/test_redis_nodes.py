"""Two server processes' worth of nodes on one real Redis, or on a Redis Cluster: a shared lobby
and shared tables."""

from __future__ import annotations

import asyncio
import gc

import pytest

from blackdrez.clients.client import ServerError
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.stores.base import Append
from tests.server.helpers import play_out, queued_at, seat_and_start


@pytest.fixture(params=["redis", "cluster"])
def shared_url(request) -> str:
    """A clean Redis, or a clean Redis Cluster (3 masters, 3 replicas), for several nodes."""
    return request.getfixturevalue(
        {"redis": "redis_url_clean", "cluster": "redis_cluster_url_clean"}[request.param]
    )


@pytest.fixture
async def two_nodes(make_server, shared_url):
    first = await make_server(redis_url=shared_url, node_id="node-a")
    second = await make_server(redis_url=shared_url, node_id="node-b")
    return first, second


async def test_the_lobby_is_shared_and_live_on_both_nodes(two_nodes, connect) -> None:
    a, b = two_nodes
    watcher_b = await connect(b, name="Watcher")
    await watcher_b.request(v1.WatchLobby())
    host = await connect(a, name="Host")
    joined = await host.request(v1.CreateTable(options=v1.TableOptions(name="Shared", seats=3)))
    table = joined.table.id
    await watcher_b.wait_until(lambda: table in watcher_b.lobby)
    listing = await (await connect(b, name="Lister")).request(v1.ListTables())
    assert [t.id for t in listing.tables] == [table]
    guest = await connect(b, name="Guest")
    seated = await guest.request(v1.JoinTable(table=table))
    assert seated.seat == 1
    await watcher_b.wait_until(lambda: watcher_b.lobby[table].seats[1] is not None)
    await host.wait_until(lambda: host.tables[table].info.seats[1] is not None)


async def test_tokens_work_on_every_node(two_nodes, connect) -> None:
    a, b = two_nodes
    first = await connect(a, name="Ann")
    again = await connect(b, token=first.token)
    assert again.player == first.player


async def test_a_complete_game_with_players_on_both_nodes(two_nodes, connect) -> None:
    a, b = two_nodes
    players = [
        await connect(a, name="A1"),
        await connect(b, name="B1", binary=True),
        await connect(a, name="A2", binary=True),
        await connect(b, name="B2"),
    ]
    table = await seat_and_start(players[0], players[1:])
    await asyncio.gather(*(play_out(p, table) for p in players))
    views = [p.tables[table].view for p in players]
    assert all(view == views[0] for view in views)
    assert views[0]["phase"] == "over"
    histories = [[e.seq for e in p.tables[table].events] for p in players]
    for history in histories:
        assert history == list(range(history[0], history[-1] + 1)), "no gap, no duplicate"
    assert {h[-1] for h in histories} == {a.node.rooms[table].seq}
    # a remote player cannot act for someone else either
    with pytest.raises(ServerError) as error:
        await players[1].act(table, {"type": "hit"})
    assert error.value.code == ErrorCode.GAME_OVER


async def test_a_remote_spectator_and_a_remote_reconnect(two_nodes, connect) -> None:
    a, b = two_nodes
    host, guest = await connect(a, name="Host"), await connect(a, name="Guest")
    table = await seat_and_start(host, [guest])
    watcher = await connect(b, name="Watcher")
    await watcher.request(v1.Spectate(table=table))
    await guest.close()
    from blackdrez.clients.client import Client

    back = await Client.connect(f"ws://127.0.0.1:{b.port}/", token=guest.token)
    assert back.welcome.tables == [table]
    back.tables[table] = guest.tables[table]
    await back.resync(table)
    await asyncio.gather(play_out(host, table), play_out(back, table))
    await watcher.wait_until(lambda: watcher.tables[table].view["phase"] == "over")
    assert watcher.tables[table].view == host.tables[table].view == back.tables[table].view


async def test_two_real_processes_share_lobby_and_game(make_server, shared_url) -> None:
    """The same with the second node a separate ``blackdrez serve`` process."""
    import os
    import subprocess
    import sys

    from blackdrez.clients.client import Client
    from blackdrez.server.testing.redis_server import free_port

    local = await make_server(redis_url=shared_url, node_id="in-process")
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "blackdrez.tools.cli",
            "serve",
            "--port",
            str(port),
            "--redis-url",
            shared_url,
            "--node-id",
            "subprocess",
            "--rate",
            "1000",
            "--burst",
            "1000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    clients: list[Client] = []
    try:
        await asyncio.to_thread(process.stdout.readline)
        remote_url = f"ws://127.0.0.1:{port}/"
        host = await Client.connect(remote_url, name="Remote host")
        near = await Client.connect(f"ws://127.0.0.1:{local.port}/", name="Local guest")
        clients = [host, near]
        table = await seat_and_start(host, [near])
        assert table not in local.node.rooms, "hosted by the other process"
        await asyncio.gather(play_out(host, table), play_out(near, table))
        assert host.tables[table].view == near.tables[table].view
        assert host.tables[table].view["phase"] == "over"
    finally:
        for client in clients:
            await client.close()
        process.terminate()
        await asyncio.to_thread(process.wait, 10)


def _errors_counted(server, code: str) -> float:
    """The node's ``blackdrez_errors`` counter for ``code``."""
    value = server.metrics.registry.get_sample_value("blackdrez_errors_total", {"code": code})
    return value or 0.0


async def test_quick_join_goes_on_when_a_remote_table_fills_up(two_nodes, connect) -> None:
    a, b = two_nodes
    host = await connect(a, name="Host")
    rival = await connect(a, name="Rival")
    seeker = await connect(b, name="Seeker")
    full = (await host.request(v1.CreateTable(options=v1.TableOptions(seats=2)))).table.id
    listing = await seeker.request(v1.ListTables())
    assert [t.id for t in listing.tables] == [full], "the seeker's node sees one free seat"
    # The rival's join and the seeker's (forwarded from node b) queue on the table in that order.
    async with a.node.hosting.lock(full):
        rival_join = asyncio.create_task(rival.request(v1.JoinTable(table=full)))
        await queued_at(a.node, full, 1)
        seeker_join = asyncio.create_task(seeker.request(v1.QuickJoin()))
        await queued_at(a.node, full, 2)
    assert (await rival_join).seat == 1
    joined = await seeker_join  # refused there (table_full), so it went on to a table of its own
    assert joined.table.id != full
    assert joined.seat == 0
    assert _errors_counted(b, "table_full") == 0, "tried, not sent to the seeker"
    # A forwarded error is a typed error: the requester's node counts it.
    with pytest.raises(ServerError) as error:
        await seeker.request(v1.SetReady(table=full))
    assert error.value.code == ErrorCode.NOT_SEATED
    assert _errors_counted(b, "not_seated") == 1


async def test_a_host_that_does_not_answer_leaves_no_unretrieved_task(
    two_nodes, connect, monkeypatch
) -> None:
    from blackdrez.server.node import routing as node_module
    from blackdrez.server.stores.base import node_channel

    a, b = two_nodes
    monkeypatch.setattr(node_module, "REMOTE_TIMEOUT", 0.5)
    problems: list[dict] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: problems.append(context))
    host, guest = await connect(a, name="Host"), await connect(a, name="Guest")
    table = await seat_and_start(host, [guest], turn_seconds=600)
    # The guest is back on node b, and its first connection (on the host's node a, which does
    # not hear of the new one, as a node of an older version) drops while node a no longer
    # answers forwarded requests.
    monkeypatch.setattr(a.node, "close_replaced", lambda *news: None)
    back = await connect(b, token=guest.token)
    back.tables[table] = guest.tables[table]
    await back.resync(table)
    await a.store.bus.unsubscribe(node_channel(a.node.id), a.node._on_node_message)
    await guest.close()

    def marked_away() -> bool:
        return any(
            e.event.get("type") == "presence" and not e.event["connected"]
            for e in back.tables[table].events
        )

    await back.wait_until(marked_away)  # node b now tells node a the guest is still here...
    await asyncio.sleep(1.5)  # ...and a does not answer in time
    gc.collect()
    await asyncio.sleep(0.1)
    assert not [p for p in problems if "never retrieved" in p.get("message", "")], problems


async def test_a_node_hears_the_lobby_only_while_someone_there_watches_it(
    make_server, redis_url_clean, connect, monkeypatch
) -> None:
    """Every listed table's changes come on the lobby channel: a node with no lobby watcher does
    not subscribe to it (on Redis it would read back the lobby change of most of its own
    actions), and one that has watchers misses no change."""
    import redis.asyncio as aioredis

    from blackdrez.server.node import lobby
    from blackdrez.server.stores.base import LOBBY_CHANNEL

    monkeypatch.setattr(lobby, "LOBBY_LINGER", 0.2)
    a = await make_server(redis_url=redis_url_clean, node_id="node-a")
    b = await make_server(redis_url=redis_url_clean, node_id="node-b")

    async def subscribers() -> int:
        async with aioredis.Redis.from_url(redis_url_clean) as direct:
            return dict(await direct.pubsub_numsub(LOBBY_CHANNEL))[LOBBY_CHANNEL.encode()]

    host = await connect(a, name="Host")
    first = (await host.request(v1.CreateTable(options=v1.TableOptions(seats=3)))).table.id
    assert await subscribers() == 0, "nodes with no lobby watcher hear the lobby"
    watcher = await connect(b, name="Watcher")
    listed = await watcher.request(v1.WatchLobby())
    assert [t.id for t in listed.tables] == [first]
    assert await subscribers() == 1
    second = (await host.request(v1.CreateTable(options=v1.TableOptions(seats=3)))).table.id
    await watcher.wait_until(lambda: second in watcher.lobby)
    await watcher.request(v1.UnwatchLobby())
    async with asyncio.timeout(5):
        while await subscribers():
            await asyncio.sleep(0.05)
    # back again: the list, then every change from then on
    listed = await watcher.request(v1.WatchLobby())
    assert sorted(t.id for t in listed.tables) == sorted([first, second])
    guest = await connect(a, name="Guest")
    await guest.request(v1.JoinTable(table=first))
    await watcher.wait_until(lambda: watcher.lobby[first].seats[1] is not None)
    await watcher.close()
    async with asyncio.timeout(5):  # a watcher that leaves by closing its connection
        while await subscribers():
            await asyncio.sleep(0.05)


async def test_a_nodes_periodic_orphan_scan_looks_at_its_share_and_a_node_going_at_all(
    make_server, redis_url_clean, monkeypatch
) -> None:
    """Every node used to look at every hosted table every FULL_SCAN seconds: Redis's work grew
    with tables times nodes. The periodic scan now covers this node's share (its place among the
    live nodes), while a node seen going (or a start, a table found moving) makes it look at
    every table, as before, so adoption is as prompt."""
    from blackdrez.server.node import failover
    from blackdrez.server.stores.redis import redis_stores

    monkeypatch.setattr(failover, "FULL_SCAN", 0.2)
    others = [redis_stores(redis_url_clean, node) for node in ("node-a", "node-c")]
    for other in others:
        await other.start()
    await others[0].presence.heartbeat(60)

    async def node_c_lives() -> None:
        while True:
            await others[1].presence.heartbeat(1.0)
            await asyncio.sleep(0.2)

    node_c = asyncio.create_task(node_c_lives())
    try:
        server = await make_server(redis_url=redis_url_clean, node_id="node-b")
        shares: list[object] = []
        scan = server.store.leases.adoptable

        async def spy(share=None, held=()):
            shares.append(share)
            return await scan(share, held)

        server.store.leases.adoptable = spy
        async with asyncio.timeout(10):  # the start's window of full scans ends (2 TTLs)
            while (1, 3) not in shares:
                await asyncio.sleep(0.05)
        assert set(shares) == {None, (1, 3)}, "full scans at start, then its share of three"
        node_c.cancel()  # node-c stops heartbeating: its share is nobody's until it is seen gone
        mark = len(shares)
        async with asyncio.timeout(10):
            while (1, 2) not in shares[mark:]:  # node-b is second of the two left
                await asyncio.sleep(0.05)
        after = shares[mark:]
        assert None in after[: after.index((1, 2))], "node-c seen going: a look at every table"
        assert set(after) <= {None, (1, 3), (1, 2)}
    finally:
        node_c.cancel()
        for other in others:
            await other.close()


async def test_a_nodes_orphan_scan_is_told_the_tables_whose_leases_it_holds(
    make_server, connect, redis_url_clean, monkeypatch
) -> None:
    """The scan skips the tables the node holds and renews (the store's test covers the skip):
    the node's failover loop must say which they are, or every scan looks its own tables up."""
    from blackdrez.server.node import failover

    monkeypatch.setattr(failover, "FULL_SCAN", 0.2)
    server = await make_server(redis_url=redis_url_clean)
    host = await connect(server, name="Host")
    table = (await host.request(v1.CreateTable())).table.id
    told: list[set[str]] = []
    scan = server.store.leases.adoptable

    async def spy(share=None, held=()):
        told.append(set(held))
        return await scan(share, held)

    server.store.leases.adoptable = spy
    async with asyncio.timeout(10):
        while not told:
            await asyncio.sleep(0.05)
    assert table in told[-1]


async def test_a_daily_deal_tried_again_on_another_node_waits_for_a_ranked_game_being_made(
    two_nodes, connect, monkeypatch
) -> None:
    """Ann's ranked session of the day's deal is claimed on node A; before A has stored its
    table, Ann asks node B (a second tab) for another session of that deal. B finds the ranked
    session through the claim itself (the table it names is leased already): refused, as it is
    once the table is stored, and not dealt beside the ranked game."""
    a, b = two_nodes
    # One connection per player: B's would replace A's, cancelling its request. A node of an
    # older version does not (it drops the ``Replaced`` message), and the race is the same.
    monkeypatch.setattr(a.node, "close_replaced", lambda *news: None)
    ann = await connect(a, name="Ann")
    again = await connect(b, token=ann.token)
    creating, resume = asyncio.Event(), asyncio.Event()
    append = a.node.store.logs.append

    async def paused(entry: Append) -> bool:
        if entry.position == 1:  # a table's creation: the daily deal was claimed before it
            creating.set()
            await resume.wait()
        return await append(entry)

    monkeypatch.setattr(a.node.store.logs, "append", paused)
    daily = v1.StartSolitaire(game="blue_jacket", daily=True)
    ranked = asyncio.create_task(ann.request(daily))
    await asyncio.wait_for(creating.wait(), 5.0)
    with pytest.raises(ServerError) as error:
        await again.request(daily)
    assert error.value.code == ErrorCode.GAME_RUNNING
    resume.set()
    table = (await ranked).table
    assert table.ranked
    with pytest.raises(ServerError) as error:
        await again.request(daily)
    assert error.value.code == ErrorCode.GAME_RUNNING, "stored now: refused the same"
    await ann.act(table.id, {"type": "resign"})
    await ann.wait_until(lambda: ann.tables[table.id].view["over"])
    await a.node._settled()  # its record says finished
    joined = await again.request(daily)
    assert not joined.table.ranked, "the second try knows the cards already"
