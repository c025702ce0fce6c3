"""Hosting: the rooms this node hosts, fenced log appends, undo, timers, the outbox, handover.

Theory of operation
-------------------
A room is hosted while this node holds its lease (held and renewed by :class:`Leases`, which
:class:`Hosting` owns: ``blackdrez.server.node.leases`` explains the validity deadline every
command checks first). Every command is executed under the table's lock and appended to the
table's log in the store (fenced by the lease's token and the position it must take) together
with the update's announcement and, when the command changed what the lobby shows, the table's
lobby record and its lobby change, before anyone hears of its effects; a failed append undoes
the command by rebuilding the room from the log written so far. A lease found lost drops the
room at once; the node then looks for orphans and keeps the table's viewers here following it
wherever it goes (``blackdrez.server.node.fanout``).

An action (nearly every command) is served without a coroutine where it can be
(:meth:`Hosting.act_soon`): executed at once, its append handed to the store with a callback
(``TableLogs.append_soon``), and everything after it (the entry kept, the update fanned out,
the reply, the table's lock freed) done in that callback, the one that reads the store's reply
on Redis; awaited, it resumed a loop turn later, behind every other table's action of that turn.

Every ``SNAPSHOT_EVERY`` entries the room is snapshotted (kept here to undo from, stored for an
adopter).

Quiet tables: a table's updates are announced on its channel for the other nodes that serve its
viewers. When the store says an announcement reached nobody (no node was subscribed), the table
goes *quiet* and its updates are no longer announced (nor encoded for the bus) until a node asks
this one for the table: every node subscribes to a table's channel before it forwards the first
request of a watcher (``spectate``, ``join``, ``resync``: ``blackdrez.server.node.routing``), and
any forwarded request for the table makes it loud again before it runs (:meth:`Hosting.asked`),
so a new follower misses nothing: what was not announced is in the answer it gets. A "nobody
heard" that comes back after such a request arrived counts for nothing (the append went out
before the follower asked). The flag lives on the table's lease, so a table adopted or created
again starts loud.

Other side effects outside the room (player sets, scores, retirement of a closed table) go
through one outbox task, in order, retried on :data:`STORE_RETRY` while the store is down.
At a rated table the players' ratings are read from the records when someone sits down and once
a finished game is stored, and logged as a command of the host's (``Ratings``), so the table's
info carries them to the lobby and the table's viewers like any other change. One reader per
table: a sit-down while it reads makes it read once more, and a read the records database fails
(an outage) is tried again on :data:`RECORDS_RETRY` for as long as the table has players. Such
a command of the host's (``Ratings``, or a solitaire's ``ParFound`` from the hint worker) whose
append fails is tried again on :data:`STORE_RETRY` once the store is back, for as long as the
table stays here.

At shutdown (:meth:`Hosting.stop`) every room is handed over to the other nodes when the store is
shared (its lease released, a ``Handover`` announced: they adopt it from its log at once), else
closed. For the presence of players who ask through other nodes, hosting notes the node (and
process) each viewer's last request came through (``blackdrez.server.node.routing``).

Hosting owns everything kept per hosted table; its collaborators are given to it: the store,
the node's clock (``blackdrez.server.node.clock``), fan-out (updates to the viewers here), the
bots the host adds (``blackdrez.server.node.bots.TableBots``), a way to spawn background tasks,
and the node's call to look for orphans soon.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

from blackdrez.games import GAMES
from blackdrez.games.shuffle import new_seed
from blackdrez.protocol import v1
from blackdrez.protocol.errors import ErrorCode
from blackdrez.server import bus, tracing
from blackdrez.server.hints import HintWorker
from blackdrez.server.metrics import Metrics
from blackdrez.server.node.arena_scores import score_in_arena
from blackdrez.server.node.clock import Clock
from blackdrez.server.node.held_log import ELIDED as ELIDED
from blackdrez.server.node.held_log import HeldLog
from blackdrez.server.node.leases import Lease, Leases
from blackdrez.server.node.seams import (
    REQUEST_FAILED,
    STORE_RETRY,
    Spawn,
    closed_answer,
    error_answer,
    moving_answer,
)
from blackdrez.server.ratelimit import KeyedBuckets, TokenBucket
from blackdrez.server.retry import Backoff
from blackdrez.server.stores import LeaseLost, Stores, StoreUnavailable
from blackdrez.server.stores.base import (
    LOBBY_CHANNEL,
    Append,
    LobbyRecord,
    TableLogs,
    table_channel,
)
from blackdrez.server.table import assist
from blackdrez.server.table.commands import (
    NEEDS_SEED,
    Answer,
    Create,
    GivenHint,
    LogEntry,
    ParFound,
    Ratings,
    Stop,
    encode_entry,
    execute,
    new_room,
    timer_entry,
)
from blackdrez.server.table.records import players_seated, table_record
from blackdrez.server.table.room import Broadcast, GameOver, Outcome, Room, RoomError
from blackdrez.server.table.snapshots import SNAPSHOT_EVERY
from blackdrez.server.table.snapshots import rebuild as rebuild_from_snapshot
from blackdrez.server.table.snapshots import take as take_snapshot

if TYPE_CHECKING:
    from blackdrez.server.node.bots import TableBots
    from blackdrez.server.node.fanout import Fanout

log = logging.getLogger("blackdrez.node")

SOLITAIRE_PREFIX = "s"
"""The first letter of a solitaire session's table id (a BlackDrez table's is ``t``)."""


def is_solitaire_id(table: str) -> bool:
    """Whether ``table`` names a solitaire session (from its id alone, without a look-up)."""
    return table.startswith(SOLITAIRE_PREFIX)


HINT_RATE = 1.0
"""Hints a table may ask for per second on average (a token bucket per hosted table)..."""
HINT_BURST = 5
"""...and at once: a hint costs a worker up to a second of CPU (``blackdrez.server.hints``)."""

CHAT_RATE = 0.5
"""Chat lines one player may write at one table per second on average (a token bucket per
player and table: ``rate_limited`` past it, the connection stays)..."""
CHAT_BURST = 5
"""...and at once."""
REPORT_RETENTION = 30 * 86_400.0
"""Seconds a reported chat line (with its context) is kept for the operators."""
REPORT_RATE = 1 / 30
"""Reports one player may file per second on average through this node (one every 30 s)..."""
REPORT_BURST = 5
"""...and at once: a flood of reports would push the real ones out of the operators' list."""
CHAT_KEYS = 20_000
"""Players and tables whose chat buckets are remembered at most (a full bucket is forgotten)."""
OUTBOX_WRITERS = 8
"""Tables whose outbox items are written at once. Serial, a busy node on Redis (1,200 players
seated in a second, each a round trip on a loop some ms behind) fell 12 s behind, every finished
game queued after the seats; eight writers keep the store's connections few."""

