"""The store interfaces: what the server keeps outside one process, one small interface per concern.

Theory of operation
-------------------
A store holds what several server processes (nodes) must share. It is not one object but a
bundle, :class:`Stores`, of small interfaces, one per concern, each an ABC of a handful of
methods; a component that needs one concern is handed just that one::

    attribute       interface        what it keeps
    lobby           Lobby            each table's lobby record; the listed ones make the lobby
    players         Players          the tables each player sits at; the order of connections
    presence        Presence         which nodes are alive (heartbeats with a TTL)
    leases          Leases           which node process hosts each table (fencing tokens)
    logs            TableLogs        each table's command log, snapshot and final game record
    leaderboards    Leaderboards     the solitaires' best scores and the games they link to
    daily           DailyDeals       each day's daily deal seed and who started it where
    tokens          Tokens           the token-signing secret, revoked session tokens, and the
                                     rate limits' token buckets shared by every node
    bus             Bus              publish/subscribe: live updates, requests between nodes
    reports         Reports          the chat lines players reported, for the operators
    matchmaking     Matchmaking      the players queueing for a table, and the matcher's lease
    arenas          Arenas           the arenas (tournaments), their standings and scored games
    social          Social           follows and blocks, where players are, challenges

and the :class:`Link` they share: this process's identity (node id, incarnation), whether other
processes share the store, the connection's lifecycle and its health
(:class:`~blackdrez.server.retry.StoreHealth`).
:mod:`blackdrez.server.stores.memory` keeps everything in one process (tests, ``--in-memory``);
:mod:`blackdrez.server.stores.redis` keeps it in Redis so any number of nodes share one lobby
(:mod:`blackdrez.server.stores.redis_cluster` on a Redis Cluster). Every Redis key is listed,
with its owner and lifetime, in :mod:`blackdrez.server.stores.keys`.

Payloads are bytes (MessagePack): the store never interprets them. When the store cannot be
reached a method raises :class:`StoreUnavailable`; the caller answers ``unavailable`` and changes
nothing. Every call's outcome is reported to the link's health, which the node waits on instead
of retrying by itself.

Hosting and fencing
-------------------
A table is hosted by the node process holding its *lease*, a key with a TTL that its holder
renews. Taking a lease increments the table's *epoch*, a counter that only grows: the epoch is the
holder's *fencing token*. The lease names the holder (node id, process incarnation) and the token,
and a lease is only ever extended by the holder with that very token, never taken again by a
renewal: a holder that was paused past its TTL finds its lease gone (or someone else's) and has to
adopt the table again from its log like any other node. Every write that only the host may make
(log appends, the lobby record, retiring) is checked against the lease in the same atomic step,
and a log append also names the position it expects to take in the log, so a writer with a stale
token or a stale copy of the log changes nothing (:class:`LeaseLost`). A retired table can never
be leased again. Process incarnations let a node restarted under the same id take its previous
process's tables over at once instead of waiting for their leases to lapse.
"""

from __future__ import annotations

import abc
import enum
import secrets
import time
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass

import msgspec

from blackdrez.server.retry import StoreHealth

Handler = Callable[[bytes], None]
Settled = Callable[[bool | BaseException], None]
"""What is told an append's outcome (:meth:`TableLogs.append_soon`): heard, or the error."""
"""A subscriber: called in the event loop with each message published on its channel."""

LOBBY_CHANNEL = "bd:lobby"


def node_channel(node_id: str) -> str:
    """The channel a node listens on for requests and replies addressed to it."""
    return f"bd:node:{node_id}"


def table_channel(table_id: str) -> str:
    """The channel a table's host publishes the table's updates on."""
    return f"bd:t:{{{table_id}}}:updates"


class StoreUnavailable(Exception):
    """The store cannot be reached now; nothing was changed."""


