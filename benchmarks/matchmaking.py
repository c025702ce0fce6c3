"""How long players wait for a table, and how close its ratings are: the matchmaker's pairing.

    python3 benchmarks/matchmaking.py [--players 200] [--window 120] [--runs 5] [--json FILE]
    python3 benchmarks/matchmaking.py --live [--players 200] [--window 60] [--seed 0] [--json FILE]

Theory of operation
-------------------
A simulation of the matchmaker's pure core (``blackdrez.server.matchmaking.pairing``), not of a
server: ``--players`` players join the queue at random times (uniform over ``--window``
seconds), with ratings drawn around 1500 (normal, 250 points of deviation, 100 to 3000). Of them
60% want a table of 4, 20% of 2, 20% any size; 70% want a rated game. Nobody asks for bots. The
pairing runs every ``TICK`` seconds of simulated time, as the runtime does, until everyone is
placed or five minutes after the last arrival. The script prints, as medians over ``--runs``
seeds: each player's wait (median, 95th percentile, maximum), the rating spread of each table
(the highest rating minus the lowest: median and 95th percentile), and who was never placed.

The baseline, in the same run on the same arrivals: first come, first served, as a table list
without ratings does it. Each player waits for the next players who want the same table size,
rated or casual, whatever their ratings. The ratios say what the rating band costs in waiting
and buys in closeness. The CPU time of one pairing of 1,000 waiting tickets is printed too: the
runtime runs it on the event loop.

``--live``: the same through a real server. A node (``blackdrez serve --in-memory``, records in
a SQLite file in a scratch folder; pinned to CPU 0 when ``taskset`` exists, this script on the
other CPUs) and ``--players`` clients, one per ticket of ``queue(--seed)`` with every ticket made
rated: each connects, its rating is written into the records (a ``ratings`` row: the rating the
queue reads at ``find_game``, checked against ``queued.rating``), and at its arrival time it sends
``find_game``. Once told ``match_found`` it leaves the table (nobody plays: the game the server
started goes on without them). Each player's wait is measured twice: the server's ``waited``
(``match_found``) and the client's wall clock from sending ``find_game`` to ``match_found``; the
spread of each table from the ratings written. The run ends when everyone is placed, or when
those left could not make a table even with unlimited bands (never placed). The pure simulation
of the very same tickets, and the first-come baseline, are printed beside it.

Then the newcomer: :data:`REGULARS` players queue for rated tables of 4 continuously (each,
once placed, leaves its table and queues again after a pause of 0 to :data:`BETWEEN_GAMES`
seconds); after :data:`NEWCOMER_AFTER` seconds a newcomer (no record: 1500) asks for a rated table
of 4, and its wait is measured (at most :data:`NEWCOMER_PATIENCE` seconds). Twice: regulars rated
as regular players are (1600 to 2000, uniform: ``server/records/ratings.py``), and regulars around
1500 (normal, 250 points of deviation). The pure core's answer for the same ratings and pauses
(over :data:`NEWCOMER_SEEDS` seeds) is printed beside each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.server.matchmaking.pairing import ANYONE_AFTER, TICK, Match, Ticket, pair, spread
from blackdrez.server.testing.redis_server import free_port

Pairing = Callable[[Iterable[Ticket], float], list[Match]]

REGULARS = 20
"""Players queueing continuously in the newcomer scenario."""
BETWEEN_GAMES = 2.0
"""Seconds at most a regular pauses between being placed and queueing again."""
NEWCOMER_AFTER = 5.0
"""Seconds the regulars queue before the newcomer comes."""
NEWCOMER_PATIENCE = 65.0
"""Seconds the newcomer is given (the bar: under a minute)."""
NEWCOMER_SEEDS = 20
"""Seeds of the pure core's newcomer simulation."""


def queue(players: int, window: float, seed: int) -> list[Ticket]:
    rng = random.Random(seed)
    tickets = []
    for n in range(players):
        seats = rng.choices([4, 2, None], weights=[60, 20, 20])[0]
        rating = min(3000.0, max(100.0, rng.gauss(1500, 250)))
        since = rng.uniform(0, window)
        tickets.append(Ticket(f"p{n}", rating, seats, rng.random() < 0.7, since))
    return sorted(tickets, key=lambda t: t.since)


