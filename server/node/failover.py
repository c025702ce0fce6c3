"""Failover: adopting tables whose host is gone, handing tables over, same-id takeover.

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
by taking its lease and rebuilding it from its log. A
stopping node adopts nothing: it hands its tables over, and hears its own handover like the
others; its scan is cancelled, and checks that it is stopping at each step besides, since a
cancellation that lands during a redis-py command is now and then lost.

Each scan also reads which nodes heartbeat, and as which process (incarnation): a node that
stopped, or that now heartbeats as another process (restarted under its id within the TTL), has
its viewers at the tables hosted here counted away (``Routing._viewers_gone``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import msgspec

from blackdrez.server import bus
from blackdrez.server.node.hosting import ELIDED, Lease, nap
from blackdrez.server.stores import LeaseLost, StoreUnavailable
from blackdrez.server.stores.base import Share, table_channel
from blackdrez.server.table.commands import (
    LogEntry,
    Resume,
    execute,
    rebuild_games,
)
from blackdrez.server.table.room import GameOver, Room
from blackdrez.server.table.snapshots import SnapshotError, resume_games

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
    """Adoption of orphaned tables, handover at shutdown."""

    async def _handover(self, room: Room) -> None:
        """Give a room up to the other nodes (graceful shutdown with a shared store)."""
        async with self._lock(room.id):
            lease = self._leases.get(room.id)
            self._unhost(room.id)
            self.metrics.tables_handed_over.inc()
            if lease is not None:
                with contextlib.suppress(StoreUnavailable):
                    await self.store.release_lease(room.id, lease.token)

    def _scan_soon(self) -> None:
        """Look for tables to adopt now, and often for a while."""
        self._scan_until = asyncio.get_running_loop().time() + 2 * self.lease_ttl
        self._scan_now.set()

    async def _adopt_orphans(self) -> None:
        """Adopt tables whose host died or handed them over: rebuild them from their logs.

        Looking for orphans costs a look at every hosted table, so it is done often only
        while it can find some: after a node stopped heartbeating or handed its tables over,
        a table was found moving, or the store came back (until the leases have surely
        lapsed), and otherwise every FULL_SCAN s.
        """
        loop = asyncio.get_running_loop()
        heard: dict[str, str | None] = {}  # the last scan's live nodes and their processes
        next_full = loop.time()
        while not self.stopping:
            await nap(self.lease_ttl * ORPHAN_SCAN, self._scan_now)
            self._scan_now.clear()
            await self.store.health.wait_up()
            if self.stopping:
                return
            now = loop.time()
            try:
                beating = await self.store.live_incarnations()
                live = set(beating)
                gone = heard.keys() - live
                if gone:
                    self._scan_until = now + 2 * self.lease_ttl
                    self._give_up_on(gone)
                if beating != heard:  # a node went, came, or restarted under its id
                    self._viewers_gone(gone, beating)
                self._silent = (self._silent | gone) - live
                heard, self._live = beating, live
                share = None  # a node was seen going, a table moving: look everywhere
                if now >= self._scan_until:
                    if now < next_full:
                        continue
                    share = _share_of(self.id, live)
                if now >= next_full:
                    next_full = now + FULL_SCAN
                orphans = await self.store.adoptable_tables(share, held=self._leases.keys())
            except StoreUnavailable:
                continue
            await asyncio.gather(*(self._try_adopt(t) for t in orphans if t not in self.rooms))
            await asyncio.sleep(self.lease_ttl * SCAN_GAP)

    def _on_handover(self, data: bytes) -> None:
        """Another node is handing its tables over: look for them now."""
        try:
            message = bus.decode(data)
        except msgspec.DecodeError:
            log.warning("undecodable handover message dropped")
            return
        if isinstance(message, bus.Handover):
            self._scan_soon()

    async def _try_adopt(self, table: str) -> None:
        """Take ``table``'s lease and host it, unless this node is stopping: a stopping node
        hands its tables over and must not take them (or others) back. Its scan is cancelled
        then, but a cancellation can be lost (redis-py, on Python 3.11, now and then lets one
        that lands during a command pass unnoticed), so each step checks."""
        if self.stopping:
            return
        sent = time.monotonic()
        try:
            token = await self.store.acquire_lease(table, self.lease_ttl)
        except StoreUnavailable:
            return  # the next scan tries again
        if token is None:
            return
        if self.stopping:
            with contextlib.suppress(StoreUnavailable):
                await self.store.release_lease(table, token)
            return
        lease = Lease(token, self._valid_until(sent))
        self._leases[table] = lease  # renewed from now on, while the log is read and replayed
        try:
            await self._adopt(table, lease)
        except (StoreUnavailable, LeaseLost) as error:
            log.debug("adopting %s failed: %r", table, error)
        except Exception:
            log.exception("adopting %s failed", table)
        if table not in self.rooms or self._leases.get(table) is not lease:
            if self._leases.get(table) is lease:
                del self._leases[table]
            with contextlib.suppress(StoreUnavailable):
                await self.store.release_lease(table, token)  # let the next scan try again

    async def _adopt(self, table: str, lease: Lease) -> None:
        entries, snapshot, room, games = await self._read_table(table)
        if room is None:  # its node died before it was created: nothing to host
            await self.store.retire_table(table, lease.token, b"", self.record_retention)
            return
        if self.records is not None and games:
            self.records.submit(games)  # those its last host stored already change nothing
        if room.status == "closed":  # closed, but its node died before retiring it
            await self._retire(table, lease.token, entries)
            return
        async with self._lock(table):
            if self.stopping:  # stopped while the log was read: released by the caller
                return
            self._host(room, entries, lease)
            if snapshot is not None:
                self._snapshots[table] = snapshot
            resume = LogEntry(now=self.clock(), command=Resume())
            execute(room, resume)
            resume.seq = room.seq  # after the presence events the resume made
            broadcast, failure = await self._append_entry(room, resume)
            if failure is not None:
                self._unhost(table)  # never hosted without its resume: adopted again later
                return
            if table in self._remote_tables:
                del self._remote_tables[table]  # local now: fan out directly
                with contextlib.suppress(StoreUnavailable):
                    await self.store.unsubscribe(table_channel(table), self._on_table_message)
            log.info("adopted table %s at event %d", table, room.seq)
            self.metrics.tables_adopted.inc()
            self._publish_change(room, broadcast)
            if games:
                self._show_ratings(room, after_games=True)  # its last host may not have

    async def _read_table(
        self, table: str
    ) -> tuple[list[bytes], tuple[int, bytes] | None, Room | None, list[GameOver]]:
        """A table's log, snapshot and room, for adoption, with the games that ended in what was
        replayed (submitted to the records again). With a snapshot that fits, only the log from
        the snapshot's entry on is read: the entries before it are :data:`ELIDED` (read again
        only to retire the table), so the time does not grow with the history; a game that ended
        before the snapshot was handed to the records writer by the host that logged its end
        (which retries until it is stored), and is lost to the records only if that host died
        before writing it. Without a snapshot, the whole log is read and replayed. No log: no
        room."""
        snapshot = await self.store.read_snapshot(table)
        if snapshot is not None:
            tail = await self.store.read_log(table, after=snapshot[0] - 1)
            try:
                room, games = resume_games(snapshot, tail)
            except SnapshotError as error:
                log.warning("snapshot of %s not used, whole log replayed: %s", table, error)
            else:
                return [ELIDED] * (snapshot[0] - 1) + tail, snapshot, room, games
        entries = await self.store.read_log(table)
        if not entries:
            return entries, None, None, []
        room, games = rebuild_games(entries)
        return entries, None, room, games
