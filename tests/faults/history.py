"""The history checker: after a fault scenario, did the system keep every promise it made?

Theory of operation
-------------------
A scenario ends with what its clients saw (one :class:`~blackdrez.clients.bots.BotResult` per seat:
the
event number of every acknowledged action, the last view) and what Redis holds. The checker reads
each table's log through the store (:meth:`TableLogs.read`), rebuilds the table with
:func:`blackdrez.server.table.commands.rebuild`, and checks, for every table:

* the log replays from its creation to its end, and the event number recorded with each entry
  never goes back (an entry that does was written by a node working from a stale copy);
* every acknowledged action is an ``act`` entry of its player, with its event number, exactly
  once (``lost`` and ``duplicated`` count the others);
* the game finished (when the scenario says games must finish): the replayed game is over, every
  player saw it end, and what each player saw last is the replayed game's final view (same
  ranking, pot, piles and revealed seed); the fairness proof each player checked held;
* the table is closed (when the scenario says tables must close);
* the table was adopted (a ``Resume`` entry) no more often than the scenario's faults can
  explain (``resumes``): a node that takes a table back and then loses its lease again, over
  and over, leaves a trail of resumes even when every action is kept;

and, once, that no Redis key lives without a TTL except a fixed, documented set
(:data:`FIXED_KEYS`), that no node printed an unhandled error, and that no node was busy on
average beyond :data:`CPU_BOUND` (:class:`~blackdrez.server.testing.nodes.CpuSampler`).
It gathers every problem instead of stopping at the first, and its figures (actions acknowledged,
lost, duplicated, keys left, CPU) are printed by every test and tabulated by
``benchmarks/faults.py``.
"""

from __future__ import annotations

import asyncio
import fnmatch
import re
import statistics
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import redis

from blackdrez.clients.bots import BotResult
from blackdrez.protocol import v1
from blackdrez.server.stores import open_stores
from blackdrez.server.stores.keys import FIXED_KEYS
from blackdrez.server.table.commands import Resume, decode_entry, rebuild
from blackdrez.server.table.records import decode_table_record, record_log
from blackdrez.server.table.room import Room
from blackdrez.server.testing.nodes import CpuSampler, NodeProcess
from blackdrez.server.testing.redis_cluster import direct_client
from tests.faults.players import (
    Fault,
    Table,
    clients_of,
    close_all,
    errors_seen,
    forbidden_errors,
    results_of,
)

CPU_BOUND = 50.0
"""Mean CPU (% of one core) any node may use over a whole scenario: a safety net against spin
loops (scenarios hold their quiet windows to tighter bounds)."""
CHECKER_NODE = "history-checker"
TRACEBACK_MARKS = ("Traceback (most recent call last)", "exception was never retrieved")
"""What a node prints when something failed that nobody handled."""


def unhandled(lines: list[str]) -> list[str]:
    """Each unhandled error a node printed (:data:`TRACEBACK_MARKS`), as the line that says so,
    the log line before it and, for a traceback, its last frame and the exception: enough to
    tell from a CI log which error it was."""
    found = []
    for index, line in enumerate(lines):
        if not any(mark in line for mark in TRACEBACK_MARKS):
            continue
        if _in_chain(lines, index):
            continue  # (a later part of a chain, shown with its first)
        shown = [lines[index - 1].strip()] if index else []
        shown.append(line.strip())
        end = index + 1
        while end < len(lines) and lines[end][:1] in (" ", "\t"):
            end += 1
        shown += [text.strip() for text in lines[max(index + 1, end - 2) : end + 1]]
        # A chain ("During handling of the above exception..."): its last exception too.
        while end + 2 < len(lines) and any(mark in lines[end + 2] for mark in CHAINED):
            end += 4  # the exception, a blank line, the marker, a blank line: "Traceback"
            while end + 1 < len(lines) and lines[end + 1][:1] in (" ", "\t"):
                end += 1
            end += 1
            shown += ["...", *(text.strip() for text in lines[end - 2 : end + 1])]
        found.append(" | ".join(shown))
    return found


CHAINED = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)


