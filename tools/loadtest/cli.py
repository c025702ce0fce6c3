"""Load test: hold many WebSocket connections to a BlackDrez server and measure what it costs.

Theory of operation
-------------------
The parent process plans the load, optionally starts the server (and a Redis) itself, and starts
``--workers`` worker processes, each with its own event loop (uvloop when installed). Each worker
opens its share of the connections at a bounded rate (``--ramp-rate``), in one of four kinds:

* ``idle``: says ``hello`` and then only reads (server pings keep it alive);
* ``lobby``: says ``hello`` and ``watch_lobby``, then reads the lobby pushes;
* ``play``: bots seated ``--seats`` to a table; one creates it, the others join, every game is
  started again by its host as soon as it ends; each bot plays the ``threshold`` strategy when an
  ``update`` gives it legal actions (as fast as it can, or paced to ``--action-rate`` in total);
* ``echo``: no protocol at all, for the bare ``websockets`` echo baseline: send a frame, read the
  echo, again.

Once every connection is open (and ``--warmup`` seconds later) the parent opens the measurement
window for ``--duration`` seconds: workers snapshot their counters at its start and end, and keep
the latency samples of the actions started inside it (the parent's bounds; it tells the workers
to stop :data:`END_GRACE` later, so that the last actions are timed and no worker's teardown
holds up another's). The latency of an action is the time from sending ``act`` to
the arrival of the ``update`` frame whose ``seq`` equals the ``ok.seq`` of its answer (the server
sends the update before the ``ok``). The parent reads the server's RSS (``/proc/<pid>/status``)
before the first connection and while they are all held, and its CPU time over the window.
Each worker also reports how late its own event loop woke in the window (``clients_loop_lag_ms``):
a latency sample is taken when a worker's loop gets to the frame, so a stalled worker inflates
the tail by as much as it stalls. The server's own account of the same latency, from receiving
an ``act`` to handing its update to the connections, and how late its event loop woke (what a
frame waits before the node reads it), from its ``/metrics`` histograms read at the window's
start and end (``server_action_ms``, ``server_loop_lag_ms``), tell the server's share of a slow
tail from the kernel's and the clients'. Once its connections are open a worker collects once and
freezes what is left (``gc.freeze``), so that the collector does not walk the ramp's objects
again inside the window.

Every loop here is bounded in count and time, and the tool refuses any host but 127.0.0.x.

This module plans, runs and reports; the workers (``workers``), what they send and read
(``frames``, built on ``blackdrez.protocol.v1``), the server's process and ``/proc`` figures
(``procfs``),
the profiler (``profiler``) and the chart (``charts``) are its siblings.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import platform
import queue
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from blackdrez.server.testing.launcher import stop_process
from blackdrez.server.testing.redis_server import free_port
from blackdrez.tools.loadtest.charts import timeline_chart
from blackdrez.tools.loadtest.procfs import (
    check_loopback,
    cpu_list,
    cpu_seconds,
    cpu_split,
    favour,
    find_server_pid,
    histogram_window,
    involuntary_switches,
    records_children,
    rss_kib,
    server_histograms,
    start_process,
    steal_seconds,
    wait_listening,
)
from blackdrez.tools.loadtest.profiler import profile_summary, start_profiler
from blackdrez.tools.loadtest.workers import PROGRESS_INTERVAL, Window, WorkerPlan, worker_main
from blackdrez.tools.trees import cli_module, keep_known, module_in, serve_flags

MODES = ("idle", "lobby", "play", "echo")
END_GRACE = 0.5
"""Seconds between the window's end and telling the workers to stop: an action started just
before the end is still timed to its update, and no worker tears its connections down (which
keeps the server busy) while another's samples started inside the window are in flight."""
PORTS_PER_ADDRESS_SHARE = 0.6
"""Use another source address once one would need more than this share of the ephemeral ports."""


# --------------------------------------------------------------------------- planning


def source_addresses(connections: int, wanted: int = 0) -> tuple[str, ...]:
    """127.0.0.x addresses to connect from: enough that none needs too many ephemeral ports."""
    if wanted <= 0:
        try:
            low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
            ports = high - low + 1
        except (OSError, ValueError):
            ports = 28232
        wanted = max(1, math.ceil(connections / (ports * PORTS_PER_ADDRESS_SHARE)))
    return tuple(f"127.0.0.{i}" for i in range(1, min(wanted, 250) + 1))


