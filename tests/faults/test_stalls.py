"""Stalls longer than the renewal thread's patience, and what comes after the first recovery.

A node's leases are renewed by a thread of their own, which stops renewing when the event loop
has taken none of its results for ``LOOP_PATIENCE`` seconds (a stuck loop must let its tables
go). After any stall that long (the node paused, Redis paused or down) the node must take its
tables back once and then hold them: every later request is answered, and the table's log shows
a single adoption, not one every lease period.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from clients.client import ServerError
from protocol import v1
from server.node import LEASE_TTL
from server.node.hosting import LOOP_PATIENCE
from server.table.commands import Resume
from server.testing.redis_server import RedisServer
from tests.faults.conftest import LaunchNodes
from tests.faults.history import read_table_logs
from tests.faults.players import close_all, fault_options, open_table, request

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.parametrize("store_url", ["redis"], indirect=True),
]

STALL = LOOP_PATIENCE + 2.0
"""Seconds the fault lasts: past the renewal thread's patience."""
WATCH = 8.0
"""Seconds the table is watched after it first answers again: several lease periods."""


@pytest.mark.parametrize("fault", ["node paused", "redis paused"])
async def test_after_a_stall_past_the_loop_patience_the_node_holds_its_leases(
    fault: str,
    launch_nodes: LaunchNodes,
    durable_redis: RedisServer,
    figures: dict[str, Any],
) -> None:
    nodes = launch_nodes(1)
    node = nodes[0]
    options = fault_options(seats=2, turn_seconds=300.0, grace_seconds=300.0)
    table = await open_table(nodes.urls, options)
    client = table.clients[0]
    try:
        stalled = node if fault == "node paused" else durable_redis
        stalled.pause()
        await asyncio.sleep(STALL)
        stalled.resume()
        back = time.monotonic()
        await request(client, v1.Resync(table=table.id, since=0), deadline=30.0)
        figures["answers again after s"] = round(time.monotonic() - back, 2)
        answers: list[str] = []
        end = time.monotonic() + WATCH
        while time.monotonic() < end:
            try:
                await client.request(v1.Resync(table=table.id, since=0), timeout=5.0)
                answers.append("ok")
            except ServerError as error:
                answers.append(error.code)
            await asyncio.sleep(LEASE_TTL)
    finally:
        await close_all(table.clients)
    logs = await read_table_logs(durable_redis.url, [table.id])
    resumes = sum(isinstance(e.command, Resume) for e in logs[table.id].entries)
    refused = len(answers) - answers.count("ok")
    figures["resyncs answered"] = f"{answers.count('ok')}/{len(answers)}"
    figures["resumes"] = resumes
    lost = [line for line in node.output() if "lease of" in line and "lost" in line]
    figures["leases lost"] = len(lost)
    assert refused == 0, f"after the first answer, {refused} resyncs refused: {answers}"
    assert resumes <= 1, f"the table was adopted {resumes} times after one stall"
