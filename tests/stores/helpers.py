"""What the store contracts share: a bus inbox, waiting for a condition, flushing the bus."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from blackdrez.server.stores.base import Bus, Stores

OpenRedisStores = Callable[..., Awaitable[Stores]]
"""Opens started Redis stores for a node (``node_id``, ``url``), closed after the test."""


class Inbox:
    """A bus handler that keeps what it receives."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []

    def __call__(self, data: bytes) -> None:
        self.messages.append(data)


async def eventually(condition: Callable[[], bool], timeout: float = 3.0) -> None:
    """Wait until ``condition()`` holds, failing the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


async def subscribe_barrier(bus: Bus, channel: str) -> Inbox:
    """Subscribe a barrier inbox to ``channel``; see :func:`flush_bus`."""
    barrier = Inbox()
    await bus.subscribe(channel, barrier)
    return barrier


async def flush_bus(bus: Bus, barrier: Inbox, channel: str) -> None:
    """Publish on the barrier channel and wait for it: earlier messages have arrived by then."""
    marker = f"barrier-{len(barrier.messages)}".encode()
    await bus.publish(channel, marker)
    await eventually(lambda: marker in barrier.messages)
