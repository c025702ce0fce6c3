"""Faults of disks and databases under live games: Redis's append-only file on a filesystem that
fills mid-game, the records' SQLite file on a full disk, PostgreSQL stopped or stalled while games
finish.

Each small disk is a size-limited tmpfs the test mounts (root only: under CI, where the suite
runs as root, a test that cannot mount one fails instead of skipping) and fills with a file of
zeros until the kernel answers ``ENOSPC``; deleting that file frees the space. Every mount is
unmounted in teardown, whatever the outcome.

* Redis: with ``appendfsync everysec`` Redis runs a write and tries to append it to the file
  before it replies, but replies even when ``write(2)`` gets ``ENOSPC``: it keeps that write in
  memory and in its AOF buffer, and from then on refuses every write, and PING, with ``MISCONF``
  until a retry of the buffer succeeds. So the node must answer ``unavailable``, acknowledge nothing
  it could not log, and go on once the space is back; the history checker holds it to that. The
  writes Redis answered before its first failure but could not put in the file would be lost if
  Redis died before the space came back: the test copies the file while the disk is full, loads
  the copy in a Redis of its own and counts what the copy lacks (a figure, not a failure).
* Records: games end while the records database cannot take them (SQLite's file on a full disk,
  PostgreSQL stopped or its connections held); each must be stored exactly once after the fault,
  the tables must go on and close, and the node must log the failure now and then, not in a storm.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from blackdrez.protocol import v1
from blackdrez.server.app import STORE_UNREACHABLE
from blackdrez.server.records.writer import RETIRE_WAIT
from blackdrez.server.testing.nodes import CpuSampler, NodeProcess, Nodes
from blackdrez.server.testing.postgres_server import PostgresServer
from blackdrez.server.testing.redis_cluster import direct_client
from blackdrez.server.testing.redis_server import RedisServer
from tests.faults.conftest import LaunchNodes
from tests.faults.history import finish_and_check, read_table_logs, resume_figures, wait_closed
from tests.faults.players import (
    NEVER,
    RETRYABLE,
    Fault,
    Table,
    abandoned_on_failure,
    errors_seen,
    fault_options,
    first_event_after,
    mark_fault,
    open_tables,
    play_tables,
)
from tests.faults.proxy import DatabaseProxy
from tests.faults.test_redis import quiet_figures

pytestmark = [pytest.mark.timeout(180)]

DISK_SIZE = "8m"
"""The small filesystem's size: room for a node's records or Redis's file, filled at once."""
FILLER = "filler"
FULL = 6.0
"""Seconds Redis's disk stays full after Redis first refuses a write."""
REFUSAL_BOUND = 15.0
"""Seconds Redis may take, after the disk fills, to fail a write to its file (the file's last
page has room for a little more, and the game must write it)."""
STORED_BOUND = 30.0
"""Seconds every game may take to be stored once the records database can take them again."""
RETIRE_SLACK = 8.0
"""Seconds past :data:`RETIRE_WAIT` the last closed table may take to be retired in an outage
(its game's end, its players leaving, the retirement itself, on a loaded machine)."""
QUIET_LINES = 5.0
"""Log lines per second a node may print while its records cannot be written."""
TABLES = 4
DISK_STALL_OPTIONS = {"max_rounds": 2}
"""Short games for the records scenarios: every one of them ends in the outage."""


# ---------------------------------------------------------------------- small disks