def split(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` near-equal whole shares."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def plan_workers(args: argparse.Namespace, url: str) -> list[WorkerPlan]:
    """Divide the connections between the workers."""
    total = args.connections
    lobby = round(total * args.lobby_share) if args.mode != "lobby" else total
    rest = total - lobby
    idle = tables = echo = 0
    if args.mode == "idle":
        idle = rest
    elif args.mode == "play":
        tables = rest // args.seats
        lobby += rest - tables * args.seats
    elif args.mode == "echo":
        echo = rest
    workers = max(1, args.workers)
    sources = source_addresses(total, args.source_addresses)
    cpus = cpu_list(args.worker_cpus) if args.worker_cpus else ()
    deadline = time.monotonic() + args.ramp_timeout + args.warmup + args.duration + 30.0
    shares = zip(
        split(idle, workers),
        split(lobby, workers),
        split(tables, workers),
        split(echo, workers),
        strict=True,
    )
    return [
        WorkerPlan(
            index=i,
            url=url,
            idle=idle_n,
            lobby=lobby_n,
            tables=tables_n,
            seats=args.seats,
            echo=echo_n,
            echo_size=args.echo_size,
            sources=sources,
            ramp_rate=max(1.0, args.ramp_rate / workers),
            action_rate=args.action_rate / workers,
            round_pause=args.round_pause,
            binary=not args.text,
            client_pings=args.client_pings,
            cpus=cpus,
            deadline=deadline,
        )
        for i, (idle_n, lobby_n, tables_n, echo_n) in enumerate(shares)
    ]


# --------------------------------------------------------------------------- running a load


@dataclass
class Progress:
    """What the parent knows while the load runs."""

    phase: str = "starting"
    started: float = field(default_factory=time.monotonic)
    target: int = 0
    counters: dict[int, dict[str, int]] = field(default_factory=dict)
    samples: list[tuple[float, int, int, int]] = field(default_factory=list)
    """``(time, connected, frames, actions)`` totals, for rates and the timeline."""
    rss: int = 0

    def total(self, name: str) -> int:
        """A counter summed over the workers."""
        return sum(c.get(name, 0) for c in self.counters.values())

    def rate(self, index: int, seconds: float = 2.0) -> float:
        """Recent per-second rate of sample column ``index`` (1 connected, 2 frames, 3 actions)."""
        if len(self.samples) < 2:
            return 0.0
        last = self.samples[-1]
        first = next((s for s in self.samples if s[0] >= last[0] - seconds), self.samples[0])
        if last[0] <= first[0]:
            return 0.0
        return (last[index] - first[index]) / (last[0] - first[0])


def percentile(values: list[float], share: float) -> float | None:
    """The ``share`` quantile of sorted ``values`` (nearest rank), or ``None`` when empty."""
    if not values:
        return None
    return values[min(len(values) - 1, max(0, math.ceil(share * len(values)) - 1))]


def machine() -> dict[str, Any]:
    """The machine and versions a figure was measured on."""
    import websockets

    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    try:
        import uvloop

        loop = f"uvloop {uvloop.__version__}"
    except ImportError:
        loop = "asyncio"
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "websockets": websockets.version.version,
        "msgspec": msgspec.__version__,
        "loop": loop,
        "load_average": os.getloadavg()[0],
    }


class _Display:
    """A live progress display: rich when the output is a terminal, else nothing."""

    def __init__(self, enabled: bool) -> None:
        self.live: Any = None
        if enabled and sys.stdout.isatty():
            with contextlib.suppress(ImportError):
                from rich.live import Live

                self.live = Live(refresh_per_second=4, transient=True)
                self.live.start()

    def update(self, progress: Progress) -> None:
        """Redraw from ``progress``."""
        if self.live is None:
            return
        from rich.table import Table

        table = Table(title=f"blackdrez loadtest: {progress.phase}", show_header=False)
        elapsed = time.monotonic() - progress.started
        rows = [
            ("elapsed", f"{elapsed:.1f} s"),
            ("connections", f"{progress.total('connected')} / {progress.target}"),
            ("failed / closed", f"{progress.total('failed')} / {progress.total('closed')}"),
            ("frames/s", f"{progress.rate(2):,.0f}"),
            ("actions/s", f"{progress.rate(3):,.0f}"),
            ("server RSS", f"{progress.rss / 1024:,.1f} MiB" if progress.rss else "-"),
        ]
        for name, value in rows:
            table.add_row(name, value)
        self.live.update(table)

    def stop(self) -> None:
        """Remove the display."""
        if self.live is not None:
            self.live.stop()


def _cpu_of(pids: dict[str, int]) -> dict[str, float]:
    """The CPU seconds so far of each named process still there."""
    seconds = {}
    for name, pid in pids.items():
        with contextlib.suppress(OSError, ValueError):
            seconds[name] = cpu_seconds(pid)
    return seconds


def run_load(
    args: argparse.Namespace,
    url: str,
    server_pid: int | None,
    quiet: bool = False,
    on_measure: Any = None,
    neighbours: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Run one load against ``url`` and return its report (see :func:`main`).

    ``neighbours`` names other processes (the spawned Redis) whose CPU share over the window
    goes in the report as ``neighbours_cpu_share``: on a machine whose cores share a physical
    core, what runs beside the server slows it."""
    context = multiprocessing.get_context("spawn")
    reports = context.Queue()
    measuring, stopping = context.Event(), context.Event()
    bounds = context.RawArray("d", 2)  # the window's start and end (time.monotonic)
    plans = plan_workers(args, url)
    progress = Progress(target=sum(p.connections for p in plans))
    rss_before = rss_kib(server_pid) if server_pid else None
    processes = [
        context.Process(target=worker_main, args=(plan, reports, measuring, stopping, bounds))
        for plan in plans
    ]
    for process in processes:
        process.start()
    display = _Display(not quiet)
    windows: dict[int, Window] = {}
    rss_held = rss_start = None
    split_start: tuple[float, float] | None = None
    split_end: tuple[float, float] | None = None
    clients_start = clients_end = 0.0
    neighbours = neighbours or {}
    neighbours_start: dict[str, float] = {}
    neighbours_end: dict[str, float] = {}
    preempted_start = preempted_end = 0
    steal_start: dict[str, float] = {}
    steal_end: dict[str, float] = {}
    histograms_start: dict[str, dict[float, float]] = {}
    histograms_end: dict[str, dict[float, float]] = {}
    load_before = os.getloadavg()[0]
    window_start = window_end = 0.0
    progress.phase = "ramping"
    ramp_until = time.monotonic() + args.ramp_timeout
    hold_until = measure_until = math.inf
    hard_stop = plans[0].deadline + 10.0
    try:
        while len(windows) < len(plans) and time.monotonic() < hard_stop:
            _collect(reports, progress, windows)
            now = time.monotonic()
            if server_pid:
                with contextlib.suppress(OSError, ValueError):
                    progress.rss = rss_kib(server_pid)
            settled = progress.total("connected") + progress.total("failed") >= progress.target
            if progress.phase == "ramping" and (settled or now > ramp_until):
                progress.phase = "warming up"
                hold_until = now + args.warmup
            elif progress.phase == "warming up" and now >= hold_until:
                progress.phase = "measuring"
                clients_start = sum(cpu_seconds(p.pid) for p in processes if p.pid)
                neighbours_start = _cpu_of(neighbours)
                steal_start = steal_seconds()
                histograms_start = server_histograms(url)
                if server_pid:
                    rss_held = rss_start = rss_kib(server_pid)
                    split_start = cpu_split(server_pid)
                    preempted_start = involuntary_switches(server_pid)
                window_start = now
                measure_until = now + args.duration
                bounds[0], bounds[1] = window_start, measure_until
                measuring.set()
                if on_measure is not None:
                    on_measure()
            elif progress.phase == "measuring" and now >= measure_until:
                progress.phase = "closing"
                window_end = now
                clients_end = sum(cpu_seconds(p.pid) for p in processes if p.pid)
                neighbours_end = _cpu_of(neighbours)
                steal_end = steal_seconds()
                histograms_end = server_histograms(url)
                if server_pid:
                    split_end = cpu_split(server_pid)
                    preempted_end = involuntary_switches(server_pid)
                    rss_held = max(rss_held or 0, rss_kib(server_pid))
            elif progress.phase == "closing" and now >= measure_until + END_GRACE:
                progress.phase = "stopping"
                stopping.set()
            display.update(progress)
    finally:
        stopping.set()
        display.stop()
        for process in processes:
            process.join(15.0)
            if process.is_alive():
                process.kill()
                process.join()
    seconds = max(window_end - window_start, 1e-9)
    report = _report(
        args, url, plans, windows, progress, server_pid, rss_before, rss_held, rss_start,
        (sum(split_end) - sum(split_start)) / seconds
        if split_start is not None and split_end is not None else None,
    )  # fmt: skip
    # the server's CPU apart: its own code (user) and the kernel's work for it (system)
    for name, part in (("user", 0), ("system", 1)):
        report[f"server_cpu_{name}_share"] = (
            (split_end[part] - split_start[part]) / seconds
            if split_start is not None and split_end is not None
            else None
        )
    report["clients_cpu_share"] = (clients_end - clients_start) / seconds if window_end else None
    report["server_preempted_per_s"] = (preempted_end - preempted_start) / seconds
    report["neighbours_cpu_share"] = {
        name: (neighbours_end[name] - neighbours_start[name]) / seconds
        for name in neighbours_end
        if name in neighbours_start
    }
    report["steal_share"] = {
        cpu: (end - steal_start[cpu]) / seconds
        for cpu, end in steal_end.items()
        if cpu in steal_start
    }
    report["load_average_before"] = load_before
    for name in ("action", "loop_lag"):
        report[f"server_{name}_ms"] = histogram_window(
            histograms_start.get(name), histograms_end.get(name)
        )
    return report


def _collect(reports: Any, progress: Progress, windows: dict[int, Window]) -> None:
    """Take every queued worker report (waiting up to one progress interval for the first)."""
    timeout = PROGRESS_INTERVAL
    while True:
        try:
            item = reports.get(timeout=timeout)
        except queue.Empty:
            break
        timeout = 0.0
        if item[0] == "progress":
            progress.counters[item[1]] = item[3]
            progress.samples.append(
                (
                    item[2],
                    progress.total("connected"),
                    progress.total("frames"),
                    progress.total("actions"),
                )
            )
        elif item[0] == "window":
            windows[item[1]] = msgspec.msgpack.decode(item[2], type=Window)


def _report(
    args: argparse.Namespace,
    url: str,
    plans: list[WorkerPlan],
    windows: dict[int, Window],
    progress: Progress,
    server_pid: int | None,
    rss_before: int | None,
    rss_held: int | None,
    rss_start: int | None,
    server_cpu: float | None,
) -> dict[str, Any]:
    def rate(name: str) -> float:
        return sum(
            (w.end.get(name, 0) - w.start.get(name, 0)) / w.seconds
            for w in windows.values()
            if w.seconds > 0
        )

    latencies = sorted(x for w in windows.values() for x in w.latencies)
    lags = sorted(x for w in windows.values() for x in w.lags)
    failures: dict[str, int] = {}
    for w in windows.values():
        for reason, count in w.failures.items():
            failures[reason] = failures.get(reason, 0) + count
    held = sum(w.start.get("connected", 0) - w.start.get("closed", 0) for w in windows.values())
    held_end = sum(w.end.get("connected", 0) - w.end.get("closed", 0) for w in windows.values())
    frames = rate("frames")
    per_connection = (
        (rss_held - rss_before) / held
        if rss_held is not None and rss_before is not None and held
        else None
    )
    t0 = progress.samples[0][0] if progress.samples else 0.0
    return {
        "url": url,
        "mode": args.mode,
        "connections_target": sum(p.connections for p in plans),
        "connections_held": held,
        "connections_held_at_end": held_end,
        "kinds": {
            "idle": sum(p.idle for p in plans),
            "lobby": sum(p.lobby for p in plans),
            "play_tables": sum(p.tables for p in plans),
            "seats": args.seats,
            "echo": sum(p.echo for p in plans),
        },
        "failed": sum(w.end.get("failed", 0) for w in windows.values()),
        "failures": dict(sorted(failures.items(), key=lambda kv: -kv[1])[:10]),
        "workers": len(plans),
        "source_addresses": list(plans[0].sources),
        "duration_s": args.duration,
        "window_s": statistics.median([w.seconds for w in windows.values()]) if windows else 0,
        "action_rate_target": args.action_rate,
        "server_pid": server_pid,
        "server_rss_before_kib": rss_before,
        "server_rss_held_kib": rss_held,
        "server_rss_per_connection_kib": per_connection,
        # at the window's start, every connection made: what the window adds (an in-memory
        # store keeps every finished game's record for its retention) is not the connections'
        "server_rss_window_start_kib": rss_start,
        "server_rss_per_connection_at_start_kib": (
            (rss_start - rss_before) / held
            if rss_start is not None and rss_before is not None and held
            else None
        ),
        "server_cpu_share": server_cpu,
        "frames_per_s": frames,
        "bytes_per_s": rate("bytes"),
        "mean_frame_bytes": rate("bytes") / frames if frames else None,
        "sent_per_s": rate("sent"),
        "actions_per_s": rate("actions"),
        "games_per_s": rate("games"),
        "errors": sum(w.end.get("errors", 0) for w in windows.values()),
        "disorder": sum(w.end.get("disorder", 0) for w in windows.values()),
        "latency_ms": {
            "count": len(latencies),
            "p50": _ms(percentile(latencies, 0.50)),
            "p99": _ms(percentile(latencies, 0.99)),
            "p999": _ms(percentile(latencies, 0.999)),
            "max": _ms(latencies[-1] if latencies else None),
        },
        "clients_loop_lag_ms": {
            "p99": _ms(percentile(lags, 0.99)),
            "max": _ms(lags[-1] if lags else None),
            "over_10ms": sum(lag > 0.010 for lag in lags),
        },
        "timeline": [
            [round(t - t0, 2), connected, frames_total, actions]
            for t, connected, frames_total, actions in progress.samples[:: max(1, len(plans))]
        ],
        "machine": machine(),
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


# --------------------------------------------------------------------------- the echo baseline


def serve_echo(host: str, port: int) -> None:
    """Run a bare ``websockets`` echo server (compression off) until SIGTERM."""
    import signal

    from websockets.exceptions import ConnectionClosed

    async def handler(ws: Any) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for message in ws:
                await ws.send(message)

    async def main() -> None:
        from websockets.asyncio.server import serve

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        async with serve(handler, host, port, compression=None, ping_interval=None):
            await stop.wait()

    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())


def run_echo_baseline(
    args: argparse.Namespace, connections: int, size: int, quiet: bool = True
) -> dict[str, Any]:
    """Start a bare echo server, load it like ours (same connections and frame size), stop it."""
    host = "127.0.0.1"
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "blackdrez.tools.loadtest",
        "--echo-server",
        "--port",
        str(port),
    ]
    log = Path(args.server_log)
    process = start_process(command, args.server_cpus, log)
    try:
        wait_listening(host, port, process, 15.0)
        echo_args = argparse.Namespace(**vars(args))
        echo_args.mode, echo_args.connections, echo_args.echo_size = "echo", connections, size
        echo_args.lobby_share, echo_args.action_rate = 0.0, 0.0
        return run_load(echo_args, f"ws://{host}:{port}/", process.pid, quiet)
    finally:
        stop_process(process)


# --------------------------------------------------------------------------- output


def summary_lines(report: dict[str, Any]) -> list[str]:
    """A report as a few readable lines."""
    latency = report["latency_ms"]
    lines = [
        f"mode {report['mode']}: {report['connections_held']} of "
        f"{report['connections_target']} connections held ({report['failed']} failed), "
        f"{report['workers']} workers, {len(report['source_addresses'])} source address(es)",
    ]
    if report["server_rss_per_connection_kib"] is not None:
        lines.append(
            f"server RSS {report['server_rss_before_kib'] / 1024:.1f} -> "
            f"{report['server_rss_held_kib'] / 1024:.1f} MiB: "
            f"{report['server_rss_per_connection_kib']:.1f} KiB per connection"
            + (
                f" ({report['server_rss_per_connection_at_start_kib']:.1f} at the window's start)"
                if report.get("server_rss_per_connection_at_start_kib") is not None
                else ""
            )
        )
    if report["server_cpu_share"] is not None:
        lines.append(
            f"CPU: server {100 * report['server_cpu_share']:.0f}% of one core"
            + (
                f" ({100 * report['server_cpu_user_share']:.0f}% user, "
                f"{100 * report['server_cpu_system_share']:.0f}% system)"
                if report.get("server_cpu_user_share") is not None
                else ""
            )
            + f", load clients "
            f"{100 * (report.get('clients_cpu_share') or 0):.0f}%; server preempted "
            f"{report.get('server_preempted_per_s') or 0:.0f}/s; load average before "
            f"{report.get('load_average_before') or 0:.2f}"
        )
    if report.get("steal_share"):
        lines.append(
            "CPU taken by the hypervisor (steal) over the window: "
            + ", ".join(f"{cpu} {100 * share:.1f}%" for cpu, share in report["steal_share"].items())
        )
    if report.get("neighbours_cpu_share"):
        shares = report["neighbours_cpu_share"].items()
        lines.append(
            "CPU beside the server: "
            + ", ".join(f"{name} {100 * share:.0f}%" for name, share in shares)
        )
    if report.get("redis_priority"):
        lines.append(f"Redis favoured over the workers: {report['redis_priority']}")
    lines.append(
        f"frames/s {report['frames_per_s']:,.0f} (mean {report['mean_frame_bytes'] or 0:.0f} B), "
        f"sent/s {report['sent_per_s']:,.0f}, actions/s {report['actions_per_s']:,.0f}, "
        f"games/s {report['games_per_s']:,.1f}, errors {report['errors']}, "
        f"disorder {report['disorder']}"
    )
    if latency["count"]:
        lines.append(
            f"latency ms (n={latency['count']}): p50 {latency['p50']:.2f}, "
            f"p99 {latency['p99']:.2f}, p999 {latency['p999']:.2f}, max {latency['max']:.2f}"
        )
    for name, what in (("action", "act -> update"), ("loop_lag", "event loop lag")):
        if own := report.get(f"server_{name}_ms"):
            lines.append(
                f"the server's own {what} (its /metrics, n={own['count']}): "
                f"{100 * own['share_over_10ms']:.2f}% over 10 ms, p99 at most "
                f"{own['p99_at_most_ms']} ms"
            )
    lag = report.get("clients_loop_lag_ms") or {}
    if lag.get("max") is not None:
        lines.append(
            f"clients' own loop lag ms: p99 {lag['p99']:.2f}, max {lag['max']:.2f}, "
            f"{lag['over_10ms']} over 10 ms (late wake-ups delay the latency samples)"
        )
    if "baseline" in report:
        base = report["baseline"]
        lines.append(
            f"echo baseline: {base['frames_per_s']:,.0f} frames/s of "
            f"{base['mean_frame_bytes'] or 0:.0f} B over {base['connections_held']} connections, "
            f"{base['server_rss_per_connection_kib'] or 0:.1f} KiB per connection; ours is "
            f"{100 * report['frames_vs_echo']:.0f}% of it"
        )
    if report.get("profile"):
        lines.append("server profile, own time: " + ", ".join(
            f"{name} {share}%" for name, share in report["profile"]["own"][:8]
        ))  # fmt: skip
    for reason, count in report["failures"].items():
        lines.append(f"  failure x{count}: {reason}")
    return lines


# --------------------------------------------------------------------------- command line


def parser() -> argparse.ArgumentParser:
    """The ``blackdrez loadtest`` options."""
    p = argparse.ArgumentParser(
        prog="blackdrez loadtest",
        description="Hold many connections to a BlackDrez server on 127.0.0.x and measure it.",
    )
    p.add_argument("--url", default="ws://127.0.0.1:8765/", help="a ws://127.0.0.x URL")
    p.add_argument("-c", "--connections", type=int, default=100)
    p.add_argument("--mode", choices=MODES, default="idle")
    p.add_argument("--lobby-share", type=float, default=0.0, help="share of lobby watchers")
    p.add_argument("--seats", type=int, default=4, help="play: bots per table (2-8)")
    p.add_argument("--workers", type=int, default=2, help="worker processes")
    p.add_argument("--worker-cpus", help="pin workers to these CPUs, e.g. 1 or 0-1")
    p.add_argument("--ramp-rate", type=float, default=1000.0, help="new connections per second")
    p.add_argument("--ramp-timeout", type=float, default=120.0)
    p.add_argument("--warmup", type=float, default=2.0, help="seconds between ramp and window")
    p.add_argument("--duration", type=float, default=10.0, help="seconds measured")
    p.add_argument("--action-rate", type=float, default=0.0, help="play: total actions/s (0: max)")
    p.add_argument("--round-pause", type=float, default=0.0, help="play: table round pause")
    p.add_argument("--echo-size", type=int, default=200, help="echo: frame size in bytes")
    p.add_argument("--text", action="store_true", help="JSON text frames (default MessagePack)")
    p.add_argument("--client-pings", action="store_true", help="clients ping too (every 20 s)")
    p.add_argument("--source-addresses", type=int, default=0, help="127.0.0.x count (0: auto)")
    p.add_argument("--server-pid", type=int, help="the server process (default: found by port)")
    p.add_argument("--spawn-server", action="store_true", help="start the server, stop it after")
    p.add_argument("--server-cpus", help="with --spawn-server: pin it (e.g. 0)")
    p.add_argument("--server-rate", type=float, default=1000.0, help="spawned server's --rate")
    p.add_argument("--server-burst", type=int, default=1000, help="spawned server's --burst")
    p.add_argument("--server-arg", action="append", default=[], help="extra serve argument")
    store = p.add_mutually_exclusive_group()
    store.add_argument("--redis", action="store_true", help="spawned server uses a Redis it starts")
    store.add_argument("--redis-url", help="spawned server uses this Redis (it is not flushed)")
    p.add_argument(
        "--redis-favoured",
        action="store_true",
        help="with --redis: the Redis runs before the workers on their CPUs (SCHED_FIFO or nice)",
    )
    p.add_argument("--server-dir", help="start the server from this source tree (default: .)")
    p.add_argument("--server-log", default="/tmp/blackdrez-loadtest-server.log")
    p.add_argument("--baseline", action="store_true", help="also run the bare echo baseline")
    p.add_argument(
        "--profile", metavar="FILE",
        help="py-spy the server over the window (raw stacks, the thread holding the GIL)",
    )  # fmt: skip
    p.add_argument(
        "--profile-waits", action="store_true",
        help="with --profile: count threads waiting for the GIL too (where they wait)",
    )  # fmt: skip
    p.add_argument("--json", metavar="FILE", help="write the report as JSON")
    p.add_argument("--chart", metavar="FILE", help="write a PNG timeline of the run")
    p.add_argument("--quiet", action="store_true", help="no live display, no summary")
    p.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    return p


def _spawn_server(
    args: argparse.Namespace, redis_url: str | None, data: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``blackdrez serve`` for the run. Its records database is a new one in ``data``
    (a folder of the run's own, removed after it) unless ``--server-arg`` names one: a run does
    not write into the folder it was started from, nor start with the games of earlier runs."""
    host = "127.0.0.1"
    port = free_port()
    # another tree's server: its own code, and only the options it knows
    module, env = module_in(args.server_dir, cli_module(args.server_dir))
    command = [
        sys.executable, "-m", module, "serve", "--host", host, "--port", str(port),
        "--rate", str(args.server_rate), "--burst", str(args.server_burst),
        "--max-connections-per-ip", "0",  # every load connection comes from this machine
        "--handshake-burst", "0",  # at --ramp-rate, from one address unless that is too many
    ]  # fmt: skip
    extras = [part for extra in args.server_arg for part in shlex.split(extra)]
    if redis_url:
        command += ["--redis-url", redis_url]
    elif not any(part.split("=")[0] == "--redis-url" for part in extras):
        command += ["--in-memory"]  # the in-memory store, not the data folder's Redis
    if not any(part.split("=")[0] == "--db-url" for part in extras):
        command += ["--db-url", f"sqlite:///{data / 'records.db'}"]
    command += extras
    command = command[:3] + keep_known(command[3:], serve_flags(args.server_dir))
    process = start_process(command, args.server_cpus, Path(args.server_log), args.server_dir, env)
    wait_listening(host, port, process, 30.0)
    with contextlib.suppress(OSError):
        urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=5).read()
    return process, f"ws://{host}:{port}/"


def report_of(argv: list[str]) -> dict[str, Any]:
    """Run the load tool quietly with ``argv`` and return its JSON report without the timeline:
    what the benchmark scripts that run series of load tests read."""
    with tempfile.TemporaryDirectory(prefix="bd-loadtest-") as folder:
        out = Path(folder) / "report.json"
        main([*argv, "--quiet", "--json", str(out)])
        report = json.loads(out.read_text())
    report.pop("timeline", None)
    return report


def median_of(reports: list[dict[str, Any]], path: str) -> float:
    """The median over ``reports`` of the figure at the dotted ``path`` (``latency_ms.p99``); a
    report without it counts as 0."""
    values = []
    for report in reports:
        value: Any = report
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        values.append(value or 0.0)
    return statistics.median(values)


def main(argv: list[str] | None = None) -> int:
    """Run a load test (see the module docstring); print a summary; write JSON and a chart."""
    args = parser().parse_args(argv)
    if args.echo_server:
        serve_echo("127.0.0.1", args.port)
        return 0
    if args.mode == "play" and not 2 <= args.seats <= 8:
        raise SystemExit("--seats must be 2 to 8")
    if args.redis_favoured and not (args.spawn_server and args.redis):
        raise SystemExit("--redis-favoured is for the Redis that --spawn-server --redis starts")
    redis: Any = None
    redis_priority = ""
    server: subprocess.Popen[bytes] | None = None
    data = tempfile.TemporaryDirectory(prefix="bd-loadtest-data-")
    url = args.url
    try:
        if args.spawn_server:
            redis_url = args.redis_url
            if args.redis:
                from blackdrez.server.testing.redis_server import RedisServer

                redis = RedisServer()
                redis.start()
                redis_url = redis.url
                if args.worker_cpus:  # keep Redis off the server's core
                    with contextlib.suppress(OSError, AttributeError):
                        os.sched_setaffinity(redis.pid, cpu_list(args.worker_cpus))
                if args.redis_favoured:
                    redis_priority = favour(redis.pid) or "not permitted: as the workers"
            server, url = _spawn_server(args, redis_url, Path(data.name))
        _, port = check_loopback(url)
        pid = args.server_pid or (server.pid if server else find_server_pid(port))
        spies: list[subprocess.Popen[bytes]] = []

        def on_measure() -> None:
            if args.profile and pid:
                spy = start_profiler(pid, Path(args.profile), args.duration, args.profile_waits)
                if spy is not None:
                    spies.append(spy)

        neighbours = {"redis": redis.pid} if redis is not None else {}
        if server is not None and "--db-url none" not in " ".join(args.server_arg):
            # The records' process, like Redis, off the server's core (on a machine with more
            # cores it has one of its own): its CPU is reported apart, as the records'.
            for number, child in enumerate(records_children(server.pid)):
                if args.worker_cpus:
                    with contextlib.suppress(OSError):
                        os.sched_setaffinity(child, cpu_list(args.worker_cpus))
                neighbours["records" if not number else f"records {number}"] = child
        report = run_load(args, url, pid, args.quiet, on_measure, neighbours)
        report["command"] = ["blackdrez", "loadtest", *(argv or sys.argv[1:])]
        report["redis"] = bool(args.redis or args.redis_url)
        if redis_priority:
            report["redis_priority"] = redis_priority
        for spy in spies:
            with contextlib.suppress(subprocess.TimeoutExpired):
                spy.wait(30.0)
            if Path(args.profile).exists():
                report["profile"] = profile_summary(Path(args.profile))
        if args.baseline:
            size = round(report["mean_frame_bytes"] or args.echo_size)
            base = run_echo_baseline(args, report["connections_held"] or args.connections, size)
            report["baseline"] = {k: v for k, v in base.items() if k != "timeline"}
            report["frames_vs_echo"] = report["frames_per_s"] / max(base["frames_per_s"], 1e-9)
    finally:
        stop_process(server)
        if redis is not None:
            redis.close()
        data.cleanup()
    if not args.quiet:
        print("\n".join(summary_lines(report)))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    if args.chart:
        timeline_chart(report, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
