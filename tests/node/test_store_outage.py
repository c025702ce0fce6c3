"""A node whose store stops answering: a command whose log write fails is undone, requests are
answered ``unavailable`` meanwhile, timers and the outbox wait for the store, and everything
goes on once it is back."""

from __future__ import annotations

import gc
import sys
from unittest import mock

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.node import hosting
from blackdrez.server.node.hosting import ELIDED
from blackdrez.server.table.commands import rebuild
from blackdrez.server.table.lifecycle import TableStatus
from blackdrez.server.testing.node_harness import Cluster, FakeClient, HarnessNode, on_nodes
from tests.node.helpers import act_once, bot_action, on_turn, play_out, seat_and_start


async def act_with_the_store_down(
    cluster: Cluster, node: HarnessNode, players: list[FakeClient], table: str
) -> None:
    """Take ``node``'s store down and have whoever is on turn act: refused ``unavailable``, and
    the room rebuilt as it was (a new room at the same event)."""
    room, seq = node.rooms[table], node.rooms[table].seq
    mover = on_turn(players, table)
    assert mover is not None
    action = bot_action(mover, table)
    cluster.take_store_down(node)
    refused = await mover.request(v1.Act(table=table, action=action))
    assert isinstance(refused, v1.Error) and refused.code == ErrorCode.UNAVAILABLE
    assert node.rooms[table] is not room and node.rooms[table].seq == seq


@on_nodes(2)
async def test_a_command_whose_write_fails_is_undone_and_a_node_that_reaches_the_store_adopts(
    cluster: Cluster,
) -> None:
    """Node A loses its store: the action whose log write failed is undone (the room rebuilt
    from its log), the next ones are refused at once, and since A cannot renew the lease,
    node B, which reaches the store, adopts the table from its log after the TTL."""
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    guest = await cluster.connect(b, "Guest")
    table = await seat_and_start(cluster, host, [guest])
    seq = a.rooms[table].seq
    await act_with_the_store_down(cluster, a, [host, guest], table)  # undone, rebuilt
    again = await host.request(v1.Resync(table=table, since=seq))
    assert isinstance(again, v1.Error) and again.code == ErrorCode.UNAVAILABLE  # at once
    await cluster.until(lambda: table in b.rooms, "node b adopts", within=3 * cluster.lease_ttl)
    assert b.rooms[table].seq >= seq
    await cluster.bring_store_back(a)
    await cluster.until(lambda: table not in a.rooms, "node a lets its copy go")
    mover = on_turn([host, guest], table)
    assert mover is not None
    await mover.ok(v1.Act(table=table, action=bot_action(mover, table)))  # served by node b


@on_nodes(1)
async def test_a_timer_due_while_the_store_is_down_fires_once_it_is_back(cluster: Cluster) -> None:
    (a,) = cluster.nodes
    host = await cluster.connect(a, "Host")
    guest = await cluster.connect(a, "Guest")
    table = await seat_and_start(cluster, host, [guest], turn_seconds=5.0)
    seq, logged = a.rooms[table].seq, len(cluster.world.tables.logs[table])
    cluster.take_store_down(a)
    await host.request(v1.ListTables())  # the node learns its store is down
    await cluster.advance(10.0)  # past the turn's deadline: the timer waits for the store
    assert len(cluster.world.tables.logs[table]) == logged
    await cluster.bring_store_back(a)
    await cluster.until(
        lambda: table in a.rooms and a.rooms[table].seq > seq, "the turn timer fires"
    )
    await cluster.settle()
    assert host.table(table).seq == a.rooms[table].seq


@on_nodes(1)
async def test_requests_that_need_the_store_are_answered_unavailable_while_it_is_down(
    cluster: Cluster,
) -> None:
    (a,) = cluster.nodes
    client = await cluster.connect(a, "Client")
    cluster.take_store_down(a)
    for request in (v1.ListTables(), v1.CreateTable(), v1.QuickJoin()):
        reply = await client.request(request)
        assert isinstance(reply, v1.Error) and reply.code == ErrorCode.UNAVAILABLE
    await cluster.bring_store_back(a)
    created = await client.ok(v1.CreateTable())
    assert created.table.id in a.rooms


