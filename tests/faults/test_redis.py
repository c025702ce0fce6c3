"""Faults of Redis under live games: paused, killed and restarted from its append-only file,
down for twenty seconds.

Two node processes host tables whose players play over real sockets; after the fault every game
must finish with nothing acknowledged lost or doubled (the history checker), and while Redis is
away the nodes must wait quietly: bounded CPU, a few log lines, and every table back within a
second or two of Redis's return.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from blackdrez.server.testing.nodes import CpuSampler, Nodes
from blackdrez.server.testing.redis_server import RedisServer
from tests.faults.conftest import LaunchNodes
from tests.faults.history import finish_and_check, resume_figures
from tests.faults.players import (
    Table,
    abandoned_on_failure,
    fault_options,
    first_event_after,
    mark_fault,
    open_tables,
    play_tables,
)

pytestmark = [
    pytest.mark.timeout(180),
    # faults of one Redis process; a cluster's master killed is test_cluster.py's
    pytest.mark.parametrize("store_url", ["redis"], indirect=True),
]

OUTAGE = 20.0
"""Seconds Redis stays down in the long outage (issue 9, section 3)."""
RESUME_TARGET = 1.0
"""Seconds from Redis's return until every table goes on: the target the figures are held to."""
RESUME_BOUND = 2.0
"""What the test asserts: the target with room for a loaded machine."""
QUIET_CPU = 10.0
"""Mean CPU (% of one core) a node may use while Redis is away and its players wait."""
QUIET_LINES = 5.0
"""Log lines per second a node may print while Redis is away and its players wait."""


def quiet_figures(
    figures: dict[str, Any], nodes: Nodes, cpu: CpuSampler, start: float, end: float
) -> list[str]:
    """CPU and log lines of each node between two instants; return which node was not quiet."""
    loud = []
    for node in nodes:
        stats = cpu.stats(node.node_id, start, end)
        lines = len(node.lines_between(start, end)) / max(end - start, 1e-6)
        figures[f"{node.node_id} outage CPU % mean/max"] = f"{stats.mean:.0f}/{stats.peak:.0f}"
        figures[f"{node.node_id} outage log lines/s"] = round(lines, 1)
        if stats.mean > QUIET_CPU or lines > QUIET_LINES:
            loud.append(f"{node.node_id}: {stats.mean:.0f}% CPU, {lines:.0f} log lines/s")
    return loud


async def start_games(nodes: Nodes, **options: Any) -> tuple[list[Table], asyncio.Task[None]]:
    """Four tables over the nodes, played by their players in the background."""
    gate = options.pop("gate", None)
    tables = await open_tables(nodes.urls, 4, fault_options(**options))
    playing = asyncio.create_task(play_tables(tables, think=0.1, deadline=120, gate=gate))
    return tables, playing


async def test_redis_paused_for_five_seconds(
    launch_nodes: LaunchNodes,
    durable_redis: RedisServer,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    nodes = launch_nodes(2)
    tables, playing = await start_games(nodes)
    async with abandoned_on_failure(tables, playing):
        await asyncio.sleep(1.0)
        fault = mark_fault(tables)
        durable_redis.pause()
        await asyncio.sleep(5.0)
        marks = {table.id: table.seq() for table in fault.going}
        durable_redis.resume()
        back = time.monotonic()
        quiet_figures(figures, nodes, cpu, fault.at + 1.0, back)
        resumed = await first_event_after(fault.going, back, marks, timeout=30)
        resume_figures(figures, resumed, len(fault.going))
    problems = await finish_and_check(
        durable_redis.url, tables, playing, fault, figures, cpu=cpu, nodes=nodes
    )
    assert not problems, "\n".join(problems)


async def test_redis_killed_and_restarted_from_its_append_only_file(
    launch_nodes: LaunchNodes,
    durable_redis: RedisServer,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    nodes = launch_nodes(2)
    tables, playing = await start_games(nodes)
    async with abandoned_on_failure(tables, playing):
        await asyncio.sleep(1.0)
        fault = mark_fault(tables)
        durable_redis.kill()
        marks = {table.id: table.seq() for table in fault.going}
        await asyncio.to_thread(durable_redis.start)
        back = time.monotonic()
        figures["redis restart s"] = round(back - fault.at, 2)
        resumed = await first_event_after(fault.going, back, marks, timeout=30)
        resume_figures(figures, resumed, len(fault.going))
    problems = await finish_and_check(
        durable_redis.url, tables, playing, fault, figures, cpu=cpu, nodes=nodes
    )
    assert not problems, "\n".join(problems)


async def test_redis_down_for_twenty_seconds_with_timers_due(
    launch_nodes: LaunchNodes,
    durable_redis: RedisServer,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    """Players hold back while Redis is down, so every table's turn timer comes due in the
    outage: the nodes must wait quietly (no retry storm), and every table must go on (its
    overdue timer plays) within about a second of Redis's return."""
    nodes = launch_nodes(2)
    gate = asyncio.Event()
    gate.set()
    tables, playing = await start_games(nodes, gate=gate, turn_seconds=3.0)
    async with abandoned_on_failure(tables, playing):
        await asyncio.sleep(1.0)
        gate.clear()
        await asyncio.sleep(0.5)  # actions in flight are answered
        fault = mark_fault(tables)
        await asyncio.to_thread(durable_redis.stop)
        down = time.monotonic()
        await asyncio.sleep(OUTAGE)
        marks = {table.id: table.seq() for table in fault.going}
        await asyncio.to_thread(durable_redis.start)
        back = time.monotonic()
        loud = quiet_figures(figures, nodes, cpu, down + 1.0, back - 0.5)
        resumed = await first_event_after(fault.going, back, marks, timeout=30)
        resume_figures(figures, resumed, len(fault.going))
        gate.set()
    problems = await finish_and_check(
        durable_redis.url, tables, playing, fault, figures, cpu=cpu, nodes=nodes
    )
    problems += [f"not quiet while Redis was down: {node}" for node in loud]
    if len(resumed) < len(fault.going) or max(resumed.values()) > RESUME_BOUND:
        problems.append(
            f"tables resumed after {sorted(round(s, 2) for s in resumed.values())} s "
            f"({len(resumed)} of {len(fault.going)}; target {RESUME_TARGET} s, "
            f"bound {RESUME_BOUND} s)"
        )
    assert not problems, "\n".join(problems)
