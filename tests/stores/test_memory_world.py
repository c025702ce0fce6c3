"""Several nodes' memory stores over one ``MemoryWorld``: what one node writes the others read,
a publish reaches every node's subscribers, and every TTL runs by the world's clock."""

from __future__ import annotations

import asyncio

from blackdrez.server.stores.base import Append, Whereabouts
from blackdrez.server.stores.memory import MemoryWorld, memory_stores

from .helpers import Inbox, eventually


class TurnedClock:
    """A monotonic clock that moves only when turned."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_the_nodes_of_one_world_share_every_concern() -> None:
    world = MemoryWorld()
    one, two = memory_stores("n1", world=world), memory_stores("n2", world=world)
    assert one.shared and two.shared and not memory_stores("alone").shared
    token = await one.leases.acquire("t1", 5)
    assert token is not None
    assert await two.leases.acquire("t1", 5) is None, "held by n1"
    await one.logs.append(Append("t1", token, 1, b"create"))
    await one.lobby.put("t1", "n1", b"record", True, token)
    assert await two.logs.read("t1") == [b"create"]
    assert await two.lobby.listed() == [b"record"]
    place = await two.leases.locate("t1")
    assert (place.node, place.incarnation) == ("n1", one.incarnation)
    inbox = Inbox()
    await two.bus.subscribe("news", inbox)
    await one.bus.publish("news", b"from n1")
    await eventually(lambda: inbox.messages == [b"from n1"])
    await one.presence.heartbeat(10)
    await two.presence.heartbeat(10)
    assert await one.presence.live_nodes() == {"n1", "n2"}
    assert await one.tokens.shared_secret(b"first") == await two.tokens.shared_secret(b"other")


async def test_a_worlds_ttls_run_by_its_clock() -> None:
    clock = TurnedClock()
    world = MemoryWorld(monotonic=clock)
    one, two = memory_stores("n1", world=world), memory_stores("n2", world=world)
    token = await one.leases.acquire("t1", 5)
    assert token is not None
    await one.logs.append(Append("t1", token, 1, b"create"))
    await one.presence.heartbeat(5)
    await asyncio.sleep(0.05)  # real time does not count
    assert (await two.leases.locate("t1")).where is Whereabouts.HOSTED
    clock.now += 5
    assert (await two.leases.locate("t1")).where is Whereabouts.MOVING
    assert await two.presence.live_nodes() == set()
    assert await two.leases.adoptable() == ["t1"]
