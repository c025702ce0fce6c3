"""The outbox under load: what a room change needs of the store after its log entry (a player's
table set, a ranking, an arena's score, a closed table's retirement) is written without one
table's slow write holding up every other table's, and a change that needs nothing of the store
queues nothing (a busy node on Redis once queued thousands of finished games behind the first
seats' writes: measured 2,400 items, 12 s behind, each holding its game's engine)."""

from __future__ import annotations

import asyncio

from blackdrez.protocol import v1
from blackdrez.server.node.hosting import OUTBOX_WRITERS
from blackdrez.server.stores import StoreUnavailable
from blackdrez.server.testing.node_harness import Cluster, on_nodes
from tests.node.helpers import play_out, seat_and_start


@on_nodes(1)
async def test_one_tables_slow_write_holds_up_no_other_tables(cluster: Cluster) -> None:
    """Players sit at several tables while the store's writes of their table sets hang: the
    writes of different tables are in flight together (a serial outbox had one at a time, the
    others queued behind it), and each is written once the store answers."""
    (a,) = cluster.nodes
    hosting = a.node.hosting
    original = hosting.store.players.add_table
    in_flight: list[str] = []
    peak = 0
    answer = asyncio.Event()

    async def add_table(player: str, table_id: str) -> None:
        nonlocal peak
        in_flight.append(table_id)
        peak = max(peak, len(in_flight))
        try:
            await answer.wait()
            await original(player, table_id)
        finally:
            in_flight.remove(table_id)

    hosts = [await cluster.connect(a, f"Host{n}") for n in range(OUTBOX_WRITERS + 2)]
    tables = [(await host.ok(v1.CreateTable())).table.id for host in hosts]
    await hosting.settled()
    hosting.store.players.add_table = add_table  # type: ignore[method-assign]
    guests = [await cluster.connect(a, f"Guest{n}") for n in range(len(tables))]
    for guest, table in zip(guests, tables, strict=True):
        await guest.ok(v1.JoinTable(table=table))
    await cluster.until(lambda: peak >= OUTBOX_WRITERS, "the tables' writes in flight together")
    assert peak == OUTBOX_WRITERS, "more writes at once than the outbox's bound"
    answer.set()
    await hosting.settled()
    for guest, table in zip(guests, tables, strict=True):
        assert table in await cluster.world.players.tables(guest.player)


@on_nodes(1)
async def test_a_table_s_own_writes_stay_in_order(cluster: Cluster) -> None:
    """A player who sits and leaves before the store answers is, once it does, in the table's
    set and then out of it: the writes of one table are done in the order of its changes."""
    (a,) = cluster.nodes
    hosting = a.node.hosting
    store = hosting.store.players
    original_add, original_remove = store.add_table, store.remove_table
    answer = asyncio.Event()
    done: list[str] = []

    async def add_table(player: str, table_id: str) -> None:
        await answer.wait()
        await original_add(player, table_id)
        done.append("add")

    async def remove_table(player: str, table_id: str) -> None:
        await original_remove(player, table_id)
        done.append("remove")

    host = await cluster.connect(a, "Host")
    table = (await host.ok(v1.CreateTable())).table.id
    await hosting.settled()
    store.add_table = add_table  # type: ignore[method-assign]
    store.remove_table = remove_table  # type: ignore[method-assign]
    guest = await cluster.connect(a, "Guest")
    await guest.ok(v1.JoinTable(table=table))
    await guest.ok(v1.LeaveTable(table=table))
    await cluster.settle()
    assert done == []
    answer.set()
    await hosting.settled()
    assert done == ["add", "remove"]
    assert table not in await cluster.world.players.tables(guest.player)


@on_nodes(1)
async def test_a_game_s_end_alone_queues_nothing_for_the_store(cluster: Cluster) -> None:
    """A game that ends at an unranked table outside an arena needs nothing of the store after
    its log entry (its record went to the records writer with it): nothing is queued, so a
    node whose outbox is behind does not hold finished games in it."""
    (a,) = cluster.nodes
    hosting = a.node.hosting
    host = await cluster.connect(a, "Host")
    guest = await cluster.connect(a, "Guest")
    table = await seat_and_start(cluster, host, [guest])
    await hosting.settled()
    queued: list[object] = []
    put = hosting._outbox.put_nowait

    def put_nowait(item: object) -> None:
        queued.append(item)
        put(item)  # type: ignore[arg-type]

    hosting._outbox.put_nowait = put_nowait  # type: ignore[method-assign]
    await play_out(cluster, [host, guest], table)
    assert a.rooms[table].status.value in ("finished", "between_rounds", "open", "playing")
    assert queued == []


@on_nodes(1)
async def test_every_table_s_items_are_written_in_order_across_two_outages(
    cluster: Cluster,
) -> None:
    """More tables than writers have items waiting when the store goes down; it comes back,
    goes down again while they drain, and comes back: every table's items are written, each
    table's in the order of its changes (a guest who sat and left is out of the table's set,
    one who sat is in it)."""
    (a,) = cluster.nodes
    hosting = a.node.hosting
    store = hosting.store.players
    original_add, original_remove = store.add_table, store.remove_table
    release = asyncio.Event()
    written: list[tuple[str, str]] = []

    refused = 0

    async def add_table(player: str, table_id: str) -> None:
        nonlocal refused
        await release.wait()
        try:
            await original_add(player, table_id)
        except StoreUnavailable:
            refused += 1
            raise
        written.append(("add", table_id))
        if len(written) == OUTBOX_WRITERS // 2:  # mid-drain: the second outage
            cluster.take_store_down(a)

    async def remove_table(player: str, table_id: str) -> None:
        await original_remove(player, table_id)
        written.append(("remove", table_id))

    hosts = [await cluster.connect(a, f"Host{n}") for n in range(OUTBOX_WRITERS + 4)]
    tables = [(await host.ok(v1.CreateTable())).table.id for host in hosts]
    await hosting.settled()
    store.add_table = add_table  # type: ignore[method-assign]
    store.remove_table = remove_table  # type: ignore[method-assign]
    guests = [await cluster.connect(a, f"Guest{n}") for n in range(len(tables))]
    for guest, table in zip(guests, tables, strict=True):
        await guest.ok(v1.JoinTable(table=table))
    leavers = set(range(0, len(tables), 2))
    for n in leavers:
        await guests[n].ok(v1.LeaveTable(table=tables[n]))
    await cluster.settle()
    cluster.take_store_down(a)
    release.set()
    await cluster.advance(cluster.lease_ttl / 4)  # (short outages: the leases hold)
    assert written == []
    await cluster.bring_store_back(a)
    await cluster.until(lambda: a.store_down, "the second outage")
    await cluster.advance(cluster.lease_ttl / 4)
    await cluster.bring_store_back(a)
    await hosting.settled()
    assert refused > OUTBOX_WRITERS  # tried in both outages, by every writer in the first
    for n, (guest, table) in enumerate(zip(guests, tables, strict=True)):
        mine = [kind for kind, table_id in written if table_id == table]
        assert mine == (["add", "remove"] if n in leavers else ["add"])
        held = await cluster.world.players.tables(guest.player)
        assert (table in held) is (n not in leavers)
