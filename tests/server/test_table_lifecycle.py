"""The table lifecycle over real sockets: what a player, a spectator and the node's log see.

The rules themselves are tested on the table core through the in-memory harness
(``tests/server/test_lifecycle.py``); these tests check that the node follows them end to end.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from blackdrez.clients.bots import BOT_CLIENT
from blackdrez.clients.client import Client, ServerError
from blackdrez.protocol import v1
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.server.node import node as node_module
from blackdrez.server.table.commands import decode_entry
from tests.server.helpers import game_over, seat_and_start


async def finish_round(players: list[Client], table: str) -> None:
    """Whoever is on turn withdraws until the round in play has ended."""
    state = players[0].tables[table]

    def round_over() -> bool:
        return state.view["phase"] != "playing"

    while not round_over():
        await players[0].wait_until(
            lambda: round_over() or any(p.tables[table].legal for p in players)
        )
        mover = next((p for p in players if p.tables[table].legal), None)
        if mover is None:
            continue
        seq = state.seq
        try:
            await mover.act(table, {"type": "withdraw"})
        except ServerError as error:
            assert error.code == ErrorCode.NOT_YOUR_TURN  # a view one event old: look again
            continue
        await players[0].wait_until(lambda s=seq: state.seq > s)


async def test_a_player_who_unreadies_freezes_nothing_and_the_game_ends(server, connect) -> None:
    """Issue 9 section 2: with no pause between rounds, a seat that un-readies used to make
    the table start-and-fail the next round on every loop turn, logging each attempt."""
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b], round_pause_seconds=0.0, grace_seconds=3.0)
    await b.request(v1.SetReady(table=table, ready=False))
    await finish_round([a, b], table)
    logged = len(await server.store.logs.read(table))
    await asyncio.sleep(0.5)
    assert len(await server.store.logs.read(table)) == logged, "nothing logged while waiting"
    assert not game_over(a, table)
    await a.wait_until(lambda: game_over(a, table), timeout=10)
    result = a.tables[table].view["result"]
    assert result["reason"] == "players"
    assert {seat for place in result["ranking"] for seat in place["seats"]} == {0, 1}
    entries = [decode_entry(e) for e in await server.store.logs.read(table)]
    # Two ticks as a rule (the deal that finds too few ready, the end of the wait); three were
    # seen once in about 60 runs on a loaded machine (not explained yet: the message lists them
    # all). The bug this guards against logged a tick on every loop turn.
    assert sum(type(e.command).__name__ == "Tick" for e in entries) <= 3, " ".join(
        f"{type(e.command).__name__}@{e.now - entries[0].now:.3f}" for e in entries
    )


async def test_requests_that_change_nothing_are_not_logged(server, connect) -> None:
    host, guest = [await connect(server, name=n) for n in ("H", "G")]
    joined = await host.request(v1.CreateTable(options=v1.TableOptions(seats=3)))
    table = joined.table.id
    await guest.request(v1.JoinTable(table=table))
    await guest.request(v1.SetReady(table=table))
    logged = len(await server.store.logs.read(table))
    seq = guest.tables[table].seq
    await guest.request(v1.SetReady(table=table))
    await guest.request(v1.JoinTable(table=table))
    await guest.resync(table)
    watcher = await connect(server, name="W")
    await watcher.request(v1.Spectate(table=table))
    await watcher.request(v1.Spectate(table=table))
    assert len(await server.store.logs.read(table)) == logged + 1, "only the first spectate"
    assert guest.tables[table].seq == seq


async def test_a_table_closes_when_its_host_leaves_it_to_a_spectator(server, connect) -> None:
    """Issue 9 section 4: host leaves, then the last spectator leaves: the table used to stay
    listed as open forever. Spectators alone do not keep a table open."""
    host, watcher, lobby = [await connect(server, name=n) for n in ("H", "W", "L")]
    await lobby.request(v1.WatchLobby())
    joined = await host.request(v1.CreateTable(options=v1.TableOptions()))
    table = joined.table.id
    await watcher.request(v1.Spectate(table=table))
    await lobby.wait_until(lambda: table in lobby.lobby)
    await host.request(v1.LeaveTable(table=table))
    await lobby.wait_until(lambda: table not in lobby.lobby, timeout=5)
    await watcher.wait_until(
        lambda: any(e.event["type"] == "table_closed" for e in watcher.tables[table].events)
    )
    with pytest.raises(ServerError) as error:
        await watcher.request(v1.LeaveTable(table=table))
    assert error.value.code == ErrorCode.NOT_FOUND
    assert table not in server.node.rooms


async def test_the_sweeper_closes_a_table_whose_timer_was_lost(
    server, connect, monkeypatch
) -> None:
    monkeypatch.setattr(node_module, "SWEEP_INTERVAL", 0.1)
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b], grace_seconds=0.3, turn_seconds=60)
    await a.request(v1.LeaveTable(table=table))
    await b.request(v1.LeaveTable(table=table))  # nobody left: the game ends at its wait
    server.node.hosting._timers.pop(table).cancel()  # the timer that would end it is lost
    deadline = asyncio.get_running_loop().time() + 10
    while table in server.node.rooms:
        assert asyncio.get_running_loop().time() < deadline, "the sweeper closed the table"
        await asyncio.sleep(0.05)
    await server.node._settled()
    assert await server.store.lobby.get(table) is None


async def test_a_table_whose_timer_spins_is_stopped_and_reported(server, connect, caplog) -> None:
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b], turn_seconds=60)
    room = server.node.rooms[table]
    room.next_deadline = lambda: 0.0  # a bug: the room's deadline is always due
    await b.request(v1.SetReady(table=table, ready=False))  # any change re-arms the timer
    await a.wait_until(
        lambda: any(e.event["type"] == "table_closed" for e in a.tables[table].events),
        timeout=10,
    )
    assert "blackdrez_tables_stopped_total 1.0" in server.metrics.render().decode()
    assert any("stopped" in r.message and r.levelname == "ERROR" for r in caplog.records)
    assert table not in server.node.rooms
    c, d = [await connect(server, name=n) for n in "CD"]
    other = await seat_and_start(c, [d])
    assert other in server.node.rooms, "the node serves on"


async def test_a_spectator_gets_the_games_recent_events_and_again_after_a_reload(
    server, connect
) -> None:
    """Issue 11 flow bug 12: a spectator's table log started empty, and again on reload."""
    a, b = [await connect(server, name=n) for n in "AB"]
    table = await seat_and_start(a, [b], turn_seconds=60)
    watcher = await connect(server, name="W", record=True)
    await watcher.request(v1.Spectate(table=table))
    reloaded = await connect(server, token=watcher.token, record=True)
    await reloaded.request(v1.Spectate(table=table))
    for client in (watcher, reloaded):
        await client.wait_until(lambda c=client: c.tables[table].seq > 0)
        snapshots = [
            m for m in map(msgspec.json.decode, client.frames) if m.get("type") == "snapshot"
        ]
        recent = snapshots[-1]["recent"]
        assert [n["event"]["type"] for n in recent[:2]] == ["game_started", "round_started"]
        assert recent[-1]["seq"] == snapshots[-1]["seq"]


