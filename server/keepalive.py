"""Keepalive pings for all of a loop's server connections from one timer, not a task each.

Theory of operation
-------------------
websockets pings each connection from a task of its own, which sleeps between pings: a task, its
coroutine, the sleeping coroutine, a future and a timer for every held connection, about 1.1 KiB
of each (issue 35: the node's memory per connection). :class:`Pings` keeps, per connection, when
it is next due (its next ping, or the end of the wait for its pong) and wakes at most every
:data:`TICK` seconds (a fraction of the shortest interval, for tests) to do what is due: it
pings a connection ``ping_interval`` seconds after the last ping was answered, and fails one
whose pong has not come ``ping_timeout`` seconds after its ping with 1011 "keepalive ping
timeout", as websockets does. A ping is sent by a short task (websockets' ``ping``, which waits
when the connection is closing); nothing lives per connection between pings but two dict
entries.

A stall of the whole loop (a pause of the process or of its machine) longer than
``ping_timeout`` ends with the timer due and the clients' pongs unread in the sockets: the loop
(uvloop's, libuv's order) runs due timers before it reads. Failing then would close every
connection whose ping was out, the clients that answered too. So a wake-up more than a tick late
gives each connection whose pong it finds missing one tick more, once per ping; a client that
did not answer is failed then, a tick later than it would have been.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

if TYPE_CHECKING:
    from websockets.asyncio.connection import Connection

log = logging.getLogger("blackdrez.keepalive")

TICK = 1.0
"""Seconds between wake-ups at most (less for a connection whose interval is under 4 s): a ping
is at most this late, and one wake-up does every connection due."""

_PINGING = None
"""A connection's pong-wait while its ping is being sent."""


class Pings:
    """The keepalive of every server connection of one event loop (:func:`pings_of`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop_ref = weakref.ref(loop)
        """(Not the loop itself: :data:`_BY_LOOP` keeps this while its loop lives, no longer.)"""
        self._due: dict[Connection, float] = {}
        """Per connection, when it is next due: its ping, or the end of the wait for its pong."""
        self._waiting: dict[Connection, asyncio.Future[float] | None] = {}
        """Per connection whose ping is out, the future its pong sets (``None`` while sent)."""
        self._timer: asyncio.Handle | None = None
        self._timer_at = 0.0
        """When the timer was set for."""
        self._granted: set[Connection] = set()
        """Connections whose pong-wait ended in a stall, given a tick more (once a ping)."""
        self._tick = TICK
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop_ref()
        assert loop is not None  # (called from the loop's own callbacks and connections)
        return loop

    def __len__(self) -> int:
        return len(self._due)

    def add(self, connection: Connection) -> None:
        """Ping ``connection`` from now on (its ``ping_interval`` must be set)."""
        interval = connection.ping_interval
        assert interval is not None
        self._tick = min(self._tick, interval / 4)
        self._due[connection] = self._loop.time() + interval
        self._wake_by(self._due[connection])

    def discard(self, connection: Connection) -> None:
        """Stop pinging ``connection`` (it is lost)."""
        self._due.pop(connection, None)
        self._waiting.pop(connection, None)
        self._granted.discard(connection)
        if not self._due and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _wake_by(self, when: float) -> None:
        timer = self._timer
        if timer is not None:
            if self._timer_at <= when:
                return
            timer.cancel()
        # (uvloop's ``call_at`` of a time gone by returns a plain handle: no ``when()``)
        self._timer, self._timer_at = self._loop.call_at(when, self._run), when

    def _run(self) -> None:
        timer, self._timer = self._timer, None
        now = self._loop.time()
        # Woken over a tick late, the loop stalled (a pause of the process or the machine):
        # pongs that came meanwhile wait in the sockets, which the loop reads after its timers.
        stalled = timer is not None and now - self._timer_at > self._tick
        soonest = float("inf")
        for connection, due in list(self._due.items()):
            if due > now:
                soonest = min(soonest, due)
                continue
            if connection in self._waiting:  # no pong in time (or the ping still not out)
                if stalled and connection not in self._granted:
                    self._granted.add(connection)  # a tick more, once: its pong may be read
                    self._due[connection] = now + self._tick
                    soonest = min(soonest, now + self._tick)
                    continue
                self.discard(connection)
                self._spawn(self._fail(connection))
                continue
            timeout = connection.ping_timeout
            self._waiting[connection] = _PINGING
            self._due[connection] = float("inf") if timeout is None else now + timeout
            if timeout is not None:
                soonest = min(soonest, now + timeout)
            self._spawn(self._ping(connection))
        if soonest != float("inf"):
            self._wake_by(max(soonest, now + self._tick))

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ping(self, connection: Connection) -> None:
        try:
            pong = asyncio.ensure_future(await connection.ping())  # (it is a future)
        except ConnectionClosed:
            self.discard(connection)
            return
        except Exception:
            log.exception("keepalive ping failed")
            self.discard(connection)
            return
        if connection not in self._waiting:
            return  # lost, or failed, meanwhile
        self._waiting[connection] = pong
        pong.add_done_callback(lambda answered: self._answered(connection, answered))

    def _answered(self, connection: Connection, pong: asyncio.Future[float]) -> None:
        if self._waiting.get(connection) is not pong:
            return
        del self._waiting[connection]
        self._granted.discard(connection)
        interval = connection.ping_interval
        if pong.cancelled() or pong.exception() is not None or interval is None:
            self.discard(connection)
            return
        self._due[connection] = self._loop.time() + interval - pong.result()
        self._wake_by(self._due[connection])

    async def _fail(self, connection: Connection) -> None:
        with contextlib.suppress(ConnectionClosed):
            async with connection.send_context():
                connection.protocol.fail(CloseCode.INTERNAL_ERROR, "keepalive ping timeout")


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pings] = weakref.WeakKeyDictionary()


def pings_of(loop: asyncio.AbstractEventLoop) -> Pings:
    """The keepalive of ``loop``'s server connections (made at its first)."""
    pings = _BY_LOOP.get(loop)
    if pings is None:
        pings = _BY_LOOP[loop] = Pings(loop)
    return pings