def _in_chain(lines: list[str], index: int) -> bool:
    """Whether the traceback starting at ``lines[index]`` continues a chain."""
    return index >= 2 and any(mark in lines[index - 2] for mark in CHAINED)


def status_of(room: Room) -> str:
    """A room's lifecycle status as its name (a plain string or an enum's value)."""
    status: Any = room.status
    return str(getattr(status, "value", status))


@dataclass
class TableLog:
    """One table as its log tells it."""

    table: str
    raw: list[bytes] = field(default_factory=list)
    """The entries as stored."""
    entries: list[Any] = field(default_factory=list)
    """The decoded entries."""
    room: Room | None = None
    """The room rebuilt from the whole log (``None`` when it does not replay)."""
    problem: str | None = None


@dataclass
class History:
    """What the checker found: figures to print and problems to fail on."""

    figures: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    logs: dict[str, TableLog] = field(default_factory=dict)

    def assert_sound(self) -> None:
        """Fail with every problem found, if any."""
        assert not self.problems, f"{len(self.problems)} problem(s):\n" + "\n".join(self.problems)


async def read_table_logs(redis_url: str, tables: Iterable[str]) -> dict[str, TableLog]:
    """Read and replay each table's log."""
    store = open_stores(redis_url, CHECKER_NODE)
    logs: dict[str, TableLog] = {}
    try:
        for table in tables:
            found = logs[table] = TableLog(table)
            raw = await store.logs.read(table)
            if not raw:  # retired: the log lives on in the table's compact game record
                record = await store.logs.game_record(table)
                raw = record_log(decode_table_record(record)) if record else []
            if not raw:
                found.problem = f"{table}: its log is missing or empty"
                continue
            found.raw = raw
            found.entries = [decode_entry(data) for data in raw]
            try:
                found.room = rebuild(raw)
            except ValueError as error:
                found.problem = f"{table}: the log does not replay: {error}"
    finally:
        await store.close()
    return logs


async def wait_closed(redis_url: str, tables: Iterable[str], timeout: float = 30.0) -> float:
    """Wait until every table's log shows it closed and its node has retired it (its keys have
    a lifetime: the retirement is written just after the closing entry), at most ``timeout`` s;
    return the wait.

    Tables still open (or not retired) by then are left for the checker to report.
    """
    tables = list(tables)
    pending = set(tables)
    started = time.monotonic()
    while pending and time.monotonic() - started < timeout:
        logs = await read_table_logs(redis_url, pending)
        pending = {
            t for t, log in logs.items() if log.room is None or status_of(log.room) != "closed"
        }
        if any(log.problem and "replay" in log.problem for log in logs.values()):
            break  # a log that does not replay never closes
        left: list[str] | None = None
        if any(logs[t].room is None for t in pending):
            # No log: a table leased and never logged waits for the orphan scan to forget it
            # (its keys gone, or each with a lifetime), then there is nothing left to wait for
            left = await keys_without_ttl(redis_url)
            pending = {
                t
                for t in pending
                if logs[t].room is not None or any(f"{{{t}}}" in key for key in left)
            }
        if not pending:
            if left is None:
                left = await keys_without_ttl(redis_url)
            pending = {t for t in tables if any(f"{{{t}}}" in key for key in left)}
        if pending:
            await asyncio.sleep(0.25)
    return time.monotonic() - started


TABLE_KEY = re.compile(r"^bd:t:\{(?P<table>[^}]+)\}:")
"""A table's key (``blackdrez.server.stores.keys``): the table id is its hash tag."""


async def tables_in_store(redis_url: str) -> set[str]:
    """Every table Redis holds a key of, live or retired (on a Redis Cluster, of every master).

    A scenario's own list misses the tables whose opening a fault broke off part way (the table
    made, its players gone before the opening returned): they live on until they close by
    themselves, so a scenario that checks every key has a lifetime waits for them too."""
    return await asyncio.to_thread(_tables_in_store, redis_url)


def _tables_in_store(redis_url: str) -> set[str]:
    with direct_client(redis_url) as client:
        keys = [key.decode() for key in client.scan_iter(match="bd:t:{*}:*", count=1000)]
    return {found["table"] for key in keys if (found := TABLE_KEY.match(key))}


