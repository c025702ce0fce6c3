"""A server node: hosts rooms, routes requests to the node hosting a table, fans updates out.

Theory of operation
-------------------
Every table (and solitaire session) is hosted by exactly one node process: the one holding its
lease (see "Hosting and fencing" in ``server.stores.base``). Its :class:`~server.room.Room` lives
there, and only there are its commands executed (synchronously, under the table's lock, so one
table's commands never interleave). A node that receives a request for a table hosted elsewhere
forwards it over the store's bus to the host (typed messages: ``server.bus``) and relays the
answer; the host publishes every table update on the table's channel, and each node with viewers
of that table fans the update out to them. With the in-memory store there is one node and
everything is local.

Fencing on the node's side: each hosted room has its lease's token and a local *validity
deadline* (the event-loop time when the last successful acquisition or renewal was sent, plus the
TTL, minus a margin): Redis cannot have let the lease lapse before then. Before serving any
request from a room, and before running its timer, the node checks that deadline; past it (the
process was paused, or renewals failed) it renews the lease first, fenced, and if the lease is
gone it drops the room at once. A dropped room is never served from memory again: the table can
only come back by adoption, rebuilt from its log. So a node resumed after a pause never answers
from a stale copy, and its writes are refused by the store anyway (token and log position).

While a table is moving (its lease lapsed, another node is adopting it, or the lease names a
node that no longer has the room) its requests are answered ``moving``: retry shortly. Only a
table that does not exist, or was closed, is ``not_found``. At start-up a node looks for tables
its own earlier process (same node id, older incarnation) still holds and takes them over at
once, instead of leaving them ``moving`` until the old leases lapse.

The store's health (``server.retry``) is shared by the whole node: while the store is down, no
command runs (requests are answered ``unavailable`` at once), timers wait for the store to be
back rather than retrying on their own, and the periodic work (heartbeat, lease renewals,
orphan scans) waits too; when it is back, leases are renewed and orphans looked for at once. A
failed log write undoes its command by rebuilding the room from the log once; then the table
waits. Log appends of all tables are sent to the store together (its group commit); each table
waits for its own. Every ``SNAPSHOT_EVERY`` entries the room is snapshotted (``server.snapshots``),
so an adoption or an undo replays only the entries after the latest snapshot. Side effects
outside the room (lobby record, player sets, scores, retirement) are done in order by one outbox
task, retried on the shared backoff while the store is down.

Finished games: once the command that ended a game is logged, the node hands the game to
``records`` (the server's records writer, when it keeps records); adopting a table hands over
again every game that ended in its log, since its last host may have died before writing them
(the writer stores each game id once), and a closed table's log is retired only after its games
are stored (see ``server.records.writer``).

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
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from protocol import v1
from protocol.codec import encode
from protocol.errors import ErrorCode
from server import assist, bus
from server.connection import Client, Watch
from server.games.shuffle import commitment, new_seed
from server.hosting import (
    NEEDS_SEED,
    Answer,
    Begin,
    ConnectionChanged,
    Create,
    Entry,
    Resume,
    Stop,
    encode_entry,
    execute,
    joined,
    new_room,
    players_seated,
    replay_games,
    table_record,
    timer_entry,
)
from server.identity import BOT_NAMES
from server.metrics import Metrics
from server.retry import Backoff
from server.room import Broadcast, GameOver, Outcome, Room, RoomError
from server.snapshots import SNAPSHOT_EVERY, SnapshotError, rebuild, resume_games
from server.snapshots import take as take_snapshot
from server.stores import LeaseLost, Store, StoreUnavailable
from server.stores.base import LOBBY_CHANNEL, Whereabouts, node_channel, table_channel

log = logging.getLogger("blackdrez.node")
_entry_decoder = msgspec.msgpack.Decoder(v1.LeaderboardEntry)
_kept_decoder = msgspec.msgpack.Decoder(assist.KeptRecord)

REMOTE_TIMEOUT = 3.0
SOLITAIRE_GRACE = 3600.0
RECENT_UPDATES = 64
ELIDED = b""
"""In a hosted table's log held here: an entry before its snapshot, not read at adoption."""
LEASE_TTL = 1.0
"""Seconds a table's lease lasts unless its host renews it: a killed node's tables are adopted
about this long after the kill. Fencing (tokens checked by every write) makes a short lease safe;
what bounds it from below is the longest stall a live node must survive without losing its
tables (see RENEWALS), and work done on the event loop when leases are renewed in the loop (the
in-memory store): which is why hints use the quick bots (``server.assist``)."""
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
ORPHAN_SCAN = 1 / 6
"""Share of the TTL between looks for tables whose host died or handed them over (while likely:
0.17 s with the default TTL, so adoption follows a lapse closely)."""
FULL_SCAN = 10.0
"""Seconds between looks for orphans when no node was seen going."""
SCAN_GAP = 1 / 12
"""Share of the TTL at least between two looks for orphans, however often something asks."""
RECORD_RETENTION = 24 * 3600.0
"""Seconds a closed table's game record stays in the store (for audits and replays)."""
STORE_RETRY = Backoff(first=0.05, cap=2.0)
"""The retry policy of the outbox and of a table whose log write failed."""
SWEEP_INTERVAL = 5.0
"""Seconds between sweeps for rooms that should be closed (see ``Room.should_close``)."""


class GameRecords(Protocol):
    """The records of finished games (``server.records.writer.RecordsWriter``)."""

    def submit(self, games: Iterable[GameOver]) -> None:
        """Queue games whose end is logged, to be stored (again, after a failover: harmless)."""

    async def written(self, table: str) -> bool:
        """Wait (bounded) until the table's submitted games are stored."""


