"""A server node: hosts rooms, routes requests to the node hosting a table, fans updates out.

Theory of operation
-------------------
Every table (and solitaire session) is hosted by exactly one node: the one that created it. Its
:class:`~server.room.Room` lives there, and only there are its commands executed (synchronously, so
one table's commands never interleave). A node that receives a request for a table hosted
elsewhere forwards it over the store's bus to the host's channel and relays the answer; the host
publishes every table update on the table's channel, and each node with viewers of that table
fans the update out to them. With the in-memory store there is one node and everything is local.

A request's answer is an :class:`Answer`: the messages for the requester, and whether the requester
now watches the table (with which seat) or stops watching it. Updates go to every watcher in
the watcher's viewer class (the spectator's copy unless the seat's differs), encoded once per class
and encoding; each watcher remembers the last event number it was sent, so no update is sent twice
and a watcher that joins late starts right after its snapshot.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

import msgspec

from protocol import v1
from protocol.codec import encode
from protocol.errors import ErrorCode
from server.connection import Client, Watch
from server.games.shuffle import new_seed
from server.hosting import (
    NEEDS_SEED,
    Answer,
    Begin,
    Create,
    Entry,
    Presence,
    Resume,
    Stop,
    encode_entry,
    execute,
    joined,
    new_room,
    replay,
    timer_entry,
)
from server.metrics import Metrics
from server.room import Broadcast, Room, RoomError
from server.stores import LeaseLost, Store, StoreUnavailable
from server.stores.base import LOBBY_CHANNEL, node_channel, table_channel

log = logging.getLogger("blackdrez.node")

REMOTE_TIMEOUT = 3.0
SOLITAIRE_GRACE = 3600.0
RECENT_UPDATES = 64
LEASE_TTL = 3.0
"""Seconds a table's lease lasts unless its host renews it (three times per TTL)."""
ORPHAN_SCAN = 0.5
"""Seconds between looks for tables whose host died or handed them over (while likely)."""
FULL_SCAN = 10.0
"""Seconds between looks for orphans when no node was seen going."""
HANDOVER_CHANNEL = "bd:handover"
SWEEP_INTERVAL = 5.0
"""Seconds between sweeps for rooms that should be closed (see ``Room.should_close``)."""
KEEP_LOG = 3600.0
"""Seconds a closed table's log stays in the store (for audits and replays)."""


class _Forward(msgspec.Struct, tag="req", tag_field="k"):
    origin: str
    rid: int
    player: str
    name: str
    table: str
    message: Any
    bot: bool = False


class _Reply(msgspec.Struct, tag="rep", tag_field="k"):
    rid: int
    answer: Answer


_bus_encoder = msgspec.msgpack.Encoder()
_bus_decoder = msgspec.msgpack.Decoder(_Forward | _Reply)
_broadcast_decoder = msgspec.msgpack.Decoder(Broadcast)


def _no_bots(table: str, strategy: str, invite: str | None) -> None:
    raise RoomError(ErrorCode.UNAVAILABLE, "this node cannot start bots")


def _is_unavailable(reply: Any) -> bool:
    code = reply.get("code") if isinstance(reply, dict) else getattr(reply, "code", None)
    return code == ErrorCode.UNAVAILABLE


def _error(request: Any, code: ErrorCode, message: str) -> Answer:
    return Answer(replies=[v1.Error(id=getattr(request, "id", None), code=code, message=message)])