async def test_a_replaced_connection_that_drops_before_it_resyncs_holds_nothing(
    server, connect
) -> None:
    """A reload opens a new connection with the player's token while the old one is still
    open: the old one is closed (4004, replaced) and its tables are left to the new one, which
    may drop before it resyncs them. The player must still be counted away, their seat freed
    after the grace, and a spectator leave; before, the seat stayed held and the table open
    forever, the spectator counted forever."""
    host = await connect(server, name="Host")
    options = v1.TableOptions(seats=2, grace_seconds=0.3)
    watched = (await host.request(v1.CreateTable(options=options))).table.id
    spec = await connect(server, name="Spec")
    await spec.request(v1.Spectate(table=watched))
    pat = await connect(server, name="Pat")
    alone = (await pat.request(v1.CreateTable(options=options))).table.id
    assert server.node.rooms[watched].spectators == {spec.player}
    again = [await connect(server, token=old.token) for old in (spec, pat)]
    for old in (spec, pat):
        code, _ = await old.closed
        assert code == CloseCode.REPLACED
    for new in again:
        await new.close()  # before any resync
    deadline = asyncio.get_running_loop().time() + 10
    while alone in server.node.rooms or server.node.rooms[watched].spectators:
        assert asyncio.get_running_loop().time() < deadline, (
            f"left held: {alone in server.node.rooms=}, {server.node.rooms[watched].spectators=}"
        )
        await asyncio.sleep(0.05)
    assert server.node.rooms[watched].seats[0] is not None  # the host, still there, untouched


