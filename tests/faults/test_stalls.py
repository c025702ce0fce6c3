"""Stalls longer than the renewal thread's patience, and what comes after the first recovery.

A node's leases are renewed by a thread of their own, which stops renewing when the event loop
has taken none of its results for ``LOOP_PATIENCE`` seconds (a stuck loop must let its tables
go). After any stall that long (the node paused, Redis paused or down) the node must take its
tables back once and then hold them: every later request is answered, and the table's log shows
a single adoption, not one every lease period.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import msgspec
import pytest

from blackdrez.clients.client import ServerError
from blackdrez.protocol import v1
from blackdrez.server.app import GameServer, Settings
from blackdrez.server.node import LEASE_TTL
from blackdrez.server.node.leases import LOOP_PATIENCE
from blackdrez.server.table.commands import Resume
from blackdrez.server.testing.nodes import lease_holders
from blackdrez.server.testing.redis_server import RedisServer
from tests.faults.conftest import LaunchNodes
from tests.faults.history import read_table_logs
from tests.faults.players import (
    act_on_turn,
    close_all,
    connect,
    fault_options,
    next_move,
    open_table,
    request,
)

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.parametrize("store_url", ["redis"], indirect=True),
]

STALL = LOOP_PATIENCE + 2.0
"""Seconds the fault lasts: past the renewal thread's patience."""
FREED = {"reason": "timeout"}
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


async def test_a_player_on_a_node_paused_past_the_grace_is_told_their_seat_was_freed(
    launch_nodes: LaunchNodes,
    durable_redis: RedisServer,
    figures: dict[str, Any],
) -> None:
    """The table is hosted on A; P0 is connected to A, P1 to B. A is paused past its lease: B
    adopts the table, P0's grace runs out there, B frees P0's seat and the game ends. When A
    runs again it must tell P0 what happened meanwhile (its seat freed, the game's end), as
    whoever watches a seat when it is freed is told: not leave P0 looking at a game in progress
    with actions to play."""
    nodes = launch_nodes(2)
    node_a, node_b = nodes[0], nodes[1]
    options = fault_options(seats=2, turn_seconds=300.0, grace_seconds=2.0)
    p0 = await connect(node_a.url, name="P0", reconnect=False)
    p1 = await connect(node_b.url, name="P1")
    clients = [p0, p1]
    try:
        table = (await request(p0, v1.CreateTable(options=options))).table.id
        await request(p1, v1.JoinTable(table=table))
        for client in clients:
            await request(client, v1.SetReady(table=table))
        await request(p0, v1.StartGame(table=table))
        for client in clients:
            await client.wait_until(lambda c=client: c.tables[table].view is not None, 30)
        seat = p0.tables[table].seat
        node_a.pause()
        paused = time.monotonic()
        await request(p1, v1.Resync(table=table, since=0), deadline=60.0)  # B adopts it
        while p1.tables[table].view["phase"] != "over":  # P1 plays on alone if on turn
            assert time.monotonic() < paused + 40, "the game never ended at B"
            move = next_move(p1, table)
            if move is not None:
                with contextlib.suppress(ServerError):
                    await p1.act(table, move)
            await asyncio.sleep(0.2)
        figures["game over at B after s"] = round(time.monotonic() - paused, 2)
        node_a.resume()
        resumed = time.monotonic()
        state = p0.tables[table]
        with contextlib.suppress(TimeoutError):
            await p0.wait_until(lambda: state.seq >= p1.tables[table].seq, 15)
        figures["P0 told after s"] = round(time.monotonic() - resumed, 2)
    finally:
        await close_all(clients)
    logs = await read_table_logs(durable_redis.url, [table])
    room = logs[table].room
    assert room is not None and room.engine is not None and room.engine.over
    freed = [
        e.seq for e in state.events if e.event == {"type": "seat_freed", **FREED, "seat": seat}
    ]
    figures["P0 at event, the table at"] = f"{state.seq}, {p1.tables[table].seq}"
    assert freed, f"P0 was never told its seat was freed (P0 at event {state.seq})"
    assert state.view == msgspec.to_builtins(room.engine.view(None)), "P0's last view"
    assert state.legal == [], "P0 is still offered actions"


async def test_a_node_whose_event_loop_is_stuck_past_the_patience_lets_its_tables_go(
    launch_nodes: LaunchNodes,
    durable_redis: RedisServer,
    figures: dict[str, Any],
) -> None:
    """The other side of the renewal thread's patience: node A (in this process) hosts a table
    and its event loop is blocked past LOOP_PATIENCE (a stuck loop, not a paused process: the
    renewal thread runs on). A must stop renewing so that the table can be adopted; once A's loop
    runs again A finds its lease gone, and the table goes on where it was adopted (by B, or by A
    itself: its first scan after the stall may come first), once."""
    node_b = launch_nodes(1)[0]
    node_a = GameServer(Settings(port=0, redis_url=durable_redis.url, node_id="inproc"))
    await node_a.start()
    clients = []
    try:
        options = fault_options(seats=2, turn_seconds=300.0, grace_seconds=300.0)
        url_a = f"ws://127.0.0.1:{node_a.port}/"
        table = await open_table([url_a, node_b.url], options, host_url=url_a)
        clients = table.clients
        assert lease_holders(durable_redis.url)[table.id] == "inproc"
        time.sleep(STALL)  # the point: this event loop is stuck
        holder = lease_holders(durable_redis.url).get(table.id)
        figures["holder after the stall"] = holder
        assert holder != "inproc", "the stuck node kept renewing its lease"
        _, seq = await act_on_turn(table.clients, table.id)  # (retried while it moves)
        figures["acted at"] = seq
        await asyncio.sleep(2 * LEASE_TTL)  # whichever node adopted it holds it
        figures["holder then"] = lease_holders(durable_redis.url).get(table.id)
    finally:
        await close_all(clients)
        await node_a.stop()
    log = (await read_table_logs(durable_redis.url, [table.id]))[table.id]
    assert log.problem is None, log.problem
    resumes = sum(isinstance(e.command, Resume) for e in log.entries)
    assert resumes == 1, f"adopted {resumes} times"
