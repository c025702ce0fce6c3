"""One live connection per player across the whole cluster: a player who connects again on
another node (a second browser behind the load balancer) replaces the connection they had on the
first (4004), as they would on the same node; the tables they sit at never see them leave."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
import redis.asyncio as aioredis

from blackdrez.clients.client import Client
from blackdrez.protocol import v1
from blackdrez.protocol.errors import CloseCode
from blackdrez.server.app import GameServer
from blackdrez.server.stores.base import node_channel
from tests.server.conftest import ClientFactory, ServerFactory
from tests.server.helpers import play_out, redis_user, seat_and_start, wait_for

REPLACED = (CloseCode.REPLACED, "you connected again elsewhere")


@pytest.fixture
async def two_nodes(make_server: ServerFactory, redis_url_clean: str) -> tuple[GameServer, ...]:
    """Two nodes on one real Redis, as behind the compose deployment's load balancer."""
    return (
        await make_server(redis_url=redis_url_clean, node_id="node-a"),
        await make_server(redis_url=redis_url_clean, node_id="node-b"),
    )


def url(server: GameServer) -> str:
    return f"ws://127.0.0.1:{server.port}/"


def went_away(watcher: Client, table: str, seat: int) -> bool:
    """Whether ``watcher`` ever saw the player at ``seat`` counted away."""
    return any(
        e.event.get("type") == "presence" and e.event["seat"] == seat and not e.event["connected"]
        for e in watcher.tables[table].events
    )


async def detached(server: GameServer, player: str) -> None:
    """Wait until ``server`` forgot the player's closed connection and told its tables."""
    await wait_for(lambda: player not in server.node.clients, "the old connection detached")
    await server.node._settled()
    await asyncio.sleep(0.3)  # what the detach routed to the tables' host has been served


async def test_connecting_on_another_node_replaces_the_first_and_the_seat_stays_connected(
    two_nodes: tuple[GameServer, ...], connect: ClientFactory
) -> None:
    """Ann plays at a table hosted on node a and opens a second browser on node b: the first is
    closed with 4004, the table never counts her away, and she plays on through node b."""
    a, b = two_nodes
    ann, bob = await connect(a, name="Ann"), await connect(a, name="Bob")
    table = await seat_and_start(ann, [bob], turn_seconds=30)
    seat = ann.tables[table].seat
    assert seat is not None

    again = await connect(b, token=ann.token)
    assert await asyncio.wait_for(ann.closed, 10.0) == REPLACED
    assert again.welcome.tables == [table]
    again.tables[table] = ann.tables[table]
    await again.resync(table)
    await detached(a, ann.player)

    assert a.node.rooms[table].seats[seat].connected
    assert not went_away(bob, table, seat), "the old connection's close counted Ann away"
    await asyncio.gather(play_out(again, table), play_out(bob, table))
    assert again.tables[table].view == bob.tables[table].view
    assert not went_away(bob, table, seat)


async def test_the_new_connection_answers_for_the_seat_until_it_closes(
    two_nodes: tuple[GameServer, ...], connect: ClientFactory
) -> None:
    """The connection on node b never resyncs the table: Ann stays connected there while it is
    open (it is hers), and is away once it closes (nobody else answers for the seat)."""
    a, b = two_nodes
    ann, bob = await connect(a, name="Ann"), await connect(a, name="Bob")
    table = await seat_and_start(ann, [bob])
    seat = ann.tables[table].seat
    assert seat is not None

    again = await connect(b, token=ann.token)
    assert await asyncio.wait_for(ann.closed, 10.0) == REPLACED
    await detached(a, ann.player)
    assert a.node.rooms[table].seats[seat].connected

    await again.close()
    await bob.wait_until(lambda: went_away(bob, table, seat))
    assert not a.node.rooms[table].seats[seat].connected


async def test_two_hellos_at_once_on_two_nodes_leave_exactly_the_later_one(
    two_nodes: tuple[GameServer, ...], connect: ClientFactory
) -> None:
    """Two browsers of one player greet two nodes at the same moment, again and again: each
    time exactly one stays, the one the store ordered last, whichever node it is on."""
    a, b = two_nodes
    first = await connect(a, name="Ann")
    token = first.token
    survivors = [first]
    for _ in range(8):
        pair = await asyncio.gather(
            Client.connect(url(a), token=token), Client.connect(url(b), token=token)
        )
        for old in survivors:
            assert await asyncio.wait_for(old.closed, 10.0) == REPLACED
        await asyncio.sleep(0.3)  # every node has heard of every claim
        survivors = [client for client in pair if not client.closed.done()]
        assert len(survivors) == 1, [client.closed for client in pair]
        (closed,) = [client for client in pair if client.closed.done()]
        assert closed.closed.result() == REPLACED
        holders = [node for node in (a, b) if first.player in node.node.clients]
        assert len(holders) == 1, "one node holds the player's connection"
        assert isinstance(await survivors[0].request(v1.Ping()), v1.Pong)
    for client in survivors:
        await client.close()