class PartlyRenewed(StoreUnavailable):
    """A renewal (:meth:`Leases.renew`) that reached part of the store only (some masters of a
    Redis Cluster): the leases of ``renewed`` were renewed (``lost``: those of them found
    gone); the others' are unknown, not renewed."""

    def __init__(self, error: BaseException, renewed: set[str], lost: set[str]) -> None:
        super().__init__(str(error))
        self.renewed = renewed
        self.lost = lost


class StoreRefused(Exception):
    """The store answers but refuses what this node asks at start (a Redis database number it
    does not have, a user not allowed the commands): a setting to fix, which waiting would not
    cure. Nothing was changed."""


class LeaseLost(Exception):
    """Fenced out: this process does not hold the table's lease with that token (another node
    hosts it, or the lease lapsed), or the log has moved past the position the write expected.
    The caller must stop hosting the table at once. Nothing was written."""


Share = tuple[int, int]
"""``(i, n)``: the i-th of n disjoint parts of the tables (see :func:`in_share`)."""


BUCKETS = 1024
"""Tables are hashed into this many buckets; a share is a set of whole buckets, so a store can
keep its index of hosted tables per bucket and a node read only its share of it."""


def bucket_of(table_id: str) -> int:
    """The bucket of ``table_id``: a hash of the id."""
    return zlib.crc32(table_id.encode()) % BUCKETS


def share_buckets(share: Share | None) -> range:
    """The buckets of ``share`` (every bucket when it is ``None``): the i-th of every n."""
    if share is None:
        return range(BUCKETS)
    index, count = share
    return range(index, BUCKETS, count)


def in_share(table_id: str, share: Share | None) -> bool:
    """Whether ``table_id`` falls in ``share`` (every table does when it is ``None``): by its
    bucket, so that the n parts are disjoint, cover every table and are about even (exactly
    even when n divides :data:`BUCKETS`; past that many nodes, some have no share)."""
    if share is None:
        return True
    index, count = share
    return bucket_of(table_id) % count == index


class Whereabouts(enum.Enum):
    """Where a table is, as far as the store knows."""

    HOSTED = "hosted"
    """A node holds its lease."""
    MOVING = "moving"
    """It exists but nobody holds its lease now: a node is about to adopt it."""
    CLOSED = "closed"
    """It was retired (its record is kept for a while; it is never hosted again)."""
    UNKNOWN = "unknown"
    """No trace of it (never existed, or retired long ago)."""


@dataclass(frozen=True)
class Location:
    """A table's whereabouts and, when hosted, its host."""

    where: Whereabouts
    node: str | None = None
    incarnation: str | None = None


def holder_value(node_id: str, incarnation: str, token: int) -> str:
    """What a lease key holds: who holds it (node and process) and with which token."""
    return f"{node_id}/{incarnation}/{token}"


def parse_holder(value: str) -> tuple[str, str, int]:
    """``(node id, incarnation, token)`` from a lease value (node ids may contain ``/``)."""
    node_id, incarnation, token = value.rsplit("/", 2)
    return node_id, incarnation, int(token)


class LobbyRecord(msgspec.Struct, frozen=True):
    """A table's lobby record, written in the same step as one of its log entries (see
    :attr:`Append.lobby`): the node hosting it, the record (its encoded ``TableInfo``), whether
    it is listed, and the lobby change to publish on ``channel`` once it is written. (A Struct:
    made for most actions, in a sixth of a frozen dataclass's time.)"""

    node: str
    record: bytes
    listed: bool
    channel: str = ""
    announce: bytes | None = None


class Append(msgspec.Struct, frozen=True):
    """One command for a table's log (:meth:`TableLogs.append`) and what goes out with it.

    ``entry`` becomes the log's entry number ``position`` (1 for the first), written only while
    this process holds the table's lease with ``token`` and the log holds exactly
    ``position - 1`` entries. In the same step ``announce`` (the update the command caused) is
    published on ``channel``, so no update goes out unlogged. ``lobby``: the command changed
    what the lobby shows of the table (its record is replaced and the change published, after
    the entry is logged, never without it). ``logged``: called at most once, as soon as the
    store knows the entry logged (see :meth:`TableLogs.append`)."""

    table_id: str
    token: int
    position: int
    entry: bytes
    channel: str = ""
    announce: bytes | None = None
    lobby: LobbyRecord | None = None
    logged: Callable[[], None] | None = None


