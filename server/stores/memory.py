"""The in-memory stores: one server process, nothing to install (tests, ``--in-memory``).

Theory of operation
-------------------
:func:`memory_stores` builds the bundle: one small class per concern, each owning its state, with
the same contracts as the Redis stores, fencing included (tokens, expected log positions, retired
tables never leased again), so one contract test per interface holds both to one behaviour.

The concerns that Redis keeps apart by key but that one atomic step must touch together share
their state explicitly here: the lobby's records (one dict, :data:`TableRecords`) are written by
:class:`MemoryLobby` and, with a log entry or a retirement, by :class:`MemoryTableLogs`, which is
handed the players' seats and the bus it must update in the same step. The leases and the logs
read one :class:`TableLedger` (a lease decides every log write, and a log decides which hosted
tables are adoptable). Retired tables' game records expire after their retention like Redis keys
would; nothing else outlives what owns it (a player's table set goes when its last table does).

Several nodes in one process (a test harness's) share one :class:`MemoryWorld`: the lobby, the
seats, the heartbeats, the tables' leases and logs, the scores, the tokens and the bus, and the
monotonic clock every TTL here runs by. Each node's bundle over it has its own link (its node id
and incarnation) and is ``shared``, as a Redis bundle is: the nodes announce to each other.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import math
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

from blackdrez.server.stores.base import (
    MATCH_CHANNEL,
    REPORTS_KEPT,
    Append,
    Arenas,
    Bus,
    DailyDeals,
    Handler,
    Leaderboards,
    LeaseLost,
    Leases,
    Link,
    Lobby,
    Location,
    Matchmaking,
    Players,
    Presence,
    Reports,
    Share,
    Social,
    Stores,
    TableLogs,
    Tokens,
    Whereabouts,
    arena_channel,
    in_share,
    parse_holder,
)

TableRecords = dict[str, tuple[str, bytes, bool]]
"""Per table: the hosting node, its lobby record, whether it is listed."""


Monotonic = Callable[[], float]
"""The clock TTLs run by: ``time.monotonic``, or a test's."""


class MemoryLink(Link):
    """This process only: nothing to connect, always up. ``shared``: other nodes of the process
    use the same :class:`MemoryWorld`."""

    def __init__(self, node_id: str, incarnation: str | None = None, shared: bool = False) -> None:
        super().__init__(node_id, incarnation)
        self.shared = shared


class MemoryBus(Bus):
    """Delivers within the process, each message in its own turn of the event loop."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = defaultdict(list)
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop, asked for once (on Python 3.11 each asking is a ``getpid`` system call:
        every action's append publishes)."""

    def heard(self, channel: str) -> bool:
        """Whether anyone listens on ``channel`` now."""
        return bool(self._handlers.get(channel))

    async def publish(self, channel: str, data: bytes) -> None:
        self.publish_now(channel, data)

    def publish_now(self, channel: str, data: bytes) -> None:
        """:meth:`publish`, from a caller that is not a coroutine."""
        handlers = self._handlers.get(channel)
        if not handlers:
            return
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        for handler in list(handlers):
            loop.call_soon(handler, data)

    async def subscribe(self, channel: str, handler: Handler) -> None:
        self._handlers[channel].append(handler)

    async def unsubscribe(self, channel: str, handler: Handler) -> None:
        handlers = self._handlers.get(channel)
        if handlers and handler in handlers:
            handlers.remove(handler)
            if not handlers:
                del self._handlers[channel]


