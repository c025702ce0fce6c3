"""Fan-out: watchers of tables, updates to clients, following tables hosted elsewhere.

Theory of operation
-------------------
A request's answer is an :class:`Answer`: the messages for the requester, and whether the requester
now watches the table (with which seat) or stops watching it. Updates go to every watcher in
the watcher's viewer class (the spectator's copy unless the seat's differs), encoded once per class
and encoding; each watcher remembers the last event number it was sent, so no update is sent twice
and a watcher that joins late starts right after its snapshot.

A node with viewers of a table hosted elsewhere follows it on the table's channel, keeping its
last :data:`RECENT_UPDATES` updates; after the bus was lost it catches every viewer up.

:class:`Fanout` owns the watchers of this node and the tables it follows. Hosting hands it the
updates of the tables hosted here (:meth:`Fanout.fan_out`); the table requests it sends itself
(a viewer's resync, a player still connected here) go through the route it is given
(``Routing.route``), and the answers through the node's delivery (``Node._deliver_answer``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import msgspec

from blackdrez.protocol import v1
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.server import bus
from blackdrez.server.connection import Connection, Outbox, Watch, send_update
from blackdrez.server.metrics import Metrics
from blackdrez.server.node.seams import STORE_RETRY, Route, Spawn
from blackdrez.server.stores import Stores, StoreUnavailable
from blackdrez.server.stores.base import table_channel
from blackdrez.server.table.commands import Answer, ConnectionChanged, rebuild
from blackdrez.server.table.records import decode_table_record, record_log
from blackdrez.server.table.room import Broadcast, Room
from blackdrez.server.table.snapshots import SnapshotError, resume

log = logging.getLogger("blackdrez.node")

RECENT_UPDATES = 64
CATCH_UP_PATIENCE = 30.0
"""Seconds a viewer's catch-up keeps asking the table's host (which may be cut off, or the table
not yet adopted) before the viewer's connection is closed for its client to resync."""


