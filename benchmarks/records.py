"""Records database figures: games written per second, and the records API's latency percentiles.

    python3 benchmarks/records.py [--games 20000] [--seconds 20] [--clients 8] [--json]

For each database, SQLite (a file in a temporary directory; WAL, ``synchronous=NORMAL``) and
PostgreSQL (a throwaway local server from ``server/testing/postgres_server.py`` with its durable
defaults: fsync on, synchronous commit):

* **Verify.** ``ingest.finished_game`` per second and per game: the replay and verification that
  every record goes through before it is written (CPU only, no database).
* **Write.** ``RecordsStore.put_game`` per second for ``--games`` verified games (60% rated
  4-seat BlackDrez, 20% each solitaire; players drawn from 2,000 ids, one in ten a bot), with one
  writer awaiting each write, then with 16 writers at once.
* **API.** ``--clients`` concurrent callers of ``RecordsApi.handle`` for ``--seconds``, each
  request drawn from a fixed mix of routes (lists, a deep page, one record, profiles,
  leaderboards); p50/p99/max per route and overall, first on an idle database, then while a
  writer stores games at ``--write-rate`` per second (the load of a busy node's finished games).

The API is called in-process (no HTTP server: that is the node's, measured by the load tests), so
the figures are the handler's and the database's own. Everything runs on this machine and is
stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blackdrez.games import verify
from blackdrez.games.blackdrez import rules as blackdrez
from blackdrez.server.records.api import RecordsApi
from blackdrez.server.records.ingest import finished_game
from blackdrez.server.records.model import FinishedGame, SeatPlayer
from blackdrez.server.records.store import RecordsStore
from blackdrez.server.testing.postgres_server import PostgresServer

PLAYERS = 2000
BOT_SHARE = 10
"""One player id in this many is a bot."""
CONCURRENT_WRITERS = 16


def _records() -> dict[str, list[Any]]:
    """A few real records per game (seeds differ, so results differ)."""
    return {
        "blackdrez": [
            verify.play_bots("blackdrez", f"bench-{n}", blackdrez.Config(seats=4)) for n in range(8)
        ],
        "blackjack_piles": [verify.play_bots("blackjack_piles", f"bench-{n}") for n in range(4)],
        "blue_jacket": [verify.play_bots("blue_jacket", f"bench-{n}") for n in range(4)],
    }


def _player(number: int, seat: int = 0) -> SeatPlayer:
    return SeatPlayer(
        seat=seat, player=f"p{number:05d}", name=f"Player {number}", bot=number % BOT_SHARE == 0
    )


def _templates(records: dict[str, list[Any]]) -> dict[str, list[FinishedGame]]:
    """Each record verified once, to stamp many games from (new ids, players and times)."""
    return {
        name: [
            finished_game(
                game_id="template",
                record=record,
                players=[_player(seat, seat) for seat in range(4 if name == "blackdrez" else 1)],
                started_at=0.0,
                ended_at=1.0,
                rated=name == "blackdrez",
            )
            for record in group
        ]
        for name, group in records.items()
    }


def _game(number: int, templates: dict[str, list[FinishedGame]], rng: random.Random) -> Any:
    """Game ``number`` of the run, ended ``number`` seconds after a fixed start."""
    roll = rng.random()
    name = "blackdrez" if roll < 0.6 else "blackjack_piles" if roll < 0.8 else "blue_jacket"
    template = rng.choice(templates[name])
    drawn = rng.sample(range(PLAYERS), len(template.players))
    players = [
        msgspec.structs.replace(
            result, player=f"p{p:05d}", name=f"Player {p}", bot=p % BOT_SHARE == 0
        )
        for result, p in zip(template.players, drawn, strict=True)
    ]
    ended = 1_700_000_000.0 + number
    return msgspec.structs.replace(
        template,
        id=f"t{number // 5}:{number}",
        table=f"t{number // 5}",
        players=players,
        started_at=ended - 120.0,
        ended_at=ended,
    )


def _verify_rates(records: dict[str, list[Any]]) -> dict[str, float]:
    rates = {}
    for name, group in records.items():
        players = [_player(seat, seat) for seat in range(4 if name == "blackdrez" else 1)]
        count = 0
        start = time.perf_counter()
        while time.perf_counter() - start < 2.0:
            finished_game(
                game_id="g",
                record=group[count % len(group)],
                players=players,
                started_at=0.0,
                ended_at=1.0,
            )
            count += 1
        rates[name] = count / (time.perf_counter() - start)
    return rates


async def _write(store: RecordsStore, games: list[FinishedGame], writers: int) -> float:
    """Write ``games`` with ``writers`` concurrent writers; return games per second."""
    queue = list(reversed(games))

    async def writer() -> None:
        while queue:
            await store.put_game(queue.pop())

    start = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(writers)))
    return len(games) / (time.perf_counter() - start)


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def _api_mix(
    api: RecordsApi,
    players: list[str],
    total: int,
    clients: int,
    seconds: float,
    rng: random.Random,
) -> dict[str, Any]:
    """Concurrent callers of the API for ``seconds``; latency percentiles per route."""
    first = msgspec.json.decode((await api.handle("GET", "/api/v1/games?limit=20")).body)
    deep = first["next"]

    def player() -> str:
        return rng.choice(players)

    def game_id() -> str:
        number = rng.randrange(total)
        return f"t{number // 5}:{number}"

    routes: dict[str, Callable[[], str]] = {
        "games (recent)": lambda: "/api/v1/games?limit=20",
        "games (by game)": lambda: "/api/v1/games?game=blue_jacket&limit=20",
        "games (by player)": lambda: f"/api/v1/games?player={player()}&limit=20",
        "games (page 2)": lambda: f"/api/v1/games?limit=20&before={deep}",
        "game record": lambda: f"/api/v1/games/{game_id()}",
        "player profile": lambda: f"/api/v1/players/{player()}",
        "leaderboard (rating)": lambda: "/api/v1/leaderboards/blackdrez?kind=humans&limit=50",
        "leaderboard (score)": lambda: "/api/v1/leaderboards/blue_jacket?limit=50",
    }
    latencies: dict[str, list[float]] = defaultdict(list)
    names = list(routes)
    deadline = time.perf_counter() + seconds
    errors: dict[str, int] = defaultdict(int)

    async def client() -> None:
        while time.perf_counter() < deadline:
            name = rng.choice(names)
            target = routes[name]()
            start = time.perf_counter()
            response = await api.handle("GET", target)
            latencies[name].append(time.perf_counter() - start)
            if response.status != 200:
                errors[name] += 1

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - start
    every = [value for values in latencies.values() for value in values]

    def summary(values: list[float]) -> dict[str, float]:
        return {
            "requests": len(values),
            "p50_ms": 1000 * statistics.median(values),
            "p99_ms": 1000 * _percentile(values, 0.99),
            "max_ms": 1000 * max(values),
        }

    return {
        "requests_per_second": len(every) / elapsed,
        "errors": dict(errors),
        "all": summary(every),
        "routes": {name: summary(latencies[name]) for name in names},
    }


async def _api_while_writing(
    api: RecordsApi,
    store: RecordsStore,
    players: list[str],
    args: argparse.Namespace,
    templates: dict[str, list[FinishedGame]],
    rng: random.Random,
) -> dict[str, Any]:
    """The API mix while games arrive at ``--write-rate`` (open loop: as games end, each write
    starts on time whether or not the previous ones are done)."""
    stop = asyncio.Event()
    writes: list[asyncio.Task[bool]] = []
    delays: list[float] = []

    async def timed_write(game: FinishedGame) -> bool:
        start = time.perf_counter()
        stored = await store.put_game(game)
        delays.append(time.perf_counter() - start)
        return stored

    async def arrivals() -> None:
        number = args.games
        next_at = time.perf_counter()
        while not stop.is_set():
            writes.append(asyncio.create_task(timed_write(_game(number, templates, rng))))
            number += 1
            next_at += 1 / args.write_rate
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

    task = asyncio.create_task(arrivals())
    start = time.perf_counter()
    try:
        figures = await _api_mix(api, players, args.games, args.clients, args.seconds, rng)
    finally:
        stop.set()
        await task
        await asyncio.gather(*writes)
    figures["games_written_per_second"] = len(writes) / (time.perf_counter() - start)
    figures["write_p99_ms"] = 1000 * _percentile(delays, 0.99)
    return figures


def _analyze() -> Any:
    """Refresh PostgreSQL's statistics after the bulk load, as autovacuum soon would."""
    yield "ANALYZE", ()


