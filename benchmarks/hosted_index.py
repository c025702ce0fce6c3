"""What one node's orphan scan reads of the hosted-tables index: the whole set, or its share.

    python3 benchmarks/hosted_index.py [--tables 250000] [--nodes 10] [--repeat 5]

Theory of operation
-------------------
Every node's orphan scan starts from the index of hosted tables (``blackdrez.server.stores.redis``).
Kept
as one set (``bd:hosted``, before the buckets) each node read all of it with ``SMEMBERS``, and
then kept its share; kept in buckets (``bd:{hosted}:B``) a node reads its share's buckets with
one ``SUNION``. This script starts a Redis of its own, fills both forms with ``--tables`` ids
like the server's, and times one node's read of each (``--nodes`` nodes: share 0 of n), taking
turns ``--repeat`` times, as seen by the node (redis-py, wall time) and inside Redis (``INFO
commandstats``); it prints the medians, the reply sizes and their ratios. The baseline is the
one-set read measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import time
from pathlib import Path

import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a checkout, not installed

from blackdrez.server.stores.base import bucket_of, in_share, share_buckets
from blackdrez.server.stores.keys import LEGACY_HOSTED_KEY, hosted_key
from blackdrez.server.testing.redis_server import RedisServer


async def fill(client: aioredis.Redis, tables: int) -> None:
    ids = [secrets.token_hex(4)[:7] + f"{i:04x}"[-4:] for i in range(tables)]  # 11 characters
    async with client.pipeline(transaction=False) as pipe:
        for start in range(0, tables, 10_000):
            chunk = ids[start : start + 10_000]
            pipe.sadd(LEGACY_HOSTED_KEY, *chunk)
            for table in chunk:
                pipe.sadd(hosted_key(bucket_of(table)), table)
        await pipe.execute()


async def usec(client: aioredis.Redis, command: str) -> float:
    stats = await client.info("commandstats")
    return float(stats.get(f"cmdstat_{command}", {}).get("usec", 0))


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tables", type=int, default=250_000)
    p.add_argument("--nodes", type=int, default=10)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    share = (0, args.nodes)
    with RedisServer() as server:
        client = aioredis.Redis.from_url(server.url)
        try:
            await fill(client, args.tables)
            runs: dict[str, list[tuple[float, float, int]]] = {"one set": [], "buckets": []}
            for _ in range(args.repeat):
                for name in runs:
                    command = "smembers" if name == "one set" else "sunion"
                    before = await usec(client, command)
                    started = time.perf_counter()
                    if name == "one set":
                        members = await client.smembers(LEGACY_HOSTED_KEY)
                        mine = {m for m in members if in_share(m.decode(), share)}
                    else:
                        keys = [hosted_key(bucket) for bucket in share_buckets(share)]
                        members = mine = await client.sunion(keys)
                    wall = time.perf_counter() - started
                    inside = await usec(client, command) - before
                    runs[name].append((wall, inside, len(members)))
                    assert len(mine) > 0
            medians = {
                name: (
                    statistics.median(w for w, _, _ in rows) * 1000,
                    statistics.median(i for _, i, _ in rows) / 1000,
                    rows[0][2],
                )
                for name, rows in runs.items()
            }
            for name, (wall, inside, size) in medians.items():
                print(
                    f"{name:8s} {size:8,} ids read: {wall:8.1f} ms at the node, "
                    f"{inside:7.1f} ms inside Redis (medians of {args.repeat})"
                )
            whole, part = medians["one set"], medians["buckets"]
            print(
                f"share 0 of {args.nodes} nodes, {args.tables:,} tables: the buckets read "
                f"{part[2] / whole[2]:.2f}x the ids, in {part[0] / whole[0]:.2f}x the node's time "
                f"and {part[1] / whole[1]:.2f}x Redis's"
            )
        finally:
            await client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
