"""What a test that gave up waiting prints about the in-process server it waited on.

A browser or wire test that waits for something the server should do (a deal, a reply) and
times out says only that it timed out. :func:`describe` says what the server held at that
moment: each hosted table's status, its next deadline and the timer set for it, whether its
lock is held (and by how many waiting), each connection's pending action and unwritten frames,
whether the node's writes are scheduled, and how far the wall clock moved against the
monotonic one since the server started (a stepped clock moves every room's deadline). The
test suite's hook (``tests/browser/conftest.py``) adds it to a failed test's report.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any


def clock_offset() -> float:
    """The wall clock's reading less the monotonic one's: taken again later, the difference
    is how far the wall clock was stepped (or slewed) meanwhile."""
    return time.time() - time.monotonic()


def describe(server: Any, offset: float | None = None) -> str:
    """The state of ``server`` (a running :class:`~blackdrez.server.app.GameServer`), a line
    per fact: for a failed test's report, never for a decision. ``offset``: the
    :func:`clock_offset` taken when the server started."""
    node = server.node
    hosting = node.hosting
    clock = hosting.clock
    lines = []
    if offset is not None:
        moved = round(clock_offset() - offset, 3) + 0.0  # (a few µs either way: +0.000)
        lines.append(f"the wall clock moved {moved:+.3f} s against the monotonic one")
    loop = hosting._loop  # (the report is made between the test and its teardown: no loop runs)
    loop_now = None if loop is None else loop.time()
    now = clock.time()
    for table, room in sorted(hosting.rooms.items()):
        deadline = room.next_deadline()
        due = "none" if deadline is None else f"in {deadline - now:+.3f} s"
        timer = hosting._timers.get(table)
        if timer is None:
            armed = "no timer"
        elif isinstance(timer, asyncio.Task):
            armed = f"a task ({'done' if timer.done() else 'pending'})"
        else:
            when = getattr(timer, "when", None)
            at = "soon" if when is None or loop_now is None else f"in {when() - loop_now:+.3f} s"
            armed = f"a timer {at}{' (cancelled)' if timer.cancelled() else ''}"
        lock = hosting._locks.get(table)
        held = "free" if lock is None else f"held, {sum(not w.done() for w in lock)} waiting"
        seats = ", ".join(
            "empty"
            if seat is None
            else f"{seat.name}{' leaving' if seat.leaving else ''}"
            f"{'' if seat.away_since is None else ' away'}"
            for seat in room.seats
        )
        lines.append(
            f"table {table}: {room.status}, seq {room.seq}, on turn "
            f"{sorted(room.timers.legal_now)}, deadline {due}, {armed}, lock {held}; "
            f"seats: {seats}"
        )
    outbox = node.outbox
    lines.append(
        f"outbox: {'scheduled' if outbox._scheduled else 'idle'}, "
        f"{len(outbox._waiting)} connections waiting, held {outbox._held}"
    )
    for player, client in sorted(node.clients.items()):
        out = client._out
        lines.append(
            f"connection {client.name} ({player}): "
            f"{'acting' if client.acting else 'idle'}"
            f"{', closing' if client.closing else ''}, "
            f"{0 if out is None else len(out)} frames unwritten"
        )
    return "\n".join(lines)
