"""The load tool: a small smoke run against a server it starts, and its pure helpers."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis

from blackdrez.server.testing.nodes import NodeProcess
from blackdrez.server.testing.redis_server import RedisServer, answers_ping
from blackdrez.tools.loadtest import cli as loadtest
from blackdrez.tools.loadtest import frames, procfs, profiler, workers


def test_smoke_run_reports_sane_figures(tmp_path: Path) -> None:
    report_path, chart_path = tmp_path / "report.json", tmp_path / "chart.png"
    code = loadtest.main(
        [
            "--spawn-server",
            "--mode", "play",
            "-c", "20",
            "--lobby-share", "0.1",
            "--workers", "1",
            "--warmup", "0.5",
            "--duration", "2",
            "--action-rate", "200",
            "--server-log", str(tmp_path / "server.log"),
            "--json", str(report_path),
            "--chart", str(chart_path),
            "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    report = json.loads(report_path.read_text())
    assert report["connections_target"] == 20
    assert report["kinds"] == {"idle": 0, "lobby": 4, "play_tables": 4, "seats": 4, "echo": 0}
    assert report["connections_held"] == 20
    assert report["failed"] == 0 and report["errors"] == 0 and report["disorder"] == 0
    assert 100 < report["actions_per_s"] < 300  # paced to 200/s
    assert report["frames_per_s"] > report["actions_per_s"]  # every action reaches 4 seats
    latency = report["latency_ms"]
    assert latency["count"] > 100
    assert 0 < latency["p50"] <= latency["p99"] <= latency["p999"] <= latency["max"] < 1000
    lag = report["clients_loop_lag_ms"]  # the workers' own loop lag, measured in the window
    assert 0 <= lag["p99"] <= lag["max"] and lag["over_10ms"] >= 0
    assert report["server_rss_held_kib"] > report["server_rss_before_kib"] > 0
    assert report["server_rss_per_connection_kib"] > 0
    start = report["server_rss_window_start_kib"]  # every connection made by then
    assert report["server_rss_before_kib"] < start <= report["server_rss_held_kib"]
    assert (
        0
        < report["server_rss_per_connection_at_start_kib"]
        <= (report["server_rss_per_connection_kib"])
    )
    own = report["server_action_ms"]  # the server's own account, from its /metrics
    assert 0.5 * report["actions_per_s"] * 2 <= own["count"] <= 2 * report["actions_per_s"] * 2
    assert 0 <= own["share_over_10ms"] <= 1 and 0 < own["p99_at_most_ms"] <= 500
    node_lag = report["server_loop_lag_ms"]  # its loop lag probe: every 50 ms over 2 s
    assert 20 <= node_lag["count"] <= 45 and 0 < node_lag["p99_at_most_ms"] <= 1000
    assert report["machine"]["nproc"] >= 1
    assert chart_path.read_bytes()[:4] == b"\x89PNG"


def test_a_worker_freezes_what_its_ramp_built_and_probes_its_loop_in_the_window() -> None:
    """Once every connection is open a worker collects and freezes (``gc.freeze``) before the
    traffic starts, so the collector does not walk the ramp's objects inside the window; and it
    reports how late its own loop woke while the window was open."""
    plan = workers.WorkerPlan(index=0, url="ws://127.0.0.1:9/", deadline=time.monotonic() + 30)
    measuring, stopping = threading.Event(), threading.Event()
    reports: list[tuple[Any, ...]] = []
    frozen_when_ramped: list[int] = []

    async def main() -> None:
        worker = workers._Worker(plan, measuring, stopping)

        async def watch() -> None:
            await worker.ramped.wait()
            frozen_when_ramped.append(gc.get_freeze_count())
            measuring.set()
            await asyncio.sleep(0.6)  # a few progress rounds inside the window
            stopping.set()

        watcher = asyncio.get_running_loop().create_task(watch())
        await worker.run(reports.append)
        await watcher

    gc.unfreeze()
    try:
        asyncio.run(main())
    finally:
        gc.unfreeze()
    assert frozen_when_ramped and frozen_when_ramped[0] > 0
    window = msgspec.msgpack.decode(reports[-1][2], type=workers.Window)
    assert window.seconds > 0 and len(window.lags) > 10
    assert all(lag >= 0 for lag in window.lags)


def test_a_worker_keeps_only_the_samples_started_inside_the_parents_window() -> None:
    """A worker notices the window at its own progress ticks, up to a quarter of a second
    late, and the other workers may already be tearing their connections down (keeping the
    server busy) when it does: only actions started inside the parent's bounds are timed."""
    plan = workers.WorkerPlan(index=0, url="ws://127.0.0.1:9/", deadline=time.monotonic() + 30)
    start = time.monotonic() + 10.0
    bounds = [start, start + 5.0]  # (the parent's RawArray reads the same)
    worker = workers._Worker(plan, threading.Event(), threading.Event(), bounds)
    worker._open_window()
    offset = time.monotonic() - time.perf_counter()
    for started, took in ((start - 0.1, 0.001), (start + 1, 0.002), (start + 5.01, 0.060)):
        worker.sample(started - offset, started - offset + took)
    assert worker.latencies == [pytest.approx(0.002)]


