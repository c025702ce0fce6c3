"""The node's clock: given to every component that reads the time, so a test can turn it.

Theory of operation
-------------------
A component of the node reads the time through the :class:`Clock` it was given, never from
``time`` directly, and reads one of two readings:

* :meth:`Clock.time`, wall-clock seconds since the epoch: what a log entry records as its
  ``now``, the rooms' deadlines (turn timers, away grace, closing), the day of a daily deal;
* :meth:`Clock.monotonic`, seconds that never go back: until when a lease can be trusted, the
  hints' rate limit, how long a bot the host added holds its seat, the pace of the orphan scans
  and of a table's retries after a failed write, whether the event loop still answers the lease
  renewal thread.

:class:`SystemClock` (the default) reads the process's clocks. A test harness gives its own
clock (any object with those two methods) and turns it; a test of a running server may also
replace one reading on the node's clock (``monkeypatch.setattr(node.clock, "time", ...)``).

What stays on asyncio's own clock: the sleeps and timers themselves (``asyncio.sleep``,
``loop.call_later``, ``asyncio.timeout``): the period of heartbeats, lease renewals and scans,
and the wait before a room's timer fires. The wait is computed from the injected clock (a
room's next deadline minus :meth:`Clock.time`), so a turned clock brings a deadline nearer and
the timer fires at once; a harness that wants the periods to pass without waiting runs the node
on an event loop whose clock it also turns. Latency metrics keep ``time.perf_counter``: they
measure the process, not the game.
"""

from __future__ import annotations

from time import monotonic as _monotonic
from time import time as _wall_time
from typing import Protocol


class Clock(Protocol):
    """Where a component of the node reads the time."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch (log entries, deadlines, days)."""
        ...

    def monotonic(self) -> float:
        """Seconds that never go back (lease validity, rate limits, waits)."""
        ...


class SystemClock:
    """The process's clocks: ``time.time`` and ``time.monotonic`` (called directly, without a
    method of ours in between: the node reads the time at every action)."""

    time = staticmethod(_wall_time)
    monotonic = staticmethod(_monotonic)