async def keys_without_ttl(redis_url: str, fixed: Sequence[str] = FIXED_KEYS) -> list[str]:
    """Every key that has no TTL and matches none of the ``fixed`` patterns (on a Redis Cluster,
    the keys of every master)."""
    return await asyncio.to_thread(_keys_without_ttl, redis_url, fixed)


def _keys_without_ttl(redis_url: str, fixed: Sequence[str]) -> list[str]:
    with direct_client(redis_url) as client:
        keys = [key.decode() for key in client.scan_iter(count=1000)]
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.ttl(key)
        ttls = pipe.execute()
    return sorted(
        key
        for key, ttl in zip(keys, ttls, strict=True)
        if ttl == -1 and not any(fnmatch.fnmatchcase(key, pattern) for pattern in fixed)
    )


async def redis_memory(redis_url: str) -> int:
    """Bytes Redis holds for data (``used_memory``; on a Redis Cluster, summed over masters)."""
    return await asyncio.to_thread(_redis_memory, redis_url)


def _redis_memory(redis_url: str) -> int:
    with direct_client(redis_url) as client:
        if isinstance(client, redis.RedisCluster):
            found = client.info("memory", target_nodes=redis.RedisCluster.PRIMARIES)
            return sum(int(info["used_memory"]) for info in found.values())
        return int(client.info("memory")["used_memory"])


def check_table(
    log: TableLog,
    results: Sequence[BotResult],
    *,
    finished: bool,
    closed: bool,
    resumes: int | None = None,
) -> tuple[Counter[str], list[str]]:
    """The per-table checks of the module docstring: counts and problems."""
    table = log.table
    counts: Counter[str] = Counter()
    problems = [log.problem] if log.problem else []
    highest = 0
    for index, entry in enumerate(log.entries):
        if entry.seq and entry.seq < highest:
            counts["stale_writes"] += 1
            problems.append(
                f"{table}: log entry {index} ({type(entry.command).__name__}) records event "
                f"{entry.seq} after event {highest}: written from a stale copy of the table"
            )
        highest = max(highest, entry.seq)
    logged = Counter(
        (entry.player, entry.seq) for entry in log.entries if isinstance(entry.command, v1.Act)
    )
    for result in results:
        for seq in result.acked:
            counts["acked"] += 1
            times = logged[(result.player, seq)]
            if times == 0:
                counts["lost"] += 1
                problems.append(f"{table}: the action acknowledged at event {seq} is not logged")
            elif times > 1:
                counts["duplicated"] += 1
                problems.append(
                    f"{table}: the action acknowledged at event {seq} is logged {times}x"
                )
    room = log.room
    if room is not None and finished:
        over = room.engine is not None and room.engine.over
        if not over:
            problems.append(f"{table}: the game did not finish (log ends {status_of(room)})")
        final = msgspec.to_builtins(room.engine.view(None)) if room.engine is not None else None
        for result in results:
            if result.final is None:
                problems.append(f"{table}: seat {result.seat} never saw the end: {result.problem}")
            elif over and result.final != final:
                problems.append(f"{table}: seat {result.seat} saw an end the log does not replay")
            elif result.fair is False:
                problems.append(f"{table}: seat {result.seat}'s fairness proof failed")
        counts["finished"] += over and all(r.final == final for r in results)
    if room is not None and closed and status_of(room) != "closed":
        counts["not_closed"] += 1
        problems.append(f"{table}: still {status_of(room)} (it should have closed)")
    resumed = sum(isinstance(entry.command, Resume) for entry in log.entries)
    counts["resumes"] += resumed
    if resumes is not None and resumed > resumes:
        problems.append(
            f"{table}: adopted {resumed} times (at most {resumes} expected): "
            "a node kept losing its lease after the fault"
        )
    counts["entries"] += len(log.entries)
    return counts, problems