def test_the_bot_hits_low_stands_or_withdraws() -> None:
    view = frames.LeanView(
        phase="playing", to_act=1, seats=[frames.SeatValue(3), frames.SeatValue(9)]
    )
    hit, stand, withdraw = {"type": "hit"}, {"type": "stand"}, {"type": "withdraw"}
    assert frames.choose_action(view, [hit, withdraw]) == withdraw
    assert frames.choose_action(view, [hit, stand, withdraw]) == stand
    low = frames.LeanView(phase="playing", to_act=0, seats=[frames.SeatValue(3)])
    assert frames.choose_action(low, [hit, withdraw]) == hit


def test_masked_frame_unmasks_to_the_payload() -> None:
    for size in (5, 200, 1000):
        frame = frames.masked_frame(b"x" * size)
        header = 2 if size < 126 else 4
        assert frame[0] == 0x82 and frame[1] & 0x80
        mask, body = frame[header : header + 4], frame[header + 4 :]
        assert bytes(b ^ mask[i % 4] for i, b in enumerate(body)) == b"x" * size
        assert frames.echo_frame_size(size) == size + header


def test_planning_helpers() -> None:
    assert loadtest.split(10, 3) == [4, 3, 3]
    assert loadtest.source_addresses(100) == ("127.0.0.1",)
    assert len(loadtest.source_addresses(100_000)) > 1
    assert loadtest.percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert loadtest.percentile([], 0.99) is None
    assert procfs.check_loopback("ws://127.0.0.3:9/") == ("127.0.0.3", 9)
    with pytest.raises(SystemExit):
        procfs.check_loopback("ws://192.0.2.1:8765/")


def test_a_process_cpu_is_told_apart_as_its_own_and_the_kernels() -> None:
    """``cpu_split``: the user seconds grow with the process's own work, the system seconds
    with its system calls, and together they are ``cpu_seconds``."""
    user, system = procfs.cpu_split(os.getpid())
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        sum(range(1000))
    worked = procfs.cpu_split(os.getpid())
    assert worked[0] - user >= 0.2 and worked[1] - system < 0.1
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        os.stat("/")
    called = procfs.cpu_split(os.getpid())
    assert called[1] - worked[1] >= 0.05
    assert abs(sum(procfs.cpu_split(os.getpid())) - procfs.cpu_seconds(os.getpid())) < 0.05


def test_profile_summary_ranks_own_and_total_time(tmp_path: Path) -> None:
    raw = tmp_path / "profile.txt"
    raw.write_text(
        "main (a.py:1);send (b.py:2) 30\nmain (a.py:1);decode (c.py:3) 10\nmain (a.py:1) 60\n"
    )
    summary = profiler.profile_summary(raw)
    assert summary["own"][0] == ("main (a.py)", 60.0)
    assert summary["total"][0] == ("main (a.py)", 100.0)
    assert ("send (b.py)", 30.0) in summary["own"]


def test_the_profile_counts_the_thread_holding_the_gil_unless_waits_are_asked_for(
    tmp_path: Path,
) -> None:
    """A thread waiting for the GIL uses no CPU, but py-spy without ``--gil`` shows it busy in
    the call that gave the GIL up: by default the profile leaves it out."""
    out = tmp_path / "profile.raw"
    command = profiler.profiler_command(1234, out, 8.0)
    assert command[command.index("--pid") + 1] == "1234" and "--gil" in command
    assert command[command.index("--output") + 1] == str(out)
    assert "--gil" not in profiler.profiler_command(1234, out, 8.0, waits=True)
    args = loadtest.parser().parse_args(["--profile", str(out), "--profile-waits"])
    assert args.profile_waits and not loadtest.parser().parse_args([]).profile_waits