class Fanout:
    """Watchers, updates to them, and following tables hosted elsewhere."""

    def __init__(
        self,
        store: Stores,
        metrics: Metrics,
        *,
        spawn: Spawn,
        route: Route,
        deliver_answer: Callable[[Connection, Answer], Awaitable[None]],
        outbox: Outbox,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.outbox = outbox
        """Where this node's connections wait for their frames to be written, once a turn."""
        self._spawn = spawn
        self._route = route
        """Sends a table request here or to its host (``Routing.route``): a viewer's resync,
        a player still connected here."""
        self._deliver_answer = deliver_answer
        """Sends a client an answer and starts its watch (``Node._deliver_answer``)."""
        self.watchers: dict[str, dict[Connection, Watch]] = {}
        """Per table, the connections here that watch it, and where each one is."""
        self.remote_tables: dict[str, collections.deque[Broadcast]] = {}
        """Tables hosted elsewhere that this node follows, with their last few updates."""

    def start_watch(self, client: Connection, table: str, seat: int | None, seq: int) -> Watch:
        """Make ``client`` a watcher of ``table`` from event ``seq`` on (its answer's)."""
        watch = Watch(seat, seq)
        self.watchers.setdefault(table, {})[client] = client.tables[table] = watch
        client.left_to_me.pop(table, None)  # its own watch answers for the table from now on
        return watch

    async def catch_up_watch(self, client: Connection, table: str, watch: Watch) -> None:
        """After a new watcher's answer: follow the table if it is hosted elsewhere, and send
        the watcher the updates this node already holds past its answer's event (they may have
        come on the table's channel before the answer came on this node's). For a table not
        hosted here."""
        if client.tables.get(table) is not watch:
            return
        await self.follow(table)
        # The table may have been adopted here meanwhile: then its updates come directly.
        for broadcast in list(self.remote_tables.get(table, ())):
            send_update([(client, watch)], broadcast, {})

    async def unwatch(self, client: Connection, table: str) -> None:
        self.stop_watch(client, table)
        await self.unfollow_if_unwatched(table)

    def stop_watch(self, client: Connection, table: str) -> None:
        client.tables.pop(table, None)
        watchers = self.watchers.get(table)
        if watchers is not None:
            watchers.pop(client, None)
            if not watchers:
                del self.watchers[table]

    async def follow(self, table: str) -> None:
        """Subscribe to a remote table's updates (keeping the last few for late watchers)."""
        if table not in self.remote_tables:
            self.remote_tables[table] = collections.deque(maxlen=RECENT_UPDATES)
            try:
                await self.store.bus.subscribe(table_channel(table), self._on_table_message)
            except BaseException:
                self.remote_tables.pop(table, None)  # not followed: the next try subscribes
                raise

    async def follow_lost(self, table: str) -> None:
        """Keep the viewers here of a table this node lost: follow it where it goes, and resync
        each of them, since what happened to it meanwhile (an adoption elsewhere, commands its
        new host took while this node was paused) was announced before this node listened.
        The bus may be down too (a network cut takes both): then each viewer's resync follows
        the table once it can (``Routing.route`` follows before it forwards)."""
        with contextlib.suppress(StoreUnavailable):
            await self.follow(table)
        await asyncio.gather(
            *(self._catch_up_viewer(client, table) for client in list(self.watchers.get(table, {})))
        )

    async def stop_following(self, table: str) -> None:
        """``table`` is hosted here now (adopted): its updates come directly, not on its
        channel."""
        if table in self.remote_tables:
            del self.remote_tables[table]
            with contextlib.suppress(StoreUnavailable):
                await self.store.bus.unsubscribe(table_channel(table), self._on_table_message)

    async def unfollow_if_unwatched(self, table: str) -> None:
        if table in self.remote_tables and not self.watchers.get(table):
            del self.remote_tables[table]
            with contextlib.suppress(StoreUnavailable):
                await self.store.bus.unsubscribe(table_channel(table), self._on_table_message)

    def _on_table_message(self, data: bytes) -> None:
        try:
            update = bus.decode(data)
        except msgspec.DecodeError:
            log.warning("undecodable table update dropped")
            return
        if not isinstance(update, bus.TableUpdate):
            log.warning("unexpected %s on a table's channel", type(update).__name__)
            return
        broadcast = update.broadcast
        recent = self.remote_tables.get(broadcast.table)
        if recent is not None:
            recent.append(broadcast)
            self.fan_out(broadcast, update.away)

    async def catch_up(self) -> None:
        """After a bus outage: what was published meanwhile is lost, so fetch what each local
        viewer of a remote table missed (the lobby's watchers: ``Lobby.catch_up``)."""
        log.warning("bus back after an outage: catching viewers up")
        viewers = [
            (client, table)
            for table in list(self.remote_tables)
            for client in list(self.watchers.get(table, {}))
        ]
        outcomes = await asyncio.gather(
            *(self._catch_up_viewer(client, table) for client, table in viewers),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(
                outcome, StoreUnavailable | TimeoutError | asyncio.CancelledError
            ):
                log.error("a viewer's catch-up failed", exc_info=outcome)
        counted = collections.Counter(
            outcome if isinstance(outcome, str) else type(outcome).__name__ for outcome in outcomes
        )
        log.info(
            "bus back: %d viewers of %d tables followed here, caught up: %s",
            len(viewers),
            len({table for _, table in viewers}),
            ", ".join(f"{outcome} {n}" for outcome, n in sorted(counted.items())) or "none",
        )

    async def _catch_up_viewer(self, client: Connection, table: str) -> str:
        """Resync one viewer of a remote table, retrying while its host is not reachable yet
        (the host's own bus may come back later than this node's) or the table is moving.
        A viewer the host no longer counts (their seat was freed, or the table closed, while
        this node could not hear it) is told from the table's log what they missed. A viewer
        still not caught up after :data:`CATCH_UP_PATIENCE` is closed (``OUT_OF_STEP``): its
        client reconnects, wherever it can, and resyncs."""
        async for _ in _attempts(CATCH_UP_PATIENCE):
            watch = client.tables.get(table)
            if watch is None or client.closing:
                return "gone"
            message = v1.Resync(table=table, since=watch.seq)
            try:
                answer = await self._route(client.player, client.name, table, message)
                if _refused_with(
                    answer, ErrorCode.NOT_SEATED, ErrorCode.NOT_FOUND
                ) and await self._tell_what_was_missed(client, table, watch.seq):
                    return "told what was missed"
            except (StoreUnavailable, TimeoutError):
                answer = None
            if answer is not None and not _refused_with(
                answer, ErrorCode.UNAVAILABLE, ErrorCode.MOVING
            ):
                await self._deliver_answer(client, answer)
                return "resynced"
        log.warning("viewer of %s not caught up: closed to reconnect and resync", table)
        client.close(CloseCode.OUT_OF_STEP, f"lost track of {table}: reconnect and resync")
        return "closed"

    async def _tell_what_was_missed(self, client: Connection, table: str, since: int) -> bool:
        """Send a viewer the host no longer answers for what happened at ``table`` after
        event ``since``, read from its log (or its record, once retired), as a spectator sees
        it: the freeing of their seat, the game's end, the table's closing. Then the watch
        ends, as when such an update reaches a watcher live. ``False``: no log to tell from."""
        room = await self._room_as_logged(table)
        if room is None:
            return False
        if client.tables.get(table) is None or client.closing:
            return True  # gone meanwhile
        events = room.log.since(since)
        if events is None:
            client.send(room.snapshot(None))
        elif events:
            client.send(
                v1.Update(
                    table=table,
                    seq=room.seq,
                    events=events,
                    view=room.view(None),
                    legal=[],
                    deadline=room.timers.turn_deadline,
                    info=room.info(),
                )
            )
        await self.unwatch(client, table)
        return True

    async def _room_as_logged(self, table: str) -> Room | None:
        """The table as its log leaves it: from its latest snapshot and the entries after it
        (what an adopting node reads), else its whole log, or its record's once retired (from
        the snapshot a long table's record keeps). ``None``: no log."""
        logs = self.store.logs
        snapshot = await logs.read_snapshot(table)
        if snapshot is not None:
            tail = await logs.read(table, snapshot[0] - 1)
            with contextlib.suppress(SnapshotError):  # (retired meanwhile: an empty tail)
                return resume(snapshot, tail)
        entries = await logs.read(table)
        if not entries:
            data = await logs.game_record(table)
            if not data:
                return None
            record = decode_table_record(data)
            entries = record_log(record)
            if record.snapshot is not None:  # a long table's: from its latest snapshot on
                with contextlib.suppress(SnapshotError):
                    return resume(record.snapshot, entries[record.snapshot[0] - 1 :])
        return rebuild(entries) if entries else None

    def correct_presence(self, table: str, away: list[int]) -> None:
        """A table's host counts a player away (its new host counts everyone away until told
        otherwise, and a player's old connection may close after they came back elsewhere):
        tell it about the players still connected here."""
        if not away:
            return
        for client, watch in list(self.watchers.get(table, {}).items()):
            if watch.seat in away and not client.closing:
                self._spawn(self._still_connected(client, table))

    async def _still_connected(self, client: Connection, table: str) -> None:
        """Tell ``table``'s host that ``client`` is connected; again, on the store's retry
        backoff, while the host cannot be reached or the table is moving (a network cut), for
        as long as the client watches the table and :data:`CATCH_UP_PATIENCE` at most: the
        host would count the player away until its grace ends, and hold the game for them."""
        message = ConnectionChanged(table=table, connected=True)
        async for _ in _attempts(CATCH_UP_PATIENCE):
            if client.tables.get(table) is None or client.closing:
                return
            with contextlib.suppress(StoreUnavailable, TimeoutError):
                answer = await self._route(client.player, client.name, table, message)
                if not _refused_with(answer, ErrorCode.UNAVAILABLE, ErrorCode.MOVING):
                    return

    def fan_out(self, broadcast: Broadcast, away: list[int] | None = None) -> None:
        """Send one update to every local watcher of its table, encoded once per class; then,
        if it marks seats away (``away``, else read from its events), tell the host about the
        players still connected here (:meth:`correct_presence`)."""
        watchers = self.watchers.get(broadcast.table)
        if not watchers:
            return
        sent = send_update(list(watchers.items()), broadcast, {})
        self.metrics.count_out(sent)
        closed, freed, removed, marked = _endings(broadcast)
        if away is None:
            away = marked
        if away:
            self.correct_presence(broadcast.table, away)
        if closed or freed or removed:  # a closed table, a seat whose player was leaving, a
            for client, watch in list(watchers.items()):  # spectator sent away: they see it
                if (
                    closed
                    or watch.seat in freed
                    or (watch.seat is None and client.player in removed)
                ):
                    self.stop_watch(client, broadcast.table)  # and watch no more
            self._spawn(self.unfollow_if_unwatched(broadcast.table))


async def _attempts(patience: float) -> AsyncIterator[None]:
    """Tries of something that waits for the store or another node: the first at once, the
    next ones on the store's retry backoff, until ``patience`` seconds have passed."""
    loop = asyncio.get_running_loop()
    delays = STORE_RETRY.delays()
    give_up = loop.time() + patience
    while True:
        yield
        if loop.time() >= give_up:
            return
        await asyncio.sleep(next(delays))


def _refused_with(answer: Answer, *codes: ErrorCode) -> bool:
    """Whether ``answer`` is a refusal with one of ``codes``."""
    return any(isinstance(reply, v1.Error) and reply.code in codes for reply in answer.replies)


_ENDING_EVENTS: dict[type, int] = {
    v1.TableClosed: 0,
    v1.SeatFreed: 1,
    v1.SpectatorRemoved: 2,
    v1.PresenceChanged: 3,
}
"""The events that end someone's watching of a table, or mark a seat away (see
:func:`_endings`)."""


def _endings(broadcast: Broadcast) -> tuple[bool, set[int], set[str], list[int]]:
    """Whether an update closes its table, the seats it frees, the spectators it sends away and
    the seats it marks away (as :func:`~blackdrez.server.node.hosting.away_seats`). Its events
    are structs on the host; off the bus they are dicts, whose away seats come with them."""
    closed, freed, removed, away = False, set(), set(), []
    endings = _ENDING_EVENTS
    for numbered in broadcast.events:
        event = numbered.event
        kind = type(event)
        if kind is dict:
            named = event.get("type")
            closed |= named == "table_closed"
            if named == "seat_freed":
                freed.add(event["seat"])
            elif named == "spectator_removed":
                removed.add(event["player"])
            continue
        ending = endings.get(kind)
        if ending is None:  # (nearly every event: one look-up)
            continue
        if ending == 0:
            closed = True
        elif ending == 1:
            freed.add(event.seat)
        elif ending == 2:
            removed.add(event.player)
        elif not event.connected:
            away.append(event.seat)
    return closed, freed, removed, away
