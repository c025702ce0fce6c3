"""Bots the server starts at a table: they stay for the next game, have distinct names, and the
host can remove one."""

from __future__ import annotations

import asyncio
import time

import pytest

from blackdrez.clients.bots import BOT_CLIENT
from blackdrez.clients.client import Client, ServerError
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.app import GameServer
from tests.server.helpers import games_started, play_out


async def table_with_bots(host: Client, bots: int, **options: object) -> str:
    """A table of ``1 + bots`` seats, its empty seats filled with server bots (all seated)."""
    options.setdefault("round_pause_seconds", 0.0)
    joined = await host.request(
        v1.CreateTable(options=v1.TableOptions(seats=1 + bots, **options))  # type: ignore[arg-type]
    )
    table = joined.table.id
    await host.request(v1.AddBots(table=table, count=bots))
    state = host.tables[table]
    await host.wait_until(lambda: all(seat is not None for seat in state.info.seats), timeout=30)
    return table


async def play_a_game(host: Client, table: str) -> None:
    state = host.tables[table]
    await host.request(v1.SetReady(table=table))
    games = games_started(state)
    await host.request(v1.StartGame(table=table))
    await host.wait_until(lambda: games_started(state) > games)
    await play_out(host, table)


async def test_server_bots_stay_seated_and_play_the_next_game(server, connect) -> None:
    host = await connect(server, name="Host")
    # A long turn timer: a bot that stopped playing would hold the second game up for minutes.
    table = await table_with_bots(host, 2, turn_seconds=600.0, max_rounds=2)
    await play_a_game(host, table)
    state = host.tables[table]
    await asyncio.sleep(0.3)  # a bot that quits after one game would be gone by now
    assert all(seat is not None and seat.connected for seat in state.info.seats)
    assert all(seat.ready for seat in state.info.seats[1:])
    assert len(server._bots) == 2
    started = time.monotonic()
    await play_a_game(host, table)
    assert time.monotonic() - started < 60
    assert state.view["result"]["rounds"] == 2
    assert all(seat is not None and seat.connected for seat in state.info.seats)


async def test_bots_at_a_table_have_distinct_names_with_their_strategy(server, connect) -> None:
    host = await connect(server, name="Host")
    joined = await host.request(v1.CreateTable(options=v1.TableOptions(seats=8)))
    table = joined.table.id
    await host.request(v1.AddBots(table=table, count=3, strategy="threshold"))
    await host.request(v1.AddBots(table=table, count=4, strategy="bust_probability"))
    state = host.tables[table]
    await host.wait_until(lambda: all(seat is not None for seat in state.info.seats), timeout=30)
    names = [seat.name for seat in state.info.seats[1:]]
    assert len(set(names)) == 7, names
    assert sum("threshold" in name for name in names) == 3
    assert sum("bust odds" in name for name in names) == 4


async def test_the_host_removes_a_bot_and_it_disconnects(server: GameServer, connect) -> None:
    host = await connect(server, name="Host")
    guest = await connect(server, name="Guest")
    table = await table_with_bots(host, 2)
    await guest.request(v1.Spectate(table=table))
    state = host.tables[table]
    with pytest.raises(ServerError) as error:
        await guest.request(v1.RemoveBot(table=table, seat=1))
    assert error.value.code == ErrorCode.NOT_HOST
    with pytest.raises(ServerError) as error:
        await host.request(v1.RemoveBot(table=table, seat=0))
    assert error.value.code == ErrorCode.BAD_MESSAGE
    assert state.info.seats[0] is not None
    await host.request(v1.RemoveBot(table=table, seat=2))
    await host.wait_until(lambda: state.info.seats[2] is None)
    freed = [e.event for e in state.events if e.event["type"] == "seat_freed"]
    assert freed == [{"type": "seat_freed", "seat": 2, "reason": "kicked"}]
    deadline = time.monotonic() + 10
    while len(server._bots) != 1:
        assert time.monotonic() < deadline, "the removed bot did not stop"
        await asyncio.sleep(0.05)
    # The seat is free again: the host can add another bot there.
    await host.request(v1.AddBots(table=table))
    await host.wait_until(lambda: state.info.seats[2] is not None, timeout=30)