CHECKOUT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("store", ["--redis", "--redis-url"])
def test_the_installed_tool_runs_on_redis_from_any_folder(
    store: str, tmp_path: Path, redis_url: str
) -> None:
    """``blackdrez loadtest --redis`` (or ``--redis-url``) from a folder outside the checkout,
    with only the installed packages importable (no ``tests``), as after ``pip install``."""
    site = tmp_path / "site"
    site.mkdir()
    for package in ("games", "protocol", "server", "clients", "tools"):  # what pyproject installs
        (site / package).symlink_to(CHECKOUT / package)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store_args = [store, "--redis-favoured"] if store == "--redis" else [store, redis_url]
    command = [
        sys.executable, "-m", "blackdrez.tools.cli", "loadtest", "--spawn-server", *store_args,
        "--mode", "play", "-c", "8", "--workers", "1", "--warmup", "0.5", "--duration", "1",
        "--action-rate", "50", "--server-log", "server.log", "--json", "report.json", "--quiet",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("BLACKDREZ_DB_URL")  # the suite's "no records": a user's serve keeps them
    run = subprocess.run(command, cwd=elsewhere, env=env, capture_output=True, timeout=240)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    report = json.loads((elsewhere / "report.json").read_text())
    assert report["redis"] is True and report["failed"] == 0 and report["actions_per_s"] > 0
    if store == "--redis":  # the Redis it started was favoured over its workers, and says how
        said = {"SCHED_FIFO 1", "nice -10", "not permitted: as the workers"}
        assert report["redis_priority"] in said
        # what the Redis beside the server used of a core in the window is reported with it
        assert 0.0 <= report["neighbours_cpu_share"]["redis"] < 1.5
    else:  # a Redis it did not start is not its to watch
        assert "redis" not in report["neighbours_cpu_share"]
    # the server's CPU told apart: its own code's and the kernel's for it
    user, system = report["server_cpu_user_share"], report["server_cpu_system_share"]
    assert user > 0.0 and system >= 0.0
    assert abs(user + system - report["server_cpu_share"]) < 1e-9
    # the records' process the server started is reported beside it
    assert 0.0 <= report["neighbours_cpu_share"]["records"] < 1.5
    # what the hypervisor took of each CPU over the window (machines here are shared)
    steal = report["steal_share"]
    assert steal and all(cpu.startswith("cpu") for cpu in steal), steal
    assert all(0.0 <= share <= 1.0 for share in steal.values()), steal
    assert "(redis lobby" in (elsewhere / "server.log").read_text()
    # the spawned server kept its records in a database of the run's own, now gone: nothing
    # left in the folder but what was asked for, and no run starts with an earlier run's games
    assert sorted(path.name for path in elsewhere.iterdir()) == ["report.json", "server.log"]


def _log_lengths(redis_url: str) -> dict[str, int]:
    """Each table's log length (entries written so far)."""
    with redis.Redis.from_url(redis_url) as direct:
        return {key.decode(): direct.xlen(key) for key in direct.scan_iter("bd:t:*:log")}


def test_a_favoured_process_runs_before_the_workers_and_says_how() -> None:
    """``favour`` (the load tool's ``--redis-favoured``) sets what it reports on a real Redis:
    the real-time policy where permitted (as root: CI), else nice -10, else nothing."""
    server = RedisServer()
    server.start()
    try:
        assert os.sched_getscheduler(server.pid) == os.SCHED_OTHER
        said = procfs.favour(server.pid)
        policy = os.sched_getscheduler(server.pid)
        nice = os.getpriority(os.PRIO_PROCESS, server.pid)
        if said == "SCHED_FIFO 1":
            assert (policy, os.sched_getparam(server.pid).sched_priority) == (os.SCHED_FIFO, 1)
        elif said == "nice -10":
            assert (policy, nice) == (os.SCHED_OTHER, -10)
        else:
            assert (said, policy, nice) == ("", os.SCHED_OTHER, 0)
        if os.geteuid() == 0 and said == "":
            pytest.fail("root could not raise a process's priority")
        assert answers_ping(server.port)  # still serving
    finally:
        server.close()


def test_favouring_a_redis_is_refused_without_one_to_start() -> None:
    with pytest.raises(SystemExit, match="--redis-favoured is for the Redis"):
        loadtest.main(["--spawn-server", "--redis-favoured", "--mode", "play"])


OUTAGE = 0.2
"""How long Redis stays dead before its restart: long enough that each of the six tables sends
an act into the outage (a bot acts within milliseconds of an update), so refusals are certain,
not a matter of whether an append was on the wire at the instant of the kill (CI once saw
none); short enough that the restart stays quicker than a lease."""


def test_bots_act_again_after_a_refusal_while_the_store_restarts(tmp_path: Path) -> None:
    """Redis killed, left dead for :data:`OUTAGE`, and restarted from its append-only file
    during the window: the actions sent meanwhile are refused ``unavailable`` (nothing changed)
    and no update follows, so a bot must try again by itself (short capped delays with jitter)
    or its table stops until its turn timer. Every table goes on; the restart is quicker than a
    lease, so no adoption's update makes the bots act for another reason."""
    with RedisServer(appendonly=True, data_dir=str(tmp_path)) as store:
        node = NodeProcess(store.url, "lt", extra=("--rate", "1000", "--burst", "1000"))
        node.start()
        measuring = threading.Event()
        reports: list[dict] = []
        args = loadtest.parser().parse_args(
            ["--url", node.url, "--mode", "play", "-c", "24", "--workers", "1",
             "--warmup", "0.5", "--duration", "8", "--quiet"]
        )  # fmt: skip
        load = threading.Thread(
            target=lambda: reports.append(
                loadtest.run_load(args, node.url, node.pid, True, measuring.set)
            )
        )
        try:
            load.start()
            assert measuring.wait(120), "the load's window opened"
            start, started = _log_lengths(store.url), time.monotonic()
            time.sleep(1.0)
            before, killed = _log_lengths(store.url), time.monotonic()
            store.kill()
            time.sleep(OUTAGE)  # every table's next act comes while Redis is away
            store.start()
            time.sleep(1.0)  # the bots that will try again have (their delays are 0.25 s at most)
            back, resumed = _log_lengths(store.url), time.monotonic()
            time.sleep(3.0)  # within the window: once the bots leave, their tables are retired
            after, ended = _log_lengths(store.url), time.monotonic()
            load.join(120)
        finally:
            load.join(120)
            node.stop()
    assert reports and reports[0]["errors"] > 0, "some actions were refused during the restart"
    assert len(start) == 6
    # A table that stopped writes a handful of entries in seconds; one that plays, dozens a second.
    slow = {
        table: (before[table] - start[table]) / (killed - started)
        for table in start
        if (after[table] - back[table]) / (ended - resumed)
        < 0.2 * (before[table] - start[table]) / (killed - started)
    }
    assert not slow, f"tables (and their entries/s before) that stopped after the restart: {slow}"


def test_the_servers_own_action_latency_is_told_from_its_histogram_over_the_window() -> None:
    inf = float("inf")
    start = {0.001: 10.0, 0.005: 20.0, 0.01: 30.0, 0.02: 30.0, inf: 30.0}
    end = {0.001: 510.0, 0.005: 900.0, 0.01: 1020.0, 0.02: 1028.0, inf: 1030.0}
    own = procfs.histogram_window(start, end)
    # 1,000 in the window: 990 within 10 ms, 8 more within 20 ms, 2 slower.
    assert own == {"count": 1000, "share_over_10ms": pytest.approx(0.01), "p99_at_most_ms": 10.0}
    slow = {**end, 0.01: 950.0, 0.02: 1025.0}
    assert procfs.histogram_window(start, slow)["p99_at_most_ms"] == 20.0
    assert procfs.histogram_window(start, {**slow, 0.02: 990.0})["p99_at_most_ms"] is None
    assert procfs.histogram_window(None, end) is None  # no /metrics on the game port
    assert procfs.histogram_window(start, start) is None  # nothing handled in the window
    assert procfs.quantile_bound(end, 0.4) == 0.001  # 510 of 1,030 within 1 ms
    assert procfs.quantile_bound(end, 0.5) == 0.005
    assert procfs.quantile_bound({inf: 0.0}, 0.5) is None  # an empty histogram


def test_the_median_of_a_series_reads_dotted_figures_and_counts_missing_ones_as_zero() -> None:
    reports = [
        {"actions_per_s": 10.0, "latency_ms": {"p99": 3.0}},
        {"actions_per_s": 30.0, "latency_ms": {"p99": 9.0}},
        {"actions_per_s": 20.0},
    ]
    assert loadtest.median_of(reports, "actions_per_s") == 20.0
    assert loadtest.median_of(reports, "latency_ms.p99") == 3.0
