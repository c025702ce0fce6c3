"""Faults of a Redis Cluster under live games: a master SIGKILLed mid-game.

Two node processes run on a cluster of this test's own (3 masters, 3 replicas) with
``--redis-wait-replicas 1``, so a log append is acknowledged only once a replica holds it. The
master of most tables is killed while their games run; its replica takes its slots over after the
cluster's node timeout, the killed node comes back as its replica (WAIT needs one), the tables
go on, and the history checker must find every game finished with nothing acknowledged lost or
doubled. (The other fault scenarios of nodes and players run on a
cluster too: see ``store_url`` in the suite's conftest.)
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterator
from typing import Any

import pytest

from blackdrez.server.testing.nodes import CpuSampler
from blackdrez.server.testing.redis_cluster import LocalCluster
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

pytestmark = pytest.mark.timeout(240)

WAIT_OPTIONS = ("--redis-wait-replicas", "1", "--redis-wait-timeout-ms", "200")


@pytest.fixture
def private_cluster() -> Iterator[LocalCluster]:
    """A cluster of this test's own, whose masters it may kill."""
    with LocalCluster() as cluster:
        yield cluster


@pytest.fixture
def store_url(private_cluster: LocalCluster) -> str:
    """The nodes of this module run on the private cluster."""
    return private_cluster.url


def busiest_master(cluster: LocalCluster, tables: list[Table]) -> tuple[int, list[Table]]:
    """The master serving the most of ``tables`` (by their keys' slot), and those tables."""
    served: dict[int, list[Table]] = collections.defaultdict(list)
    for table in tables:
        served[cluster.index_serving(f"bd:t:{{{table.id}}}:log")].append(table)
    index = max(served, key=lambda i: len(served[i]))
    return index, served[index]


async def test_a_master_killed_mid_game_loses_no_acknowledged_action(
    launch_nodes: LaunchNodes,
    private_cluster: LocalCluster,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    nodes = launch_nodes(2, extra=WAIT_OPTIONS)
    tables = await open_tables(nodes.urls, 6, fault_options())
    playing = asyncio.create_task(play_tables(tables, think=0.1, deadline=150))
    async with abandoned_on_failure(tables, playing):
        await asyncio.sleep(1.0)
        victim, hit = await asyncio.to_thread(busiest_master, private_cluster, tables)
        fault = mark_fault(hit)
        private_cluster.kill(victim)
        await asyncio.to_thread(private_cluster.wait_promoted)
        figures["replica promoted s"] = round(time.monotonic() - fault.at, 2)
        # With WAIT the promoted master needs a replica of its own before it acknowledges
        # anything: the killed one comes back as such.
        await asyncio.to_thread(private_cluster.restart, victim)
        await asyncio.to_thread(private_cluster.wait_healthy)
        figures["replica back s"] = round(time.monotonic() - fault.at, 2)
        resumed = await first_event_after(fault.going, fault.at, fault.seqs, timeout=60)
        resume_figures(figures, resumed, len(fault.going))
    problems = await finish_and_check(
        private_cluster.url, tables, playing, fault, figures, cpu=cpu, nodes=nodes
    )
    if len(resumed) < len(fault.going):
        problems.append(f"{len(fault.going) - len(resumed)} table(s) of the killed master stalled")
    assert not problems, "\n".join(problems)
