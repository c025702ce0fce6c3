"""A stopped server leaves nothing running, even a task that lost its cancellation (redis-py
on Python 3.11 now and then lets one that lands mid-command pass): the test's event loop, like
``asyncio.run``, would otherwise wait for it for ever (seen once in CI as a 300 s hang)."""

from __future__ import annotations

import asyncio

from blackdrez.clients.bots import run_bot
from blackdrez.server.app import GameServer, Settings


async def test_a_stopped_server_leaves_no_task_running_even_one_deaf_to_a_cancel() -> None:
    server = GameServer(Settings(port=0, ping_interval=None), bot_client=run_bot)
    in_call = asyncio.Event()
    deaf = 0

    async def heartbeat_deaf_to_one_cancel(ttl: float) -> None:
        nonlocal deaf
        in_call.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            deaf += 1  # swallowed, as redis-py sometimes does mid-command

    server.store.presence.heartbeat = heartbeat_deaf_to_one_cancel  # type: ignore[method-assign]
    before = asyncio.all_tasks()
    await server.start()
    await asyncio.wait_for(in_call.wait(), 5)
    await asyncio.wait_for(server.stop(), 15)
    assert deaf == 1, "the heartbeat was not cancelled while in its store call"
    left = [t for t in asyncio.all_tasks() - before if t is not asyncio.current_task()]
    assert not left, f"still running after stop: {left}"