class MemoryLobby(Lobby):
    """The lobby's records (shared with :class:`MemoryTableLogs`); ``fence`` checks a lease."""

    def __init__(self, records: TableRecords, fence: Callable[[str, int], None]) -> None:
        self._records = records
        self._fence = fence

    async def put(
        self, table_id: str, node_id: str, record: bytes, listed: bool, token: int | None = None
    ) -> None:
        if token is not None:
            self._fence(table_id, token)
        self._records[table_id] = (node_id, record, listed)

    async def get(self, table_id: str) -> tuple[str, bytes] | None:
        entry = self._records.get(table_id)
        return None if entry is None else (entry[0], entry[1])

    async def remove(self, table_id: str) -> None:
        self._records.pop(table_id, None)

    async def listed(self) -> list[bytes]:
        return [record for _, record, listed in self._records.values() if listed]

    async def all(self) -> list[tuple[str, str, bytes]]:
        return sorted((t, node, record) for t, (node, record, _) in self._records.items())


class MemoryPlayers(Players):
    """Each player's tables, and the order of their connections."""

    def __init__(self) -> None:
        self._tables: dict[str, set[str]] = defaultdict(set)
        self._attaches = itertools.count(1)
        self._latest_attach: dict[str, int] = {}

    async def add_table(self, player: str, table_id: str) -> None:
        self._tables[player].add(table_id)

    async def remove_table(self, player: str, table_id: str) -> None:
        tables = self._tables.get(player)
        if tables is not None:
            tables.discard(table_id)
            if not tables:
                del self._tables[player]

    async def tables(self, player: str) -> list[str]:
        return sorted(self._tables.get(player, ()))

    async def next_attach(self, player: str) -> int:
        order = next(self._attaches)
        self._latest_attach[player] = order
        return order

    async def latest_attaches(self, players: list[str]) -> dict[str, int]:
        return {p: self._latest_attach[p] for p in players if p in self._latest_attach}


class MemoryPresence(Presence):
    """Heartbeats by the monotonic clock."""

    def __init__(self, link: Link, world: MemoryWorld) -> None:
        self._link = link
        self._heartbeats = world.heartbeats
        self._now = world.monotonic

    async def heartbeat(self, ttl: float) -> None:
        self._heartbeats[self._link.node_id] = (self._now() + ttl, self._link.incarnation)

    async def live_incarnations(self) -> dict[str, str | None]:
        now = self._now()
        return {node: beat for node, (expiry, beat) in self._heartbeats.items() if expiry > now}


HELD_AS_KEPT = 4096
"""Tokens whose lease value a :class:`TableLedger` keeps (a token per table hosted here)."""


class TableLedger:
    """What leases and logs both read: who holds each table's lease, until when, and which
    tables are retired. A lease decides every log write, and the logs decide which hosted
    tables are adoptable, so :class:`MemoryLeases` and :class:`MemoryTableLogs` share one."""

    def __init__(self, link: Link, world: MemoryWorld) -> None:
        self._link = link
        self._now = world.monotonic
        tables = world.tables
        self.leases = tables.leases
        self.epochs = tables.epochs
        self.retired = tables.retired
        self._held_as: dict[int, str] = {}
        """The lease value of each token this process used lately (every append checks it:
        made once, not formatted per append; forgotten past :data:`HELD_AS_KEPT` tokens)."""

    def check_lease(self, table_id: str, token: int) -> None:
        """Raise :class:`LeaseLost` unless this process holds the table's lease with ``token``."""
        lease = self.leases.get(table_id)  # (``holder``, inline: every append asks)
        if lease is None or lease[1] <= self._now():
            raise LeaseLost(table_id)
        held_as = self._held_as.get(token)
        if held_as is None:
            if len(self._held_as) >= HELD_AS_KEPT:
                self._held_as.clear()
            held_as = self._held_as[token] = self._link.holder(token)
        if lease[0] != held_as:
            raise LeaseLost(table_id)

    def holder(self, table_id: str) -> str | None:
        """The lease's holder while it lasts."""
        lease = self.leases.get(table_id)
        if lease is None or lease[1] <= self._now():
            return None
        return lease[0]

    def is_retired(self, table_id: str) -> bool:
        """Whether the table was retired (its game record still kept)."""
        self.expire_records()
        return table_id in self.retired

    def expire_records(self) -> None:
        """Forget the retired tables whose records are past their time."""
        now = self._now()
        while self.retired:
            table_id, (expiry, _) = next(iter(self.retired.items()))
            if expiry > now:
                return
            del self.retired[table_id]
            self.epochs.pop(table_id, None)

    def earlier_self(self, holder: str) -> bool:
        """Whether ``holder`` is an earlier process of this node (its tables are this one's)."""
        node_id, incarnation, _ = parse_holder(holder)
        return node_id == self._link.node_id and incarnation < self._link.incarnation


