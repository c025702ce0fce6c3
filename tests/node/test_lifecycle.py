"""A table's lifecycle through nodes (open, seated, playing, between rounds, finished, closed)
with its timers run by the clock: turn timers, the pause between rounds, away grace."""

from __future__ import annotations

from blackdrez.protocol import v1
from blackdrez.server.table.lifecycle import TableStatus
from blackdrez.server.table.records import decode_table_record
from blackdrez.server.testing.node_harness import Cluster, on_nodes
from tests.node.helpers import act_once, phase, seat_and_start


@on_nodes(2)
async def test_a_table_goes_through_its_whole_lifecycle_across_two_nodes(cluster: Cluster) -> None:
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    guest = await cluster.connect(b, "Guest")
    options = v1.TableOptions(seats=2, max_rounds=2, round_pause_seconds=3.0, turn_seconds=5.0)
    joined = await host.ok(v1.CreateTable(options=options))
    table = joined.table.id
    room = a.rooms[table]
    assert room.status is TableStatus.OPEN
    await guest.ok(v1.JoinTable(table=table))
    for player in (host, guest):
        await player.ok(v1.SetReady(table=table))
    await host.ok(v1.StartGame(table=table))
    await cluster.settle()
    assert room.status is TableStatus.PLAYING
    assert guest.table(table).info.status == "playing"
    while room.status is TableStatus.PLAYING:  # the first round: nobody acts, the timer does
        await cluster.advance(options.turn_seconds)
    assert room.status is TableStatus.BETWEEN_ROUNDS
    await cluster.advance(options.round_pause_seconds)
    assert room.status is TableStatus.PLAYING and room.info().round == 2
    while phase(host, table) != "over":
        await act_once(cluster, [host, guest], table)
        if room.status is TableStatus.BETWEEN_ROUNDS:
            await cluster.advance(options.round_pause_seconds)
    assert room.status is TableStatus.FINISHED
    assert guest.table(table).info.status == "finished"
    await guest.ok(v1.LeaveTable(table=table))
    await host.ok(v1.LeaveTable(table=table))
    await cluster.until(lambda: table not in a.rooms, "the deserted table closes")
    await cluster.settle()
    record = await b.stores.logs.game_record(table)  # retired: its record replaces its log
    assert record is not None and decode_table_record(record)
    assert await b.stores.logs.read(table) == []
    assert await b.stores.lobby.get(table) is None


@on_nodes(2)
async def test_a_player_who_goes_away_keeps_the_seat_for_the_grace_then_loses_it(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    guest = await cluster.connect(b, "Guest")
    options = v1.TableOptions(seats=3, grace_seconds=20.0)
    table = (await host.ok(v1.CreateTable(options=options))).table.id
    await guest.ok(v1.JoinTable(table=table))
    await guest.leave()  # the connection closes: node b tells the host
    room = a.rooms[table]
    assert room.seats[1] is not None and not room.seats[1].connected
    await cluster.advance(options.grace_seconds / 2)
    back = await cluster.reconnect(guest, b)  # back within the grace: the seat is still theirs
    assert back.seated == [table]
    await back.resync(table)
    await cluster.settle()
    assert room.seats[1].connected
    await back.leave()
    await cluster.advance(options.grace_seconds)
    assert room.seats[1] is None  # freed after the grace
    assert "seat_freed" in host.table(table).event_types()


@on_nodes(2)
async def test_a_game_left_with_one_player_ends_after_the_wait_for_players(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    guest = await cluster.connect(b, "Guest")
    table = await seat_and_start(
        cluster, host, [guest], grace_seconds=10.0, turn_seconds=5.0, round_pause_seconds=1.0
    )
    await guest.ok(v1.LeaveTable(table=table))  # plays on by default, freed at the round's end
    room = a.rooms[table]
    await cluster.until(
        lambda: room.status in (TableStatus.WAITING, TableStatus.FINISHED),
        "the table waits for players",
        within=60.0,
    )
    await cluster.until(lambda: room.status is TableStatus.FINISHED, "the game ends", within=30.0)
    assert phase(host, table) == "over"
