"""Fan-out across nodes: every viewer, wherever connected, gets every update of a table in
order; one whose node missed updates is caught up; one whose seat was freed meanwhile is told."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import pytest

from blackdrez.protocol import v1
from blackdrez.protocol.errors import CloseCode
from blackdrez.server.node import fanout
from blackdrez.server.node.fanout import CATCH_UP_PATIENCE
from blackdrez.server.table import records
from blackdrez.server.table.commands import rebuild
from blackdrez.server.table.snapshots import SNAPSHOT_EVERY
from blackdrez.server.testing.node_harness import Cluster, FakeClient, HarnessNode, on_nodes
from tests.node.helpers import act_once, play_out, seat_and_start


def numbers(client: FakeClient, table: str) -> list[int]:
    return [numbered.seq for numbered in client.table(table).events]


@on_nodes(3)
async def test_players_and_spectators_on_other_nodes_get_every_update_in_order(
    cluster: Cluster,
) -> None:
    a, b, c = cluster.nodes
    host = await cluster.connect(a, "Host")
    player = await cluster.connect(b, "Player")
    spectator = await cluster.connect(c, "Spectator", binary=True)
    table = await seat_and_start(cluster, host, [player])
    await spectator.ok(v1.Spectate(table=table))
    await play_out(cluster, [host, player], table)
    await cluster.settle()
    room = a.rooms[table]
    for client in (host, player, spectator):
        seen = client.table(table)
        assert seen.seq == room.seq and not seen.gaps
        assert numbers(client, table) == sorted(set(numbers(client, table)))
    first = spectator.table(table).events[0].seq
    assert numbers(spectator, table) == list(range(first, room.seq + 1))
    assert numbers(player, table)[-1] == room.seq
    assert "game_over" in spectator.table(table).event_types()
    assert rebuild(await a.stores.logs.read(table)).seq == room.seq


@on_nodes(2)
async def test_a_node_that_lost_its_bus_catches_its_viewers_up(cluster: Cluster) -> None:
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    player = await cluster.connect(b, "Player")
    lobby = await cluster.connect(b, "Lobby watcher")
    await lobby.ok(v1.WatchLobby())
    table = await seat_and_start(cluster, host, [player])
    cluster.cut_bus(b)
    for _ in range(3):
        await act_once(cluster, [host], table) if host.table(table).legal else None
        await cluster.advance(0.2)
    await act_once(cluster, [host, player], table)  # someone can always act
    assert player.table(table).seq < a.rooms[table].seq  # missed while the bus was down
    lobby.lobby.clear()
    with logged("blackdrez.node") as records:
        await cluster.restore_bus(b)
        await cluster.until(lambda: player.table(table).seq == a.rooms[table].seq, "caught up")
    assert not player.table(table).gaps  # the resync's answer holds every missed event
    assert table in lobby.lobby  # the lobby's watchers get the whole list again
    # what the catch-up did is logged once, for an operator (and a failed fault test's report)
    summaries = [r.getMessage() for r in records if r.getMessage().startswith("bus back:")]
    assert summaries == ["bus back: 1 viewers of 1 tables followed here, caught up: resynced 1"]


@contextlib.contextmanager
def logged(name: str) -> Iterator[list[logging.LogRecord]]:
    """The records logged by logger ``name`` (from INFO up) while in the block."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger(name)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@on_nodes(2)
async def test_a_viewer_whose_seat_was_freed_while_its_node_was_away_is_told(
    cluster: Cluster,
) -> None:
    """Node B stops (its player is counted away) and loses its bus: the player's seat is freed
    after the grace. When B is back, the host no longer counts the player, so B tells its
    client from the table's log what it missed, and the watch ends."""
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    player = await cluster.connect(b, "Player")
    joined = await host.ok(v1.CreateTable(options=v1.TableOptions(grace_seconds=2.0)))
    table = joined.table.id
    await player.ok(v1.JoinTable(table=table))
    cluster.pause(b)
    cluster.cut_bus(b)
    await cluster.until(lambda: a.rooms[table].seats[1] is None, "the seat is freed", within=10.0)
    cluster.resume(b)
    await cluster.settle()  # what was held for b while it was stopped is lost: its bus is cut
    await cluster.restore_bus(b)
    await cluster.until(lambda: table not in player.connection.tables, "the watch ends")
    assert "seat_freed" in player.table(table).event_types()
    assert player.table(table).seq == a.rooms[table].seq


