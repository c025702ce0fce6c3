"""What a Redis Cluster and the WAIT durability setting cost, and what WAIT saves.

    python3 benchmarks/cluster.py [--tables 100] [--rate 400] [--repeat 3] [--duration 6]
        [--loss-trials 3] [--json FILE]

Throughput and latency: in one run, a node (``blackdrez loadtest --spawn-server``, pinned to
CPU 0; the bots and every Redis process on CPU 1) with ``--tables`` tables of 4 bots on

1. one Redis (the baseline),
2. a local Redis Cluster of 3 masters and 3 replicas,
3. the same cluster with ``--redis-wait-replicas 1 --redis-wait-timeout-ms 100``,

each at full speed (max actions/s, p50/p99 of act -> update) and paced at ``--rate`` actions/s
(p50/p99 at a load every setting sustains), ``--repeat`` times; prints the medians.

The store alone: the same three settings, a log append with its announcement in a loop, one
table at a time (latency) and 64 tables at once (appends/s), ``--repeat`` times; medians.

Loss: ``--loss-trials`` times, on a fresh cluster, 8 writers append to tables of one master as
fast as they can (through the store, as a node does); the master is SIGKILLed; once its replica
took over, count the appends that were acknowledged but are not in the logs; then the same with
the replica's link broken (``CLIENT KILL TYPE slave``, the replica frozen so that it cannot
reconnect) 0.2 s before the kill. Without WAIT that
is what an acknowledged write can lose; with WAIT it must be 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blackdrez.server.stores import LeaseLost, StoreUnavailable, open_stores
from blackdrez.server.stores.base import Append
from blackdrez.server.testing.redis_cluster import LocalCluster, redis_command
from blackdrez.server.testing.redis_server import RedisServer
from blackdrez.tools.loadtest import cli as loadtest

LOAD_CPU = 1


def _pin(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(pid, {LOAD_CPU})


def _run(url: str, tables: int, duration: float, extra: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bd-cluster-bench-") as folder:
        out = Path(folder) / "report.json"
        loadtest.main(
            [
                "--spawn-server", "--server-cpus", "0", "--worker-cpus", str(LOAD_CPU),
                "--mode", "play", "-c", str(tables * 4), "--duration", str(duration),
                "--warmup", "2", f"--server-arg=--redis-url {url}", *extra,
                "--quiet", "--json", str(out),
            ]
        )  # fmt: skip
        return json.loads(out.read_text())


def _medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {
        "actions_per_s": statistics.median(r["actions_per_s"] for r in runs),
        "p50_ms": statistics.median(r["latency_ms"]["p50"] or 0.0 for r in runs),
        "p99_ms": statistics.median(r["latency_ms"]["p99"] or 0.0 for r in runs),
        "errors": sum(r["errors"] for r in runs),
        "failed": sum(r["failed"] for r in runs),
    }


def throughput(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The three settings at full speed and paced (see the module docstring). The settings
    take turns within each repetition, so that a change in the machine's load hits all three."""
    wait = ["--server-arg=--redis-wait-replicas 1 --redis-wait-timeout-ms 100"]
    paces = (("full speed", []), (f"{args.rate:.0f}/s", ["--action-rate", str(args.rate)]))
    with RedisServer() as single, LocalCluster() as cluster:
        assert single._process is not None
        _pin([single._process.pid, *(n.process.pid for n in cluster.nodes if n.process)])
        settings = [
            ("one Redis", single.url, []),
            ("cluster 3+3", cluster.url, []),
            ("cluster 3+3, WAIT 1", cluster.url, wait),
        ]
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for _ in range(args.repeat):
            for pace, extra in paces:
                for label, url, options in settings:
                    report = _run(url, args.tables, args.duration, [*options, *extra])
                    runs.setdefault((label, pace), []).append(report)
    rows = []
    for (label, pace), reports in runs.items():
        row = {"setting": label, "pace": pace, **_medians(reports)}
        row["load_average"] = statistics.median(r["load_average_before"] for r in reports)
        rows.append(row)
        print(
            f"{label:<22} {pace:<11} actions/s {row['actions_per_s']:>7,.0f}  "
            f"p50 {row['p50_ms']:>6.2f} ms  p99 {row['p99_ms']:>7.2f} ms  "
            f"errors {row['errors']}  load {row['load_average']:.1f}",
            flush=True,
        )
    return rows


