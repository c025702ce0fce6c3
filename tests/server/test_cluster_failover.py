"""Server node processes on a real Redis Cluster (3 masters, 3 replicas): a node killed, a
Redis master killed while bot games run.

The nodes run the compose file's command with ``--redis-url redis+cluster://...``. When a node
dies its tables are adopted by the other node, as on one Redis. When a master dies its replica
takes its slots over after the cluster's node timeout; meanwhile the tables in those slots (and,
as the store's health is one per node, every table of the node) wait, then every game goes on.
With ``--redis-wait-replicas 1`` no acknowledged action is lost; without it Redis replicates
asynchronously, and an action acknowledged just before the kill may be lost (the count is
printed: on loopback the window is a fraction of a millisecond, so it is nearly always 0).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterator

import pytest

from blackdrez.clients.bots import BotResult, run_swarm
from blackdrez.protocol import v1
from blackdrez.server.table.commands import decode_entry
from blackdrez.server.testing.nodes import Nodes, lease_holders
from blackdrez.server.testing.redis_cluster import LocalCluster
from tests.server.test_failover import (
    assert_games_sound,
    played_on_after_adoption,
    table_log,
    wait_for_tables,
)


@pytest.fixture
def private_cluster() -> Iterator[LocalCluster]:
    """A cluster of this test's own, whose masters the test may kill."""
    with LocalCluster() as cluster:
        yield cluster


def busiest_master(cluster: LocalCluster, tables: list[str]) -> tuple[int, set[str]]:
    """The master serving the most of ``tables``, and those tables."""
    served = collections.defaultdict(set)
    for table in tables:
        served[cluster.index_serving(f"bd:t:{{{table}}}:log")].add(table)
    index = max(served, key=lambda i: len(served[i]))
    return index, served[index]


def lost_acknowledged_actions(url: str, results: list[list[BotResult]]) -> int:
    """How many actions the bots saw acknowledged are missing from their tables' logs."""
    lost = 0
    for bots in results:
        entries = [decode_entry(data) for data in table_log(url, bots[0].table)]
        logged = {(e.player, e.seq) for e in entries if isinstance(e.command, v1.Act)}
        lost += sum((bot.player, seq) not in logged for bot in bots for seq in bot.acked)
    return lost


async def test_a_killed_node_loses_nothing_on_a_cluster(redis_cluster_url_clean: str) -> None:
    url = redis_cluster_url_clean
    nodes = Nodes(url, 2)
    results: list[list[BotResult]] = []
    try:
        swarm = asyncio.create_task(
            run_swarm(nodes.urls, tables=16, per_table=3, think=0.1, results=results)
        )
        await wait_for_tables(url, 16)
        await asyncio.sleep(1.0)
        victims = {table for table, node in lease_holders(url).items() if node == "node0"}
        assert victims, "the node to kill hosts some tables"
        assert not swarm.done()
        nodes[0].kill()
        summary = await asyncio.wait_for(swarm, 180)
    finally:
        nodes.stop()
    assert_games_sound(url, summary, results, tables=16)
    assert any(played_on_after_adoption(url, t) for t in victims), (
        "games were in progress on the killed node and went on on the other one"
    )


async def _kill_a_master_mid_game(
    cluster: LocalCluster, extra: tuple[str, ...], restart: bool
) -> tuple[object, list[list[BotResult]], set[str]]:
    """Bots play 12 tables on two nodes; the master of most of them is SIGKILLed mid-game
    (and started again once its replica took over, if ``restart``). Returns the swarm's
    summary, the bots' records and the tables on the killed master."""
    nodes = Nodes(cluster.url, 2, extra=extra)
    results: list[list[BotResult]] = []
    try:
        swarm = asyncio.create_task(
            run_swarm(nodes.urls, tables=12, per_table=3, think=0.1, results=results)
        )
        await wait_for_tables(cluster.url, 12)
        await asyncio.sleep(1.0)
        victim, hit = await asyncio.to_thread(
            busiest_master, cluster, list(lease_holders(cluster.url))
        )
        assert not swarm.done(), "the games are being played when the master dies"
        cluster.kill(victim)
        killed_at = time.monotonic()
        await asyncio.to_thread(cluster.wait_promoted)
        print(f"replica promoted {time.monotonic() - killed_at:.1f} s after the kill")
        if restart:
            await asyncio.to_thread(cluster.restart, victim)  # back as the new master's replica
            await asyncio.to_thread(cluster.wait_healthy)
        summary = await asyncio.wait_for(swarm, 240)
    finally:
        nodes.stop()
    return summary, results, hit


async def test_a_master_killed_mid_game_with_wait_loses_no_acknowledged_action(
    private_cluster: LocalCluster,
) -> None:
    summary, results, hit = await _kill_a_master_mid_game(
        private_cluster, ("--redis-wait-replicas", "1", "--redis-wait-timeout-ms", "200"), True
    )
    assert hit
    assert_games_sound(private_cluster.url, summary, results, tables=12)


async def test_a_master_killed_mid_game_without_wait_every_game_finishes(
    private_cluster: LocalCluster,
) -> None:
    summary, results, hit = await _kill_a_master_mid_game(private_cluster, (), False)
    assert hit
    assert summary.games_finished == 12
    assert summary.unfair == 0
    lost = lost_acknowledged_actions(private_cluster.url, results)
    print(f"acknowledged actions lost without WAIT: {lost} of {summary.actions}")
