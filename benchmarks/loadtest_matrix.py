"""Latency and throughput of BlackDrez bot traffic against load, with the echo baseline.

Usage::

    python benchmarks/loadtest_matrix.py [--tables 300] [--repeat 3] [--fractions 0.1,0.25,0.5,0.75]
        [--redis] [--duration 6] [--server-dir DIR] [--json FILE] [--chart FILE]

In one invocation, every run with a server of its own (``blackdrez loadtest --spawn-server``,
pinned to CPU 0, the load's workers to CPU 1):

1. the maximum: ``--tables`` tables of 4 bots at full speed, ``--repeat`` times (median);
2. the same tables paced to each ``--fractions`` share of that median maximum (``--action-rate``),
   ``--repeat`` times each: the action -> update latency percentiles at each load;
3. with ``--redis``, steps 1 and 2 again with the lobby in a Redis started for the run (pinned
   to the workers' CPU); ``--redis-only`` skips the in-memory series;
4. the bare echo baseline with as many connections and the same mean frame size, ``--repeat``
   times: our frames/s as a share of the echo's (medians of both).

Prints a table of medians, writes every run as JSON and a PNG of latency and throughput against
the measured actions/s.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blackdrez.tools.loadtest import cli as loadtest


def _row(label: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "label": label,
        "runs": len(runs),
        "actions_per_s": loadtest.median_of(runs, "actions_per_s"),
        "frames_per_s": loadtest.median_of(runs, "frames_per_s"),
        "mean_frame_bytes": loadtest.median_of(runs, "mean_frame_bytes"),
        "server_cpu_share": loadtest.median_of(runs, "server_cpu_share"),
        "clients_cpu_share": loadtest.median_of(runs, "clients_cpu_share"),
        "p50_ms": loadtest.median_of(runs, "latency_ms.p50"),
        "p99_ms": loadtest.median_of(runs, "latency_ms.p99"),
        "p999_ms": loadtest.median_of(runs, "latency_ms.p999"),
        "rss_per_connection_kib": loadtest.median_of(runs, "server_rss_per_connection_kib"),
        "server_preempted_per_s": loadtest.median_of(runs, "server_preempted_per_s"),
        "load_average_before": loadtest.median_of(runs, "load_average_before"),
        "errors": sum(r["errors"] for r in runs),
        "failures": [reason for r in runs for reason in r["failures"]],
        "failed": sum(r["failed"] for r in runs),
    }


def _series(common: list[str], args: argparse.Namespace, store: str) -> list[dict[str, Any]]:
    extra = ["--redis"] if store == "redis" else []
    full = [loadtest.report_of([*common, *extra]) for _ in range(args.repeat)]
    rows = [_row(f"{store} full speed", full)]
    print(_line(rows[-1]), flush=True)
    peak = rows[0]["actions_per_s"]
    for fraction in args.fractions:
        rate = max(1.0, fraction * peak)
        runs = [
            loadtest.report_of([*common, *extra, "--action-rate", f"{rate:.0f}"])
            for _ in range(args.repeat)
        ]
        rows.append(_row(f"{store} {fraction:.0%} of max ({rate:.0f}/s)", runs))
        rows[-1]["fraction"] = fraction
        print(_line(rows[-1]), flush=True)
    return rows


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['label']:<32} actions/s {row['actions_per_s']:>7,.0f}  frames/s "
        f"{row['frames_per_s']:>7,.0f}  p50 {row['p50_ms']:>7.2f}  p99 {row['p99_ms']:>7.2f}  "
        f"p999 {row['p999_ms']:>7.2f} ms  server CPU {100 * row['server_cpu_share']:>3.0f}%  "
        f"clients CPU {100 * row['clients_cpu_share']:>3.0f}%  preempted "
        f"{row['server_preempted_per_s']:>5.0f}/s  load {row['load_average_before']:.1f}"
    )


def chart(series: dict[str, list[dict[str, Any]]], echo: dict[str, Any] | None, path: str) -> None:
    """Latency percentiles (log scale) and frames/s against the measured actions/s."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(8.5, 8), sharex=True)
    for store, rows in series.items():
        rows = sorted(rows, key=lambda r: r["actions_per_s"])
        x = [r["actions_per_s"] for r in rows]
        dash = "-" if store == "memory" else "--"
        for key, marker in (("p50_ms", "o"), ("p99_ms", "s"), ("p999_ms", "^")):
            top.plot(x, [r[key] for r in rows], marker + dash, label=f"{store} {key[:-3]}")
        bottom.plot(x, [r["frames_per_s"] for r in rows], "o" + dash, label=f"{store} frames/s")
    if echo is not None:
        bottom.axhline(echo["frames_per_s"], color="grey", linestyle=":", label=echo["label"])
    top.set_yscale("log")
    top.set_ylabel("act -> update latency (ms)")
    top.grid(alpha=0.3, which="both")
    top.legend(fontsize=8, ncol=2)
    top.set_title("BlackDrez bots (4 per table): latency and throughput against load")
    bottom.set_xlabel("actions/s (measured; server pinned to one core)")
    bottom.set_ylabel("frames/s received by clients")
    bottom.grid(alpha=0.3)
    bottom.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    """Run the matrix (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tables", type=int, default=300)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--fractions", default="0.1,0.25,0.5,0.75")
    p.add_argument("--redis", action="store_true", help="also with the lobby in Redis")
    p.add_argument("--redis-only", action="store_true", help="only with the lobby in Redis")
    p.add_argument("--no-echo", action="store_true", help="skip the echo baseline")
    p.add_argument("--duration", type=float, default=6.0)
    p.add_argument("--server-dir")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--chart", metavar="FILE")
    args = p.parse_args(argv)
    args.fractions = [float(f) for f in args.fractions.split(",") if f]
    common = [
        "--spawn-server", "--server-cpus", "0", "--worker-cpus", "1", "--mode", "play",
        "-c", str(args.tables * 4), "--duration", str(args.duration), "--warmup", "2",
    ]  # fmt: skip
    if args.server_dir:
        common += ["--server-dir", args.server_dir]
    series = {} if args.redis_only else {"memory": _series(common, args, "memory")}
    if args.redis or args.redis_only:
        series["redis"] = _series(common, args, "redis")
    echo = None
    if not args.no_echo:
        first = next(iter(series.values()))[0]
        size = round(first["mean_frame_bytes"])
        echo_args = loadtest.parser().parse_args(
            [*common[: common.index("--mode")], "--duration", str(args.duration), "--warmup", "2"]
        )
        runs = [
            loadtest.run_echo_baseline(echo_args, args.tables * 4, size) for _ in range(args.repeat)
        ]
        echo = _row(f"bare echo ({size} B)", runs)
        print(_line(echo))
        share = first["frames_per_s"] / max(echo["frames_per_s"], 1e-9)
        print(f"BlackDrez full-speed frames/s = {100 * share:.0f}% of the bare echo's (medians)")
        echo["blackdrez_share"] = share
    result = {"series": series, "echo": echo, "machine": loadtest.machine(), "argv": argv}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if args.chart:
        chart(series, echo, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
