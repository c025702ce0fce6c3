"""What the store contracts share: a bus inbox, waiting for a condition, flushing the bus, the
loop's stalls while a timed call runs."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

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


class Stalls:
    """How late the loop ran a 5 ms tick, at most, while :func:`timed` was open: the time a
    timed call lost to the machine (another process on the CPU, a collection) rather than to
    the code it times. A loaded CI machine has been seen to hold a test's loop up 170 ms."""

    def __init__(self) -> None:
        self.longest = 0.0


@contextlib.asynccontextmanager
async def stalls(tick: float = 0.005) -> AsyncIterator[Stalls]:
    """Measure the loop's stalls (see :class:`Stalls`) until the block ends."""
    measured = Stalls()

    async def ticking() -> None:
        while True:
            due = time.perf_counter() + tick
            await asyncio.sleep(tick)
            measured.longest = max(measured.longest, time.perf_counter() - due)

    ticker = asyncio.get_running_loop().create_task(ticking())
    try:
        yield measured
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker


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