class Link:
    """What a bundle's stores share: who this process is, whether other processes share the
    store, and the connection's lifecycle and health."""

    shared: bool = False
    """True when other processes may share this store (so the bus crosses processes)."""

    def __init__(self, node_id: str, incarnation: str | None = None) -> None:
        self.node_id = node_id
        self.incarnation = incarnation or f"{time.time_ns():016x}{secrets.token_hex(2)}"
        """This process's own id: a node restarted under the same id is a new incarnation.
        Incarnations sort by start time (fixed-width hex), so a newer one takes an earlier
        one's leases and never the other way round. A second bundle of the same process (the
        lease renewal thread's) is given the first one's."""
        self.health = StoreHealth(self.ping, f"store ({type(self).__name__})")

    def holder(self, token: int) -> str:
        """The value of a lease this process holds with ``token``."""
        return holder_value(self.node_id, self.incarnation, token)

    async def start(self) -> None:
        """Connect; called once before use."""

    async def close(self) -> None:
        """Disconnect."""

    async def ping(self) -> None:
        """Check that the store answers (raise :class:`StoreUnavailable` if not)."""


class Part(abc.ABC):  # noqa: B024 - every hook is optional
    """What every concern's store may do with its bundle's lifecycle."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Called once, after the link started, before use."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Called once, before the link closes: stop background work, answer what waits."""


class Lobby(Part):
    """Each table's lobby record and the node hosting it; the listed ones make the lobby."""

    @abc.abstractmethod
    async def put(
        self, table_id: str, node_id: str, record: bytes, listed: bool, token: int | None = None
    ) -> None:
        """Create or replace a table's record and note the node hosting it.

        ``listed`` tables appear in :meth:`listed` (public BlackDrez tables). With a ``token``
        the write is fenced: made only while this process holds the table's lease with that
        token, else :class:`LeaseLost` and nothing is written.
        """

    @abc.abstractmethod
    async def get(self, table_id: str) -> tuple[str, bytes] | None:
        """Return ``(hosting node, record)`` for a table, or ``None``."""

    @abc.abstractmethod
    async def remove(self, table_id: str) -> None:
        """Forget a table."""

    @abc.abstractmethod
    async def listed(self) -> list[bytes]:
        """Return the records of every listed table."""

    @abc.abstractmethod
    async def all(self) -> list[tuple[str, str, bytes]]:
        """``(table id, hosting node, record)`` of every table not retired, listed or not, by
        id: the operator's view (it reads every table, so the game's own paths never use it)."""


class Players(Part):
    """Where each player sits, and the order of their connections across nodes."""

    @abc.abstractmethod
    async def add_table(self, player: str, table_id: str) -> None:
        """Note that ``player`` holds a seat at ``table_id`` (the note lives for a bounded time,
        renewed by each note; :meth:`TableLogs.retire` removes it)."""

    @abc.abstractmethod
    async def remove_table(self, player: str, table_id: str) -> None:
        """Forget that ``player`` holds a seat at ``table_id``."""

    @abc.abstractmethod
    async def tables(self, player: str) -> list[str]:
        """Return the tables where ``player`` holds a seat."""

    @abc.abstractmethod
    async def next_attach(self, player: str) -> int:
        """A number greater than every one returned before, to any node sharing this store: it
        orders players' connections across nodes (a player's later connection replaces the
        earlier one, ``Node.claim``) without trusting the nodes' clocks. Noted as ``player``'s
        latest unless a greater one is already (:meth:`latest_attaches`)."""

    @abc.abstractmethod
    async def latest_attaches(self, players: list[str]) -> dict[str, int]:
        """The order of each player's latest connection, as :meth:`next_attach` noted it (for
        a few days after it: a player never noted, or not for that long, is left out)."""


