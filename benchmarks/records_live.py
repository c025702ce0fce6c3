"""Records on a live node: games stored per second, and the records API's latency, under a swarm.

    python3 benchmarks/records_live.py [--db sqlite|postgresql] [--tables 30] [--seconds 30]
                                       [--api-clients 4] [--json]

Starts one server node process (``python -m blackdrez.tools.cli serve``, records in a SQLite file or
in a
throwaway PostgreSQL from ``server/testing/postgres_server.py`` with its durable defaults), pinned
to CPU 0 when ``taskset`` exists, and loads it from CPU 1:

* **Swarm.** ``blackdrez bots`` swarms of ``--tables`` tables of 4 bots (no think time, no pause
  between rounds), one after another for ``--seconds``: every game they finish is a record the
  node verifies and stores in the background. Records per second is the node's own counter
  (``blackdrez_records_written_total`` on ``/metrics``) over the window; ``pending`` is the
  largest backlog seen (``blackdrez_records_pending``, sampled each second).
* **API.** ``--api-clients`` callers GET the records API on the node's port over HTTP, each
  request drawn from a fixed mix (a page of recent games, one record, a replay, a profile, the
  leaderboard), first on an idle node (no swarm), then during the swarm; p50/p99/max overall.

Everything runs on 127.0.0.1 and is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blackdrez.server.testing.postgres_server import PostgresServer
from blackdrez.server.testing.redis_server import free_port

ROOT = Path(__file__).resolve().parent.parent


def pinned(cpu: int, command: list[str]) -> list[str]:
    """``command`` on one CPU when ``taskset`` is there (server and load apart)."""
    return ["taskset", "-c", str(cpu), *command] if shutil.which("taskset") else command


async def http_get(port: int, path: str) -> tuple[int, bytes]:
    """One GET on a fresh connection (the node answers plain HTTP and closes)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def metric(port: int, name: str) -> float:
    _, body = await http_get(port, "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


async def api_load(port: int, clients: int, seconds: float) -> list[float]:
    """Latencies (seconds) of ``clients`` callers hitting the API mix for ``seconds``."""
    _, body = await http_get(port, "/api/v1/games?limit=50")
    games = json.loads(body)["games"]
    if not games:
        raise SystemExit("no stored game to read: the warm-up swarm stored nothing")
    players = sorted({p["player"] for g in games for p in g["players"]})
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def caller(rng: random.Random) -> None:
        while time.perf_counter() < deadline:
            game = rng.choice(games)["id"]
            path = rng.choices(
                [
                    "/api/v1/games?limit=20",
                    f"/api/v1/games/{game}",
                    f"/api/v1/games/{game}/replay",
                    f"/api/v1/players/{rng.choice(players)}",
                    "/api/v1/leaderboards/blackdrez?limit=20",
                ],
                weights=[3, 3, 1, 2, 1],
            )[0]
            started = time.perf_counter()
            status, _ = await http_get(port, path)
            latencies.append(time.perf_counter() - started)
            assert status == 200, (status, path)

    await asyncio.gather(*(caller(random.Random(i)) for i in range(clients)))
    return latencies


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    cuts = statistics.quantiles(ordered, n=100) if len(ordered) > 1 else ordered * 99
    return {
        "requests": len(ordered),
        "p50_ms": round(cuts[49] * 1000, 2),
        "p99_ms": round(cuts[98] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


async def swarm(url: str, tables: int) -> int:
    process = await asyncio.create_subprocess_exec(
        *pinned(1, [sys.executable, "-m", "blackdrez.tools.cli", "bots", "--url", url,
                    "--tables", str(tables), "--per-table", "4"]),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
    )  # fmt: skip
    return await process.wait()


async def measure(db_url: str, args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    node = subprocess.Popen(
        pinned(0, [sys.executable, "-m", "blackdrez.tools.cli", "serve", "--port", str(port),
                   "--in-memory", "--db-url", db_url]),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
    )  # fmt: skip
    url = f"ws://127.0.0.1:{port}/"
    try:
        for _ in range(200):
            with contextlib.suppress(OSError):
                if (await http_get(port, "/healthz"))[0] == 200:
                    break
            await asyncio.sleep(0.1)
        await swarm(url, 10)  # warm-up: games for the API to read
        for _ in range(100):
            if await metric(port, "blackdrez_records_pending") == 0:
                break
            await asyncio.sleep(0.1)
        idle = percentiles(await api_load(port, args.api_clients, min(10.0, args.seconds)))
        written_before = await metric(port, "blackdrez_records_written_total")
        started = time.perf_counter()
        pending_peak = 0.0
        stop = asyncio.Event()

        async def swarms() -> int:
            rounds = 0
            while not stop.is_set():
                await swarm(url, args.tables)
                rounds += 1
            return rounds

        async def sample() -> None:
            nonlocal pending_peak
            while not stop.is_set():
                pending_peak = max(pending_peak, await metric(port, "blackdrez_records_pending"))
                await asyncio.sleep(1.0)

        running = asyncio.gather(swarms(), sample())
        await asyncio.sleep(2.0)  # the swarm is seated and playing
        busy = percentiles(await api_load(port, args.api_clients, args.seconds))
        written = await metric(port, "blackdrez_records_written_total") - written_before
        elapsed = time.perf_counter() - started
        stop.set()
        await running
        return {
            "records_per_second": round(written / elapsed, 1),
            "records_written": int(written),
            "window_seconds": round(elapsed, 1),
            "pending_peak": int(pending_peak),
            "api_idle": idle,
            "api_under_swarm": busy,
        }
    finally:
        node.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.wait(10)
        if node.poll() is None:
            node.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--tables", type=int, default=30, help="tables per swarm (default 30)")
    parser.add_argument("--seconds", type=float, default=30.0, help="window (default 30)")
    parser.add_argument("--api-clients", type=int, default=4, help="API callers (default 4)")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.db == "sqlite":
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="bd-records-"))
            db_url = f"sqlite:///{folder}/records.db"
        else:
            postgres = stack.enter_context(PostgresServer(durable=True))
            db_url = postgres.create_database()
        figures = {"db": args.db, **asyncio.run(measure(db_url, args))}
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