async def test_a_reloaded_connection_keeps_the_old_ones_tables(server, connect) -> None:
    """The other side of the test above: the new connection resyncs the tables after the old
    one closed; the seat is still the player's and the spectator still watches."""
    host = await connect(server, name="Host")
    options = v1.TableOptions(seats=2, grace_seconds=0.3)
    table = (await host.request(v1.CreateTable(options=options))).table.id
    spec = await connect(server, name="Spec")
    await spec.request(v1.Spectate(table=table))
    new_host, new_spec = [await connect(server, token=old.token) for old in (host, spec)]
    for old in (host, spec):
        await old.closed
    await asyncio.sleep(0.5)  # past the grace
    await new_host.resync(table)
    await new_spec.resync(table)
    room = server.node.rooms[table]
    assert room.spectators == {spec.player}
    seat = room.seats[0]
    assert seat is not None and seat.player == host.player and seat.connected


async def test_a_watcher_whose_seat_is_freed_watches_it_no_more(server, connect) -> None:
    """The host removes a bot mid-round: its seat is freed when the round ends. Its connection
    sees that and is no longer a watcher of the seat (before, it went on getting the table's
    updates as that seat, a newcomer's legal actions included)."""
    host, other = [await connect(server, name=n) for n in ("Host", "Other")]
    bot = await connect(server, name="Bot", client_name=BOT_CLIENT)
    table = await seat_and_start(host, [other, bot], turn_seconds=600.0, round_pause_seconds=5.0)
    seat = bot.tables[table].seat
    await host.request(v1.RemoveBot(table=table, seat=seat))
    await finish_round([host, other], table)

    def freed() -> bool:
        events = bot.tables[table].events
        return any(e.event["type"] == "seat_freed" and e.event["seat"] == seat for e in events)

    await bot.wait_until(freed, timeout=10)
    assert table not in server.node.clients[bot.player].tables
    assert bot not in server.node.fanout.watchers.get(table, {})
    seen = bot.tables[table].seq
    newcomer = await connect(server, name="Newcomer")
    await newcomer.request(v1.JoinTable(table=table, seat=seat))
    await newcomer.request(v1.SetReady(table=table))
    await host.wait_until(lambda: host.tables[table].seq > seen + 1)
    await asyncio.sleep(0.2)
    assert bot.tables[table].seq == seen, "updates after the seat was freed"


async def test_a_request_to_a_closed_table_ends_a_watch_left_of_it(server, connect) -> None:
    """Should a node still hold a watch of a closed table (an update lost on the bus), the
    viewer's next request for it answers ``not_found`` and ends the watch with it."""
    host, watcher = [await connect(server, name=n) for n in ("Host", "Watcher")]
    table = (await host.request(v1.CreateTable(options=v1.TableOptions(seats=2)))).table.id
    await watcher.request(v1.Spectate(table=table))
    await host.request(v1.LeaveTable(table=table))
    await watcher.wait_until(
        lambda: any(e.event["type"] == "table_closed" for e in watcher.tables[table].events)
    )
    connection = server.node.clients[watcher.player]
    assert table not in connection.tables  # the close ended it
    server.node.fanout.start_watch(connection, table, None, 0)  # as if the close had been missed
    with pytest.raises(ServerError) as error:
        await watcher.request(v1.LeaveTable(table=table))
    assert error.value.code == ErrorCode.NOT_FOUND
    assert table not in connection.tables and table not in server.node.fanout.watchers
