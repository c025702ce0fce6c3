"""What a node's tail latency is made of: store and records database on and off, taking turns.

    python3 benchmarks/node_tail.py [--rate 1050] [--repeat 4] [--tables 300] [--duration 8]
        [--variants redis,redis-no-records,redis-favoured,redis-postgres,memory,...]
        [--trees DIR,DIR] [--unpinned]
        [--json FILE]

Theory of operation
-------------------
Each run is ``blackdrez loadtest --spawn-server --mode play`` pinned as the headline pins it
(the node on CPU 0, the bots and Redis on CPU 1), ``--tables`` tables of 4 bots paced to
``--rate`` actions/s (0: full speed); ``--unpinned`` leaves every process where the kernel
puts it, as a deployment would. The variants take turns within each repetition, so a
drift of the machine's speed hurts them alike:

* ``redis`` / ``memory``: the store, with a records database (SQLite, the load tool's own);
* ``...-no-records``: the same with ``--db-url none``: no records writer at all;
* ``redis-favoured``: Redis runs before the bots on the CPU they share (``--redis-favoured``);
* ``...-postgres``: the records in PostgreSQL instead of SQLite: a throwaway durable cluster
  this script starts (``blackdrez.server.testing.postgres_server``; Debian's ``postgresql``) pinned
  with
  the bots and Redis to CPU 1, a new database for each run.

With ``--trees``, each variant runs with the node started from each of those source trees in
turn (``--server-dir``; say ``git worktree add /tmp/before HEAD~3``), named ``variant@tree``.

The spawned node also serves ``/metrics`` on a port of this script's choosing, read every half
second while the run lasts: the node's own ``blackdrez_action_seconds`` (an action's receipt to
its update handed to the connections: what the store's round trip and the node's queueing add,
without the bots' side; its mean, exact, and the bucket bounds of its p50 and p99) over the
whole run, ramp and warm-up included, and the most finished games ever waiting for the records
writer (``blackdrez_records_pending``: at full speed, whether the writer keeps up). Printed per
run and as medians per variant, with the client's p50 and p99 (the window only), the node's
CPU share and what ran beside it on the other CPU (the bots, the spawned Redis): on a machine
whose two CPUs share one physical core, that load slows the node.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blackdrez.server.testing.redis_server import free_port
from blackdrez.tools.loadtest import cli as loadtest
from blackdrez.tools.loadtest.procfs import quantile_bound

POSTGRES_DB = "{postgres}"
"""In a variant: ``--server-arg=--db-url`` of a new database on the script's PostgreSQL."""
VARIANTS = {
    "redis": ["--redis"],
    "redis-no-records": ["--redis", "--server-arg=--db-url none"],
    "redis-favoured": ["--redis", "--redis-favoured"],
    "redis-postgres": ["--redis", POSTGRES_DB],
    "memory-postgres": [POSTGRES_DB],
    "memory": [],
    "memory-no-records": ["--server-arg=--db-url none"],
}
BUCKET = re.compile(r'^blackdrez_action_seconds_bucket\{le="([^"]+)"\} (\S+)$', re.M)
PENDING = re.compile(r"^blackdrez_records_pending (\S+)$", re.M)
SUM_COUNT = re.compile(r"^blackdrez_action_seconds_(sum|count) (\S+)$", re.M)


class Scraper(threading.Thread):
    """Reads a node's ``/metrics`` every half second until told to stop: the last action-time
    histogram read and the most records ever pending."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.buckets: list[tuple[float, float]] = []
        self.totals: dict[str, float] = {}
        self.pending_max = 0.0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            try:
                text = urllib.request.urlopen(self.url, timeout=2).read().decode()
            except OSError:
                continue  # not up yet, or already stopped
            buckets = [(float(le), float(n)) for le, n in BUCKET.findall(text)]
            if buckets and buckets[-1][1] > 0:
                self.buckets = buckets
                self.totals = {name: float(value) for name, value in SUM_COUNT.findall(text)}
            for value in PENDING.findall(text):
                self.pending_max = max(self.pending_max, float(value))

    def mean(self) -> float | None:
        """The mean (ms) of the action times read last."""
        if not self.totals.get("count"):
            return None
        return 1000 * self.totals["sum"] / self.totals["count"]

    def quantile(self, q: float) -> float | None:
        """The upper bound (ms) of the histogram bucket holding quantile ``q``."""
        bound = quantile_bound(dict(self.buckets), q)
        return None if bound is None else 1000 * bound


def pin_postgres(data_dir: Path) -> None:
    """Pin a PostgreSQL cluster to CPU 1, as the load tool pins its Redis: the postmaster (its
    later backends inherit it) and the processes it has started."""
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        if int(entry.name) == postmaster or parent == postmaster:
            os.sched_setaffinity(int(entry.name), {1})


def one_run(common: list[str], extra: list[str]) -> dict[str, Any]:
    """A load run with a scraper on the spawned node's metrics port."""
    port = free_port()
    scraper = Scraper(port)
    scraper.start()
    try:
        report = loadtest.report_of([*common, *extra, f"--server-arg=--metrics-port {port}"])
    finally:
        scraper.done.set()
        scraper.join()
    return {
        "actions_per_s": report["actions_per_s"],
        "p50_ms": report["latency_ms"]["p50"],
        "p99_ms": report["latency_ms"]["p99"],
        "node_cpu": report["server_cpu_share"],
        "bots_cpu": report["clients_cpu_share"],
        "redis_cpu": report.get("neighbours_cpu_share", {}).get("redis"),
        "steal": sum(report.get("steal_share", {}).values()) or None,
        "node_action_mean_ms": scraper.mean(),
        "node_action_p50_ms": scraper.quantile(0.5),
        "node_action_p99_ms": scraper.quantile(0.99),
        "records_pending_max": scraper.pending_max,
        "errors": report["errors"],
    }


