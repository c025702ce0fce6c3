"""The node harness itself: a clock that moves only when turned (or when the loop is idle, to
its next timer), processes that can be paused and killed, clients that decode what they get."""

from __future__ import annotations

import asyncio
import time

import pytest

from blackdrez.protocol import v1
from blackdrez.protocol.errors import CloseCode
from blackdrez.server.testing.node_harness import (
    MONOTONIC_START,
    WALL_START,
    Cluster,
    Deadlock,
    ManualClock,
    NoAnswer,
    VirtualTimeLoop,
    on_nodes,
)


def test_the_clock_moves_only_when_turned_and_never_back() -> None:
    clock = ManualClock()
    assert (clock.monotonic(), clock.time()) == (MONOTONIC_START, WALL_START)
    clock.turn(2.5)
    assert (clock.monotonic(), clock.time()) == (MONOTONIC_START + 2.5, WALL_START + 2.5)
    with pytest.raises(ValueError):
        clock.turn(-1.0)


def test_the_loop_jumps_to_its_next_timer_instead_of_waiting() -> None:
    clock = ManualClock()
    loop = VirtualTimeLoop(clock)
    fired: list[float] = []

    async def sleeper() -> None:
        loop.call_later(3600.0, lambda: fired.append(loop.time()))
        await asyncio.sleep(7200.0)

    started = time.monotonic()
    try:
        loop.run_until_complete(sleeper())
    finally:
        loop.close()
    assert fired == [MONOTONIC_START + 3600.0]
    assert clock.monotonic() == MONOTONIC_START + 7200.0
    assert time.monotonic() - started < 1.0


def test_a_scenario_waiting_for_what_never_comes_is_a_deadlock() -> None:
    loop = VirtualTimeLoop(ManualClock(), idle_patience=0.01)

    async def forever() -> None:
        await loop.create_future()

    with pytest.raises(Deadlock):
        loop.run_until_complete(forever())
    loop.close()


@on_nodes(2)
async def test_a_paused_node_runs_nothing_until_resumed_then_runs_what_came_due(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    client = await cluster.connect(a, "Client")
    cluster.pause(a)
    with pytest.raises(NoAnswer):
        await client.request(v1.Ping(), within=1.0)
    live = await a.stores.presence.live_incarnations()
    assert a.id not in live and b.id in live  # it stopped heartbeating
    cluster.resume(a)
    await cluster.settle()
    assert any(isinstance(message, v1.Pong) for message in client.received)  # answered late
    await cluster.advance(cluster.lease_ttl)
    assert a.id in await a.stores.presence.live_incarnations()


@on_nodes(2)
async def test_a_killed_node_never_runs_again_and_its_clients_lose_their_connection(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    client = await cluster.connect(a, "Client")
    cluster.kill(a)
    assert client.closed and client.close_code is None
    await cluster.advance(5 * cluster.lease_ttl)
    assert a.id not in await b.stores.presence.live_incarnations()
    assert client.player in a.node.clients  # its detach never ran: the process is gone


@on_nodes(1)
async def test_clients_decode_text_and_binary_frames_alike(cluster: Cluster) -> None:
    (a,) = cluster.nodes
    text = await cluster.connect(a, "Text")
    binary = await cluster.connect(a, "Binary", binary=True)
    table = (await text.ok(v1.CreateTable())).table.id
    await binary.ok(v1.Spectate(table=table))
    await text.ok(v1.SetReady(table=table))
    await cluster.settle()
    assert binary.table(table).seq == text.table(table).seq == a.rooms[table].seq
    assert binary.table(table).events[-1].event == text.table(table).events[-1].event


@on_nodes(2)
async def test_a_player_connecting_elsewhere_closes_the_older_connection(cluster: Cluster) -> None:
    a, b = cluster.nodes
    first = await cluster.connect(a, "Player")
    second = await cluster.connect(b, token=first.token)
    await cluster.settle()
    assert first.closed and first.close_code == CloseCode.REPLACED
    assert not second.closed
    third = await cluster.connect(b, token=first.token)  # and on the same node
    await cluster.settle()
    assert second.closed and not third.closed