class Presence(Part):
    """Which nodes are alive: each heartbeats with a TTL, as one process (its incarnation)."""

    @abc.abstractmethod
    async def heartbeat(self, ttl: float) -> None:
        """Mark this node alive for ``ttl`` seconds, as this process (its incarnation)."""

    @abc.abstractmethod
    async def live_incarnations(self) -> dict[str, str | None]:
        """Return the nodes whose last heartbeat has not expired, each with the incarnation of
        the process that sent it (``None``: a node of a version that does not say). A node
        restarted under the same id within the TTL never stops heartbeating; its incarnation
        changes (``Routing._viewers_gone``)."""

    async def live_nodes(self) -> set[str]:
        """Return the nodes whose last heartbeat has not expired."""
        return set(await self.live_incarnations())


class Leases(Part):
    """Which node process hosts each table (see "Hosting and fencing" in the module docstring).
    Tokens are the epochs :meth:`acquire` returns."""

    @abc.abstractmethod
    async def acquire(self, table_id: str, ttl: float) -> int | None:
        """Take the table's lease for ``ttl`` seconds and mark the table hosted; return the new
        fencing token, or ``None`` if someone holds the lease or the table was retired.

        A lease held by an earlier incarnation of this node (same node id, an older process) is
        taken over at once: that process is gone, and the new token fences it out anyway."""

    @abc.abstractmethod
    async def renew(self, leases: dict[str, int], ttl: float) -> set[str]:
        """Extend, by ``ttl`` seconds, each lease this process holds with the given token;
        return the ids of those it no longer holds. A lapsed lease is not taken again. Raises
        :class:`StoreUnavailable` when the store cannot be reached, :class:`PartlyRenewed`
        when only part of it could."""

    @abc.abstractmethod
    async def release(self, table_id: str, token: int) -> None:
        """Give the lease up (if held with ``token``) so another node adopts the table."""

    @abc.abstractmethod
    async def adoptable(self, share: Share | None = None, held: Collection[str] = ()) -> list[str]:
        """Tables still hosted (not retired) whose lease nobody holds, or an earlier
        incarnation of this node holds. Forgets the ids of tables that are gone. ``share``
        ``(i, n)``: look only at the hosted tables of share ``i`` of ``n`` (:func:`in_share`).
        ``held``: tables whose lease this process holds and renews, not looked up (no orphans:
        on a node hosting most of its share, looking them up was most of a scan's work)."""

    @abc.abstractmethod
    async def locate(self, table_id: str) -> Location:
        """Where the table is: hosted (by whom), moving, closed or unknown."""