class MemoryLeases(Leases):
    """The tables' leases, on the ledger shared with the logs."""

    def __init__(self, link: Link, world: MemoryWorld, ledger: TableLedger) -> None:
        self._link = link
        self._now = world.monotonic
        self._ledger = ledger
        self._records = world.records
        tables = world.tables
        self._leases = tables.leases
        self._epochs = tables.epochs
        self._hosted = tables.hosted
        self._logs = tables.logs

    async def acquire(self, table_id: str, ttl: float) -> int | None:
        if self._ledger.is_retired(table_id):
            return None
        holder = self._ledger.holder(table_id)
        if holder is not None and not self._ledger.earlier_self(holder):
            return None
        token = self._epochs[table_id] = self._epochs.get(table_id, 0) + 1
        self._leases[table_id] = (self._link.holder(token), self._now() + ttl)
        self._hosted.add(table_id)
        return token

    async def renew(self, leases: dict[str, int], ttl: float) -> set[str]:
        lost = set()
        for table_id, token in leases.items():
            mine = self._link.holder(token)
            if self._ledger.holder(table_id) == mine:
                self._leases[table_id] = (mine, self._now() + ttl)
            else:
                lost.add(table_id)
        return lost

    async def release(self, table_id: str, token: int) -> None:
        if self._ledger.holder(table_id) == self._link.holder(token):
            del self._leases[table_id]

    async def adoptable(self, share: Share | None = None, held: Collection[str] = ()) -> list[str]:
        hosted = {t for t in self._hosted if in_share(t, share)} - set(held)
        gone = {t for t in hosted if self._ledger.is_retired(t) or t not in self._logs}
        self._hosted -= {t for t in gone if self._ledger.holder(t) is None}
        return sorted(
            t
            for t in hosted - gone
            if (holder := self._ledger.holder(t)) is None or self._ledger.earlier_self(holder)
        )

    async def locate(self, table_id: str) -> Location:
        if self._ledger.is_retired(table_id):
            return Location(Whereabouts.CLOSED)
        holder = self._ledger.holder(table_id)
        if holder is not None:
            node_id, incarnation, _ = parse_holder(holder)
            return Location(Whereabouts.HOSTED, node_id, incarnation)
        if table_id in self._logs or table_id in self._records:
            return Location(Whereabouts.MOVING)
        return Location(Whereabouts.UNKNOWN)


