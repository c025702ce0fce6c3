"""Leases: the tables' leases this node holds, how long each can be trusted, their renewals.

Theory of operation
-------------------
A room is hosted while this node holds its lease (see "Hosting and fencing" in
``blackdrez.server.stores.base``). Fencing on the node's side: each lease held has its token and
a local *validity deadline* (the monotonic time when the last successful acquisition or renewal
was sent, plus the TTL, minus a margin): Redis cannot have let the lease lapse before then.
Before serving any request from a room, and before running its timer, hosting asks
:meth:`Leases.confirmed`; past the deadline (the process was paused, or renewals failed) the
lease is renewed first, fenced, and if it is gone hosting is told (``lost``) and drops the room
at once. A dropped room is never served from memory again: the table can only come back by
adoption, rebuilt from its log. So a node resumed after a pause never answers from a stale copy,
and its writes are refused by the store anyway (token and log position).

Leases are renewed :data:`RENEWALS` times per TTL, in a thread with a store connection of its own
when the server gives one (a busy event loop then keeps its tables), else in the event loop
(the in-memory store). A renewal that finds a lease gone tells hosting, as above. The renewal
thread stops renewing when the event loop has not answered it for :data:`LOOP_PATIENCE` seconds:
a node whose loop is stuck lets its tables go.

:class:`Leases` owns the leases held (``held``); hosting and failover add and drop them through
its methods. Its times come from the node's clock (``blackdrez.server.node.clock``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from blackdrez.server.node.clock import Clock
from blackdrez.server.node.seams import KeepRunning
from blackdrez.server.stores import Stores, StoreUnavailable
from blackdrez.server.stores.base import PartlyRenewed

log = logging.getLogger("blackdrez.node")

RENEWALS = 4
"""Lease renewals (and heartbeats) per TTL. A node that stalls (a long garbage collection, a VM
pause) keeps its leases if it resumes within ``TTL * (1 - 1 / RENEWALS)`` minus a Redis round
trip: 0.75 s with the default TTL, so a 300 ms stall leaves 0.45 s to spare."""

LOOP_PATIENCE = 10.0
"""Seconds the renewal thread keeps renewing while the event loop takes none of its results:
past that the loop is stuck, and the node lets its tables go."""

LEASE_MARGIN = 0.1
"""Share of the TTL a host does not count on: its clock and Redis's may run at slightly
different rates, so it stops trusting a lease a little before Redis could let it lapse."""


@dataclass
class Lease:
    """A lease this node holds: its fencing token, and until when (monotonic time) the node
    may trust it without renewing it first."""

    token: int
    valid_until: float
    quiet: bool = False
    """No other node heard this table's last announcement and none has asked for the table
    since: its updates are not announced ("Quiet tables" in ``blackdrez.server.node.hosting``)."""


async def nap(seconds: float, wake: asyncio.Event) -> None:
    """Sleep ``seconds``, or less if ``wake`` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await wake.wait()


