"""The lobby across nodes: every node lists every node's tables and pushes their changes, quick
join finds a table hosted elsewhere, the bots a host adds come and sit down."""

from __future__ import annotations

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.node.bots import BOT_ARRIVAL
from blackdrez.server.testing.node_harness import WALL_START, Cluster, on_nodes


@on_nodes(2)
async def test_every_node_lists_every_nodes_tables_and_pushes_their_changes(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    watcher = await cluster.connect(b, "Watcher")
    listed = await watcher.ok(v1.WatchLobby())
    assert listed.tables == []
    host = await cluster.connect(a, "Host")
    table = (await host.ok(v1.CreateTable(options=v1.TableOptions(name="Evening")))).table.id
    private = (await host.ok(v1.CreateTable(options=v1.TableOptions(private=True)))).table.id
    await cluster.settle()
    assert watcher.lobby[table].name == "Evening" and private not in watcher.lobby
    tables = await (await cluster.connect(b, "Reader")).ok(v1.ListTables())
    assert [info.id for info in tables.tables] == [table]
    await host.ok(v1.LeaveTable(table=table))
    await cluster.until(lambda: table not in watcher.lobby, "the closed table leaves the lobby")
    await watcher.ok(v1.UnwatchLobby())
    pushed = len(watcher.pushed)
    await host.ok(v1.CreateTable())
    await cluster.settle()
    assert len(watcher.pushed) == pushed  # no longer watching


@on_nodes(2)
async def test_quick_join_sits_at_an_open_table_hosted_elsewhere_or_makes_one(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    table = (await host.ok(v1.CreateTable(options=v1.TableOptions(seats=2)))).table.id
    first = await cluster.connect(b, "First")
    joined = await first.ok(v1.QuickJoin())
    assert joined.table.id == table and a.rooms[table].seat_of(first.player) == 1
    second = await cluster.connect(b, "Second")
    made = await second.ok(v1.QuickJoin())  # the only table is full: a new one, hosted here
    assert made.table.id != table and made.table.id in b.rooms


@on_nodes(2)
async def test_the_bots_a_host_adds_come_and_sit_holding_their_seats_meanwhile(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    host = await cluster.connect(b, "Host")
    table = (await host.ok(v1.CreateTable(options=v1.TableOptions(seats=3)))).table.id
    await host.ok(v1.AddBots(table=table, count=2))
    await cluster.until(lambda: len(cluster.bots) == 2, "the bots connect")
    await cluster.until(
        lambda: all(seat is not None for seat in b.rooms[table].seats), "the bots sit down"
    )
    assert all(seat.bot for seat in b.rooms[table].seats[1:])
    late = await cluster.connect(a, "Late")
    full = await late.request(v1.JoinTable(table=table))
    assert isinstance(full, v1.Error) and full.code == ErrorCode.TABLE_FULL


@on_nodes(1)
async def test_seats_held_for_bots_on_their_way_are_refused_to_others_until_they_lapse(
    cluster: Cluster,
) -> None:
    (a,) = cluster.nodes
    host = await cluster.connect(a, "Host")
    table = (await host.ok(v1.CreateTable(options=v1.TableOptions(seats=2)))).table.id
    cluster.bots_come = False
    await host.ok(v1.AddBots(table=table, count=1))
    other = await cluster.connect(a, "Other")
    held = await other.request(v1.JoinTable(table=table))
    assert isinstance(held, v1.Error) and held.code == ErrorCode.TABLE_FULL
    await cluster.advance(BOT_ARRIVAL)
    await other.ok(v1.JoinTable(table=table))


@on_nodes(1, bots=False)
async def test_a_node_that_cannot_start_bots_says_so(cluster: Cluster) -> None:
    (a,) = cluster.nodes
    host = await cluster.connect(a, "Host")
    table = (await host.ok(v1.CreateTable())).table.id
    refused = await host.request(v1.AddBots(table=table, count=1))
    assert isinstance(refused, v1.Error) and refused.code == ErrorCode.UNAVAILABLE


DAY = 24 * 3600.0
BEFORE_MIDNIGHT = (WALL_START // DAY + 1) * DAY - 30.0
"""Half a minute before a day ends (UTC)."""


@on_nodes(2, wall=BEFORE_MIDNIGHT)
async def test_solitaire_sessions_daily_deals_and_leaderboards_through_any_node(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    player = await cluster.connect(a, "Solo")
    session = await player.ok(v1.StartSolitaire(game="blue_jacket"))
    assert session.table.id in a.rooms and session.table.ranked
    numbered = await player.ok(v1.StartSolitaire(game="blue_jacket", deal=7))
    assert not numbered.table.ranked
    daily = await player.ok(v1.GetDaily(game="blue_jacket"))
    assert daily.seed is None  # sealed until the day ends
    again = await (await cluster.connect(b, "Other")).ok(v1.GetDaily(game="blue_jacket"))
    assert again.commitment == daily.commitment  # one deal for everyone, on every node
    first = await player.ok(v1.StartSolitaire(game="blue_jacket", daily=True))
    assert first.table.ranked and first.table.daily == daily.day
    running = await player.request(v1.StartSolitaire(game="blue_jacket", daily=True))
    assert isinstance(running, v1.Error) and running.code == ErrorCode.GAME_RUNNING
    board = await player.ok(v1.GetLeaderboard(game="blue_jacket"))
    assert board.entries == []
    missing = await player.request(v1.GetRecord(record="nothing"))
    assert isinstance(missing, v1.Error) and missing.code == ErrorCode.NOT_FOUND
    await cluster.advance(60.0)
    past = await player.ok(v1.GetDaily(game="blue_jacket", day=daily.day))
    assert past.seed is not None  # revealed once its day has ended