class MemoryTableLogs(TableLogs):
    """The tables' logs, snapshots and retirements, written under the ledger's leases; a write
    also updates the lobby records, the players' seats and the bus it is handed, in one step."""

    def __init__(self, world: MemoryWorld, ledger: TableLedger) -> None:
        self._now = world.monotonic
        self._ledger = ledger
        self._records = world.records
        self._players = world.players
        self._bus = world.bus
        tables = world.tables
        self._leases = tables.leases
        self._hosted = tables.hosted
        self._logs = tables.logs
        self._snapshots = tables.snapshots
        self._retired = tables.retired

    appends_soon = True

    async def append(self, append: Append) -> bool:
        # ``logged`` is not called: this returns without a turn of the event loop, so the
        # caller's own call right after is as early
        outcome: list[bool | BaseException] = []
        self.append_soon(append, outcome.append)
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    def append_soon(self, append: Append, settled: Callable[[bool | BaseException], None]) -> None:
        """See :meth:`TableLogs.append_soon`: settled at once, before this returns."""
        table_id, position = append.table_id, append.position
        try:
            self._ledger.check_lease(table_id, append.token)
        except LeaseLost as lost:
            settled(lost)
            return
        entries = self._logs.setdefault(table_id, [])
        if len(entries) != position - 1:
            if not entries:
                del self._logs[table_id]
            found = len(entries)
            settled(LeaseLost(f"{table_id}: the log holds {found} entries, not {position - 1}"))
            return
        entries.append(append.entry)
        heard = True
        if append.announce is not None:
            heard = self._bus.heard(append.channel)
            self._bus.publish_now(append.channel, append.announce)
        lobby = append.lobby
        if lobby is not None:
            self._records[table_id] = (lobby.node, lobby.record, lobby.listed)
            if lobby.announce is not None:
                self._bus.publish_now(lobby.channel, lobby.announce)
        settled(heard)

    async def read(self, table_id: str, after: int = 0, *, held: bool = False) -> list[bytes]:
        return list(self._logs.get(table_id, ())[after:])

    async def read_last(self, table_id: str, count: int) -> tuple[int, list[bytes]]:
        entries = self._logs.get(table_id, [])
        return len(entries), entries[-count:] if count > 0 else []

    async def put_snapshot(self, table_id: str, token: int, position: int, data: bytes) -> None:
        self._ledger.check_lease(table_id, token)
        kept = self._snapshots.get(table_id)
        if kept is None or kept[0] < position:  # a later one stored first stays
            self._snapshots[table_id] = (position, data)

    async def read_snapshot(self, table_id: str) -> tuple[int, bytes] | None:
        return self._snapshots.get(table_id)

    async def retire(
        self, table_id: str, token: int, record: bytes, keep: float, players: Iterable[str] = ()
    ) -> None:
        self._ledger.check_lease(table_id, token)
        del self._leases[table_id]
        self._hosted.discard(table_id)
        self._logs.pop(table_id, None)
        self._snapshots.pop(table_id, None)
        self._records.pop(table_id, None)
        for player in players:
            await self._players.remove_table(player, table_id)
        self._ledger.expire_records()
        self._retired[table_id] = (self._now() + keep, record)

    async def game_record(self, table_id: str) -> bytes | None:
        self._ledger.expire_records()
        kept = self._retired.get(table_id)
        return None if kept is None else kept[1]


class MemoryLeaderboards(Leaderboards):
    """Each board's best entry per player, and the kept records of ranked games."""

    def __init__(self) -> None:
        self._scores: dict[str, dict[str, tuple[int, int, bytes]]] = defaultdict(dict)
        self._order = itertools.count()
        self._kept: dict[str, bytes] = {}

    async def submit(self, board: str, player: str, entry: bytes, score: int) -> bool:
        entries = self._scores[board]
        best = entries.get(player)
        if best is None or score > best[0]:
            entries[player] = (score, next(self._order), entry)
            return True
        return best[2] == entry

    async def top(self, board: str, limit: int) -> list[tuple[str, bytes, int]]:
        entries = self._scores.get(board, {})
        ranked = sorted(entries.items(), key=lambda item: (-item[1][0], item[1][1]))
        return [(player, entry, score) for player, (score, _, entry) in ranked[:limit]]

    async def keep_record(self, game_id: str, data: bytes, ttl: float | None = None) -> None:
        self._kept[game_id] = data  # (a lone node's memory: a TTL would free little)

    async def kept_record(self, game_id: str) -> bytes | None:
        return self._kept.get(game_id)


