"""`blackdrez bot` and `blackdrez bots` against a real server."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import msgspec

from blackdrez.clients.bots import note_names
from blackdrez.protocol import v1
from tests.server.helpers import games_started, play_out


async def run_cli(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "blackdrez.tools.cli", *args,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode, out.decode()


async def quick_bot(server, stderr: int = subprocess.DEVNULL) -> asyncio.subprocess.Process:
    """``blackdrez bot --quick`` against ``server``, running (the caller kills it)."""
    url = f"ws://127.0.0.1:{server.port}/"
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "blackdrez.tools.cli", "bot", "--url", url, "--quick",
        stdout=subprocess.DEVNULL, stderr=stderr,
    )  # fmt: skip


async def test_bots_swarm_prints_a_summary(server) -> None:
    url = f"ws://127.0.0.1:{server.port}/"
    code, out = await run_cli("bots", "--url", url, "--tables", "4", "--per-table", "3")
    assert code == 0, out
    assert "tables: 4, bots: 12, finished games: 4" in out
    assert "mismatches: 0" in out
    assert "every pot and ranking agrees" in out


async def test_one_bot_joins_a_table_and_verifies_the_game(server, connect) -> None:
    host = await connect(server, name="Host")
    joined = await host.request(
        v1.CreateTable(options=v1.TableOptions(seats=2, round_pause_seconds=0))
    )
    table = joined.table.id
    url = f"ws://127.0.0.1:{server.port}/"
    bot = asyncio.create_task(
        run_cli("bot", "--url", url, "--table", table, "--strategy", "bust_probability")
    )
    await host.wait_until(lambda: host.tables[table].info.seats[1] is not None, timeout=30)
    await host.request(v1.SetReady(table=table))
    await host.request(v1.StartGame(table=table))
    await host.wait_until(lambda: host.tables[table].view is not None)
    await play_out(host, table)
    code, out = await bot
    assert code == 0, out
    assert f"table {table}, seat 2" in out
    assert "fairness proof: verified" in out


async def test_the_bots_summary_names_the_other_players(server, connect) -> None:
    """The ranking ``blackdrez bot`` prints calls every player by the name the table showed,
    not "seat N" (only the bot's own seat is given, counted from 1)."""
    ada = await connect(server, name="Ada")
    ben = await connect(server, name="Ben")
    options = v1.TableOptions(seats=3, round_pause_seconds=0, max_rounds=2)
    table = (await ada.request(v1.CreateTable(options=options))).table.id
    await ben.request(v1.JoinTable(table=table))
    url = f"ws://127.0.0.1:{server.port}/"
    bot = asyncio.create_task(run_cli("bot", "--url", url, "--table", table, "--name", "Zed"))
    state = ada.tables[table]
    await ada.wait_until(lambda: state.info.seats[2] is not None, timeout=30)
    for player in (ada, ben):
        await player.request(v1.SetReady(table=table))
    await ada.request(v1.StartGame(table=table))
    await ada.wait_until(lambda: state.view is not None)
    await ben.wait_until(lambda: ben.tables[table].view is not None)
    await asyncio.gather(play_out(ada, table), play_out(ben, table))
    code, out = await bot
    assert code == 0, out
    lines = out.splitlines()
    assert f"Zed at table {table}, seat 3: " in out
    ranking = [line for line in lines if line.startswith("  ")]
    assert ranking, out
    assert not any("seat " in line for line in ranking), out
    named = " ".join(ranking)
    assert all(name in named for name in ("Ada", "Ben", "Zed")), out


def test_a_bot_keeps_the_name_of_a_seat_its_player_left() -> None:
    names: dict[int, str] = {}
    seats = [v1.SeatInfo(player="p1", name="Ada"), v1.SeatInfo(player="p2", name="Ben")]
    note_names(names, v1.TableInfo(id="t", game="blackdrez", name="t", status="playing",
                                   seats=seats, host="p1"))  # fmt: skip
    left = v1.TableInfo(
        id="t", game="blackdrez", name="t", status="playing", seats=[seats[0], None], host="p1"
    )
    note_names(names, left)
    assert names == {0: "Ada", 1: "Ben"}
    held = [v1.HeldSeat(seat=2, player="p3", name="Cy")]
    note_names(names, msgspec.structs.replace(left, seats=[None, None, None], held=held))
    assert names == {0: "Ada", 1: "Ben", 2: "Cy"}
    note_names(names, None)
    assert names == {0: "Ada", 1: "Ben", 2: "Cy"}


async def test_bot_needs_a_table_or_quick() -> None:
    code, out = await run_cli("bot", "--url", "ws://127.0.0.1:9/")
    assert code == 2
    assert "--table ID or --quick" in out


async def test_bot_and_bots_without_a_server_say_so_in_one_line() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"ws://127.0.0.1:{port}/"
    for argv in (("bot", "--url", url, "--quick"), ("bots", "--url", url, "--tables", "3")):
        code, out = await run_cli(*argv)
        assert code == 2, out
        assert out.strip().splitlines() == [
            f"blackdrez {argv[0]}: cannot connect to {url}: connection refused "
            "(is the server running?)"
        ]


async def test_a_bot_plays_several_games_when_asked(server, connect) -> None:
    host = await connect(server, name="Host")
    options = v1.TableOptions(seats=2, round_pause_seconds=0, max_rounds=1)
    table = (await host.request(v1.CreateTable(options=options))).table.id
    url = f"ws://127.0.0.1:{server.port}/"
    bot = asyncio.create_task(run_cli("bot", "--url", url, "--table", table, "--games", "2"))
    state = host.tables[table]
    await host.wait_until(lambda: state.info.seats[1] is not None, timeout=30)
    assert state.info.seats[1].name.endswith("(threshold)")
    for _ in range(2):
        await host.wait_until(lambda: state.info.seats[1].ready, timeout=30)
        await host.request(v1.SetReady(table=table))
        games = games_started(state)
        await host.request(v1.StartGame(table=table))
        await host.wait_until(lambda g=games: games_started(state) > g)
        await play_out(host, table)
    code, out = await bot
    assert code == 0, out
    assert f"table {table}, seat 2: 2 games, the last with" in out
    assert "fairness proof: verified" in out


async def test_a_bot_that_made_its_table_by_quick_join_starts_the_game(server, connect) -> None:
    """With no open table, ``blackdrez bot --quick`` creates one and is its host: only it may
    start the game, so it starts one once a second player is ready (it waited for ever)."""
    bot = await quick_bot(server)
    try:
        person = await connect(server, name="Person")
        async with asyncio.timeout(30):
            while not (tables := (await person.request(v1.ListTables())).tables):
                await asyncio.sleep(0.1)
        table = tables[0].id
        await person.request(v1.JoinTable(table=table))
        state = person.tables[table]
        assert state.info.host != person.player
        await person.request(v1.SetReady(table=table))
        await person.wait_until(lambda: games_started(state) == 1, timeout=10)
        assert state.info.status == "playing"
    finally:
        bot.kill()
        await bot.wait()


async def test_a_waiting_bot_says_at_which_table_it_sits(server, connect) -> None:
    """``blackdrez bot --quick`` may wait long for an opponent: it says at once where it sits
    (its table's id, and that it made the table), so its author can send a player there."""
    bot = await quick_bot(server, stderr=subprocess.PIPE)
    try:
        assert bot.stderr is not None
        async with asyncio.timeout(30):
            line = (await bot.stderr.readline()).decode()
        person = await connect(server, name="Person")
        tables = (await person.request(v1.ListTables())).tables
        assert [t.id for t in tables] == [tables[0].id]
        assert f"seated at table {tables[0].id}, seat 1, a table it made" in line, line
    finally:
        bot.kill()
        await bot.wait()
