"""What the group commit saves: log appends through the store, one at a time against many at once.

    python3 benchmarks/group_commit.py [--tables 300] [--rounds 20] [--repeat 3] [--cpu 0]
        [--json FILE]

A Redis of its own (``blackdrez.server.testing.redis_server``) and one bundle of Redis stores
in this process, as a node has; ``--tables`` tables, each leased and created. Then ``--rounds``
times each table appends one entry of 120 bytes with an announcement of 400 (about a BlackDrez
action and its update), in two ways:

* **one by one**: each append awaited before the next starts, so every batch holds one append:
  one script call per action, what a node paid before the group commit;
* **grouped**: every table appends in the same event-loop turn (as when many tables act at
  once), so the batch holds them all (up to ``MAX_BATCH`` a call).

For each it prints appends/s and this process's CPU µs per append (``time.process_time``: the
node's share of the cost, the figure that limits a node; wall time also counts Redis and the
machine's other load). The in-memory store's figure is the floor. ``--repeat`` runs, medians.
``--cpu`` pins this process (Redis runs wherever the system puts it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a checkout, not installed

from blackdrez.server.stores import Stores, open_stores
from blackdrez.server.stores.base import Append, table_channel
from blackdrez.server.testing.redis_server import RedisServer

ENTRY = b"e" * 120
ANNOUNCE = b"u" * 400


async def prepare(store: Stores, tables: list[str]) -> dict[str, int]:
    """Lease every table and log its first entry: the tokens."""
    tokens = {}
    for table in tables:
        token = await store.leases.acquire(table, 600)
        assert token is not None
        await store.logs.append(Append(table, token, 1, b"create"))
        tokens[table] = token
    return tokens


async def run(store: Stores, tables: int, rounds: int, grouped: bool) -> dict[str, float]:
    """Append ``rounds`` entries to each of ``tables`` new tables; appends/s and CPU µs each."""
    names = [f"b{os.getpid()}x{time.monotonic_ns()}x{i}" for i in range(tables)]
    tokens = await prepare(store, names)

    def append(table: str, position: int) -> Any:
        channel = table_channel(table)
        return store.logs.append(Append(table, tokens[table], position, ENTRY, channel, ANNOUNCE))

    wall, cpu = time.perf_counter(), time.process_time()
    for position in range(2, rounds + 2):
        if grouped:
            await asyncio.gather(*(append(table, position) for table in names))
        else:
            for table in names:
                await append(table, position)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    count = tables * rounds
    return {"appends_per_s": count / wall, "cpu_us_per_append": cpu / count * 1e6}


async def measure(url: str | None, tables: int, rounds: int, grouped: bool) -> dict[str, float]:
    store = open_stores(url, "bench")
    await store.start()
    try:
        return await run(store, tables, rounds, grouped)
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cpu", type=int, default=None, help="pin this process to this CPU")
    parser.add_argument("--json", default=None, help="write the medians here as JSON")
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    settings = {
        "in memory": (False, False),
        "redis, one by one": (True, False),
        "redis, grouped": (True, True),
    }
    found: dict[str, list[dict[str, float]]] = {name: [] for name in settings}
    with RedisServer() as redis_server:
        for _ in range(args.repeat):
            for name, (on_redis, grouped) in settings.items():
                url = redis_server.url if on_redis else None
                result = asyncio.run(measure(url, args.tables, args.rounds, grouped))
                found[name].append(result)
    load = os.getloadavg()[0]
    print(f"{args.tables} tables x {args.rounds} appends, {args.repeat} runs (load {load:.1f})")
    medians = {}
    for name, results in found.items():
        medians[name] = {key: statistics.median(r[key] for r in results) for key in results[0]}
        runs = ", ".join(f"{r['appends_per_s']:,.0f}" for r in results)
        print(
            f"  {name:20} {medians[name]['appends_per_s']:>9,.0f} appends/s ({runs})  "
            f"{medians[name]['cpu_us_per_append']:6.1f} CPU µs/append"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"medians": medians, "runs": found, "load": load}, out, indent=1)


if __name__ == "__main__":
    main()
