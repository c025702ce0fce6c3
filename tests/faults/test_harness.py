"""The fault suite's players themselves: what they call a stalled game.

A player waiting for its turn gives up (the game "stalled") after :data:`players.STALL` seconds
without the update it waits for, counted only while the scenario's gate is open: the time the
scenario held its players does not count. (A Swarm rolling update that held the players for
longer than that, then opened the gate, saw players give up a second after it opened, with their
turn on its way: the games were reported stuck while the server was fine.)
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.faults import players

pytestmark = pytest.mark.timeout(30)


class SilentClient:
    """What ``_progress`` needs of a client: ``wait_until``, here until ``ready`` is set (the
    update the player waits for) or the timeout."""

    def __init__(self) -> None:
        self.ready = asyncio.Event()

    async def wait_until(self, predicate: object, timeout: float | None = 10.0) -> bool:
        async with asyncio.timeout(timeout):
            await self.ready.wait()
        return True


async def test_the_time_the_gate_was_closed_does_not_count_towards_a_stall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(players, "STALL", 0.5)
    monkeypatch.setattr(players, "GATE_POLL", 0.05)
    client, gate = SilentClient(), asyncio.Event()
    started = time.monotonic()
    waiting = asyncio.create_task(players._progress(client, lambda: True, gate))  # type: ignore[arg-type]
    await asyncio.sleep(0.8)  # held past STALL
    gate.set()
    await asyncio.sleep(0.3)  # open for less than STALL: the update arrives
    assert not waiting.done(), "the player gave up while its wait had been open 0.3 s of 0.5"
    client.ready.set()
    await asyncio.wait_for(waiting, 1.0)
    assert time.monotonic() - started >= 1.1


async def test_a_wait_with_the_gate_open_past_the_stall_gives_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(players, "STALL", 0.5)
    monkeypatch.setattr(players, "GATE_POLL", 0.05)
    gate = asyncio.Event()
    gate.set()
    for held in (None, gate):
        started = time.monotonic()
        with pytest.raises(players._Stalled):
            await players._progress(SilentClient(), lambda: True, held)  # type: ignore[arg-type]
        assert 0.45 <= time.monotonic() - started < 1.0
