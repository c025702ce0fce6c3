"""A capacity model from measured runs: what one action costs, and what 10k-1M players need.

    python3 benchmarks/capacity.py [--tables 40] [--rate 150] [--duration 6] [--cluster]
        [--json FILE]

Theory of operation
-------------------
Everything is measured on this machine with the parts a deployment runs: a ``redis-server`` with
append-only persistence (started here), node processes running ``blackdrez serve --redis-url``
(started here), and ``blackdrez loadtest`` bots (``blackdrez.tools.loadtest.cli.run_load``: 4 bots
per
table, MessagePack, each action paced to a total rate).

1. **Calibration** (1 node, ``--tables`` tables, ``--rate`` actions/s). Over the load tool's
   measurement window: the node's CPU time (``/proc``), Redis's CPU time and its commands with
   their time inside Redis (``INFO cpu`` / ``INFO commandstats``), the bytes between node and
   Redis (``INFO stats``), and the frames and bytes the bots received. Divided by the actions in
   the window: the cost of one action. The lease upkeep (renewals, heartbeats, orphan looks) is
   counted apart, per table and per node, from the node's own schedule.
2. **Memory.** Node RSS per idle connection (an idle run of ``--idle`` connections) and per
   table (the calibration's RSS growth minus its connections), Redis memory per table and per
   logged action (``used_memory`` before and after).
3. **Checks.** The model predicts, from the calibration alone, the node CPU and the Redis
   commands of runs at twice the rate: on 1 node, and on 2 nodes (``serve --workers 2``: the
   kernel spreads the bots over both, so some actions take a remote hop, which the prediction
   leaves out on purpose: the gap is its cost). Printed side by side with the measurements.
4. **Every core** (``serve --workers``): the most actions/s the bots get, unpaced, from 1 and
   from 2 workers, with the CPU each side used: on 2 shared cores the bots and Redis compete
   with the workers, so this says what a second worker gives on this machine, not on a bigger
   one.
5. **Projection** to 10k, 100k and 1M concurrent players from the per-action costs and stated
   assumptions (``--seconds-per-action`` between one player's actions, ``--seats``, the share of
   a core a node or a Redis shard may use): nodes, Redis shards, bandwidth, memory.

With ``--cluster`` the checks of step 3 are run again on a local Redis Cluster (3 masters with a
replica each, append-only), still predicted from the single Redis's calibration: the model
counts a cluster's masters as independent shards, and the check says whether the commands add
up and how evenly they spread (each master's commands/s are printed).

The machine is shared and small (2 cores: nodes, Redis and bots compete), so the costs are upper
bounds; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blackdrez.server.node.failover import FULL_SCAN
from blackdrez.server.node.leases import RENEWALS
from blackdrez.server.node.node import LEASE_TTL
from blackdrez.server.testing.nodes import NodeProcess, cpu_seconds, resident_bytes
from blackdrez.server.testing.redis_cluster import LocalCluster
from blackdrez.server.testing.redis_server import RedisServer
from blackdrez.tools.loadtest import cli as loadtest

SERVE_EXTRA = (
    "--rate", "1000", "--burst", "1000", "--max-connections-per-ip", "0", "--handshake-burst", "0"
)  # fmt: skip
PLAYERS = (10_000, 100_000, 1_000_000)
WORKERS_START = 60.0
"""Seconds ``serve --workers N`` may take until every worker serves (a loaded machine)."""


@dataclass
class Sample:
    """Counters read at one instant: per-process CPU seconds and Redis's INFO."""

    cpu: dict[int, float]
    redis: dict[str, Any]