EARLY = 0.001
"""A room's timer that fires more than this many seconds before its deadline (set before the
deadline moved later: ``Hosting._set_timer``) sets itself again instead of ticking."""
RECORDS_RETRY = Backoff(first=0.2, cap=5.0)
"""How a read of the ratings that the records database failed is tried again."""
RECORDS_LEAST_PAUSE = 0.2
"""Seconds a table's ratings reader waits after a failed read even when a sit-down wakes it."""

MOVING_AWAY = (ErrorCode.MOVING, "the table is moving to another node: try again")
"""The refusal of a command whose table this node stopped hosting while it was being logged."""


class GameRecords(Protocol):
    """The records of finished games (``blackdrez.server.records.writer.RecordsWriter``)."""

    def submit(self, games: Iterable[GameOver]) -> None:
        """Queue games whose end is logged, to be stored (again, after a failover: harmless)."""

    async def written(self, table: str) -> bool:
        """Wait (bounded) until the table's submitted games are stored."""

    async def seat_ratings(self, game: str, players: list[str]) -> dict[str, v1.SeatRating]:
        """The current rating in ``game`` of each of ``players`` (the initial one for a player
        not rated yet)."""


def away_seats(broadcast: Broadcast) -> list[int]:
    """The seats an update marks away."""
    return [
        numbered.event.seat
        for numbered in broadcast.events
        if isinstance(numbered.event, v1.PresenceChanged) and not numbered.event.connected
    ]


async def rank(store: Stores, result: assist.Finished, clock: Clock, retention: float) -> None:
    """Put a ranked game on its boards (its day's and all time's) with its record;
    idempotent, like every outbox step of hosting that calls it (a retry submits the same
    entries)."""
    if result.ranked_at is None:
        result.ranked_at = clock.time()
    now = result.ranked_at
    day = result.daily or assist.day_of(now)
    deal: Literal["daily", "random"] = "daily" if result.daily else "random"
    kept = msgspec.msgpack.encode(assist.KeptRecord(daily=result.daily, record=result.record))
    # Kept for a while first (a board never links to a record not there), for good once
    # the game is on a board: one that beat none of the player's entries is not kept.
    await store.leaderboards.keep_record(result.id, kept, retention)
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
    placed = False
    for period in (day, None):
        name = assist.board(result.game, deal, assisted, period)
        placed |= await store.leaderboards.submit(name, result.player, data, result.score)
    if placed:
        await store.leaderboards.keep_record(result.id, kept)


class TableLock(list["asyncio.Future[None]"]):
    """A table's lock (:meth:`Hosting.lock`): it exists while someone holds it, and is the list
    of the commands waiting for it, first come first: the lock passes to each in turn (as
    ``asyncio.Lock`` does, without a lock object, a coroutine and four calls of its own made
    for each command; a list, made without a call of ours)."""

    __slots__ = ()

    @property
    def users(self) -> int:
        """Coroutines holding the lock or waiting for it."""
        return 1 + sum(not waiter.done() for waiter in self)


class HeldLock:
    """``async with`` one table's lock in ``locks``: made by the first user, dropped by the
    last (a class, not a generator: this runs at every command)."""

    __slots__ = ("_entry", "_locks", "_table")

    def __init__(self, locks: dict[str, TableLock], table: str) -> None:
        self._locks = locks
        self._table = table

    async def __aenter__(self) -> None:
        entry = self._locks.get(self._table)
        if entry is None:  # nobody holds it: taken, without waiting
            self._entry = self._locks[self._table] = TableLock()
            return
        self._entry = entry
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry.append(waiter)
        try:
            await waiter
        except BaseException:  # cancelled while waiting, or once handed the lock
            if waiter.done() and not waiter.cancelled():
                self._release()  # it was ours: the next in line has it
            elif waiter in entry:
                entry.remove(waiter)
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        waiters = self._entry
        if waiters:
            self._release()
        else:  # (nobody waits: nearly always)
            del self._locks[self._table]

    def _release(self) -> None:
        release_lock(self._locks, self._table)


def release_lock(locks: dict[str, TableLock], table: str) -> None:
    """Hand ``table``'s lock to the first still waiting for it, or drop it if none is."""
    waiters = locks[table]
    while waiters:
        waiter = waiters.pop(0)
        if not waiter.done():  # (a cancelled one has left)
            waiter.set_result(None)
            return
    del locks[table]


def lobby_record(node: str, room: Room, info: v1.TableInfo) -> LobbyRecord:
    """The room's lobby record with ``info`` (hosted by ``node``), and for a listed table its
    lobby change.

    Written with the log entry that changed it (one store call: a BlackDrez round changes the
    record about twice, so most actions do). A closed table's record goes with its retirement
    instead (the only change not logged, closing at shutdown, closes the room)."""
    record = msgspec.msgpack.encode(info)
    if not room.listed:
        return LobbyRecord(node, record, listed=False)
    changed = bus.LobbyChanged(update=v1.LobbyUpdate(tables=[info]))
    return LobbyRecord(node, record, True, LOBBY_CHANNEL, bus.encode(changed))


async def store_snapshot(
    logs: TableLogs, table: str, token: int, position: int, data: bytes
) -> None:
    """Store a room's snapshot (fenced by its lease): one that cannot be stored costs a longer
    replay at adoption, nothing more."""
    with contextlib.suppress(StoreUnavailable, LeaseLost):
        await logs.put_snapshot(table, token, position, data)


def over_limit(
    buckets: KeyedBuckets, key: str, now: float, message: Any, why: str
) -> Answer | None:
    """``rate_limited`` (with when to try again) if ``key`` has no token left in ``buckets``
    at ``now``, else ``None`` (a token spent)."""
    if buckets.take(key, now):
        return None
    return error_answer(message, ErrorCode.RATE_LIMITED, why, buckets.retry_after(key))


def hint_ahead(hints: HintWorker, room: Room, helped: assist.Assist) -> None:
    """A solitaire session moved: the hint worker started before its first hint, and once the
    game has asked for one, the move for the new position computed before it is asked for
    (``blackdrez.server.hints``: the next hint then comes at once)."""
    if not helped.hints:
        hints.warm()
    elif room.status == "playing":
        job = assist.hint_job(room.spec.name, room.engine, 0)
        if job is not None:
            hints.ahead(job)


class _Appending(msgspec.Struct):
    """A log entry on its way to the store (:meth:`Hosting.append_entry`,
    :meth:`Hosting.act_soon`): the append, and what is kept for when it is settled. (A
    struct: made without a call of ours, at every action.)"""

    room: Room
    data: bytes
    entries: HeldLog
    lease: Lease
    broadcast: Broadcast | None
    """The update the entry makes (announced with it: fanned out here once logged)."""
    asked: int
    """Forwarded requests for tables when it went out (``Hosting._tables_asked``): a node
    that asks meanwhile may have subscribed before the append's announcement."""
    append: Append


