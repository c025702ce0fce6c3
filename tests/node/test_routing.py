"""Routing between nodes: a request for a table hosted elsewhere goes over the bus to its host
and the answer comes back; a host that does not answer is not waited for forever."""

from __future__ import annotations

import asyncio
import gc

import pytest

from blackdrez.protocol import v1
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.server.node.routing import REMOTE_TIMEOUT
from blackdrez.server.stores import StoreUnavailable
from blackdrez.server.testing.node_harness import Cluster, NoAnswer, on_nodes
from tests.node.helpers import seat_and_start


@on_nodes(2)
async def test_a_request_for_a_table_hosted_elsewhere_is_answered_by_its_host(
    cluster: Cluster,
) -> None:
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    guest = await cluster.connect(b, "Guest")
    joined = await host.ok(v1.CreateTable(options=v1.TableOptions(seats=2)))
    table = joined.table.id
    assert table in a.rooms and table not in b.rooms
    answer = await guest.ok(v1.JoinTable(table=table))
    assert isinstance(answer, v1.Joined) and answer.seat == 1
    assert a.rooms[table].seat_of(guest.player) == 1  # seated at the host, through node b
    await guest.ok(v1.SetReady(table=table))
    await cluster.settle()
    info = host.table(table).info
    assert info is not None and (seat := info.seats[1]) is not None
    assert seat.ready  # the host's update reached its own client
    assert guest.table(table).seq == a.rooms[table].seq  # and, over the bus, the guest


@on_nodes(2)
async def test_an_action_whose_host_does_not_answer_closes_the_connection_after_the_timeout(
    cluster: Cluster,
) -> None:
    """The host heartbeats but never hears the request (its bus is cut): after REMOTE_TIMEOUT
    a repeatable request is answered ``unavailable``, and an action, which may have run,
    closes the connection so that the client resyncs."""
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    guest = await cluster.connect(b, "Guest")
    table = await seat_and_start(cluster, host, [guest])
    cluster.cut_bus(a)
    sent = cluster.clock.monotonic()
    refusal = await guest.request(v1.SetReady(table=table, ready=False))
    assert isinstance(refusal, v1.Error) and refusal.code == ErrorCode.UNAVAILABLE
    assert cluster.clock.monotonic() - sent >= REMOTE_TIMEOUT
    with pytest.raises(NoAnswer):  # no reply: the connection is closed instead
        await guest.request(v1.Act(table=table, action={"type": "stand"}))
    await cluster.settle()
    assert guest.close_code == CloseCode.NO_ANSWER


@on_nodes(2)
async def test_a_request_to_a_host_that_stopped_heartbeating_is_given_up_on_early(
    cluster: Cluster,
) -> None:
    """A paused host stops heartbeating: a request forwarded to it is answered once the scans
    see it gone, before REMOTE_TIMEOUT; its lease lapses with its heartbeat, and the next
    request is served where the table was adopted."""
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    guest = await cluster.connect(b, "Guest")
    table = await seat_and_start(cluster, host, [guest])
    cluster.pause(a)
    sent = cluster.clock.monotonic()
    refusal = await guest.request(v1.SetReady(table=table, ready=False))
    assert isinstance(refusal, v1.Error) and refusal.code == ErrorCode.UNAVAILABLE
    assert cluster.clock.monotonic() - sent < REMOTE_TIMEOUT
    await guest.ok(v1.SetReady(table=table, ready=False))
    assert table in b.rooms


@on_nodes(2)
async def test_unknown_and_closed_tables_are_not_found_from_any_node(cluster: Cluster) -> None:
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    other = await cluster.connect(b, "Other")
    unknown = await other.request(v1.Spectate(table="tnothere00"))
    assert isinstance(unknown, v1.Error) and unknown.code == ErrorCode.NOT_FOUND
    table = (await host.ok(v1.CreateTable())).table.id
    await host.ok(v1.LeaveTable(table=table))  # the host alone leaves: the table closes
    await cluster.until(lambda: table not in a.rooms, "the table closes")
    await cluster.settle()
    closed = await other.request(v1.Spectate(table=table))
    assert isinstance(closed, v1.Error) and closed.code == ErrorCode.NOT_FOUND
    assert "closed" in closed.message


@on_nodes(1)
async def test_requests_that_need_no_table_are_answered_by_the_node(cluster: Cluster) -> None:
    (a,) = cluster.nodes
    client = await cluster.connect(a, "Client")
    pong = await client.ok(v1.Ping())
    assert pong.time == cluster.clock.time()
    bad = await client.request(v1.CreateTable(options=v1.TableOptions(seats=9)))
    assert isinstance(bad, v1.Error) and bad.code == ErrorCode.BAD_MESSAGE


@on_nodes(2)
async def test_a_forward_given_up_on_while_its_publish_fails_leaves_no_unread_exception(
    cluster: Cluster,
) -> None:
    """An orphan scan gives up on a forwarded request (its host stopped heartbeating) while the
    request's own publish is still waiting on the store, which then fails: the requester hears
    ``unavailable``, and the given-up future's exception is read (the three-host test found
    "Future exception was never retrieved" in a node's log)."""
    a, b = cluster.nodes
    host = await cluster.connect(a, "Host")
    guest = await cluster.connect(b, "Guest")
    table = await seat_and_start(cluster, host, [guest])
    unread: list[str] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: unread.append(context["message"]))
    publish = b.node.store.bus.publish

    async def scanned_meanwhile_then_failed(channel: str, payload: bytes) -> int:
        b.node.routing.nodes_heard({b.id: None}, {a.id}, {a.id: None, b.id: None})
        await asyncio.sleep(0)
        raise StoreUnavailable("the bus is cut")

    b.node.store.bus.publish = scanned_meanwhile_then_failed  # type: ignore[method-assign]
    try:
        refusal = await guest.request(v1.SetReady(table=table, ready=False))
    finally:
        b.node.store.bus.publish = publish  # type: ignore[method-assign]
    assert isinstance(refusal, v1.Error) and refusal.code == ErrorCode.UNAVAILABLE
    gc.collect()
    await asyncio.sleep(0)
    assert not [m for m in unread if "never retrieved" in m], unread
