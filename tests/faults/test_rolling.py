"""A rolling upgrade: every node of three drained and started again in turn under live games.

Each node is drained through the admin API (what ``blackdrez drain`` calls), which hands its
tables over to the other nodes and exits; the node is started again (the new version, as a
deployment would) before the next one is drained. Games run all along; the clients were given
every node's address and reconnect by themselves. The history checker then proves every game
finished with nothing acknowledged lost or doubled; the worst pause any table showed (the
longest time without a new event, think time included) is measured and reported.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from typing import Any

import pytest

from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.protocol.codec import SERVER_DECODERS
from blackdrez.server.admin import drain
from blackdrez.server.testing.nodes import CpuSampler, lease_holders
from tests.faults.conftest import LaunchNodes, watch_again
from tests.faults.history import finish_and_check
from tests.faults.players import (
    NEVER,
    Fault,
    Table,
    clients_of,
    close_all,
    fault_options,
    open_tables,
    play_tables,
    until,
)

pytestmark = pytest.mark.timeout(300)
TOKEN = "rolling-upgrade-token"
THINK = 0.3
"""Seconds each player waits before acting: the pause a player sees anyway."""


class PauseMeter:
    """Samples every table's highest event number; remembers the longest time any table went
    without a new one while games ran (the pause its players saw)."""

    def __init__(self, tables: list[Table]) -> None:
        self.tables = tables
        self.worst = 0.0
        self.worst_table = ""

    async def run(self) -> None:
        seen: dict[str, tuple[int, float]] = {}
        while True:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            for table in list(self.tables):  # batches join the list as they start
                if table.over():
                    continue
                seq, since = seen.setdefault(table.id, (table.seq(), now))
                if table.seq() != seq:
                    seen[table.id] = (table.seq(), now)
                elif now - since > self.worst:
                    self.worst, self.worst_table = now - since, table.id


def forbidden_after_game(clients: list[Client]) -> Counter[str]:
    """The errors of ``NEVER`` these clients heard, but for "table ... is closed" about a table
    whose end they had seen: a client that reconnects resyncs every table it held, and the
    tables of games already played have closed since."""
    decoder = SERVER_DECODERS[1]
    found: Counter[str] = Counter()
    for client in clients:
        ended: set[str] = set()
        for frame in client.frames or []:
            message = decoder.decode(frame)
            if isinstance(message, v1.Snapshot | v1.Update) and message.view is not None:
                if message.view.get("phase") == "over":
                    ended.add(message.table)
            elif isinstance(message, v1.Error) and message.code in NEVER:
                closed = re.fullmatch(r"table '(\w+)' is closed", message.message)
                if closed is None or closed[1] not in ended:
                    found[str(message.code)] += 1
    return found


async def test_a_rolling_restart_of_every_node_loses_no_game(
    launch_nodes: LaunchNodes,
    store_url: str,
    cpu: CpuSampler,
    figures: dict[str, Any],
) -> None:
    """Before each node is drained a fresh batch of tables starts (one hosted on each node; a
    game lasts well under the whole roll), so every drain strikes games in progress on the
    node it drains, and the first batches live through several drains."""
    nodes = launch_nodes(3, extra=["--admin-token", TOKEN])
    options = fault_options(decks=2, max_rounds=20, turn_seconds=60.0, grace_seconds=60.0)
    tables: list[Table] = []
    playing: list[asyncio.Task[None]] = []
    meter = PauseMeter(tables)
    metering = asyncio.create_task(meter.run())
    rolls: list[str] = []
    try:
        for node in nodes:
            batch = await open_tables(nodes.urls, 3, options)
            tables += batch
            playing.append(asyncio.create_task(play_tables(batch, think=THINK, deadline=240.0)))
            await asyncio.sleep(1.5)
            going = sum(not t.over() for t in tables)
            hosted = list((await asyncio.to_thread(lease_holders, store_url)).values())
            assert hosted.count(node.node_id), f"{node.node_id} hosts a table when it is drained"
            said: list[str] = []
            await asyncio.to_thread(drain, f"http://127.0.0.1:{node.port}", TOKEN, 60, said.append)
            await until(lambda n=node: not n.running, 30)
            rolls.append(f"{'; '.join(said)} ({going} games going)")
            figures["drains"] = rolls
            await asyncio.to_thread(node.start)  # the new version, same id and address
            watch_again(cpu, node)
    except BaseException:
        for task in (*playing, metering):
            task.cancel()
        await close_all(clients_of(tables))
        raise
    # Every error but the one check below (at the end, when every frame is in).
    everything = Fault(at=0.0, going=[], seqs={}, frames={})
    problems = await finish_and_check(
        store_url,
        tables,
        asyncio.ensure_future(asyncio.gather(*playing)),
        everything,
        figures,
        resumes=len(nodes),  # a table may move at each drain
        cpu=cpu,
        nodes=list(nodes),
    )
    metering.cancel()
    forbidden = forbidden_after_game(clients_of(tables))
    figures["forbidden errors"] = dict(forbidden)
    problems += [
        f"players of live tables were answered {c} {n} times" for c, n in forbidden.items()
    ]
    figures["worst pause s"] = round(meter.worst, 2)
    reconnects = sum(c.reconnects for c in clients_of(tables))
    figures["client reconnects"] = reconnects
    if reconnects == 0:
        problems.append("no client reconnected: the drains moved nobody")
    if not all(re.search(r": [1-9]\d* table", roll) for roll in rolls):
        problems.append(f"a drain struck no live table (games too short?): {rolls}")
    assert not problems, "\n".join(problems)