@on_nodes(1)
async def test_the_outbox_waits_for_the_store_and_writes_in_order_once_it_is_back(
    cluster: Cluster,
) -> None:
    """A seat taken is logged with its command; the player's table set is written after, by
    the outbox, which retries while the store is down."""
    (a,) = cluster.nodes
    host = await cluster.connect(a, "Host")
    table = (await host.ok(v1.CreateTable())).table.id
    guest = await cluster.connect(a, "Guest")
    hosting = a.node.hosting
    original = hosting.store.players.add_table
    failures: list[str] = []

    async def add_table(player: str, table_id: str) -> None:
        if not failures:  # the first try finds the store down
            failures.append(player)
            cluster.take_store_down(a)
        await original(player, table_id)

    hosting.store.players.add_table = add_table  # type: ignore[method-assign]
    await guest.ok(v1.JoinTable(table=table))
    await cluster.advance(cluster.lease_ttl / 4)  # (a short outage: the lease holds)
    assert table not in await cluster.world.players.tables(guest.player)
    await cluster.bring_store_back(a)
    await hosting.settled()  # the outbox has written what it holds
    assert table in await cluster.world.players.tables(guest.player)
    assert a.rooms[table].status is TableStatus.OPEN


@on_nodes(1)
async def test_entries_before_a_snapshot_are_let_go_and_an_undo_starts_from_the_snapshot(
    cluster: Cluster,
) -> None:
    """A host keeps a table's log only from its last snapshot on (a table playing for days does
    not grow the node by its whole log); a command undone after that is rebuilt from the
    snapshot, and the table goes on, its log in the store whole."""
    (a,) = cluster.nodes
    host = await cluster.connect(a, "Host")
    guest = await cluster.connect(a, "Guest")
    with mock.patch.object(hosting, "SNAPSHOT_EVERY", 4):
        table = await seat_and_start(cluster, host, [guest])
        for _ in range(6):
            await act_once(cluster, [host, guest], table)
        kept = a.node.hosting._command_logs[table]
        position = a.node.hosting._snapshots[table][0]
        assert position >= 8
        assert all(entry is ELIDED for entry in kept[: position - 1])
        assert kept[position - 1] is not ELIDED
        await act_with_the_store_down(cluster, a, [host, guest], table)  # from the snapshot
        await cluster.bring_store_back(a)
        await act_once(cluster, [host, guest], table)
    logged = await a.stores.logs.read(table)
    assert ELIDED not in logged and rebuild(logged).seq == a.rooms[table].seq


@on_nodes(1)
async def test_what_a_host_holds_of_a_log_does_not_grow_with_the_tables_age(
    cluster: Cluster,
) -> None:
    """The entries let go leave nothing behind on the host, not even a place each (a list of
    placeholders grew by 8 bytes an entry: 8 MB for a table that logged a million)."""
    (a,) = cluster.nodes
    host = await cluster.connect(a, "Host")
    guest = await cluster.connect(a, "Guest")
    with mock.patch.object(hosting, "SNAPSHOT_EVERY", 4):
        table = await seat_and_start(cluster, host, [guest])
        held = []
        while len(held) < 2:
            await play_out(cluster, [host, guest], table)
            entries = len(a.node.hosting._command_logs[table])
            if not held or entries > 200:
                held.append(own_size(a.node.hosting._command_logs[table]))
            for player in (host, guest):
                await player.ok(v1.SetReady(table=table))
            await host.ok(v1.StartGame(table=table))
    assert held[1] <= held[0] + 100, held


def own_size(container: object) -> int:
    """The bytes of ``container`` and of the containers it holds, its entries (bytes) aside."""
    size, todo, seen = 0, [container], set()
    while todo:
        item = todo.pop()
        if isinstance(item, bytes | type) or id(item) in seen:
            continue  # (a class is shared, not held)
        seen.add(id(item))
        size += sys.getsizeof(item)
        todo.extend(gc.get_referents(item))
    return size