async def _appends(url: str, wait_replicas: int, tables: int, seconds: float) -> dict[str, float]:
    """``tables`` writers appending in a loop for ``seconds`` through one store. A writer whose
    call fails (a loaded machine can time a connection out) counts an error and starts a new
    table."""
    store = open_stores(url, "bench", wait_replicas=wait_replicas, wait_timeout_ms=100)
    await store.start()
    latencies: list[float] = []
    errors = 0
    try:
        stop = time.monotonic() + seconds

        async def write(index: int) -> None:
            nonlocal errors
            while time.monotonic() < stop:
                table = f"b{time.monotonic_ns()}-{index}"
                try:
                    token = await store.leases.acquire(table, 120)
                    assert token is not None
                    position = 1
                    while time.monotonic() < stop:
                        started = time.perf_counter()
                        await store.logs.append(
                            Append(table, token, position, b"x" * 60, "bd:bench", b"y" * 200)
                        )
                        latencies.append(time.perf_counter() - started)
                        position += 1
                except (StoreUnavailable, LeaseLost):
                    errors += 1
                    await asyncio.sleep(0.05)

        await asyncio.gather(*(write(i) for i in range(tables)))
    finally:
        await store.close()
    latencies.sort()
    return {
        "appends_per_s": len(latencies) / seconds,
        "p50_us": 1e6 * latencies[len(latencies) // 2] if latencies else 0.0,
        "p99_us": 1e6 * latencies[int(len(latencies) * 0.99)] if latencies else 0.0,
        "errors": errors,
    }


def appends(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The store alone: the cost of one log append (with its announcement) in each setting,
    one table at a time (latency) and 64 tables at once (throughput); settings take turns."""
    with RedisServer() as single, LocalCluster() as cluster:
        assert single._process is not None
        _pin([single._process.pid, *(n.process.pid for n in cluster.nodes if n.process)])
        settings = [("one Redis", single.url, 0), ("cluster 3+3", cluster.url, 0)]
        settings.append(("cluster 3+3, WAIT 1", cluster.url, 1))
        runs: dict[tuple[str, int], list[dict[str, float]]] = {}
        for _ in range(args.repeat):
            for tables in (1, 64):
                for label, url, wait in settings:
                    result = asyncio.run(_appends(url, wait, tables, args.duration / 2))
                    runs.setdefault((label, tables), []).append(result)
    rows = []
    for (label, tables), results in runs.items():
        row: dict[str, Any] = {"setting": label, "tables": tables}
        for key in ("appends_per_s", "p50_us", "p99_us"):
            row[key] = statistics.median(r[key] for r in results)
        row["errors"] = sum(r["errors"] for r in results)
        rows.append(row)
        print(
            f"store appends, {label:<22} {tables:>2} tables: {row['appends_per_s']:>7,.0f}/s  "
            f"p50 {row['p50_us']:>6.0f} us  p99 {row['p99_us']:>6.0f} us  errors {row['errors']}",
            flush=True,
        )
    return rows


async def _loss_trial(wait_replicas: int, link_drop: bool) -> dict[str, int]:
    with LocalCluster() as cluster:
        store = open_stores(cluster.url, "bench", wait_replicas=wait_replicas, wait_timeout_ms=500)
        await store.start()
        try:
            victim = cluster.index_serving("bd:t:{t0}:log")
            tables = [
                t
                for t in (f"t{i}" for i in range(300))
                if cluster.index_serving(f"bd:t:{{{t}}}:log") == victim
            ][:8]
            acked: dict[str, int] = dict.fromkeys(tables, 0)

            async def write(table: str) -> None:
                token = await store.leases.acquire(table, 120)
                assert token is not None
                position = 1
                while True:
                    try:
                        await store.logs.append(Append(table, token, position, b"%d" % position))
                    except StoreUnavailable:
                        return
                    acked[table] = position
                    position += 1

            writers = [asyncio.create_task(write(t)) for t in tables]
            await asyncio.sleep(1.5)
            replica = cluster.replica_of(victim)
            if link_drop:  # the replica's link breaks 0.2 s before the master dies
                cluster.pause(replica)  # so that it cannot reconnect meanwhile
                redis_command(cluster.nodes[victim].port, "CLIENT", "KILL", "TYPE", "slave")
                await asyncio.sleep(0.2)
            cluster.kill(victim)
            cluster.resume(replica)
            await asyncio.wait_for(asyncio.gather(*writers), 60)
            await asyncio.wait_for(store.health.wait_up(), 60)
            kept = {t: len(await store.logs.read(t)) for t in tables}
        finally:
            await store.close()
    return {
        "acknowledged": sum(acked.values()),
        "lost": sum(max(0, acked[t] - kept[t]) for t in tables),
        "tables_with_loss": sum(acked[t] > kept[t] for t in tables),
    }


def loss(trials: int) -> list[dict[str, Any]]:
    """Acknowledged appends lost when a master is SIGKILLed, without and with WAIT: with the
    replica's link up, and with it broken 0.2 s before the kill (a network blip, a replica
    restarting: what asynchronous replication does not cover)."""
    rows = []
    for link_drop in (False, True):
        for wait_replicas in (0, 1):
            for trial in range(trials):
                started = time.monotonic()
                result = asyncio.run(_loss_trial(wait_replicas, link_drop))
                rows.append(
                    {"wait_replicas": wait_replicas, "link_drop": link_drop, "trial": trial}
                    | result
                )
                print(
                    f"WAIT {wait_replicas}, replica link {'dropped' if link_drop else 'up':<7}: "
                    f"{result['lost']} of {result['acknowledged']} acknowledged appends lost "
                    f"({result['tables_with_loss']} of 8 tables) "
                    f"[{time.monotonic() - started:.0f} s]",
                    flush=True,
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run both measurements (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tables", type=int, default=100)
    p.add_argument("--rate", type=float, default=400.0, help="paced actions/s")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--duration", type=float, default=6.0)
    p.add_argument("--loss-trials", type=int, default=3)
    p.add_argument("--skip-throughput", action="store_true", help="no bot load runs")
    p.add_argument("--skip-appends", action="store_true", help="no store-only runs")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    result: dict[str, Any] = {"argv": argv or sys.argv[1:], "machine": loadtest.machine()}
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    if not args.skip_appends:
        result["appends"] = appends(args)
    if not args.skip_throughput:
        result["throughput"] = throughput(args)
    if args.loss_trials:
        result["loss"] = loss(args.loss_trials)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