@on_nodes(2)
async def test_a_player_connected_elsewhere_is_not_counted_away_by_the_adopter(
    cluster: Cluster,
) -> None:
    """A table's new host counts every player away until told otherwise: the node where a
    player is still connected tells it at once."""
    (
        a,
        b,
    ) = cluster.nodes
    c = await cluster.add_node()
    host = await cluster.connect(a, "Host")
    player = await cluster.connect(b, "Player")
    table = await seat_and_start(cluster, host, [player])
    cluster.kill(a)
    await cluster.until(
        lambda: table in b.rooms or table in c.rooms, "adopted", within=3 * cluster.lease_ttl
    )
    room = b.rooms.get(table) or c.rooms[table]
    await cluster.until(lambda: room.seats[1].connected, "the player counted back")
    assert not room.seats[0].connected  # the host's node is dead


@on_nodes(2)
async def test_a_viewer_too_far_behind_is_disconnected_without_holding_the_others_back(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    player = await cluster.connect(b, "Player")
    slow = await cluster.connect(b, "Slow reader")
    table = await seat_and_start(cluster, host, [player])
    await slow.ok(v1.Spectate(table=table))
    slow.connection.max_buffer = 1_000
    slow.ws.transport.backlog = 2_000  # what it has not read yet
    await act_once(cluster, [host, player], table)
    assert slow.closed and slow.close_code == CloseCode.SLOW_CONSUMER
    assert player.table(table).seq == a.rooms[table].seq


async def lost_in_a_cut(
    cluster: Cluster,
) -> tuple[HarnessNode, HarnessNode, FakeClient, FakeClient, str]:
    """Node A hosts a table (its host connected there, a player at node B), then is cut from
    its store and its bus and finds the table's lease lost; B adopts it. The nodes, the two
    clients and the table."""
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    player = await cluster.connect(b, "Player")
    table = await seat_and_start(cluster, host, [player])
    cluster.take_store_down(a)
    cluster.cut_bus(a)
    a.node.hosting.drop_lost_table(table)  # the renewal's verdict, in the cut
    await cluster.until(lambda: table in b.rooms, "adopted by b", within=20.0)
    return a, b, host, player, table


@on_nodes(2)
async def test_viewers_of_a_table_lost_while_the_bus_is_down_follow_it_once_it_is_back(
    cluster: Cluster,
) -> None:
    """A node finds a table's lease lost while its bus is down (a network cut takes both): its
    viewers there must follow the table to its next host, and it cannot subscribe to the
    table's channel yet. Once the bus is back they are caught up and hear every update after
    (the three-host cut of issue 39 left them waiting for good)."""
    a, b, host, player, table = await lost_in_a_cut(cluster)
    await cluster.bring_store_back(a)
    await cluster.restore_bus(a)
    await cluster.until(lambda: host.table(table).seq == b.rooms[table].seq, "caught up")
    await play_out(cluster, [host, player], table)
    assert host.table(table).seq == b.rooms[table].seq


@on_nodes(2)
async def test_a_viewer_a_node_cannot_catch_up_for_long_is_closed_to_resync_elsewhere(
    cluster: Cluster,
) -> None:
    """The same cut, but the node's bus stays down: its viewer of the lost table is not left
    waiting for good. After ``CATCH_UP_PATIENCE`` the node closes the connection (OUT_OF_STEP)
    so that the client reconnects, wherever it can, and resyncs."""
    _, _, host, player, _ = await lost_in_a_cut(cluster)
    await cluster.advance(CATCH_UP_PATIENCE / 2)
    assert not host.closed, "not before its patience is spent"
    await cluster.until(lambda: host.closed, "closed", within=CATCH_UP_PATIENCE)
    assert host.close_code == CloseCode.OUT_OF_STEP
    assert not player.closed


@on_nodes(3)
async def test_a_player_whose_node_could_not_say_so_at_once_is_counted_back_by_the_adopter(
    cluster: Cluster,
) -> None:
    """The adopter counts every player away; the node where one is still connected hears it,
    but its first word to the adopter fails (its store is out for a moment, as in a network
    cut). It must say it again once it can: else the player stays away for the table, whose
    next round waits for them while they wait for it (the three-host cut of issue 39)."""
    a, b, c = cluster.nodes
    host = await cluster.connect(a, "Host")
    player = await cluster.connect(b, "Player")
    table = await seat_and_start(cluster, host, [player])
    cluster.take_store_down(b)
    cluster.kill(a)
    await cluster.until(lambda: table in c.rooms, "adopted by c", within=3 * cluster.lease_ttl)
    room = c.rooms[table]
    await cluster.advance(0.5)
    assert not room.seats[1].connected, "b could not say so yet"
    await cluster.bring_store_back(b)
    await cluster.until(lambda: room.seats[1].connected, "the player counted back")


async def play_past_two_snapshots(
    cluster: Cluster, host_node: HarnessNode, players: list[FakeClient], table: str
) -> None:
    """Play games at ``table`` (its first started) until its log is past two snapshots."""
    while True:
        await play_out(cluster, players, table)
        if len(await host_node.stores.logs.read(table)) > 2 * SNAPSHOT_EVERY:
            return
        for client in players:
            await client.ok(v1.SetReady(table=table))
        await players[0].ok(v1.StartGame(table=table))
        await cluster.settle()


@on_nodes(2)
async def test_a_viewer_told_what_it_missed_is_told_from_the_tables_latest_snapshot(
    cluster: Cluster,
) -> None:
    """As above, at a table with a history: the node reads the table's log from its latest
    snapshot on, not from its start (replaying a day's table for each viewer so told held up
    every table of the node for as long)."""
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    player = await cluster.connect(b, "Player")
    table = await seat_and_start(cluster, host, [player], grace_seconds=2.0)
    await play_past_two_snapshots(cluster, a, [host, player], table)
    snapshot = await a.stores.logs.read_snapshot(table)
    assert snapshot is not None
    reads: list[int] = []
    logs = b.stores.logs
    read = logs.read

    async def noting(table_id: str, after: int = 0, *, held: bool = False) -> list[bytes]:
        reads.append(after)
        return await read(table_id, after, held=held)

    logs.read = noting  # type: ignore[method-assign]
    cluster.pause(b)
    cluster.cut_bus(b)
    await cluster.until(lambda: a.rooms[table].seats[1] is None, "the seat is freed", within=10.0)
    cluster.resume(b)
    await cluster.settle()
    await cluster.restore_bus(b)
    await cluster.until(lambda: table not in player.connection.tables, "the watch ends")
    assert "seat_freed" in player.table(table).event_types()
    assert player.table(table).seq == a.rooms[table].seq
    assert reads and min(reads) >= snapshot[0] - 1, f"read from entry {min(reads) + 1}"


@on_nodes(2)
async def test_a_long_closed_tables_room_is_resumed_from_the_snapshot_its_record_keeps(
    cluster: Cluster,
) -> None:
    """A viewer told from the store that its table closed (its node's bus was down) is told
    from the room the record leaves: a long table's record keeps its latest snapshot, and the
    room is resumed from it, not replayed from the record's whole log (20,000 entries held the
    node's loop 326 ms)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(records, "SNAPSHOT_KEPT_FROM", 2 * SNAPSHOT_EVERY)
        await _close_a_long_table(cluster, patch)


async def _close_a_long_table(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    player = await cluster.connect(b, "Player")
    table = await seat_and_start(cluster, host, [player])
    await play_past_two_snapshots(cluster, a, [host, player], table)
    last = a.rooms[table].seq
    for client in (player, host):
        await client.ok(v1.LeaveTable(table=table))
    await cluster.until(lambda: table not in a.rooms, "the deserted table closes")
    await cluster.settle()
    data = await b.stores.logs.game_record(table)
    assert data is not None
    record = records.decode_table_record(data)
    assert record.snapshot is not None, "a long table's record keeps its latest snapshot"
    assert record.snapshot[0] > 2 * SNAPSHOT_EVERY - SNAPSHOT_EVERY

    def replayed(entries: list[bytes]) -> None:
        raise AssertionError("the record's whole log replayed")

    monkeypatch.setattr(fanout, "rebuild", replayed)
    room = await b.node.fanout._room_as_logged(table)
    assert room is not None and room.status == "closed" and room.seq > last