class Node:
    """One server process's share of the game world (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        metrics: Metrics,
        *,
        seed_source: Callable[[], str] = new_seed,
        clock: Callable[[], float] = time.time,
        lease_ttl: float = LEASE_TTL,
    ) -> None:
        self.store = store
        self.id = store.node_id
        self.metrics = metrics
        self.seed_source = seed_source
        self.clock = clock
        self.lease_ttl = lease_ttl
        self.stopping = False
        self._scan_until = 0.0
        self.rooms: dict[str, Room] = {}
        self._logs: dict[str, list[bytes]] = {}
        """Per hosted room, its log as written: what a failed write is undone from."""
        self._locks: dict[str, asyncio.Lock] = {}
        self.watchers: dict[str, dict[Client, Watch]] = {}
        self.lobby_watchers: set[Client] = set()
        self.clients: dict[str, Client] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._outbox: asyncio.Queue[tuple[Room, Broadcast | None]] = asyncio.Queue()
        self._pending: dict[int, asyncio.Future[Answer]] = {}
        self._rids = itertools.count(1)
        self._remote_tables: dict[str, collections.deque[Broadcast]] = {}
        """Tables hosted elsewhere that this node follows, with their last few updates."""
        self._tasks: list[asyncio.Task[None]] = []
        self.spawn_bot: Callable[[str, str, str | None], None] = _no_bots
        """Starts one bot client for a table (set by the server, which knows its own address)."""

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Subscribe to this node's channels and start the background work."""
        self.store.on_bus_recovered = self._on_bus_recovered
        await self.store.subscribe(node_channel(self.id), self._on_node_message)
        await self.store.subscribe(LOBBY_CHANNEL, self._on_lobby_message)
        await self.store.subscribe(HANDOVER_CHANNEL, self._on_handover)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._drain_outbox()),
            loop.create_task(self._heartbeat()),
            loop.create_task(self._keep_leases()),
            loop.create_task(self._adopt_orphans()),
            loop.create_task(self._sweep()),
        ]

    async def stop(self, reason: str = "server shutting down") -> None:
        """Stop hosting: hand every room over to the other nodes when the store is shared
        (they adopt it from its log at once), else close it. Then stop the background work."""
        self.stopping = True
        drain, *others = self._tasks
        for task in others:
            task.cancel()
        for handle in self._timers.values():
            handle.cancel()
        handed_over = False
        for room in list(self.rooms.values()):
            if self.store.shared:
                await self._handover(room)
                handed_over = True
            else:
                async with self._lock(room.id):
                    room.close(reason)
                    self._after(room)
        if handed_over:
            with contextlib.suppress(StoreUnavailable):
                await self.store.publish(HANDOVER_CHANNEL, self.id.encode())
        await self._settled()
        drain.cancel()

    async def _sweep(self) -> None:
        """Close every hosted room the rules say should be closed, in case its timer did not."""
        while True:
            await asyncio.sleep(SWEEP_INTERVAL)
            now = self.clock()
            for room in [r for r in self.rooms.values() if r.should_close(now)]:
                await self._tick(room)

    async def _heartbeat(self) -> None:
        """Tell the other nodes this one is alive (they look for orphans when one goes)."""
        while True:
            with contextlib.suppress(StoreUnavailable):
                await self.store.heartbeat(self.lease_ttl)
            await asyncio.sleep(self.lease_ttl / 3)

    # ------------------------------------------------------------------ clients
    def attach(self, client: Client) -> Client | None:
        """Register a greeted client; return the older connection of the same player, if any."""
        older = self.clients.get(client.player)
        self.clients[client.player] = client
        self.metrics.connections.set(len(self.clients))
        return older

    async def detach(self, client: Client) -> None:
        """Forget a closed client: its tables learn that the player is away."""
        if self.clients.get(client.player) is client:
            del self.clients[client.player]
        self.metrics.connections.set(len(self.clients))
        self.lobby_watchers.discard(client)
        for table, watch in list(client.tables.items()):
            await self._unwatch(client, table)
            if self.stopping or self.clients.get(client.player) is not None:
                continue  # handed over (the new host counts everyone away), or back already
            message: Any = (
                Presence(table=table, connected=False)
                if watch.seat is not None
                else v1.LeaveTable(table=table)
            )
            with contextlib.suppress(StoreUnavailable, RoomError, TimeoutError):
                await self.route(client.player, client.name, table, message)

    async def handle(self, client: Client, message: Any) -> None:
        """Serve one decoded request from ``client``."""
        try:
            answer = await self._dispatch(client, message)
        except StoreUnavailable as error:
            log.warning("%s failed, the store is unavailable: %s", type(message).__name__, error)
            answer = _error(message, ErrorCode.UNAVAILABLE, "the lobby store cannot be reached")
        except TimeoutError:
            answer = _error(message, ErrorCode.UNAVAILABLE, "the table's node did not answer")
        except Exception:
            log.exception("request %r failed", message)
            answer = _error(message, ErrorCode.INTERNAL, "the server failed on this request")
        await self._deliver_answer(client, answer)

    async def _deliver_answer(self, client: Client, answer: Answer) -> None:
        if answer.watch is not None:
            table, seat, seq = answer.watch
            await self._watch(client, table, seat, seq)
        for reply in answer.replies:
            if isinstance(reply, v1.Error):
                self.metrics.errors.labels(reply.code).inc()
            client.send(reply)
        if answer.unwatch is not None:
            await self._unwatch(client, answer.unwatch)

    async def _dispatch(self, client: Client, message: Any) -> Answer:
        now = self.clock()
        match message:
            case v1.Ping():
                return Answer(replies=[v1.Pong(id=message.id, time=now)])
            case v1.ListTables() | v1.WatchLobby():
                tables = await self.list_tables()
                if isinstance(message, v1.WatchLobby):
                    client.lobby = True
                    self.lobby_watchers.add(client)
                return Answer(replies=[v1.Tables(id=message.id, tables=tables)])
            case v1.UnwatchLobby():
                client.lobby = False
                self.lobby_watchers.discard(client)
                return Answer(replies=[v1.Ok(id=message.id)])
            case v1.CreateTable():
                problems = message.options.problems()
                if problems:
                    return _error(message, ErrorCode.BAD_MESSAGE, "; ".join(problems))
                return await self._create_and_sit(client, message.options, message.id)
            case v1.QuickJoin():
                return await self._quick_join(client, message)
            case v1.StartSolitaire():
                options = v1.TableOptions(grace_seconds=SOLITAIRE_GRACE, private=True)
                room = await self._new_room(message.game, client.player, options, message.deal)
                for step in (v1.JoinTable(id=message.id, table=room.id), Begin()):
                    answer = await self._execute(room, client.player, client.name, step)
                    if any(isinstance(reply, v1.Error) for reply in answer.replies):
                        return answer  # the store failed: the error says why
                room = self.rooms.get(room.id, room)
                return joined(room, client.player, message.id, 0)
            case v1.GetLeaderboard():
                await self._settled()  # read your own writes: scores of games just finished
                limit = message.limit
                rows = await self.store.top_scores(message.game, limit)
                entries = [
                    v1.LeaderboardEntry(rank=i + 1, player=p, name=n, score=s)
                    for i, (p, n, s) in enumerate(rows)
                ]
                return Answer(
                    replies=[v1.Leaderboard(id=message.id, game=message.game, entries=entries)]
                )
            case v1.Hello():
                return _error(message, ErrorCode.ALREADY_GREETED, "hello was already answered")
            case _:
                table = getattr(message, "table", None)
                if not isinstance(table, str):
                    return _error(message, ErrorCode.UNKNOWN_TYPE, "unknown request")
                return await self.route(client.player, client.name, table, message, bot=client.bot)

    async def _quick_join(self, client: Client, message: v1.QuickJoin) -> Answer:
        for info in await self.list_tables():
            if (
                info.game == "blackdrez"
                and info.status == "open"
                and not info.private
                and any(seat is None for seat in info.seats)
                and all(seat is None or seat.player != client.player for seat in info.seats)
            ):
                answer = await self.route(
                    client.player,
                    client.name,
                    info.id,
                    v1.JoinTable(id=message.id, table=info.id),
                    bot=client.bot,
                )
                if not any(isinstance(reply, v1.Error) for reply in answer.replies):
                    return answer
        return await self._create_and_sit(client, v1.TableOptions(), message.id)

    async def _create_and_sit(
        self, client: Client, options: v1.TableOptions, request_id: int | None
    ) -> Answer:
        """A new BlackDrez table hosted here, with its creator in the first seat as host."""
        room = await self._new_room("blackdrez", client.player, options, None)
        sit = v1.JoinTable(id=request_id, table=room.id)
        return await self._execute(room, client.player, client.name, sit, bot=client.bot)

    async def list_tables(self) -> list[v1.TableInfo]:
        """The public tables of every node."""
        records = await self.store.list_tables()
        return [msgspec.msgpack.decode(record, type=v1.TableInfo) for record in records]

    # ------------------------------------------------------------------ routing
    async def route(
        self, player: str, name: str, table: str, message: Any, *, bot: bool = False
    ) -> Answer:
        """Execute a table request here if this node hosts the table, else forward it."""
        room = self.rooms.get(table)
        if room is not None:
            return await self._execute(room, player, name, message, bot=bot)
        found = await self.store.get_table(table)
        if found is None or found[0] == self.id:
            return _error(message, ErrorCode.NOT_FOUND, f"no table {table!r}")
        if isinstance(message, v1.JoinTable | v1.Spectate | v1.Resync):
            await self._follow(table)  # before the request, so no update can slip between
        try:
            return await self._forward(found[0], player, name, table, message, bot)
        finally:
            await self._unfollow_if_unwatched(table)

    async def _forward(
        self, host: str, player: str, name: str, table: str, message: Any, bot: bool
    ) -> Answer:
        rid = next(self._rids)
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            request = _Forward(
                origin=self.id,
                rid=rid,
                player=player,
                name=name,
                table=table,
                message=message,
                bot=bot,
            )
            await self.store.publish(node_channel(host), _bus_encoder.encode(request))
            return await asyncio.wait_for(future, REMOTE_TIMEOUT)
        finally:
            self._pending.pop(rid, None)

    def _on_node_message(self, data: bytes) -> None:
        try:
            envelope = _bus_decoder.decode(data)
        except msgspec.DecodeError:
            log.warning("undecodable bus message dropped")
            return
        if isinstance(envelope, _Reply):
            future = self._pending.get(envelope.rid)
            if future is not None and not future.done():
                future.set_result(envelope.answer)
            return
        asyncio.get_running_loop().create_task(self._serve_forward(envelope))

    async def _serve_forward(self, request: _Forward) -> None:
        message = msgspec.convert(request.message, v1.ClientMessage | Presence)
        room = self.rooms.get(request.table)
        if room is None:
            answer = _error(message, ErrorCode.NOT_FOUND, f"no table {request.table!r}")
        else:
            answer = await self._execute(
                room, request.player, request.name, message, bot=request.bot
            )
        reply = _Reply(rid=request.rid, answer=answer)
        with contextlib.suppress(StoreUnavailable):
            await self.store.publish(node_channel(request.origin), _bus_encoder.encode(reply))

    # ------------------------------------------------------------------ hosting
    def _lock(self, table: str) -> asyncio.Lock:
        lock = self._locks.get(table)
        if lock is None:
            lock = self._locks[table] = asyncio.Lock()
        return lock

    async def _new_room(
        self, game: str, host: str, options: v1.TableOptions, deal: int | None
    ) -> Room:
        """Create a room hosted here: leased, logged and listed before anyone hears of it."""
        table_id = ("t" if game == "blackdrez" else "s") + secrets.token_hex(5)
        create = Create(
            table=table_id,
            game=game,
            host=host,
            options=options,
            listed=game == "blackdrez" and not options.private,
            invite=secrets.token_urlsafe(6) if options.private else None,
            deal=deal,
        )
        now = self.clock()
        room = new_room(create, now)
        first = encode_entry(Entry(now=now, command=create))
        if not await self.store.acquire_lease(table_id, self.lease_ttl):
            raise StoreUnavailable("a fresh table id was already leased")
        await self.store.append_log(table_id, first)
        await self.store.put_table(
            table_id, self.id, msgspec.msgpack.encode(room.info()), room.listed
        )
        self._host(room, [first])
        return room

    def _host(self, room: Room, log_entries: list[bytes]) -> None:
        self.rooms[room.id] = room
        self._logs[room.id] = log_entries
        self.metrics.tables.labels(room.adapter.name).inc()

    def _unhost(self, table: str) -> Room | None:
        room = self.rooms.pop(table, None)
        self._logs.pop(table, None)
        handle = self._timers.pop(table, None)
        if handle is not None:
            handle.cancel()
        if room is not None:
            self.metrics.tables.labels(room.adapter.name).dec()
        return room

    async def _execute(
        self, room: Room, player: str, name: str, message: Any, *, bot: bool = False
    ) -> Answer:
        """Run one command on a hosted room, log it, then let everyone see its effects.

        The command runs synchronously; its log entry is written before any update, reply or
        lobby change goes out. If the write fails the room is rebuilt from its log as it was
        (nothing half-applied) and the requester gets ``unavailable``.
        """
        async with self._lock(room.id):
            current = self.rooms.get(room.id)
            if current is None:
                return _error(message, ErrorCode.UNAVAILABLE, "the table moved: try again")
            room = current  # it may have been rebuilt while this request waited
            started = time.perf_counter()
            if isinstance(message, v1.AddBots):
                return self._add_bots(room, player, message)
            entry = Entry(
                now=self.clock(),
                command=message,
                player=player,
                name=name,
                bot=bot,
                seed=self.seed_source() if isinstance(message, NEEDS_SEED) else None,
            )
            version = room.version
            try:
                answer = execute(room, entry)
            except RoomError as error:
                return _error(message, error.code, error.message)
            if room.version == version:
                return answer  # nothing changed: nothing to log or broadcast
            entry.seq = room.seq
            broadcast, failure = await self._log(room, entry)
            if failure is not None:
                return _error(message, ErrorCode.UNAVAILABLE, failure)
            self._after(room, broadcast)
            if isinstance(message, v1.Act):
                self.metrics.action_latency.observe(time.perf_counter() - started)
            return answer

    def _add_bots(self, room: Room, player: str, message: v1.AddBots) -> Answer:
        try:
            count = room.bot_seats(player, message.count)
        except RoomError as error:
            return _error(message, error.code, error.message)
        for _ in range(count):
            self.spawn_bot(room.id, message.strategy, room.invite)
        return Answer(replies=[v1.Ok(id=message.id, seq=room.seq)])

    async def _log(self, room: Room, entry: Entry) -> tuple[Broadcast | None, str | None]:
        """Append ``entry`` to the room's log, announcing the room's update to the other nodes
        in the same step; on failure undo the command and say why.

        Returns the update (to fan out here) and the failure, if any.
        """
        data = encode_entry(entry)
        broadcast = room.flush()
        announce = (
            _bus_encoder.encode(broadcast) if broadcast is not None and self.store.shared else None
        )
        try:
            await self.store.append_log(room.id, data, table_channel(room.id), announce)
        except StoreUnavailable as error:
            log.warning("logging a command of %s failed, undone: %s", room.id, error)
            self._restore(room.id)
            return None, "the store cannot be reached: nothing was changed, try again"
        except LeaseLost:
            self._lose(room.id)
            return None, "the table moved to another node: try again"
        self._logs[room.id].append(data)
        return broadcast, None

    def _restore(self, table: str) -> None:
        """Undo an unlogged command: rebuild the room from the log written so far."""
        entries = self._logs[table]
        self._unhost(table)
        self._host(replay(entries), entries)
        room = self.rooms[table]
        self._arm(room)

    def _lose(self, table: str) -> None:
        """Another node hosts the table now: stop hosting, follow it like any remote table."""
        if self._unhost(table) is None:
            return
        log.warning("lease of %s lost: another node hosts it now", table)
        if self.watchers.get(table):
            asyncio.get_running_loop().create_task(self._follow(table))

    async def _handover(self, room: Room) -> None:
        """Give a room up to the other nodes (graceful shutdown with a shared store)."""
        async with self._lock(room.id):
            self._unhost(room.id)
            with contextlib.suppress(StoreUnavailable):
                await self.store.release_lease(room.id)

    async def _keep_leases(self) -> None:
        """Renew this node's leases; drop the rooms another node has taken."""
        while True:
            await asyncio.sleep(self.lease_ttl / 3)
            try:
                lost = await self.store.renew_leases(sorted(self.rooms), self.lease_ttl)
            except StoreUnavailable:
                continue
            for table in lost:
                self._lose(table)

    async def _adopt_orphans(self) -> None:
        """Adopt tables whose host died or handed them over: rebuild them from their logs.

        Looking for orphans costs a look at every hosted table, so it is done often only
        while it can find some: after a node stopped heartbeating or handed its tables over
        (until the dead node's leases have surely lapsed), and otherwise every FULL_SCAN s.
        """
        loop = asyncio.get_running_loop()
        known: set[str] = set()
        next_full = loop.time()
        while True:
            await asyncio.sleep(ORPHAN_SCAN)
            now = loop.time()
            try:
                live = await self.store.live_nodes()
                if known - live:
                    self._scan_until = now + 2 * self.lease_ttl
                known = live
                if now >= self._scan_until and now < next_full:
                    continue
                if now >= next_full:
                    next_full = now + FULL_SCAN
                orphans = await self.store.orphaned_tables()
            except StoreUnavailable:
                continue
            await asyncio.gather(*(self._try_adopt(t) for t in orphans if t not in self.rooms))

    def _on_handover(self, data: bytes) -> None:
        """Another node is handing its tables over: look for them now."""
        self._scan_until = asyncio.get_running_loop().time() + 2 * self.lease_ttl

    async def _try_adopt(self, table: str) -> None:
        try:
            if await self.store.acquire_lease(table, self.lease_ttl):
                await self._adopt(table)
        except StoreUnavailable:
            pass  # the lease lapses again and someone retries
        except Exception:
            log.exception("adopting %s failed", table)

    async def _adopt(self, table: str) -> None:
        entries = await self.store.read_log(table)
        if not entries:
            await self.store.retire_table(table, KEEP_LOG)
            return
        room = replay(entries)
        if room.status == "closed":
            await self.store.retire_table(table, KEEP_LOG)
            return
        async with self._lock(table):
            self._host(room, entries)
            resume = Entry(now=self.clock(), command=Resume(), seq=room.seq)
            execute(room, resume)
            broadcast, failure = await self._log(room, resume)
            if failure is not None:
                return
            await self.store.put_table(
                table, self.id, msgspec.msgpack.encode(room.info()), room.listed
            )
            if table in self._remote_tables:
                del self._remote_tables[table]  # local now: fan out directly
                with contextlib.suppress(StoreUnavailable):
                    await self.store.unsubscribe(table_channel(table), self._on_table_message)
            log.info("adopted table %s at event %d", table, room.seq)
            self._after(room, broadcast)
        for client, watch in list(self.watchers.get(table, {}).items()):
            if watch.seat is not None:  # still connected here: not away after all
                await self._execute(room, client.player, client.name, Presence(table, True))

    def _after(self, room: Room, broadcast: Broadcast | None = None) -> None:
        """After a room changed: fan its update out here, queue the rest, re-arm its timer.

        ``broadcast`` is the update already announced with the log entry; without one, the
        room's pending changes are flushed here (they were not logged: closing at shutdown).
        """
        if broadcast is None:
            broadcast = room.flush()
        if broadcast is not None:
            self._fan_out(broadcast)
        self._outbox.put_nowait((room, broadcast))
        self._arm(room)

    def _arm(self, room: Room) -> None:
        handle = self._timers.pop(room.id, None)
        if handle is not None:
            handle.cancel()
        deadline = room.next_deadline()
        if deadline is None or room.status == "closed":
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, deadline - self.clock())
        self._timers[room.id] = loop.call_later(delay, self._on_timer, room)

    def _on_timer(self, room: Room) -> None:
        self._timers.pop(room.id, None)
        if self.rooms.get(room.id) is room:
            asyncio.get_running_loop().create_task(self._tick(room))

    async def _tick(self, room: Room) -> None:
        """Run a due timer as a logged command (only if it changed anything)."""
        async with self._lock(room.id):
            if self.rooms.get(room.id) is not room:
                return
            version = room.version
            entry = timer_entry(room, self.clock())
            if isinstance(entry.command, Stop):
                self.metrics.tables_stopped.inc()
                log.error("table %s stopped: its timer fires faster than any game can", room.id)
            execute(room, entry)
            if room.version == version:
                self._arm(room)
                return
            entry.seq = room.seq
            broadcast, failure = await self._log(room, entry)
            if failure is not None:
                retry = self.rooms.get(room.id)
                if retry is not None:  # undone: try again shortly
                    self._timers[room.id] = asyncio.get_running_loop().call_later(
                        0.5, self._on_timer, retry
                    )
                return
            self._after(room, broadcast)

    async def _settled(self, timeout: float = 2.0) -> None:
        """Wait until what this node queued for the store has been written."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._outbox.join(), timeout)

    async def _drain_outbox(self) -> None:
        """Do, in order, what a room change needs outside this process: store and bus."""
        while True:
            room, broadcast = await self._outbox.get()
            try:
                await self._publish(room, broadcast)
            except StoreUnavailable as error:
                log.warning("store unavailable: update of %s not shared: %s", room.id, error)
            except Exception:
                log.exception("publishing an update of %s failed", room.id)
            finally:
                self._outbox.task_done()

    async def _publish(self, room: Room, broadcast: Broadcast | None) -> None:
        outcome = room.take_outcome()
        store = self.store
        for player in outcome.seated:
            await store.add_player_table(player, room.id)
        for player in outcome.unseated:
            await store.remove_player_table(player, room.id)
        for player, name, score in outcome.scores:
            await store.submit_score(room.adapter.name, player, name, score)
        if outcome.closed or room.status == "closed":
            self._unhost(room.id)
            self._locks.pop(room.id, None)
            await store.remove_table(room.id)
            await store.retire_table(room.id, KEEP_LOG)
            if room.listed:
                await store.publish(
                    LOBBY_CHANNEL, _bus_encoder.encode(v1.LobbyUpdate(removed=[room.id]))
                )
        elif broadcast is not None and broadcast.info is not None:
            record = msgspec.msgpack.encode(broadcast.info)
            await store.put_table(room.id, self.id, record, room.listed)
            if room.listed:
                await store.publish(
                    LOBBY_CHANNEL, _bus_encoder.encode(v1.LobbyUpdate(tables=[broadcast.info]))
                )

    # ------------------------------------------------------------------ fan-out
    async def _watch(self, client: Client, table: str, seat: int | None, seq: int) -> None:
        watch = Watch(seat, seq)
        self.watchers.setdefault(table, {})[client] = client.tables[table] = watch
        if table not in self.rooms:
            await self._follow(table)
            for broadcast in self._remote_tables[table]:
                self._send_update(client, watch, broadcast, {})

    async def _unwatch(self, client: Client, table: str) -> None:
        client.tables.pop(table, None)
        watchers = self.watchers.get(table)
        if watchers is not None:
            watchers.pop(client, None)
            if not watchers:
                del self.watchers[table]
        await self._unfollow_if_unwatched(table)

    async def _follow(self, table: str) -> None:
        """Subscribe to a remote table's updates (keeping the last few for late watchers)."""
        if table not in self._remote_tables:
            self._remote_tables[table] = collections.deque(maxlen=RECENT_UPDATES)
            await self.store.subscribe(table_channel(table), self._on_table_message)

    async def _unfollow_if_unwatched(self, table: str) -> None:
        if table in self._remote_tables and not self.watchers.get(table):
            del self._remote_tables[table]
            with contextlib.suppress(StoreUnavailable):
                await self.store.unsubscribe(table_channel(table), self._on_table_message)

    def _on_table_message(self, data: bytes) -> None:
        try:
            broadcast = _broadcast_decoder.decode(data)
        except msgspec.DecodeError:
            log.warning("undecodable table update dropped")
            return
        recent = self._remote_tables.get(broadcast.table)
        if recent is not None:
            recent.append(broadcast)
            self._fan_out(broadcast)
            self._correct_presence(broadcast)

    def _on_bus_recovered(self) -> None:
        asyncio.get_running_loop().create_task(self._catch_up())

    async def _catch_up(self) -> None:
        """After a bus outage: what was published meanwhile is lost, so fetch what each local
        viewer of a remote table missed, and give lobby watchers the whole list again."""
        log.warning("bus back after an outage: catching viewers up")
        await asyncio.gather(
            *(
                self._catch_up_viewer(client, table)
                for table in list(self._remote_tables)
                for client in list(self.watchers.get(table, {}))
            )
        )
        if self.lobby_watchers:
            with contextlib.suppress(StoreUnavailable):
                tables = v1.Tables(tables=await self.list_tables())
                for client in list(self.lobby_watchers):
                    client.send(tables)

    async def _catch_up_viewer(self, client: Client, table: str) -> None:
        """Resync one viewer of a remote table, retrying while its host is not reachable yet
        (the host's own bus may come back later than this node's)."""
        delay = 0.1
        for _ in range(12):
            watch = client.tables.get(table)
            if watch is None or client.closing:
                return
            message = v1.Resync(table=table, since=watch.seq)
            try:
                answer = await self.route(client.player, client.name, table, message)
            except (StoreUnavailable, TimeoutError):
                answer = None
            if answer is not None and not any(
                isinstance(reply, v1.Error | dict) and _is_unavailable(reply)
                for reply in answer.replies
            ):
                await self._deliver_answer(client, answer)
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _correct_presence(self, broadcast: Broadcast) -> None:
        """A table's new host counts every player away until told otherwise: tell it about
        the players still connected here."""
        away = {
            numbered.event.get("seat")
            for numbered in broadcast.events
            if isinstance(numbered.event, dict)
            and numbered.event.get("type") == "presence"
            and not numbered.event.get("connected")
        }
        if not away:
            return
        for client, watch in list(self.watchers.get(broadcast.table, {}).items()):
            if watch.seat in away and not client.closing:
                message = Presence(table=broadcast.table, connected=True)
                asyncio.get_running_loop().create_task(
                    self.route(client.player, client.name, broadcast.table, message)
                )

    def _fan_out(self, broadcast: Broadcast) -> None:
        """Send one update to every local watcher of its table, encoded once per class."""
        watchers = self.watchers.get(broadcast.table)
        if not watchers:
            return
        frames: dict[tuple[int | None, bool], str | bytes] = {}
        sent = 0
        for client, watch in list(watchers.items()):
            sent += self._send_update(client, watch, broadcast, frames)
        self.metrics.messages_out.inc(sent)

    @staticmethod
    def _send_update(
        client: Client,
        watch: Watch,
        broadcast: Broadcast,
        frames: dict[tuple[int | None, bool], str | bytes],
    ) -> int:
        """Send ``broadcast`` to one watcher unless its snapshot already covers it."""
        if broadcast.seq < watch.seq or (broadcast.events and broadcast.seq == watch.seq):
            return 0
        first = broadcast.events[0].seq if broadcast.events else broadcast.seq + 1
        if watch.seq >= first:
            update = broadcast.for_seat(watch.seat)
            update.events = [e for e in update.events if e.seq > watch.seq]
            client.send(update)
        else:
            key = (broadcast.variant(watch.seat), client.binary)
            frame = frames.get(key)
            if frame is None:
                frame = frames[key] = encode(broadcast.for_seat(watch.seat), client.binary)
            client.send_frame(frame)
        watch.seq = broadcast.seq
        return 1

    def _on_lobby_message(self, data: bytes) -> None:
        if not self.lobby_watchers:
            return
        try:
            update = msgspec.msgpack.decode(data, type=v1.LobbyUpdate)
        except msgspec.DecodeError:
            return
        frames: dict[bool, str | bytes] = {}
        for client in list(self.lobby_watchers):
            frame = frames.get(client.binary)
            if frame is None:
                frame = frames[client.binary] = encode(update, client.binary)
            client.send_frame(frame)