class TableLogs(Part):
    """Each table's command log, its latest snapshot, and the record it leaves when retired.
    Every write is fenced by the table's lease (log positions count from 1, the create
    command)."""

    @abc.abstractmethod
    async def append(self, append: Append) -> bool:
        """Log ``append.entry`` (see :class:`Append`), else :class:`LeaseLost` and nothing is
        written; then, in the same step, publish its announcement, and with ``append.lobby``
        replace the table's lobby record (as a fenced :meth:`Lobby.put` would) and publish
        ``lobby.announce`` on ``lobby.channel``. The set of listed tables is not touched (a
        table is listed, or not, from its first :meth:`Lobby.put` on).

        ``append.logged``, if given, is called at most once, as soon as the store knows the
        entry logged (announced, lobby record written) and only then: never for an append that
        fails, nor for one whose caller has stopped waiting. It may run before the awaiting
        caller resumes (on Redis from the callback that read the reply, an event-loop turn
        sooner), so that the caller's update goes out without waiting for that turn; it must
        not raise. A store that does not call it is correct too: the caller calls it after the
        await.

        Returns whether the announcement may have been heard: False only when the store knows
        that nobody was subscribed to its channel as it was published (a host may then stop
        announcing the table until another node asks for it: ``server.node.hosting``, "Quiet
        tables"); True when it was, when the store cannot tell, and when nothing was
        announced."""

    appends_soon = False
    """Whether :meth:`append_soon` takes appends (else only :meth:`append`)."""

    def append_soon(self, append: Append, settled: Callable[[bool | BaseException], None]) -> None:
        """:meth:`append`, not awaited: ``settled`` is called once with what :meth:`append`
        would return (heard) or raise (:class:`LeaseLost`, :class:`StoreUnavailable`...), from
        the callback that learns it (on Redis, the one that read the group commit's reply), and
        must not raise. For a store whose :attr:`appends_soon` is true: a caller that would
        only await the append saves the event-loop turn its coroutine resumes in
        (``blackdrez.server.node.hosting``: an action). ``append.logged`` is not called."""
        raise NotImplementedError(f"{type(self).__name__} takes appends only awaited")

    @abc.abstractmethod
    async def read(self, table_id: str, after: int = 0, *, held: bool = False) -> list[bytes]:
        """The table's log from entry ``after + 1`` on (the whole log by default), oldest
        first. ``held``: the caller holds the table's lease, so nothing else retires the log
        meanwhile, and a long one may be read in parts (the other tables' work goes between
        them); else in one step."""

    @abc.abstractmethod
    async def read_last(self, table_id: str, count: int) -> tuple[int, list[bytes]]:
        """How many entries the table's log holds, and its last ``count`` of them, oldest
        first (an operator's look at a table: a long-lived table's whole log, read to show its
        end, held up the node's other tables while it was parsed)."""

    @abc.abstractmethod
    async def put_snapshot(self, table_id: str, token: int, position: int, data: bytes) -> None:
        """Keep ``data``, the table's room just after its log entry ``position``, in place of an
        earlier snapshot (a later one stays), only while this process holds the lease with
        ``token`` (else :class:`LeaseLost`, nothing written). See
        :mod:`blackdrez.server.table.snapshots`."""

    @abc.abstractmethod
    async def read_snapshot(self, table_id: str) -> tuple[int, bytes] | None:
        """The table's latest snapshot (its log position and data), if any."""

    @abc.abstractmethod
    async def retire(
        self, table_id: str, token: int, record: bytes, keep: float, players: Iterable[str] = ()
    ) -> None:
        """The table is closed, for good (fenced like :meth:`append`): its log and snapshot
        are replaced by ``record`` (its compact game record, kept ``keep`` seconds), its lease
        and lobby record go, ``players`` no longer sit there, and it can never be leased
        again."""

    @abc.abstractmethod
    async def game_record(self, table_id: str) -> bytes | None:
        """The compact record a retired table left, while it is kept."""


class Leaderboards(Part):
    """The solitaires' best scores, one entry per player and board, and the records of the
    ranked games the entries link to."""

    @abc.abstractmethod
    async def submit(self, board: str, player: str, entry: bytes, score: int) -> bool:
        """Record a finished solitaire score on ``board``; a player's entry there keeps their
        best score, with ``entry`` (opaque: what the board shows) from the game that made it.
        Whether ``entry`` is the player's entry there now (placed now, or by an earlier try of
        the same submission)."""

    @abc.abstractmethod
    async def top(self, board: str, limit: int) -> list[tuple[str, bytes, int]]:
        """Return up to ``limit`` ``(player, entry, score)``, best first (ties: earlier first)."""

    @abc.abstractmethod
    async def keep_record(self, game_id: str, data: bytes, ttl: float | None = None) -> None:
        """Keep a ranked game's record (leaderboard entries link to it): for ``ttl`` seconds,
        or for good (``None``; keeping it again for good ends an earlier TTL)."""

    @abc.abstractmethod
    async def kept_record(self, game_id: str) -> bytes | None:
        """A record kept by :meth:`keep_record`, or ``None``."""