def _unable(reason: str) -> None:
    """Skip a test that cannot run here, or, under CI (``CI`` set), fail it."""
    message = f"a size-limited tmpfs cannot be mounted here: {reason}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A size-limited tmpfs (:data:`DISK_SIZE`) mounted on a fresh folder, unmounted after."""
    if os.geteuid() != 0:
        _unable("mounting needs root")
    folder = Path(tempfile.mkdtemp(prefix="bd-small-disk-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        folder.rmdir()
        _unable(mounted.stderr.strip() or f"mount exited {mounted.returncode}")
    try:
        yield folder
    finally:
        # A process still holding a file (a node that would not stop) keeps the mount busy: the
        # lazy unmount detaches it at once and frees it when that process is gone.
        unmounted = subprocess.run(["umount", str(folder)], capture_output=True, check=False)
        if unmounted.returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)
        with contextlib.suppress(OSError):
            folder.rmdir()


def fill(disk: Path) -> int:
    """Write zeros to ``disk``'s filler file until the filesystem is full; return its size."""
    chunk = bytes(64 * 1024)
    written = 0
    with open(disk / FILLER, "wb", buffering=0) as filler:
        for size in (len(chunk), 4096, 1):  # what still fits after the big chunks stop
            while True:
                try:
                    count = filler.write(chunk[:size])
                except OSError as error:
                    if error.errno != errno.ENOSPC:
                        raise
                    break
                written += count or 0
                if not count:
                    break
    return written


def free(disk: Path) -> None:
    """Delete the filler file: the space is back."""
    (disk / FILLER).unlink(missing_ok=True)


@pytest.fixture
def redis_on_small_disk(small_disk: Path) -> Iterator[RedisServer]:
    """A durable Redis (append-only file, fsync every second) whose folder is on the small disk."""
    folder = small_disk / "redis"
    folder.mkdir()
    with RedisServer(appendonly=True, data_dir=folder) as server:
        yield server


@pytest.fixture
def store_url(request: pytest.FixtureRequest) -> str:
    """One durable Redis of the test's own: on the small disk for the test that fills it,
    else conftest's ``durable_redis``."""
    if "redis_on_small_disk" in request.fixturenames:
        return request.getfixturevalue("redis_on_small_disk").url
    return request.getfixturevalue("durable_redis").url


# ---------------------------------------------------------------------- what nodes show


def http_get(port: int, path: str) -> tuple[int, bytes]:
    """GET ``path`` from a node: status and body (an error status too)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


async def health_of(nodes: Nodes | list[NodeProcess]) -> dict[str, str]:
    """Each node's ``/healthz`` as ``HTTP-status status``."""
    found = {}
    for node in nodes:
        status, body = await asyncio.to_thread(http_get, node.port, "/healthz")
        found[node.node_id] = f"{status} {json.loads(body)['status']}"
    return found


async def metric(node: NodeProcess, name: str) -> float:
    """One unlabelled metric's value on a node (0 when it is not shown)."""
    _, body = await asyncio.to_thread(http_get, node.port, "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return 0.0


def redis_persistence(url: str) -> dict[str, Any]:
    """Redis's ``INFO persistence`` (reads are served while it refuses writes)."""
    with direct_client(url) as client:
        return dict(client.info("persistence"))


async def until_aof(url: str, status: str, timeout: float) -> float:
    """Wait until Redis's last write to its append-only file is ``status`` ("ok", "err");
    return the wait."""
    started = time.monotonic()
    while (await asyncio.to_thread(redis_persistence, url))["aof_last_write_status"] != status:
        if time.monotonic() - started > timeout:
            raise AssertionError(f"Redis's AOF writes not {status!r} after {timeout:.0f} s")
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def only_in_memory(
    redis: RedisServer, tables: list[Table]
) -> tuple[dict[str, int], set[tuple[str, int]]]:
    """What Redis answered but could not write to its file, now that it refuses writes: per
    table, the log entries its file lacks, and the ``(player, event)`` of the actions among them.

    The file as it is now is what a Redis killed now would load: the test copies it (not the
    filler, not the log) and loads the copy in a Redis of its own."""
    ids = [table.id for table in tables]
    live = await read_table_logs(redis.url, ids)
    copy = Path(tempfile.mkdtemp(prefix="bd-aof-copy-"))
    try:
        shutil.copytree(
            redis.data_dir, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns("redis.log")
        )
        scratch = RedisServer(appendonly=True, data_dir=copy)
        try:
            await asyncio.to_thread(scratch.start)
            on_disk = await read_table_logs(scratch.url, ids)
        finally:
            scratch.close()
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    missing: dict[str, int] = {}
    actions: set[tuple[str, int]] = set()
    for table in ids:
        lacking = live[table].entries[len(on_disk[table].entries) :]
        missing[table] = len(lacking)
        actions |= {(e.player, e.seq) for e in lacking if isinstance(e.command, v1.Act)}
    return missing, actions


# ---------------------------------------------------------------------- Redis's disk fills


async def test_redis_append_only_file_on_a_disk_that_fills_mid_game(
    launch_nodes: LaunchNodes,
    redis_on_small_disk: RedisServer,
    small_disk: Path,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    """Redis's disk fills mid-game and stays full :data:`FULL` seconds after Redis first fails
    to write its file: players are answered ``unavailable`` (retryable), nothing acknowledged is
    lost or doubled, every game finishes once the space is back."""
    redis = redis_on_small_disk
    nodes = launch_nodes(2)
    tables = await open_tables(nodes.urls, TABLES, fault_options())
    playing = asyncio.create_task(play_tables(tables, think=0.1, deadline=120))
    async with abandoned_on_failure(tables, playing):
        await asyncio.sleep(1.0)
        fault = mark_fault(tables)
        try:
            figures["filler MiB"] = round(await asyncio.to_thread(fill, small_disk) / 2**20, 2)
            refused_after = await until_aof(redis.url, "err", REFUSAL_BOUND)
            refused = time.monotonic()
            figures["first refusal s after the fill"] = round(refused_after, 2)
            figures["AOF buffer bytes"] = (await asyncio.to_thread(redis_persistence, redis.url))[
                "aof_buffer_length"
            ]
            await asyncio.sleep(0.5)  # the replies Redis sent before its refusal arrive
            missing, unwritten = await only_in_memory(redis, fault.going)
            figures["log entries only in memory"] = sum(missing.values())
            await asyncio.sleep(max(0.0, refused + FULL - 1.0 - time.monotonic()))
            figures["healthz while full"] = await health_of(nodes)
            figures["store_up while full"] = [await metric(n, "blackdrez_store_up") for n in nodes]
            await asyncio.sleep(max(0.0, refused + FULL - time.monotonic()))
            marks = {table.id: table.seq() for table in fault.going}
        finally:
            free(small_disk)
        freed = time.monotonic()
        figures["redis writes again s after the free"] = round(
            await until_aof(redis.url, "ok", 10.0), 2
        )
        loud = quiet_figures(figures, nodes, cpu, refused + 0.5, freed)
        resumed = await first_event_after(fault.going, freed, marks, timeout=30)
        resume_figures(figures, resumed, len(fault.going))
    problems = await finish_and_check(
        redis.url, tables, playing, fault, figures, cpu=cpu, nodes=nodes
    )
    window = errors_seen(
        [c for t in fault.going for c in t.clients],
        since=[m for t in fault.going for m in fault.frames[t.id]],
    )
    odd = {code: n for code, n in window.items() if code not in (*RETRYABLE, *NEVER)}
    if odd:
        problems.append(f"players were answered errors they cannot retry: {odd}")
    acked = {(r.player, seq) for t in fault.going for r in t.results for seq in r.acked}
    figures["acked actions only in memory while full"] = len(acked & unwritten)
    problems += [f"not quiet while Redis's disk was full: {node}" for node in loud]
    told = [line for node in nodes for line in node.output() if "MISCONF" in line]
    figures["node log lines naming MISCONF"] = len(told)
    unhealthy = set(figures["healthz while full"].values()) == {f"503 {STORE_UNREACHABLE}"}
    if not unhealthy:
        problems.append(f"/healthz while Redis refused writes: {figures['healthz while full']}")
    if len(resumed) < len(fault.going):
        problems.append(f"only {len(resumed)} of {len(fault.going)} tables went on")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------- records


def sqlite_game_ids(path: Path) -> list[str]:
    """The ids of the games stored in a SQLite records file (read-only: the node owns it)."""
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return [row[0] for row in db.execute("SELECT id FROM games")]


async def postgres_game_ids(url: str) -> list[str]:
    """The ids of the games stored in a PostgreSQL records database."""
    connection = await asyncpg.connect(url)
    try:
        return [row["id"] for row in await connection.fetch("SELECT id FROM games")]
    finally:
        await connection.close()


async def records_outage(
    node: NodeProcess,
    tables: list[Table],
    playing: asyncio.Task[None],
    figures: dict[str, Any],
) -> tuple[float, list[str]]:
    """The records cannot be written: let every game end and every table close, its
    retirement waiting at most :data:`RETIRE_WAIT` for its games; return when that was, and
    whether it took longer (with room for a loaded machine, :data:`RETIRE_SLACK`)."""
    await asyncio.wait_for(asyncio.shield(playing), 120)
    figures["games over in the outage"] = sum(table.over() for table in tables)
    bound = RETIRE_WAIT + RETIRE_SLACK
    retired = await wait_closed(node.redis_url, [t.id for t in tables], timeout=bound)
    figures["tables retired s after the last game"] = round(retired, 2)
    figures["healthz in the outage"] = (await health_of([node]))[node.node_id]
    figures["records pending in the outage"] = await metric(node, "blackdrez_records_pending")
    late = []
    if retired >= bound:
        late.append(
            f"the closed tables were not all retired {bound:.0f} s after the last game ended "
            f"(each waits at most {RETIRE_WAIT:.0f} s for its games to be stored)"
        )
    return time.monotonic(), late


async def check_stored(
    stored: Any, expected: set[str], figures: dict[str, Any], since: float
) -> list[str]:
    """Wait until every expected game is stored (``stored()``: the ids in the database);
    return what is wrong: a game missing, or stored more than once."""
    ids: list[str] = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(STORED_BOUND):
            while not expected <= set(ids := await stored()):
                await asyncio.sleep(0.2)
    figures["games stored"] = f"{len(set(ids) & expected)}/{len(expected)}"
    figures["stored s after the fault ended"] = round(time.monotonic() - since, 2)
    figures["game rows"] = len(ids)
    problems = []
    if not expected <= set(ids):
        problems.append(f"games never stored: {sorted(expected - set(ids))}")
    if len(ids) != len(set(ids)) or set(ids) - expected:
        problems.append(f"stored {len(ids)} rows for {len(expected)} games: {sorted(ids)}")
    return problems


def failure_figures(
    figures: dict[str, Any], node: NodeProcess, start: float, end: float
) -> list[str]:
    """How the node told of the outage between two instants: its log lines, the failed writes
    it logged; return what was wrong (a storm of lines, or no word of the failure)."""
    lines = node.lines_between(start, end)
    failed = [line for line in lines if "storing game" in line and "failed" in line]
    seconds = max(end - start, 1e-6)
    figures["outage s"] = round(seconds, 1)
    figures["outage log lines/s"] = round(len(lines) / seconds, 2)
    figures["failed writes logged"] = len(failed)
    figures["tables retired before their games were stored"] = sum(
        "retired before its games were stored" in line for line in lines
    )
    problems = []
    if not failed:
        problems.append("the node never logged that storing a game failed")
    if len(lines) / seconds > QUIET_LINES:
        problems.append(f"{len(lines)} log lines in {seconds:.0f} s: a storm")
    return problems


async def test_records_sqlite_file_on_a_full_disk(
    small_disk: Path,  # (first: unmounted after the node using it has stopped)
    launch_nodes: LaunchNodes,
    durable_redis: RedisServer,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    """The records' SQLite file is on a disk that fills before the games end: the games end and
    their tables close all the same, and every game is stored exactly once after the space
    comes back."""
    path = small_disk / "records.db"
    nodes = launch_nodes(1, db_url=f"sqlite:///{path}")
    node = nodes[0]
    tables = await open_tables(nodes.urls, TABLES, fault_options(**DISK_STALL_OPTIONS))
    fault = mark_fault(tables)
    try:
        figures["filler MiB"] = round(await asyncio.to_thread(fill, small_disk) / 2**20, 2)
        playing = asyncio.create_task(play_tables(tables, think=0.05, deadline=120))
        async with abandoned_on_failure(tables, playing):
            ended, late = await records_outage(node, tables, playing, figures)
    finally:
        free(small_disk)
    freed = time.monotonic()
    problems = late + failure_figures(figures, node, fault.at, ended)
    problems += await records_kept(
        lambda: asyncio.to_thread(sqlite_game_ids, path),
        freed,
        figures,
        redis_url=durable_redis.url,
        tables=tables,
        playing=playing,
        fault=fault,
        nodes=nodes,
        cpu=cpu,
    )
    assert not problems, "\n".join(problems)


async def records_kept(
    stored: Any,
    back: float,
    figures: dict[str, Any],
    *,
    redis_url: str,
    tables: list[Table],
    playing: asyncio.Task[None],
    fault: Fault,
    nodes: Nodes,
    cpu: CpuSampler,
) -> list[str]:
    """After a records outage that ended at ``back``: every game stored once (``stored()``
    gives the ids stored), the write failures counted, then the history checked."""
    problems = await check_stored(stored, {f"{table.id}:1" for table in tables}, figures, back)
    figures["write failures (metric)"] = await metric(
        nodes[0], "blackdrez_records_write_failures_total"
    )
    problems += await finish_and_check(
        redis_url, tables, playing, fault, figures, cpu=cpu, nodes=nodes
    )
    return problems


@pytest.fixture
async def records_schema(postgres_server: PostgresServer) -> Any:
    """A fresh schema of the session's PostgreSQL; the server is running again after the test
    (a test may stop it), and the schema dropped."""
    url = postgres_server.create_schema()
    try:
        yield url
    finally:
        await asyncio.to_thread(postgres_server.start)
        postgres_server.drop_schema(url)


@pytest.mark.parametrize("fault_kind", ["stopped", "held"])
async def test_records_postgresql_stopped_or_held_while_games_finish(
    launch_nodes: LaunchNodes,
    durable_redis: RedisServer,
    postgres_server: PostgresServer,
    records_schema: str,
    fault_kind: str,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    """PostgreSQL is stopped (``stopped``), or every byte to and from it held in a proxy
    (``held``: a database that stalls, its connections open), while every game ends and its
    table closes: each game is stored exactly once after the database is back."""
    proxy = DatabaseProxy(postgres_server.port)
    await proxy.start()
    db_url = proxy.url_of(records_schema) if fault_kind == "held" else records_schema
    try:
        # (in a thread: the node's first connections go through the proxy, on this loop)
        nodes = await asyncio.to_thread(launch_nodes, 1, db_url=db_url)
        node = nodes[0]
        tables = await open_tables(nodes.urls, TABLES, fault_options(**DISK_STALL_OPTIONS))
        fault = mark_fault(tables)
        try:
            if fault_kind == "stopped":
                await asyncio.to_thread(postgres_server.stop)
            else:
                proxy.hold()
            playing = asyncio.create_task(play_tables(tables, think=0.05, deadline=120))
            async with abandoned_on_failure(tables, playing):
                ended, late = await records_outage(node, tables, playing, figures)
        finally:
            await asyncio.to_thread(postgres_server.start)
            proxy.release()
        back = time.monotonic()
        problems = late + failure_figures(figures, node, fault.at, ended)
        if fault_kind == "held":  # a query held is not a failed one: nothing to log
            problems = [p for p in problems if "never logged" not in p]
        problems += await records_kept(
            lambda: postgres_game_ids(records_schema),
            back,
            figures,
            redis_url=durable_redis.url,
            tables=tables,
            playing=playing,
            fault=fault,
            nodes=nodes,
            cpu=cpu,
        )
    finally:
        await proxy.cut()
    assert not problems, "\n".join(problems)
