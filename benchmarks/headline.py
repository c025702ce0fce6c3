"""Issue 13's headline figures in one invocation: in memory against Redis, 1 against 2 workers.

    python3 benchmarks/headline.py [--tables 300] [--repeat 3] [--duration 8] [--json FILE]
        [--parts max,half,workers]

Theory of operation
-------------------
Every run is ``blackdrez loadtest --spawn-server --mode play`` (``blackdrez.tools.loadtest``) with a
server, and with ``--redis`` a Redis, of its own; ``--tables`` tables of 4 bots. The series take
turns within each repetition, so that a machine whose load drifts hurts them alike.

1. **max**: full speed, in memory and with Redis, each run with ``--baseline`` (the bare
   ``websockets`` echo with as many connections and frames of the same size, in the same
   invocation). The server is pinned to CPU 0, the load's workers and Redis to CPU 1.
2. **half**: the same tables paced (``--action-rate``) to half the median Redis maximum of part
   1 (or ``--half-rate``), with Redis and in memory: the act -> update latency there.
3. **workers**: with Redis, at full speed, ``serve --workers 1`` then ``--workers 2``, unpinned:
   the workers, Redis and the bots share the machine's cores, as they would on one machine.

With ``--redis-priority favoured`` the Redis of parts 1 and 2 runs before the load's workers
on the CPU they share (``loadtest --redis-favoured``: ``SCHED_FIFO``), standing in for a Redis with
a core of its own; ``both`` runs the Redis series plain and favoured, taking turns, with part 2
paced to half the plain Redis maximum.

Prints the medians of each series and the issue's targets: with Redis, max actions/s at least
90% of the in-memory figure, and p99 at most 10 ms at half the Redis maximum.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blackdrez.tools.loadtest import cli as loadtest

PINNED = ["--server-cpus", "0", "--worker-cpus", "1"]
PARTS = ("max", "half", "workers")


def _stolen(run: dict[str, Any]) -> float:
    """The CPU the hypervisor took over a run's window, summed over the CPUs (0.2: a fifth of
    one): a run where it took much is the machine's, not the code's."""
    return sum((run.get("steal_share") or {}).values())


def _own(run: dict[str, Any], figure: str, histogram: str = "action") -> Any:
    """A figure of one of the server's own histograms over a run (its ``/metrics``: ``action``,
    act -> update; ``loop_lag``, how late its loop woke), if it had them."""
    return (run.get(f"server_{histogram}_ms") or {}).get(figure)


def _row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "runs": len(runs),
        "actions_per_s": loadtest.median_of(runs, "actions_per_s"),
        "actions_per_s_each": [round(r["actions_per_s"]) for r in runs],
        "frames_per_s": loadtest.median_of(runs, "frames_per_s"),
        "frames_vs_echo": loadtest.median_of(runs, "frames_vs_echo"),
        "p50_ms": loadtest.median_of(runs, "latency_ms.p50"),
        "p99_ms": loadtest.median_of(runs, "latency_ms.p99"),
        "p99_ms_each": [r["latency_ms"]["p99"] for r in runs],
        "server_cpu_share": loadtest.median_of(runs, "server_cpu_share"),
        "server_over_10ms_each": [_own(r, "share_over_10ms") for r in runs],
        "server_loop_late_10ms_each": [_own(r, "share_over_10ms", "loop_lag") for r in runs],
        "load_average_before": [round(r["load_average_before"], 1) for r in runs],
        "stolen_each": [round(_stolen(r), 2) for r in runs],
        "errors": sum(r["errors"] for r in runs),
        "failed": sum(r["failed"] for r in runs),
    }


def _series(
    common: list[str], variants: dict[str, list[str]], repeat: int
) -> dict[str, dict[str, Any]]:
    """Each variant ``repeat`` times, taking turns; a row of medians per variant."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for _ in range(repeat):
        for name, extra in variants.items():
            runs[name].append(loadtest.report_of([*common, *extra]))
            last = runs[name][-1]
            print(
                f"  {name}: {last['actions_per_s']:,.0f} actions/s, p99 "
                f"{last['latency_ms']['p99']} ms; over 10 ms the server's own "
                f"{100 * (_own(last, 'share_over_10ms') or 0):.2f}%, its loop late "
                f"{100 * (_own(last, 'share_over_10ms', 'loop_lag') or 0):.2f}% "
                f"(load {last['load_average_before']:.1f}, "
                f"stolen {_stolen(last):.2f} of a CPU)",
                file=sys.stderr,
                flush=True,
            )
    return {name: _row(series) for name, series in runs.items()}