@dataclass
class RatingsWanted:
    """What a rated table's ratings reader must do next (:meth:`Hosting.show_ratings`)."""

    after_games: bool
    """Wait until the table's finished games are stored first (they move the ratings)."""
    again: bool = True
    """Read (again): someone sat down, games ended, or the last try failed."""
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by a request that comes while the reader waits out a failed read: it reads at once
    (the database may be back) instead of at the pause's end."""

    def want(self, *, after_games: bool) -> None:
        """Someone sat down, or games ended: read once more, without waiting."""
        self.again = True
        self.after_games |= after_games
        self.woken.set()

    async def pause(self, delay: float, least: float) -> None:
        """Wait ``delay`` seconds after a failed read, or until :meth:`want` is called but
        ``least`` seconds at the least (a sit-and-leave flood during an outage then tries the
        database a few times a second, not once per sit-down)."""
        self.woken.clear()
        await asyncio.sleep(min(least, delay))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, delay - least)):
                await self.woken.wait()


NOTHING_OUTSIDE = Outcome()
"""The outcome of a change with no side effect outside the room (never changed)."""


@dataclass
class Publication:
    """An outbox item: what a room change needs outside this process."""

    room: Room
    outcome: Outcome
    """Taken right after the logged change: a later command that fails and is undone must
    not add its side effects to this one's."""
    token: int
    closing_log: HeldLog | None = None
    """The room's whole log when the change closed it (its game record is made from it)."""
    closing_snapshot: tuple[int, bytes] | None = None
    """The room's latest snapshot then, if any (a long table's record keeps it)."""


def _needs_store(room: Room, outcome: Outcome) -> bool:
    """Whether :meth:`Hosting._publish` has anything to write for ``outcome`` (a game's end
    alone has not: its record went to the records writer with its log entry)."""
    return bool(
        outcome.ranked
        or outcome.seated
        or outcome.unseated
        or (outcome.games_over and room.arena is not None)
    )