class Leases:
    """The leases this node holds (``held``), their validity and their renewals."""

    def __init__(
        self,
        store: Stores,
        clock: Clock,
        ttl: float,
        *,
        lost: Callable[[str], None],
        stopping: Callable[[], bool],
        renewal_store: Callable[..., Stores] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.ttl = ttl
        """Seconds a lease lasts unless renewed."""
        self.held: dict[str, Lease] = {}
        """Per hosted table (and table being adopted or retired), the lease this node holds."""
        self._lost = lost
        """Told each table whose lease a renewal found gone (hosting drops its room)."""
        self._stopping = stopping
        self._open_renewal_store = renewal_store
        """Opens a second bundle of stores on the same Redis, holding this process's leases
        (given its ``incarnation``), for the renewal thread (``None``: leases are renewed in the
        event loop)."""
        self._renew_now = asyncio.Event()
        self._renew_wake = threading.Event()
        self._stop_renewing = threading.Event()
        self._loop_seen = clock.monotonic()
        """When the event loop last ran the renewal thread's probe (:meth:`_loop_answered`)."""
        self._renewer: threading.Thread | None = None

    def _valid_until(self, sent: float) -> float:
        """Until when a lease acquired or renewed by a call sent at ``sent`` can be trusted."""
        return sent + self.ttl * (1 - LEASE_MARGIN)

    async def acquire(self, table: str) -> Lease | None:
        """Take ``table``'s lease and hold it (renewed from now on), or ``None`` if another
        holds it. Raises :class:`StoreUnavailable`."""
        sent = self.clock.monotonic()
        token = await self.store.leases.acquire(table, self.ttl)
        if token is None:
            return None
        lease = self.held[table] = Lease(token, self._valid_until(sent))
        return lease

    def hold(self, table: str, lease: Lease) -> None:
        """Hold ``lease`` for ``table`` (again: a room rebuilt or adopted under it)."""
        self.held[table] = lease

    def forget(self, table: str, token: int | None = None) -> Lease | None:
        """Stop holding ``table``'s lease (only if its token is ``token``, when given)."""
        lease = self.held.get(table)
        if lease is None or (token is not None and lease.token != token):
            return None
        del self.held[table]
        return lease

    def fresh(self, table: str) -> bool:
        """Whether this node holds ``table``'s lease and its validity has not run out: then
        :meth:`confirmed` is true without a renewal (asked first, without a coroutine, by every
        command)."""
        lease = self.held.get(table)
        return lease is not None and self.clock.monotonic() < lease.valid_until

    async def confirmed(self, table: str) -> bool:
        """Whether this node may still serve ``table`` from memory: its lease's validity has not
        run out, or a fenced renewal says the lease is still this node's. A lost lease is
        reported (``lost``). Raises :class:`StoreUnavailable` if the renewal cannot be made."""
        lease = self.held.get(table)
        if lease is None:
            return False
        if self.clock.monotonic() < lease.valid_until:
            return True
        sent = self.clock.monotonic()
        lost = await self.store.leases.renew({table: lease.token}, self.ttl)
        if self.held.get(table) is not lease:
            return False
        if table in lost:
            self._lost(table)
            return False
        lease.valid_until = self._valid_until(sent)
        return True

    def start(
        self,
        loop: asyncio.AbstractEventLoop,
        keep_running: KeepRunning | None = None,
    ) -> asyncio.Task[None] | None:
        """Start renewing: in a thread when a renewal store was given, else in the event loop
        (the task returned, for the node to cancel at its stop; run by ``keep_running``, the
        node's supervision of its loops, if given)."""
        if self._open_renewal_store is None:
            if keep_running is None:
                return loop.create_task(self._keep())
            return loop.create_task(keep_running("lease renewal", self._keep))
        self._loop_seen = self.clock.monotonic()
        self._renewer = threading.Thread(
            target=self._renew_off_loop, args=(loop,), name="lease-renewal", daemon=True
        )
        self._renewer.start()
        return None

    async def stop(self) -> None:
        """Stop the renewal thread, if there is one (the loop's task is the node's to cancel)."""
        if self._renewer is not None:
            self._stop_renewing.set()
            self._renew_wake.set()
            await asyncio.to_thread(self._renewer.join, 5.0)

    def renew_now(self) -> None:
        """Renew every lease now, not at the next period (the store is back: each may have
        lapsed meanwhile)."""
        self._renew_now.set()
        self._renew_wake.set()

    async def _keep(self) -> None:
        """Renew this node's leases (fenced) in the event loop: without a renewal store (see
        :meth:`_renew_off_loop`), as with the in-memory store."""
        while not self._stopping():
            await nap(self.ttl / RENEWALS, self._renew_now)
            self._renew_now.clear()
            await self.store.health.wait_up()
            held = {table: lease.token for table, lease in self.held.items()}
            sent = self.clock.monotonic()
            try:
                lost = await self.store.leases.renew(held, self.ttl)
            except PartlyRenewed as part:
                self._renewed({t: held[t] for t in part.renewed}, part.lost, sent)
                continue
            except StoreUnavailable:
                continue
            self._renewed(held, lost, sent)

    def _loop_answered(self) -> None:
        """The event loop ran a callback the renewal thread queued: it is not stuck."""
        self._loop_seen = self.clock.monotonic()

    def _renewed(self, held: dict[str, int], lost: set[str], sent: float) -> None:
        """A renewal sent at ``sent`` (monotonic) of the ``held`` leases came back: extend
        their validity, report the tables whose lease is gone."""
        for table, token in held.items():
            lease = self.held.get(table)
            if lease is None or lease.token != token:
                continue  # dropped or adopted again meanwhile
            if table in lost:
                self._lost(table)
            else:
                lease.valid_until = max(lease.valid_until, self._valid_until(sent))

    def _renew_off_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The renewal thread: renew every lease RENEWALS times per TTL on a store connection of
        its own, so that a busy event loop (a burst of reconnections after another node died,
        a starved machine) does not lose its tables; results go back to the loop.

        It stops renewing when the loop has not run its probe (:meth:`_loop_answered`, queued
        at every period whether or not a renewal was sent or answered) for LOOP_PATIENCE s: a
        node whose loop is stuck must let its tables go, and renews again as soon as the loop
        runs the probe. A stall of the whole process (SIGSTOP, a garbage collection, a VM
        pause) stops this thread too: that is what the TTL covers. The probe never depends on
        the store: after a Redis outage of any length the loop is as alive as before.
        """
        assert self._open_renewal_store is not None
        # the same holder as the node's own store
        store = self._open_renewal_store(incarnation=self.store.incarnation)

        async def renew() -> None:
            try:
                with contextlib.suppress(StoreUnavailable):
                    await store.ping()  # connect first (a cluster client reads its slot map)
                while not self._stop_renewing.is_set():
                    with contextlib.suppress(RuntimeError):  # the loop closed: stopping
                        loop.call_soon_threadsafe(self._loop_answered)
                    if self.clock.monotonic() - self._loop_seen < LOOP_PATIENCE:
                        held = {t: lease.token for t, lease in dict(self.held).items()}
                        sent = self.clock.monotonic()
                        try:
                            with contextlib.suppress(StoreUnavailable, RuntimeError):
                                try:
                                    lost = await store.leases.renew(held, self.ttl)
                                except PartlyRenewed as part:
                                    held = {t: held[t] for t in part.renewed}
                                    lost = part.lost
                                loop.call_soon_threadsafe(self._renewed, held, lost, sent)
                        except Exception:  # a bug: this period's renewal only, not the thread
                            log.exception("renewing leases failed: the next period tries again")
                    self._renew_wake.wait(self.ttl / RENEWALS)  # this loop has no other work
                    self._renew_wake.clear()
            finally:
                await store.close()

        asyncio.run(renew())