async def test_a_bot_removed_during_a_round_leaves_after_it(server, connect) -> None:
    host = await connect(server, name="Host")
    table = await table_with_bots(host, 2, max_rounds=1, turn_seconds=600.0)
    state = host.tables[table]
    await host.request(v1.SetReady(table=table))
    await host.request(v1.StartGame(table=table))
    await host.wait_until(lambda: state.view is not None)
    await host.request(v1.RemoveBot(table=table, seat=1))
    await play_out(host, table)
    await host.wait_until(lambda: state.info.seats[1] is None)
    assert state.view["phase"] == "over"


async def test_a_server_given_no_bot_client_refuses_bots_and_changes_nothing(connect) -> None:
    from blackdrez.server.app import Settings

    server = GameServer(Settings(port=0, ping_interval=None))  # no bot_client: an embedder's
    await server.start()
    try:
        host = await connect(server, name="Ann")
        created = await host.request(v1.CreateTable(options=v1.TableOptions(seats=4)))
        table = created.table.id
        seq = host.tables[table].seq
        with pytest.raises(ServerError) as error:
            await host.request(v1.AddBots(table=table, count=2))
        assert error.value.code == ErrorCode.UNAVAILABLE
        assert server.node.rooms[table].seats[1:] == [None, None, None]
        assert host.tables[table].seq == seq
    finally:
        await server.stop()


async def test_quick_add_bots_requests_start_no_more_bots_than_seats(
    server: GameServer, connect, caplog: pytest.LogCaptureFixture
) -> None:
    """Four ``add_bots`` sent at once to a table with one free seat: before, all four were
    answered ``ok`` and four bot clients started, three of which could not sit down (each
    leaving a "Task exception was never retrieved" traceback). A bot on its way holds its seat."""
    host = await connect(server, name="Host")
    table = (await host.request(v1.CreateTable(options=v1.TableOptions(seats=2)))).table.id
    answers = await asyncio.gather(
        *(host.request(v1.AddBots(table=table, count=1)) for _ in range(4)),
        return_exceptions=True,
    )
    oks = [a for a in answers if isinstance(a, v1.Ok)]
    refusals = [a.code for a in answers if isinstance(a, ServerError)]
    assert len(oks) == 1 and refusals == [ErrorCode.TABLE_FULL] * 3, answers
    state = host.tables[table]
    await host.wait_until(lambda: all(seat is not None for seat in state.info.seats), timeout=30)
    await asyncio.sleep(0.3)
    assert len(server._bots) == 1
    assert "never retrieved" not in caplog.text
    assert server.node.hosting.bots.coming == {}


async def test_a_host_who_left_a_table_of_bots_is_its_host_no_more(server, connect) -> None:
    """The host leaves mid-game while only bots remain: the table keeps naming them (the next
    human to sit down becomes host) but they may not add or remove bots or start games."""
    host = await connect(server, name="Host")
    table = await table_with_bots(host, 2, turn_seconds=600.0)
    await host.request(v1.SetReady(table=table))
    await host.request(v1.StartGame(table=table))
    await host.request(v1.LeaveTable(table=table))
    room = server.node.rooms[table]
    await asyncio.sleep(0.1)
    for message in (v1.AddBots(table=table, count=1), v1.RemoveBot(table=table, seat=1)):
        with pytest.raises(ServerError) as refused:
            await host.request(message)
        assert refused.value.code == ErrorCode.NOT_HOST, message
    assert sum(seat is not None and seat.bot for seat in room.seats) == 2  # none added
    assert len(server._bots) == 2


async def test_a_table_a_bot_client_hosted_closes_when_it_leaves_its_server_bots(
    server: GameServer, connect
) -> None:
    """A bot author's bot (``client`` says bot) hosts a table, adds a server bot, plays, and
    leaves. No human ever sat there, so the server's bot kept the table open for ever (a table
    of bots stays open while they sit); it now leaves once only bots are left and the host is
    gone, and the table closes."""
    host = await connect(server, name="Author's bot", client_name=BOT_CLIENT)
    table = await table_with_bots(host, 1, turn_seconds=600.0, max_rounds=1)
    await play_a_game(host, table)
    await host.request(v1.LeaveTable(table=table))
    deadline = time.monotonic() + 15
    while table in server.node.rooms:
        assert time.monotonic() < deadline, server.node.rooms[table].seats
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    assert not server._bots, "the server's bot is gone"