class MemoryDailyDeals(DailyDeals):
    """The daily deals' seeds, and their claims until they are kept no longer."""

    def __init__(self, monotonic: Monotonic) -> None:
        self._now = monotonic
        self._seeds: dict[tuple[str, str], str] = {}
        self._players: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
        """Per daily deal, who started it, each with the table of their ranked session."""
        self._until: dict[tuple[str, str], float] = {}
        """Per daily deal, until when (monotonic clock) its claims are kept."""

    async def seed(self, game: str, day: str, candidate: str | None) -> str | None:
        if candidate is None:
            return self._seeds.get((game, day))
        return self._seeds.setdefault((game, day), candidate)

    async def claim(self, game: str, day: str, player: str, table: str, keep: float) -> str | None:
        self._forget_old_claims()
        self._until[game, day] = self._now() + keep
        return self._players[game, day].setdefault(player, table)

    async def table(self, game: str, day: str, player: str) -> str | None:
        self._forget_old_claims()
        return self._players.get((game, day), {}).get(player)

    def _forget_old_claims(self) -> None:
        """Drop the claims of the daily deals kept long enough (as Redis expires them)."""
        now = self._now()
        for deal in [deal for deal, until in self._until.items() if until <= now]:
            del self._until[deal]
            self._players.pop(deal, None)


class MemoryTokens(Tokens):
    """The signing secret, the revoked tokens and the rate limits' buckets."""

    def __init__(self, monotonic: Monotonic) -> None:
        self._now = monotonic
        self._secret: bytes | None = None
        self._revoked: dict[str, float] = {}
        """Revoked token ids -> when they would have expired anyway (monotonic clock)."""
        self._buckets: dict[tuple[str, str], tuple[float, float]] = {}
        """Per kind and key, the tokens left and when they were counted (monotonic clock)."""

    async def shared_secret(self, proposed: bytes) -> bytes:
        if self._secret is None:
            self._secret = proposed
        return self._secret

    async def revoke(self, token_id: str, ttl: float) -> None:
        now = self._now()
        for expired in [key for key, until in self._revoked.items() if until <= now]:
            del self._revoked[expired]  # each revocation sweeps: the list never outgrows its TTLs
        self._revoked[token_id] = now + ttl

    async def revoked(self, token_id: str) -> bool:
        return self._revoked.get(token_id, 0.0) > self._now()

    async def take(self, kind: str, key: str, rate: float, burst: int) -> float:
        """As the Redis bucket counts (whole milliseconds of waiting); a bucket full again is
        forgotten, as its Redis key expires."""
        now = self._now()
        tokens, at = self._buckets.get((kind, key), (float(burst), now))
        tokens = min(burst, tokens + max(0.0, now - at) * rate)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = math.ceil((1 - tokens) * 1000 / rate) / 1000
        self._buckets[kind, key] = (tokens, now)
        for full in [b for b, (left, when) in self._buckets.items() if left >= burst]:
            del self._buckets[full]
        return wait


@dataclass
class TableState:
    """Every table's lease, epoch, log and snapshot, the hosted ones, and the retired ones' game
    records with their expiry (oldest first)."""

    leases: dict[str, tuple[str, float]] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)
    hosted: set[str] = field(default_factory=set)
    logs: dict[str, list[bytes]] = field(default_factory=dict)
    snapshots: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    retired: collections.OrderedDict[str, tuple[float, bytes]] = field(
        default_factory=collections.OrderedDict
    )


class MemoryReports(Reports):
    """The reports filed, newest last, each with when it was filed."""

    def __init__(self) -> None:
        self._reports: list[tuple[float, bytes]] = []

    async def add(self, report: bytes, at: float, keep: float) -> None:
        self._reports = [(t, r) for t, r in self._reports if t >= at - keep]
        self._reports.append((at, report))
        self._reports.sort(key=lambda filed: filed[0])
        del self._reports[:-REPORTS_KEPT]

    async def recent(self, limit: int) -> list[bytes]:
        return [report for _, report in reversed(self._reports[-limit:])]


class MatchQueue:
    """The matchmaking queue of a :class:`MemoryWorld`: each player's ticket and its expiry,
    and who leads (holder value, until when by the world's clock)."""

    def __init__(self) -> None:
        self.tickets: dict[str, tuple[bytes, float]] = {}
        self.leader: tuple[str, float] | None = None
        self.epoch = 0