async def check_history(
    redis_url: str,
    results: Sequence[BotResult] = (),
    *,
    tables: Iterable[str] = (),
    finished: bool = True,
    closed: bool = True,
    fixed_keys: Sequence[str] = FIXED_KEYS,
    resumes: int | None = None,
    cpu: CpuSampler | None = None,
    nodes: Iterable[NodeProcess] = (),
) -> History:
    """Check a scenario's history (see the module docstring).

    ``results`` are the players' records; ``tables`` adds tables nobody played at. ``finished``
    and ``closed`` say whether every game must have ended and every table closed; the key check
    runs only when tables must be closed (a live table's keys are owned by its lease).
    ``resumes`` is how many adoptions a table may show (``None``: any number). ``cpu``
    adds each node's CPU figures; ``nodes`` has their output searched for unhandled errors.
    """
    by_table: dict[str, list[BotResult]] = {}
    for result in results:
        by_table.setdefault(result.table, []).append(result)
    for table in tables:
        by_table.setdefault(table, [])
    history = History()
    history.logs = await read_table_logs(redis_url, by_table)
    totals: Counter[str] = Counter()
    for table, log in history.logs.items():
        counts, problems = check_table(
            log, by_table[table], finished=finished, closed=closed, resumes=resumes
        )
        totals.update(counts)
        history.problems += problems
    figures = history.figures
    figures["tables"] = len(by_table)
    if finished:
        figures["games finished"] = totals["finished"]
    for name in ("acked", "lost", "duplicated", "stale_writes"):
        figures[name.replace("_", " ")] = totals[name]
    figures["log entries"] = totals["entries"]
    figures["resumes"] = totals["resumes"]
    if closed:
        figures["not closed"] = totals["not_closed"]
        left = await keys_without_ttl(redis_url, fixed_keys)
        figures["keys without TTL"] = len(left)
        if left:
            shown = ", ".join(left[:8]) + (" ..." if len(left) > 8 else "")
            history.problems.append(f"{len(left)} key(s) left without a TTL: {shown}")
    figures["redis MiB"] = round(await redis_memory(redis_url) / 2**20, 2)
    tracebacks = [
        f"{node.node_id}: {shown}" for node in nodes for shown in unhandled(node.output())
    ]
    figures["tracebacks"] = len(tracebacks)
    if tracebacks:
        history.problems.append(
            f"{len(tracebacks)} unhandled error(s) in node output, first: {tracebacks[0]}"
        )
    if cpu is not None:
        for name in cpu.names():
            stats = cpu.stats(name)
            figures[f"{name} CPU % mean/max"] = f"{stats.mean:.0f}/{stats.peak:.0f}"
            if stats.mean > CPU_BOUND:
                history.problems.append(f"{name} used {stats.mean:.0f}% CPU on average")
    return history


def resume_figures(figures: dict[str, Any], resumed: dict[str, float], expected: int) -> None:
    """Resume times (s) as figures: the slowest, the median, and how many tables resumed."""
    figures["tables resumed"] = f"{len(resumed)}/{expected}"
    if resumed:
        figures["resume s max"] = round(max(resumed.values()), 2)
        figures["resume s median"] = round(statistics.median(resumed.values()), 2)


async def finish_and_check(
    redis_url: str,
    tables: Sequence[Table],
    playing: asyncio.Task[None],
    fault: Fault,
    figures: dict[str, Any],
    *,
    resumes: int = 1,
    cpu: CpuSampler | None = None,
    nodes: Iterable[NodeProcess] = (),
) -> list[str]:
    """Let the games end and the tables close, then check the history: return every problem,
    the errors that players of the tables hit by ``fault`` must never hear included. A table
    may be adopted ``resumes`` times (once per fault that moves it): more means its node did
    not hold its lease after it recovered."""
    try:
        await asyncio.wait_for(playing, 150)
    finally:
        await close_all(clients_of(tables))
    figures["errors seen"] = dict(errors_seen(clients_of(tables)))
    found, problems = forbidden_errors(fault.going, fault.frames)
    figures["forbidden errors"] = found
    await wait_closed(redis_url, [t.id for t in tables])
    history = await check_history(
        redis_url, results_of(tables), resumes=resumes, cpu=cpu, nodes=nodes
    )
    figures.update(history.figures)
    return history.problems + problems