def _share(share: float | None) -> str:
    return "-" if share is None else f"{share:.2f}"


def main(argv: list[str] | None = None) -> int:
    """Run the variants in turns (module docstring); print each run and the medians."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=float, default=1050.0, help="actions/s in all (0: full speed)")
    p.add_argument("--repeat", type=int, default=4)
    p.add_argument("--tables", type=int, default=300, help="tables of 4 bots")
    p.add_argument("--duration", type=float, default=8.0, help="seconds measured per run")
    p.add_argument("--variants", default="redis,redis-no-records,memory,memory-no-records")
    p.add_argument("--trees", default="", help="comma-separated source trees to compare")
    p.add_argument(
        "--unpinned", action="store_true",
        help="no CPU pinning: the node, its threads, the bots and the databases go where the "
        "kernel puts them (as on a deployment), not the node alone on CPU 0",
    )  # fmt: skip
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    names = [name for name in args.variants.split(",") if name]
    if unknown := set(names) - set(VARIANTS):
        p.error(f"unknown variants: {', '.join(sorted(unknown))}")
    common = [
        "--spawn-server", "--mode", "play", "-c", str(4 * args.tables), "--duration",
        str(args.duration), "--warmup", "2", "--action-rate", str(args.rate),
    ]  # fmt: skip
    if not args.unpinned:
        common += ["--server-cpus", "0", "--worker-cpus", "1"]
    trees = [tree for tree in args.trees.split(",") if tree]
    plans = {name: VARIANTS[name] for name in names}
    if trees:
        plans = {
            f"{name}@{tree}": [*extra, "--server-dir", tree]
            for name, extra in plans.items()
            for tree in trees
        }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in plans}
    postgres = None
    if any(POSTGRES_DB in extra for extra in plans.values()):
        from blackdrez.server.testing.postgres_server import PostgresServer

        postgres = PostgresServer(durable=True)
        postgres.start()
        if not args.unpinned:
            pin_postgres(postgres.data_dir)
    try:
        for _ in range(args.repeat):
            for name, extra in plans.items():
                if postgres is not None and POSTGRES_DB in extra:
                    database = f"--server-arg=--db-url {postgres.create_database()}"
                    extra = [database if part == POSTGRES_DB else part for part in extra]
                run = one_run(common, extra)
                runs[name].append(run)
                print(f"  {name}: {json.dumps(run)}", file=sys.stderr, flush=True)
    finally:
        if postgres is not None:
            postgres.close()
    medians = {}
    for name, series in runs.items():
        row = {}
        for key in series[0]:
            values = [run[key] for run in series if run[key] is not None]
            row[key] = statistics.median(values) if values else None
        row["p99_ms_each"] = [run["p99_ms"] for run in series]
        medians[name] = row
        print(
            f"{name:<24} {row['actions_per_s']:>7,.0f} actions/s; client p50 {row['p50_ms']:.2f}"
            f" ms, p99 {row['p99_ms']:.2f} ms {row['p99_ms_each']}; node CPU "
            f"{row['node_cpu']:.2f} (beside it: bots {row['bots_cpu']:.2f}, Redis "
            f"{_share(row['redis_cpu'])}; stolen by the hypervisor {_share(row['steal'])});"
            " node's own action time mean "
            f"{row['node_action_mean_ms']:.2f}"
            f" ms, p50 <= {row['node_action_p50_ms']}"
            f" ms, p99 <= {row['node_action_p99_ms']} ms; records pending at most "
            f"{row['records_pending_max']:.0f}"
        )
    if args.json:
        report = {"argv": argv or sys.argv[1:], "machine": loadtest.machine(), "runs": runs}
        Path(args.json).write_text(json.dumps({**report, "medians": medians}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
