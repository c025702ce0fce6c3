"""What a Redis outage costs a node, and how soon its tables resume afterwards.

    python3 benchmarks/redis_outage.py [--outage 20] [--tables 4] [--mode stop|pause] [--json]

Starts its own Redis (append-only, so its data survives a restart) and one node process running
the compose file's node command on a loopback port, and stops them all at the end. ``--tables``
two-seat tables are started with one-second turns and nobody acts, so every table always has a
timer due. Then Redis goes away for ``--outage`` seconds: ``stop`` terminates it and starts it
again (the leases lapse meanwhile, so every table is re-adopted from its log), ``pause`` freezes
it with SIGSTOP and lets it run again with SIGCONT (its connections stay open and hang).

Figures: the node's CPU (user + system, as a share of one core) and the lines it logged per
second during the outage; and, after Redis is back, the time until each table's players receive
a new event (the table was adopted again and its timer ran).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clients.client import Client
from tests.redis_server import RedisServer
from tests.server.helpers import seat_and_start
from tests.server.test_failover import Nodes


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(outage: float, tables: int, mode: str) -> dict[str, object]:
    with (
        tempfile.TemporaryDirectory(prefix="bd-outage-") as data,
        RedisServer(appendonly=True, data_dir=Path(data)) as store,
    ):
        nodes = Nodes(store.url, 1)
        node = nodes.processes[0]
        players: list[Client] = []
        try:
            watchers: dict[str, Client] = {}
            for index in range(tables):
                pair = [await Client.connect(nodes.urls[0], name=f"P{index}{n}") for n in "AB"]
                players += pair
                table = await seat_and_start(pair[0], pair[1:], turn_seconds=1.0)
                watchers[table] = pair[0]
            await asyncio.sleep(2.5)
            lines_before = len(nodes.output[0])
            cpu_before = cpu_seconds(node.pid)
            if mode == "stop":
                store.stop()
            else:
                store.pause()
            await asyncio.sleep(outage)
            cpu = cpu_seconds(node.pid) - cpu_before
            lines = len(nodes.output[0]) - lines_before
            seqs = {table: client.tables[table].seq for table, client in watchers.items()}
            if mode == "stop":
                store.start()
            else:
                store.resume()
            back = time.monotonic()
            resumed: dict[str, float] = {}
            while len(resumed) < len(watchers) and time.monotonic() - back < 60:
                for table, client in watchers.items():
                    if table not in resumed and client.tables[table].seq > seqs[table]:
                        resumed[table] = time.monotonic() - back
                await asyncio.sleep(0.01)
        finally:
            for player in players:
                await player.close()
            nodes.stop()
    return {
        "mode": mode,
        "outage_seconds": outage,
        "tables": tables,
        "cpu_share": cpu / outage,
        "log_lines": lines,
        "log_lines_per_second": lines / outage,
        "resumed_seconds": sorted(resumed.values()),
        "not_resumed": tables - len(resumed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outage", type=float, default=20.0, help="seconds Redis is away")
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--mode", choices=("stop", "pause"), default="stop")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = asyncio.run(measure(args.outage, args.tables, args.mode))
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    resumed = figures["resumed_seconds"]
    print(f"Redis {args.mode} for {args.outage:.0f} s, {args.tables} tables with timers due:")
    print(f"  node CPU during the outage: {figures['cpu_share']:.1%} of one core")
    print(
        f"  log lines during the outage: {figures['log_lines']} "
        f"({figures['log_lines_per_second']:.2f} per second)"
    )
    print(
        "  tables resumed after Redis was back: "
        + ", ".join(f"{seconds:.2f} s" for seconds in resumed)
        + (f"; {figures['not_resumed']} never" if figures["not_resumed"] else "")
    )


if __name__ == "__main__":
    main()