def first_come(tickets: Iterable[Ticket], now: float) -> list[Match]:
    """The baseline: groups in order of arrival, ratings ignored."""
    groups: dict[tuple[bool, int], list[Ticket]] = {}
    found = []
    for ticket in sorted(tickets, key=lambda t: t.since):
        size = ticket.seats or 4
        group = groups.setdefault((ticket.rated, size), [])
        group.append(ticket)
        if len(group) == size:
            found.append(Match(tuple(t.player for t in group), size, ticket.rated))
            groups[(ticket.rated, size)] = []
    return found


def simulate(tickets: list[Ticket], pairing: Pairing) -> dict[str, float]:
    by_player = {t.player: t for t in tickets}
    arrivals = iter(tickets)
    coming = next(arrivals, None)
    waiting: list[Ticket] = []
    waits: list[float] = []
    spreads: list[float] = []
    now = 0.0
    end = max(t.since for t in tickets) + 300
    while now <= end and (coming is not None or waiting):
        while coming is not None and coming.since <= now:
            waiting.append(coming)
            coming = next(arrivals, None)
        placed = set()
        for match in pairing(waiting, now):
            placed.update(match.players)
            spreads.append(spread(by_player[p].rating for p in match.players))
            waits.extend(now - by_player[p].since for p in match.players)
        waiting = [t for t in waiting if t.player not in placed]
        now += TICK
    waits.sort()
    return {
        "wait_median_s": statistics.median(waits),
        "wait_p95_s": waits[int(0.95 * (len(waits) - 1))],
        "wait_max_s": waits[-1],
        "spread_median": statistics.median(spreads),
        "spread_p95": sorted(spreads)[int(0.95 * (len(spreads) - 1))],
        "tables": len(spreads),
        "never_placed": len(waiting),
    }


