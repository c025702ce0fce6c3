"""How long a table takes to resume (adoption's rebuild) with and without snapshots.

    python3 benchmarks/snapshots.py [--entries 1000,10000] [--repeat 5] [--json FILE]

For each length, a BlackDrez table of four players is played in process until its log holds that
many entries (``blackdrez.server.testing.table_logs``), snapshotted every ``SNAPSHOT_EVERY`` entries
from
the live room as a host does; the log and the latest snapshot go to a Redis of its own. Then, as
an adopting node does, ``--repeat`` times each:

* **before** (the whole log replayed): ``read_log`` + ``replay``;
* **after** (snapshots): ``read_snapshot`` + ``read_log`` from the snapshot's entry on +
  ``resume`` (the snapshot, then the entries after it), as :meth:`Node._read_table` does.

Prints the medians in ms, split into the read from Redis and the rebuild, and the snapshot's size
and the time to take it. Wall times: on a loaded machine compare the ratios.
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

import redis
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a checkout, not installed

from blackdrez.server.stores.keys import log_key
from blackdrez.server.stores.redis import redis_stores
from blackdrez.server.table.commands import rebuild as rebuild_from_log
from blackdrez.server.table.commands import state_key
from blackdrez.server.table.room import Room
from blackdrez.server.table.snapshots import SNAPSHOT_EVERY, resume, take
from blackdrez.server.testing.redis_server import RedisServer
from blackdrez.server.testing.table_logs import TABLE, play_table


def build(entries: int) -> tuple[list[bytes], tuple[int, bytes], float]:
    """A log of ``entries`` entries, its latest snapshot and the ms that snapshot took."""
    latest: list[tuple[int, bytes, float]] = []

    def snapshot(room: Room, log: list[bytes]) -> None:
        if len(log) % SNAPSHOT_EVERY == 0 and len(log) <= entries:
            started = time.perf_counter()
            data = take(room)
            latest[:] = [(len(log), data, (time.perf_counter() - started) * 1000)]

    _, log = play_table(entries, after_each=snapshot)
    position, data, took = latest[0]
    return log[:entries], (position, data), took


async def measure(url: str, entries: int, repeat: int) -> dict[str, Any]:
    log, snapshot, took = build(entries)
    with redis.Redis.from_url(url) as client:
        client.delete(log_key(TABLE))
        pipe = client.pipeline(transaction=False)
        for position, entry in enumerate(log, start=1):
            pipe.xadd(log_key(TABLE), {"e": entry}, id=f"{position}-0")
        pipe.execute()
    store = redis_stores(url, "bench")
    await store.start()
    # The whole log is read as the store does (XRANGE) but without its 2 s command timeout,
    # which a loaded machine's read of 10,000 entries can pass.
    direct = aioredis.Redis.from_url(url, socket_timeout=60)
    try:
        token = await store.leases.acquire(TABLE, 600)
        assert token is not None
        await store.logs.put_snapshot(TABLE, token, *snapshot)
        before: dict[str, list[float]] = {"read": [], "rebuild": []}
        after: dict[str, list[float]] = {"read": [], "rebuild": []}
        for _ in range(repeat):
            started = time.perf_counter()
            read = [fields[b"e"] for _, fields in await direct.xrange(log_key(TABLE))]
            middle = time.perf_counter()
            room = rebuild_from_log(read)
            before["read"].append((middle - started) * 1000)
            before["rebuild"].append((time.perf_counter() - middle) * 1000)

            started = time.perf_counter()
            kept = await store.logs.read_snapshot(TABLE)
            assert kept is not None
            tail = await store.logs.read(TABLE, after=kept[0] - 1)
            middle = time.perf_counter()
            resumed = resume(kept, tail)
            after["read"].append((middle - started) * 1000)
            after["rebuild"].append((time.perf_counter() - middle) * 1000)
            assert state_key(resumed) == state_key(room)
    finally:
        await store.close()
        await direct.aclose()
    median = {
        name: {part: statistics.median(values) for part, values in parts.items()}
        for name, parts in (("before", before), ("after", after))
    }
    return {
        "entries": entries,
        "snapshot_at": snapshot[0],
        "snapshot_bytes": len(snapshot[1]),
        "snapshot_take_ms": took,
        "log_bytes": sum(len(entry) for entry in log),
        "median_ms": median,
        "runs_ms": {"before": before, "after": after},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", default="1000,10000", help="log lengths, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    results = []
    with RedisServer() as server:
        for entries in (int(n) for n in args.entries.split(",")):
            found = asyncio.run(measure(server.url, entries, args.repeat))
            results.append(found)
            before, after = found["median_ms"]["before"], found["median_ms"]["after"]
            total_before = before["read"] + before["rebuild"]
            total_after = after["read"] + after["rebuild"]
            print(
                f"{entries:>6} entries ({found['log_bytes'] / 1024:,.0f} KiB; snapshot at "
                f"{found['snapshot_at']}, {found['snapshot_bytes'] / 1024:.1f} KiB, taken in "
                f"{found['snapshot_take_ms']:.1f} ms)\n"
                f"    before: {total_before:8.1f} ms (read {before['read']:.1f} + replay "
                f"{before['rebuild']:.1f})\n"
                f"    after:  {total_after:8.1f} ms (read snapshot and tail {after['read']:.1f} + "
                f"resume {after['rebuild']:.1f})   {total_before / total_after:.0f}x faster"
            )
    print(f"medians of {args.repeat}; load average {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