async def test_server_bots_stay_at_a_table_of_bots_whose_host_stays(
    server: GameServer, connect
) -> None:
    host = await connect(server, name="Author's bot", client_name=BOT_CLIENT)
    table = await table_with_bots(host, 1, turn_seconds=600.0, max_rounds=1)
    await play_a_game(host, table)
    await asyncio.sleep(0.5)
    assert table in server.node.rooms and len(server._bots) == 1
    await play_a_game(host, table)  # the bot plays the next game


def slow_server_bots(server: GameServer, delay: float = 0.5) -> None:
    """The server's bots take ``delay`` seconds before they connect (as over a slow network)."""
    play = server.bot_client
    assert play is not None

    async def slow(url: str, **options: object) -> object:
        await asyncio.sleep(delay)
        return await play(url, **options)

    server.bot_client = slow


async def test_seats_held_for_the_hosts_bots_are_taken_for_anyone_else(
    server: GameServer, connect, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, any bot that sat down used up the seat held for a bot the host added, and a
    person took it outright: the host's bot then found the table full and never came."""
    slow_server_bots(server)
    host = await connect(server, name="Host")
    someone = await connect(server, name="Someone")
    foreign = await connect(server, name="Their bot", client_name=BOT_CLIENT)
    table = (await host.request(v1.CreateTable(options=v1.TableOptions(seats=3)))).table.id
    await host.request(v1.AddBots(table=table, count=2))
    for latecomer in (foreign, someone):
        with pytest.raises(ServerError) as refused:
            await latecomer.request(v1.JoinTable(table=table))
        assert refused.value.code == ErrorCode.TABLE_FULL
        assert "held for a bot" in refused.value.error.message
    state = host.tables[table]
    await host.wait_until(lambda: all(seat is not None for seat in state.info.seats), timeout=30)
    seated = {seat.player for seat in state.info.seats[1:]}
    assert not seated & {foreign.player, someone.player}
    assert all(seat.bot for seat in state.info.seats[1:])
    assert server.node.hosting.bots.coming == {}
    assert "stopped" not in caplog.text  # no server bot was turned away


async def test_a_foreign_bot_takes_a_seat_nobody_holds_and_the_hosts_bot_its_own(
    server: GameServer, connect
) -> None:
    slow_server_bots(server)
    host = await connect(server, name="Host")
    foreign = await connect(server, name="Their bot", client_name=BOT_CLIENT)
    table = (await host.request(v1.CreateTable(options=v1.TableOptions(seats=3)))).table.id
    await host.request(v1.AddBots(table=table, count=1))
    joined = await foreign.request(v1.JoinTable(table=table))
    assert joined.seat == 1
    assert len(server.node.hosting.bots.coming[table]) == 1  # still held for the host's bot
    state = host.tables[table]
    await host.wait_until(lambda: state.info.seats[2] is not None, timeout=30)
    assert state.info.seats[2].player != foreign.player and state.info.seats[2].bot
    assert server.node.hosting.bots.coming == {}


async def test_a_seat_held_for_a_bot_that_never_comes_is_free_again_after_a_while(
    server: GameServer, connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("blackdrez.server.node.bots.BOT_ARRIVAL", 0.3)
    slow_server_bots(server, delay=60.0)
    host = await connect(server, name="Host")
    someone = await connect(server, name="Someone")
    table = (await host.request(v1.CreateTable(options=v1.TableOptions(seats=2)))).table.id
    await host.request(v1.AddBots(table=table, count=1))
    with pytest.raises(ServerError):
        await someone.request(v1.JoinTable(table=table))
    await asyncio.sleep(0.4)
    assert (await someone.request(v1.JoinTable(table=table))).seat == 1