async def test_a_node_drops_a_bus_message_it_does_not_know(
    two_nodes: tuple[GameServer, ...], connect: ClientFactory, redis_url_clean: str
) -> None:
    """What a node of an older version does with a newer node's message (a ``Replaced`` one,
    say): it logs and drops it, and its players play on."""
    a, _ = two_nodes
    ann = await connect(a, name="Ann")
    future = msgspec.msgpack.encode({"bus": "from_a_later_version", "player": ann.player})
    await a.node.store.bus.publish(node_channel(a.node.id), future)
    assert isinstance(await ann.request(v1.Ping()), v1.Pong)
    assert not ann.closed.done()


async def test_a_new_guests_hello_costs_the_other_nodes_nothing(
    two_nodes: tuple[GameServer, ...], connect: ClientFactory, redis_url_clean: str
) -> None:
    """A hello without a token is a new identity: no connection of it exists anywhere, so no
    other node is told of it (a client reconnecting as a new guest in a loop made every node
    decode a message per hello). A later connection of that guest elsewhere replaces it all the
    same."""
    a, b = two_nodes
    listener = aioredis.Redis.from_url(redis_url_clean)
    heard = listener.pubsub()
    await heard.subscribe(node_channel(b.node.id))
    try:
        await heard.get_message(timeout=1.0)  # the subscription's confirmation
        guests = [await connect(a, name=f"Guest {n}") for n in range(5)]
        assert isinstance(await guests[-1].request(v1.Ping()), v1.Pong)
        assert await heard.get_message(timeout=0.5) is None, "node b was told of a new guest"
    finally:
        await heard.aclose()
        await listener.aclose()

    again = await connect(b, token=guests[0].token)
    assert await asyncio.wait_for(guests[0].closed, 10.0) == REPLACED
    assert isinstance(await again.request(v1.Ping()), v1.Pong)


async def test_a_connection_greeted_while_its_nodes_store_was_down_is_replaced_by_a_later_one(
    make_server: ServerFactory, connect: ClientFactory, redis_url_clean: str
) -> None:
    """Node b cannot reach Redis when Ann greets it (her token is accepted, the store gives the
    connection no order). Once Redis answers again Ann connects on node a: the connection on
    node b is older and is replaced (it stayed open beside the new one, for good)."""
    async with redis_user(redis_url_clean, "node-b") as user:
        a = await make_server(redis_url=redis_url_clean, node_id="node-a")
        b = await make_server(redis_url=user.url, node_id="node-b")
        b.store_grace = 60.0  # still taking handshakes while its store is down
        ann = await connect(a, name="Ann")

        await user.cut()
        there = await connect(b, token=ann.token)
        assert isinstance(await there.request(v1.Ping()), v1.Pong)  # served: greeted through
        assert not b.store.health.up, "node b greeted Ann without its store"

        await user.restore()
        await wait_for(lambda: b.store.health.up and b.store.bus.online, "b's store back")
        here = await connect(a, token=ann.token)
        assert await asyncio.wait_for(ann.closed, 10.0) == REPLACED
        assert await asyncio.wait_for(there.closed, 10.0) == REPLACED
        assert isinstance(await here.request(v1.Ping()), v1.Pong)


async def test_a_replacement_missed_while_a_nodes_bus_was_down_is_found_once_back(
    make_server: ServerFactory, connect: ClientFactory, redis_url_clean: str
) -> None:
    """Ann plays through node b, whose pub/sub link is down (killed, its reconnections refused)
    when she connects again on node a: the ``Replaced`` published for b is lost. Once b's link
    is back it reads each of its players' latest connection and closes Ann's older one there
    (it stayed open for good beside the new one); the seat never counts her away."""
    async with redis_user(redis_url_clean, "node-b") as user:
        a = await make_server(redis_url=redis_url_clean, node_id="node-a")
        b = await make_server(redis_url=user.url, node_id="node-b")
        ann, bob = await connect(b, name="Ann"), await connect(b, name="Bob")
        table = await seat_and_start(ann, [bob], turn_seconds=30)
        seat = ann.tables[table].seat
        stays = await connect(b, name="Cy")  # another player of node b: left alone

        await user.cut(bus_only=True)
        here = await connect(a, token=ann.token)
        await asyncio.sleep(0.5)
        assert not ann.closed.done(), "b heard nothing: its link is down"

        await user.restore()
        assert await asyncio.wait_for(ann.closed, 10.0) == REPLACED
        await detached(b, ann.player)
        assert not went_away(bob, table, seat), "her seat was answered for by node a"
        assert isinstance(await here.request(v1.Ping()), v1.Pong)
        assert isinstance(await stays.request(v1.Ping()), v1.Pong)
