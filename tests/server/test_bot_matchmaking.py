"""Bots that find their games through the matchmaking queue (``run_bot(find=True)``, ``blackdrez
bot --find``): they queue, sit at the table the queue makes, play its game (the server starts it)
and leave; a bot that wants more games queues again rather than staying. Bots and people share
the one queue."""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys

import pytest

from blackdrez.clients.bots import run_bot
from blackdrez.protocol import v1
from blackdrez.server.app import GameServer
from blackdrez.server.node import matchmaking as node_matchmaking
from tests.server.helpers import play_out

GAME = 120.0
"""Seconds a test gives a game of two at a table the queue made (a few seconds at the pause
below; about 25 s at the queue's own 3 s between rounds)."""


@pytest.fixture(autouse=True)
def short_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The queue's tables pause 0.2 s between rounds here (3 s as deployed): what these tests
    check is the queue and the bots, not the pause, and CI runs them one after another."""
    monkeypatch.setattr(node_matchmaking, "QUEUE_ROUND_PAUSE", 0.2)


def url_of(server: GameServer) -> str:
    """The WebSocket address of ``server``."""
    return f"ws://127.0.0.1:{server.port}/"


async def listed(watcher, table: str) -> bool:
    """Whether the lobby still lists ``table``."""
    return table in {t.id for t in (await watcher.request(v1.ListTables())).tables}


async def test_two_bots_that_find_a_game_of_two_play_it_together(server, connect) -> None:
    sat: list[tuple[str, int, bool]] = []

    def seated(table: str, seat: int, host: bool) -> None:
        sat.append((table, seat, host))

    bots = [
        run_bot(url_of(server), find=True, seats=2, games=1, name=name, seated=seated)
        for name in ("Ada", "Ben")
    ]
    ada, ben = await asyncio.wait_for(asyncio.gather(*bots), GAME)
    assert ada.table == ben.table != "", "the queue seated them at one table"
    assert {ada.seat, ben.seat} == {0, 1}
    assert sorted(sat) == sorted([(ada.table, ada.seat, False), (ben.table, ben.seat, False)])
    for result in (ada, ben):
        assert result.games == 1 and not result.removed
        assert result.fair is True, result.problem
        assert result.final["phase"] == "over" and result.actions > 0
        assert result.names == {ada.seat: "Ada", ben.seat: "Ben"}
    assert ada.final == ben.final, "one game, seen alike from both seats"
    assert await server.node.store.matchmaking.waiting(0.0) == [], "nobody queues any more"
    watcher = await connect(server, name="Watcher")
    async with asyncio.timeout(10):  # both left: the table closes
        while await listed(watcher, ada.table):
            await asyncio.sleep(0.1)


async def test_a_bot_that_wants_more_games_queues_again_for_each(server) -> None:
    tables: dict[str, list[str]] = {"Ada": [], "Ben": []}
    bots = [
        run_bot(
            url_of(server),
            find=True,
            seats=2,
            games=2,
            name=name,
            chat=False,
            seated=lambda table, seat, host, name=name: tables[name].append(table),
        )
        for name in tables
    ]
    ada, ben = await asyncio.wait_for(asyncio.gather(*bots), 2 * GAME)
    assert ada.games == ben.games == 2
    assert ada.fair and ben.fair
    assert tables["Ada"] == tables["Ben"], "the only two queueing, twice matched together"
    first, second = tables["Ada"]
    assert first != second, "a new table for the second game, not the same one again"
    assert ada.table == ben.table == second


async def test_a_bot_and_a_person_who_ask_for_two_seats_are_matched(server, connect) -> None:
    person = await connect(server, name="Pat")
    await person.find_game(2)
    bot = asyncio.create_task(run_bot(url_of(server), find=True, seats=2, games=1, name="Bot"))
    try:
        found = await person.wait_for_match(30)
        assert found.players == ["Pat", "Bot"] and found.bots == 0, "the person came first"
        joined = await person.request(v1.JoinTable(table=found.table))
        assert joined.seat == found.seat == 0
        state = person.tables[found.table]
        await person.wait_until(lambda: state.view is not None, 30)
        assert [bool(s and s.bot) for s in state.info.seats] == [False, True]
        await play_out(person, found.table)
        result = await asyncio.wait_for(bot, GAME)
    finally:
        bot.cancel()
    assert result.table == found.table and result.seat == 1
    assert result.games == 1 and result.fair is True
    assert result.final == state.view, "the bot played the person's game to its end"
    # and said "Good game!" there, as at any table
    await person.wait_until(lambda: any(n.event["quick"] == "good_game" for n in state.chat), 10)


async def test_a_bot_queues_with_the_choices_it_was_given(server, connect) -> None:
    """``seats``, ``rated`` and ``bots_after`` reach the queue: alone, asking for a rated
    table of 3 with bots at once, the bot gets one, the server's bots in the other seats."""
    sat: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    bot = asyncio.create_task(
        run_bot(
            url_of(server),
            find=True,
            seats=3,
            rated=True,
            bots_after=0.0,
            name="Ada",
            seated=lambda table, seat, host: sat.done() or sat.set_result(table),
        )
    )
    try:
        table = await asyncio.wait_for(sat, 30)
        watcher = await connect(server, name="Watcher")
        await watcher.request(v1.Spectate(table=table))
        state = watcher.tables[table]
        await watcher.wait_until(lambda: all(state.info.seats), 30)
        info = state.info
        assert info.options.rated and len(info.seats) == 3
        assert info.seats[0].name == "Ada"
        assert all(seat.bot for seat in info.seats), "the server's bots, and Ada, a bot too"
    finally:
        bot.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await bot