def pairing_cost(waiting: int = 1000) -> float:
    """CPU milliseconds of one pairing of ``waiting`` tickets that started waiting at once."""
    tickets = [
        Ticket(f"p{n}", 1500 + (n * 37) % 900 - 450, [4, 2, None][n % 3], n % 2 == 0, 0.0)
        for n in range(waiting)
    ]
    started = time.process_time()
    pair(tickets, now=0.0)
    return (time.process_time() - started) * 1000


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--players", type=int, default=200)
    parser.add_argument(
        "--window", type=float, help="seconds of arrivals (default 120; with --live 60)"
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", help="write the figures to this file too")
    parser.add_argument(
        "--live", action="store_true", help="through a real server (see the docstring)"
    )
    parser.add_argument("--seed", type=int, default=0, help="with --live: the arrivals' seed")
    args = parser.parse_args()
    if args.live:
        args.window = 60.0 if args.window is None else args.window
        figures = asyncio.run(live(args))
        if args.json:
            with open(args.json, "w") as file:
                json.dump(figures, file, indent=2)
        return
    args.window = 120.0 if args.window is None else args.window
    ours, baseline = [], []
    for seed in range(args.runs):
        tickets = queue(args.players, args.window, seed)
        ours.append(simulate(tickets, pair))
        baseline.append(simulate(tickets, first_come))
    figures = {
        "players": args.players,
        "window_s": args.window,
        "runs": args.runs,
        "pairing": median_of(ours),
        "first_come": median_of(baseline),
        "pairing_cpu_ms_1000_waiting": pairing_cost(),
    }
    a, b = figures["pairing"], figures["first_come"]
    print(f"{args.players} players arriving over {args.window:g} s, medians of {args.runs} runs")
    for name, f in (("rating bands", a), ("first come (baseline)", b)):
        print(
            f"  {name:22} wait median {f['wait_median_s']:5.1f} s, p95 {f['wait_p95_s']:5.1f} s,"
            f" max {f['wait_max_s']:5.1f} s; spread median {f['spread_median']:4.0f},"
            f" p95 {f['spread_p95']:4.0f}; {f['tables']:.0f} tables,"
            f" {f['never_placed']:.0f} never placed"
        )
    print(
        f"  ratios (bands / baseline): wait p95 {a['wait_p95_s'] / b['wait_p95_s']:.2f},"
        f" spread median {a['spread_median'] / b['spread_median']:.2f}"
    )
    print(f"  one pairing of 1,000 waiting: {figures['pairing_cpu_ms_1000_waiting']:.0f} ms CPU")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(figures, file, indent=2)


# ---------------------------------------------------------------------------------- live


def percentile(values: list[float], share: float) -> float:
    """The ``share`` percentile of ``values`` (as :func:`simulate` takes it); NaN for none."""
    ordered = sorted(values)
    return ordered[int(share * (len(ordered) - 1))] if ordered else float("nan")


def describe(values: list[float]) -> str:
    """``values``' median, 95th percentile and maximum, as one line's part."""
    return (
        f"median {statistics.median(values):5.1f}, p95 {percentile(values, 0.95):5.1f}, "
        f"max {max(values):5.1f}"
        if values
        else "none"
    )


def pinned(cpu: int, command: list[str]) -> list[str]:
    """``command`` on one CPU when ``taskset`` is there (the node apart from its clients)."""
    return ["taskset", "-c", str(cpu), *command] if shutil.which("taskset") else command


async def start_node(folder: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    """A node on a free port, in memory, its records in ``folder``: the process, its
    WebSocket address and the records file."""
    port, db = free_port(), folder / "records.db"
    node = subprocess.Popen(
        pinned(0, [sys.executable, "-m", "blackdrez.tools.cli", "serve", "--port", str(port),
                   "--in-memory", "--db-url", f"sqlite:///{db}"]),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(300):
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            if db.exists():
                return node, f"ws://127.0.0.1:{port}/", db
        await asyncio.sleep(0.1)
    node.kill()
    raise SystemExit("the node did not start")


def write_ratings(db: Path, ratings: dict[str, int]) -> None:
    """Give each player (id to the rating people see) a BlackDrez rating in the records: an
    established one (30 games, sigma 2) whose ordinal shows that rating."""
    sigma, now = 2.0, int(time.time())
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as connection, connection:
        for player, rating in ratings.items():
            ordinal = (rating - 1500) / 20
            connection.execute(
                "INSERT INTO players (id, name, bot, created_at, seen_at) VALUES (?, ?, 0, ?, ?) "
                "ON CONFLICT (id) DO NOTHING",
                (player, player, now, now),
            )
            connection.execute(
                "INSERT INTO ratings (player, game, bot, mu, sigma, ordinal, games, updated_at) "
                "VALUES (?, ?, 0, ?, ?, ?, 30, ?) ON CONFLICT (player, game) DO UPDATE SET "
                "mu = excluded.mu, sigma = excluded.sigma, ordinal = excluded.ordinal",
                (player, v1.TABLE_GAME, ordinal + 3 * sigma, sigma, ordinal, now),
            )


async def connect_all(url: str, names: list[str]) -> list[Client]:
    """One client per name, connected a few at a time (the node's handshake limit)."""
    clients: list[Client] = []
    for first in range(0, len(names), 50):
        clients += await asyncio.gather(
            *(Client.connect(url, name=name) for name in names[first : first + 50])
        )
    return clients


async def leave_queue(clients: list[Client]) -> None:
    """Take the clients out of the queue (a closed client's place is kept a while: it would
    be matched in the next scenario) and close them."""
    for client in clients:
        with contextlib.suppress(Exception):
            await client.cancel_find()
        await client.close()


def never_placeable(tickets: list[Ticket]) -> bool:
    """Whether ``tickets`` could make no table even with every band unlimited."""
    return not pair([dataclasses.replace(t, since=-ANYONE_AFTER) for t in tickets], 0.0)


async def live_queue(url: str, db: Path, tickets: list[Ticket]) -> dict[str, Any]:
    """``tickets`` through the node: see the module docstring."""
    ratings = {t.player: round(t.rating) for t in tickets}
    clients = await connect_all(url, [t.player for t in tickets])
    write_ratings(db, {c.player: ratings[t.player] for c, t in zip(clients, tickets, strict=True)})
    waited: list[float] = []
    wall: list[float] = []
    tables: dict[str, list[str]] = {}
    misread: list[str] = []
    placed: set[str] = set()
    start = time.monotonic()

    async def player(client: Client, ticket: Ticket) -> None:
        await asyncio.sleep(max(0.0, start + ticket.since - time.monotonic()))
        sent = time.monotonic()
        queued = await client.find_game(ticket.seats, rated=True)
        if queued.rating != ratings[ticket.player]:
            misread.append(ticket.player)
        found = await client.wait_for_match(timeout=None)
        wall.append(time.monotonic() - sent)
        waited.append(found.waited)
        tables[found.table] = found.players
        placed.add(ticket.player)
        with contextlib.suppress(Exception):
            await client.request(v1.LeaveTable(table=found.table))

    running = [asyncio.create_task(player(c, t)) for c, t in zip(clients, tickets, strict=True)]
    last = max(t.since for t in tickets)
    hopeless_since: float | None = None
    while len(placed) < len(tickets):
        await asyncio.sleep(TICK)
        now = time.monotonic() - start
        left = [t for t in tickets if t.player not in placed]
        if now < last or not never_placeable(left):
            hopeless_since = None
        elif hopeless_since is None:
            hopeless_since = now
        elif now - hopeless_since >= 2.0:  # (a table made but not yet told: none)
            break
        if now > last + ANYONE_AFTER + 15.0:
            break
    for task in running:
        task.cancel()
    await leave_queue(clients)
    spreads = [spread(ratings[p] for p in players) for players in tables.values()]
    return {
        "wait_server_s": waited,
        "wait_wall_s": wall,
        "spreads": spreads,
        "tables": len(tables),
        "never_placed": len(tickets) - len(placed),
        "never_placed_wanted": [t.seats for t in tickets if t.player not in placed],
        "ratings_misread": len(misread),
        "seconds": round(time.monotonic() - start, 1),
    }


def regular_ratings(kind: str, seed: int) -> list[int]:
    """The regulars' ratings: ``regular`` (as regular players are) or ``around_1500``."""
    rng = random.Random(seed)
    if kind == "regular":
        return [round(rng.uniform(1600, 2000)) for _ in range(REGULARS)]
    return [round(min(3000, max(100, rng.gauss(1500, 250)))) for _ in range(REGULARS)]


def newcomer_simulated(ratings: list[int], seed: int) -> float | None:
    """The pure core's newcomer scenario on ``ratings``: the newcomer's wait (``None``: not
    placed within :data:`NEWCOMER_PATIENCE`)."""
    rng = random.Random(seed)
    regulars = {f"r{n}": Ticket(f"r{n}", r, 4, True, 0.0) for n, r in enumerate(ratings)}
    back = {player: rng.uniform(0, BETWEEN_GAMES) for player in regulars}
    waiting: dict[str, Ticket] = {}
    now = 0.0
    while now < NEWCOMER_AFTER + NEWCOMER_PATIENCE:
        if now >= NEWCOMER_AFTER and "new" not in waiting:
            waiting["new"] = Ticket("new", 1500.0, 4, True, now)
        for player, at in list(back.items()):
            if at <= now:
                waiting[player] = dataclasses.replace(regulars[player], since=now)
                del back[player]
        for match in pair(list(waiting.values()), now):
            if "new" in match.players:
                return now - NEWCOMER_AFTER
            for player in match.players:
                del waiting[player]
                back[player] = now + rng.uniform(0, BETWEEN_GAMES)
        now += TICK
    return None


async def live_newcomer(url: str, db: Path, ratings: list[int]) -> dict[str, Any]:
    """The newcomer scenario through the node: see the module docstring."""
    regulars = await connect_all(url, [f"r{n}" for n in range(len(ratings))])
    write_ratings(db, {c.player: r for c, r in zip(regulars, ratings, strict=True)})
    newcomer = await Client.connect(url, name="Newcomer")
    made: set[str] = set()

    async def regular(client: Client, rng: random.Random) -> None:
        while True:
            await asyncio.sleep(rng.uniform(0, BETWEEN_GAMES))
            await client.find_game(4, rated=True)
            found = await client.wait_for_match(timeout=None)
            made.add(found.table)
            with contextlib.suppress(Exception):
                await client.request(v1.LeaveTable(table=found.table))

    running = [asyncio.create_task(regular(c, random.Random(n))) for n, c in enumerate(regulars)]
    await asyncio.sleep(NEWCOMER_AFTER)
    sent = time.monotonic()
    queued = await newcomer.find_game(4, rated=True)
    try:
        found: v1.MatchFound | None = await newcomer.wait_for_match(NEWCOMER_PATIENCE)
    except TimeoutError:
        found = None
    wall = time.monotonic() - sent
    for task in running:
        task.cancel()
    await leave_queue([*regulars, newcomer])
    partners = [p for p in found.players if p != "Newcomer"] if found else []
    by_name = {f"r{n}": r for n, r in enumerate(ratings)}
    return {
        "newcomer_rating": queued.rating,
        "placed": found is not None,
        "wait_server_s": found.waited if found else None,
        "wait_wall_s": round(wall, 1),
        "partners": [by_name[p] for p in partners],
        "regulars_tables": len(made),
    }


async def live(args: argparse.Namespace) -> dict[str, Any]:
    """The live measurements (``--live``), printed as they come; the figures."""
    with contextlib.suppress(AttributeError, OSError):  # the clients apart from the node
        if len(os.sched_getaffinity(0)) > 1:
            os.sched_setaffinity(0, os.sched_getaffinity(0) - {0})
    tickets = [  # all rated, ratings as whole numbers as the queue reads them from the records
        dataclasses.replace(t, rated=True, rating=float(round(t.rating)))
        for t in queue(args.players, args.window, args.seed)
    ]
    simulated = simulate(tickets, pair)
    baseline = simulate(tickets, first_come)
    figures: dict[str, Any] = {"players": args.players, "window_s": args.window}
    with tempfile.TemporaryDirectory(prefix="bd-matchmaking-") as folder:
        node, url, db = await start_node(Path(folder))
        try:
            got = await live_queue(url, db, tickets)
            print(
                f"{args.players} players, all rated, arriving over {args.window:g} s (seed "
                f"{args.seed}), through a node: {got['seconds']:.0f} s"
            )
            print(f"  live, server's wait (s):     {describe(got['wait_server_s'])}")
            print(f"  live, wall clock wait (s):   {describe(got['wait_wall_s'])}")
            print(
                f"  live, spread per table:      {describe(got['spreads'])}; "
                f"{got['tables']} tables, {got['never_placed']} never placed"
                + (
                    f" (wanting {', '.join(str(n or 'any') for n in got['never_placed_wanted'])})"
                    if got["never_placed"]
                    else ""
                )
                + (f", {got['ratings_misread']} RATINGS MISREAD" if got["ratings_misread"] else "")
            )
            for name, f in (("pure core, same tickets", simulated), ("first come", baseline)):
                print(
                    f"  {name + ':':28} wait median {f['wait_median_s']:5.1f}, p95 "
                    f"{f['wait_p95_s']:5.1f}, max {f['wait_max_s']:5.1f}; spread median "
                    f"{f['spread_median']:4.0f}, p95 {f['spread_p95']:4.0f}; {f['tables']:.0f} "
                    f"tables, {f['never_placed']:.0f} never placed"
                )
            figures["live"] = got
            figures["pure_core"] = simulated
            figures["first_come"] = baseline
            for kind in ("regular", "around_1500"):
                ratings = regular_ratings(kind, args.seed)
                newcomer = await live_newcomer(url, db, ratings)
                sims = [newcomer_simulated(ratings, seed) for seed in range(NEWCOMER_SEEDS)]
                placed = sorted(s for s in sims if s is not None)
                label = "1600-2000" if kind == "regular" else "around 1500"
                waited = (
                    f"placed after {newcomer['wait_server_s']:.1f} s (wall clock "
                    f"{newcomer['wait_wall_s']:.1f} s) with regulars rated "
                    f"{newcomer['partners']}"
                    if newcomer["placed"]
                    else f"NOT placed within {NEWCOMER_PATIENCE:.0f} s"
                )
                nearest = sorted(ratings, key=lambda r: abs(r - 1500))[:3]
                print(
                    f"newcomer ({newcomer['newcomer_rating']}) among {REGULARS} regulars rated "
                    f"{label} ({min(ratings)}-{max(ratings)}, the nearest {nearest}), queueing "
                    f"for rated tables of 4 ({newcomer['regulars_tables']} tables made "
                    f"meanwhile): {waited}"
                )
                print(
                    f"  pure core, same ratings, {NEWCOMER_SEEDS} seeds of pauses: placed in "
                    f"{len(placed)}"
                    + (f" (median {statistics.median(placed):.1f} s)" if placed else "")
                    + f", not within {NEWCOMER_PATIENCE:.0f} s in {NEWCOMER_SEEDS - len(placed)}"
                )
                figures[f"newcomer_{kind}"] = {**newcomer, "ratings": ratings, "simulated": sims}
        finally:
            node.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.wait(10)
            if node.poll() is None:
                node.kill()
    return figures


if __name__ == "__main__":
    main()