def redis_info(urls: list[str]) -> dict[str, Any]:
    """Redis's CPU, command, network and memory counters, summed over ``urls`` (one Redis, or
    a cluster's masters), with the commands of each in ``calls_each``."""
    infos = []
    for url in urls:
        with redis.Redis.from_url(url) as direct:
            infos.append(direct.info("all"))

    def total(name: str, key: str | None = None) -> float:
        return sum(
            v[name] if key is None else sum(x[name] for k, x in v.items() if k.startswith(key))
            for v in infos
        )

    calls_each = [
        sum(v["calls"] for k, v in info.items() if k.startswith("cmdstat_")) for info in infos
    ]
    return {
        "cpu": total("used_cpu_sys") + total("used_cpu_user"),
        "calls": sum(calls_each),
        "calls_each": calls_each,
        "usec": total("usec", "cmdstat_"),
        "net_in": total("total_net_input_bytes"),
        "net_out": total("total_net_output_bytes"),
        "memory": total("used_memory"),
        "keys": total("keys", "db"),
    }


def sample(urls: list[str], pids: list[int]) -> Sample:
    """The counters of these processes and of Redis, now."""
    return Sample(cpu={pid: cpu_seconds(pid) or 0.0 for pid in pids}, redis=redis_info(urls))


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (the workers of ``serve --workers``)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def run(
    redis_url: str,
    *,
    workers: int,
    tables: int,
    rate: float,
    duration: float,
    mode: str = "play",
    masters: list[str] | None = None,
) -> dict[str, Any]:
    """One load run on fresh nodes: the load tool's report plus node and Redis costs over its
    measurement window. ``masters``: on a cluster, a plain URL of each master (whose counters
    are summed)."""
    masters = masters or [redis_url]
    for url in masters:
        with redis.Redis.from_url(url) as direct:
            direct.flushall()
    before_start = redis_info(masters)
    extra = (*SERVE_EXTRA, "--workers", str(workers)) if workers > 1 else SERVE_EXTRA
    node = NodeProcess(redis_url, "cap", extra=extra)
    node.start()
    try:
        pids = [node.pid] if workers == 1 else []
        deadline = time.monotonic() + WORKERS_START
        while workers > 1 and sum("listening on" in x for x in node.output()) < workers:
            if time.monotonic() > deadline:  # each worker logs it once it serves
                raise RuntimeError(f"the {workers} workers did not all start serving")
            time.sleep(0.1)
        if workers > 1:
            pids = children(node.pid)
        connections = tables * 4 if mode == "play" else tables
        args = loadtest.parser().parse_args(
            [
                "--url", node.url, "--mode", mode, "-c", str(connections), "--workers", "1",
                "--warmup", "2", "--duration", str(duration), "--action-rate", str(rate),
                "--quiet",
            ]
        )  # fmt: skip
        marks: list[Sample] = []
        timer: list[threading.Timer] = []

        def on_measure() -> None:
            marks.append(sample(masters, pids))
            timer.append(threading.Timer(duration, lambda: marks.append(sample(masters, pids))))
            timer[0].start()

        report = loadtest.run_load(
            args, node.url, pids[0] if workers == 1 else None, True, on_measure
        )
        for t in timer:
            t.join()
        held_rss = sum(resident_bytes(pid) or 0 for pid in pids)
    finally:
        node.stop()
    start, end = marks
    seconds = report["window_s"] or duration
    actions = report["actions_per_s"] * seconds
    redis_delta = {k: end.redis[k] - start.redis[k] for k in start.redis if k != "calls_each"}
    redis_delta["calls_each"] = [
        b - a for a, b in zip(start.redis["calls_each"], end.redis["calls_each"], strict=True)
    ]
    return {
        "workers": workers,
        "tables": tables if mode == "play" else 0,
        "connections": report["connections_held"],
        "seconds": seconds,
        "actions_per_s": report["actions_per_s"],
        "frames_per_s": report["frames_per_s"],
        "bytes_to_clients_per_s": report["bytes_per_s"],
        "requests_per_s": report["sent_per_s"],
        "node_cpu_s": sum(end.cpu[p] - start.cpu[p] for p in pids),
        "redis": redis_delta,
        "redis_memory_before": before_start["memory"],
        "redis_memory_held": end.redis["memory"],
        "node_rss_before_kib": report["server_rss_before_kib"],
        "node_rss_held_kib": held_rss // 1024,
        "latency_p99_ms": report["latency_ms"]["p99"],
        "actions": actions,
        "failed": report["failed"],
        "errors": report["errors"],
    }