def _line(name: str, row: dict[str, Any]) -> str:
    echo = f", {100 * row['frames_vs_echo']:.0f}% of the echo" if row["frames_vs_echo"] else ""
    return (
        f"{name:<34} {row['actions_per_s']:>7,.0f} actions/s {row['actions_per_s_each']}{echo}; "
        f"p50 {row['p50_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms {row['p99_ms_each']}; "
        f"errors {row['errors']}, failed {row['failed']}; load {row['load_average_before']}, "
        f"stolen {row['stolen_each']}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the parts asked for (see the module docstring) and print the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tables", type=int, default=300, help="tables of 4 bots")
    p.add_argument("--repeat", type=int, default=3, help="runs of each series (medians)")
    p.add_argument("--duration", type=float, default=8.0, help="seconds measured per run")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--parts", default=",".join(PARTS), help="comma-separated: max,half,workers")
    p.add_argument("--half-rate", type=float, help="actions/s of part 2 (default: from part 1)")
    p.add_argument("--redis-priority", choices=("plain", "favoured", "both"), default="plain")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    parts = [part for part in args.parts.split(",") if part]
    if unknown := set(parts) - set(PARTS):
        p.error(f"unknown parts: {', '.join(sorted(unknown))}")
    common = [
        "--spawn-server", "--mode", "play", "-c", str(4 * args.tables),
        "--duration", str(args.duration), "--warmup", str(args.warmup),
    ]  # fmt: skip
    report: dict[str, Any] = {"machine": loadtest.machine(), "argv": argv or sys.argv[1:]}
    lines: list[str] = []
    redis = {
        "plain": {"redis": ["--redis"]},
        "favoured": {"redis": ["--redis", "--redis-favoured"]},
        "both": {"redis": ["--redis"], "redis favoured": ["--redis", "--redis-favoured"]},
    }[args.redis_priority]
    if "max" in parts:
        rows = _series([*common, *PINNED, "--baseline"], {"memory": [], **redis}, args.repeat)
        report["max"] = rows
        for name in redis:
            share = rows[name]["actions_per_s"] / max(rows["memory"]["actions_per_s"], 1e-9)
            report[f"{name.replace(' ', '_')}_share_of_memory"] = share
            lines += [
                _line(f"full speed, {name}", rows[name]),
                f"{name} max = {100 * share:.0f}% of the in-memory max (target >= 90%)",
            ]
        lines.append(_line("full speed, in memory", rows["memory"]))
    if "half" in parts:
        rate = args.half_rate or report.get("max", {}).get("redis", {}).get("actions_per_s")
        if not rate:
            p.error("part half needs part max or --half-rate")
        rate = round(rate / 2) if not args.half_rate else round(rate)
        paced = ["--action-rate", str(rate)]
        variants = {name: [*extra, *paced] for name, extra in redis.items()}
        rows = _series([*common, *PINNED], {**variants, "memory": paced}, args.repeat)
        report["half"] = {"action_rate": rate, **rows}
        for name in redis:
            lines += [
                _line(f"{rate}/s, {name}", rows[name]),
                f"{name} p99 at half its max: {rows[name]['p99_ms']:.2f} ms (target <= 10 ms)",
            ]
        lines.append(_line(f"{rate}/s, in memory", rows["memory"]))
    if "workers" in parts:
        rows = _series(
            common,
            {"1 worker": ["--redis"], "2 workers": ["--redis", "--server-arg=--workers 2"]},
            args.repeat,
        )
        report["workers"] = rows
        gain = rows["2 workers"]["actions_per_s"] / max(rows["1 worker"]["actions_per_s"], 1e-9)
        lines += [
            _line("Redis, serve --workers 1, unpinned", rows["1 worker"]),
            _line("Redis, serve --workers 2, unpinned", rows["2 workers"]),
            f"2 workers / 1 worker: {gain:.2f}x",
        ]
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
