"""A bot arena (issue 37): ``blackdrez arena`` makes an arena and has bots play in it, game
after game, until it ends; anyone may watch it (the standings move while it runs); it prints
the final standings, every bot with its games."""

from __future__ import annotations

import asyncio
import re
import sys

from blackdrez.protocol import v1


async def test_blackdrez_arena_runs_a_bot_arena_anyone_can_watch(server, connect) -> None:
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
    pushes = [m for m in watcher.pushed if isinstance(m, v1.ArenaStandings)]
    assert len(pushes) >= 2, "the standings moved while it ran"
    final = watcher.arenas[arena].standings
    assert len(final) == 4 and all(s.bot for s in final)
    assert all(s.games >= 1 for s in final), [(s.name, s.games) for s in final]
    assert sum(s.wins for s in final) >= sum(s.games for s in final) // 2 - 1
    lines = out.decode().splitlines()
    assert len(lines) == 4 and lines[0].startswith("  1. "), lines