def upkeep_per_second(tables: int, nodes: int) -> float:
    """Redis commands per second that keeping leases costs, whatever the players do: a
    renewal per table and a heartbeat per node RENEWALS times per TTL, an orphan look per node
    (live nodes) six times per TTL, and a full scan (one locate per table) every FULL_SCAN s."""
    per_ttl = RENEWALS / LEASE_TTL
    return tables * per_ttl + nodes * (per_ttl + 6 / LEASE_TTL) + tables / FULL_SCAN


def costs(calibration: dict[str, Any], idle: dict[str, Any]) -> dict[str, float]:
    """Per-action costs (and per-connection, per-table memory) from the measured runs."""
    c = calibration
    actions = c["actions"]
    upkeep = upkeep_per_second(c["tables"], 1) * c["seconds"]
    redis_calls = c["redis"]["calls"]
    per_call_us = c["redis"]["usec"] / max(redis_calls, 1)
    idle_per_connection = (
        (idle["node_rss_held_kib"] - idle["node_rss_before_kib"]) / max(idle["connections"], 1)
        if idle["node_rss_before_kib"]
        else 0.0
    )
    node_per_table = (
        c["node_rss_held_kib"] - c["node_rss_before_kib"] - idle_per_connection * c["connections"]
    ) / max(c["tables"], 1)
    return {
        "node_cpu_us": 1e6 * c["node_cpu_s"] / actions,
        "redis_commands": max(redis_calls - upkeep, 0.0) / actions,
        "redis_us_inside": per_call_us * max(redis_calls - upkeep, 0.0) / actions,
        "redis_cpu_us": 1e6 * c["redis"]["cpu"] / actions,
        "redis_bytes": (c["redis"]["net_in"] + c["redis"]["net_out"]) / actions,
        "frames_out": c["frames_per_s"] / c["actions_per_s"],
        "bytes_out": c["bytes_to_clients_per_s"] / c["actions_per_s"],
        "requests_in": c["requests_per_s"] / c["actions_per_s"],
        "upkeep_us_per_command": per_call_us,
        "node_kib_per_connection": idle_per_connection,
        "node_kib_per_table": max(node_per_table, 0.0),
        "redis_bytes_per_table_open": (c["redis_memory_held"] - c["redis_memory_before"])
        / max(c["tables"], 1),
    }


def predict(cost: dict[str, float], rate: float, tables: int, nodes: int) -> dict[str, float]:
    """What the model says a run at ``rate`` actions/s on ``tables`` tables costs."""
    return {
        "node_cpu_share": rate * cost["node_cpu_us"] / 1e6,
        "redis_commands_per_s": rate * cost["redis_commands"] + upkeep_per_second(tables, nodes),
    }


def measured(run_: dict[str, Any]) -> dict[str, Any]:
    """The same figures as :func:`predict`, measured (and the commands/s of each master)."""
    return {
        "node_cpu_share": run_["node_cpu_s"] / run_["seconds"],
        "redis_commands_per_s": run_["redis"]["calls"] / run_["seconds"],
        "redis_commands_per_s_each": [c / run_["seconds"] for c in run_["redis"]["calls_each"]],
    }


def cluster_checks(args: argparse.Namespace, cost: dict[str, float]) -> dict[str, Any]:
    """The checks' runs again on a local Redis Cluster (3 masters, 3 replicas), predicted from
    the single Redis's calibration: the model counts a cluster's masters as its shards."""
    with LocalCluster(masters=3, replicas=1, appendonly=True) as cluster:
        masters = [f"redis://127.0.0.1:{cluster.nodes[i].port}/0" for i in cluster.master_indexes()]
        runs = {
            f"{workers} node(s) at {2 * args.rate:g}/s on a cluster": run(
                cluster.url,
                workers=workers,
                tables=args.tables,
                rate=2 * args.rate,
                duration=args.duration,
                masters=masters,
            )
            for workers in (1, 2)
        }
    return {
        name: {
            "predicted": predict(cost, c["actions_per_s"], c["tables"], c["workers"]),
            "measured": measured(c),
            "run": c,
        }
        for name, c in runs.items()
    }