class MemoryMatchmaking(Matchmaking):
    """One node's view of its world's :class:`MatchQueue`."""

    def __init__(self, link: MemoryLink, world: MemoryWorld) -> None:
        self._link = link
        self._queue = world.queue
        self._bus = world.bus
        self._monotonic = world.monotonic
        self._token: int | None = None

    async def enter(self, player: str, ticket: bytes, expires: float) -> None:
        self._queue.tickets[player] = (ticket, expires)

    async def ticket(self, player: str, now: float) -> bytes | None:
        held = self._queue.tickets.get(player)
        return held[0] if held is not None and held[1] >= now else None

    async def leave(self, player: str) -> None:
        self._queue.tickets.pop(player, None)

    async def refresh(self, players: Collection[str], expires: float) -> None:
        tickets = self._queue.tickets
        for player in players:
            if player in tickets:
                tickets[player] = (tickets[player][0], expires)

    async def waiting(self, now: float) -> list[bytes]:
        tickets = self._queue.tickets
        for player in [p for p, (_, expires) in tickets.items() if expires < now]:
            del tickets[player]
        return [ticket for ticket, _ in tickets.values()]

    async def lead(self, ttl: float) -> int | None:
        queue, now = self._queue, self._monotonic()
        held = queue.leader
        if self._token is not None and held is not None and held[0] == self._mine(self._token):
            queue.leader = (held[0], now + ttl)
            return self._token
        if held is not None and held[1] > now:
            return None
        queue.epoch += 1
        self._token = queue.epoch
        queue.leader = (self._mine(self._token), now + ttl)
        return self._token

    def _mine(self, token: int) -> str:
        return self._link.holder(token)

    async def place(self, token: int, players: Sequence[str], found: bytes) -> bool:
        queue = self._queue
        leader = queue.leader
        if leader is None or leader[0] != self._mine(token) or leader[1] <= self._monotonic():
            raise LeaseLost("matchmaking: this process does not lead the queue")
        if any(player not in queue.tickets for player in players):
            return False
        for player in players:
            del queue.tickets[player]
        await self._bus.publish(MATCH_CHANNEL, found)
        return True


class MemoryArenas(Arenas):
    """The arenas, in the process: each one's info, end, listing, standings and scored games.
    Forgotten ``keep`` seconds after they end (by the world's wall clock, ``time.time``)."""

    def __init__(self, bus: MemoryBus) -> None:
        self._bus = bus
        self._arenas: dict[str, tuple[bytes, float, bool, float]] = {}
        self._standings: dict[str, dict[str, bytes]] = {}
        self._games: dict[str, set[str]] = {}

    def _forget_old(self) -> None:
        now = time.time()
        for arena in [a for a, (_, ends, _, keep) in self._arenas.items() if ends + keep < now]:
            del self._arenas[arena]
            self._standings.pop(arena, None)
            self._games.pop(arena, None)

    async def create(self, arena: str, info: bytes, ends: float, listed: bool, keep: float) -> None:
        self._forget_old()
        self._arenas[arena] = (info, ends, listed, keep)

    async def info(self, arena: str) -> bytes | None:
        kept = self._arenas.get(arena)
        return None if kept is None else kept[0]

    async def listed(self, since: float) -> list[bytes]:
        self._forget_old()
        shown = [(ends, info) for info, ends, listed, _ in self._arenas.values() if listed]
        return [info for ends, info in sorted(shown) if ends >= since]

    async def standings(self, arena: str) -> dict[str, bytes]:
        return dict(self._standings.get(arena, {}))

    async def update(
        self, arena: str, changes: dict[str, tuple[bytes | None, bytes]], game: str | None
    ) -> int:
        standings = self._standings.setdefault(arena, {})
        scored = self._games.setdefault(arena, set())
        if game is not None and game in scored:
            return -1
        if any(standings.get(player) != old for player, (old, _) in changes.items()):
            return 0
        for player, (_, new) in changes.items():
            standings[player] = new
        if game is not None:
            scored.add(game)
        await self._bus.publish(arena_channel(arena), arena.encode())
        return 1