class DailyDeals(Part):
    """Each game's daily deal: its seed, the same for every node, and who started it where."""

    @abc.abstractmethod
    async def seed(self, game: str, day: str, candidate: str | None) -> str | None:
        """The seed of ``game``'s daily deal of ``day``: ``candidate`` if the day had none yet
        (it is kept for good), else the one kept. The same for every node. Without a candidate,
        only the one kept (``None`` if none was dealt)."""

    @abc.abstractmethod
    async def claim(self, game: str, day: str, player: str, table: str, keep: float) -> str | None:
        """Note that ``player`` starts ``game``'s daily deal of ``day`` at ``table``: the table
        of the player's ranked session of that deal, ``table`` itself the first time (that
        session is ranked), the first one's after. The caller holds ``table``'s lease already,
        so that whoever reads the claim finds its table hosted from that instant (whether its
        game still runs is read from the table: the claim is only a reference). ``None``: the
        first claim named no table (a node of an older version made it). The deal's claims are
        kept ``keep`` seconds from this one (the caller: until a day after ``day`` ends, when
        no session of that deal can start any more), then forgotten."""

    @abc.abstractmethod
    async def table(self, game: str, day: str, player: str) -> str | None:
        """The table of ``player``'s ranked session of ``game``'s daily deal of ``day``, as
        :meth:`claim` noted it, without claiming (``None``: none noted)."""


class Tokens(Part):
    """The tokens nodes hand out and count together: the secret that signs session tokens, the
    session tokens ended early, and the rate limits' token buckets."""

    @abc.abstractmethod
    async def shared_secret(self, proposed: bytes) -> bytes:
        """Return the secret all nodes sign tokens with: ``proposed`` if none was set before.
        The node's first call to the store: :class:`StoreRefused` if it refuses this node."""

    async def restore_secret(self, secret: bytes) -> bytes | None:
        """Write ``secret`` back unless the store holds one; return what it held before
        (``None``: nothing, the store lost its data). Called by a node whose store came back,
        so that the nodes that hold the secret write it before a new node makes another. A
        store that cannot lose its data while the node runs (in memory) holds it still."""
        return secret

    @abc.abstractmethod
    async def revoke(self, token_id: str, ttl: float) -> None:
        """Remember for ``ttl`` seconds (the token's remaining lifetime) that the token is
        ended."""

    @abc.abstractmethod
    async def revoked(self, token_id: str) -> bool:
        """Whether the token was revoked (and would not have expired yet)."""

    @abc.abstractmethod
    async def take(self, kind: str, key: str, rate: float, burst: int) -> float:
        """Spend a token of ``key``'s bucket for ``kind`` (``rate`` a second, ``burst`` at
        most), one bucket for every node sharing this store: 0 if there was one, else the
        seconds until there is (nothing spent). A lone node (``Link.shared`` false) keeps its
        buckets itself."""


class Reports(Part):
    """The chat lines players reported, for the operators (the admin view): each report kept
    ``keep`` seconds from when it was filed (``at``, wall-clock seconds), the newest
    :data:`REPORTS_KEPT` at most."""

    @abc.abstractmethod
    async def add(self, report: bytes, at: float, keep: float) -> None:
        """File ``report`` (its encoding is the caller's: unique, it carries an id), filed at
        ``at``; reports filed more than ``keep`` seconds before it are forgotten."""

    @abc.abstractmethod
    async def recent(self, limit: int) -> list[bytes]:
        """The last ``limit`` reports filed, the newest first."""


REPORTS_KEPT = 10_000
"""Reports kept at most (the oldest go first)."""


MATCH_CHANNEL = "bd:mm:found"
"""Where :meth:`Matchmaking.place` announces each table the queue made (every node listens, and
tells the players connected to it)."""


