"""Failover between nodes: a dead node's tables are adopted after their lease lapses, a paused
node coming back is fenced out, a stopping node hands its tables over at once."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server.node import hosting
from blackdrez.server.stores import LeaseLost
from blackdrez.server.stores.base import Append
from blackdrez.server.table.commands import rebuild
from blackdrez.server.testing.node_harness import Cluster, HarnessNode, on_nodes
from tests.node.helpers import act_once, seat_and_start


@on_nodes(2)
async def test_a_dead_nodes_table_is_adopted_after_its_lease_and_its_players_carry_on(
    cluster: Cluster,
) -> None:
    """p1 on node A creates a table, p2 on node B joins and plays; A dies without handing
    over; once the lease's TTL has passed, B adopts the table from its log, and p1 reconnects
    to B and resyncs to where the game is."""
    a, b = cluster.nodes
    p1 = await cluster.connect(a, "P1")
    p2 = await cluster.connect(b, "P2")
    table = await seat_and_start(cluster, p1, [p2])
    await act_once(cluster, [p1, p2], table)
    seq = a.rooms[table].seq
    cluster.kill(a)
    await cluster.advance(cluster.lease_ttl / 2)
    assert table not in b.rooms  # the lease still stands
    await cluster.until(
        lambda: table in b.rooms, "node b adopts the table", within=3 * cluster.lease_ttl
    )
    assert b.rooms[table].seq >= seq
    back = await cluster.reconnect(p1, b)
    assert back.seated == [table]
    await back.ok(v1.Resync(table=table, since=back.table(table).seq))
    await cluster.settle()
    assert back.tables[table].seq == b.rooms[table].seq
    assert not p2.table(table).gaps
    await act_once(cluster, [back, p2], table)


@on_nodes(2)
async def test_a_paused_node_that_comes_back_is_fenced_out_and_its_viewers_follow_the_table(
    cluster: Cluster,
) -> None:
    """Node A stops (SIGSTOP) longer than the lease: B adopts and the game goes on there. When
    A runs again its copy is stale: it drops it without writing anything, and its client,
    still connected to A, is caught up with what happened at B meanwhile."""
    a, b = cluster.nodes
    p1 = await cluster.connect(a, "P1")
    p2 = await cluster.connect(b, "P2")
    table = await seat_and_start(cluster, p1, [p2])
    stale, token = a.rooms[table], a.node.hosting.leases.held[table].token
    cluster.pause(a)
    await cluster.until(lambda: table in b.rooms, "node b adopts", within=3 * cluster.lease_ttl)
    for _ in range(2):
        await act_once(cluster, [p2], table) if p2.table(table).legal else None
        await cluster.advance(0.1)
    log_before = await b.stores.logs.read(table)
    cluster.resume(a)
    await cluster.until(lambda: table not in a.rooms, "node a drops its stale copy", within=2.0)
    log_after = await b.stores.logs.read(table)
    assert log_after[: len(log_before)] == log_before
    assert rebuild(log_after).seq == b.rooms[table].seq  # every entry is the new host's
    with pytest.raises(LeaseLost):  # the old holder's writes are fenced off
        await a.stores.logs.append(Append(table, token, len(log_after) + 1, b"stale"))
    assert stale is not b.rooms[table]
    await cluster.until(
        lambda: p1.table(table).seq == b.rooms[table].seq, "p1 caught up through node a"
    )
    assert table in a.node.fanout.remote_tables  # node a follows it where it went


@on_nodes(2)
async def test_a_node_that_stops_hands_its_tables_over_at_once(cluster: Cluster) -> None:
    a, b = cluster.nodes
    p1 = await cluster.connect(a, "P1")
    p2 = await cluster.connect(b, "P2")
    table = await seat_and_start(cluster, p1, [p2])
    stopped = cluster.clock.monotonic()
    await cluster.stop(a)
    assert p1.close_code == 1001
    await cluster.until(lambda: table in b.rooms, "node b adopts", within=cluster.lease_ttl)
    assert cluster.clock.monotonic() - stopped < cluster.lease_ttl / 2  # not after a lapse
    assert not a.rooms
    back = await cluster.reconnect(p1, b)
    await back.resync(table)
    await cluster.settle()
    assert back.table(table).seq == b.rooms[table].seq
    refused = await (await cluster.connect(a, "Late")).request(v1.CreateTable())
    assert isinstance(refused, v1.Error) and refused.code == ErrorCode.UNAVAILABLE


@on_nodes(2)
async def test_a_node_restarted_under_its_id_takes_its_tables_back_at_once(
    cluster: Cluster,
) -> None:
    """A node killed and started again at once under its id (a supervisor's restart) takes over
    the tables its earlier process held, without waiting for their leases to lapse."""
    a, b = cluster.nodes
    p1 = await cluster.connect(a, "P1")
    p2 = await cluster.connect(b, "P2")
    table = await seat_and_start(cluster, p1, [p2])
    seq = a.rooms[table].seq
    restarted = cluster.clock.monotonic()
    a2 = await cluster.restart(a)
    await cluster.until(
        lambda: table in a2.rooms, "the new process adopts", within=cluster.lease_ttl
    )
    assert cluster.clock.monotonic() - restarted < cluster.lease_ttl * 0.9
    assert table not in b.rooms and a2.rooms[table].seq >= seq
    await cluster.until(
        lambda: not a2.rooms[table].seats[0].connected, "p1 counted away after the restart"
    )
    back = await cluster.reconnect(p1, a2)
    await back.resync(table)
    await cluster.until(lambda: a2.rooms[table].seats[0].connected, "p1 back")


@on_nodes(2)
async def test_a_table_is_adopted_from_its_snapshot_and_the_log_after_it(cluster: Cluster) -> None:
    a, b = cluster.nodes
    p1 = await cluster.connect(a, "P1")
    p2 = await cluster.connect(b, "P2")
    with mock.patch.object(hosting, "SNAPSHOT_EVERY", 4):
        table = await seat_and_start(cluster, p1, [p2])
        for _ in range(3):
            await act_once(cluster, [p1, p2], table)
        await cluster.settle()
        snapshot = await b.stores.logs.read_snapshot(table)
        assert snapshot is not None
        cluster.kill(a)
        await cluster.until(lambda: table in b.rooms, "node b adopts", within=3 * cluster.lease_ttl)
    rebuilt = rebuild(await b.stores.logs.read(table))
    assert rebuilt.seq == b.rooms[table].seq  # the snapshot and the log tell one story
    await act_once(cluster, [p2, await cluster.reconnect(p1, b)], table)


@on_nodes(2)
async def test_an_orphan_scan_that_fails_unexpectedly_is_started_again_and_adopts(
    cluster: Cluster,
) -> None:
    """A bug or an error the scan's own handling does not expect (not ``StoreUnavailable``)
    fails one look for orphans: the scan is started again, and a dead node's table is still
    adopted. (A scan left dead would answer ``moving`` for that table for ever.)"""
    a, b = cluster.nodes
    p1 = await cluster.connect(a, "P1")
    p2 = await cluster.connect(b, "P2")
    table = await seat_and_start(cluster, p1, [p2])
    failed: list[bool] = []
    with failing_once(b.stores.presence, "live_incarnations", failed):
        cluster.kill(a)
        await cluster.until(lambda: bool(failed), "the scan fails", within=cluster.lease_ttl)
        await cluster.until(
            lambda: table in b.rooms, "node b adopts the table", within=4 * cluster.lease_ttl
        )
    assert restarts(b, "orphan scan") == 1


@on_nodes(2)
async def test_a_heartbeat_that_fails_unexpectedly_is_started_again(cluster: Cluster) -> None:
    """The heartbeat fails once with an error it does not expect: it beats again, and the
    other node never takes the live node for dead (nor adopts its table)."""
    a, b = cluster.nodes
    p1 = await cluster.connect(a, "P1")
    p2 = await cluster.connect(b, "P2")
    table = await seat_and_start(cluster, p1, [p2])
    failed: list[bool] = []
    with failing_once(a.stores.presence, "heartbeat", failed):
        await cluster.until(lambda: bool(failed), "the heartbeat fails", within=cluster.lease_ttl)
        await cluster.advance(3 * cluster.lease_ttl)
    assert a.node.id in await b.stores.presence.live_nodes()
    assert restarts(a, "heartbeat") == 1
    assert table in a.rooms and table not in b.rooms
    await act_once(cluster, [p1, p2], table)


def restarts(node: HarnessNode, loop: str) -> float | None:
    """How often ``node`` started its background ``loop`` again (its metric)."""
    return node.node.metrics.registry.get_sample_value(
        "blackdrez_background_restarts_total", {"loop": loop}
    )


def failing_once(store: object, method: str, failed: list[bool]) -> Any:
    """Patch ``store``'s coroutine ``method`` to fail once with an error no loop expects (noted
    in ``failed``), then to do what it did."""
    original = getattr(store, method)

    async def fails_once(*args: Any) -> Any:
        if not failed:
            failed.append(True)
            raise RuntimeError(f"an error no loop expects, from {method}")
        return await original(*args)

    return mock.patch.object(store, method, fails_once)
