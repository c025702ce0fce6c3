"""The bus contract (``Bus``): publish/subscribe, on every store and between Redis nodes."""

from __future__ import annotations

import asyncio

from blackdrez.server.stores.base import (
    Stores,
    node_channel,
    table_channel,
)

from .helpers import Inbox, OpenRedisStores, eventually, flush_bus, subscribe_barrier


async def test_publish_reaches_every_handler_of_the_channel(stores: Stores) -> None:
    one, two, elsewhere = Inbox(), Inbox(), Inbox()
    await stores.bus.subscribe("bd:lobby", one)
    await stores.bus.subscribe("bd:lobby", two)
    await stores.bus.subscribe(table_channel("t1"), elsewhere)
    await stores.bus.publish("bd:lobby", b"hello")
    await stores.bus.publish("bd:lobby", b"again")
    await eventually(lambda: len(one.messages) == 2 and len(two.messages) == 2)
    assert one.messages == two.messages == [b"hello", b"again"]
    assert elsewhere.messages == []


async def test_publish_without_subscribers_is_fine(stores: Stores) -> None:
    await stores.bus.publish(node_channel("nobody"), b"lost")


async def test_unsubscribe_stops_one_handler_then_the_channel(stores: Stores) -> None:
    barrier = await subscribe_barrier(stores.bus, "barrier")
    kept, dropped = Inbox(), Inbox()
    await stores.bus.subscribe("news", kept)
    await stores.bus.subscribe("news", dropped)
    await stores.bus.unsubscribe("news", dropped)
    await stores.bus.unsubscribe("news", Inbox())  # never subscribed: ignored
    await stores.bus.publish("news", b"one")
    await flush_bus(stores.bus, barrier, "barrier")
    assert kept.messages == [b"one"]
    assert dropped.messages == []

    await stores.bus.unsubscribe("news", kept)
    await stores.bus.publish("news", b"two")
    await flush_bus(stores.bus, barrier, "barrier")
    assert kept.messages == [b"one"]

    await stores.bus.subscribe("news", dropped)  # a channel can be subscribed again
    await stores.bus.publish("news", b"three")
    await eventually(lambda: dropped.messages == [b"three"])


async def test_concurrent_subscribers_of_a_new_channel(stores: Stores) -> None:
    inboxes = [Inbox() for _ in range(3)]
    await asyncio.gather(*(stores.bus.subscribe("fresh", inbox) for inbox in inboxes))
    await stores.bus.publish("fresh", b"all of you")
    await eventually(lambda: all(inbox.messages == [b"all of you"] for inbox in inboxes))


async def test_a_failing_handler_does_not_stop_the_bus(stores: Stores) -> None:
    def broken(data: bytes) -> None:
        raise RuntimeError("handler bug")

    inbox = Inbox()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda loop, context: None)  # the bug is expected here
    await stores.bus.subscribe("news", broken)
    await stores.bus.subscribe("news", inbox)
    await stores.bus.publish("news", b"one")
    await stores.bus.publish("news", b"two")
    await eventually(lambda: inbox.messages == [b"one", b"two"])


async def test_nodes_see_each_others_messages(open_redis_stores: OpenRedisStores) -> None:
    node_a = await open_redis_stores("node-a")
    node_b = await open_redis_stores("node-b")
    at_a, at_b, own = Inbox(), Inbox(), Inbox()
    await node_a.bus.subscribe(node_channel("node-a"), at_a)
    await node_b.bus.subscribe(node_channel("node-b"), at_b)
    await node_a.bus.subscribe("bd:lobby", own)

    await node_b.bus.publish(node_channel("node-a"), b"b to a")
    await node_a.bus.publish(node_channel("node-b"), b"a to b")
    await node_a.bus.publish("bd:lobby", b"a to all")
    await eventually(lambda: at_a.messages and at_b.messages and own.messages)
    assert at_a.messages == [b"b to a"]
    assert at_b.messages == [b"a to b"]
    assert own.messages == [b"a to all"]  # Redis delivers a node's own messages back to it


async def test_close_stops_the_reader(open_redis_stores: OpenRedisStores) -> None:
    stores = await open_redis_stores()
    await stores.bus.subscribe("news", Inbox())
    await stores.close()
    names = {task.get_name() for task in asyncio.all_tasks()}
    assert "redis-store-pubsub" not in names