class MemorySocial(Social):
    """Follows, blocks, statuses and challenges in the process (TTLs by the world's clock)."""

    def __init__(self, monotonic: Monotonic) -> None:
        self._monotonic = monotonic
        self._follows: dict[str, dict[str, str]] = defaultdict(dict)
        self._blocks: dict[str, dict[str, str]] = defaultdict(dict)
        self._statuses: dict[str, tuple[bytes, float]] = {}
        self._challenges: dict[str, tuple[bytes, float]] = {}

    async def follow(self, player: str, other: str, name: str) -> None:
        self._follows[player][other] = name

    async def unfollow(self, player: str, other: str) -> None:
        self._follows[player].pop(other, None)

    async def following(self, player: str) -> dict[str, str]:
        return dict(self._follows.get(player, {}))

    async def block(self, player: str, other: str, name: str) -> None:
        self._blocks[player][other] = name
        self._follows[player].pop(other, None)

    async def unblock(self, player: str, other: str) -> None:
        self._blocks[player].pop(other, None)

    async def blocked(self, player: str) -> dict[str, str]:
        return dict(self._blocks.get(player, {}))

    async def seen(self, statuses: dict[str, bytes], ttl: float) -> None:
        until = self._monotonic() + ttl
        for player, status in statuses.items():
            self._statuses[player] = (status, until)

    async def gone(self, player: str) -> None:
        self._statuses.pop(player, None)

    async def statuses(self, players: Collection[str]) -> dict[str, bytes]:
        now = self._monotonic()
        kept = ((p, self._statuses.get(p)) for p in players)
        return {p: held[0] for p, held in kept if held is not None and held[1] > now}

    async def put_challenge(self, challenge: str, data: bytes, ttl: float) -> None:
        self._challenges[challenge] = (data, self._monotonic() + ttl)

    async def take_challenge(self, challenge: str) -> bytes | None:
        held = self._challenges.pop(challenge, None)
        return held[0] if held is not None and held[1] > self._monotonic() else None


class MemoryWorld:
    """What the memory stores of the nodes of one process share (see the module docstring), and
    the ``monotonic`` clock their TTLs run by."""

    def __init__(self, monotonic: Monotonic = time.monotonic) -> None:
        self.monotonic = monotonic
        self.records: TableRecords = {}
        self.players = MemoryPlayers()
        self.heartbeats: dict[str, tuple[float, str]] = {}
        self.tables = TableState()
        self.leaderboards = MemoryLeaderboards()
        self.daily = MemoryDailyDeals(monotonic)
        self.tokens = MemoryTokens(monotonic)
        self.bus = MemoryBus()
        self.reports = MemoryReports()
        self.queue = MatchQueue()
        self.arenas = MemoryArenas(self.bus)
        self.social = MemorySocial(monotonic)


def memory_stores(
    node_id: str, incarnation: str | None = None, *, world: MemoryWorld | None = None
) -> Stores:
    """Every concern's store in this process's memory, for node ``node_id``: a world of its own,
    or ``world``, which other nodes of the process share (the bundle is then ``shared``)."""
    link = MemoryLink(node_id, incarnation, shared=world is not None)
    world = world or MemoryWorld()
    ledger = TableLedger(link, world)
    return Stores(
        link=link,
        lobby=MemoryLobby(world.records, ledger.check_lease),
        players=world.players,
        presence=MemoryPresence(link, world),
        leases=MemoryLeases(link, world, ledger),
        logs=MemoryTableLogs(world, ledger),
        leaderboards=world.leaderboards,
        daily=world.daily,
        tokens=world.tokens,
        bus=world.bus,
        reports=world.reports,
        matchmaking=MemoryMatchmaking(link, world),
        arenas=world.arenas,
        social=world.social,
    )
