"""Failover: adopting tables whose host is gone, same-id takeover.

Theory of operation
-------------------
While a table is moving (its lease lapsed, another node is adopting it, or the lease names a
node that no longer has the room) its requests are answered ``moving``: retry shortly. Only a
table that does not exist, or was closed, is ``not_found``. At start-up a node looks for tables
its own earlier process (same node id, older incarnation) still holds and takes them over at
once, instead of leaving them ``moving`` until the old leases lapse.

Orphan scans run every :data:`ORPHAN_SCAN` seconds while a node was seen going (a handover
announcement, a lease lost), looking at every hosted table, and every :data:`FULL_SCAN` seconds
otherwise, never closer than :data:`SCAN_GAP`. That periodic scan looks at this node's share of
the tables only (the i-th of n hash shares, i its place among the n live nodes): together the
nodes still look at every table each FULL_SCAN seconds, and Redis does that work once, not once
per node (every node looking at every table grew with tables times nodes). A table is adopted
by taking its lease and rebuilding it from its log, then hosted here like any other
(``blackdrez.server.node.hosting``, which also hands tables over at shutdown). A stopping node
adopts nothing: it hands its tables over, and hears its own handover like the others; its scan
is cancelled, and checks that it is stopping at each step besides, since a cancellation that
lands during a redis-py command is now and then lost.

Each scan also reads which nodes heartbeat, and as which process (incarnation), and tells
routing (``Routing.nodes_heard``): a node that stopped, or that now heartbeats as another
process (restarted under its id within the TTL), has its viewers at the tables hosted here
counted away.

:class:`Failover` owns the scans' pace (when to look next, and how widely); the scan's own
clock readings come from the node's clock (``blackdrez.server.node.clock``), its periods from
asyncio's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

import msgspec

from blackdrez.server import bus
from blackdrez.server.metrics import Metrics
from blackdrez.server.node.clock import Clock
from blackdrez.server.node.held_log import HeldLog
from blackdrez.server.node.leases import Lease, nap
from blackdrez.server.stores import LeaseLost, Stores, StoreUnavailable
from blackdrez.server.stores.base import Share
from blackdrez.server.table.commands import (
    LogEntry,
    Resume,
    execute,
    rebuild_games,
)
from blackdrez.server.table.room import GameOver, Room
from blackdrez.server.table.snapshots import SnapshotError, resume_games

if TYPE_CHECKING:
    from blackdrez.server.node.fanout import Fanout
    from blackdrez.server.node.hosting import Hosting
    from blackdrez.server.node.routing import Routing

log = logging.getLogger("blackdrez.node")

ORPHAN_SCAN = 1 / 6
"""Share of the TTL between looks for tables whose host died or handed them over (while likely:
0.17 s with the default TTL, so adoption follows a lapse closely)."""

FULL_SCAN = 10.0
"""Seconds between looks for orphans when no node was seen going."""

SCAN_GAP = 1 / 12
"""Share of the TTL at least between two looks for orphans, however often something asks."""


def _share_of(node_id: str, live: set[str]) -> Share | None:
    """This node's share of the tables for a periodic scan: its place among the live nodes
    (all of them, ``None``, if it is not among them)."""
    nodes = sorted(live)
    if node_id not in nodes:
        return None
    return nodes.index(node_id), len(nodes)


class Failover:
    """Adoption of orphaned tables: the scans that look for them, and their adoption."""

    def __init__(
        self,
        store: Stores,
        metrics: Metrics,
        clock: Clock,
        *,
        hosting: Hosting,
        routing: Routing,
        fanout: Fanout,
    ) -> None:
        self.store = store
        self.id = store.node_id
        self.metrics = metrics
        self.clock = clock
        self.hosting = hosting
        """Where an adopted table is hosted, under the lease taken here."""
        self.routing = routing
        """Told the live nodes each scan hears (``Routing.nodes_heard``)."""
        self.fanout = fanout
        """Stops following a table adopted here (its updates come directly from then on)."""
        self._scan_until = 0.0
        """Until when (monotonic) scans look at every table, often (orphans are likely)."""
        self._scan_now = asyncio.Event()

    def scan_soon(self) -> None:
        """Look for tables to adopt now, and often for a while."""
        self._scan_until = self.clock.monotonic() + 2 * self.hosting.leases.ttl
        self._scan_now.set()

    async def adopt_orphans(self) -> None:
        """Adopt tables whose host died or handed them over: rebuild them from their logs.

        Looking for orphans costs a look at every hosted table, so it is done often only
        while it can find some: after a node stopped heartbeating or handed its tables over,
        a table was found moving, or the store came back (until the leases have surely
        lapsed), and otherwise every FULL_SCAN s.
        """
        hosting, ttl = self.hosting, self.hosting.leases.ttl
        heard: dict[str, str | None] = {}  # the last scan's live nodes and their processes
        next_full = self.clock.monotonic()
        while not hosting.stopping:
            await nap(ttl * ORPHAN_SCAN, self._scan_now)
            self._scan_now.clear()
            await self.store.health.wait_up()
            if hosting.stopping:
                return
            now = self.clock.monotonic()
            try:
                beating = await self.store.presence.live_incarnations()
                live = set(beating)
                gone = heard.keys() - live
                if gone:
                    self._scan_until = now + 2 * ttl
                self.routing.nodes_heard(beating, gone, heard)
                heard = beating
                share = None  # a node was seen going, a table moving: look everywhere
                if now >= self._scan_until:
                    if now < next_full:
                        continue
                    share = _share_of(self.id, live)
                if now >= next_full:
                    next_full = now + FULL_SCAN
                held = hosting.leases.held.keys()
                orphans = await self.store.leases.adoptable(share, held=held)
            except StoreUnavailable:
                continue
            await asyncio.gather(*(self._try_adopt(t) for t in orphans if t not in hosting.rooms))
            await asyncio.sleep(ttl * SCAN_GAP)

    def on_handover(self, data: bytes) -> None:
        """Another node is handing its tables over: look for them now."""
        try:
            message = bus.decode(data)
        except msgspec.DecodeError:
            log.warning("undecodable handover message dropped")
            return
        if isinstance(message, bus.Handover):
            self.scan_soon()

    async def _try_adopt(self, table: str) -> None:
        """Take ``table``'s lease and host it, unless this node is stopping: a stopping node
        hands its tables over and must not take them (or others) back. Its scan is cancelled
        then, but a cancellation can be lost (redis-py, on Python 3.11, now and then lets one
        that lands during a command pass unnoticed), so each step checks."""
        hosting, leases = self.hosting, self.hosting.leases
        if hosting.stopping:
            return
        try:
            lease = await leases.acquire(table)  # renewed from now on, while the log is replayed
        except StoreUnavailable:
            return  # the next scan tries again
        if lease is None:
            return
        if hosting.stopping:
            leases.forget(table, lease.token)
            with contextlib.suppress(StoreUnavailable):
                await self.store.leases.release(table, lease.token)
            return
        try:
            await self._adopt(table, lease)
        except (StoreUnavailable, LeaseLost) as error:
            log.debug("adopting %s failed: %r", table, error)
        except Exception:
            log.exception("adopting %s failed", table)
        if table not in hosting.rooms or leases.held.get(table) is not lease:
            if leases.held.get(table) is lease:
                leases.forget(table)
            with contextlib.suppress(StoreUnavailable):
                await self.store.leases.release(table, lease.token)  # let the next scan try again

    async def _adopt(self, table: str, lease: Lease) -> None:
        hosting = self.hosting
        entries, snapshot, room, games = await self._read_table(table)
        if room is None:  # its node died before it was created: nothing to host
            await self.store.logs.retire(table, lease.token, b"", hosting.record_retention)
            return
        if hosting.records is not None and games:
            hosting.records.submit(games)  # those its last host stored already change nothing
        if room.status == "closed":  # closed, but its node died before retiring it
            await hosting.retire(table, lease.token, entries, snapshot)
            return
        async with hosting.lock(table):
            if hosting.stopping:  # stopped while the log was read: released by the caller
                return
            hosting.host(room, entries, lease, snapshot)
            resume = LogEntry(now=self.clock.time(), command=Resume())
            execute(room, resume)
            resume.seq = room.seq  # after the presence events the resume made
            broadcast, failure = await hosting.append_entry(room, resume)
            if failure is not None:
                hosting.unhost(table)  # never hosted without its resume: adopted again later
                return
            await self.fanout.stop_following(table)  # local now: fan out directly
            log.info("adopted table %s at event %d", table, room.seq)
            self.metrics.tables_adopted.inc()
            hosting.publish_change(room, broadcast)
            if games:
                hosting.show_ratings(room, after_games=True)  # its last host may not have

    async def _read_table(
        self, table: str
    ) -> tuple[HeldLog | list[bytes], tuple[int, bytes] | None, Room | None, list[GameOver]]:
        """A table's log, snapshot and room, for adoption, with the games that ended in what was
        replayed (submitted to the records again). With a snapshot that fits, only the log from
        the snapshot's entry on is read: the entries before it are :data:`ELIDED` (read again
        only to retire the table), so the time does not grow with the history; a game that ended
        before the snapshot was handed to the records writer by the host that logged its end
        (which retries until it is stored), and is lost to the records only if that host died
        before writing it. Without a snapshot, the whole log is read and replayed. No log: no
        room."""
        snapshot = await self.store.logs.read_snapshot(table)
        if snapshot is not None:
            tail = await self.store.logs.read(table, snapshot[0] - 1, held=True)
            try:
                room, games = resume_games(snapshot, tail)
            except SnapshotError as error:
                log.warning("snapshot of %s not used, whole log replayed: %s", table, error)
            else:
                return HeldLog(tail, snapshot[0] - 1), snapshot, room, games
        entries = await self.store.logs.read(table, held=True)
        if not entries:
            return entries, None, None, []
        room, games = rebuild_games(entries)
        return entries, None, room, games
