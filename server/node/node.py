"""The Node: one server process's share of the game world, wired from its parts.

Theory of operation
-------------------
:class:`Node` holds the state every part shares (hosted rooms, leases, watchers, connections,
timers, the outbox) and runs the node's periodic work (the bus subscriptions, heartbeat, lease
renewals, orphan scans, the sweeper for rooms that should close). Everything else is in the
mixins it is made of: hosting, routing, failover, fan-out and lobby (see ``blackdrez.server.node``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import Any, Protocol

from blackdrez.games.shuffle import new_seed
from blackdrez.protocol import v1
from blackdrez.protocol.errors import CloseCode, ErrorCode
from blackdrez.server import bus
from blackdrez.server.connection import OLDEST, Connection, Watch
from blackdrez.server.hints import HintWorker
from blackdrez.server.metrics import Metrics
from blackdrez.server.node.failover import Failover
from blackdrez.server.node.fanout import Fanout
from blackdrez.server.node.hosting import (
    HINT_BURST,
    HINT_RATE,
    RENEWALS,
    Hosting,
    Lease,
    Publication,
    RatingsWanted,
    TableLock,
)
from blackdrez.server.node.lobby import Lobby
from blackdrez.server.node.routing import Routing, error_answer
from blackdrez.server.ratelimit import TokenBucket
from blackdrez.server.stores import LeaseLost, Store, StoreUnavailable
from blackdrez.server.stores.base import node_channel
from blackdrez.server.table.commands import (
    Answer,
)
from blackdrez.server.table.room import Broadcast, GameOver, Room
from blackdrez.server.tasks import cancel_until_done

log = logging.getLogger("blackdrez.node")

LEASE_TTL = 1.0
"""Seconds a table's lease lasts unless its host renews it: a killed node's tables are adopted
about this long after the kill. Fencing (tokens checked by every write) makes a short lease safe;
what bounds it from below is the longest stall a live node must survive without losing its
tables (see RENEWALS), and work done on the event loop when leases are renewed in the loop (the
in-memory store): which is why hints and pars are computed in worker processes
(``blackdrez.server.hints``)."""

SOLE_LEASE_TTL = 30.0
"""The lease of a node whose store no other node shares (the in-memory store), unless set: no
other node can take its tables, so a lease lapsing after a stall (a loaded machine, a long
collection) would only make the node drop its own tables and adopt them again from its log, while
their players are told ``moving``."""

RECORD_RETENTION = 24 * 3600.0
"""Seconds a closed table's game record stays in the store (for audits and replays)."""

SWEEP_INTERVAL = 5.0
"""Seconds between sweeps for rooms that should be closed (see ``Room.should_close``)."""


class GameRecords(Protocol):
    """The records of finished games (``blackdrez.server.records.writer.RecordsWriter``)."""

    def submit(self, games: Iterable[GameOver]) -> None:
        """Queue games whose end is logged, to be stored (again, after a failover: harmless)."""

    async def written(self, table: str) -> bool:
        """Wait (bounded) until the table's submitted games are stored."""

    async def seat_ratings(self, game: str, players: list[str]) -> dict[str, v1.SeatRating]:
        """The current rating in ``game`` of each of ``players`` (the initial one for a player
        not rated yet)."""


TokenGenerations = Callable[[list[str]], Awaitable[dict[str, int]]]
"""The current token generation of each of these players who has an account."""


NOT_REPEATABLE = (v1.Act, v1.Undo, v1.AddBots)
"""Requests that change a table again each time they run: one forwarded to the table's node and
left unanswered closes its connection (4008) rather than answer an error that says nothing
changed (the others are harmless to send again: a second ``join`` or ``ready`` changes nothing)."""


