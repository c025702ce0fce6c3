"""How long players wait for a table, and how close its ratings are: the matchmaker's pairing.

    python3 benchmarks/matchmaking.py [--players 200] [--window 120] [--runs 5] [--json FILE]

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
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Iterable

from blackdrez.server.matchmaking.pairing import TICK, Match, Ticket, pair, spread

Pairing = Callable[[Iterable[Ticket], float], list[Match]]


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
    parser.add_argument("--window", type=float, default=120.0, help="seconds of arrivals")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", help="write the figures to this file too")
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
