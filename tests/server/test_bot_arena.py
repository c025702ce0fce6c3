"""A bot arena (issue 37): ``blackdrez arena`` makes an arena and has bots play in it, game
after game, until it ends; anyone may watch it (the standings move while it runs); it prints
the final standings, every bot with its games, checked against the games the records stored
(``--check`` does that alone for any arena)."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from pathlib import Path

import pytest

from blackdrez.clients.bots import _find_arena
from blackdrez.clients.client import Client, ServerError
from blackdrez.clients.records import disagreements
from blackdrez.games.arena import ArenaGame, Placed, scored_games
from blackdrez.protocol import v1
from blackdrez.server.matchmaking.schedule import parse_schedule


async def test_blackdrez_arena_runs_a_bot_arena_anyone_can_watch(
    make_server, connect, tmp_path: Path
) -> None:
    server = await make_server(db_url=f"sqlite:///{tmp_path / 'records.db'}")
    url = f"ws://127.0.0.1:{server.port}/"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "blackdrez.tools.cli", "arena", "--url", url,
        "--minutes", "1", "--seats", "2", "--bots", "4", "--name", "Test arena",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    first = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
    found = re.match(r"arena (\S+): Test arena, 4 bots, until \d\d:\d\d UTC", first)
    assert found, first
    arena = found.group(1)
    link = (await process.stdout.readline()).decode().strip()
    assert link == f"watch it at http://127.0.0.1:{server.port}/#/arena/{arena}"
    watcher = await connect(server, name="Watcher")
    listed = await watcher.request(v1.ListArenas())
    assert [a.id for a in listed.arenas] == [arena]
    await watcher.watch_arena(arena)
    out, err = await asyncio.wait_for(process.communicate(), 150)
    assert process.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert len(lines) == 5 and lines[0].startswith("  1. "), lines
    checked_line = re.fullmatch(
        r"checked: the standings agree with the (\d+) stored games.*", lines[4]
    )
    assert checked_line, lines[4]
    stored = int(checked_line.group(1))

    def played() -> int:
        return sum(s.games for s in watcher.arenas[arena].standings) // 2

    # The last game's standings reach the watcher as a push of their own, which may come just
    # after the tool's check: the watcher ends up seeing every stored game.
    await watcher.wait_until(lambda: played() >= stored, timeout=10)
    assert played() == stored
    pushes = [m for m in watcher.pushed if isinstance(m, v1.ArenaStandings)]
    assert len(pushes) >= 2, "the standings moved while it ran"
    final = watcher.arenas[arena].standings
    assert len(final) == 4 and all(s.bot for s in final)
    assert all(s.games >= 1 for s in final), [(s.name, s.games) for s in final]
    assert sum(s.wins for s in final) >= sum(s.games for s in final) // 2 - 1

    checked = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "blackdrez.tools.cli", "arena", "--url", url, "--check", arena,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(checked.communicate(), 60)
    assert checked.returncode == 0, out.decode() + err.decode()
    lines = out.decode().splitlines()
    assert re.fullmatch(rf"arena {arena}: Test arena, finished, until .*", lines[0])
    assert lines[1:5] == [
        f"{s.rank:>3}. {s.name}: {s.points} points, {s.games} games" + " (on fire)" * s.on_fire
        for s in final
    ]
    assert lines[5].startswith("checked: the standings agree"), lines


def test_standings_that_the_stored_games_do_not_make_are_named() -> None:
    games = [
        ArenaGame("t:1", 0.0, 1.0, [Placed("a", "Ann", False, 1), Placed("b", "Bob", False, 2)]),
        ArenaGame("t:2", 1.0, 2.0, [Placed("a", "Ann", False, 2), Placed("c", "Cy", True, 1)]),
    ]

    def line(player: str, name: str, points: int, games: int, wins: int, results: list[int]):
        return v1.StandingInfo(
            rank=1, player=player, name=name, bot=False, points=points, games=games, wins=wins,
            streak=0, on_fire=False, results=results, active=True,
        )  # fmt: skip

    honest = [
        line("a", "Ann", 1, 2, 1, [1, 0]),
        line("c", "Cy", 1, 1, 1, [1]),
        line("b", "Bob", 0, 1, 0, [0]),
        line("d", "Dee", 0, 0, 0, []),  # joined, never played
    ]
    assert disagreements(honest, games, ends=10.0) == []
    inflated = [line("a", "Ann", 3, 2, 1, [3, 0]), *honest[1:]]
    [problem] = disagreements(inflated, games, ends=10.0)
    assert problem.startswith("Ann: standings say 3 points in 2 games")
    missing = honest[:2]
    assert disagreements(missing, games, ends=10.0) == [
        "Bob: in 1 stored games (0 points) but not in the standings"
    ]
    assert disagreements(honest, games, ends=1.5) != [], "t:2 ended after the arena"


def test_games_that_end_after_the_arena_are_stored_and_not_counted_as_scored() -> None:
    """A bot's last game may end after the arena: the records keep it, the standings do not
    score it, and the check says how many it compared (the scored ones) and how many came late
    (the arena test waited for the watcher to see every stored game, the late one too)."""
    games = [
        ArenaGame("t:1", 0.0, 1.0, [Placed("a", "Ann", False, 1), Placed("b", "Bob", False, 2)]),
        ArenaGame("t:2", 1.0, 2.0, [Placed("a", "Ann", False, 2), Placed("b", "Bob", False, 1)]),
        ArenaGame("t:3", 2.0, 9.0, [Placed("a", "Ann", False, 1), Placed("b", "Bob", False, 2)]),
    ]
    assert scored_games(games, ends=5.0) == (2, 1)
    assert scored_games(games, ends=9.5) == (3, 0)
    assert scored_games([*games, games[0]], ends=5.0) == (2, 1), "a game counts once"


async def test_bots_find_a_scheduled_arena_by_its_name(make_server) -> None:
    """``blackdrez arena --join NAME``: a bot author names the operator's daily arena (its id
    changes every day); the running one is found, else the next; an unknown name is refused."""
    now = time.gmtime()
    running = parse_schedule(f"daily {now.tm_hour:02d}:{now.tm_min:02d} 30 Bot hour")
    server = await make_server(arena_schedule=[running])
    url = f"ws://127.0.0.1:{server.port}/"
    host = await Client.connect(url, name="Finder")
    try:
        found = await _find_arena(host, "Bot hour", None)
        assert found.arena.name == "Bot hour" and found.arena.status == "running"
        assert found.arena.maker == "" and found.arena.seats == 4
        with pytest.raises(ServerError) as refused:
            await _find_arena(host, "No such arena", None)
        assert refused.value.code == "not_found"
    finally:
        await host.close()
