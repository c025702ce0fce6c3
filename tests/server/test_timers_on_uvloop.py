"""A table's timer on the node's real event loop (uvloop): a deadline already due is set with
``call_soon`` by uvloop (a ``Handle``, which has no ``when()``), and setting the timer again
before it fires must keep it, not fail the action that moved the deadline."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import uvloop

from blackdrez.server.node.hosting import Hosting


class _Room:
    def __init__(self, deadline: float) -> None:
        self.id = "t1"
        self.status = "playing"
        self.deadline = deadline

    def next_deadline(self) -> float:
        return self.deadline


def _hosting(room: _Room, ticks: list[str]) -> Any:
    health = SimpleNamespace(up=True)
    hosting: Any = SimpleNamespace(
        store=SimpleNamespace(health=health),
        _health=health,
        clock=SimpleNamespace(time=time.time, monotonic=time.monotonic),
        rooms={room.id: room},
        _timers={},
        _retry_at={},
        _loop=None,
    )
    hosting._delay = lambda r, deadline: Hosting._delay(hosting, r, deadline)
    hosting._set_timer = lambda r: Hosting._set_timer(hosting, r)
    hosting._on_timer = lambda r: Hosting._on_timer(hosting, r)

    async def tick(r: _Room) -> None:
        ticks.append(r.id)

    hosting.tick = tick
    hosting._spawn = lambda coroutine: asyncio.get_running_loop().create_task(coroutine)
    return hosting


def test_a_due_timer_set_again_before_it_fires_is_kept_on_uvloop() -> None:
    ticks: list[str] = []

    async def scenario() -> None:
        room = _Room(deadline=time.time())  # due now: uvloop schedules it with call_soon
        hosting = _hosting(room, ticks)
        Hosting._set_timer(hosting, room)
        Hosting._set_timer(hosting, room)  # another change in the same turn of the loop
        room.deadline = time.time() + 0.05  # and one that moves the deadline later
        Hosting._set_timer(hosting, room)
        for _ in range(50):
            await asyncio.sleep(0.01)
            if ticks:
                break

    uvloop.run(scenario())
    assert ticks == ["t1"]  # fired once, when due