class Hosting:
    """The rooms hosted here: their commands, log appends, timers, outbox and handover."""

    def __init__(
        self,
        store: Stores,
        metrics: Metrics,
        clock: Clock,
        *,
        fanout: Fanout,
        bots: TableBots,
        spawn: Spawn,
        scan_soon: Callable[[], None],
        lease_ttl: float,
        record_retention: float,
        renewal_store: Callable[..., Stores] | None = None,
        seed_source: Callable[[], str] = new_seed,
        hints: HintWorker | None = None,
        hint_rate: float = HINT_RATE,
        hint_burst: int = HINT_BURST,
    ) -> None:
        self.store = store
        self.id = store.node_id
        self.metrics = metrics
        self.clock = clock
        self.fanout = fanout
        """Where a hosted room's updates go to this node's viewers."""
        self.bots = bots
        """The bots the host added at each table, holding their seats until they come."""
        self._spawn = spawn
        self._scan_soon = scan_soon
        """Looks for orphans soon (failover): after this node lost a table's lease."""
        self.record_retention = record_retention
        """Seconds a closed table's game record stays in the store."""
        self.seed_source = seed_source
        """Makes the seed of each game started here (a test may fix it)."""
        self.hints = hints if hints is not None else HintWorker()
        """Computes hints and pars off the event loop (``blackdrez.server.hints``)."""
        self.hint_rate = hint_rate
        self.hint_burst = hint_burst
        self.records: GameRecords | None = None
        """Where finished games go once their log entry is written (``bind_records``)."""
        self.stopping = False
        """The node is stopping: it hands its tables over, hosts nothing new, adopts nothing."""
        self.leases = Leases(
            store,
            clock,
            lease_ttl,
            lost=self._lease_lost,
            stopping=lambda: self.stopping,
            renewal_store=renewal_store,
        )
        self.rooms: dict[str, Room] = {}
        self.closing: set[str] = set()
        """Tables closed here whose retirement is not yet written: ``not_found`` already."""
        self._command_logs: dict[str, HeldLog] = {}
        """Per hosted room, its log as written: what a failed write is undone from."""
        self._snapshots: dict[str, tuple[int, bytes]] = {}
        """Per hosted room, its latest snapshot: the entry it was taken at, and its bytes."""
        self._locks: dict[str, TableLock] = {}
        """The lock of each table a command runs or waits at (:meth:`lock`)."""
        self._timers: dict[str, asyncio.TimerHandle | asyncio.Task[None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        """The event loop the timers are set on (the first one that set one)."""
        """At most one pending timer per hosted room (a timer, or a wait for the store)."""
        self._retry_at: dict[str, tuple[float, Iterator[float]]] = {}
        """Rooms whose last timer write failed: not before when (monotonic) to try again, and
        the backoff."""
        self._outbox: asyncio.Queue[Publication] = asyncio.Queue()
        self._tables_asked = 0
        """Requests forwarded here for tables, counted ("Quiet tables" above)."""
        self._health = store.health
        """The store's health (the bundle's, fixed: read by every command)."""
        self._shared = store.shared
        self._viewed_from: dict[str, dict[str, tuple[str, str | None]]] = {}
        """Per hosted table, the node each player's last request for it came through, and that
        node's process (incarnation): when that node stops heartbeating, or heartbeats as
        another process, its players are away (:meth:`viewers_gone`)."""
        self._hint_buckets: dict[str, TokenBucket] = {}
        """Per hosted table, its hints' rate limit (made at its first hint)."""
        self._chat_buckets = KeyedBuckets(CHAT_RATE, CHAT_BURST, CHAT_KEYS)
        """Per player and hosted table, the chat's rate limit (``"table player"``)."""
        self._report_buckets = KeyedBuckets(REPORT_RATE, REPORT_BURST, CHAT_KEYS)
        """Per player, the reports' rate limit (the tables hosted here)."""
        self._pars: set[tuple[str, int]] = set()
        """``(table, game)`` whose par the worker is finding."""
        self._ratings_wanted: dict[str, RatingsWanted] = {}
        """Per rated table whose players' ratings are being read, what its reader must do next."""

    def bind_records(self, records: GameRecords) -> None:
        """Keep records of finished games (the server opens the records database after the node
        is built): each game's end goes to ``records`` once logged; rated tables read ratings."""
        self.records = records

    async def stop(self, reason: str) -> None:
        """Stop hosting: hand every room over to the other nodes when the store is shared
        (they adopt it from its log at once), else close it; wait for the outbox; stop the
        lease renewals' thread."""
        self.stopping = True
        for timer in self._timers.values():
            timer.cancel()
        handed_over = False
        for _ in range(2):  # twice: a table being created when the stop began comes after
            for room in list(self.rooms.values()):
                if self.store.shared:
                    await self._hand_over(room)
                    handed_over = True
                else:
                    async with self.lock(room.id):
                        room.close(reason)
                        self.publish_change(room)
        if handed_over:
            with contextlib.suppress(StoreUnavailable):
                await self.store.bus.publish(
                    bus.HANDOVER_CHANNEL, bus.encode(bus.Handover(node=self.id))
                )
        await self.settled()
        await self.leases.stop()

    async def _hand_over(self, room: Room) -> None:
        """Give a room up to the other nodes (graceful shutdown with a shared store)."""
        async with self.lock(room.id):
            lease = self.leases.held.get(room.id)
            self.unhost(room.id)
            self.metrics.tables_handed_over.inc()
            if lease is not None:
                with contextlib.suppress(StoreUnavailable):
                    await self.store.leases.release(room.id, lease.token)

    def asked(self, table: str) -> None:
        """Another node forwarded a request for ``table``: it may follow the table now (it
        subscribes first), so announce its updates again ("Quiet tables" above)."""
        self._tables_asked += 1
        lease = self.leases.held.get(table)
        if lease is not None:
            lease.quiet = False

    def viewed_through(self, table: str, player: str, node: str, incarnation: str | None) -> None:
        """Note the node ``player`` asked through, and which process of it (``None``: a node of
        an older version does not say), while they sit or watch at ``table`` (still hosted
        here: it may have moved meanwhile); else forget it (one entry per viewer)."""
        room = self.rooms.get(table)
        if room is not None and (
            room.seating.seat_of(player) is not None or player in room.spectators
        ):
            self._viewed_from.setdefault(table, {})[player] = (node, incarnation)
        elif table in self._viewed_from:
            self._viewed_from[table].pop(player, None)

    def viewers_gone(
        self, stopped: set[str], beating: dict[str, str | None]
    ) -> list[tuple[str, str, bool]]:
        """The viewers of tables hosted here whose last request came through a node that
        stopped heartbeating (killed, or stopped: a stopping node leaves the presence of its
        viewers to the tables' hosts), or that heartbeats as another process than the one they
        asked through (restarted under the same node id within the heartbeat TTL, so it never
        stopped), forgotten here: ``(player, table, seated)`` each, for the caller to count
        away, as when a connection closes (``Node.detach``); a player back since, through
        another node or the new process, has asked through that one. ``beating``: every live
        node and its process (``Presence.live_incarnations``)."""
        gone = []
        for table, viewers in list(self._viewed_from.items()):
            room = self.rooms.get(table)
            if room is None:
                continue
            for player, (node, incarnation) in list(viewers.items()):
                if node in stopped or beating.get(node, incarnation) != incarnation:
                    del viewers[player]
                    gone.append((player, table, room.seat_of(player) is not None))
        return gone

    def lock(self, table: str) -> HeldLock:
        """``async with`` it to hold ``table``'s lock: one command (or timer, adoption,
        handover) of a table at a time. A lock exists while someone holds or awaits it, and no
        longer: a table that moves away or closes leaves none behind, and a new one is made
        only when nobody holds the old one, so two commands of a table never run at once."""
        return HeldLock(self._locks, table)

    async def new_room(
        self,
        game: str,
        host: str,
        options: v1.TableOptions,
        deal: int | None,
        *,
        daily: str | None = None,
        ranked: bool = False,
        rank: Callable[[str], Awaitable[bool]] | None = None,
        spectator_chat: bool = True,
        arena: str | None = None,
    ) -> Room:
        """Create a room hosted here: leased, logged and listed before anyone hears of it.

        ``rank``, if given, decides ``ranked`` once the table is leased (a daily deal's claim
        names the table, which other nodes then find hosted); a :class:`RoomError` it raises
        refuses the room, whose id is retired unused."""
        table_id = (SOLITAIRE_PREFIX if GAMES[game].solitaire else "t") + secrets.token_hex(5)
        lease = await self.leases.acquire(table_id)  # renewed from now on: the writes may be slow
        if lease is None:
            raise StoreUnavailable("a fresh table id was already leased")
        token = lease.token
        try:
            if rank is not None:
                ranked = await self._ranked_or_retired(table_id, token, rank)
            create = Create(
                table=table_id,
                game=game,
                host=host,
                options=options,
                listed=not GAMES[game].solitaire and not options.private,
                invite=secrets.token_urlsafe(6) if options.private else None,
                deal=deal,
                daily=daily,
                ranked=ranked,
                spectator_chat=spectator_chat,
                arena=arena,
            )
            now = self.clock.time()
            room = new_room(create, now)
            first = encode_entry(LogEntry(now=now, command=create))
            await self.store.logs.append(Append(table_id, token, 1, first))
            record = msgspec.msgpack.encode(room.info())
            await self.store.lobby.put(table_id, self.id, record, room.listed, token)
        except BaseException:
            self.leases.forget(table_id)
            raise
        self.host(room, [first], lease)
        return room

    async def _ranked_or_retired(
        self, table_id: str, token: int, rank: Callable[[str], Awaitable[bool]]
    ) -> bool:
        """``rank(table_id)``; if it refuses the room, the leased id is retired first (as an
        adopter retires a table whose node died before creating it): its keys end like a closed
        table's, and nobody can lease it again."""
        try:
            return await rank(table_id)
        except RoomError:
            await self.store.logs.retire(table_id, token, b"", self.record_retention)
            raise

    def host(
        self,
        room: Room,
        log_entries: HeldLog | list[bytes],
        lease: Lease,
        snapshot: tuple[int, bytes] | None = None,
    ) -> None:
        """Host ``room`` under ``lease``: its log as written so far, and its latest snapshot
        (the entry it was taken at, and its bytes), if any."""
        self.rooms[room.id] = room
        if not isinstance(log_entries, HeldLog):
            log_entries = HeldLog(log_entries)
        self._command_logs[room.id] = log_entries
        self.leases.hold(room.id, lease)
        if snapshot is not None:
            self._snapshots[room.id] = snapshot
        self.metrics.tables.labels(room.spec.name).inc()

    def unhost(self, table: str, *, keep_lease: bool = False) -> Room | None:
        """Stop hosting ``table`` and forget everything held for it here (its lease too,
        unless ``keep_lease``: a closed table's, until its retirement is written)."""
        room = self.rooms.pop(table, None)
        self.bots.forget(table)
        self._viewed_from.pop(table, None)
        self._command_logs.pop(table, None)
        self._snapshots.pop(table, None)
        self._retry_at.pop(table, None)
        self._hint_buckets.pop(table, None)
        if not keep_lease:
            self.leases.forget(table)
        timer = self._timers.pop(table, None)
        if timer is not None:
            timer.cancel()
        if room is not None:
            self.metrics.tables.labels(room.spec.name).dec()
        return room

    async def execute(
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
        started = time.perf_counter()  # waiting for the table's lock and lease counts too
        async with HeldLock(self._locks, room.id):  # (``lock``, without its call)
            current = self.rooms.get(room.id)
            if current is None:
                return (
                    closed_answer(message, room.id)
                    if room.id in self.closing
                    else moving_answer(message)
                )
            if not self._health.up:
                return error_answer(message, ErrorCode.UNAVAILABLE, "the store cannot be reached")
            if not self.leases.fresh(room.id):
                try:
                    if not await self.leases.confirmed(room.id):
                        return moving_answer(message)
                except StoreUnavailable:
                    return error_answer(
                        message, ErrorCode.UNAVAILABLE, "the store cannot be reached"
                    )
            room = current  # it may have been rebuilt while this request waited
            acting = type(message) is v1.Act  # (nearly every command: none of what follows)
            hint = None
            if not acting:
                if isinstance(message, v1.AddBots):
                    return self.bots.add(room, player, message)
                if isinstance(message, v1.Report):
                    return await self._file_report(room, player, name, message)
                if isinstance(message, v1.Say):
                    refused = over_limit(
                        self._chat_buckets,
                        f"{room.id} {player}",
                        self.clock.monotonic(),
                        message,
                        "too many lines at once: wait a moment before the next",
                    )
                    if refused is not None:
                        return refused
                if isinstance(message, v1.Hint):
                    found = await self._find_hint(room, player, message)
                    if isinstance(found, Answer):
                        return found
                    hint = found
                seed = (seed or self.seed_source()) if isinstance(message, NEEDS_SEED) else None
                if isinstance(message, v1.JoinTable):
                    refusal = self.bots.claim_held_seat(room, player, message)
                    if refusal is not None:
                        return refusal
            else:
                seed = None
            entry = LogEntry(
                now=self.clock.time(),
                command=message,
                player=player,
                name=name,
                bot=bot,
                seed=seed,
                hint=hint,
            )
            version = room.version
            try:
                answer = execute(room, entry)
            except RoomError as error:
                return error_answer(message, error.code, error.message)
            if room.version == version:
                return answer  # nothing changed: nothing to log or broadcast
            entry.seq = room.log.seq  # (``room.seq``, without the property)

            def published(room: Room, broadcast: Broadcast | None) -> None:
                self.publish_change(room, broadcast)
                if acting:
                    self.metrics.observe_action(time.perf_counter() - started)

            _, failure = await self.append_entry(room, entry, then=published, replying_to=player)
            if failure is not None:
                return error_answer(message, *failure)
            return answer

    async def _file_report(self, room: Room, player: str, name: str, message: v1.Report) -> Answer:
        """File ``player``'s report of a chat line with the operators (the reports store): the
        table changes nothing, logs nothing, and tells nobody."""
        try:
            report = room.chat.report(
                room.seating,
                room.id,
                player,
                name,
                message,
                at=self.clock.time(),
                id=secrets.token_urlsafe(9),
            )
        except RoomError as error:
            return error_answer(message, error.code, error.message)
        refused = over_limit(
            self._report_buckets,
            player,
            self.clock.monotonic(),
            message,
            "too many reports: the moderators have yours, wait before the next",
        )
        if refused is not None:
            return refused
        try:
            await self.store.reports.add(
                msgspec.msgpack.encode(report), at=report.at, keep=REPORT_RETENTION
            )
        except StoreUnavailable:
            return error_answer(message, ErrorCode.UNAVAILABLE, "the store cannot be reached")
        return Answer(replies=[v1.Ok(id=message.id, seq=room.seq)])

    async def _find_hint(self, room: Room, player: str, message: v1.Hint) -> GivenHint | Answer:
        """The hint for ``player`` from the node's worker (``blackdrez.server.hints``), or the
        answer
        refusing it: not allowed now, too many hints (``rate_limited``), or the table moved
        meanwhile. Nothing is changed here: the caller logs the ``hint`` with its move.

        The table's lock is held while the worker computes (the event loop serves everything
        else): none of this table's commands runs meanwhile, so the move is for the state the
        player asked in, which is still the state it is given in.
        """
        try:
            job = room.hint_job(player)
        except RoomError as error:
            return error_answer(message, error.code, error.message)
        bucket = self._hint_buckets.get(room.id)
        if bucket is None:
            bucket = TokenBucket(self.hint_rate, self.hint_burst, self.clock.monotonic())
            self._hint_buckets[room.id] = bucket
        if not bucket.take(self.clock.monotonic()):
            return error_answer(
                message,
                ErrorCode.RATE_LIMITED,
                "too many hints: wait a moment before the next",
                bucket.retry_after(),
            )
        move, by = (None, "expert") if job is None else await self.hints.move(job)
        if self.rooms.get(room.id) is not room:  # dropped (lease lost) or rebuilt meanwhile
            return moving_answer(message)
        try:
            if not await self.leases.confirmed(room.id):
                return moving_answer(message)
        except StoreUnavailable:
            return error_answer(message, ErrorCode.UNAVAILABLE, "the store cannot be reached")
        return GivenHint(action=move, by=by)

    def _want_par(self, room: Room) -> None:
        """Have the worker find the par of the room's finished game, if it wants one and none
        is being found (the room just finished, or was adopted or rebuilt before its par was
        logged)."""
        game = room.par_wanted
        if game is None or (room.id, game) in self._pars:
            return
        self._pars.add((room.id, game))
        self._spawn(self._find_par(room.id, game, room.spec.name, room.engine.dump()))

    async def _find_par(self, table: str, game: int, name: str, dump: bytes) -> None:
        """Compute a finished game's par off the event loop, then log it (``ParFound``) while
        the room still wants it (see :meth:`log_host_command`)."""
        try:
            par = await self.hints.par(name, dump)
            delays = STORE_RETRY.delays()
            while True:
                room = self.rooms.get(table)
                if room is None or room.par_wanted != game:
                    return
                if await self._log_host_command(table, ParFound(game=game, par=par)):
                    return
                await self.store.health.wait_up()
                await asyncio.sleep(next(delays))
        finally:
            self._pars.discard((table, game))

    async def _log_host_command(self, table: str, command: Any) -> bool:
        """Try once to log a command of the host's (``Ratings``, ``ParFound``) on a hosted
        table, and return whether that is settled: logged, changing nothing, or no longer this
        node's to log (the table moved or closed: its next host reads the ratings or finds the
        par again). ``False``: the store could not take it; the caller tries again on the one
        retry policy (:data:`STORE_RETRY`, once the store is back), so that what the table
        learnt while Redis was down is not lost while the table stays here."""
        async with self.lock(table):
            room = self.rooms.get(table)
            if room is None:
                return True
            if not self._health.up:
                return False
            try:
                if not await self.leases.confirmed(table):
                    return True
            except StoreUnavailable:
                return False
            entry = LogEntry(now=self.clock.time(), command=command)
            version = room.version
            try:
                execute(room, entry)
            except RoomError:
                return True
            if room.version == version:
                return True
            entry.seq = room.seq
            _, failure = await self.append_entry(room, entry, then=self.publish_change)
            if failure is None:
                return True
            return failure[0] is not ErrorCode.UNAVAILABLE

    async def append_entry(
        self,
        room: Room,
        entry: LogEntry,
        *,
        then: Callable[[Room, Broadcast | None], None] | None = None,
        replying_to: str | None = None,
    ) -> tuple[Broadcast | None, tuple[ErrorCode, str] | None]:
        """Append ``entry`` to the room's log (fenced by its lease's token and the position it
        must take), announcing the room's update to the other nodes in the same step; on
        failure undo the command (or drop the room, if fenced out) and say why.

        Returns the update (to fan out here) and the failure, if any. ``then`` (the room and
        its update: :meth:`publish_change`, say) has run when this returns, called as soon as
        the store knows the entry logged: on Redis in the callback that read the reply, an
        event-loop turn before this coroutine resumes (a turn is milliseconds on a busy node,
        and every action's update waited for it: the store's ``logged`` argument).
        ``replying_to``: the player whose reply follows once this returns; what ``then`` sends
        them waits for it (:meth:`~blackdrez.server.connection.Outbox.hold`): one write.
        (An action needs none of this: :meth:`act_soon`.)
        """
        done = awaited = False
        kept: _Appending | None = None

        def logged() -> None:
            nonlocal done
            if done:
                return
            done = True
            assert kept is not None  # (let go once this has run: below)
            self._logged(kept)
            if replying_to is not None and not awaited:  # the store's callback: the reply
                self.fanout.outbox.hold(replying_to)  # comes once this resumes, in one write
            if then is not None:
                then(room, kept.broadcast)

        appending = kept = self._appending(room, entry, logged)
        try:
            try:
                if tracing.tracer is None:  # (the hot path: not even an empty block)
                    heard = await self.store.logs.append(appending.append)
                else:
                    with tracing.span(
                        "blackdrez.log_append", blackdrez_node=self.id, blackdrez_table=room.id,
                        blackdrez_position=appending.append.position,
                    ):  # fmt: skip
                        heard = await self.store.logs.append(appending.append)
            except Exception as error:
                return None, self._not_logged(room, error)
            awaited = True
            logged()  # if the store did not
            if not heard and self._tables_asked == appending.asked:
                appending.lease.quiet = True  # (module docstring: "Quiet tables")
            return appending.broadcast, None
        finally:
            # ``logged`` holds the entry's append, which holds ``logged``: a cycle, with the
            # update's views in it, left to the collector at every command (measured: the
            # node's loop stalled 50-80 ms in its collections). Let go here.
            kept = None

    def act_soon(
        self,
        room: Room,
        player: str,
        name: str,
        message: v1.Act,
        bot: bool,
        answered: Callable[[Answer], None],
    ) -> Answer | bool:
        """:meth:`execute` an action without a coroutine, where the only wait is the log's
        append and the store takes it without being awaited (:meth:`TableLogs.append_soon`:
        Redis): the table's lock free, the store up, the lease fresh, no tracing. Returns the
        answer when it is known at once (refused, or nothing changed); ``True`` when the entry
        went to the store and ``answered`` is given the answer once the append is settled (the
        update published first, and the table's lock held until then); ``False`` when none
        of this applies (nothing done: await :meth:`execute`).

        Why: awaited, the append's coroutine resumed an event-loop turn after the reply, the
        request's frames with it, after every other table's action of that turn (measured: a
        turn's suspension cost an in-memory action as much as Redis's millisecond of group
        commit, ``docs/benchmarks-log.md``). Here the reply's callback finishes the action.
        """
        table = room.id
        locks = self._locks
        logs = self.store.logs
        if (
            table in locks
            or not logs.appends_soon
            or not self._health.up
            or not self.leases.fresh(table)
            or tracing.tracer is not None
        ):
            return False
        started = time.perf_counter()
        entry = LogEntry(now=self.clock.time(), command=message, player=player, name=name, bot=bot)
        version = room.version  # (as in ``execute``, inline: a call an action counts)
        try:
            answer = execute(room, entry)
        except RoomError as error:
            return error_answer(message, error.code, error.message)
        if room.version == version:
            return answer  # nothing changed: nothing to log or broadcast
        entry.seq = room.log.seq

        def settled(outcome: bool | BaseException) -> None:
            try:
                if isinstance(outcome, BaseException):
                    reply = error_answer(message, *self._not_logged(room, outcome))
                else:
                    self._logged(appending)
                    if not outcome and self._tables_asked == appending.asked:
                        appending.lease.quiet = True  # (module docstring: "Quiet tables")
                    self.publish_change(room, appending.broadcast)
                    self.metrics.observe_action(time.perf_counter() - started)
                    reply = answer
            except Exception:  # a bug: answered as any request that fails, never left unanswered
                log.exception("an action at %s failed once it was logged", table)
                reply = error_answer(message, ErrorCode.INTERNAL, REQUEST_FAILED)
            finally:  # (the store's callback must not raise: the lock is freed whatever happens)
                if locks[table]:
                    release_lock(locks, table)
                else:  # (nobody waits: nearly always)
                    del locks[table]
            answered(reply)

        locks[table] = TableLock()
        try:
            appending = self._appending(room, entry, None)
        except BaseException:
            release_lock(locks, table)
            raise
        try:
            logs.append_soon(appending.append, settled)  # (in memory: settled as it returns)
        except Exception as error:  # not sent (a store settles what it sent, never raising)
            settled(error)
        return True

    def _appending(
        self, room: Room, entry: LogEntry, logged: Callable[[], None] | None
    ) -> _Appending:
        """``entry``'s append to the room's log at the next position, under the lease held,
        with the room's update announced (unless the table is quiet) and its lobby record."""
        data = encode_entry(entry)
        table = room.id
        entries = self._command_logs[table]
        lease = self.leases.held[table]
        broadcast = room.flush()
        announce = lobby = None
        if broadcast is not None and self._shared and not lease.quiet:
            announce = bus.encode(bus.TableUpdate(broadcast=broadcast, away=away_seats(broadcast)))
        if broadcast is not None and broadcast.info is not None and room.status != "closed":
            lobby = lobby_record(self.id, room, broadcast.info)
        append = Append(
            table, lease.token, entries.size + 1, data, table_channel(table), announce, lobby,
            logged,
        )  # fmt: skip
        return _Appending(room, data, entries, lease, broadcast, self._tables_asked, append)

    def _logged(self, appending: _Appending) -> None:
        """Keep an entry the store logged (and snapshot the room every ``SNAPSHOT_EVERY``)."""
        room, entries = appending.room, appending.entries
        entries.append(appending.data)
        self._retry_at.pop(room.id, None)
        if entries.size % SNAPSHOT_EVERY == 0:
            self._take_snapshot(room, entries.size, appending.lease.token)

    def _not_logged(self, room: Room, error: BaseException) -> tuple[ErrorCode, str]:
        """An append of ``room``'s failed: undo its command (fenced out: drop the room), and
        say why to the requester."""
        if isinstance(error, LeaseLost):
            self.drop_lost_table(room.id)
            return MOVING_AWAY
        if self.rooms.get(room.id) is not room:
            # The renewal loop dropped the table while this write was out: there is no
            # room to undo the command in, and the table comes back only by adoption.
            return MOVING_AWAY
        if isinstance(error, StoreUnavailable):
            log.debug("logging a command of %s failed, undone: %s", room.id, error)
            self._restore(room.id)
            return ErrorCode.UNAVAILABLE, "the store cannot be reached: try again"
        log.error("logging a command of %s failed, undone", room.id, exc_info=error)
        self._restore(room.id)
        return ErrorCode.UNAVAILABLE, "the store refused the write: try again"

    def _take_snapshot(self, room: Room, position: int, token: int) -> None:
        """Snapshot the room just logged (see :mod:`blackdrez.server.table.snapshots`): kept here
        for undoing a later command, and stored (in the background, fenced) for the node that
        adopts it. The entries before it are no longer needed here (an undo starts from it)
        and are let go (:data:`ELIDED`, read back from the store when the table's record is
        made): a table that plays for days does not grow the node by its whole log."""
        try:
            data = take_snapshot(room)
        except Exception:  # a room holding something that does not pickle: a bug to report
            log.exception("no snapshot of %s at entry %d: it will be replayed", room.id, position)
            return
        self._snapshots[room.id] = (position, data)
        self._command_logs[room.id].let_go(position - 1)
        self._spawn(store_snapshot(self.store.logs, room.id, token, position, data))

    def _restore(self, table: str) -> None:
        """Undo an unlogged command: rebuild the room from the log written so far (once: its
        timer then waits for the store, or for the retry backoff)."""
        entries = self._command_logs[table]
        lease = self.leases.held[table]
        retry = self._retry_at.get(table)
        snapshot = self._snapshots.get(table)
        try:
            room = rebuild_from_snapshot(entries, snapshot)
        except Exception:  # the snapshot failed and the log's start was never read (ELIDED)
            log.exception("undoing a command of %s failed: it must be adopted again", table)
            self.drop_lost_table(table)
            return
        self.unhost(table)
        self.host(room, entries, lease, snapshot)
        if retry is not None:
            self._retry_at[table] = retry
        self._set_timer(room)

    def _lease_lost(self, table: str) -> None:
        """A renewal found ``table``'s lease gone: drop its room, or, for a table being retired
        (no room), just the lease (another node retires it)."""
        if table in self.rooms:
            self.drop_lost_table(table)
        else:
            self.leases.forget(table)

    def drop_lost_table(self, table: str) -> None:
        """Fenced out, or the lease is gone: stop hosting at once and never serve this copy
        again; the table comes back only by adoption from its log (here or elsewhere)."""
        lease = self.leases.held.get(table)
        if self.unhost(table) is None:
            return
        log.warning("lease of %s lost: the table must be adopted again from its log", table)
        if lease is not None:
            # Still held by this process if only the log position was off: free it at once.
            self._spawn(self.store.leases.release(table, lease.token))
        self._scan_soon()
        if self.fanout.watchers.get(table):
            self._spawn(self.fanout.follow_lost(table))

    async def retire(
        self,
        table: str,
        token: int,
        entries: Sequence[bytes],
        snapshot: tuple[int, bytes] | None = None,
    ) -> None:
        """Write a closed table's game record in place of its log, for good (once its games are
        in the records, if this node keeps them: the log is their source until then), with its
        latest ``snapshot`` if the table is long (:mod:`~blackdrez.server.table.records`)."""
        if self.records is not None:
            await self.records.written(table)
        if entries and entries[0] is ELIDED:  # let go after a snapshot: the record needs it all
            entries = await self.store.logs.read(table, held=True)
        entries = list(entries)
        record = table_record(entries, self.clock.time(), snapshot)
        players = players_seated(entries)
        await self.store.logs.retire(table, token, record, self.record_retention, players)

    def publish_change(self, room: Room, broadcast: Broadcast | None = None) -> None:
        """After a room changed: fan its update out here, queue the rest, re-arm its timer.

        ``broadcast`` is the update already announced with the log entry; without one, the
        room's pending changes are flushed here (they were not logged: closing at shutdown).
        A closed room is let go at once: it refuses everything from now on.

        Whatever fails on the way (a bug: raised to the caller, who answers ``internal``), the
        room's timer is set for its next deadline: the command is logged, and a round it ended
        is dealt only by its timer (without one, the table waited for good).
        """
        try:  # (costs nothing until it catches: no call added to an action)
            if broadcast is None:
                broadcast = room.flush()
            if broadcast is not None:
                self.fanout.fan_out(broadcast)  # (and tells the host who is still here)
            lease = self.leases.held.get(room.id)
            if lease is None or self.rooms.get(room.id) is not room:
                # The lease was found lost while the entry was being written: the entry is logged
                # and its update announced; the next host carries on from the log (what the outbox
                # would have written goes as when a node dies right after a write).
                return
            token = lease.token
            outcome = room.take_outcome() if room.outcome.pending() else NOTHING_OUTSIDE
            if self.records is not None and outcome.games_over:
                self.records.submit(outcome.games_over)
            if outcome.seated or outcome.games_over:
                self.show_ratings(room, after_games=bool(outcome.games_over))
            if room.status == "closed":
                closing_log = self._command_logs[room.id]
                snapshot = self._snapshots.get(room.id)
                self.unhost(room.id, keep_lease=True)
                self.closing.add(room.id)
                self._outbox.put_nowait(Publication(room, outcome, token, closing_log, snapshot))
                return
            if outcome is not NOTHING_OUTSIDE and _needs_store(room, outcome):
                # (most actions, and a game's end alone: nothing queued, no task woken)
                self._outbox.put_nowait(Publication(room, outcome, token))
            self._set_timer(room)
            if room.par_wanted is not None:
                self._want_par(room)
            helped = room.assist
            if helped is not None:
                hint_ahead(self.hints, room, helped)
        except Exception:
            if self.rooms.get(room.id) is room and room.status != "closed":
                with contextlib.suppress(Exception):
                    self._set_timer(room)
            raise

    def show_ratings(self, room: Room, *, after_games: bool = False) -> None:
        """At a rated table, read the seated players' ratings from the records and log them
        (the table shows them): when someone sat down, and once the games just ended are
        stored (they moved the ratings). A table never waits for this. One reader per table:
        a request while it works makes it read again (the players then seated)."""
        if self.records is None or not room.options.rated or room.closed:
            return
        wanted = self._ratings_wanted.get(room.id)
        if wanted is not None:
            wanted.want(after_games=after_games)
            return
        self._ratings_wanted[room.id] = RatingsWanted(after_games=after_games)
        self._spawn(self._read_ratings(room.id))

    async def _read_ratings(self, table: str) -> None:
        """The table's ratings reader (:meth:`show_ratings`): read and log until nothing more
        is wanted. A read the records database fails is tried again on :data:`RECORDS_RETRY`
        (a sit-down during a database outage is shown once it is back; one during the pause
        after a failed read ends the pause); a log append the store refuses, once the store is
        back (reading again: who sits there may have changed)."""
        assert self.records is not None
        wanted = self._ratings_wanted[table]
        failures = 0
        records_delays = RECORDS_RETRY.delays()
        store_delays = STORE_RETRY.delays()
        try:
            while wanted.again:
                wanted.again = False
                if wanted.after_games:
                    wanted.after_games = False
                    await self.records.written(table)
                room = self.rooms.get(table)
                players = [s.player for s in room.seats if s is not None] if room else []
                if room is None or not players:
                    return
                try:
                    ratings = await self.records.seat_ratings(room.spec.name, players)
                except Exception as error:  # the database's own errors: down, restarting
                    failures += 1
                    if failures == 1:
                        log.warning(
                            "reading the ratings at %s failed, will retry: %r", table, error
                        )
                    wanted.again = True
                    await wanted.pause(next(records_delays), RECORDS_LEAST_PAUSE)
                    continue
                if failures:
                    log.info("ratings at %s read after %d failed tries", table, failures)
                    failures = 0
                if not await self._log_host_command(table, Ratings(ratings=ratings)):
                    wanted.again = True
                    await self.store.health.wait_up()
                    await asyncio.sleep(next(store_delays))
        finally:
            del self._ratings_wanted[table]

    def _set_timer(self, room: Room) -> None:
        """Set the room's one timer for its next deadline: a plain timer, or, while the store
        is down, a wait for it to be back.

        A plain timer already set to fire no later is kept (most actions move the deadline
        later: the next turn's): when it fires early, :meth:`_on_timer` sets it again for
        what is then due. Cancelling and setting a timer for every action cost more."""
        deadline = room.next_deadline()
        if deadline is None or room.status == "closed" or not self._health.up:
            timer = self._timers.pop(room.id, None)
            if timer is not None:
                timer.cancel()
            if deadline is not None and room.status != "closed":
                self._timers[room.id] = self._spawn(self._set_timer_when_store_is_up(room))
            return
        loop = self._loop
        if loop is None:  # (asked once: asking costs a system call, for fork safety)
            loop = self._loop = asyncio.get_running_loop()
        delay = self._delay(room, deadline)
        when = loop.time() + delay
        timer = self._timers.get(room.id)
        if timer is not None:
            if not isinstance(timer, asyncio.Task):
                # uvloop sets a timer already due with call_soon: a Handle, with no when()
                due = getattr(timer, "when", None)
                if due is None or due() <= when:
                    return  # fires first, then sets itself for what is due then
            timer.cancel()
        self._timers[room.id] = loop.call_at(when, self._on_timer, room)

    def _delay(self, room: Room, deadline: float) -> float:
        """Seconds until ``deadline`` (wall clock), or until the room's retry after a failed
        write if later."""
        delay = max(0.0, deadline - self.clock.time())
        retry = self._retry_at.get(room.id)
        if retry is not None:
            delay = max(delay, retry[0] - self.clock.monotonic())
        return delay

    async def _set_timer_when_store_is_up(self, room: Room) -> None:
        await self.store.health.wait_up()
        if self._timers.get(room.id) is asyncio.current_task():
            del self._timers[room.id]
        if self.rooms.get(room.id) is room:
            self._set_timer(room)

    def _on_timer(self, room: Room) -> None:
        self._timers.pop(room.id, None)
        if self.rooms.get(room.id) is not room:
            return
        deadline = room.next_deadline()
        if deadline is not None and self._delay(room, deadline) > EARLY:
            self._set_timer(room)  # set before a later deadline (see _set_timer)
        else:
            self._spawn(self.tick(room))

    async def tick(self, room: Room) -> None:
        """Run a due timer as a logged command (only if it changed anything)."""
        async with HeldLock(self._locks, room.id):  # (``lock``, without its call)
            if self.rooms.get(room.id) is not room:
                return
            if not self.leases.fresh(room.id):
                try:
                    confirmed = await self.leases.confirmed(room.id)
                except StoreUnavailable:
                    self._set_timer(room)  # waits for the store
                    return
                if not confirmed:
                    return
            version = room.version
            entry = timer_entry(room, self.clock.time())
            if isinstance(entry.command, Stop):
                self.metrics.tables_stopped.inc()
                log.error("table %s stopped: its timer fires faster than any game can", room.id)
            execute(room, entry)
            if room.version == version:
                self._set_timer(room)
                return
            entry.seq = room.log.seq
            _, failure = await self.append_entry(room, entry, then=self.publish_change)
            if failure is not None:
                # Undone (and re-armed), or dropped: a rebuilt room waits for the store to be
                # back, then for the backoff, before its timer tries again.
                rebuilt = self.rooms.get(room.id)
                if rebuilt is not None:
                    _, delays = self._retry_at.get(room.id, (0.0, STORE_RETRY.delays()))
                    retry_at = self.clock.monotonic() + next(delays)
                    self._retry_at[room.id] = (retry_at, delays)
                    self._set_timer(rebuilt)
                return

    async def settled(self, timeout: float = 2.0) -> None:
        """Wait until what this node queued for the store has been written."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._outbox.join(), timeout)

    async def drain_outbox(self) -> None:
        """Do what a room change needs outside this process (store and bus): each table's items
        in the order of its changes, the items of up to :data:`OUTBOX_WRITERS` tables at once
        (one table's slow write holds up no other's). While the store is down an item waits
        for it (on the shared backoff)."""
        writers = asyncio.Semaphore(OUTBOX_WRITERS)
        behind: dict[str, collections.deque[Publication]] = {}
        """Per table being written, its items queued after the one in hand."""
        while True:
            item = await self._outbox.get()
            table = item.room.id
            waiting = behind.get(table)
            if waiting is not None:
                waiting.append(item)
                continue
            await writers.acquire()
            behind[table] = collections.deque()
            self._spawn(self._write_table_items(item, behind, writers))

    async def _write_table_items(
        self,
        first: Publication,
        behind: dict[str, collections.deque[Publication]],
        writers: asyncio.Semaphore,
    ) -> None:
        """Write ``first``, then the items of its table queued behind it meanwhile, in order.
        While the store is down an item waits for it (on the shared backoff)."""
        table = first.room.id
        item: Publication | None = first
        try:
            while item is not None:
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
                    lease = self.leases.held.get(table)
                    if lease is not None and lease.token == item.token:
                        self.drop_lost_table(table)
                        self.leases.forget(table)
                except Exception:
                    log.exception("publishing an update of %s failed", table)
                finally:
                    if item.closing_log is not None:
                        self.closing.discard(table)
                        self.leases.forget(table, item.token)
                    self._outbox.task_done()
                waiting = behind[table]
                item = waiting.popleft() if waiting else None
        finally:
            for _ in behind.pop(table, ()):  # (cancelled: at shutdown)
                self._outbox.task_done()
            writers.release()

    async def _publish(self, item: Publication) -> None:
        """One outbox item; may be called again after :class:`StoreUnavailable` (idempotent)."""
        room, outcome, store = item.room, item.outcome, self.store
        for result in outcome.ranked:
            await rank(self.store, result, self.clock, self.record_retention)
        if room.arena is not None:
            for game in outcome.games_over:
                await score_in_arena(store, room.arena, room.spec, game)
        if item.closing_log is not None:
            await self.retire(room.id, item.token, item.closing_log, item.closing_snapshot)
            if room.listed:
                removed = bus.LobbyChanged(update=v1.LobbyUpdate(removed=[room.id]))
                with contextlib.suppress(StoreUnavailable):  # listings drop it anyway
                    await store.bus.publish(LOBBY_CHANNEL, bus.encode(removed))
            return
        for player in outcome.seated:
            await store.players.add_table(player, room.id)
        for player in outcome.unseated:
            await store.players.remove_table(player, room.id)