async def cli_bot(server: GameServer, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "blackdrez.tools.cli", "bot", "--url", url_of(server), *args,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        out, _ = await asyncio.wait_for(process.communicate(), GAME)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return process.returncode or 0, out.decode()


async def test_blackdrez_bot_find_twice_makes_one_table_and_both_finish(server) -> None:
    (one, out_one), (two, out_two) = await asyncio.gather(
        cli_bot(server, "--find", "--seats", "2", "--name", "Cy"),
        cli_bot(server, "--find", "--seats", "2", "--name", "Di"),
    )
    assert one == 0, out_one
    assert two == 0, out_two
    tables = set()
    for out, name in ((out_one, "Cy"), (out_two, "Di")):
        seated = re.search(r"seated at table (\w+), seat [12]\n", out)
        assert seated is not None, out
        assert "a table it made" not in out, "the queue made it"
        assert f"{name} at table {seated[1]}, seat " in out, out
        assert "fairness proof: verified" in out, out
        tables.add(seated[1])
    assert len(tables) == 1, "both at the one table the queue made"


async def test_blackdrez_bots_find_plays_at_the_tables_the_queue_makes(server) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "blackdrez.tools.cli", "bots", "--url", url_of(server), "--find",
        "--tables", "2", "--per-table", "2", stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), GAME)
    assert process.returncode == 0, out.decode()
    assert "tables: 2, bots: 4, finished games: 2" in out.decode()
    assert "mismatches: 0" in out.decode()
    assert "every pot and ranking agrees" in out.decode()
    assert server.node.matchmaker.made == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--quick", "--seats", "2"], "--seats goes with --find"),
        (["--table", "t1", "--rated", "--bots-after", "5"], "--rated and --bots-after go with"),
        (["--find", "--seats", "9"], "--seats must be from 2 to 8"),
        (["--find", "--quick"], "not allowed with argument"),
    ],
)
async def test_the_queues_choices_need_find_and_sizes_a_table_can_have(
    argv: list[str], message: str
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "blackdrez.tools.cli", "bot", "--url", "ws://127.0.0.1:9/", *argv,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert message in out.decode()