class Matchmaking(Part):
    """The matchmaking queue every node shares: one ticket per player (opaque: the node's
    encoding), alive until its expiry (wall-clock seconds) unless refreshed, and the matcher's
    lease: the one process at a time that pairs the tickets and makes their tables."""

    @abc.abstractmethod
    async def enter(self, player: str, ticket: bytes, expires: float) -> None:
        """Queue ``player`` with ``ticket`` until ``expires``, in place of a ticket they hold."""

    @abc.abstractmethod
    async def ticket(self, player: str, now: float) -> bytes | None:
        """``player``'s ticket, unless none is queued or it expired before ``now``."""

    @abc.abstractmethod
    async def leave(self, player: str) -> None:
        """Take ``player``'s ticket out of the queue (none: nothing)."""

    @abc.abstractmethod
    async def refresh(self, players: Collection[str], expires: float) -> None:
        """Keep the queued tickets of ``players`` until ``expires`` (the others: nothing)."""

    @abc.abstractmethod
    async def waiting(self, now: float) -> list[bytes]:
        """Every ticket queued and not expired at ``now`` (the expired ones are dropped)."""

    @abc.abstractmethod
    async def lead(self, ttl: float) -> int | None:
        """Take the matcher's lease for ``ttl`` seconds, or extend it if this process holds it
        already: its token (the same while it is held), or ``None`` while another holds it."""

    @abc.abstractmethod
    async def place(self, token: int, players: Sequence[str], found: bytes) -> bool:
        """Take a made table's ``players`` out of the queue and publish ``found`` on
        :data:`MATCH_CHANNEL`, in one step, if every one of them is still queued: else nothing
        changes and False. Fenced: :class:`LeaseLost` unless this process holds the matcher's
        lease with ``token``."""


def arena_channel(arena: str) -> str:
    """Where an arena's standings changes are announced (its id, on every change)."""
    return f"bd:a:{{{arena}}}:changes"


class Arenas(Part):
    """The arenas (tournaments): each one's description, its players' standings (one opaque
    entry per player) and the games it scored, kept ``keep`` seconds after it ends; the public
    ones listed."""

    @abc.abstractmethod
    async def create(self, arena: str, info: bytes, ends: float, listed: bool, keep: float) -> None:
        """Keep an arena's ``info`` (wall-clock ``ends``); ``listed``: in :meth:`listed`."""

    @abc.abstractmethod
    async def info(self, arena: str) -> bytes | None:
        """The arena's info, unless it is unknown or forgotten."""

    @abc.abstractmethod
    async def listed(self, since: float) -> list[bytes]:
        """The listed arenas that end at ``since`` or later, by when they end."""

    @abc.abstractmethod
    async def standings(self, arena: str) -> dict[str, bytes]:
        """Each player's standing in the arena."""

    @abc.abstractmethod
    async def update(
        self, arena: str, changes: dict[str, tuple[bytes | None, bytes]], game: str | None
    ) -> int:
        """In one step: if every player's standing in ``changes`` is still the first of its
        pair (``None``: they have none) and, with ``game``, that game was not scored in this
        arena yet, write each the second, note the game scored, announce the change on
        :func:`arena_channel`, and return 1. Else nothing changes: 0 when a standing differs
        (read them again), -1 when the game was scored already."""


