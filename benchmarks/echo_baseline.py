"""The bare ``websockets`` echo baseline, measured like the BlackDrez server.

Usage::

    python benchmarks/echo_baseline.py [-c 1600] [--size 650] [--repeat 3] [--json FILE]
        [--server-cpus 0] [--worker-cpus 1] [--workers 2] [--duration 10]

Starts a bare ``websockets`` echo server (compression off, uvloop when installed, the same
``--server-cpus`` pinning) with ``python -m blackdrez.tools.loadtest --echo-server``, and loads it
with the
load tool's ``echo`` clients: ``-c`` connections, each sending a ``--size``-byte binary frame and
waiting for its echo, again, for ``--duration`` seconds. Reports, per run and as medians: frames/s
received by the clients, the round trip p50/p99, and the server's RSS per connection read from
``/proc/<pid>/status`` before and after the connections open (as ``blackdrez loadtest`` does).

``blackdrez loadtest --baseline`` runs the same thing right after its own run, with its own
connection count and mean frame size, and prints its frames/s as a share of the echo's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blackdrez.tools.loadtest import cli as loadtest


def main(argv: list[str] | None = None) -> int:
    """Run the echo baseline ``--repeat`` times and print the medians."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-c", "--connections", type=int, default=1600)
    p.add_argument("--size", type=int, default=650, help="frame size in bytes")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", metavar="FILE")
    known, rest = p.parse_known_args(argv)
    args = loadtest.parser().parse_args(
        ["--mode", "echo", "-c", str(known.connections), "--quiet", *rest]
    )
    runs = []
    for _ in range(known.repeat):
        report = loadtest.run_echo_baseline(args, known.connections, known.size)
        report.pop("timeline", None)
        runs.append(report)
        print(
            f"echo: {report['connections_held']} connections, {report['frames_per_s']:,.0f} "
            f"frames/s of {report['mean_frame_bytes'] or 0:.0f} B, round trip p50 "
            f"{report['latency_ms']['p50']} ms p99 {report['latency_ms']['p99']} ms, "
            f"{report['server_rss_per_connection_kib'] or 0:.1f} KiB per connection, "
            f"server CPU {100 * (report['server_cpu_share'] or 0):.0f}%"
        )
    medians = {
        "frames_per_s": statistics.median(r["frames_per_s"] for r in runs),
        "rss_per_connection_kib": statistics.median(
            r["server_rss_per_connection_kib"] or 0 for r in runs
        ),
        "p99_ms": statistics.median(r["latency_ms"]["p99"] or 0 for r in runs),
    }
    print(
        f"median of {len(runs)}: {medians['frames_per_s']:,.0f} frames/s, "
        f"{medians['rss_per_connection_kib']:.1f} KiB per connection, "
        f"round trip p99 {medians['p99_ms']} ms"
    )
    if known.json:
        Path(known.json).write_text(json.dumps({"medians": medians, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