def project(cost: dict[str, float], players: int, args: argparse.Namespace) -> dict[str, float]:
    """Nodes, Redis shards, bandwidth and memory for ``players`` concurrent players."""
    actions = players / args.seconds_per_action
    tables = players / args.seats
    node_cores = actions * cost["node_cpu_us"] / 1e6
    nodes_by_cpu = node_cores / args.node_share
    nodes_by_connections = players / args.connections_per_node
    redis_us = (
        actions * cost["redis_cpu_us"]
        + upkeep_per_second(tables, math.ceil(nodes_by_cpu)) * cost["upkeep_us_per_command"] * 2
    )
    shards = redis_us / 1e6 / args.redis_share
    wire = actions * (cost["bytes_out"] + args.packet_overhead * cost["frames_out"])
    return {
        "actions_per_s": actions,
        "tables": tables,
        "node_cores": node_cores,
        "nodes": math.ceil(max(nodes_by_cpu, nodes_by_connections)),
        "nodes_by_cpu": nodes_by_cpu,
        "nodes_by_connections": nodes_by_connections,
        "redis_commands_per_s": actions * cost["redis_commands"]
        + upkeep_per_second(tables, math.ceil(nodes_by_cpu)),
        "redis_shards": math.ceil(shards),
        "redis_shards_exact": shards,
        "mbit_to_players": wire * 8 / 1e6,
        "mbit_node_redis": actions * cost["redis_bytes"] * 8 / 1e6,
        "node_memory_gib": (
            players * cost["node_kib_per_connection"] + tables * cost["node_kib_per_table"]
        )
        / 2**20,
        "redis_memory_gib": tables * cost["redis_bytes_per_table_open"] / 2**30,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=40, help="tables of 4 bots (calibration)")
    parser.add_argument("--rate", type=float, default=150.0, help="actions/s (calibration)")
    parser.add_argument("--duration", type=float, default=6.0, help="seconds measured per run")
    parser.add_argument("--idle", type=int, default=1000, help="connections of the idle run")
    parser.add_argument("--runs", type=int, default=3, help="calibrations (the median is used)")
    parser.add_argument("--seats", type=int, default=4, help="players per table (projection)")
    parser.add_argument(
        "--seconds-per-action", type=float, default=5.0, help="between a player's actions"
    )
    parser.add_argument("--node-share", type=float, default=0.5, help="core share a node may use")
    parser.add_argument("--redis-share", type=float, default=0.5, help="same for a Redis shard")
    parser.add_argument("--connections-per-node", type=int, default=15_000)
    parser.add_argument(
        "--packet-overhead", type=int, default=66, help="bytes per frame below WebSocket"
    )
    parser.add_argument(
        "--cluster", action="store_true", help="also check the model on a local Redis Cluster"
    )
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as data, RedisServer(appendonly=True, data_dir=data) as r:
        calibrations = [
            run(r.url, workers=1, tables=args.tables, rate=args.rate, duration=args.duration)
            for _ in range(args.runs)
        ]
        idle = run(r.url, workers=1, tables=args.idle, rate=0, duration=2, mode="idle")
        checks = {
            f"{workers} node(s) at {2 * args.rate:g}/s": run(
                r.url,
                workers=workers,
                tables=args.tables,
                rate=2 * args.rate,
                duration=args.duration,
            )
            for workers in (1, 2)
        }
        most = {
            f"{n} worker(s)": run(
                r.url, workers=n, tables=args.tables, rate=0, duration=args.duration
            )
            for n in (1, 2)
        }
    usable = [c for c in calibrations if c["actions"] > 0]
    if not usable:
        raise SystemExit("no calibration run made any action: the machine is too loaded")
    all_costs = [costs(c, idle) for c in usable]
    cost = {k: statistics.median(c[k] for c in all_costs) for k in all_costs[0]}
    report: dict[str, Any] = {
        "load_average_before": load,
        "calibrations": calibrations,
        "idle": idle,
        "cost_per_action": cost,
        "checks": {
            name: {
                "predicted": predict(cost, c["actions_per_s"], c["tables"], c["workers"]),
                "measured": measured(c),
                "run": c,
            }
            for name, c in checks.items()
        },
        "max_actions": {
            name: {
                "actions_per_s": m["actions_per_s"],
                "node_cpu_share": m["node_cpu_s"] / m["seconds"],
                "redis_cpu_share": m["redis"]["cpu"] / m["seconds"],
                "latency_p99_ms": m["latency_p99_ms"],
                "errors": m["errors"],
            }
            for name, m in most.items()
        },
        "cluster_checks": cluster_checks(args, cost) if args.cluster else {},
        "assumptions": {k: v for k, v in vars(args).items() if k != "json"},
        "projection": {str(n): project(cost, n, args) for n in PLAYERS},
    }
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print("\n".join(lines(report)))