async def _run(
    url: str, args: argparse.Namespace, templates: dict[str, list[FinishedGame]]
) -> dict:
    rng = random.Random(7)
    store = await RecordsStore.open(url)
    try:
        half = args.games // 2
        games = [_game(number, templates, rng) for number in range(args.games)]
        sequential = await _write(store, games[:half], 1)
        concurrent = await _write(store, games[half:], CONCURRENT_WRITERS)
        if store.db.dialect == "postgresql":
            await store.db.run(_analyze())
        api = RecordsApi(store)
        players = sorted({p.player for game in games for p in game.players})
        idle = await _api_mix(api, players, args.games, args.clients, args.seconds, rng)
        busy = await _api_while_writing(api, store, players, args, templates, rng)
    finally:
        await store.close()
    return {
        "writes_per_second": {"1 writer": sequential, f"{CONCURRENT_WRITERS} writers": concurrent},
        "api_idle": idle,
        "api_while_writing": busy,
    }


def _print(results: dict[str, Any], args: argparse.Namespace) -> None:
    print("verify (ingest.finished_game), records/s, one core:")
    for name, rate in results["verify"].items():
        print(f"  {name:16} {rate:8.0f}")
    for database in ("sqlite", "postgresql"):
        figures = results[database]
        writes = figures["writes_per_second"]
        print(f"\n{database}: {args.games} games stored")
        for label, rate in writes.items():
            print(f"  put_game, {label:10} {rate:8.0f} games/s")
        for phase, title in (
            ("api_idle", "API, idle database"),
            ("api_while_writing", f"API while writing {args.write_rate:g} games/s"),
        ):
            api = figures[phase]
            print(
                f"  {title}: {api['requests_per_second']:.0f} requests/s with {args.clients} "
                f"clients, non-200 answers {api['errors'] or 'none'}"
            )
            if "games_written_per_second" in api:
                print(
                    f"    (games written meanwhile: {api['games_written_per_second']:.1f}/s, "
                    f"a write's p99 {api['write_p99_ms']:.1f} ms)"
                )
            rows = [("all", api["all"]), *api["routes"].items()]
            for name, row in rows:
                print(
                    f"    {name:22} p50 {row['p50_ms']:6.2f} ms  p99 {row['p99_ms']:6.2f} ms  "
                    f"max {row['max_ms']:7.2f} ms  ({row['requests']} requests)"
                )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=20_000, help="games to store per database")
    parser.add_argument("--seconds", type=float, default=20.0, help="API measurement time")
    parser.add_argument("--clients", type=int, default=8, help="concurrent API callers")
    parser.add_argument(
        "--write-rate", type=float, default=50.0, help="games/s written during the busy API run"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    records = _records()
    templates = _templates(records)
    results: dict[str, Any] = {"verify": _verify_rates(records)}
    with tempfile.TemporaryDirectory(prefix="bd-records-bench-") as folder:
        results["sqlite"] = asyncio.run(
            _run(f"sqlite:///{Path(folder) / 'records.db'}", args, templates)
        )
    with PostgresServer(durable=True) as server:
        results["postgresql"] = asyncio.run(_run(server.create_database(), args, templates))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _print(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