def _no_bots(table: str, strategy: str, invite: str | None, name: str) -> None:
    raise RoomError(ErrorCode.UNAVAILABLE, "this node cannot start bots")


def _error(request: Any, code: ErrorCode, message: str) -> Answer:
    return Answer(replies=[v1.Error(id=getattr(request, "id", None), code=code, message=message)])


def _moving(request: Any) -> Answer:
    return _error(request, ErrorCode.MOVING, "the table is moving to another node: try again")


def _closed(request: Any, table: str) -> Answer:
    return _error(request, ErrorCode.NOT_FOUND, f"table {table!r} is closed")


def _refused(answer: Answer) -> bool:
    return any(isinstance(reply, v1.Error) for reply in answer.replies)


def _away(broadcast: Broadcast) -> list[int]:
    """The seats an update marks away."""
    return [
        numbered.event.seat
        for numbered in broadcast.events
        if isinstance(numbered.event, v1.PresenceChanged) and not numbered.event.connected
    ]


@dataclass
class _Lease:
    """A lease this node holds: its fencing token, and until when (event-loop time) the node
    may trust it without renewing it first."""

    token: int
    valid_until: float


@dataclass
class _Publication:
    """An outbox item: what a room change needs outside this process."""

    room: Room
    broadcast: Broadcast | None
    outcome: Outcome
    """Taken right after the logged change: a later command that fails and is undone must
    not add its side effects to this one's."""
    token: int
    closing_log: list[bytes] | None = None
    """The room's whole log when the change closed it (its game record is made from it)."""


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
        record_retention: float = RECORD_RETENTION,
        renewal_store: Callable[[], Store] | None = None,
    ) -> None:
        self.store = store
        self.id = store.node_id
        self.metrics = metrics
        self.seed_source = seed_source
        self.clock = clock
        self.lease_ttl = lease_ttl
        self.record_retention = record_retention
        self.stopping = False
        self._scan_until = 0.0
        self._scan_now = asyncio.Event()
        self._renew_now = asyncio.Event()
        self._open_renewal_store = renewal_store
        """Opens a second store on the same Redis for the renewal thread (``None``: leases are
        renewed in the event loop)."""
        self._renew_wake = threading.Event()
        self._stop_renewing = threading.Event()
        self._loop_seen = time.monotonic()
        self._renewer: threading.Thread | None = None
        self.rooms: dict[str, Room] = {}
        self._logs: dict[str, list[bytes]] = {}
        """Per hosted room, its log as written: what a failed write is undone from."""
        self._snapshots: dict[str, tuple[int, bytes]] = {}
        """Per hosted room, its latest snapshot: the entry it was taken at, and its bytes."""
        self._leases: dict[str, _Lease] = {}
        """Per hosted room (and room being retired), the lease this node holds."""
        self._closing: set[str] = set()
        """Tables closed here whose retirement is not yet written: ``not_found`` already."""
        self._locks: dict[str, asyncio.Lock] = {}
        self.watchers: dict[str, dict[Client, Watch]] = {}
        self.lobby_watchers: set[Client] = set()
        self.clients: dict[str, Client] = {}
        self._timers: dict[str, asyncio.TimerHandle | asyncio.Task[None]] = {}
        """At most one pending timer per hosted room (a timer, or a wait for the store)."""
        self._retry_at: dict[str, tuple[float, Iterator[float]]] = {}
        """Rooms whose last timer write failed: not before when to try again, and the backoff."""
        self._outbox: asyncio.Queue[_Publication] = asyncio.Queue()
        self._pending: dict[int, asyncio.Future[Answer]] = {}
        self._forwarded: dict[int, str] = {}
        """The node each pending forwarded request went to."""
        self._rids = itertools.count(1)
        self._remote_tables: dict[str, collections.deque[Broadcast]] = {}
        """Tables hosted elsewhere that this node follows, with their last few updates."""
        self._tasks: list[asyncio.Task[None]] = []
        self._spawned: set[asyncio.Task[Any]] = set()
        """One-off tasks, kept until done so none is lost and every failure is logged."""
        self.spawn_bot: Callable[[str, str, str | None, str], None] = _no_bots
        """Starts one bot client ``(table, strategy, invite, name)`` (set by the server, which
        knows its own address)."""
        self._bots_named: dict[str, int] = {}
        """Per hosted table, how many bots were named so far (see ``_add_bots``)."""
        self.records: GameRecords | None = None
        """Where finished games go once their log entry is written (set by the server when it
        keeps records: ``server.records.writer``)."""

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Subscribe to this node's channels, start the background work, and take over at once
        the tables an earlier process of this node left (same node id)."""
        self.store.on_bus_recovered = self._on_bus_recovered
        self.store.health.listeners.append(self._on_store_back)
        await self.store.subscribe(node_channel(self.id), self._on_node_message)
        await self.store.subscribe(LOBBY_CHANNEL, self._on_lobby_message)
        await self.store.subscribe(bus.HANDOVER_CHANNEL, self._on_handover)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._drain_outbox()),
            loop.create_task(self._heartbeat()),
            loop.create_task(self._adopt_orphans()),
            loop.create_task(self._sweep()),
        ]
        if self._open_renewal_store is None:
            self._tasks.append(loop.create_task(self._keep_leases()))
        else:
            self._loop_seen = time.monotonic()
            self._renewer = threading.Thread(
                target=self._renew_off_loop, args=(loop,), name="lease-renewal", daemon=True
            )
            self._renewer.start()
        self._scan_soon()

    async def stop(self, reason: str = "server shutting down") -> None:
        """Stop hosting: hand every room over to the other nodes when the store is shared
        (they adopt it from its log at once), else close it. Then stop the background work."""
        self.stopping = True
        drain, *others = self._tasks
        for task in others:
            task.cancel()
        for timer in self._timers.values():
            timer.cancel()
        handed_over = False
        for _ in range(2):  # twice: a table being created when the stop began comes after
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
                await self.store.publish(
                    bus.HANDOVER_CHANNEL, bus.encode(bus.Handover(node=self.id))
                )
        await self._settled()
        drain.cancel()
        if self._renewer is not None:
            self._stop_renewing.set()
            self._renew_wake.set()
            await asyncio.to_thread(self._renewer.join, 5.0)
        for task in list(self._spawned):
            task.cancel()

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coroutine`` as a task that is kept until done and whose failure is logged."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._spawned.add(task)
        task.add_done_callback(self._reap)
        return task

    def _reap(self, task: asyncio.Task[Any]) -> None:
        self._spawned.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if isinstance(error, StoreUnavailable | TimeoutError | LeaseLost):
            log.debug("background task %s gave up: %r", task.get_coro(), error)
        elif error is not None:
            log.error("background task %s failed", task.get_coro(), exc_info=error)

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
            await self.store.health.wait_up()
            with contextlib.suppress(StoreUnavailable):
                sent = time.perf_counter()
                await self.store.heartbeat(self.lease_ttl)
                self.metrics.store_rtt.observe(time.perf_counter() - sent)
            await asyncio.sleep(self.lease_ttl / RENEWALS)

    def _on_store_back(self) -> None:
        """The store answers again: renew leases and look for orphans now, not at the next
        period (every lease may have lapsed meanwhile)."""
        self._renew_now.set()
        self._renew_wake.set()
        self._scan_soon()

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
                ConnectionChanged(table=table, connected=False)
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
            log.debug("%s failed, the store is unavailable: %s", type(message).__name__, error)
            answer = _error(message, ErrorCode.UNAVAILABLE, "the lobby store cannot be reached")
        except LeaseLost as error:
            # A new table's lease lapsed before it was written (the store was too slow): the
            # table never existed for anyone; the next try makes another.
            log.debug("%s failed, a lease lapsed meanwhile: %s", type(message).__name__, error)
            answer = _error(message, ErrorCode.UNAVAILABLE, "the store answered too late: retry")
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
            case v1.CreateTable() | v1.QuickJoin() | v1.StartSolitaire() if self.stopping:
                return _error(message, ErrorCode.UNAVAILABLE, "this node is shutting down")
            case v1.CreateTable():
                problems = message.options.problems()
                if problems:
                    return _error(message, ErrorCode.BAD_MESSAGE, "; ".join(problems))
                return await self._create_and_sit(client, message.options, message.id)
            case v1.QuickJoin():
                return await self._quick_join(client, message)
            case v1.StartSolitaire():
                return await self._start_solitaire(client, message)
            case v1.GetDaily():
                return await self._daily(message)
            case v1.GetLeaderboard():
                await self._settled()  # read your own writes: scores of games just finished
                name = assist.board(message.game, message.deal, message.assisted, message.day)
                rows = await self.store.top_scores(name, message.limit)
                entries = [
                    msgspec.structs.replace(_entry_decoder.decode(entry), rank=i + 1)
                    for i, (_, entry, _) in enumerate(rows)
                ]
                board = v1.Leaderboard(
                    id=message.id,
                    game=message.game,
                    entries=entries,
                    deal=message.deal,
                    day=message.day,
                    assisted=message.assisted,
                )
                return Answer(replies=[board])
            case v1.GetRecord():
                return await self._kept_record(message)
            case v1.Hello():
                return _error(message, ErrorCode.ALREADY_GREETED, "hello was already answered")
            case _:
                table = getattr(message, "table", None)
                if not isinstance(table, str):
                    return _error(message, ErrorCode.UNKNOWN_TYPE, "unknown request")
                return await self.route(client.player, client.name, table, message, bot=client.bot)

    async def _start_solitaire(self, client: Client, message: v1.StartSolitaire) -> Answer:
        """A new solitaire session hosted here, its game begun: a random deal (ranked), a
        numbered deal (public seed: never ranked), or today's daily deal (ranked the first time
        the player starts it that day)."""
        if message.daily and message.deal is not None:
            return _error(message, ErrorCode.BAD_MESSAGE, "a daily deal has no deal number")
        options = v1.TableOptions(grace_seconds=SOLITAIRE_GRACE, private=True)
        day = seed = None
        ranked = message.deal is None
        if message.daily:
            day = assist.day_of(self.clock())
            seed = await self.store.daily_seed(message.game, day, self.seed_source())
            ranked = await self.store.claim_daily(message.game, day, client.player)
        room = await self._new_room(
            message.game, client.player, options, message.deal, daily=day, ranked=ranked
        )
        for step in (v1.JoinTable(id=message.id, table=room.id), Begin()):
            answer = await self._execute(room, client.player, client.name, step, seed=seed)
            if _refused(answer):
                return answer  # the store failed: the error says why
        room = self.rooms.get(room.id, room)
        return joined(room, client.player, message.id, 0)

    async def _daily(self, message: v1.GetDaily) -> Answer:
        """A day's daily deal: its commitment, and its seed once the day has ended."""
        now = self.clock()
        day = message.day or assist.day_of(now)
        starts, ends = assist.day_bounds(day)
        if starts > now:
            return _error(message, ErrorCode.SEALED, f"the daily deal of {day} is not dealt yet")
        seed = await self.store.daily_seed(message.game, day, self.seed_source())
        daily = v1.Daily(
            id=message.id,
            game=message.game,
            day=day,
            commitment=commitment(seed),
            starts=starts,
            ends=ends,
            seed=None if assist.sealed(day, now) else seed,
        )
        return Answer(replies=[daily])

    async def _kept_record(self, message: v1.GetRecord) -> Answer:
        """A ranked game's record; a daily deal's stays sealed until its day has ended."""
        data = await self.store.kept_record(message.record)
        if data is None:
            return _error(message, ErrorCode.NOT_FOUND, f"no game record {message.record!r}")
        kept = _kept_decoder.decode(data)
        if assist.sealed(kept.daily, self.clock()):
            return _error(
                message,
                ErrorCode.SEALED,
                f"the record of a daily deal is sealed until the day {kept.daily} has ended (UTC)",
            )
        text = kept.record.decode()
        return Answer(replies=[v1.GameRecord(id=message.id, record=message.record, text=text)])

    async def _rank(self, result: assist.Finished) -> None:
        """Put a ranked game on its boards (its day's and all time's) with its record;
        idempotent, like every outbox step."""
        now = self.clock()
        day = result.daily or assist.day_of(now)
        deal = "daily" if result.daily else "random"
        kept = assist.KeptRecord(daily=result.daily, record=result.record)
        await self.store.keep_record(result.id, msgspec.msgpack.encode(kept))
        entry = v1.LeaderboardEntry(
            rank=0,
            player=result.player,
            name=result.name,
            score=result.score,
            won=result.won,
            day=day,
            deal=deal,
            hints=result.hints,
            undos=result.undos,
            record=result.id,
            finished=now,
        )
        data = msgspec.msgpack.encode(entry)
        assisted = bool(result.hints or result.undos)
        for period in (day, None):
            name = assist.board(result.game, deal, assisted, period)
            await self.store.submit_score(name, result.player, data, result.score)

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
                if not _refused(answer):
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
        """Execute a table request here if this node hosts the table, else forward it to the
        table's host; ``moving`` while it has none, ``not_found`` if it does not exist."""
        room = self.rooms.get(table)
        if room is not None:
            return await self._execute(room, player, name, message, bot=bot)
        if table in self._closing:
            return _closed(message, table)
        place = await self.store.locate(table)
        if place.where is Whereabouts.CLOSED:
            return _closed(message, table)
        if place.where is Whereabouts.UNKNOWN:
            return _error(message, ErrorCode.NOT_FOUND, f"no table {table!r}")
        if place.where is Whereabouts.MOVING or place.node == self.id or place.node is None:
            self._scan_soon()  # an orphan, or this node's own (from its earlier process)
            return _moving(message)
        if isinstance(message, v1.JoinTable | v1.Spectate | v1.Resync):
            await self._follow(table)  # before the request, so no update can slip between
        try:
            return await self._forward(place.node, player, name, table, message, bot)
        finally:
            await self._unfollow_if_unwatched(table)

    async def _forward(
        self, host: str, player: str, name: str, table: str, message: Any, bot: bool
    ) -> Answer:
        rid = next(self._rids)
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        self._forwarded[rid] = host
        try:
            request = bus.Request(
                origin=self.id,
                rid=rid,
                player=player,
                name=name,
                table=table,
                message=message,
                bot=bot,
            )
            await self.store.publish(node_channel(host), bus.encode(request))
            return await asyncio.wait_for(future, REMOTE_TIMEOUT)
        finally:
            self._pending.pop(rid, None)
            self._forwarded.pop(rid, None)

    def _give_up_on(self, nodes: set[str]) -> None:
        """Stop waiting for the answers of requests forwarded to nodes that stopped
        heartbeating: their requesters hear "did not answer" now, not after REMOTE_TIMEOUT, and
        retry once the table has moved (whether a dead host ran the request is unknown, as
        after a timeout)."""
        for rid, host in list(self._forwarded.items()):
            future = self._pending.get(rid)
            if host in nodes and future is not None and not future.done():
                future.set_exception(TimeoutError(f"node {host} stopped heartbeating"))

    def _on_node_message(self, data: bytes) -> None:
        try:
            message = bus.decode(data)
        except msgspec.DecodeError:
            log.warning("undecodable bus message dropped")
            return
        match message:
            case bus.Reply():
                future = self._pending.get(message.rid)
                if future is not None and not future.done():
                    future.set_result(message.answer)
            case bus.Request():
                self._spawn(self._serve_forward(message))
            case _:
                log.warning("unexpected %s on this node's channel", type(message).__name__)

    async def _serve_forward(self, request: bus.Request) -> None:
        message = request.message
        room = self.rooms.get(request.table)
        if room is None:
            closed = request.table in self._closing
            answer = _closed(message, request.table) if closed else _moving(message)
        else:
            try:
                answer = await self._execute(
                    room, request.player, request.name, message, bot=request.bot
                )
            except Exception:
                log.exception("forwarded request %r failed", message)
                answer = _error(message, ErrorCode.INTERNAL, "the server failed on this request")
        reply = bus.Reply(rid=request.rid, answer=answer)
        with contextlib.suppress(StoreUnavailable):
            await self.store.publish(node_channel(request.origin), bus.encode(reply))

    # ------------------------------------------------------------------ hosting
    def _lock(self, table: str) -> asyncio.Lock:
        lock = self._locks.get(table)
        if lock is None:
            lock = self._locks[table] = asyncio.Lock()
        return lock

    def _valid_until(self, sent: float) -> float:
        """Until when a lease acquired or renewed by a call sent at ``sent`` can be trusted."""
        return sent + self.lease_ttl * (1 - LEASE_MARGIN)

    async def _new_room(
        self,
        game: str,
        host: str,
        options: v1.TableOptions,
        deal: int | None,
        *,
        daily: str | None = None,
        ranked: bool = False,
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
            daily=daily,
            ranked=ranked,
        )
        now = self.clock()
        room = new_room(create, now)
        first = encode_entry(Entry(now=now, command=create))
        sent = time.monotonic()
        token = await self.store.acquire_lease(table_id, self.lease_ttl)
        if token is None:
            raise StoreUnavailable("a fresh table id was already leased")
        lease = _Lease(token, self._valid_until(sent))
        self._leases[table_id] = lease  # renewed from now on: the writes below may take a while
        try:
            await self.store.append_log(table_id, token, 1, first)
            record = msgspec.msgpack.encode(room.info())
            await self.store.put_table(table_id, self.id, record, room.listed, token)
        except BaseException:
            self._leases.pop(table_id, None)
            raise
        self._host(room, [first], lease)
        return room

    def _host(self, room: Room, log_entries: list[bytes], lease: _Lease) -> None:
        self.rooms[room.id] = room
        self._logs[room.id] = log_entries
        self._leases[room.id] = lease
        self.metrics.tables.labels(room.adapter.name).inc()

    def _unhost(self, table: str, *, keep_lease: bool = False) -> Room | None:
        room = self.rooms.pop(table, None)
        self._bots_named.pop(table, None)
        self._logs.pop(table, None)
        self._snapshots.pop(table, None)
        self._retry_at.pop(table, None)
        if not keep_lease:
            self._leases.pop(table, None)
        timer = self._timers.pop(table, None)
        if timer is not None:
            timer.cancel()
        if room is not None:
            self.metrics.tables.labels(room.adapter.name).dec()
        return room

    async def _lease_confirmed(self, table: str) -> bool:
        """Whether this node may still serve ``table`` from memory: its lease's validity has not
        run out, or a fenced renewal says the lease is still this node's. A lost lease drops
        the room. Raises :class:`StoreUnavailable` if the renewal cannot be made."""
        lease = self._leases.get(table)
        if lease is None:
            return False
        if time.monotonic() < lease.valid_until:
            return True
        sent = time.monotonic()
        lost = await self.store.renew_leases({table: lease.token}, self.lease_ttl)
        if self._leases.get(table) is not lease:
            return False
        if table in lost:
            self._lose(table)
            return False
        lease.valid_until = self._valid_until(sent)
        return True

    async def _execute(
        self,
        room: Room,
        player: str,
        name: str,
        message: Any,
        *,
        bot: bool = False,
        seed: str | None = None,
    ) -> Answer:
        """Run one command on a hosted room, log it, then let everyone see its effects.

        The command runs synchronously; its log entry is written before any update, reply or
        lobby change goes out. Nothing runs while the store is down, nor from a room whose lease
        is not confirmed (see the module docstring). If the write fails the room is rebuilt
        from its log as it was (nothing half-applied) and the requester gets ``unavailable``.
        A command that starts a game uses ``seed`` if given (a daily deal's), else a new one.
        """
        async with self._lock(room.id):
            current = self.rooms.get(room.id)
            if current is None:
                return _closed(message, room.id) if room.id in self._closing else _moving(message)
            if not self.store.health.up:
                return _error(message, ErrorCode.UNAVAILABLE, "the store cannot be reached")
            try:
                if not await self._lease_confirmed(room.id):
                    return _moving(message)
            except StoreUnavailable:
                return _error(message, ErrorCode.UNAVAILABLE, "the store cannot be reached")
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
                seed=(seed or self.seed_source()) if isinstance(message, NEEDS_SEED) else None,
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
                return _error(message, *failure)
            self._after(room, broadcast)
            if isinstance(message, v1.Act):
                self.metrics.action_latency.observe(time.perf_counter() - started)
            return answer

    def _add_bots(self, room: Room, player: str, message: v1.AddBots) -> Answer:
        try:
            count = room.bot_seats(player, message.count)
        except RoomError as error:
            return _error(message, error.code, error.message)
        # Names are picked before the bots sit down: skip the names given here before, so two
        # quick requests do not name two bots alike.
        spawned = self._bots_named.get(room.id, 0)
        self._bots_named[room.id] = spawned + count
        for name in room.bot_names(count, message.strategy, skip=spawned % len(BOT_NAMES)):
            self.spawn_bot(room.id, message.strategy, room.invite, name)
        return Answer(replies=[v1.Ok(id=message.id, seq=room.seq)])

    async def _log(
        self, room: Room, entry: Entry
    ) -> tuple[Broadcast | None, tuple[ErrorCode, str] | None]:
        """Append ``entry`` to the room's log (fenced by its lease's token and the position it
        must take), announcing the room's update to the other nodes in the same step; on
        failure undo the command (or drop the room, if fenced out) and say why.

        Returns the update (to fan out here) and the failure, if any.
        """
        data = encode_entry(entry)
        entries = self._logs[room.id]
        token = self._leases[room.id].token
        broadcast = room.flush()
        announce = None
        if broadcast is not None and self.store.shared:
            announce = bus.encode(bus.TableUpdate(broadcast=broadcast, away=_away(broadcast)))
        try:
            await self.store.append_log(
                room.id, token, len(entries) + 1, data, table_channel(room.id), announce
            )
        except StoreUnavailable as error:
            log.debug("logging a command of %s failed, undone: %s", room.id, error)
            self._restore(room.id)
            return None, (ErrorCode.UNAVAILABLE, "the store cannot be reached: try again")
        except LeaseLost:
            self._lose(room.id)
            return None, (ErrorCode.MOVING, "the table is moving to another node: try again")
        except Exception:
            log.exception("logging a command of %s failed, undone", room.id)
            self._restore(room.id)
            return None, (ErrorCode.UNAVAILABLE, "the store refused the write: try again")
        entries.append(data)
        self._retry_at.pop(room.id, None)
        if len(entries) % SNAPSHOT_EVERY == 0:
            self._take_snapshot(room, len(entries), token)
        return broadcast, None

    def _take_snapshot(self, room: Room, position: int, token: int) -> None:
        """Snapshot the room just logged (see :mod:`server.snapshots`): kept here for undoing a
        later command, and stored (in the background, fenced) for the node that adopts it."""
        try:
            data = take_snapshot(room)
        except Exception:  # a room holding something that does not pickle: a bug to report
            log.exception("no snapshot of %s at entry %d: it will be replayed", room.id, position)
            return
        self._snapshots[room.id] = (position, data)
        self._spawn(self._store_snapshot(room.id, token, position, data))

    async def _store_snapshot(self, table: str, token: int, position: int, data: bytes) -> None:
        # A snapshot that cannot be stored costs a longer replay at adoption, nothing more.
        with contextlib.suppress(StoreUnavailable, LeaseLost):
            await self.store.put_snapshot(table, token, position, data)

    def _restore(self, table: str) -> None:
        """Undo an unlogged command: rebuild the room from the log written so far (once: its
        timer then waits for the store, or for the retry backoff)."""
        entries = self._logs[table]
        lease = self._leases[table]
        retry = self._retry_at.get(table)
        snapshot = self._snapshots.get(table)
        try:
            room = rebuild(entries, snapshot)
        except Exception:  # the snapshot failed and the log's start was never read (ELIDED)
            log.exception("undoing a command of %s failed: it must be adopted again", table)
            self._lose(table)
            return
        self._unhost(table)
        self._host(room, entries, lease)
        if snapshot is not None:
            self._snapshots[table] = snapshot
        if retry is not None:
            self._retry_at[table] = retry
        self._arm(room)

    def _lose(self, table: str) -> None:
        """Fenced out, or the lease is gone: stop hosting at once and never serve this copy
        again; the table comes back only by adoption from its log (here or elsewhere)."""
        lease = self._leases.get(table)
        if self._unhost(table) is None:
            return
        log.warning("lease of %s lost: the table must be adopted again from its log", table)
        if lease is not None:
            # Still held by this process if only the log position was off: free it at once.
            self._spawn(self.store.release_lease(table, lease.token))
        self._scan_soon()
        if self.watchers.get(table):
            self._spawn(self._follow_lost(table))

    async def _handover(self, room: Room) -> None:
        """Give a room up to the other nodes (graceful shutdown with a shared store)."""
        async with self._lock(room.id):
            lease = self._leases.get(room.id)
            self._unhost(room.id)
            self.metrics.tables_handed_over.inc()
            if lease is not None:
                with contextlib.suppress(StoreUnavailable):
                    await self.store.release_lease(room.id, lease.token)

    async def _keep_leases(self) -> None:
        """Renew this node's leases (fenced) in the event loop: without a renewal store (see
        :meth:`_renew_off_loop`), as with the in-memory store."""
        while True:
            await _nap(self.lease_ttl / RENEWALS, self._renew_now)
            self._renew_now.clear()
            await self.store.health.wait_up()
            held = {table: lease.token for table, lease in self._leases.items()}
            sent = time.monotonic()
            try:
                lost = await self.store.renew_leases(held, self.lease_ttl)
            except StoreUnavailable:
                continue
            self._renewed(held, lost, sent)

    def _renewed(self, held: dict[str, int], lost: set[str], sent: float) -> None:
        """A renewal sent at ``sent`` (``time.monotonic()``) of the ``held`` leases came back:
        extend their validity, drop the rooms whose lease is gone."""
        self._loop_seen = time.monotonic()
        for table, token in held.items():
            lease = self._leases.get(table)
            if lease is None or lease.token != token:
                continue  # dropped or adopted again meanwhile
            if table in lost:
                if table in self.rooms:
                    self._lose(table)
                else:
                    self._leases.pop(table, None)  # a table being retired: another node does
            else:
                lease.valid_until = max(lease.valid_until, self._valid_until(sent))

    def _renew_off_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The renewal thread: renew every lease RENEWALS times per TTL on a store connection of
        its own, so that a busy event loop (a burst of reconnections after another node died,
        a starved machine) does not lose its tables; results go back to the loop.

        It stops renewing when the loop has not taken a result for LOOP_PATIENCE s: a node
        whose loop is stuck must let its tables go. A stall of the whole process (SIGSTOP, a
        garbage collection, a VM pause) stops this thread too: that is what the TTL covers.
        """
        assert self._open_renewal_store is not None
        store = self._open_renewal_store()
        store.incarnation = self.store.incarnation  # the same holder as the node's own store

        async def renew() -> None:
            try:
                with contextlib.suppress(StoreUnavailable):
                    await store.ping()  # connect first (a cluster client reads its slot map)
                while not self._stop_renewing.is_set():
                    if time.monotonic() - self._loop_seen < LOOP_PATIENCE:
                        held = {t: lease.token for t, lease in dict(self._leases).items()}
                        sent = time.monotonic()
                        with contextlib.suppress(StoreUnavailable, RuntimeError):
                            lost = await store.renew_leases(held, self.lease_ttl)
                            loop.call_soon_threadsafe(self._renewed, held, lost, sent)
                    self._renew_wake.wait(self.lease_ttl / RENEWALS)  # this loop has no other work
                    self._renew_wake.clear()
            finally:
                await store.close()

        asyncio.run(renew())

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
        known: set[str] = set()
        next_full = loop.time()
        while True:
            await _nap(self.lease_ttl * ORPHAN_SCAN, self._scan_now)
            self._scan_now.clear()
            await self.store.health.wait_up()
            now = loop.time()
            try:
                live = await self.store.live_nodes()
                if known - live:
                    self._scan_until = now + 2 * self.lease_ttl
                    self._give_up_on(known - live)
                known = live
                if now >= self._scan_until and now < next_full:
                    continue
                if now >= next_full:
                    next_full = now + FULL_SCAN
                orphans = await self.store.adoptable_tables()
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
        sent = time.monotonic()
        try:
            token = await self.store.acquire_lease(table, self.lease_ttl)
        except StoreUnavailable:
            return  # the next scan tries again
        if token is None:
            return
        lease = _Lease(token, self._valid_until(sent))
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

    async def _adopt(self, table: str, lease: _Lease) -> None:
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
            self._host(room, entries, lease)
            if snapshot is not None:
                self._snapshots[table] = snapshot
            resume = Entry(now=self.clock(), command=Resume())
            execute(room, resume)
            resume.seq = room.seq  # after the presence events the resume made
            broadcast, failure = await self._log(room, resume)
            if failure is not None:
                self._unhost(table)  # never hosted without its resume: adopted again later
                return
            if table in self._remote_tables:
                del self._remote_tables[table]  # local now: fan out directly
                with contextlib.suppress(StoreUnavailable):
                    await self.store.unsubscribe(table_channel(table), self._on_table_message)
            log.info("adopted table %s at event %d", table, room.seq)
            self.metrics.tables_adopted.inc()
            self._after(room, broadcast)

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
        room, games = replay_games(entries)
        return entries, None, room, games

    async def _retire(self, table: str, token: int, entries: list[bytes]) -> None:
        """Write a closed table's game record in place of its log, for good (once its games are
        in the records, if this node keeps them: the log is their source until then)."""
        if self.records is not None:
            await self.records.written(table)
        if entries and entries[0] is ELIDED:  # adopted from a snapshot: the record needs it all
            entries = await self.store.read_log(table)
        record = table_record(entries, self.clock())
        players = players_seated(entries)
        await self.store.retire_table(table, token, record, self.record_retention, players)

    def _after(self, room: Room, broadcast: Broadcast | None = None) -> None:
        """After a room changed: fan its update out here, queue the rest, re-arm its timer.

        ``broadcast`` is the update already announced with the log entry; without one, the
        room's pending changes are flushed here (they were not logged: closing at shutdown).
        A closed room is let go at once: it refuses everything from now on.
        """
        if broadcast is None:
            broadcast = room.flush()
        if broadcast is not None:
            self._fan_out(broadcast)
            self._correct_presence(broadcast.table, _away(broadcast))
        lease = self._leases.get(room.id)
        if lease is None or self.rooms.get(room.id) is not room:
            # The lease was found lost while the entry was being written: the entry is logged
            # and its update announced; the next host carries on from the log (what the outbox
            # would have written goes as when a node dies right after a write).
            return
        token = lease.token
        outcome = room.take_outcome()
        if self.records is not None and outcome.games_over:
            self.records.submit(outcome.games_over)
        if room.status == "closed":
            closing_log = self._logs[room.id]
            self._unhost(room.id, keep_lease=True)
            self._closing.add(room.id)
            self._outbox.put_nowait(_Publication(room, broadcast, outcome, token, closing_log))
            return
        self._outbox.put_nowait(_Publication(room, broadcast, outcome, token))
        self._arm(room)

    def _arm(self, room: Room) -> None:
        """Set the room's one timer for its next deadline (replacing any other): a plain timer,
        or, while the store is down, a wait for it to be back."""
        timer = self._timers.pop(room.id, None)
        if timer is not None:
            timer.cancel()
        deadline = room.next_deadline()
        if deadline is None or room.status == "closed":
            return
        if not self.store.health.up:
            self._timers[room.id] = self._spawn(self._arm_when_store_is_up(room))
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, deadline - self.clock())
        retry = self._retry_at.get(room.id)
        if retry is not None:
            delay = max(delay, retry[0] - loop.time())
        self._timers[room.id] = loop.call_later(delay, self._on_timer, room)

    async def _arm_when_store_is_up(self, room: Room) -> None:
        await self.store.health.wait_up()
        if self._timers.get(room.id) is asyncio.current_task():
            del self._timers[room.id]
        if self.rooms.get(room.id) is room:
            self._arm(room)

    def _on_timer(self, room: Room) -> None:
        self._timers.pop(room.id, None)
        if self.rooms.get(room.id) is room:
            self._spawn(self._tick(room))

    async def _tick(self, room: Room) -> None:
        """Run a due timer as a logged command (only if it changed anything)."""
        async with self._lock(room.id):
            if self.rooms.get(room.id) is not room:
                return
            try:
                confirmed = await self._lease_confirmed(room.id)
            except StoreUnavailable:
                self._arm(room)  # waits for the store
                return
            if not confirmed:
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
                # Undone (and re-armed), or dropped: a rebuilt room waits for the store to be
                # back, then for the backoff, before its timer tries again.
                rebuilt = self.rooms.get(room.id)
                if rebuilt is not None:
                    loop = asyncio.get_running_loop()
                    _, delays = self._retry_at.get(room.id, (0.0, STORE_RETRY.delays()))
                    self._retry_at[room.id] = (loop.time() + next(delays), delays)
                    self._arm(rebuilt)
                return
            self._after(room, broadcast)

    async def _settled(self, timeout: float = 2.0) -> None:
        """Wait until what this node queued for the store has been written."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._outbox.join(), timeout)

    async def _drain_outbox(self) -> None:
        """Do, in order, what a room change needs outside this process: store and bus. While
        the store is down an item waits for it (on the shared backoff), in order."""
        while True:
            item = await self._outbox.get()
            try:
                delays = STORE_RETRY.delays()
                while True:
                    try:
                        await self._publish(item)
                        break
                    except StoreUnavailable:
                        await self.store.health.wait_up()
                        await asyncio.sleep(next(delays))
            except LeaseLost:
                lease = self._leases.get(item.room.id)
                if lease is not None and lease.token == item.token:
                    self._lose(item.room.id)
                    self._leases.pop(item.room.id, None)
            except Exception:
                log.exception("publishing an update of %s failed", item.room.id)
            finally:
                if item.closing_log is not None:
                    self._closing.discard(item.room.id)
                    self._locks.pop(item.room.id, None)
                    lease = self._leases.get(item.room.id)
                    if lease is not None and lease.token == item.token:
                        del self._leases[item.room.id]
                self._outbox.task_done()

    async def _publish(self, item: _Publication) -> None:
        """One outbox item; may be called again after :class:`StoreUnavailable` (idempotent)."""
        room, broadcast, outcome, store = item.room, item.broadcast, item.outcome, self.store
        for result in outcome.ranked:
            await self._rank(result)
        if item.closing_log is not None:
            await self._retire(room.id, item.token, item.closing_log)
            if room.listed:
                removed = bus.LobbyChanged(update=v1.LobbyUpdate(removed=[room.id]))
                with contextlib.suppress(StoreUnavailable):  # listings drop it anyway
                    await store.publish(LOBBY_CHANNEL, bus.encode(removed))
            return
        for player in outcome.seated:
            await store.add_player_table(player, room.id)
        for player in outcome.unseated:
            await store.remove_player_table(player, room.id)
        if broadcast is not None and broadcast.info is not None:
            record = msgspec.msgpack.encode(broadcast.info)
            await store.put_table(room.id, self.id, record, room.listed, item.token)
            if room.listed:
                changed = v1.LobbyUpdate(tables=[broadcast.info])
                await store.publish(LOBBY_CHANNEL, bus.encode(bus.LobbyChanged(update=changed)))

    # ------------------------------------------------------------------ fan-out
    async def _watch(self, client: Client, table: str, seat: int | None, seq: int) -> None:
        watch = Watch(seat, seq)
        self.watchers.setdefault(table, {})[client] = client.tables[table] = watch
        if table not in self.rooms:
            await self._follow(table)
            # The table may have been adopted here meanwhile: then its updates come directly.
            for broadcast in self._remote_tables.get(table, ()):
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
            try:
                await self.store.subscribe(table_channel(table), self._on_table_message)
            except BaseException:
                self._remote_tables.pop(table, None)  # not followed: the next try subscribes
                raise

    async def _follow_lost(self, table: str) -> None:
        """Keep the viewers here of a table this node lost: follow it where it goes, and resync
        each of them, since what happened to it meanwhile (an adoption elsewhere, commands its
        new host took while this node was paused) was announced before this node listened."""
        await self._follow(table)
        await asyncio.gather(
            *(self._catch_up_viewer(client, table) for client in list(self.watchers.get(table, {})))
        )

    async def _unfollow_if_unwatched(self, table: str) -> None:
        if table in self._remote_tables and not self.watchers.get(table):
            del self._remote_tables[table]
            with contextlib.suppress(StoreUnavailable):
                await self.store.unsubscribe(table_channel(table), self._on_table_message)

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
        recent = self._remote_tables.get(broadcast.table)
        if recent is not None:
            recent.append(broadcast)
            self._fan_out(broadcast)
            self._correct_presence(broadcast.table, update.away)

    def _on_bus_recovered(self) -> None:
        self._spawn(self._catch_up())

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
        (the host's own bus may come back later than this node's) or the table is moving."""
        delays = STORE_RETRY.delays()
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
                isinstance(reply, v1.Error)
                and reply.code in (ErrorCode.UNAVAILABLE, ErrorCode.MOVING)
                for reply in answer.replies
            ):
                await self._deliver_answer(client, answer)
                return
            await asyncio.sleep(next(delays))

    def _correct_presence(self, table: str, away: list[int]) -> None:
        """A table's host counts a player away (its new host counts everyone away until told
        otherwise, and a player's old connection may close after they came back elsewhere):
        tell it about the players still connected here."""
        if not away:
            return
        for client, watch in list(self.watchers.get(table, {}).items()):
            if watch.seat in away and not client.closing:
                self._spawn(self._still_connected(client, table))

    async def _still_connected(self, client: Client, table: str) -> None:
        message = ConnectionChanged(table=table, connected=True)
        with contextlib.suppress(StoreUnavailable, TimeoutError):
            await self.route(client.player, client.name, table, message)

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
            message = bus.decode(data)
        except msgspec.DecodeError:
            log.warning("undecodable lobby update dropped")
            return
        if not isinstance(message, bus.LobbyChanged):
            return
        update = message.update
        frames: dict[bool, str | bytes] = {}
        for client in list(self.lobby_watchers):
            frame = frames.get(client.binary)
            if frame is None:
                frame = frames[client.binary] = encode(update, client.binary)
            client.send_frame(frame)


async def _nap(seconds: float, wake: asyncio.Event) -> None:
    """Sleep ``seconds``, or less if ``wake`` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await wake.wait()
