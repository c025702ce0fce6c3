"""Both nodes of a pair paused in turn under bots (issue 9, section 8: bots stalled after a
node was paused and resumed): every game must still finish, fairly, with nothing lost.

The other pause, kill and outage scenarios live in the fault suite (``tests/faults``).
"""

from __future__ import annotations

import asyncio

from blackdrez.clients.bots import BotResult, run_swarm
from blackdrez.server.testing.nodes import Nodes, lease_holders
from blackdrez.server.testing.redis_server import RedisServer
from tests.server.helpers import wait_for
from tests.server.test_failover import assert_games_sound, wait_for_tables


async def test_every_bot_game_finishes_after_both_nodes_are_paused_in_turn(tmp_path) -> None:
    """Node 0 is paused past its leases (node 1 adopts its tables), then node 1 is paused past
    its own and node 0 resumes with its stale copies, then node 1 resumes: the section 1
    scenario with bots playing every table."""
    tables = 6
    with RedisServer(appendonly=True, data_dir=tmp_path) as store:
        nodes = Nodes(store.url, 2)
        first, second = nodes[0], nodes[1]
        results: list[list[BotResult]] = []
        try:
            swarm = asyncio.create_task(
                run_swarm(nodes.urls, tables=tables, per_table=3, think=0.1, results=results)
            )
            await wait_for_tables(store.url, tables)
            await asyncio.sleep(1.0)
            assert not swarm.done()
            first.pause()
            try:
                await wait_for(
                    lambda: set(lease_holders(store.url).values()) == {"node1"},
                    "node 1 adopts node 0's tables",
                )
                await asyncio.sleep(1.0)  # node 1's bots play on
                second.pause()
                try:
                    await wait_for(lambda: not lease_holders(store.url), "node 1's leases lapse")
                finally:
                    first.resume()
                await asyncio.sleep(2.0)  # node 0 alone, with its stale copies
            finally:
                second.resume()
                first.resume()
            summary = await asyncio.wait_for(swarm, 180)
        finally:
            nodes.stop()
        assert_games_sound(store.url, summary, results, tables=tables)
        output = "".join(line for node in nodes for line in node.output())
        assert "Task exception was never retrieved" not in output
        assert "Traceback" not in output, output