def lines(report: dict[str, Any]) -> list[str]:
    """The report as printable lines."""
    c = report["cost_per_action"]
    out = [
        f"load average before: {report['load_average_before']:.1f}",
        "per action (1 node, median of the calibrations):",
        f"  node CPU {c['node_cpu_us']:.0f} us; Redis {c['redis_commands']:.2f} commands, "
        f"{c['redis_us_inside']:.0f} us inside commands, {c['redis_cpu_us']:.0f} us of its CPU",
        f"  to players {c['frames_out']:.2f} frames, {c['bytes_out']:.0f} B of payload; "
        f"from players {c['requests_in']:.2f} requests; node<->Redis {c['redis_bytes']:.0f} B",
        f"  memory: node {c['node_kib_per_connection']:.1f} KiB per idle connection, "
        f"{c['node_kib_per_table']:.1f} KiB per table; Redis "
        f"{c['redis_bytes_per_table_open'] / 1024:.1f} KiB per table (with its log so far)",
        "checks (predicted from the calibration vs measured):",
    ]
    for name, check in {**report["checks"], **report.get("cluster_checks", {})}.items():
        p, m = check["predicted"], check["measured"]
        each = m.get("redis_commands_per_s_each", [])
        split = f" (per master: {', '.join(f'{c:.0f}' for c in each)})" if len(each) > 1 else ""
        out.append(
            f"  {name}: node CPU {100 * p['node_cpu_share']:.0f}% vs "
            f"{100 * m['node_cpu_share']:.0f}% of a core; Redis commands/s "
            f"{p['redis_commands_per_s']:.0f} vs {m['redis_commands_per_s']:.0f}{split} "
            f"({check['run']['actions_per_s']:.0f} actions/s measured)"
        )
    out.append("most actions/s, unpaced (bots, Redis and workers share the machine):")
    for name, m in report["max_actions"].items():
        out.append(
            f"  {name}: {m['actions_per_s']:.0f} actions/s, workers "
            f"{100 * m['node_cpu_share']:.0f}% and Redis {100 * m['redis_cpu_share']:.0f}% of a "
            f"core, p99 {m['latency_p99_ms']} ms, {m['errors']} errors"
        )
    a = report["assumptions"]
    out.append(
        f"projection (a player acts every {a['seconds_per_action']:g} s, {a['seats']} per table, "
        f"nodes and Redis shards at {100 * a['node_share']:.0f}% / {100 * a['redis_share']:.0f}% "
        "of a core):"
    )
    for players, p in report["projection"].items():
        out.append(
            f"  {int(players):>9,} players: {p['actions_per_s']:,.0f} actions/s, "
            f"{p['nodes']} node(s) ({p['nodes_by_cpu']:.1f} by CPU, "
            f"{p['nodes_by_connections']:.1f} by connections), {p['redis_shards']} Redis "
            f"shard(s) ({p['redis_shards_exact']:.2f}), {p['mbit_to_players']:,.0f} Mbit/s to "
            f"players, {p['mbit_node_redis']:,.0f} Mbit/s node<->Redis, node memory "
            f"{p['node_memory_gib']:.1f} GiB, Redis memory {p['redis_memory_gib']:.1f} GiB"
        )
    return out


if __name__ == "__main__":
    main()