class Social(Part):
    """Who follows and who blocks whom (each player's lists, with the names they had then),
    where each connected player is now (a status each node writes for its connections, with a
    TTL), and the challenges waiting for an answer (with a TTL)."""

    @abc.abstractmethod
    async def follow(self, player: str, other: str, name: str) -> None:
        """``player`` follows ``other`` (shown as ``name``)."""

    @abc.abstractmethod
    async def unfollow(self, player: str, other: str) -> None:
        """``player`` no longer follows ``other``."""

    @abc.abstractmethod
    async def following(self, player: str) -> dict[str, str]:
        """Whom ``player`` follows, with their names."""

    @abc.abstractmethod
    async def block(self, player: str, other: str, name: str) -> None:
        """``player`` blocks ``other`` (and no longer follows them)."""

    @abc.abstractmethod
    async def unblock(self, player: str, other: str) -> None:
        """``player`` no longer blocks ``other``."""

    @abc.abstractmethod
    async def blocked(self, player: str) -> dict[str, str]:
        """Whom ``player`` blocks, with their names."""

    @abc.abstractmethod
    async def seen(self, statuses: dict[str, bytes], ttl: float) -> None:
        """Note each player's status (opaque) for ``ttl`` seconds."""

    @abc.abstractmethod
    async def gone(self, player: str) -> None:
        """``player``'s connection closed: no status for them any more."""

    @abc.abstractmethod
    async def statuses(self, players: Collection[str]) -> dict[str, bytes]:
        """The status of each of ``players`` who has one (the others are offline)."""

    @abc.abstractmethod
    async def put_challenge(self, challenge: str, data: bytes, ttl: float) -> None:
        """Keep a challenge ``ttl`` seconds, until it is taken."""

    @abc.abstractmethod
    async def take_challenge(self, challenge: str) -> bytes | None:
        """The challenge, taken out in the same step (an answer takes it once): ``None`` if it
        expired, was taken, or never was."""


class Bus(Part):
    """Publish/subscribe between the nodes sharing the store (within the process in memory)."""

    on_recovered: Callable[[], None] | None = None
    """Called when the bus is back after an outage, every channel subscribed again: messages
    sent meanwhile are lost, those sent from now on are heard."""

    @abc.abstractmethod
    async def publish(self, channel: str, data: bytes) -> None:
        """Send ``data`` to every subscriber of ``channel`` in every node."""

    @abc.abstractmethod
    async def subscribe(self, channel: str, handler: Handler) -> None:
        """Call ``handler`` with each message published on ``channel`` from now on."""

    @abc.abstractmethod
    async def unsubscribe(self, channel: str, handler: Handler) -> None:
        """Stop calling ``handler`` for ``channel``."""


@dataclass(frozen=True, slots=True)
class Stores:
    """One store per concern over one :class:`Link`: what the runtime receives (see the module
    docstring). Starting the bundle starts the link, then each store; closing it closes each
    store, then the link."""

    link: Link
    lobby: Lobby
    players: Players
    presence: Presence
    leases: Leases
    logs: TableLogs
    leaderboards: Leaderboards
    daily: DailyDeals
    tokens: Tokens
    bus: Bus
    reports: Reports
    matchmaking: Matchmaking
    arenas: Arenas
    social: Social

    @property
    def node_id(self) -> str:
        """The node these stores serve."""
        return self.link.node_id

    @property
    def incarnation(self) -> str:
        """This process's incarnation (see :attr:`Link.incarnation`)."""
        return self.link.incarnation

    @property
    def health(self) -> StoreHealth:
        """Whether the store answers now: every store of the bundle reports to it."""
        return self.link.health

    @property
    def shared(self) -> bool:
        """True when other processes may share this store (:attr:`Link.shared`)."""
        return self.link.shared

    def _parts(self) -> Iterator[Part]:
        """Each store once (one object may serve two concerns), in the bundle's order."""
        seen: set[int] = set()
        for part in (
            self.lobby,
            self.players,
            self.presence,
            self.leases,
            self.logs,
            self.leaderboards,
            self.daily,
            self.tokens,
            self.bus,
            self.reports,
            self.matchmaking,
            self.arenas,
            self.social,
        ):
            if id(part) not in seen:
                seen.add(id(part))
                yield part

    async def start(self) -> None:
        """Connect; called once before use."""
        await self.link.start()
        for part in self._parts():
            await part.start()

    async def close(self) -> None:
        """Stop every store's background work, then disconnect."""
        for part in reversed(list(self._parts())):
            await part.close()
        await self.link.close()

    async def ping(self) -> None:
        """Check that the store answers (raise :class:`StoreUnavailable` if not)."""
        await self.link.ping()