class Node(Hosting, Routing, Failover, Fanout, Lobby):
    """One server process's share of the game world (see ``blackdrez.server.node``)."""

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
        hints: HintWorker | None = None,
        hint_rate: float = HINT_RATE,
        hint_burst: int = HINT_BURST,
    ) -> None:
        self.store = store
        self.id = store.node_id
        self.metrics = metrics
        self.seed_source = seed_source
        self.clock = clock
        self.lease_ttl = lease_ttl
        self.record_retention = record_retention
        self.stopping = False
        self.hints = hints if hints is not None else HintWorker()
        """Computes hints and pars off the event loop (``blackdrez.server.hints``)."""
        self.hint_rate = hint_rate
        self.hint_burst = hint_burst
        self._hint_buckets: dict[str, TokenBucket] = {}
        """Per hosted table, its hints' rate limit (made at its first hint)."""
        self._pars: set[tuple[str, int]] = set()
        """``(table, game)`` whose par the worker is finding."""
        self._ratings_wanted: dict[str, RatingsWanted] = {}
        """Per rated table whose players' ratings are being read, what its reader must do next."""
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
        self._command_logs: dict[str, list[bytes]] = {}
        """Per hosted room, its log as written: what a failed write is undone from."""
        self._snapshots: dict[str, tuple[int, bytes]] = {}
        """Per hosted room, its latest snapshot: the entry it was taken at, and its bytes."""
        self._leases: dict[str, Lease] = {}
        """Per hosted room (and room being retired), the lease this node holds."""
        self._closing: set[str] = set()
        """Tables closed here whose retirement is not yet written: ``not_found`` already."""
        self._locks: dict[str, TableLock] = {}
        """The lock of each table a command runs or waits at (``Hosting._lock``)."""
        self.watchers: dict[str, dict[Connection, Watch]] = {}
        self.lobby_watchers: set[Connection] = set()
        self._lobby_heard = False
        """Subscribed to the lobby channel: only while someone here watches the lobby (and
        :data:`LOBBY_LINGER` seconds after), as every listed table's changes come that way."""
        self._lobby_subscribing = asyncio.Lock()
        self._lobby_linger: asyncio.Task[None] | None = None
        """Waiting to unsubscribe from the lobby channel (the last lobby watcher left)."""
        self.clients: dict[str, Connection] = {}
        self._timers: dict[str, asyncio.TimerHandle | asyncio.Task[None]] = {}
        """At most one pending timer per hosted room (a timer, or a wait for the store)."""
        self._retry_at: dict[str, tuple[float, Iterator[float]]] = {}
        """Rooms whose last timer write failed: not before when to try again, and the backoff."""
        self._tables_asked = 0
        """Requests forwarded here for tables, counted ("Quiet tables" in ``hosting``)."""
        self._viewed_from: dict[str, dict[str, tuple[str, str | None]]] = {}
        """Per hosted table, the node each player's last request for it came through, and that
        node's process (incarnation): when that node stops heartbeating, or heartbeats as
        another process, its players are away (``Routing._viewers_gone``)."""
        self._outbox: asyncio.Queue[Publication] = asyncio.Queue()
        self._pending: dict[int, asyncio.Future[Answer]] = {}
        self._forwarded: dict[int, str] = {}
        """The node each pending forwarded request went to."""
        self._silent: set[str] = set()
        """Nodes seen to stop heartbeating (until they do again): their tables' requests are
        answered ``moving`` here rather than forwarded to a node that is likely dead."""
        self._live: set[str] | None = None
        """The nodes heartbeating at the last orphan scan or routing miss (``None`` before the
        first scan): a table whose lease names a node that is not is answered ``moving`` here,
        not forwarded to a node that would never answer."""
        self._rids = itertools.count(1)
        self._remote_tables: dict[str, collections.deque[Broadcast]] = {}
        """Tables hosted elsewhere that this node follows, with their last few updates."""
        self._tasks: list[asyncio.Task[None]] = []
        self._spawned: set[asyncio.Task[Any]] = set()
        """One-off tasks, kept until done so none is lost and every failure is logged."""
        self.spawn_bot: Callable[[str, str, str | None, str], str] | None = None
        """Starts one bot client ``(table, strategy, invite, name)`` and returns the player id
        it will sit down as (set by the server, which knows its own address and signs the
        bot's session token)."""
        self._bots_named: dict[str, int] = {}
        """Per hosted table, how many bots were named so far (see ``_add_bots``)."""
        self._bots_coming: dict[str, dict[str, float]] = {}
        """Per table, the player id of each bot the host added and not seated yet, and until
        when it holds a seat (see ``Lobby._add_bots``)."""
        self.records: GameRecords | None = None
        """Where finished games go once their log entry is written (set by the server when it
        keeps records: ``blackdrez.server.records.writer``)."""
        self.token_generations: TokenGenerations | None = None
        """Reads accounts' current token generations (set by the server when it keeps records:
        ``RecordsStore.token_generations``): what a node whose bus was down checks its
        connections against (``_close_signed_out_meanwhile``)."""

    async def start(self) -> None:
        """Subscribe to this node's channels, start the background work, and take over at once
        the tables an earlier process of this node left (same node id)."""
        self.store.on_bus_recovered = self._on_bus_recovered
        self.store.health.listeners.append(self._on_store_back)
        await self.store.subscribe(node_channel(self.id), self._on_node_message)
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
        for task in self._tasks[1:]:  # all but the outbox's drain, which goes on to the end
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
                        self._publish_change(room)
        if handed_over:
            with contextlib.suppress(StoreUnavailable):
                await self.store.publish(
                    bus.HANDOVER_CHANNEL, bus.encode(bus.Handover(node=self.id))
                )
        await self._settled()
        if self._renewer is not None:
            self._stop_renewing.set()
            self._renew_wake.set()
            await asyncio.to_thread(self._renewer.join, 5.0)
        await cancel_until_done([*self._tasks, *self._spawned])
        self.hints.close()

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
        while not self.stopping:
            await asyncio.sleep(SWEEP_INTERVAL)
            now = self.clock()
            for room in [r for r in self.rooms.values() if r.should_close(now)]:
                await self._tick(room)

    async def _heartbeat(self) -> None:
        """Tell the other nodes this one is alive (they look for orphans when one goes).

        After a store outage the node may have dropped out of the live nodes, and the news the
        others sent only to live nodes meanwhile (a sign-out, a replacement) never reached it,
        even with its bus up: once its first heartbeat after the outage is written (so that
        whatever is sent from then on reaches it) it reads what it missed, as after a bus
        outage."""
        outages = self.store.health.outages
        while not self.stopping:
            await self.store.health.wait_up()
            with contextlib.suppress(StoreUnavailable):
                sent = time.perf_counter()
                await self.store.heartbeat(self.lease_ttl)
                self.metrics.store_rtt.observe(time.perf_counter() - sent)
                if self.store.health.outages != outages:
                    outages = self.store.health.outages
                    self._spawn(self._close_signed_out_meanwhile())
                    self._spawn(self._close_replaced_meanwhile())
            await asyncio.sleep(self.lease_ttl / RENEWALS)

    def _on_store_back(self) -> None:
        """The store answers again: renew leases and look for orphans now, not at the next
        period (every lease may have lapsed meanwhile)."""
        self._renew_now.set()
        self._renew_wake.set()
        self._scan_soon()

    def attach(self, client: Connection) -> Connection | None:
        """Register a greeted client; return the older connection of the same player, if any."""
        older = self.clients.get(client.player)
        self.clients[client.player] = client
        self.metrics.connections.set(len(self.clients))
        return older

    def close_signed_out(self, player: str, generation: int) -> None:
        """Close ``player``'s connection here if its token is older than ``generation`` (the
        account signed out everywhere; the connection that asked has the new token)."""
        client = self.clients.get(player)
        if client is not None and client.token.generation < generation:
            client.close(CloseCode.SIGNED_OUT, "signed out everywhere")

    def _on_bus_recovered(self) -> None:
        super()._on_bus_recovered()
        self._spawn(self._close_signed_out_meanwhile())
        self._spawn(self._close_replaced_meanwhile())

    async def _close_replaced_meanwhile(self) -> None:
        """After a bus outage: a ``Replaced`` published meanwhile was lost, so read the order of
        each connected player's latest connection and close those here that are older (the
        bus is subscribed again: a replacement after this read is heard)."""
        if not self.store.shared:
            return
        ordered = [c for c in self.clients.values() if c.order is not None]
        if not ordered:
            return
        try:
            latest = await self.store.latest_attaches([client.player for client in ordered])
            for client in ordered:
                newer, order = latest.get(client.player), client.order
                if newer is None or order is None or newer <= order:
                    continue
                if self.clients.get(client.player) is client and not client.closing:
                    _replaced_elsewhere(client, await self.store.player_tables(client.player))
        except StoreUnavailable:
            log.warning("bus back: players' newer connections elsewhere could not be checked")

    async def _close_signed_out_meanwhile(self) -> None:
        """After a bus outage: a ``SignedOut`` published meanwhile was lost, so read the token
        generation of every account connected here and close the connections on older tokens
        (the bus is subscribed again: a sign-out after this read is heard)."""
        if self.token_generations is None:
            return
        players = [client.player for client in self.clients.values() if client.token.generation]
        if not players:
            return
        try:
            generations = await self.token_generations(players)
        except Exception:  # the database's own errors: the tokens are refused at next hello
            log.warning("bus back: the accounts' sign-outs could not be checked", exc_info=True)
            return
        for player, generation in generations.items():
            self.close_signed_out(player, generation)

    async def sign_out_everywhere(self, player: str, generation: int) -> None:
        """Close the account's connections with older tokens, here and on every live node (a
        node of an older version drops the message: its connections stay open, but their
        tokens are refused at their next hello). Raises :class:`StoreUnavailable`."""
        self.close_signed_out(player, generation)
        await self._tell_other_nodes(bus.SignedOut(player=player, generation=generation))

    async def claim(self, client: Connection) -> None:
        """Make a greeted ``client`` its player's one connection across the nodes sharing the
        store (on this node :meth:`attach` did): the store orders it after every earlier one,
        and every other node closes the player's connection there if it is older, so of two
        hellos at once on two nodes the later in the store's order stays, whichever message
        arrives first. The tables where the player is seated are left to ``client`` until it
        watches them, as after a replacement on this node; the older connection's close does
        not count the player away there. Alone on its store (in memory) a node has nothing to
        do, nor has a new identity's first connection (its order is ``OLDEST`` already).
        Raises :class:`StoreUnavailable`: the other connections then stay open, and this one
        is ordered ``OLDEST`` (the player's next connection anywhere replaces it)."""
        if not self.store.shared or client.order is not None:
            return
        try:
            order = await self.store.next_attach(client.player)
        except StoreUnavailable:
            _ordered(client, OLDEST)
            raise
        _ordered(client, order)
        for table in client.seated:
            if table not in client.tables:
                client.left_to_me.setdefault(table, True)
        if client.closing:
            return  # replaced already: the newer connection tells the other nodes
        replaced = bus.Replaced(player=client.player, order=order, seated=client.seated)
        await self._tell_other_nodes(replaced)

    async def _tell_other_nodes(self, message: bus.BusMessage) -> None:
        """Publish ``message`` on every other live node's channel (a node of an older version
        drops a type it does not know). Raises :class:`StoreUnavailable`."""
        data = bus.encode(message)
        for node in await self.store.live_nodes() - {self.id}:
            await self.store.publish(node_channel(node), data)

    def close_replaced(self, player: str, order: int, seated: list[str]) -> None:
        """``player`` connected on another node, as number ``order``, seated at ``seated``:
        close their connection here if it is older (one whose order the store has not given yet
        is closed once it has, if it is older then: :meth:`claim`)."""
        client = self.clients.get(player)
        if client is None:
            return
        if client.order is None:
            if client.outranked is None or client.outranked[0] < order:
                client.outranked = (order, seated)
        elif client.order < order:
            _replaced_elsewhere(client, seated)

    async def detach(self, client: Connection) -> None:
        """Forget a closed client: its tables learn that the player is away. A newer connection
        of the same player (it replaced this one) answers for them instead, those it watches and
        those it was left (:attr:`Connection.left_to_me`) until it watches them."""
        if self.clients.get(client.player) is client:
            del self.clients[client.player]
        self.metrics.connections.set(len(self.clients))
        self._stop_watching_lobby(client)
        held = {table: watch.seat is not None for table, watch in client.tables.items()}
        held |= {t: seated for t, seated in client.left_to_me.items() if t not in held}
        for table, seated in held.items():
            if table in client.tables:
                await self._unwatch(client, table)
            if self.stopping:
                continue  # handed over (the new host counts everyone away)
            if seated and table in client.answered_elsewhere:
                continue  # the player's newer connection on another node answers for the seat
            newer = self.clients.get(client.player)
            if newer is not None:  # back already: the newer connection answers for the table
                if table not in newer.tables:  # until it watches it (it may never)
                    newer.left_to_me.setdefault(table, seated)
                continue
            await self._gone_away(client.player, client.name, table, seated=seated)

    async def handle(self, client: Connection, message: Any) -> None:
        """Serve one decoded request from ``client``."""
        try:
            answer = await self._dispatch(client, message)
        except StoreUnavailable as error:
            log.debug("%s failed, the store is unavailable: %s", type(message).__name__, error)
            answer = error_answer(
                message, ErrorCode.UNAVAILABLE, "the lobby store cannot be reached"
            )
        except LeaseLost as error:
            # A new table's lease lapsed before it was written (the store was too slow): the
            # table never existed for anyone; the next try makes another.
            log.debug("%s failed, a lease lapsed meanwhile: %s", type(message).__name__, error)
            answer = error_answer(
                message, ErrorCode.UNAVAILABLE, "the store answered too late: retry"
            )
        except TimeoutError:
            if isinstance(message, NOT_REPEATABLE):
                # Forwarded, and no answer came: the table's node may have run it, and an error
                # (nothing changed) would have the player play it again. A lost connection says
                # "unknown": the client reconnects and resyncs, and sees.
                client.close(CloseCode.NO_ANSWER, "the table's node did not answer: resync")
                return
            answer = error_answer(message, ErrorCode.UNAVAILABLE, "the table's node did not answer")
        except Exception:
            log.exception("request %r failed", message)
            answer = error_answer(message, ErrorCode.INTERNAL, "the server failed on this request")
        await self._deliver_answer(client, answer)

    async def _deliver_answer(self, client: Connection, answer: Answer) -> None:
        """Send an answer's replies; start (or stop) the requester's watch of its table. The
        watch starts at the answer's event, before the replies go (no update of a table hosted
        here can come between), and the updates of a remote table this node already holds past
        that event follow the replies: a client never gets an update before the older answer
        it asked for."""
        watch = None
        if answer.watch is not None:
            table, seat, seq = answer.watch
            if client.closing:  # gone while a catch-up was being answered: nothing to watch
                await self._unfollow_if_unwatched(table)
            else:
                watch = self._start_watch(client, table, seat, seq)
        for reply in answer.replies:
            if isinstance(reply, v1.Error):
                self.metrics.errors.labels(reply.code).inc()
            client.send(reply)
        if watch is not None:
            await self._catch_up_watch(client, table, watch)
        if answer.unwatch is not None:
            await self._unwatch(client, answer.unwatch)


def _ordered(client: Connection, order: int) -> None:
    """Give ``client`` its ``order``, and close it if a newer connection of its player on
    another node was heard of while the order was not known (``Node.close_replaced``)."""
    client.order = order
    if client.outranked is not None and client.outranked[0] > order:
        _replaced_elsewhere(client, client.outranked[1])


def _replaced_elsewhere(client: Connection, seated: list[str]) -> None:
    """Close ``client``: its player's newer connection on another node is the live one, and
    answers for the tables where it found them seated."""
    client.answered_elsewhere = frozenset(seated)
    client.close(CloseCode.REPLACED, "you connected again elsewhere")
