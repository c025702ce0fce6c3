"""The records process's CPU per game: what storing a finished game costs a node's machine.

    python3 benchmarks/records_process.py [--games 3000] [--rate 140] [--runs 3] [--json]

Theory of operation
-------------------
A node hands each finished game to its records process (``blackdrez.server.records.process``),
which verifies it (a replay) and writes it to the records database. That process runs beside the
node and the players' connections: on a machine of two CPUs its work takes turns with theirs
(``docs/benchmarks.md``: a node loaded at its maximum did 8-16 % fewer actions with records on).

This starts a :class:`~blackdrez.server.records.process.RecordsProcess` on a fresh SQLite file,
as a node does, and submits ``--games`` 4-seat BlackDrez games (rated, each a different bot game
of a pool, between players drawn from 1,200 ids) at ``--rate`` games a second, in a node's
rhythm (the games of each 10 ms together), waits until every game is acknowledged as stored,
and reads the child's CPU time (user and system, from ``/proc``). Printed per run: the child's
CPU µs per game (user, system), and the wall time from the first submission to the last
acknowledgement; then the medians of ``--runs`` runs, each with a child and a database of its
own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from blackdrez.games import verify
from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.server.records.process import RecordsProcess
from blackdrez.server.records.store import RecordsStore
from blackdrez.server.table.room import GameOver

PLAYERS = 1200
POOL = 50
"""Distinct bot games played once, each then stored many times under other ids and players."""
TICK = 0.01


def _pool() -> list[tuple[Any, list[tuple[int, Any]]]]:
    config = blackdrez.Config(seats=4)
    return [verify.bots_game("blackdrez", f"records-process-{n}", config) for n in range(POOL)]


def _games(count: int, pool: list[tuple[Any, list[tuple[int, Any]]]]) -> list[GameOver]:
    rng = random.Random(35)
    games = []
    for n in range(count):
        engine, actions = pool[n % len(pool)]
        players = rng.sample(range(PLAYERS), 4)
        ended = 1_700_000_000.0 + n / 10
        games.append(
            GameOver(
                game_id=f"t{n // 5}:{n % 5 + 1}",
                engine=engine,
                actions=actions,
                players=[
                    (seat, f"p{p:05d}", f"Player {p}", p % 10 == 0)
                    for seat, p in enumerate(players)
                ],
                started_at=ended - 30.0,
                ended_at=ended,
                rated=True,
            )
        )
    return games


def _cpu(pid: int) -> tuple[float, float]:
    """A process's user and system CPU seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


async def _run(games: list[GameOver], rate: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/records.db"
        store = await RecordsStore.open(url)
        records = RecordsProcess(store, url)
        await records.start()
        pid = records.pid
        assert pid is not None
        user0, system0 = _cpu(pid)
        start = time.perf_counter()
        per_tick = rate * TICK
        sent = 0.0
        at = 0
        while at < len(games):
            sent += per_tick
            batch = games[at : int(sent)]
            at += len(batch)
            if batch:
                records.submit(batch)
            await asyncio.sleep(start + (sent / per_tick) * TICK - time.perf_counter())
        tables = {game.game_id.rpartition(":")[0] for game in games}
        for table in tables:
            assert await records.written(table, timeout=120.0), f"{table}'s games not written"
        wall = time.perf_counter() - start
        user1, system1 = _cpu(pid)
        assert records.written_count == len(games), (records.written_count, len(games))
        await records.stop()
        await store.close()
    return {
        "user_us": (user1 - user0) / len(games) * 1e6,
        "system_us": (system1 - system0) / len(games) * 1e6,
        "cpu_us": ((user1 - user0) + (system1 - system0)) / len(games) * 1e6,
        "wall_s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=140.0, help="games submitted a second")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    games = _games(args.games, _pool())
    runs = []
    for n in range(args.runs):
        run = asyncio.run(_run(games, args.rate))
        runs.append(run)
        if not args.json:
            print(
                f"run {n + 1}: {run['cpu_us']:.0f} µs of CPU a game "
                f"(user {run['user_us']:.0f}, system {run['system_us']:.0f}), "
                f"{args.games} games in {run['wall_s']:.1f} s"
            )
    medians = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    if args.json:
        json.dump({"runs": runs, "median": medians}, sys.stdout, indent=2)
        print()
    else:
        print(
            f"median: {medians['cpu_us']:.0f} µs of the records process's CPU a game "
            f"(user {medians['user_us']:.0f}, system {medians['system_us']:.0f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
