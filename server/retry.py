"""The one retry policy for everything that talks to the store, and the store's health.

Theory of operation
-------------------
A failed store call is never retried in a tight loop. Whoever must try again waits on
:class:`Backoff` (:mod:`blackdrez.protocol.retry`, shared with the clients): capped exponential
delays with
jitter (so many waiters do not retry in step).

:class:`StoreHealth` is a circuit breaker shared by a whole node. The store reports every call's
outcome: the first failure marks the store *down* (one warning), and from then on a single probe
task pings it on the backoff; the first success (the probe's or any other call's) marks it *up*
again (one warning, with how long it was down and how many calls failed meanwhile). While it is
down, the node's periodic work and the tables' timers do not try on their own: they wait for
:meth:`StoreHealth.wait_up`. The probe's delays are capped at :data:`PROBE_CAP` so that a store
that comes back is noticed within that time, and every waiting table resumes at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from blackdrez.protocol.retry import Backoff

__all__ = ["PROBE_CAP", "PROBE_FIRST", "Backoff", "StoreHealth"]

log = logging.getLogger("blackdrez.store")

PROBE_FIRST = 0.05
PROBE_CAP = 0.4
"""Seconds between probes of a store that is down, at most (how soon a return is noticed)."""


class StoreHealth:
    """Whether the store answers now (see the module docstring)."""

    def __init__(self, probe: Callable[[], Awaitable[None]], name: str = "store") -> None:
        self._probe_call = probe
        self._name = name
        self._up = asyncio.Event()
        self._up.set()
        self.up = True
        """False from a failed call until the store answers again (set with ``_up``, which
        :meth:`wait_up` waits for: a plain attribute, read by every command)."""
        self._down_since = 0.0
        self._failures = 0
        self._prober: asyncio.Task[None] | None = None
        self.listeners: list[Callable[[], None]] = []
        """Called (in the event loop) each time the store comes back up."""
        self.outages = 0
        """How many times the store went down (for metrics and tests)."""

    def down_for(self) -> float:
        """Seconds since the store went down (0 while it is up)."""
        return 0.0 if self.up else time.monotonic() - self._down_since

    async def wait_up(self) -> None:
        """Return once the store is up (at once if it is)."""
        await self._up.wait()

    def failed(self, error: BaseException) -> None:
        """A call failed because the store could not be reached."""
        self._failures += 1
        if not self.up:
            return
        self._up.clear()
        self.up = False
        self.outages += 1
        self._down_since = time.monotonic()
        log.warning("%s unavailable (%s): waiting for it, probing it", self._name, error)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._prober is None or self._prober.done():
            self._prober = loop.create_task(self._probe())

    def succeeded(self) -> None:
        """A call went through: the store is up."""
        if self.up:
            return
        self._up.set()
        self.up = True
        log.warning(
            "%s back after %.2f s (%d failed calls meanwhile, probes included)",
            self._name,
            time.monotonic() - self._down_since,
            self._failures,
        )
        self._failures = 0
        loop = asyncio.get_running_loop()
        for listener in list(self.listeners):
            loop.call_soon(listener)

    async def _probe(self) -> None:
        for delay in Backoff(PROBE_FIRST, PROBE_CAP).delays():
            if self.up:
                return
            await asyncio.sleep(delay)
            try:
                await self._probe_call()  # reports its own outcome
            except Exception as error:  # any failure just means "not yet"
                log.debug("probe of %s failed: %s", self._name, error)

    def close(self) -> None:
        """Stop probing (the store is closing)."""
        if self._prober is not None:
            self._prober.cancel()
